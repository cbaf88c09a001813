/*
 * check_txn_status.c — what became of transaction start_ts, asked of its
 * primary key, the one place where its fate is decided (the paper: "the
 * primary lock is the synchronisation point"; DESIGN §3.5):
 *
 *   primary's write record is a commit     -> committed at commit_ts
 *   primary's write record is a rollback   -> rolled back
 *   primary still locked, owner alive      -> locked: wait
 *   primary still locked, owner dead or the lock's wall time + TTL past
 *                                          -> roll it back now
 *   neither lock nor record                -> write a rollback record now,
 *                                             so a late prewrite fails
 *
 * The primary is latched from the read to the apply, so a commit of the
 * primary and its rollback by a cleaner cannot both succeed. A commit
 * point still in flight (pc_commit_primary holds it until its batch is
 * applied) answers "locked": nobody rolls a secondary forward from a
 * commit point a crash could undo.
 */
#include <string.h>

#include "internal.h"

typedef struct {
    pc_slice primary;
    uint64_t start_ts;
    const pc_liveness *live;
    pc_txn_status *st;
} status_args;

static pc_rc status_body(pc_session *s, void *arg)
{
    status_args *a = arg;
    pc_lock_rec l;
    pc_write_rec w;
    uint64_t cts;
    pc_rc rc;

    memset(a->st, 0, sizeof(*a->st));
    rc = pc_lock_load(s, a->primary, &l);
    if (rc == PC_OK && l.start_ts == a->start_ts) {
        if (!pc_lock_dead(&l, a->live)) {
            a->st->state = PC_TXN_LOCKED;
            a->st->wall_ms = l.wall_ms;
            a->st->ttl_ms = l.ttl_ms;
            return PC_OK;
        }
        if ((rc = pc_rollback_key(s, a->primary, a->start_ts)) != PC_OK)
            return rc;
        a->st->state = PC_TXN_ROLLED_BACK;
        a->st->rolled_back_now = 1;
        return PC_OK;
    }
    if (rc != PC_OK && rc != PC_NOT_FOUND)
        return rc;
    rc = pc_find_txn_write(s, a->primary, a->start_ts, &w, &cts);
    if (rc == PC_OK) {
        if (w.type == PC_W_ROLLBACK) {
            a->st->state = PC_TXN_ROLLED_BACK;
        } else {
            a->st->state = PC_TXN_COMMITTED;
            a->st->commit_ts = cts;
        }
        return PC_OK;
    }
    if (rc != PC_NOT_FOUND)
        return rc;
    if ((rc = pc_put_rollback_record(s, a->primary, a->start_ts)) != PC_OK)
        return rc;
    a->st->state = PC_TXN_ROLLED_BACK;
    a->st->rolled_back_now = 1;
    return PC_OK;
}

pc_rc pc_check_txn_status(pc_session *s, pc_slice primary, uint64_t start_ts,
                          const pc_liveness *live, pc_txn_status *st)
{
    status_args a = {primary, start_ts, live, st};

    if (!pc_key_ok(primary) || start_ts == 0 || st == NULL)
        return PC_INVALID;
    pc_rc rc = pc_latch_keys(s, &primary, 1);
    if (rc != PC_OK)
        return rc;
    rc = pc_run_txn(s, status_body, &a);
    if (rc == PC_OK && st->state == PC_TXN_COMMITTED &&
        pc_memlock_blocked(s->e->memlocks, primary, NULL, true, st->commit_ts,
                           PC_MEMLOCK_COMMITTED, NULL)) {
        /* Committed, not yet durable: still in flight for everyone else. */
        st->state = PC_TXN_LOCKED;
        st->wall_ms = live != NULL ? live->now_ms : 0;
        st->ttl_ms = 0;
    }
    return rc;
}
