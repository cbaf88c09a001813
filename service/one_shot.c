/*
 * one_shot.c — see one_shot.h. The steps of a run:
 *
 *   1. a start timestamp from the oracle;
 *   2. every condition checked at it (the first that fails ends the
 *      run: the route answers 409 condition_failed);
 *   3. the reads at it;
 *   4. the commit (coord_commit_internal: one phase when small);
 *   5. on write_conflict or key_locked, again from 1 with a fresh
 *      snapshot, as the retry policy allows (retry_one_shot).
 * The run returns its outcome (one_shot_exec); the routes answer
 * (respond.c reply_one_shot). The request's JSON is parsed into a
 * one_shot by one_shot_parse.c, part of the HTTP layer.
 */
#include <stdlib.h>
#include <string.h>

#include "coordinator.h"
#include "keyspace.h"
#include "one_shot.h"
#include "reader.h"
#include "timeutil.h"

#define ONE_SHOT_TRIES 5

void one_shot_free(one_shot *o)
{
    for (size_t i = 0; o->conds != NULL && i < o->ckeys.n; i++)
        buf_free(&o->conds[i].value);
    free(o->conds);
    keys_free(&o->ckeys);
    keys_free(&o->reads);
    writes_free(&o->wl);
    free(o->writes);
    free(o->ekeys);
    *o = (one_shot){0};
}

/* Check condition i at ts. PC_OK: holds; PC_NOT_FOUND: fails (why set);
 * anything else: the read failed. */
static pc_rc check_condition(svc *s, pc_session *ps, const one_shot *o, size_t i, uint64_t ts,
                             char *why, size_t whylen, pc_conflict *conf)
{
    const condition *c = &o->conds[i];
    char ek[KS_MAX];
    pc_buf v = {0};
    uint64_t cts = 0;
    pc_slice k = {ek, ks_user(ek, keys_at(&o->ckeys, i), o->ckeys.len[i])};
    pc_rc rc = rd_get(s, ps, k, ts, &v, &cts, conf);
    bool found = rc == PC_OK;

    if (rc != PC_OK && rc != PC_NOT_FOUND) {
        pc_buf_free(&v);
        return rc;
    }
    rc = PC_OK;
    switch (c->kind) {
    case COND_COMMIT_TS:
        if ((found ? cts : 0) != c->commit_ts) {
            snprintf(why, whylen, "expected commit_ts %llu, found %llu",
                     (unsigned long long)c->commit_ts, (unsigned long long)(found ? cts : 0));
            rc = PC_NOT_FOUND;
        }
        break;
    case COND_EXISTS:
        if (found != c->exists) {
            snprintf(why, whylen, "the key %s", found ? "exists" : "does not exist");
            rc = PC_NOT_FOUND;
        }
        break;
    case COND_VALUE:
        if (!found || v.len != c->value.len || memcmp(v.data, c->value.data, v.len) != 0) {
            snprintf(why, whylen, "%s", found ? "the value differs" : "the key does not exist");
            rc = PC_NOT_FOUND;
        }
        break;
    }
    pc_buf_free(&v);
    return rc;
}

/* Step 2: PC_OK when every condition holds; PC_NOT_FOUND when one failed
 * (out->cond and out->why say which and why); another rc when a read
 * failed. */
static pc_rc check_conditions(svc *s, pc_session *ps, const one_shot *o, uint64_t start,
                              one_shot_outcome *out)
{
    for (size_t i = 0; i < o->ckeys.n; i++) {
        pc_rc rc = check_condition(s, ps, o, i, start, out->why, sizeof(out->why),
                                   &out->conflict);
        if (rc == PC_NOT_FOUND) {
            out->cond = i;
            out->cond_failed = true;
        }
        if (rc != PC_OK)
            return rc;
    }
    return PC_OK;
}

/* Step 3: the reads at start into out->reads (o->reads.n of them). PC_OK,
 * or the failed read's rc. */
