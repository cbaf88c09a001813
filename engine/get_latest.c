/*
 * get_latest.c — TiKV's point read without a timestamp (its reads of the
 * latest value): the newest committed value now. A lock whose primary has
 * not reached its commit point is older news and is stepped over; one whose
 * primary committed is rolled forward first (resolve_lock.c), and a commit
 * still waiting for its log flush is read under (DESIGN §4.4).
 */
#include "internal.h"

/* The newest committed value at or below ts, resolving the locks met. */
static pc_rc latest_at(pc_session *s, pc_slice key, uint64_t ts, const pc_liveness *live,
                       pc_buf *value, uint64_t *commit_ts, pc_conflict *c)
{
    pc_txn_status st;
    pc_rc rc;

    /* A few rounds at most: each one removes the lock it met. */
    for (int round = 0; round < 8; round++) {
        if ((rc = pc_read_txn(s, key, ts, false, value, commit_ts, c)) != PC_LOCKED)
            return rc;
        size_t proposed = s->propose != NULL ? s->propose->len : 0;
        rc = pc_resolve_met_lock(s, &c->lock, live, &st);
        if (rc == PC_LOCKED)
            break; /* not committed yet: the newest committed value is below it */
        if (rc != PC_OK)
            return rc;
        /* A proposed resolution is not in the store yet: reading again
         * would meet the same lock and propose it again. The caller
         * applies the batch and asks again (c still names the lock). */
        if (s->propose != NULL && s->propose->len > proposed) {
            value->len = 0;
            return PC_LOCKED;
        }
    }
    return pc_read_txn(s, key, ts, true, value, commit_ts, c);
}

/* The latest durable value: the newest commit of the key whose log flush
 * is still running has not been acknowledged to anybody, so the read goes
 * below it instead of waiting for it (a hot key under constant writes
 * would otherwise keep its readers waiting round after round). */
pc_rc pc_get_latest(pc_session *s, pc_slice key, const pc_liveness *live, pc_buf *value,
                    uint64_t *commit_ts, pc_conflict *conflict)
{
    pc_rc rc = PC_LOCKED;

    if (!pc_key_ok(key) || value == NULL || commit_ts == NULL || conflict == NULL)
        return PC_INVALID;
    for (int round = 0; round < 4; round++) {
        uint64_t in_flight = pc_memlock_oldest_commit(s->e->memlocks, key);
        uint64_t ts = in_flight != 0 ? in_flight - 1 : PC_TS_MAX;
        rc = latest_at(s, key, ts, live, value, commit_ts, conflict);
        /* A commit that became visible meanwhile must be durable before
         * anybody hears of it: read again below it. */
        if ((rc != PC_OK && rc != PC_NOT_FOUND) ||
            !pc_memlock_blocked(s->e->memlocks, key, NULL, true, ts, PC_MEMLOCK_COMMITTED,
                                conflict))
            return rc;
    }
    return PC_LOCKED; /* conflict names the commit in flight: wait for it */
}
