/*
 * one_pc.c — one-phase commit (TiKV; DESIGN §3.4): when every key of a small
 * transaction lives in this store, the two phases collapse into one
 * batch that runs prewrite's conflict checks and writes the data and
 * write records directly at the commit timestamp. No lock is
 * ever written, so there is nothing to clean up after a crash: the batch
 * is applied in one WiredTiger transaction, all or nothing.
 *
 * Three details keep snapshot isolation and durability:
 *  - the keys are latched (latch_session.c), so a concurrent prewrite of
 *    one of them reads the store only after this batch is applied;
 *  - the keys sit in the in-memory table of commits in flight (memlock.c)
 *    from before the commit timestamp is fetched, so no snapshot above
 *    that timestamp reads them early;
 *  - they stay there, marked committed, until the caller applied the batch
 *    (its replicator made it durable) and released the latches: no read
 *    sees a commit the store does not hold yet.
 */
#include "internal.h"

typedef struct {
    const pc_txn_meta *txn;
    const pc_mutation *m;
    size_t n;
    uint64_t commit_ts;
    pc_conflict *conflict;
} one_pc_args;

static pc_rc one_pc_key(pc_session *s, const one_pc_args *a, const pc_mutation *m)
{
    uint8_t vk[PC_VKEY_MAX];
    size_t vklen;
    bool is_short = m->op == PC_OP_DELETE || m->value.len <= PC_SHORT_VALUE_MAX;
    pc_write_rec w = {
        .type = m->op == PC_OP_PUT ? PC_W_PUT : PC_W_DELETE,
        .start_ts = a->txn->start_ts,
        .has_value = m->op == PC_OP_PUT && is_short,
        .value = m->value,
    };
    pc_rc rc;

    if (!is_short) {
        vklen = pc_vkey(vk, m->key.data, m->key.len, a->txn->start_ts);
        if ((rc = pc_cursor_put(s, s->data, vk, vklen, m->value.data, m->value.len)) != PC_OK)
            return rc;
    }
    if ((rc = pc_write_put(s, m->key, a->commit_ts, &w)) != PC_OK)
        return rc;
    return pc_notify_mark(s, m->key, a->commit_ts);
}

static pc_rc one_pc_body(pc_session *s, void *arg)
{
    one_pc_args *a = arg;
    bool own_lock, own_commit;
    pc_rc rc;

    for (size_t i = 0; i < a->n; i++) {
        rc = pc_prewrite_check(s, a->m[i].key, a->txn->start_ts, a->conflict, &own_lock,
                               &own_commit);
        if (rc != PC_OK)
            return rc;
        if (own_lock || own_commit)
            return PC_INVALID; /* start_ts was already used by a 2PC attempt */
        if ((rc = one_pc_key(s, a, &a->m[i])) != PC_OK)
            return rc;
    }
    return PC_OK;
}

/* Hold the keys in the in-memory lock table; PC_LOCKED (conflict filled
 * when given) when another one-phase commit holds one of them. */
static pc_rc hold_keys(pc_session *s, const pc_mutation *m, size_t n, uint64_t start_ts,
                       pc_conflict *conflict)
{
    size_t busy = 0;
    pc_rc rc = pc_memlock_acquire(s->e->memlocks, m, n, start_ts, &busy);
    if (rc == PC_LOCKED && conflict != NULL) {
        pc_lock_rec l = {.op = m[busy].op, .start_ts = 0, .primary = m[busy].key};
        pc_conflict_from_lock(conflict, m[busy].key, &l);
        conflict->in_flight_ts = PC_TS_MAX; /* wait until the key is free */
        conflict->in_flight_mode = PC_MEMLOCK_ANY;
    }
    return rc;
}

