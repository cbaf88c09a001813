/*
 * The key encoding and the record formats: encodings sort exactly like
 * the keys, versions of a key are adjacent and newest first, everything
 * decodes back to what was encoded, and damaged records are refused.
 */
#include "engine_fixture.h"

static size_t random_key(uint8_t *k)
{
    /* Few distinct bytes, 0x00 and 0xFF among them, so prefixes abound. */
    static const uint8_t alphabet[] = {0x00, 0x01, 'a', 'b', 0xFE, 0xFF};
    size_t len = (size_t)(rand() % 6);
    for (size_t i = 0; i < len; i++)
        k[i] = alphabet[rand() % (int)sizeof(alphabet)];
    return len;
}

static int sign(int x) { return (x > 0) - (x < 0); }

static void encoding_preserves_key_order(void **state)
{
    (void)state;
    srand(1);
    for (int i = 0; i < 20000; i++) {
        uint8_t a[8], b[8], ea[PC_VKEY_MAX], eb[PC_VKEY_MAX];
        size_t al = random_key(a), bl = random_key(b);
        uint64_t ta = (uint64_t)rand() % 4, tb = (uint64_t)rand() % 4;
        size_t eal = pc_vkey(ea, a, al, ta), ebl = pc_vkey(eb, b, bl, tb);
        int keys = pc_key_cmp(a, al, b, bl);
        int enc = sign(pc_key_cmp(ea, eal, eb, ebl));
        if (keys != 0)
            assert_int_equal(enc, sign(keys));
        else /* same key: the newer version first */
            assert_int_equal(enc, sign((ta < tb) - (ta > tb)));
    }
}

static void versioned_keys_decode_back(void **state)
{
    (void)state;
    srand(2);
    for (int i = 0; i < 5000; i++) {
        uint8_t k[8], vk[PC_VKEY_MAX], out[PC_KEY_MAX];
        size_t kl = random_key(k), ol;
        uint64_t ts = ((uint64_t)rand() << 32) ^ (uint64_t)rand(), got;
        size_t vkl = pc_vkey(vk, k, kl, ts);
        assert_int_equal(pc_vkey_decode(vk, vkl, out, &ol, &got), 0);
        assert_int_equal(ol, kl);
        assert_memory_equal(out, k, kl);
        assert_int_equal(got, ts);
    }
    /* Damaged: no terminator, a stray 0x00 escape. */
    uint8_t bad[] = {'a', 0x00, 0x07, 0, 0, 0, 0, 0, 0, 0, 1};
    uint8_t out[PC_KEY_MAX];
    size_t ol;
    uint64_t ts;
    assert_int_not_equal(pc_vkey_decode(bad, sizeof(bad), out, &ol, &ts), 0);
    assert_int_not_equal(pc_vkey_decode(bad, 5, out, &ol, &ts), 0);
}

static void records_round_trip(void **state)
{
    (void)state;
    pc_buf b = {0};
    pc_lock_rec l = {.op = PC_OP_PUT, .start_ts = 42, .wall_ms = 1234, .ttl_ms = 5000,
                     .primary = S("prim\0ary"), .owner = S("s-1"), .has_value = true,
                     .value = S("short")}, l2;
    assert_int_equal(pc_lock_encode(&b, &l), PC_OK);
    assert_int_equal(pc_lock_decode(b.data, b.len, &l2), PC_OK);
    assert_int_equal(l2.op, PC_OP_PUT);
    assert_int_equal(l2.start_ts, 42);
    assert_int_equal(l2.wall_ms, 1234);
    assert_int_equal(l2.ttl_ms, 5000);
    assert_int_equal(l2.primary.len, l.primary.len);
    assert_int_equal(l2.owner.len, 3);
    assert_true(l2.has_value);
    assert_memory_equal(l2.value.data, "short", 5);
    /* Every truncation and a wrong version byte are refused. */
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(pc_lock_decode(b.data, n, &l2), PC_ERROR);
    b.data[0] = 9;
    assert_int_equal(pc_lock_decode(b.data, b.len, &l2), PC_ERROR);

    b.len = 0;
    pc_write_rec w = {.type = PC_W_DELETE, .start_ts = 7}, w2;
    assert_int_equal(pc_write_encode(&b, &w), PC_OK);
    assert_int_equal(pc_write_decode(b.data, b.len, &w2), PC_OK);
    assert_int_equal(w2.type, PC_W_DELETE);
    assert_int_equal(w2.start_ts, 7);
    assert_false(w2.has_value);
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(pc_write_decode(b.data, n, &w2), PC_ERROR);
    /* A short value must be short. */
    char big[PC_SHORT_VALUE_MAX + 1] = {0};
    pc_write_rec w3 = {.type = PC_W_PUT, .start_ts = 1, .has_value = true,
                       .value = {big, sizeof(big)}};
    assert_int_equal(pc_write_encode(&b, &w3), PC_INVALID);
    pc_buf_free(&b);
}

