/*
 * text.c — the bytes the client sends and prints: percent-encoding of keys
 * in paths and queries, bounded reads of stdin.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

/* Every other byte, '/' included, becomes %XX: a key can never add a path
 * segment or a query parameter. */
int cli_pct_append(buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
        int rc = unreserved(*p) ? buf_append(b, p, 1) : buf_append(b, e, 3);
        if (rc != 0)
            return -1;
    }
    return 0;
}

char *cli_read_stdin(size_t max, size_t *len)
{
    FILE *f = stdin;
    const char *what = "stdin";
    buf b = BUF_INIT;
    char chunk[65536];
    size_t n;
    if (buf_reserve(&b, 0) != 0)
        goto oom;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.len + n > max) {
            fprintf(stderr, "percolator: %s is larger than %zu bytes\n", what, max);
            buf_free(&b);
            return NULL;
        }
        if (buf_append(&b, chunk, n) != 0)
            goto oom;
    }
    if (ferror(f)) {
        fprintf(stderr, "percolator: cannot read %s: %s\n", what, strerror(errno));
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b, len);
oom:
    fprintf(stderr, "percolator: out of memory reading %s\n", what);
    buf_free(&b);
    return NULL;
}

void cli_strip_space(char *s, size_t *len)
{
    size_t k = 0;
    for (size_t i = 0; i < *len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            s[k++] = s[i];
    s[k] = '\0';
    *len = k;
}

const char *cli_encoding_query(const cli_opts *o, char sep)
{
    if (!o->base64)
        return "";
    return sep == '?' ? "?encoding=base64" : "&encoding=base64";
}

void cli_print_string(const json_t *s)
{
    fwrite(json_string_value(s), 1, json_string_length(s), stdout);
}

void cli_print_body(const cli_reply *r)
{
    fwrite(r->body.data, 1, r->body.len, stdout);
    putchar('\n');
}
