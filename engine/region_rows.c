/*
 * region_rows.c — a region's range and epoch as the store knows them
 * (engine_replica.h; TiKV's region local state; docs/DESIGN.md §6.5 step
 * 6): a row of the meta table per region, "region/" and the id
 * (big-endian, so the rows sort by id). A batch of the region's own log
 * sets it (SET_REGION, apply.c), so every replica changes its range at
 * the same index of that log; the region's image carries it (image.c),
 * so a replica that catches up by an image takes the range the image was
 * taken with, not the one it had before a split it missed. The row's
 * bytes: region_codec.c.
 */
#include <string.h>

#include "engine_replica.h"
#include "internal.h"

#define PREFIX "region/"
#define PREFIX_LEN (sizeof PREFIX - 1)
#define ROW_KEY_LEN (PREFIX_LEN + 8)

static size_t row_key(uint8_t *key, uint64_t id)
{
    memcpy(key, PREFIX, PREFIX_LEN);
    pc_put_be64(key + PREFIX_LEN, id);
    return ROW_KEY_LEN;
}

/* Whether r's range is inside range: a region's range only narrows. */
static bool row_inside(const pc_region_row *r, const pc_key_range *range)
{
    if (pc_key_cmp(r->start.data, r->start.len, range->start.data, range->start.len) < 0)
        return false;
    if (range->end.data == NULL)
        return true;
    return r->end.data != NULL &&
           pc_key_cmp(r->end.data, r->end.len, range->end.data, range->end.len) <= 0;
}

bool pc_region_op_inside(const pc_batch_op *o, uint64_t region, const pc_key_range *range)
{
    pc_region_row r;
    return o->op == PC_BATCH_SET_REGION &&
           pc_region_row_decode(pc_get_be64(o->key), o->val, o->vlen, &r) &&
           (region == 0 || r.id == region) && row_inside(&r, range);
}

pc_rc pc_region_row_put(pc_session *s, const pc_region_row *r)
{
    uint8_t key[ROW_KEY_LEN];
    pc_buf v = {0};
    pc_rc rc = pc_region_row_encode(r, &v);
    if (rc == PC_OK)
        rc = pc_cursor_put(s, s->meta, key, row_key(key, r->id), v.data, v.len);
    pc_buf_free(&v);
    return rc;
}

pc_rc pc_region_row_read(pc_session *s, uint64_t id, pc_region_row *out, pc_buf *mem)
{
    uint8_t key[ROW_KEY_LEN];
    WT_ITEM v;
    mem->len = 0;
    pc_rc rc = pc_cursor_get(s, s->meta, key, row_key(key, id), &v);
    if (rc != PC_OK)
        return rc;
    /* The row points into mem, not into WiredTiger's buffer, which the
     * cursor's next call reuses. */
    if (pc_buf_append(mem, v.data, v.size) != PC_OK)
        return PC_NOMEM;
    /* Only SET_REGION writes these, decoded before it applies. */
    return pc_region_row_decode(id, mem->data, mem->len, out) ? PC_OK : PC_ERROR;
}

typedef struct {
    int (*fn)(void *arg, const pc_region_row *r);
    void *arg;
} batch_rows_args;

static int batch_row(void *arg, const pc_batch_op *o)
{
    batch_rows_args *a = arg;
    pc_region_row r;
    if (o->op != PC_BATCH_SET_REGION)
        return 0;
    if (!pc_region_row_decode(pc_get_be64(o->key), o->val, o->vlen, &r))
        return -1; /* pc_batch_next decoded it: cannot happen */
    return a->fn(a->arg, &r) != 0 ? 1 : 0;
}

pc_rc pc_batch_region_rows(const void *batch, size_t len,
                           int (*fn)(void *arg, const pc_region_row *r), void *arg)
{
    if (fn == NULL)
        return PC_INVALID;
    batch_rows_args a = {fn, arg};
    return pc_batch_each(batch, len, batch_row, &a);
}

typedef struct {
    uint64_t id;
    pc_region_row *out;
    pc_buf *mem;
} get_args;

static pc_rc get_body(pc_session *s, void *arg)
{
    get_args *a = arg;
    return pc_region_row_read(s, a->id, a->out, a->mem);
}

pc_rc pc_region_row_get(pc_session *s, uint64_t id, pc_region_row *out, pc_buf *mem)
{
    if (id == 0 || out == NULL || mem == NULL)
        return PC_INVALID;
    get_args a = {id, out, mem};
    return pc_run_txn(s, get_body, &a);
}

/* Every row's id and value into out (emptied first: a retried
 * transaction starts over), each as the id (u64), the value's length
 * (u64) and the value, so that fn runs after the transaction, once. */
