/*
 * get_latest.c — TiKV's point read without a timestamp (its reads of the
 * latest value): the newest committed value now. A pure read: a lock in
 * the way is returned to the caller, which resolves it above the engine
 * (service/resolve.c: the primary may be in another Raft group) and reads
 * again, or, if the lock's primary has not reached its commit point, reads
 * again stepping over it (older news). A commit still in flight (its batch
 * not yet durable and applied) is read under (DESIGN §4.4).
 */
#include "internal.h"

/* The latest durable value: the newest commit of the key still in flight
 * has not been acknowledged to anybody, so the read goes
 * below it instead of waiting for it (a hot key under constant writes
 * would otherwise keep its readers waiting round after round). */
pc_rc pc_get_latest(pc_session *s, pc_slice key, bool step_over_locks, pc_buf *value,
                    uint64_t *commit_ts, pc_conflict *conflict)
{
    pc_rc rc = PC_LOCKED;

    if (!pc_key_ok(key) || value == NULL || commit_ts == NULL || conflict == NULL)
        return PC_INVALID;
    for (int round = 0; round < 4; round++) {
        uint64_t in_flight = pc_memlock_oldest_commit(s->e->memlocks, key);
        uint64_t ts = in_flight != 0 ? in_flight - 1 : PC_TS_MAX;
        rc = pc_read_txn(s, key, ts, step_over_locks, value, commit_ts, conflict);
        /* A commit that became visible meanwhile must be durable before
         * anybody hears of it: read again below it. */
        if ((rc != PC_OK && rc != PC_NOT_FOUND) ||
            !pc_memlock_blocked(s->e->memlocks, key, NULL, true, ts, PC_MEMLOCK_COMMITTED,
                                conflict))
            return rc;
    }
    return PC_LOCKED; /* conflict names the commit in flight: wait for it */
}
