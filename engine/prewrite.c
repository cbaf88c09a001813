/*
 * prewrite.c — the first phase of Percolator's commit (the paper, Figure 6
 * Prewrite): for every key, in one WiredTiger transaction, abort on a write
 * committed at or after start_ts or on a lock at any timestamp, else write
 * the data at start_ts and a lock that names the primary.
 */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

pc_rc pc_prewrite_check(pc_session *s, pc_slice key, uint64_t start_ts, pc_conflict *c,
                        bool *own_lock, bool *own_commit)
{
    uint8_t ek[PC_VKEY_MAX];
    size_t eklen;
    pc_lock_rec l;
    pc_write_rec w;
    pc_rc rc, verdict = PC_OK;
    int ret;

    *own_lock = *own_commit = false;

    /* Seed 003: "... or locks at any timestamp." Our own lock means this
     * prewrite already happened (a retry): nothing to do. */
    rc = pc_lock_load(s, key, &l);
    if (rc == PC_OK) {
        if (l.start_ts == start_ts) {
            *own_lock = true;
            return PC_OK;
        }
        pc_conflict_from_lock(c, key, &l);
        return PC_LOCKED;
    }
    if (rc != PC_NOT_FOUND)
        return rc;

    /* Seed 003: "abort on writes after our start timestamp". Walk the
     * versions committed at or after start_ts, newest first. Other
     * transactions' rollback records are not writes; our own record means
     * we already committed (a retry) or were rolled back (too late:
     * TiKV's rollback record stops a late prewrite, DESIGN §3.5). */
    eklen = pc_ekey(ek, key.data, key.len);
    if ((rc = pc_cursor_seek_ge(s, s->write, ek, eklen)) == PC_NOT_FOUND)
        return PC_OK;
    uint64_t ts;
    while (rc == PC_OK && pc_on_key(s->write, ek, eklen, &ts) && ts >= start_ts) {
        if ((rc = pc_cursor_write_rec(s, s->write, &w)) != PC_OK)
            return rc;
        if (w.start_ts == start_ts) {
            if (w.type == PC_W_ROLLBACK)
                return PC_ROLLED_BACK;
            *own_commit = true;
            return PC_OK;
        }
        if (w.type != PC_W_ROLLBACK && verdict == PC_OK) {
            pc_conflict_from_write(c, key, ts);
            verdict = PC_WRITE_CONFLICT;
        }
        ret = s->write->next(s->write);
        rc = ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    }
    if (rc != PC_OK && rc != PC_NOT_FOUND)
        return rc;
    return verdict;
}

/* Data and lock of one key at start_ts; short values ride in the lock. */
static pc_rc prewrite_key(pc_session *s, const pc_txn_meta *t, const pc_mutation *m)
{
    bool is_short = m->op == PC_OP_DELETE || m->value.len <= PC_SHORT_VALUE_MAX;
    pc_lock_rec l = {
        .op = m->op,
        .start_ts = t->start_ts,
        .wall_ms = t->wall_ms,
        .ttl_ms = t->ttl_ms,
        .primary = t->primary,
        .owner = t->owner,
        .has_value = m->op == PC_OP_PUT && is_short,
        .value = m->value,
    };
    pc_rc rc;

    pc_note_ts(s, t->start_ts);
    if (!is_short) {
        uint8_t vk[PC_VKEY_MAX];
        size_t vklen = pc_vkey(vk, m->key.data, m->key.len, t->start_ts);
        if ((rc = pc_cursor_put(s, s->data, vk, vklen, m->value.data, m->value.len)) != PC_OK)
            return rc;
    }
    s->scratch.len = 0;
    if ((rc = pc_lock_encode(&s->scratch, &l)) != PC_OK)
        return rc;
    return pc_cursor_put(s, s->lock, m->key.data, m->key.len, s->scratch.data, s->scratch.len);
}

typedef struct {
    const pc_txn_meta *txn;
    const pc_mutation *m;
    size_t n;
    pc_conflict *conflict;
} prewrite_args;

static pc_rc prewrite_body(pc_session *s, void *arg)
{
    prewrite_args *a = arg;
    bool own_lock, own_commit;
    pc_rc rc;

    for (size_t i = 0; i < a->n; i++) {
        rc = pc_prewrite_check(s, a->m[i].key, a->txn->start_ts, a->conflict, &own_lock,
                               &own_commit);
        if (rc != PC_OK)
            return rc;
        if (own_lock || own_commit)
            continue;
        if ((rc = prewrite_key(s, a->txn, &a->m[i])) != PC_OK)
            return rc;
    }
    return PC_OK;
}

static int cmp_slice_ptr(const void *a, const void *b)
{
    const pc_slice *x = *(const pc_slice *const *)a, *y = *(const pc_slice *const *)b;
    return pc_key_cmp(x->data, x->len, y->data, y->len);
}

/* No key twice: an action reads every key once, before it writes, and in
 * propose mode its writes go to the batch, not to the store, so a second
 * mutation of a key would be checked against the store as if the first had
 * not happened. Keys in increasing order (the service's) cost one pass. */
static pc_rc check_distinct(const pc_engine *e, const pc_mutation *m, size_t n)
{
    size_t i = 1;
    while (i < n && pc_key_cmp(m[i - 1].key.data, m[i - 1].key.len, m[i].key.data,
                               m[i].key.len) < 0)
        i++;
    if (i >= n)
        return PC_OK;
    const pc_slice **v = malloc(n * sizeof(*v));
    if (v == NULL)
        return PC_NOMEM;
    for (i = 0; i < n; i++)
        v[i] = &m[i].key;
    qsort(v, n, sizeof(*v), cmp_slice_ptr);
    pc_rc rc = PC_OK;
    for (i = 1; i < n && rc == PC_OK; i++)
        if (cmp_slice_ptr(&v[i - 1], &v[i]) == 0)
            rc = PC_INVALID;
    free(v);
    if (rc != PC_OK)
        pc_log(e, PC_LOG_ERROR, "invalid mutations: a key is given twice in one action");
    return rc;
}

/* Shared argument checks of prewrite and one_pc. */
pc_rc pc_check_mutations(const pc_engine *e, const pc_txn_meta *t, const pc_mutation *m,
                         size_t n)
{
    if (t == NULL || t->start_ts == 0 || !pc_key_ok(t->primary) ||
        t->owner.len > PC_OWNER_MAX || (m == NULL && n > 0))
        return PC_INVALID;
    for (size_t i = 0; i < n; i++) {
        if (!pc_key_ok(m[i].key) || (m[i].op != PC_OP_PUT && m[i].op != PC_OP_DELETE))
            return PC_INVALID;
        if (m[i].op == PC_OP_PUT && m[i].value.data == NULL && m[i].value.len > 0)
            return PC_INVALID;
    }
    return check_distinct(e, m, n);
}

pc_rc pc_prewrite(pc_session *s, const pc_txn_meta *txn, const pc_mutation *m, size_t n,
                  pc_conflict *conflict)
{
    prewrite_args a = {txn, m, n, conflict};
    pc_rc rc = pc_check_mutations(s->e, txn, m, n);

    if (rc != PC_OK || (rc = pc_latch_mutations(s, m, n)) != PC_OK)
        return rc;
    return pc_run_txn(s, prewrite_body, &a);
}
