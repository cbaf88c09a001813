/*
 * reader.c — reads that meet locks.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "keyspace.h"
#include "reader.h"
#include "region_call.h"
#include "resolve.h"
#include "timeutil.h"

pc_rc rd_resolve(svc *s, pc_session *ps, const pc_lock_view *lock)
{
    pc_txn_status st;
    return rs_resolve_met_lock(s, ps, lock, s->m.resolved, &st);
}

bool rd_handle_lock(svc *s, pc_session *ps, const pc_conflict *c, uint64_t deadline_ms,
                    unsigned *attempt, pc_rc *rc)
{
    *rc = PC_LOCKED;
    /* Serving another node's call, a lock is its sender's to resolve: the
     * resolution would be calls to other nodes, made by a worker their
     * own calls may be waiting for (region_call.h). */
    if (c->lock.start_ts != 0 && region_call_for_run() != NULL)
        return false;
    /* start_ts 0 marks a commit in flight (a one-phase commit, or a commit
     * waiting for its log flush): nothing to resolve, it ends by itself;
     * wait for it, never past the deadline. */
    if (c->lock.start_ts == 0) {
        if (*attempt == 0)
            metrics_inc(s->m.lock_waits, 1);
        (*attempt)++;
        if (pc_wait_in_flight(ps, c, deadline_ms) == PC_OK)
            return true;
        metrics_inc(s->m.lock_wait_timeouts, 1);
        return false;
    }
    pc_rc r = rd_resolve(s, ps, &c->lock);
    if (r == PC_OK)
        return true;
    if (r != PC_LOCKED) {
        *rc = r;
        return false;
    }
    uint64_t now = time_mono_ms();
    if (now >= deadline_ms) {
        metrics_inc(s->m.lock_wait_timeouts, 1);
        return false;
    }
    if (*attempt == 0)
        metrics_inc(s->m.lock_waits, 1);
    /* 1, 2, 4 .. 32 ms, never past the deadline. */
    uint64_t pause = 1u << (*attempt < 5 ? *attempt : 5);
    if (pause > deadline_ms - now)
        pause = deadline_ms - now;
    (*attempt)++;
    time_sleep_ms((unsigned)pause);
    return true;
}

/* After a read of the store: whether a proposal failed since the read's
 * fence (svc_read_epoch). Its commits in flight were let go when its
 * writers heard, yet its entry may still be committed by the next leader
 * below this read's timestamp: the read may have missed one, so it fences
 * again (refused once this member no longer leads) and reads again; after
 * a few such rounds it gives up, PC_UNAVAILABLE (503, retried). */
#define READ_FENCES 4
static bool fence_again(uint64_t now, uint64_t epoch, int *fences, pc_rc *rc)
{
    if (now == epoch)
        return false;
    if (++*fences < READ_FENCES)
        return true;
    *rc = PC_UNAVAILABLE;
    return false;
}

static pc_rc scan_here(svc *s, pc_session *ps, pc_slice start, pc_slice end, uint64_t ts,
                       size_t limit, size_t max_bytes, pc_items *out, pc_conflict *c);

pc_rc rd_here(svc *s, pc_session *ps, const act_call *a, act_answer *out)
{
    if (a->kind == ACT_GET)
        return rd_get_here(s, ps, a->keys[0], a->ts, out->value, out->commit_ts, out->c);
    if (a->kind == ACT_GET_LATEST)
        return rd_get_latest_here(s, ps, a->keys[0], a->step_over, out->value, out->commit_ts,
                                  out->c, true);
    if (a->kind == ACT_SCAN) /* one region's part (scan_by_region) */
        return scan_here(s, ps, a->keys[0], a->keys[1], a->ts, a->limit,
                         a->max_bytes > s->cfg.max_reply_bytes ? s->cfg.max_reply_bytes
                                                               : a->max_bytes,
                         out->items, out->c);
    return PC_INVALID;
}

/* A read sent to another node comes back with the lock it met, if any
 * (it resolves none: rd_handle_lock): the lock is resolved here, with
 * the same waits as a read here, and the read sent again. */
pc_rc rd_get(svc *s, pc_session *ps, pc_slice key, uint64_t ts, pc_buf *value,
             uint64_t *commit_ts, pc_conflict *c)
{
    char url[RAFT_PEER_ADDR_MAX];
    if (!region_call_elsewhere(s, key, url, sizeof url))
        return rd_get_here(s, ps, key, ts, value, commit_ts, c);
    uint64_t deadline = time_mono_ms() + s->cfg.lock_wait_ms;
    unsigned attempt = 0;
    act_call a = {.kind = ACT_GET, .keys = &key, .n = 1, .ts = ts};
    for (;;) {
        pc_rc rc = region_call_route(
            s, ps, &a, &(act_answer){.c = c, .value = value, .commit_ts = commit_ts}, rd_here);
        if (rc != PC_LOCKED || c->lock.start_ts == 0 ||
            !rd_handle_lock(s, ps, c, deadline, &attempt, &rc))
            return rc;
    }
}