static pc_rc do_reads(svc *s, pc_session *ps, const one_shot *o, uint64_t start,
                      one_shot_outcome *out)
{
    if (o->reads.n == 0)
        return PC_OK;
    if ((out->reads = calloc(o->reads.n, sizeof(*out->reads))) == NULL)
        return PC_NOMEM;
    out->nreads = o->reads.n;
    for (size_t i = 0; i < o->reads.n; i++) {
        char ek[KS_MAX];
        one_shot_read *r = &out->reads[i];
        const char *key = keys_at(&o->reads, i);
        pc_rc rc = rd_get(s, ps, (pc_slice){ek, ks_user(ek, key, o->reads.len[i])}, start,
                          &r->value, &r->commit_ts, &out->conflict);
        if (rc != PC_OK && rc != PC_NOT_FOUND)
            return rc;
        r->found = rc == PC_OK;
        /* Checked before the commit: an answer that cannot be given must
         * not follow a commit. */
        if (r->found && o->enc == ENC_TEXT && !codec_utf8_valid(r->value.data, r->value.len)) {
            out->not_text = true;
            return PC_INVALID;
        }
    }
    return PC_OK;
}

/* How a one-shot write that failed with *rc goes on: true to try again
 * (step 5). Only conflicts are retried. A blind write waits a lock out
 * (resolving a dead owner's) and retries a newer write at once, until the
 * deadline; past it, whatever stopped it is reported as key_locked. Other
 * one-shot writes try ONE_SHOT_TRIES times with a short pause. */
typedef struct {
    bool blind;
    uint64_t deadline_ms;
    unsigned attempt, waits;
} retry_policy;

static retry_policy policy_for(svc *s, const one_shot *o)
{
    return (retry_policy){.blind = one_shot_blind(o),
                          .deadline_ms = time_mono_ms() + s->cfg.lock_wait_ms};
}

static bool retry_one_shot(svc *s, pc_session *ps, retry_policy *p, pc_rc *rc, pc_conflict *c)
{
    if (*rc != PC_WRITE_CONFLICT && *rc != PC_LOCKED)
        return false;
    p->attempt++;
    if (!p->blind) {
        if (p->attempt >= ONE_SHOT_TRIES)
            return false;
        time_sleep_ms(1u << (p->attempt - 1));
        return true;
    }
    if (*rc == PC_LOCKED) {
        pc_rc why = PC_LOCKED;
        if (rd_handle_lock(s, ps, c, p->deadline_ms, &p->waits, &why))
            return true;
        *rc = why;
        return false;
    }
    if (time_mono_ms() < p->deadline_ms)
        return true;
    *rc = PC_LOCKED; /* kept busy by newer writes all along: say so */
    return false;
}

static void outcome_reset(one_shot_outcome *out)
{
    for (size_t i = 0; i < out->nreads; i++)
        pc_buf_free(&out->reads[i].value);
    free(out->reads);
    *out = (one_shot_outcome){0};
}

void one_shot_outcome_free(one_shot_outcome *out)
{
    outcome_reset(out);
}

/* With a lease: how many of the attachments the commit would create (the
 * lease's count of keys stays exact, leases.h), read at start. */
static pc_rc new_attachments(svc *s, pc_session *ps, const one_shot *o, uint64_t start,
                             size_t *added, pc_conflict *c)
{
    pc_rc rc = PC_OK;
    *added = 0;
    for (size_t i = 0; rc == PC_OK && i < o->nwrites; i++) {
        pc_buf v = {0};
        uint64_t cts;
        if (((const char *)o->writes[i].key.data)[0] != KS_LEASE_KEY)
            continue;
        rc = rd_get(s, ps, o->writes[i].key, start, &v, &cts, c);
        pc_buf_free(&v);
        if (rc == PC_NOT_FOUND) {
            (*added)++;
            rc = PC_OK;
        }
    }
    return rc;
}

