/*
 * resolve_lock.c — lazy cleanup (the paper's BackoffAndMaybeCleanupLock, Figure 6):
 * a lock left by a transaction is rolled forward when its primary
 * committed, rolled back when the primary was rolled back, and left alone
 * (the caller waits) while the primary's owner is alive.
 */
#include "internal.h"

pc_rc pc_resolve_lock(pc_session *s, pc_slice key, uint64_t start_ts, uint64_t commit_ts)
{
    if (commit_ts != 0)
        return pc_commit(s, &key, 1, start_ts, commit_ts);
    return pc_rollback(s, &key, 1, start_ts);
}

/* The lock was found by a read without latches: in propose mode both keys
 * are latched here, together, and the status check and the resolution
 * read them again under the latches. */
pc_rc pc_resolve_met_lock(pc_session *s, const pc_lock_view *lock, const pc_liveness *live,
                          pc_txn_status *st)
{
    pc_slice both[2] = {lock->primary, lock->key};
    pc_rc rc = pc_latch_keys(s, both, 2);

    if (rc == PC_OK)
        rc = pc_check_txn_status(s, lock->primary, lock->start_ts, live, st);
    if (rc != PC_OK)
        return rc;
    switch (st->state) {
    case PC_TXN_COMMITTED:
        return pc_resolve_lock(s, lock->key, lock->start_ts, st->commit_ts);
    case PC_TXN_ROLLED_BACK:
        return pc_resolve_lock(s, lock->key, lock->start_ts, 0);
    case PC_TXN_LOCKED:
        break;
    }
    return PC_LOCKED;
}