pc_rc rd_get_here(svc *s, pc_session *ps, pc_slice key, uint64_t ts, pc_buf *value,
                  uint64_t *commit_ts, pc_conflict *c)
{
    uint64_t deadline = time_mono_ms() + s->cfg.lock_wait_ms;
    unsigned attempt = 0;
    int fences = 0;
    pc_rc rc;

    do {
        uint64_t epoch = svc_read_epoch(s, key);
        if ((rc = svc_read_fence(s, key)) != PC_OK)
            return rc;
        while ((rc = pc_get(ps, key, ts, value, commit_ts, c)) == PC_LOCKED)
            if (!rd_handle_lock(s, ps, c, deadline, &attempt, &rc))
                break;
        if (fence_again(svc_read_epoch(s, key), epoch, &fences, &rc))
            continue;
        return rc;
    } while (true);
}

pc_rc rd_get_latest(svc *s, pc_session *ps, pc_slice key, pc_buf *value, uint64_t *commit_ts,
                    pc_conflict *c, bool may_wait)
{
    char url[RAFT_PEER_ADDR_MAX];
    /* Another node's answer is a wait: a worker's (see rd_get_latest_here). */
    if (!region_call_elsewhere(s, key, url, sizeof url))
        return rd_get_latest_here(s, ps, key, false, value, commit_ts, c, may_wait);
    if (!may_wait)
        return PC_LOCKED;
    /* Sent: the locks it meets come back, and are resolved here as
     * rd_get_latest_here does (a few, then stepped over). */
    act_call a = {.kind = ACT_GET_LATEST, .keys = &key, .n = 1};
    unsigned resolved = 0;
    for (int round = 0; round < 64; round++) {
        pc_rc rc = region_call_route(
            s, ps, &a, &(act_answer){.c = c, .value = value, .commit_ts = commit_ts}, rd_here);
        if (rc != PC_LOCKED || c->lock.start_ts == 0)
            return rc;
        if (resolved++ < 8) {
            rc = rd_resolve(s, ps, &c->lock);
            if (rc != PC_OK && rc != PC_LOCKED)
                return rc;
            a.step_over = rc == PC_LOCKED;
        } else {
            a.step_over = true;
        }
    }
    return PC_LOCKED;
}

pc_rc rd_get_latest_here(svc *s, pc_session *ps, pc_slice key, bool step_over, pc_buf *value,
                         uint64_t *commit_ts, pc_conflict *c, bool may_wait)
{
    uint64_t deadline = time_mono_ms() + s->cfg.lock_wait_ms;
    unsigned attempt = 0, resolved = 0;
    int fences = 0;
again:;
    uint64_t epoch = svc_read_epoch(s, key);
    /* A caller that may not wait reads only when its fence needs no wait
     * (else PC_LOCKED with no lock: it hands the read to a worker). */
    if (!may_wait && !svc_read_now(s, key))
        return PC_LOCKED;
    pc_rc rc = may_wait ? svc_read_fence(s, key) : PC_OK;

    if (rc != PC_OK)
        return rc;
    /* The engine's read writes nothing; the locks it meets are resolved
     * here, each in its own writes (resolve.h), and the key read again.
     * Bounded twice over: by the deadline, and by a number of rounds no
     * honest run comes near (each round resolves, steps over or waits). */
    for (int round = 0;; round++) {
        if (round == 64)
            return PC_LOCKED; /* c names the last lock or commit met */
        rc = pc_get_latest(ps, key, step_over, value, commit_ts, c);
        uint64_t now = rc != PC_LOCKED ? svc_read_epoch(s, key) : epoch; /* a lock: no look */
        if (now != epoch) {
            /* See fence_again; a caller that may not wait hands it on. */
            if (!may_wait) {
                *c = (pc_conflict){0};
                return PC_LOCKED;
            }
            if (fence_again(now, epoch, &fences, &rc))
                goto again;
            return rc;
        }
        if (rc != PC_LOCKED)
            return rc;
        if (c->lock.start_ts != 0) {
            /* A few resolutions at most: each removes the lock it met. A
             * lock whose primary has not reached its commit point (or one
             * more after those) is older news: the newest committed value
             * is below it. */
            if (!may_wait && svc_replicated(s))
                return PC_LOCKED; /* a group's resolution is a Raft round: a worker's */
            if (region_call_for_run() != NULL)
                return PC_LOCKED; /* serving a call: its sender resolves (rd_handle_lock) */
            if (resolved++ < 8) {
                rc = rd_resolve(s, ps, &c->lock);
                if (rc != PC_OK && rc != PC_LOCKED)
                    return rc;
                step_over = rc == PC_LOCKED;
            } else {
                step_over = true;
            }
            continue;
        }
        /* A commit in flight: wait for it, never past the deadline. */
        if (!may_wait || !rd_handle_lock(s, ps, c, deadline, &attempt, &rc))
            return rc;
    }
}

