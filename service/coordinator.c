/*
 * coordinator.c — two-phase commit over engine.h, or one phase when small.
 */
#include <string.h>

#include "actions.h"
#include "coordinator.h"
#include "region_call.h"
#include "keyspace.h"
#include "observers.h"
#include "failpoint.h"
#include "log.h"
#include "reader.h"
#include "timeutil.h"

#define ONE_PC_MAX_KEYS 64
#define ONE_PC_MAX_BYTES (1u << 20)
#define BATCH 128 /* keys per engine call (one WiredTiger transaction) */

static int oracle_ts(void *arg, uint64_t *ts)
{
    return svc_timestamp(arg, ts) ? 0 : -1;
}

/* The key a batch of m begins with: its region's term is the action's
 * (svc_write_begin). */
static pc_slice first_key(const pc_mutation *m, size_t n)
{
    return n > 0 ? m[0].key : (pc_slice){NULL, 0};
}

/* Prewrite a batch; a lock of a dead owner is resolved and the batch tried
 * again, a live one fails the commit (the paper: abort on a lock). */
static pc_rc prewrite(svc *s, pc_session *ps, const pc_txn_meta *t, const pc_mutation *m,
                      size_t n, pc_conflict *c)
{
    for (int round = 0; round < 16; round++) {
        pc_rc rc = act_prewrite(s, ps, t, m, n, c);
        if (rc != PC_LOCKED)
            return rc;
        if ((rc = rd_resolve(s, ps, &c->lock)) != PC_OK)
            return rc;
    }
    return PC_LOCKED;
}

static pc_rc one_phase(svc *s, pc_session *ps, const pc_txn_meta *t, const pc_mutation *m,
                       size_t n, uint64_t *commit_ts, pc_conflict *c)
{
    uint64_t deadline = time_mono_ms() + s->cfg.lock_wait_ms;
    unsigned attempt = 0;

    for (;;) {
        *commit_ts = 0;
        svc_write_begin(s, ps, first_key(m, n));
        pc_rc rc = svc_write_end(s, ps, pc_one_pc(ps, t, m, n, oracle_ts, s, commit_ts, c), NULL);
        if (rc == PC_SYNC_FAILED)
            svc_storage_failed("one-phase commit", rc);
        if (rc != PC_OK)
            *commit_ts = 0;
        if (rc != PC_LOCKED)
            return rc;
        /* A lock: a dead owner's is resolved; otherwise a live 2PC lock
         * fails us, and another one-phase commit in flight is waited out. */
        if (c->lock.start_ts != 0) {
            if ((rc = rd_resolve(s, ps, &c->lock)) != PC_OK)
                return rc;
            continue;
        }
        if (!rd_handle_lock(s, ps, c, deadline, &attempt, &rc))
            return rc;
    }
}

/* A long prewrite keeps its primary lock fresh (the paper: the worker
 * updates the wall time), so the janitor does not take it for stuck. */
static void heartbeat(svc *s, pc_session *ps, pc_txn_meta *t)
{
    uint64_t now = time_wall_ms();
    if (now - t->wall_ms < t->ttl_ms / 3)
        return;
    pc_rc rc = act_heartbeat(s, ps, t->primary, t->start_ts, now, t->ttl_ms);
    if (rc == PC_OK)
        t->wall_ms = now;
    else
        log_warn("heartbeat of txn %llu: %s", (unsigned long long)t->start_ts, pc_rc_name(rc));
}

static size_t total_bytes(const pc_mutation *m, size_t n)
{
    size_t b = 0;
    for (size_t i = 0; i < n; i++)
        b += m[i].key.len + m[i].value.len;
    return b;
}

/* One phase is one batch, so one region's (TiKV: 1PC only when every key
 * is in one region), led here: its commit timestamp comes from this
 * node's oracle client inside the action (a region led elsewhere commits
 * in two phases, each sent there: actions.h); small, too, so that it
 * stays a short transaction. */
static bool fits_one_phase(svc *s, const pc_mutation *m, size_t n)
{
    char url[RAFT_PEER_ADDR_MAX];
    return s->cfg.one_pc && n > 0 && n <= ONE_PC_MAX_KEYS &&
           total_bytes(m, n) <= ONE_PC_MAX_BYTES && svc_region_run(s, m, n) == n &&
           !region_call_elsewhere(s, m[0].key, url, sizeof url);
}

