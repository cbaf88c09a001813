/*
 * fuzz_base64.c — common/base64.c: standard base64.
 *
 * Input: one mode byte, then bytes. Even mode: the bytes are base64 text
 * to decode; if it decodes, its length is exact for its padding and
 * encoding the result and decoding again gives the same bytes. Odd mode:
 * the bytes are data; their encoding has the exact length, only alphabet
 * and padding characters, and decodes back to them. Buffers are exactly
 * the sizes base64.h promises, so ASan catches any write past them.
 */
#include <string.h>

#include "base64.h"
#include "codec.h"
#include "fuzz.h"

static bool b64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '/';
}

/* encode then decode: the same bytes back. */
static void round_trip(const uint8_t *src, size_t len)
{
    size_t elen = 4 * ((len + 2) / 3);
    char *enc = malloc(elen + 1);
    FUZZ_CHECK(enc != NULL);
    FUZZ_CHECK(b64_encode(src, len, enc) == elen);
    FUZZ_CHECK(enc[elen] == '\0');
    for (size_t i = 0; i < elen; i++)
        FUZZ_CHECK(b64_char(enc[i]) || (enc[i] == '=' && i + 2 >= elen));
    unsigned char *dec = malloc(elen / 4 * 3 ? elen / 4 * 3 : 1); /* exact */
    FUZZ_CHECK(dec != NULL);
    long n = b64_decode(enc, elen, dec);
    FUZZ_CHECK(n == (long)len);
    FUZZ_CHECK(len == 0 || memcmp(dec, src, len) == 0);
    free(dec);
    free(enc);
}

/* decode arbitrary text: -1, or the length its padding says. */
static void decode_any(const uint8_t *src, size_t len)
{
    char *text = malloc(len ? len : 1); /* exact size: reads past it are caught */
    FUZZ_CHECK(text != NULL);
    memcpy(text, src, len);
    unsigned char *dec = malloc(len / 4 * 3 ? len / 4 * 3 : 1);
    FUZZ_CHECK(dec != NULL);
    long n = b64_decode(text, len, dec);
    if (n >= 0) {
        size_t pad = len >= 1 && text[len - 1] == '=' ? (len >= 2 && text[len - 2] == '=' ? 2 : 1) : 0;
        FUZZ_CHECK(len % 4 == 0);
        FUZZ_CHECK((size_t)n == len / 4 * 3 - pad);
        for (size_t i = 0; i < len - pad; i++)
            FUZZ_CHECK(b64_char(text[i]));
        round_trip(dec, (size_t)n);
    }
    free(dec);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0)
        decode_any(data + 1, size - 1);
    else
        round_trip(data + 1, size - 1);
    return 0;
}