/* A scan of regions all led here: one fence over them all. */
static pc_rc scan_here(svc *s, pc_session *ps, pc_slice start, pc_slice end, uint64_t ts,
                       size_t limit, size_t max_bytes, pc_items *out, pc_conflict *c)
{
    uint64_t deadline = time_mono_ms() + s->cfg.lock_wait_ms;
    unsigned attempt = 0;
    int fences = 0;
    pc_rc rc;

    do {
        pc_slice to = end.len > 0 ? end : (pc_slice){NULL, 0}; /* end.len 0: no end */
        uint64_t epoch = svc_read_epoch_range(s, start, to);
        if ((rc = svc_read_fence_range(s, start, to)) != PC_OK)
            return rc;
        while ((rc = pc_scan_bounded(ps, start, end, ts, limit, max_bytes, out, c)) == PC_LOCKED)
            if (!rd_handle_lock(s, ps, c, deadline, &attempt, &rc))
                break;
        uint64_t now = svc_read_epoch_range(s, start, to);
        if (fence_again(now, epoch, &fences, &rc)) {
            pc_items_free(out); /* read again from scratch */
            continue;
        }
        if (rc != PC_OK && now != epoch)
            pc_items_free(out);
        return rc;
    } while (true);
}

/* The region holding key, and where the part of [key, end) in it ends
 * (into buf; *last: it is the scan's end). False: no region holds key (a
 * hole, as a member that missed a split has: nobody vouches for it). */
static bool part_of(svc *s, pc_slice key, pc_slice end, char *buf, pc_slice *part_end,
                    bool *last)
{
    region *r = s->regions != NULL ? router_find(s->regions, key.data, key.len) : NULL;
    if (r == NULL)
        return false;
    bool before = !r->unbounded && (end.len == 0 || pc_key_cmp(r->end.data, r->end.len, end.data,
                                                               end.len) < 0);
    if (!before || r->end.len > PC_KEY_MAX) {
        *part_end = end;
        *last = true;
        return true;
    }
    memcpy(buf, r->end.data, r->end.len);
    *part_end = (pc_slice){buf, r->end.len};
    *last = false;
    return true;
}

/* Whether a region of [start, end) is led by another node. */
static bool some_part_elsewhere(svc *s, pc_slice start, pc_slice end)
{
    char buf[2][PC_KEY_MAX], url[RAFT_PEER_ADDR_MAX];
    pc_slice key = start, part;
    bool last = false;
    for (int i = 0; !last; i++) {
        if (region_call_elsewhere(s, key, url, sizeof url))
            return true;
        if (!part_of(s, key, end, buf[i % 2], &part, &last))
            return false; /* a hole: the fence refuses it */
        key = part;
    }
    return false;
}

/* A scan cut at region bounds, each part read where its region is led
 * (region_call_route: here, or sent), the parts' items joined in key
 * order; it stops, more = 1, where a part did or the limit is reached. */
static pc_rc scan_by_region(svc *s, pc_session *ps, pc_slice start, pc_slice end, uint64_t ts,
                            size_t limit, size_t max_bytes, pc_items *out, pc_conflict *c)
{
    char buf[2][PC_KEY_MAX];
    pc_slice key = start, part_end;
    pc_items part = {0};
    size_t bytes = 0;
    bool last = false;
    pc_rc rc = PC_OK;

    pc_items_free(out);
    for (int i = 0; !last && rc == PC_OK; i++) {
        if (out->n >= limit || bytes >= max_bytes) {
            out->more = 1;
            break;
        }
        if (!part_of(s, key, end, buf[i % 2], &part_end, &last)) {
            rc = PC_UNAVAILABLE;
            break;
        }
        pc_slice keys[2] = {key, part_end};
        uint64_t deadline = time_mono_ms() + s->cfg.lock_wait_ms;
        unsigned attempt = 0;
        /* What a call carries at most (region_call.h); a part that stops
         * there says more = 1, and the scan stops with it. */
        size_t lim = limit - out->n, mb = max_bytes - bytes;
        if (mb > s->cfg.max_reply_bytes) /* what a node answers in one part at most */
            mb = s->cfg.max_reply_bytes;
        act_call a = {.kind = ACT_SCAN, .keys = keys, .n = 2, .ts = ts,
                      .limit = lim < REGION_CALL_MAX_SCAN ? lim : REGION_CALL_MAX_SCAN,
                      .max_bytes = mb < ((size_t)1 << 40) ? mb : ((size_t)1 << 40)};
        /* A lock met there is resolved here and the part read again. */
        do
            rc = region_call_route(s, ps, &a, &(act_answer){.c = c, .items = &part}, rd_here);
        while (rc == PC_LOCKED && c->lock.start_ts != 0 &&
               rd_handle_lock(s, ps, c, deadline, &attempt, &rc));
        if (rc == PC_OK)
            rc = pc_items_append(out, &part);
        bytes += part.arena.len;
        if (rc == PC_OK && part.more)
            out->more = 1;
        pc_items_free(&part);
        if (out->more)
            break;
        key = part_end;
    }
    if (rc != PC_OK)
        pc_items_free(out);
    return rc;
}