/* The next batch of m[i..n): at most BATCH keys, all in m[i]'s region
 * (each batch goes to one region's log: DESIGN §6.2). */
static size_t next_batch(svc *s, const pc_mutation *m, size_t i, size_t n)
{
    return svc_region_run(s, m + i, n - i < BATCH ? n - i : BATCH);
}

pc_rc coord_blind_write(svc *s, pc_session *ps, const pc_mutation *m, size_t n,
                        uint64_t *commit_ts, pc_conflict *c)
{
    /* No locks are written, so no owner is needed. */
    pc_txn_meta t = {.start_ts = 0, .primary = m[0].key, .wall_ms = time_wall_ms(),
                     .ttl_ms = s->cfg.max_lock_age_ms};
    if (!fits_one_phase(s, m, n))
        return PC_INVALID;
    pc_rc rc = one_phase(s, ps, &t, m, n, commit_ts, c);
    if (rc == PC_OK) {
        metrics_inc(s->m.commits_1pc, 1);
        svc_committed(s);
    }
    return rc;
}

/* Roll back every key's lock of start_ts (after a failed prewrite, or for
 * a pending commit given up). Failures are left to the janitor. */
static void rollback_all(svc *s, pc_session *ps, const char *owner, uint64_t start_ts,
                         const pc_mutation *m, size_t n)
{
    pc_slice keys[BATCH];
    for (size_t i = 0, k; i < n; i += k) {
        k = next_batch(s, m, i, n);
        for (size_t j = 0; j < k; j++)
            keys[j] = m[i + j].key;
        pc_rc r = act_rollback(s, ps, keys, k, start_ts);
        if (r != PC_OK)
            log_warn("rollback of %s: %s (its locks are cleaned up later)", owner,
                     pc_rc_name(r));
    }
}

void coord_rollback(svc *s, pc_session *ps, txn *t, const pc_mutation *m, size_t n)
{
    if (t->commit_pending)
        rollback_all(s, ps, t->owner, t->start_ts, m, n);
    t->commit_pending = false;
}

