/*
 * lock_scan.c — walk the outstanding locks in key order, for the janitor
 * and for operators (/v1/locks). The lock table holds only locks of
 * transactions in flight or abandoned, so it stays small.
 */
#include <string.h>

#include "internal.h"

typedef struct {
    pc_slice after;
    bool inclusive; /* from after itself (pc_lock_scan_from) */
    size_t limit;
    int (*fn)(void *, const pc_lock_view *);
    void *arg;
} lock_scan_args;

static pc_rc lock_scan_body(pc_session *s, void *arg)
{
    lock_scan_args *a = arg;
    WT_CURSOR *c = s->lock;
    WT_ITEM k, v;
    pc_lock_rec l;
    size_t seen = 0;
    pc_rc rc;
    int ret;

    if (a->after.len > 0)
        rc = pc_cursor_seek_ge(s, c, a->after.data, a->after.len);
    else
        rc = (ret = c->next(c)) == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    while (rc == PC_OK && seen < a->limit) {
        if ((ret = c->get_key(c, &k)) != 0 || (ret = c->get_value(c, &v)) != 0)
            return pc_wt_error(s, ret, "lock cursor");
        bool is_after = a->after.len == 0 || a->inclusive || k.size != a->after.len ||
                        memcmp(k.data, a->after.data, k.size) != 0;
        if (is_after) {
            if (pc_lock_decode(v.data, v.size, &l) != PC_OK)
                return PC_ERROR;
            pc_lock_view view = {
                .op = l.op, .start_ts = l.start_ts, .wall_ms = l.wall_ms, .ttl_ms = l.ttl_ms,
                .key = {k.data, k.size}, .primary = l.primary, .owner = l.owner,
            };
            seen++;
            if (a->fn(a->arg, &view) != 0)
                break;
        }
        ret = c->next(c);
        rc = ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    }
    return rc == PC_NOT_FOUND ? PC_OK : rc;
}

static pc_rc lock_scan(pc_session *s, pc_slice from, bool inclusive, size_t limit,
                       int (*fn)(void *arg, const pc_lock_view *lock), void *arg)
{
    lock_scan_args a = {from, inclusive, limit, fn, arg};

    if (fn == NULL || from.len > PC_KEY_MAX)
        return PC_INVALID;
    return pc_run_txn(s, lock_scan_body, &a);
}

pc_rc pc_lock_scan(pc_session *s, pc_slice after, size_t limit,
                   int (*fn)(void *arg, const pc_lock_view *lock), void *arg)
{
    return lock_scan(s, after, false, limit, fn, arg);
}

pc_rc pc_lock_scan_from(pc_session *s, pc_slice from, size_t limit,
                        int (*fn)(void *arg, const pc_lock_view *lock), void *arg)
{
    return lock_scan(s, from, true, limit, fn, arg);
}
