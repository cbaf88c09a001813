/*
 * read.c — snapshot reads (the paper, Figure 6 Get): a lock at or below
 * the read timestamp means a transaction that may commit below it is in
 * flight, so the reader must not guess: it gets the lock back, to resolve
 * or wait on. Otherwise the newest put or delete at or below ts wins;
 * rollback records are stepped over. A leaf: it resolves nothing itself.
 *
 * Commits in flight (memlock.c) are checked twice, never waited on here:
 * before a snapshot read, for a one-phase commit that may still land at or
 * below ts; after any read, for a version it found that is committed but
 * not yet durable (docs/DESIGN.md §4.4). Either answers PC_LOCKED with a
 * lock of start 0, and the caller waits with pc_wait_in_flight.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
    pc_slice key;
    uint64_t ts;
    bool ignore_locks;
    pc_buf *value;
    uint64_t *commit_ts;
    pc_conflict *conflict;
} get_args;

static pc_rc get_body(pc_session *s, void *arg)
{
    get_args *a = arg;
    pc_lock_rec l;
    pc_rc rc;

    a->value->len = 0;
    if (!a->ignore_locks) {
        rc = pc_lock_load(s, a->key, &l);
        if (rc == PC_OK && l.start_ts <= a->ts) {
            pc_conflict_from_lock(a->conflict, a->key, &l);
            return PC_LOCKED;
        }
        if (rc != PC_OK && rc != PC_NOT_FOUND)
            return rc;
    }
    return pc_read_at(s, a->key, a->ts, a->value, a->commit_ts);
}

pc_rc pc_read_txn(pc_session *s, pc_slice key, uint64_t ts, bool ignore_locks, pc_buf *value,
                  uint64_t *commit_ts, pc_conflict *conflict)
{
    get_args a = {key, ts, ignore_locks, value, commit_ts, conflict};
    return pc_run_txn(s, get_body, &a);
}

pc_rc pc_get(pc_session *s, pc_slice key, uint64_t ts, pc_buf *value, uint64_t *commit_ts,
             pc_conflict *conflict)
{
    get_args a = {key, ts, false, value, commit_ts, conflict};
    pc_rc rc;

    if (!pc_key_ok(key) || ts == 0 || value == NULL || commit_ts == NULL || conflict == NULL)
        return PC_INVALID;
    if (pc_memlock_blocked(s->e->memlocks, key, NULL, true, ts, PC_MEMLOCK_SNAPSHOT, conflict))
        return PC_LOCKED;
    rc = pc_run_txn(s, get_body, &a);
    if ((rc == PC_OK || rc == PC_NOT_FOUND) &&
        pc_memlock_blocked(s->e->memlocks, key, NULL, true, ts, PC_MEMLOCK_COMMITTED, conflict))
        return PC_LOCKED;
    return rc;
}

pc_rc pc_wait_in_flight(pc_session *s, const pc_conflict *c, uint64_t deadline_mono_ms)
{
    if (c == NULL || c->lock.start_ts != 0 || c->in_flight_mode == 0)
        return PC_INVALID;
    return pc_memlock_wait(s->e->memlocks, c->lock.key, c->in_flight_ts,
                           (pc_memlock_mode)c->in_flight_mode, deadline_mono_ms);
}

typedef struct {
    pc_slice start, end;
    uint64_t ts;
    size_t limit, max_bytes;
    pc_items *out;
    pc_conflict *conflict;
} scan_args;

/* The first lock at or below ts on a key in [start, bound). */
static pc_rc scan_locks(pc_session *s, const scan_args *a, const uint8_t *bound, size_t blen,
                        bool bounded)
{
    WT_ITEM k, v;
    pc_lock_rec l;
    pc_rc rc;
    int ret;

    if (a->start.len > 0)
        rc = pc_cursor_seek_ge(s, s->lock, a->start.data, a->start.len);
    else
        rc = (ret = s->lock->next(s->lock)) == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    while (rc == PC_OK) {
        if ((ret = s->lock->get_key(s->lock, &k)) != 0 ||
            (ret = s->lock->get_value(s->lock, &v)) != 0)
            return pc_wt_error(s, ret, "lock cursor");
        if (bounded && pc_key_cmp(k.data, k.size, bound, blen) >= 0)
            break;
        if (pc_lock_decode(v.data, v.size, &l) != PC_OK)
            return PC_ERROR;
        if (l.start_ts <= a->ts) {
            pc_conflict_from_lock(a->conflict, (pc_slice){k.data, k.size}, &l);
            return PC_LOCKED;
        }
        ret = s->lock->next(s->lock);
        rc = ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    }
    return rc == PC_NOT_FOUND ? PC_OK : rc;
}

