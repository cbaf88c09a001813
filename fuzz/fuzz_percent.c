/*
 * fuzz_percent.c — common/httpd_parse.c's percent-decoding of path segments
 * and query strings.
 *
 * Input: one mode byte (bit 0: '+' is a space, as in a query), then the
 * raw text. Decoding it matches a reference decoder written here (-1
 * exactly when some '%' lacks two hex digits), writes at most len + 1
 * bytes (dst is exactly that big), and ends with a NUL. Then the text's
 * bytes, percent-encoded (each byte escaped or kept as the mode byte's
 * other bits pick), decode back to themselves.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "httpd.h"

/* A hex digit's value, or -1 (a lookup, not codec-style ranges). */
static int hex(uint8_t c)
{
    static const char digits[] = "0123456789abcdefABCDEF";
    const char *p = c ? strchr(digits, c) : NULL;
    if (p == NULL)
        return -1;
    return p - digits < 16 ? (int)(p - digits) : (int)(p - digits) - 6;
}

static long ref_decode(const uint8_t *s, size_t len, uint8_t *out, bool plus)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%') {
            if (len - i < 3 || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0)
                return -1;
            out[o++] = (uint8_t)(hex(s[i + 1]) << 4 | hex(s[i + 2]));
            i += 2;
        } else {
            out[o++] = plus && s[i] == '+' ? ' ' : s[i];
        }
    }
    return (long)o;
}

/* Escape every byte that would not survive as itself, and others by choice. */
static size_t encode(const uint8_t *s, size_t len, uint8_t mode, bool plus, char *out)
{
    static const char hx[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        bool must = s[i] == '%' || (plus && s[i] == '+');
        if (must || ((mode >> 1) + i) % 3 == 0) {
            out[o++] = '%';
            out[o++] = hx[s[i] >> 4];
            out[o++] = hx[s[i] & 15];
        } else {
            out[o++] = (char)s[i];
        }
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool plus = data[0] & 1;
    const uint8_t *s = data + 1;
    size_t len = size - 1;

    char *dst = malloc(len + 1); /* exactly what httpd.h asks for */
    uint8_t *ref = malloc(len + 1);
    FUZZ_CHECK(dst != NULL && ref != NULL);
    long n = httpd_percent_decode((const char *)s, len, dst, plus);
    long r = ref_decode(s, len, ref, plus);
    FUZZ_CHECK(n == r);
    if (n >= 0) {
        FUZZ_CHECK((size_t)n <= len);
        FUZZ_CHECK(dst[n] == '\0');
        FUZZ_CHECK(memcmp(dst, ref, (size_t)n) == 0);
    }

    char *enc = malloc(3 * len + 1);
    FUZZ_CHECK(enc != NULL);
    size_t elen = encode(s, len, data[0], plus, enc);
    char *back = malloc(elen + 1);
    FUZZ_CHECK(back != NULL);
    FUZZ_CHECK(httpd_percent_decode(enc, elen, back, plus) == (long)len);
    FUZZ_CHECK(len == 0 || memcmp(back, s, len) == 0);

    free(back);
    free(enc);
    free(ref);
    free(dst);
    return 0;
}
