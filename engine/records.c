/*
 * records.c — the lock and write records, and the growable buffer they are
 * built in.
 *
 * Both start with a format version byte so that a later format can be told
 * apart. Integers are big-endian. Values of at most PC_SHORT_VALUE_MAX
 * bytes travel inside the lock and then the write record (TiKV's short
 * value, DESIGN §3.1): reading them costs one lookup instead of two.
 *
 *   lock:  ver op flags start_ts wall_ms ttl_ms u32 primary_len primary
 *          u8 owner_len owner [u32 value_len value]      flags bit 0: value
 *   write: ver type flags start_ts [u32 value_len value]
 *
 * Decoding is strict: bytes decode only if they are exactly what the
 * encoder writes for some record (no unknown flag bits, no length past the
 * encoder's bounds); anything else is corruption. A laxer decoder let a
 * corrupt lock name a primary longer than PC_KEY_MAX, which a conflict
 * report then cut short (found by fuzz/fuzz_records.c).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define FLAG_VALUE 0x01

void pc_buf_free(pc_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

pc_rc pc_buf_reserve(pc_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return PC_OK;
    if (extra > SIZE_MAX / 2 - b->len)
        return PC_NOMEM;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < extra)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (p == NULL)
        return PC_NOMEM;
    b->data = p;
    b->cap = cap;
    return PC_OK;
}

pc_rc pc_buf_append(pc_buf *b, const void *p, size_t len)
{
    if (pc_buf_reserve(b, len) != PC_OK)
        return PC_NOMEM;
    if (len > 0)
        memcpy(b->data + b->len, p, len);
    b->len += len;
    return PC_OK;
}

void pc_put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)(v & 0xFF);
        v >>= 8;
    }
}

uint64_t pc_get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

void pc_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

uint32_t pc_get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

pc_rc pc_lock_encode(pc_buf *b, const pc_lock_rec *r)
{
    size_t need = 3 + 24 + 4 + r->primary.len + 1 + r->owner.len +
                  (r->has_value ? 4 + r->value.len : 0);
    uint8_t *p;

    if (r->primary.len > PC_KEY_MAX || r->owner.len > PC_OWNER_MAX ||
        (r->has_value && r->value.len > PC_SHORT_VALUE_MAX))
        return PC_INVALID;
    if (pc_buf_reserve(b, need) != PC_OK)
        return PC_NOMEM;
    p = (uint8_t *)b->data + b->len;
    *p++ = PC_RECORD_VERSION;
    *p++ = (uint8_t)r->op;
    *p++ = r->has_value ? FLAG_VALUE : 0;
    pc_put_be64(p, r->start_ts), p += 8;
    pc_put_be64(p, r->wall_ms), p += 8;
    pc_put_be64(p, r->ttl_ms), p += 8;
    pc_put_be32(p, (uint32_t)r->primary.len), p += 4;
    memcpy(p, r->primary.data, r->primary.len), p += r->primary.len;
    *p++ = (uint8_t)r->owner.len;
    if (r->owner.len)
        memcpy(p, r->owner.data, r->owner.len), p += r->owner.len;
    if (r->has_value) {
        pc_put_be32(p, (uint32_t)r->value.len), p += 4;
        if (r->value.len)
            memcpy(p, r->value.data, r->value.len);
    }
    b->len += need;
    return PC_OK;
}

pc_rc pc_lock_decode(const void *data, size_t len, pc_lock_rec *r)
{
    const uint8_t *p = data, *end = p + len;

    memset(r, 0, sizeof(*r));
    if (len < 3 + 24 + 4 || p[0] != PC_RECORD_VERSION)
        return PC_ERROR;
    r->op = (pc_op)p[1];
    if (r->op != PC_OP_PUT && r->op != PC_OP_DELETE)
        return PC_ERROR;
    if ((p[2] & ~FLAG_VALUE) != 0)
        return PC_ERROR;
    r->has_value = (p[2] & FLAG_VALUE) != 0;
    p += 3;
    r->start_ts = pc_get_be64(p), p += 8;
    r->wall_ms = pc_get_be64(p), p += 8;
    r->ttl_ms = pc_get_be64(p), p += 8;
    r->primary.len = pc_get_be32(p), p += 4;
    if (r->primary.len > PC_KEY_MAX || (size_t)(end - p) < r->primary.len + 1)
        return PC_ERROR;
    r->primary.data = p, p += r->primary.len;
    r->owner.len = *p++;
    if (r->owner.len > PC_OWNER_MAX || (size_t)(end - p) < r->owner.len)
        return PC_ERROR;
    r->owner.data = p, p += r->owner.len;
    if (r->has_value) {
        if (end - p < 4)
            return PC_ERROR;
        r->value.len = pc_get_be32(p), p += 4;
        if (r->value.len > PC_SHORT_VALUE_MAX || (size_t)(end - p) < r->value.len)
            return PC_ERROR;
        r->value.data = p, p += r->value.len;
    }
    return p == end ? PC_OK : PC_ERROR;
}

pc_rc pc_write_encode(pc_buf *b, const pc_write_rec *r)
{
    size_t need = 3 + 8 + (r->has_value ? 4 + r->value.len : 0);
    uint8_t *p;

    if (r->has_value && r->value.len > PC_SHORT_VALUE_MAX)
        return PC_INVALID;
    if (pc_buf_reserve(b, need) != PC_OK)
        return PC_NOMEM;
    p = (uint8_t *)b->data + b->len;
    *p++ = PC_RECORD_VERSION;
    *p++ = (uint8_t)r->type;
    *p++ = r->has_value ? FLAG_VALUE : 0;
    pc_put_be64(p, r->start_ts), p += 8;
    if (r->has_value) {
        pc_put_be32(p, (uint32_t)r->value.len), p += 4;
        if (r->value.len)
            memcpy(p, r->value.data, r->value.len);
    }
    b->len += need;
    return PC_OK;
}

pc_rc pc_write_decode(const void *data, size_t len, pc_write_rec *r)
{
    const uint8_t *p = data, *end = p + len;

    memset(r, 0, sizeof(*r));
    if (len < 11 || p[0] != PC_RECORD_VERSION)
        return PC_ERROR;
    r->type = (pc_wtype)p[1];
    if (r->type != PC_W_PUT && r->type != PC_W_DELETE && r->type != PC_W_ROLLBACK)
        return PC_ERROR;
    if ((p[2] & ~FLAG_VALUE) != 0)
        return PC_ERROR;
    r->has_value = (p[2] & FLAG_VALUE) != 0;
    p += 3;
    r->start_ts = pc_get_be64(p), p += 8;
    if (r->has_value) {
        if (end - p < 4)
            return PC_ERROR;
        r->value.len = pc_get_be32(p), p += 4;
        if (r->value.len > PC_SHORT_VALUE_MAX || (size_t)(end - p) < r->value.len)
            return PC_ERROR;
        r->value.data = p, p += r->value.len;
    }
    return p == end ? PC_OK : PC_ERROR;
}