pc_rc pc_one_pc(pc_session *s, const pc_txn_meta *txn, const pc_mutation *m, size_t n,
                pc_ts_fn ts_fn, void *ts_arg, uint64_t *commit_ts, pc_conflict *conflict)
{
    /* A blind write's in-memory lock says start 0: it blocks every
     * snapshot reader of its keys for the moment it is in flight, since
     * its timestamp is not known yet. */
    bool blind = txn != NULL && txn->start_ts == 0;
    pc_txn_meta t = txn != NULL ? *txn : (pc_txn_meta){0};
    one_pc_args a = {&t, m, n, 0, conflict};

    if (blind)
        t.start_ts = 1; /* for the argument checks only */
    pc_rc rc = pc_check_mutations(s->e, txn ? &t : NULL, m, n);
    if (rc != PC_OK || ts_fn == NULL)
        return PC_INVALID;
    t.start_ts = txn->start_ts;
    if ((rc = pc_latch_mutations(s, m, n)) != PC_OK ||
        (rc = hold_keys(s, m, n, txn->start_ts, conflict)) != PC_OK)
        return rc;
    if (ts_fn(ts_arg, &a.commit_ts) != 0) {
        rc = PC_TS_UNAVAILABLE;
        goto out;
    }
    if (blind)
        t.start_ts = a.commit_ts; /* commits where it starts */
    else if (a.commit_ts <= txn->start_ts) {
        rc = PC_INVALID;
        goto out;
    }
    if ((rc = pc_run_txn(s, one_pc_body, &a)) == PC_OK) {
        *commit_ts = a.commit_ts;
        pc_memlock_committed(s->e->memlocks, m, n, txn->start_ts, a.commit_ts);
        /* A proposal wrote nothing here yet: the keys stay held until the
         * caller applied its batch and released the latches. */
        pc_latch_keep_memlocks(s, m, n, txn->start_ts);
        return rc;
    }
out:
    pc_memlock_release(s->e->memlocks, m, n, txn->start_ts);
    return rc;
}

/* The latches of every valid write's keys, all at once
 * (taken one write after another, they could wait in a cycle); if they
 * cannot be had, every write fails with why. */
static void latch_blind(pc_session *s, pc_blind_write *const *w, size_t n)
{
    pc_latch_set want;
    pc_latch_set_clear(&want);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; w[i]->rc == PC_OK && j < w[i]->n; j++)
            pc_latch_set_add(&want, w[i]->m[j].key.data, w[i]->m[j].key.len);
    pc_rc rc = pc_latch_take(s, &want);
    for (size_t i = 0; rc != PC_OK && i < n; i++)
        if (w[i]->rc == PC_OK)
            w[i]->rc = rc;
}

/* Group commit of blind writes (engine.h). Which rule each step keeps:
 * the keys are held before the timestamps are asked for, as in pc_one_pc;
 * every write gets a timestamp of its own, so two writes of a batch never
 * share a version; a write that failed lets its keys go at once, one that
 * committed only after the flush (pc_one_pc_blind_durable). */
void pc_one_pc_blind(pc_session *s, pc_blind_write *const *w, size_t n, pc_ts_range_fn ts_fn,
                     void *ts_arg)
{
    size_t held = 0;
    uint64_t first = 0;

    for (size_t i = 0; i < n; i++) {
        pc_txn_meta check = {.start_ts = 1, .primary = w[i]->n ? w[i]->m[0].key : (pc_slice){0}};
        w[i]->commit_ts = 0;
        w[i]->rc = w[i]->n == 0 || ts_fn == NULL
                       ? PC_INVALID
                       : pc_check_mutations(s->e, &check, w[i]->m, w[i]->n);
    }
    latch_blind(s, w, n);
    for (size_t i = 0; i < n; i++) {
        if (w[i]->rc == PC_OK)
            w[i]->rc = hold_keys(s, w[i]->m, w[i]->n, 0, &w[i]->conflict);
        held += w[i]->rc == PC_OK;
    }
    if (held == 0)
        return;
    bool have_ts = ts_fn(ts_arg, held, &first) == 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i]->rc != PC_OK)
            continue; /* it holds nothing */
        if (have_ts) {
            pc_txn_meta t = {.start_ts = first, .primary = w[i]->m[0].key};
            one_pc_args a = {&t, w[i]->m, w[i]->n, first, &w[i]->conflict};
            w[i]->rc = pc_run_txn(s, one_pc_body, &a);
            if (w[i]->rc == PC_OK)
                w[i]->commit_ts = first;
            first++;
        } else {
            w[i]->rc = PC_TS_UNAVAILABLE;
        }
        if (w[i]->rc == PC_OK)
            pc_memlock_committed(s->e->memlocks, w[i]->m, w[i]->n, 0, w[i]->commit_ts);
        else
            pc_memlock_release(s->e->memlocks, w[i]->m, w[i]->n, 0);
    }
}

void pc_one_pc_blind_durable(pc_session *s, pc_blind_write *const *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (w[i]->rc == PC_OK)
            pc_memlock_release(s->e->memlocks, w[i]->m, w[i]->n, 0);
}
