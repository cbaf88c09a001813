/*
 * fuzz_keys.c — engine/keys.c's order-preserving key encoding.
 *
 * Input: one mode byte, then bytes.
 *   even mode: the bytes are a stored versioned key. Decoding never reads
 *              past them nor writes past PC_KEY_MAX; a key that decodes
 *              re-encodes to exactly those bytes.
 *   odd mode:  two timestamps, a split point, and two user keys a and b.
 *              Each (key, ts) encodes and decodes back; the encodings
 *              compare (pc_key_cmp, WiredTiger's order) as the keys do,
 *              and for one key, newer timestamps first; no encoded key is
 *              a prefix of another's. Mode bit 1 makes b the same key as
 *              a, so the timestamp order is tried as often as the key order.
 */
#include <string.h>

#include "fuzz.h"
#include "internal.h"

static int sign(int c) { return (c > 0) - (c < 0); }

static void decode_any(const uint8_t *p, size_t len)
{
    uint8_t *key = malloc(PC_KEY_MAX); /* exactly the room keys.c may use */
    FUZZ_CHECK(key != NULL);
    size_t klen = 0;
    uint64_t ts = 0;
    if (pc_vkey_decode(p, len, key, &klen, &ts) == 0) {
        uint8_t vk[PC_VKEY_MAX];
        FUZZ_CHECK(klen <= PC_KEY_MAX);
        size_t n = pc_vkey(vk, key, klen, ts);
        FUZZ_CHECK(n == len && memcmp(vk, p, len) == 0);
    }
    free(key);
}

/* (key, ts) -> versioned key -> (key, ts). Returns the encoding's length. */
static size_t encode_one(const uint8_t *k, size_t klen, uint64_t ts, uint8_t *vk)
{
    size_t n = pc_vkey(vk, k, klen, ts);
    uint8_t ek[PC_EKEY_MAX];
    size_t en = pc_ekey(ek, k, klen);
    FUZZ_CHECK(n <= PC_VKEY_MAX && en + 8 == n && pc_vkey_prefix_len(n) == en);
    FUZZ_CHECK(memcmp(ek, vk, en) == 0);

    uint8_t back[PC_KEY_MAX];
    size_t blen = 0;
    uint64_t bts = 0;
    FUZZ_CHECK(pc_vkey_decode(vk, n, back, &blen, &bts) == 0);
    FUZZ_CHECK(blen == klen && bts == ts && (klen == 0 || memcmp(back, k, klen) == 0));
    return n;
}

static void order(uint8_t mode, const uint8_t *p, size_t left)
{
    uint64_t ta = fuzz_take(&p, &left, 8), tb = fuzz_take(&p, &left, 8);
    size_t split = (size_t)fuzz_take(&p, &left, 2);
    size_t alen = split <= left ? split : left;
    size_t blen = left - alen;
    const uint8_t *a = p, *b = p + alen;
    if (alen > PC_KEY_MAX)
        alen = PC_KEY_MAX;
    if (blen > PC_KEY_MAX)
        blen = PC_KEY_MAX;
    /* Mode bit 1: one key at two timestamps. */
    if (mode & 2)
        b = a, blen = alen;
    uint8_t va[PC_VKEY_MAX], vb[PC_VKEY_MAX];
    size_t na = encode_one(a, alen, ta, va), nb = encode_one(b, blen, tb, vb);

    int keys = sign(pc_key_cmp(a, alen, b, blen));
    int want = keys != 0 ? keys : (ta == tb ? 0 : ta > tb ? -1 : 1);
    FUZZ_CHECK(sign(pc_key_cmp(va, na, vb, nb)) == want);
    /* The key parts alone: prefix-free, so equal only for equal keys. */
    size_t ea = pc_vkey_prefix_len(na), eb = pc_vkey_prefix_len(nb);
    if (keys != 0)
        FUZZ_CHECK(memcmp(va, vb, ea < eb ? ea : eb) != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0)
        decode_any(data + 1, size - 1);
    else
        order(data[0], data + 1, size - 1);
    return 0;
}
