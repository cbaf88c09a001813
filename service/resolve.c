/*
 * resolve.c — see resolve.h.
 */
#include "actions.h"
#include "resolve.h"

const char *rs_outcome(const pc_txn_status *st)
{
    return st->state == PC_TXN_COMMITTED ? "rolled_forward" : "rolled_back";
}

/* Two calls, as TiKV's client does (CheckTxnStatus on the primary's
 * region, then ResolveLock on the key's): in a Raft group each is its own
 * proposal, applied before the next begins; on a single node each writes
 * directly. Nothing holds the two together, and nothing needs to: the
 * primary is the transaction's one point of decision (the paper, Peng &
 * Dabek, OSDI 2010, §2.2 and Figure 6 BackoffAndMaybeCleanupLock; DESIGN
 * §3.5), so once it reads committed or rolled back that stays so, and
 * both calls are idempotent: another resolver (a reader, the janitor)
 * acting between them, or the owner committing this key itself, leaves
 * the second call nothing to undo. */
pc_rc rs_resolve_met_lock(svc *s, pc_session *ps, const pc_lock_view *lock,
                          metrics_family *counted, pc_txn_status *st)
{
    pc_rc rc = act_check_txn_status(s, ps, lock->primary, lock->start_ts, lock->owner, st);
    if (rc != PC_OK)
        return rc;
    if (st->state == PC_TXN_LOCKED)
        return PC_LOCKED; /* its owner is alive: the caller waits or steps over */
    uint64_t commit_ts = st->state == PC_TXN_COMMITTED ? st->commit_ts : 0;
    rc = act_resolve_lock(s, ps, lock->key, lock->start_ts, commit_ts);
    if (rc == PC_OK)
        metrics_inc(metrics_series_get(counted, rs_outcome(st), NULL), 1);
    return rc;
}
