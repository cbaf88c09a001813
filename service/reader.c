/*
 * reader.c — reads that meet locks.
 */
#include <time.h>

#include "reader.h"
#include "timeutil.h"

pc_rc rd_resolve(svc *s, pc_session *ps, const pc_lock_view *lock)
{
    pc_liveness live = svc_liveness(s);
    pc_txn_status st;
    pc_rc rc = pc_resolve_met_lock(ps, lock, &live, &st);

    if (rc == PC_OK)
        metrics_inc(metrics_series_get(s->m.resolved,
                                       st.state == PC_TXN_COMMITTED ? "rolled_forward"
                                                                    : "rolled_back",
                                       NULL),
                    1);
    return rc;
}

bool rd_handle_lock(svc *s, pc_session *ps, const pc_conflict *c, uint64_t deadline_ms,
                    unsigned *attempt, pc_rc *rc)
{
    *rc = PC_LOCKED;
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

pc_rc rd_get(svc *s, pc_session *ps, pc_slice key, uint64_t ts, pc_buf *value,
             uint64_t *commit_ts, pc_conflict *c)
{
    uint64_t deadline = time_mono_ms() + s->cfg.lock_wait_ms;
    unsigned attempt = 0;
    pc_rc rc;

    while ((rc = pc_get(ps, key, ts, value, commit_ts, c)) == PC_LOCKED)
        if (!rd_handle_lock(s, ps, c, deadline, &attempt, &rc))
            break;
    return rc;
}

pc_rc rd_get_latest(svc *s, pc_session *ps, pc_slice key, pc_buf *value, uint64_t *commit_ts,
                    pc_conflict *c, bool may_wait)
{
    uint64_t deadline = time_mono_ms() + s->cfg.lock_wait_ms;
    unsigned attempt = 0;
    pc_rc rc;

    for (;;) {
        pc_liveness live = svc_liveness(s);
        rc = pc_get_latest(ps, key, &live, value, commit_ts, c);
        if (rc != PC_LOCKED || !may_wait || !rd_handle_lock(s, ps, c, deadline, &attempt, &rc))
            return rc;
    }
}

pc_rc rd_scan(svc *s, pc_session *ps, pc_slice start, pc_slice end, uint64_t ts, size_t limit,
              pc_items *out, pc_conflict *c)
{
    uint64_t deadline = time_mono_ms() + s->cfg.lock_wait_ms;
    unsigned attempt = 0;
    pc_rc rc;

    while ((rc = pc_scan(ps, start, end, ts, limit, out, c)) == PC_LOCKED)
        if (!rd_handle_lock(s, ps, c, deadline, &attempt, &rc))
            break;
    return rc;
}