static pc_rc collect_body(pc_session *s, void *arg)
{
    pc_buf *out = arg;
    WT_CURSOR *c = s->meta;
    pc_rc rc = pc_cursor_seek_ge(s, c, PREFIX, PREFIX_LEN);
    int ret = 0;
    out->len = 0;
    while (rc == PC_OK) {
        WT_ITEM k, v;
        uint8_t head[8 + 8];
        if ((ret = c->get_key(c, &k)) != 0 || (ret = c->get_value(c, &v)) != 0)
            return pc_wt_error(s, ret, "cursor get");
        if (k.size != ROW_KEY_LEN || memcmp(k.data, PREFIX, PREFIX_LEN) != 0)
            break; /* past the rows */
        memcpy(head, (const uint8_t *)k.data + PREFIX_LEN, 8);
        pc_put_be64(head + 8, v.size);
        if (pc_buf_append(out, head, sizeof head) != PC_OK ||
            pc_buf_append(out, v.data, v.size) != PC_OK)
            return PC_NOMEM;
        if ((ret = c->next(c)) != 0) {
            rc = ret == WT_NOTFOUND ? PC_OK : pc_wt_error(s, ret, "cursor next");
            break;
        }
    }
    if ((ret = c->reset(c)) != 0 && (rc == PC_OK || rc == PC_NOT_FOUND))
        rc = pc_wt_error(s, ret, "cursor reset");
    return rc == PC_NOT_FOUND ? PC_OK : rc; /* no row at all */
}

pc_rc pc_region_rows_each(pc_session *s, int (*fn)(void *arg, const pc_region_row *r), void *arg)
{
    if (fn == NULL)
        return PC_INVALID;
    pc_buf all = {0};
    pc_rc rc = pc_run_txn(s, collect_body, &all);
    const uint8_t *p = (const uint8_t *)all.data, *end = p + all.len;
    while (rc == PC_OK && p < end) {
        pc_region_row r;
        uint64_t id = pc_get_be64(p);
        size_t len = (size_t)pc_get_be64(p + 8);
        p += 8 + 8;
        /* Only SET_REGION writes these, decoded before it applies. */
        if (!pc_region_row_decode(id, p, len, &r))
            rc = PC_ERROR;
        else if (fn(arg, &r) != 0)
            break;
        p += len;
    }
    pc_buf_free(&all);
    return rc;
}

typedef struct {
    const pc_region_row *rows;
    size_t n;
} seed_args;

/* The seed's digest: a meta row of its own, outside "region/" (it sorts
 * after every row). */
static const char SEED_KEY[] = "region_seed";

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

pc_rc pc_region_rows_digest(const pc_region_row *rows, size_t n, uint64_t *digest)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    pc_buf v = {0};
    pc_rc rc = PC_OK;
    for (size_t i = 0; i < n && rc == PC_OK; i++) {
        uint8_t id[8];
        pc_put_be64(id, rows[i].id);
        v.len = 0;
        if ((rc = pc_region_row_encode(&rows[i], &v)) == PC_OK)
            h = fnv(fnv(h, id, 8), v.data, v.len);
    }
    pc_buf_free(&v);
    *digest = h != 0 ? h : 1;
    return rc;
}

static pc_rc seed_body(pc_session *s, void *arg)
{
    seed_args *a = arg;
    pc_buf all = {0};
    pc_rc rc = collect_body(s, &all); /* in this transaction: none may be there */
    bool some = all.len > 0;
    pc_buf_free(&all);
    if (rc == PC_OK && some)
        rc = PC_INVALID;
    for (size_t i = 0; i < a->n && rc == PC_OK; i++)
        rc = pc_region_row_put(s, &a->rows[i]);
    uint64_t digest = 0;
    uint8_t v[8];
    if (rc == PC_OK)
        rc = pc_region_rows_digest(a->rows, a->n, &digest);
    pc_put_be64(v, digest);
    return rc == PC_OK ? pc_cursor_put(s, s->meta, SEED_KEY, sizeof SEED_KEY - 1, v, 8) : rc;
}

static pc_rc seed_digest_body(pc_session *s, void *arg)
{
    WT_ITEM v;
    pc_rc rc = pc_cursor_get(s, s->meta, SEED_KEY, sizeof SEED_KEY - 1, &v);
    if (rc == PC_OK && v.size != 8)
        return PC_ERROR;
    if (rc == PC_OK)
        *(uint64_t *)arg = pc_get_be64(v.data);
    return rc;
}

pc_rc pc_region_seed_digest(pc_session *s, uint64_t *digest)
{
    if (digest == NULL)
        return PC_INVALID;
    return pc_run_txn(s, seed_digest_body, digest);
}

pc_rc pc_region_rows_seed(pc_session *s, const pc_region_row *rows, size_t n)
{
    if (rows == NULL || n == 0 || s->propose != NULL)
        return PC_INVALID;
    for (size_t i = 0; i < n; i++)
        if (!pc_region_row_ok(&rows[i]))
            return PC_INVALID;
    seed_args a = {rows, n};
    return pc_run_txn(s, seed_body, &a);
}