static pc_rc exec_held(svc *s, pc_session *ps, const one_shot *o, bool want_reads,
                       one_shot_outcome *out, uint64_t gen, size_t *added)
{
    retry_policy policy = policy_for(s, o);
    for (;;) {
        uint64_t start;
        if (!svc_timestamp(s, &start))
            return out->rc = PC_TS_UNAVAILABLE;
        /* The timestamp is taken once this member has read the leases
         * back for its term: a hold from before that is void. */
        if (o->lease && !leases_still_held(s, gen))
            return out->rc = PC_NOT_LEADER;
        pc_rc rc = check_conditions(s, ps, o, start, out);
        if (rc == PC_OK && want_reads)
            rc = do_reads(s, ps, o, start, out);
        if (rc == PC_OK && o->lease)
            rc = new_attachments(s, ps, o, start, added, &out->conflict);
        if (out->cond_failed)
            return out->rc = PC_NOT_FOUND;
        if (rc == PC_OK)
            rc = coord_commit_internal(s, ps, start, o->writes, o->nwrites, &out->commit_ts,
                                       &out->conflict);
        if (rc == PC_OK)
            return out->rc = PC_OK; /* counted when answered (reply_one_shot) */
        if (out->not_text)
            return out->rc = PC_INVALID;
        pc_conflict c = out->conflict;
        outcome_reset(out);
        out->conflict = c;
        if (!retry_one_shot(s, ps, &policy, &rc, &out->conflict)) {
            if (rc == PC_WRITE_CONFLICT || rc == PC_LOCKED)
                metrics_inc(metrics_series_get(s->m.txn_aborted, pc_rc_name(rc), NULL), 1);
            return out->rc = rc;
        }
    }
}

/* Hold the lease the puts attach to (leases.h): PC_OK with *gen; PC_NOT_FOUND
 * with out->lease when refused; PC_NOT_LEADER when this member does not
 * lead (its leases not read back). */
static pc_rc hold_lease(svc *s, pc_session *ps, const one_shot *o, one_shot_outcome *out,
                        uint64_t *gen)
{
    if (!svc_take_over(s))
        return PC_NOT_LEADER;
    for (int tries = 0; tries < 3; tries++) {
        lease_hold h = leases_hold(s, o->lease, o->nputs, gen);
        if (h == LEASE_HELD)
            return PC_OK;
        if (h == LEASE_NOT_READY)
            return PC_NOT_LEADER;
        if (h != LEASE_UNCOUNTED) {
            out->lease = h;
            return PC_NOT_FOUND;
        }
        pc_rc rc = leases_count(s, ps, o->lease);
        if (rc != PC_OK)
            return rc;
    }
    /* Put after put of this lease ended with an unknown outcome meanwhile
     * (an election under way): 503, retried. */
    return PC_NOT_LEADER;
}

pc_rc one_shot_exec(svc *s, const one_shot *o, bool want_reads, one_shot_outcome *out)
{
    pc_session *ps = svc_engine_session(s);
    size_t added = 0;

    *out = (one_shot_outcome){0};
    if (ps == NULL) {
        out->no_session = true;
        return out->rc = PC_NOMEM;
    }
    /* The lease is held from before the start timestamp to after the
     * commit: it cannot end in between (leases.h). */
    uint64_t gen = 0;
    if (o->lease) {
        pc_rc rc = hold_lease(s, ps, o, out, &gen);
        if (rc != PC_OK)
            return out->rc = rc;
    }
    pc_rc rc = exec_held(s, ps, o, want_reads, out, gen, &added);
    if (o->lease)
        leases_release(s, o->lease, gen, o->nputs, added, rc);
    return rc;
}

bool one_shot_exec_blind(svc *s, const one_shot *o, one_shot_outcome *out)
{
    pc_session *ps = svc_engine_session(s);
    retry_policy policy = policy_for(s, o);
    *out = (one_shot_outcome){0};
    if (ps == NULL || !s->cfg.one_pc || !one_shot_blind(o))
        return false;
    for (;;) {
        pc_rc rc = coord_blind_write(s, ps, o->writes, o->nwrites, &out->commit_ts,
                                     &out->conflict);
        if (rc == PC_INVALID)
            return false;
        if (rc == PC_OK || !retry_one_shot(s, ps, &policy, &rc, &out->conflict)) {
            out->rc = rc;
            return true;
        }
    }
}
