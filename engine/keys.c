/*
 * keys.c — the order-preserving key encoding of the versioned tables.
 *
 * data and write hold (key, ts). Appending a raw timestamp to a raw key
 * would interleave keys that are prefixes of each other ("a"+ts could sort
 * after "a\0"), so the user key is first escaped (0x00 -> 0x00 0xFF) and
 * terminated (0x00 0x01): encodings compare like the keys, and no encoding
 * is a prefix of another. The timestamp follows big-endian and inverted, so
 * a key's versions are adjacent, newest first, and "the newest version at
 * or below ts" is one search_near on (key, ts).
 */
#include <string.h>

#include "internal.h"

size_t pc_ekey(uint8_t *out, const void *key, size_t len)
{
    const uint8_t *k = key;
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        out[n++] = k[i];
        if (k[i] == 0x00)
            out[n++] = 0xFF;
    }
    out[n++] = 0x00;
    out[n++] = 0x01;
    return n;
}

size_t pc_vkey(uint8_t *out, const void *key, size_t len, uint64_t ts)
{
    size_t n = pc_ekey(out, key, len);
    uint64_t inv = ~ts;

    for (int i = 7; i >= 0; i--) {
        out[n + (size_t)i] = (uint8_t)(inv & 0xFF);
        inv >>= 8;
    }
    return n + 8;
}

int pc_vkey_decode(const uint8_t *vk, size_t vlen, uint8_t *out, size_t *key_len, uint64_t *ts)
{
    size_t n = 0, i = 0, end;
    uint64_t inv = 0;

    if (vlen < 10)
        return -1;
    end = vlen - 8;
    for (;;) {
        if (i >= end)
            return -1;
        if (vk[i] != 0x00) {
            if (n >= PC_KEY_MAX)
                return -1;
            out[n++] = vk[i++];
            continue;
        }
        if (i + 1 >= end)
            return -1;
        if (vk[i + 1] == 0xFF) {
            if (n >= PC_KEY_MAX)
                return -1;
            out[n++] = 0x00;
            i += 2;
            continue;
        }
        if (vk[i + 1] != 0x01 || i + 2 != end)
            return -1;
        break;
    }
    for (size_t j = end; j < vlen; j++)
        inv = (inv << 8) | vk[j];
    *key_len = n;
    *ts = ~inv;
    return 0;
}

int pc_key_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n > 0 ? memcmp(a, b, n) : 0; /* an empty key may have no bytes (NULL) */
    return c != 0 ? c : (alen > blen) - (alen < blen);
}
