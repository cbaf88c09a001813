/*
 * notify.c — the notify column (the paper's notifications, §2.4): a hint that an observed
 * key changed. A commit writes key -> commit_ts here, in the same
 * WiredTiger transaction as its write record, when the key is under a
 * prefix some observer watches. It is not Percolator state: observers
 * read it to find dirty keys without scanning the data, and clear it
 * after they acknowledge.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

pc_rc pc_notify_set_prefixes(pc_engine *e, const pc_slice *prefixes, size_t n)
{
    pc_buf b = {0};

    for (size_t i = 0; i < n; i++) {
        uint8_t len[4] = {(uint8_t)(prefixes[i].len >> 24), (uint8_t)(prefixes[i].len >> 16),
                          (uint8_t)(prefixes[i].len >> 8), (uint8_t)prefixes[i].len};
        if (prefixes[i].len > PC_KEY_MAX || pc_buf_append(&b, len, 4) != PC_OK ||
            pc_buf_append(&b, prefixes[i].data, prefixes[i].len) != PC_OK) {
            pc_buf_free(&b);
            return prefixes[i].len > PC_KEY_MAX ? PC_INVALID : PC_NOMEM;
        }
    }
    pthread_rwlock_wrlock(&e->notify_mu);
    pc_buf_free(&e->notify_prefixes);
    e->notify_prefixes = b;
    e->notify_count = n;
    pthread_rwlock_unlock(&e->notify_mu);
    return PC_OK;
}

static bool observed(pc_engine *e, pc_slice key)
{
    const uint8_t *p = (const uint8_t *)e->notify_prefixes.data;
    size_t off = 0;

    for (size_t i = 0; i < e->notify_count; i++) {
        size_t len = (size_t)p[off] << 24 | (size_t)p[off + 1] << 16 |
                     (size_t)p[off + 2] << 8 | p[off + 3];
        off += 4;
        if (len <= key.len && memcmp(p + off, key.data, len) == 0)
            return true;
        off += len;
    }
    return false;
}

pc_rc pc_notify_mark(pc_session *s, pc_slice key, uint64_t commit_ts)
{
    pc_engine *e = s->e;
    uint8_t ts[8];
    bool mark;

    pthread_rwlock_rdlock(&e->notify_mu);
    mark = e->notify_count > 0 && observed(e, key);
    pthread_rwlock_unlock(&e->notify_mu);
    if (!mark)
        return PC_OK;
    for (int i = 7; i >= 0; i--, commit_ts >>= 8)
        ts[i] = (uint8_t)commit_ts;
    return pc_cursor_put(s, s->notify, key.data, key.len, ts, sizeof(ts));
}

static uint64_t get_ts(const WT_ITEM *v)
{
    uint64_t ts = 0;
    for (size_t i = 0; i < v->size && i < 8; i++)
        ts = (ts << 8) | ((const uint8_t *)v->data)[i];
    return ts;
}

typedef struct {
    pc_slice start, end, from;
    size_t limit;
    pc_items *out;
} notify_scan_args;

/* Append the entries of [lo, hi) until the limit. */
static pc_rc scan_part(pc_session *s, notify_scan_args *a, pc_slice lo, pc_slice hi)
{
    WT_CURSOR *c = s->notify;
    WT_ITEM k, v;
    pc_rc rc;
    int ret;

    if (lo.len > 0)
        rc = pc_cursor_seek_ge(s, c, lo.data, lo.len);
    else
        rc = (ret = c->next(c)) == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    while (rc == PC_OK && a->out->n < a->limit) {
        if ((ret = c->get_key(c, &k)) != 0 || (ret = c->get_value(c, &v)) != 0)
            return pc_wt_error(s, ret, "notify cursor");
        if (hi.len > 0 && pc_key_cmp(k.data, k.size, hi.data, hi.len) >= 0)
            break;
        if ((rc = pc_items_push(a->out, k.data, k.size, a->out->arena.len, get_ts(&v))) != PC_OK)
            return rc;
        ret = c->next(c);
        rc = ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    }
    if (rc == PC_OK && a->out->n == a->limit)
        a->out->more = 1;
    return rc == PC_NOT_FOUND ? PC_OK : rc;
}

static pc_rc notify_scan_body(pc_session *s, void *arg)
{
    notify_scan_args *a = arg;
    pc_rc rc;

    a->out->n = 0;
    a->out->arena.len = 0;
    a->out->more = 0;
    /* From `from` to the end, then from the start up to `from`. */
    pc_slice from = pc_key_cmp(a->from.data, a->from.len, a->start.data, a->start.len) > 0
                        ? a->from : a->start;
    if ((rc = scan_part(s, a, from, a->end)) != PC_OK)
        return rc;
    int ret = s->notify->reset(s->notify);
    if (ret != 0)
        return pc_wt_error(s, ret, "cursor reset");
    if (from.data != a->start.data && a->out->n < a->limit &&
        (rc = scan_part(s, a, a->start, from)) != PC_OK)
        return rc;
    pc_items_finish(a->out);
    return PC_OK;
}

pc_rc pc_notify_scan(pc_session *s, pc_slice start, pc_slice end, pc_slice from, size_t limit,
                     pc_items *out)
{
    notify_scan_args a = {start, end, from, limit, out};
    if (limit == 0 || out == NULL)
        return PC_INVALID;
    return pc_run_txn(s, notify_scan_body, &a);
}

typedef struct {
    pc_slice key;
    uint64_t upto;
} notify_clear_args;

static pc_rc notify_clear_body(pc_session *s, void *arg)
{
    notify_clear_args *a = arg;
    WT_ITEM v;
    pc_rc rc = pc_cursor_get(s, s->notify, a->key.data, a->key.len, &v);
    if (rc == PC_NOT_FOUND)
        return PC_OK;
    if (rc != PC_OK)
        return rc;
    /* A newer write keeps the key dirty for the next round. */
    if (get_ts(&v) > a->upto)
        return PC_OK;
    return pc_cursor_del(s, s->notify, a->key.data, a->key.len);
}

pc_rc pc_notify_clear(pc_session *s, pc_slice key, uint64_t upto_ts)
{
    notify_clear_args a = {key, upto_ts};
    if (!pc_key_ok(key))
        return PC_INVALID;
    pc_rc rc = pc_latch_keys(s, &key, 1);
    return rc == PC_OK ? pc_run_txn(s, notify_clear_body, &a) : rc;
}
