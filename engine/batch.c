/*
 * batch.c — the write batch format: what an action would write, as bytes
 * that every node of a replicated store applies in the same order
 * (docs/DESIGN.md §4.10; TiKV's shape: actions produce batches, Raft
 * orders them, every node applies them). Applying: apply.c.
 *
 * Format: "pcB1", the number of operations (u32), then the operations
 * (exactly that many, up to the end):
 *   1 PUT        table (1 byte), key length (u32), key, value length (u32), value
 *   2 DEL        table (1 byte), key length (u32), key
 *   3 RAISE_TS   u64: the store's highest timestamp is at least this
 *   4 RAISE_SAFE_POINT  u64: the GC safe point is at least this (meta)
 *   5 SET_META   name length (u32), name, value length (u32), value: a
 *                named value of the service's (meta.c), such as the
 *                region map
 *   6 SET_REGION id (u64), value length (u32), value: region id's range
 *                and epoch (region_rows.c), well formed
 * Integers big-endian; tables are data, lock, write, notify (0..3) — the
 * meta table is written only by the applier (the applied index, the
 * timestamp floor, the named values, the region rows). Decoding is strict: a batch is applied whole or not
 * at all.
 */
#include <string.h>

#include "internal.h"

#define MAGIC "pcB1"
#define MAGIC_LEN 4
#define HEADER_LEN PC_BATCH_HEADER
#define DATA_TABLES 4 /* data, lock, write, notify */


/* Start an operation: the header first if the batch is empty, then the
 * count raised and the op byte. */
static pc_rc begin_op(pc_buf *b, uint8_t op)
{
    static const uint8_t zero[4];
    if (b->len == 0 && (pc_buf_append(b, MAGIC, MAGIC_LEN) != PC_OK ||
                        pc_buf_append(b, zero, 4) != PC_OK))
        return PC_NOMEM;
    if (pc_buf_append(b, &op, 1) != PC_OK)
        return PC_NOMEM;
    pc_put_be32((uint8_t *)b->data + MAGIC_LEN, pc_get_be32((const uint8_t *)b->data + MAGIC_LEN) + 1);
    return PC_OK;
}

pc_batch_mark pc_batch_mark_of(const pc_buf *b)
{
    uint32_t n = b->len >= HEADER_LEN ? pc_get_be32((const uint8_t *)b->data + MAGIC_LEN) : 0;
    return (pc_batch_mark){b->len, n};
}

void pc_batch_rewind(pc_buf *b, pc_batch_mark m)
{
    b->len = m.len;
    if (b->len >= HEADER_LEN)
        pc_put_be32((uint8_t *)b->data + MAGIC_LEN, m.count);
}

static pc_rc append_bytes(pc_buf *b, const void *p, size_t len)
{
    uint8_t n[4];
    if (len > UINT32_MAX)
        return PC_INVALID;
    pc_put_be32(n, (uint32_t)len);
    if (pc_buf_append(b, n, 4) != PC_OK || pc_buf_append(b, p, len) != PC_OK)
        return PC_NOMEM;
    return PC_OK;
}

pc_rc pc_batch_put(pc_buf *b, int table, const void *k, size_t klen, const void *v, size_t vlen)
{
    uint8_t t = (uint8_t)table;
    pc_rc rc = begin_op(b, PC_BATCH_PUT);
    if (rc == PC_OK)
        rc = pc_buf_append(b, &t, 1);
    if (rc == PC_OK)
        rc = append_bytes(b, k, klen);
    return rc == PC_OK ? append_bytes(b, v, vlen) : rc;
}

pc_rc pc_batch_del(pc_buf *b, int table, const void *k, size_t klen)
{
    uint8_t t = (uint8_t)table;
    pc_rc rc = begin_op(b, PC_BATCH_DEL);
    if (rc == PC_OK)
        rc = pc_buf_append(b, &t, 1);
    return rc == PC_OK ? append_bytes(b, k, klen) : rc;
}

static pc_rc raise_op(pc_buf *b, uint8_t op, uint64_t value)
{
    uint8_t v[8];
    pc_put_be64(v, value);
    pc_rc rc = begin_op(b, op);
    return rc == PC_OK ? pc_buf_append(b, v, 8) : rc;
}

pc_rc pc_batch_raise_ts(pc_buf *b, uint64_t ts)
{
    return raise_op(b, PC_BATCH_RAISE_TS, ts);
}

pc_rc pc_batch_raise_safe_point(pc_buf *b, uint64_t safe_point)
{
    return raise_op(b, PC_BATCH_RAISE_SAFE_POINT, safe_point);
}

pc_rc pc_batch_set_meta(pc_buf *b, const char *name, const void *v, size_t vlen)
{
    size_t nlen = name != NULL ? strlen(name) : 0;
    if (nlen == 0 || nlen > PC_META_NAME_MAX || (v == NULL && vlen > 0))
        return PC_INVALID;
    pc_rc rc = begin_op(b, PC_BATCH_SET_META);
    if (rc == PC_OK)
        rc = append_bytes(b, name, nlen);
    return rc == PC_OK ? append_bytes(b, v, vlen) : rc;
}