/* A lock record by hand: header, primary, owner, optional value. */
static size_t raw_lock(uint8_t *p, uint8_t flags, uint32_t plen, uint8_t olen, uint32_t vlen)
{
    size_t n = 0;
    p[n++] = PC_RECORD_VERSION, p[n++] = PC_OP_PUT, p[n++] = flags;
    memset(p + n, 0, 24), n += 24;
    p[n++] = (uint8_t)(plen >> 24), p[n++] = (uint8_t)(plen >> 16);
    p[n++] = (uint8_t)(plen >> 8), p[n++] = (uint8_t)plen;
    memset(p + n, 'p', plen), n += plen;
    p[n++] = olen;
    memset(p + n, 'o', olen), n += olen;
    if (flags & 1) {
        p[n++] = (uint8_t)(vlen >> 24), p[n++] = (uint8_t)(vlen >> 16);
        p[n++] = (uint8_t)(vlen >> 8), p[n++] = (uint8_t)vlen;
        memset(p + n, 'v', vlen), n += vlen;
    }
    return n;
}

/* The decoders accept only what the encoders write: no unknown flag bits,
 * no primary, owner or short value past the encoders' bounds (a corrupt
 * lock with a longer primary was cut short in conflict reports). */
static void decoders_refuse_what_encoders_never_write(void **state)
{
    (void)state;
    static uint8_t p[PC_KEY_MAX + 400];
    pc_lock_rec l;
    pc_write_rec w;

    assert_int_equal(pc_lock_decode(p, raw_lock(p, 1, PC_KEY_MAX, PC_OWNER_MAX,
                                                PC_SHORT_VALUE_MAX), &l), PC_OK);
    assert_int_equal(pc_lock_decode(p, raw_lock(p, 0, PC_KEY_MAX + 1, 0, 0), &l), PC_ERROR);
    assert_int_equal(pc_lock_decode(p, raw_lock(p, 0, 1, PC_OWNER_MAX + 1, 0), &l), PC_ERROR);
    assert_int_equal(pc_lock_decode(p, raw_lock(p, 1, 1, 0, PC_SHORT_VALUE_MAX + 1), &l),
                     PC_ERROR);
    assert_int_equal(pc_lock_decode(p, raw_lock(p, 2, 1, 0, 0), &l), PC_ERROR);

    /* write: ver type flags start_ts [u32 len value] */
    uint8_t wr[11 + 4 + PC_SHORT_VALUE_MAX + 1] = {PC_RECORD_VERSION, PC_W_PUT, 0x02};
    assert_int_equal(pc_write_decode(wr, 11, &w), PC_ERROR);
    wr[2] = 0x01, wr[13] = 0x01, wr[14] = 0x00; /* a 256-byte short value */
    assert_int_equal(pc_write_decode(wr, sizeof wr, &w), PC_ERROR);
    wr[13] = 0x00, wr[14] = 0xFF;
    assert_int_equal(pc_write_decode(wr, sizeof wr - 1, &w), PC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(encoding_preserves_key_order),
        cmocka_unit_test(versioned_keys_decode_back),
        cmocka_unit_test(records_round_trip),
        cmocka_unit_test(decoders_refuse_what_encoders_never_write),
    };
    return cmocka_run_group_tests_name("engine: encoding", tests, NULL, NULL);
}