static pc_rc scan_bounded(svc *s, pc_session *ps, pc_slice start, pc_slice end, uint64_t ts,
                          size_t limit, size_t max_bytes, pc_items *out, pc_conflict *c)
{
    if (s->calls != NULL && some_part_elsewhere(s, start, end))
        return scan_by_region(s, ps, start, end, ts, limit, max_bytes, out, c);
    return scan_here(s, ps, start, end, ts, limit, max_bytes, out, c);
}

pc_rc rd_scan(svc *s, pc_session *ps, pc_slice start, pc_slice end, uint64_t ts, size_t limit,
              pc_items *out, pc_conflict *c)
{
    return scan_bounded(s, ps, start, end, ts, limit, SIZE_MAX, out, c);
}

pc_rc rd_scan_view(svc *s, pc_session *ps, const char *start, size_t slen, const char *end,
                   size_t elen, uint64_t ts, size_t limit, const txn *own, rd_view *v,
                   pc_conflict *c)
{
    char sbuf[KS_MAX + 1], ebuf[KS_MAX + 1];
    pc_slice es, ee;
    size_t deletes = 0;

    *v = (rd_view){.own = own, .limit = limit};
    /* The session's writes in range, and how many of them are deletes:
     * each may hide one stored key, so ask the engine for that many more. */
    if (own != NULL) {
        v->wi = txn_lower_bound(own, start, slen);
        v->wend = elen > 0 ? txn_lower_bound(own, end, elen) : own->nw;
        for (size_t i = v->wi; i < v->wend; i++)
            deletes += own->w[i].deleted;
    }
    ks_user_range(start, slen, end, elen, sbuf, &es, ebuf, &ee);
    /* The engine reads no more than a page's bytes: its raw keys and
     * values are never more than their JSON (reply_scan_page). */
    return scan_bounded(s, ps, es, ee, ts, limit + 1 + deletes, s->cfg.max_reply_bytes, &v->it,
                        c);
}

void rd_view_each(const rd_view *v, bool (*fn)(void *arg, const rd_item *it), void *arg)
{
    const pc_items *it = &v->it;
    const txn *own = v->own;
    size_t ei = 0, wi = v->wi;

    /* Merge, both sides in key order. When the engine stopped at its
     * limit, nothing past its last key is known, so own writes past it
     * wait for the next page. */
    pc_slice stop = {NULL, 0};
    if (it->more && it->n > 0)
        stop = it->items[it->n - 1].key;
    for (;;) {
        pc_slice ek = {NULL, 0};
        bool have_e = ei < it->n && ks_is_user(it->items[ei].key, &ek);
        const txn_write *w = wi < v->wend ? &own->w[wi] : NULL;
        if (w != NULL && stop.data != NULL &&
            pc_key_cmp(w->key, w->klen, (const char *)stop.data + 1, stop.len - 1) > 0)
            w = NULL;
        if (!have_e && w == NULL)
            return;
        int cmp = !have_e ? 1 : w == NULL ? -1 : pc_key_cmp(ek.data, ek.len, w->key, w->klen);
        if (cmp < 0) {
            rd_item x = {ek, it->items[ei].value, it->items[ei].commit_ts};
            ei++;
            if (!fn(arg, &x))
                return;
            continue;
        }
        if (cmp == 0)
            ei++; /* the session's own write wins */
        wi++;
        if (w->deleted)
            continue;
        rd_item x = {{w->key, w->klen}, {w->val, w->vlen}, 0};
        if (!fn(arg, &x))
            return;
    }
}

void rd_view_free(rd_view *v)
{
    pc_items_free(&v->it);
}
