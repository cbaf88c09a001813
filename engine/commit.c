/*
 * commit.c — the second phase (the paper, Figure 6 Commit): a key locked by
 * start_ts gets a write record at commit_ts pointing at start_ts's data,
 * and its lock is erased, in one WiredTiger transaction. Committing the
 * primary is the transaction's commit point; the secondaries follow, and
 * if the coordinator dies first, readers and the janitor roll them forward
 * from the primary.
 */
#include "internal.h"

pc_rc pc_write_put(pc_session *s, pc_slice key, uint64_t ts, const pc_write_rec *w)
{
    uint8_t vk[PC_VKEY_MAX];
    size_t vklen = pc_vkey(vk, key.data, key.len, ts);
    pc_rc rc;

    s->scratch.len = 0;
    if ((rc = pc_write_encode(&s->scratch, w)) != PC_OK)
        return rc;
    pc_note_ts(s, ts);
    return pc_cursor_put(s, s->write, vk, vklen, s->scratch.data, s->scratch.len);
}

/* A key's lock of start_ts becomes its write record at commit_ts (the
 * paper's Commit step for one key), marked dirty for observers. */
pc_rc pc_commit_locked_key(pc_session *s, pc_slice key, const pc_lock_rec *lock,
                           uint64_t commit_ts)
{
    pc_write_rec w = {
        .type = lock->op == PC_OP_PUT ? PC_W_PUT : PC_W_DELETE,
        .start_ts = lock->start_ts,
        .has_value = lock->has_value,
        .value = lock->value,
    };
    pc_rc rc;

    /* The record first: lock points into the lock cursor. */
    if ((rc = pc_write_put(s, key, commit_ts, &w)) != PC_OK)
        return rc;
    if ((rc = pc_cursor_del(s, s->lock, key.data, key.len)) != PC_OK)
        return rc;
    return pc_notify_mark(s, key, commit_ts);
}

typedef struct {
    const pc_slice *keys;
    size_t n;
    uint64_t start_ts, commit_ts;
} commit_args;

static pc_rc commit_body(pc_session *s, void *arg)
{
    commit_args *a = arg;
    pc_lock_rec l;
    pc_write_rec w;
    uint64_t cts;
    pc_rc rc;

    for (size_t i = 0; i < a->n; i++) {
        rc = pc_lock_load(s, a->keys[i], &l);
        if (rc == PC_OK && l.start_ts == a->start_ts) {
            if ((rc = pc_commit_locked_key(s, a->keys[i], &l, a->commit_ts)) != PC_OK)
                return rc;
            continue;
        }
        if (rc != PC_OK && rc != PC_NOT_FOUND)
            return rc;
        /* No lock of ours: a retry after success is fine; a rollback
         * record means somebody aborted us ("aborted while working"). */
        rc = pc_find_txn_write(s, a->keys[i], a->start_ts, &w, &cts);
        if (rc == PC_NOT_FOUND)
            return PC_LOCK_MISSING;
        if (rc != PC_OK)
            return rc;
        if (w.type == PC_W_ROLLBACK)
            return PC_ROLLED_BACK;
    }
    return PC_OK;
}

pc_rc pc_commit(pc_session *s, const pc_slice *keys, size_t n, uint64_t start_ts,
                uint64_t commit_ts)
{
    commit_args a = {keys, n, start_ts, commit_ts};

    if (start_ts == 0 || commit_ts <= start_ts || (keys == NULL && n > 0))
        return PC_INVALID;
    for (size_t i = 0; i < n; i++)
        if (!pc_key_ok(keys[i]))
            return PC_INVALID;
    pc_rc rc = pc_latch_keys(s, keys, n);
    return rc == PC_OK ? pc_run_txn(s, commit_body, &a) : rc;
}

/* The commit point (docs/DESIGN.md §4.4): held as a commit in flight from
 * before it is proposed until its batch is applied (the latches release
 * it), so a reader that finds the primary's write record (or asks
 * check_txn_status about it) waits instead of telling its client about a
 * commit the store or a crash could still undo. */
pc_rc pc_commit_primary(pc_session *s, pc_slice primary, uint64_t start_ts, uint64_t commit_ts)
{
    pc_rc rc;

    if (!pc_key_ok(primary) || start_ts == 0 || commit_ts <= start_ts)
        return PC_INVALID;
    if ((rc = pc_latch_keys(s, &primary, 1)) != PC_OK)
        return rc;
    if ((rc = pc_memlock_hold_commit(s->e->memlocks, primary, commit_ts)) != PC_OK)
        return rc;
    rc = pc_commit(s, &primary, 1, start_ts, commit_ts);
    if (rc != PC_OK) {
        pc_memlock_release_key(s->e->memlocks, primary, commit_ts);
        return rc;
    }
    pc_mutation held = {.op = PC_OP_PUT, .key = primary};
    pc_latch_keep_memlocks(s, &held, 1, commit_ts); /* until applied: latch_session.c */
    return PC_OK;
}