pc_rc pc_batch_set_region(pc_buf *b, const pc_region_row *r)
{
    uint8_t id[8];
    pc_buf v = {0};
    pc_rc rc = r != NULL ? pc_region_row_encode(r, &v) : PC_INVALID;
    if (rc == PC_OK)
        rc = begin_op(b, PC_BATCH_SET_REGION);
    pc_put_be64(id, rc == PC_OK ? r->id : 0);
    if (rc == PC_OK && pc_buf_append(b, id, 8) != PC_OK)
        rc = PC_NOMEM;
    if (rc == PC_OK)
        rc = append_bytes(b, v.data, v.len);
    pc_buf_free(&v);
    return rc;
}

/* A length and the bytes after it, into *at and *len; false when they
 * do not fit before end. */
static bool take_bytes(const uint8_t **q, const uint8_t *end, const uint8_t **at, size_t *len)
{
    if (end - *q < 4)
        return false;
    *len = pc_get_be32(*q), *q += 4;
    if ((size_t)(end - *q) < *len)
        return false;
    *at = *q, *q += *len;
    return true;
}

bool pc_batch_next(const uint8_t **p, const uint8_t *end, pc_batch_op *o)
{
    const uint8_t *q = *p;
    memset(o, 0, sizeof *o);
    o->op = *q++;
    if (o->op == PC_BATCH_RAISE_TS || o->op == PC_BATCH_RAISE_SAFE_POINT) {
        if (end - q < 8)
            return false;
        o->ts = pc_get_be64(q);
        *p = q + 8;
        return true;
    }
    if (o->op == PC_BATCH_SET_META) {
        /* A name is text: no NUL in it (pc_batch_set_meta takes a string). */
        if (!take_bytes(&q, end, &o->key, &o->klen) || o->klen == 0 ||
            o->klen > PC_META_NAME_MAX || memchr(o->key, 0, o->klen) != NULL ||
            !take_bytes(&q, end, &o->val, &o->vlen))
            return false;
        *p = q;
        return true;
    }
    if (o->op == PC_BATCH_SET_REGION) {
        pc_region_row r;
        if (end - q < 8)
            return false;
        o->key = q, o->klen = 8, q += 8;
        if (!take_bytes(&q, end, &o->val, &o->vlen) ||
            !pc_region_row_decode(pc_get_be64(o->key), o->val, o->vlen, &r))
            return false;
        *p = q;
        return true;
    }
    if ((o->op != PC_BATCH_PUT && o->op != PC_BATCH_DEL) || end - q < 5)
        return false;
    o->table = *q++;
    o->klen = pc_get_be32(q), q += 4;
    if (o->table >= DATA_TABLES || o->klen == 0 || (size_t)(end - q) < o->klen)
        return false;
    o->key = q, q += o->klen;
    if (o->op == PC_BATCH_PUT) {
        if (end - q < 4)
            return false;
        o->vlen = pc_get_be32(q), q += 4;
        if ((size_t)(end - q) < o->vlen)
            return false;
        o->val = q, q += o->vlen;
    }
    *p = q;
    return true;
}

pc_rc pc_batch_join(pc_buf *into, const void *batch, size_t len)
{
    const uint8_t *p = batch;
    if (len < HEADER_LEN || memcmp(p, MAGIC, MAGIC_LEN) != 0 ||
        (into->len > 0 && (into->len < HEADER_LEN || memcmp(into->data, MAGIC, MAGIC_LEN) != 0)))
        return PC_INVALID;
    if (into->len == 0)
        return pc_buf_append(into, batch, len);
    uint32_t had = pc_get_be32((const uint8_t *)into->data + MAGIC_LEN);
    uint32_t more = pc_get_be32(p + MAGIC_LEN);
    if (more > UINT32_MAX - had)
        return PC_INVALID;
    if (pc_buf_append(into, p + HEADER_LEN, len - HEADER_LEN) != PC_OK)
        return PC_NOMEM;
    pc_put_be32((uint8_t *)into->data + MAGIC_LEN, had + more);
    return PC_OK;
}

pc_rc pc_batch_check(const void *batch, size_t len)
{
    const uint8_t *p = batch, *end = p + len;
    pc_batch_op o;
    if (len < HEADER_LEN || memcmp(p, MAGIC, MAGIC_LEN) != 0)
        return PC_INVALID;
    uint32_t n = pc_get_be32(p + MAGIC_LEN), seen = 0;
    for (p += HEADER_LEN; p < end; seen++)
        if (seen == n || !pc_batch_next(&p, end, &o))
            return PC_INVALID;
    return seen == n ? PC_OK : PC_INVALID; /* a batch cut at an op's end too */
}

pc_rc pc_batch_each(const void *batch, size_t len, int (*fn)(void *arg, const pc_batch_op *o),
                    void *arg)
{
    const uint8_t *p = batch, *end = p + len;
    pc_batch_op o;
    if (pc_batch_check(batch, len) != PC_OK)
        return PC_INVALID;
    for (p += HEADER_LEN; p < end;) {
        if (!pc_batch_next(&p, end, &o))
            return PC_INVALID;
        int r = fn(arg, &o);
        if (r != 0)
            return r < 0 ? PC_INVALID : PC_OK;
    }
    return PC_OK;
}
