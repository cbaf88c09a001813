/*
 * fuzz_records.c — engine/records.c's lock and write records.
 *
 * Input: one mode byte, then bytes.
 *   mode 0, 1: the bytes are a stored lock (0) or write (1) record. Decoding
 *              never reads past them; a record that decodes is exactly
 *              the one its fields encode to (one encoding per record, so
 *              the decoder accepts nothing the encoder cannot write).
 *   mode 2, 3: the bytes are a lock (2) or write (3) record's fields. The
 *              encoder refuses exactly the out-of-bounds ones (key, owner,
 *              short value); what it encodes decodes to the same fields.
 */
#include <string.h>

#include "fuzz.h"
#include "internal.h"

static bool same(pc_slice a, pc_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

static bool lock_eq(const pc_lock_rec *a, const pc_lock_rec *b)
{
    return a->op == b->op && a->start_ts == b->start_ts && a->wall_ms == b->wall_ms &&
           a->ttl_ms == b->ttl_ms && same(a->primary, b->primary) && same(a->owner, b->owner) &&
           a->has_value == b->has_value && (!a->has_value || same(a->value, b->value));
}

static bool write_eq(const pc_write_rec *a, const pc_write_rec *b)
{
    return a->type == b->type && a->start_ts == b->start_ts && a->has_value == b->has_value &&
           (!a->has_value || same(a->value, b->value));
}

static void decode_lock(const uint8_t *p, size_t len)
{
    pc_lock_rec r;
    if (pc_lock_decode(p, len, &r) != PC_OK)
        return;
    pc_buf b = {0};
    FUZZ_CHECK(pc_lock_encode(&b, &r) == PC_OK);
    FUZZ_CHECK(b.len == len && memcmp(b.data, p, len) == 0);
    pc_buf_free(&b);
}

static void decode_write(const uint8_t *p, size_t len)
{
    pc_write_rec r;
    if (pc_write_decode(p, len, &r) != PC_OK)
        return;
    pc_buf b = {0};
    FUZZ_CHECK(pc_write_encode(&b, &r) == PC_OK);
    FUZZ_CHECK(b.len == len && memcmp(b.data, p, len) == 0);
    pc_buf_free(&b);
}

/* A slice of up to max bytes (length from two input bytes) out of the input. */
static pc_slice take_slice(const uint8_t **p, size_t *left, size_t max)
{
    size_t n = (size_t)fuzz_take(p, left, 2) % (max + 1);
    if (n > *left)
        n = *left;
    pc_slice s = {*p, n};
    *p += n, *left -= n;
    return s;
}

static void encode_lock(const uint8_t *p, size_t left)
{
    pc_lock_rec r = {0}, d;
    r.op = fuzz_take(&p, &left, 1) % 2 ? PC_OP_DELETE : PC_OP_PUT;
    r.has_value = fuzz_take(&p, &left, 1) & 1;
    r.start_ts = fuzz_take(&p, &left, 8);
    r.wall_ms = fuzz_take(&p, &left, 8);
    r.ttl_ms = fuzz_take(&p, &left, 8);
    /* Slightly past each bound, so the refusals are tried too. */
    r.owner = take_slice(&p, &left, PC_OWNER_MAX + 2);
    r.value = take_slice(&p, &left, PC_SHORT_VALUE_MAX + 2);
    r.primary = take_slice(&p, &left, PC_KEY_MAX + 2);
    bool fits = r.primary.len <= PC_KEY_MAX && r.owner.len <= PC_OWNER_MAX &&
                (!r.has_value || r.value.len <= PC_SHORT_VALUE_MAX);

    pc_buf b = {.data = NULL};
    pc_rc rc = pc_lock_encode(&b, &r);
    FUZZ_CHECK(rc == (fits ? PC_OK : PC_INVALID));
    if (rc == PC_OK) {
        FUZZ_CHECK(pc_lock_decode(b.data, b.len, &d) == PC_OK);
        FUZZ_CHECK(lock_eq(&r, &d));
        /* Any shorter prefix is refused, never read past. */
        FUZZ_CHECK(pc_lock_decode(b.data, b.len - 1, &d) != PC_OK);
    }
    pc_buf_free(&b);
}

static void encode_write(const uint8_t *p, size_t left)
{
    static const pc_wtype types[] = {PC_W_PUT, PC_W_DELETE, PC_W_ROLLBACK};
    pc_write_rec r = {0}, d;
    r.type = types[fuzz_take(&p, &left, 1) % 3];
    r.has_value = fuzz_take(&p, &left, 1) & 1;
    r.start_ts = fuzz_take(&p, &left, 8);
    r.value = take_slice(&p, &left, PC_SHORT_VALUE_MAX + 2);
    bool fits = !r.has_value || r.value.len <= PC_SHORT_VALUE_MAX;

    pc_buf b = {.data = NULL};
    pc_rc rc = pc_write_encode(&b, &r);
    FUZZ_CHECK(rc == (fits ? PC_OK : PC_INVALID));
    if (rc == PC_OK) {
        FUZZ_CHECK(pc_write_decode(b.data, b.len, &d) == PC_OK);
        FUZZ_CHECK(write_eq(&r, &d));
        FUZZ_CHECK(pc_write_decode(b.data, b.len - 1, &d) != PC_OK);
    }
    pc_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 4) {
    case 0: decode_lock(data + 1, size - 1); break;
    case 1: decode_write(data + 1, size - 1); break;
    case 2: encode_lock(data + 1, size - 1); break;
    default: encode_write(data + 1, size - 1); break;
    }
    return 0;
}
