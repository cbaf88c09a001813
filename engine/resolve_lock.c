/*
 * resolve_lock.c — lazy cleanup's last step (the paper's
 * BackoffAndMaybeCleanupLock, Figure 6): once the primary's status is known
 * (check_txn_status.c), a lock left by the transaction is rolled forward
 * when the primary committed, rolled back when it was rolled back. Asking
 * the primary and resolving the key are two actions, made by the caller
 * (service/resolve.c): the primary may live in another Raft group than the
 * key (DESIGN §3.5).
 */
#include "internal.h"

pc_rc pc_resolve_lock(pc_session *s, pc_slice key, uint64_t start_ts, uint64_t commit_ts)
{
    if (commit_ts != 0)
        return pc_commit(s, &key, 1, start_ts, commit_ts);
    return pc_rollback(s, &key, 1, start_ts);
}
