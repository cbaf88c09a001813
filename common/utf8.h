/*
 * utf8.h — UTF-8 validity (RFC 3629: no overlong forms, no surrogates,
 * nothing past U+10FFFF), and escaping bytes that are not UTF-8 so that
 * text quoting a client's input can always go into a JSON string.
 */
#ifndef PERCOLATOR_UTF8_H
#define PERCOLATOR_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the valid UTF-8 character at s (1..4), or 0 if the bytes there
 * are not one (len > 0). */
size_t utf8_char_len(const unsigned char *s, size_t len);

/* Whether p[0..len) is all valid UTF-8. */
bool utf8_valid(const void *p, size_t len);

/* Copy the NUL-terminated src into dst (cap bytes, cap > 0), each byte that
 * is not part of a valid character written as the four characters "\xNN".
 * Stops before a character or escape that would not fit: dst is always
 * NUL-terminated and valid UTF-8. Returns the length written. */
size_t utf8_escape(const char *src, char *dst, size_t cap);

#endif
