/*
 * utf8.c — UTF-8 validity and escaping (see utf8.h).
 */
#include "utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

size_t utf8_char_len(const unsigned char *s, size_t len)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;

    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        n = 1, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
        n = 2, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
        n = 3, cp = c & 0x07;
    else
        return 0;
    if (n >= len) /* the continuation bytes must all be there */
        return 0;
    for (size_t j = 1; j <= n; j++) {
        if ((s[j] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[j] & 0x3F);
    }
    /* No overlong forms, no surrogates, nothing past U+10FFFF. */
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        return 0;
    return n + 1;
}

bool utf8_valid(const void *p, size_t len)
{
    const unsigned char *s = p;
    for (size_t i = 0, n; i < len; i += n)
        if ((n = utf8_char_len(s + i, len - i)) == 0)
            return false;
    return true;
}

size_t utf8_escape(const char *src, char *dst, size_t cap)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t len = strlen(src), o = 0;

    for (size_t i = 0; i < len;) {
        size_t n = utf8_char_len(s + i, len - i);
        if (n > 0) {
            if (o + n >= cap)
                break;
            memcpy(dst + o, s + i, n);
            o += n;
            i += n;
        } else {
            if (o + 4 >= cap)
                break;
            snprintf(dst + o, 5, "\\x%02X", s[i]);
            o += 4;
            i++;
        }
    }
    dst[o] = '\0';
    return o;
}