static pc_rc scan_body(pc_session *s, void *arg)
{
    scan_args *a = arg;
    pc_items *out = a->out;
    uint8_t vk[PC_VKEY_MAX], ukey[PC_KEY_MAX];
    size_t ulen = 0;
    uint64_t ts;
    WT_ITEM k;
    pc_rc rc;
    int ret;

    out->n = 0;
    out->arena.len = 0;
    out->more = 0;
    if (a->start.len > 0) {
        size_t eklen = pc_ekey(vk, a->start.data, a->start.len);
        rc = pc_cursor_seek_ge(s, s->write, vk, eklen);
    } else {
        rc = (ret = s->write->next(s->write)) == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    }
    while (rc == PC_OK) {
        if ((ret = s->write->get_key(s->write, &k)) != 0)
            return pc_wt_error(s, ret, "get_key");
        if (pc_vkey_decode(k.data, k.size, ukey, &ulen, &ts) != 0)
            return PC_ERROR;
        if (a->end.len > 0 && pc_key_cmp(ukey, ulen, a->end.data, a->end.len) >= 0)
            break;
        /* Another key in range: stop here if the answer is full, by count
         * or by bytes (the arena; never before the first item, so a scan
         * always moves on). */
        if (out->n == a->limit || (out->n > 0 && out->arena.len >= a->max_bytes)) {
            out->more = 1;
            break;
        }
        /* The visible version of this key, if any, then on to the next key:
         * (key, 0) is past every version of key. */
        size_t voff = out->arena.len;
        uint64_t cts;
        rc = pc_read_at(s, (pc_slice){ukey, ulen}, a->ts, &out->arena, &cts);
        if (rc == PC_OK)
            rc = pc_items_push(out, ukey, ulen, voff, cts);
        if (rc != PC_OK && rc != PC_NOT_FOUND)
            return rc;
        size_t vklen = pc_vkey(vk, ukey, ulen, 0);
        rc = pc_cursor_seek_ge(s, s->write, vk, vklen);
    }
    if (rc != PC_OK && rc != PC_NOT_FOUND)
        return rc;

    /* Locks matter only on the keys this answer covers: up to where it
     * stopped, or the whole range. */
    if (out->more)
        rc = scan_locks(s, a, ukey, ulen, true);
    else
        rc = scan_locks(s, a, a->end.data, a->end.len, a->end.len > 0);
    if (rc != PC_OK)
        return rc;
    pc_items_finish(out);
    return PC_OK;
}

pc_rc pc_scan(pc_session *s, pc_slice start, pc_slice end, uint64_t ts, size_t limit,
              pc_items *out, pc_conflict *conflict)
{
    return pc_scan_bounded(s, start, end, ts, limit, SIZE_MAX, out, conflict);
}

pc_rc pc_scan_bounded(pc_session *s, pc_slice start, pc_slice end, uint64_t ts, size_t limit,
                      size_t max_bytes, pc_items *out, pc_conflict *conflict)
{
    scan_args a = {start, end, ts, limit, max_bytes, out, conflict};
    pc_rc rc;

    if (ts == 0 || limit == 0 || out == NULL || conflict == NULL || start.len > PC_KEY_MAX ||
        end.len > PC_KEY_MAX)
        return PC_INVALID;
    if (pc_memlock_blocked(s->e->memlocks, start, &end, false, ts, PC_MEMLOCK_SNAPSHOT, conflict))
        return PC_LOCKED;
    if ((rc = pc_run_txn(s, scan_body, &a)) != PC_OK)
        return rc;
    /* The items' keys are pointers now; a held key anywhere in the range
     * is enough to wait (the range is small next to a flush). */
    if (pc_memlock_blocked(s->e->memlocks, start, &end, false, ts, PC_MEMLOCK_COMMITTED,
                           conflict)) {
        pc_items_free(out);
        return PC_LOCKED;
    }
    return PC_OK;
}