pc_rc coord_commit(svc *s, pc_session *ps, txn *tx, const pc_mutation *m, size_t n,
                   uint64_t *commit_ts, pc_conflict *c)
{
    const char *owner = tx->owner;
    uint64_t start_ts = tx->start_ts;
    pc_txn_meta t = {
        .start_ts = start_ts,
        .primary = n > 0 ? m[0].key : (pc_slice){NULL, 0},
        .owner = {owner, strlen(owner)},
        .wall_ms = time_wall_ms(),
        .ttl_ms = s->cfg.max_lock_age_ms,
    };
    pc_slice keys[BATCH];
    pc_rc rc;

    if (n == 0) {
        *commit_ts = start_ts; /* nothing to write: the snapshot is the answer */
        return PC_OK;
    }
    if (!tx->commit_pending && fits_one_phase(s, m, n)) {
        rc = one_phase(s, ps, &t, m, n, commit_ts, c);
        if (rc == PC_OK) {
            metrics_inc(s->m.commits_1pc, 1);
            svc_committed(s);
        }
        return rc;
    }

    /* Phase one: the primary first, then the secondaries in batches, each
     * one region's. Whatever region the primary is in, its lock is the
     * transaction's commit point (the paper: the primary is just a chosen
     * key; a reader anywhere checks it). */
    if ((rc = prewrite(s, ps, &t, m, 1, c)) != PC_OK)
        goto abort;
    failpoint(ps, "after_prewrite_primary");
    for (size_t i = 1, k; i < n; i += k) {
        k = next_batch(s, m, i, n);
        if ((rc = prewrite(s, ps, &t, m + i, k, c)) != PC_OK)
            goto abort;
        heartbeat(s, ps, &t);
    }
    failpoint(ps, "after_prewrites");
    /* No commit timestamp (the oracle is down): keep the locks. The caller
     * may retry the commit (its prewrites are idempotent); if it does not,
     * its session expires and the locks go with their dead owner. Rolling
     * back here would leave rollback records that fail the retry. From now
     * on the locks hold these exact values under this primary: the session
     * takes no more writes until it commits or rolls back (DESIGN §3.3). */
    if (!svc_timestamp(s, commit_ts)) {
        *commit_ts = 0;
        tx->commit_pending = true;
        return PC_TS_UNAVAILABLE;
    }

    /* The commit point: the primary's write record, durable before any
     * answer and before any reader can see it. After it the transaction
     * is committed whatever happens. */
    rc = act_commit_primary(s, ps, m[0].key, start_ts, *commit_ts);
    if (rc == PC_SYNC_FAILED)
        svc_storage_failed("commit point", rc);
    if (rc != PC_OK) {
        *commit_ts = 0;
        if (rc == PC_LOCK_MISSING)
            rc = PC_ROLLED_BACK;
        log_warn("commit of %s failed at the primary: %s", owner, pc_rc_name(rc));
        return rc;
    }
    tx->commit_pending = false;
    metrics_inc(s->m.commits_2pc, 1);
    if (svc_region_run(s, m, n) < n)
        metrics_inc(s->m.commits_cross_region, 1);
    svc_committed(s);
    failpoint(ps, "after_commit_primary");

    /* Phase two: the secondaries, in batches that break at the half-way
     * point (a crash point stands there). A failure here is not the
     * client's: readers and the janitor roll the rest forward from the
     * primary. */
    size_t half = 1 + (n - 1) / 2;
    for (size_t i = 1; i < n;) {
        size_t stop = i < half ? half : n, k = next_batch(s, m, i, stop);
        if (i == half)
            failpoint(ps, "after_half_secondaries");
        for (size_t j = 0; j < k; j++)
            keys[j] = m[i + j].key;
        pc_rc r = act_commit(s, ps, keys, k, start_ts, *commit_ts);
        if (r != PC_OK)
            log_warn("commit of %s: secondaries left locked (%s); they roll forward later",
                     owner, pc_rc_name(r));
        i += k;
    }
    return PC_OK;

abort:
    *commit_ts = 0;
    rollback_all(s, ps, owner, start_ts, m, n);
    tx->commit_pending = false;
    return rc;
}

pc_rc coord_commit_internal(svc *s, pc_session *ps, uint64_t start_ts, const pc_mutation *m,
                            size_t n, uint64_t *commit_ts, pc_conflict *c)
{
    txn *t = sessions_begin(s->sessions, start_ts, s->cfg.lease_ttl_ms);
    if (t == NULL)
        return PC_NOMEM;
    t->internal = true;
    pthread_mutex_lock(&t->mu);
    sessions_commit_begin(t);
    pc_rc rc = coord_commit(s, ps, t, m, n, commit_ts, c);
    /* Nobody will retry it: locks left for a retry go now. */
    coord_rollback(s, ps, t, m, n);
    t->commit_ts = rc == PC_OK ? *commit_ts : 0;
    sessions_end(s->sessions, t, rc == PC_OK ? TXN_COMMITTED : TXN_ABORTED,
                 rc == PC_OK ? "committed" : "conflict");
    pthread_mutex_unlock(&t->mu);
    sessions_release(s->sessions, t);
    return rc;
}

pc_mutation *coord_mutations(const txn *t, char **keys_out, size_t *n)
{
    pc_mutation *m = calloc(t->nw + 1, sizeof(*m));
    char *keys = malloc(t->bytes + t->nw + 1);
    size_t off = 0, j = 0;

    if (m == NULL || keys == NULL) {
        free(m);
        free(keys);
        return NULL;
    }
    if (t->claim != NULL)
        m[j++] = (pc_mutation){PC_OP_PUT, {t->claim->ack_key, t->claim->ack_len},
                               {t->claim->ack_val, strlen(t->claim->ack_val)}};
    for (size_t i = 0; i < t->nw; i++, j++) {
        size_t kn = ks_user(keys + off, t->w[i].key, t->w[i].klen);
        m[j].op = t->w[i].deleted ? PC_OP_DELETE : PC_OP_PUT;
        m[j].key = (pc_slice){keys + off, kn};
        m[j].value = (pc_slice){t->w[i].val, t->w[i].vlen};
        off += kn;
    }
    *keys_out = keys;
    *n = j;
    return m;
}
