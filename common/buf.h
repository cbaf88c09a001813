/*
 * buf.h — a growable byte buffer.
 *
 * Used to accumulate request bodies, render /metrics text and collect HTTP
 * replies in the tests. The contents are always NUL-terminated (the NUL is not
 * counted in len) so a buffer of text can be handed to printf-style code.
 * Every append reports failure instead of aborting: callers turn it into an
 * error reply.
 */
#ifndef PERCOLATOR_BUF_H
#define PERCOLATOR_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct buf {
    char *data;  /* NULL until the first append; NUL-terminated after it */
    size_t len;  /* bytes used, not counting the trailing NUL */
    size_t cap;  /* bytes allocated */
} buf;

#define BUF_INIT {NULL, 0, 0}

/* Make room for at least `extra` more bytes. 0 or -1 (out of memory/overflow). */
int buf_reserve(buf *b, size_t extra);
/* Append `n` bytes. 0 or -1. */
int buf_append(buf *b, const void *p, size_t n);
/* Append a C string. 0 or -1. */
int buf_puts(buf *b, const char *s);
/* Append printf-formatted text. 0 or -1. */
int buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(buf *b, const char *fmt, va_list ap);
/* Forget the contents, keep the memory. */
void buf_reset(buf *b);
/* Hand the memory to the caller (who frees it); the buffer becomes empty.
 * Returns an allocated empty string when nothing was appended, NULL if out of
 * memory. */
char *buf_take(buf *b, size_t *len);
/* Free the memory; the buffer becomes empty and reusable. */
void buf_free(buf *b);

#endif
