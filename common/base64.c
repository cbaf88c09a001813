/*
 * base64.c — see base64.h.
 */
#include <stdint.h>

#include "base64.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t b64_encode(const void *src, size_t len, char *dst)
{
    const unsigned char *s = src;
    size_t o = 0, i = 0;

    for (; i + 2 < len; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        dst[o++] = B64[v >> 18];
        dst[o++] = B64[(v >> 12) & 63];
        dst[o++] = B64[(v >> 6) & 63];
        dst[o++] = B64[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < len ? (uint32_t)s[i + 1] << 8 : 0);
        dst[o++] = B64[v >> 18];
        dst[o++] = B64[(v >> 12) & 63];
        dst[o++] = i + 1 < len ? B64[(v >> 6) & 63] : '=';
        dst[o++] = '=';
    }
    dst[o] = '\0';
    return o;
}

static int b64_val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long b64_decode(const char *src, size_t len, unsigned char *dst)
{
    size_t o = 0;

    if (len % 4 != 0)
        return -1;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            if (src[i + j] == '=' && i + 4 == len && j >= 2) {
                v[j] = 0;
                pad++;
                continue;
            }
            if (pad > 0 || (v[j] = b64_val(src[i + j])) < 0)
                return -1;
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        dst[o++] = (unsigned char)(x >> 16);
        if (pad < 2)
            dst[o++] = (unsigned char)(x >> 8);
        if (pad < 1)
            dst[o++] = (unsigned char)x;
    }
    return (long)o;
}
