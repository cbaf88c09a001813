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
 * (respond.c reply_one_shot).
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "coordinator.h"
#include "keyspace.h"
#include "one_shot.h"
#include "reader.h"
#include "timeutil.h"

#define ONE_SHOT_TRIES 5
#define MAX_ITEMS 1000 /* per list of /v1/txn */

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

static int cmp_mutation(const void *a, const void *b)
{
    const pc_mutation *x = a, *y = b;
    return key_cmp(x->key.data, x->key.len, y->key.data, y->key.len);
}

/* The writes as engine mutations, sorted by key (the engine takes them in
 * key order). A key written twice in one request is refused: which write
 * should win is not obvious, and it is most likely a client's mistake. */
static bool build_mutations(httpd_req *req, one_shot *o)
{
    const write_list *wl = &o->wl;
    size_t n = wl->n, off = 0;
    /* With a lease, each put also writes its attachment (leases.h). */
    size_t most = o->lease ? 2 * n : n;

    o->writes = calloc(most ? most : 1, sizeof(*o->writes));
    o->ekeys = malloc(wl->keys.len + n + 1 + (o->lease ? wl->keys.len + 9 * n : 0));
    if (o->writes == NULL || o->ekeys == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        size_t kn = ks_user(o->ekeys + off, writes_key(wl, i), wl->w[i].klen);
        o->writes[i] = (pc_mutation){
            .op = wl->w[i].deleted ? PC_OP_DELETE : PC_OP_PUT,
            .key = {o->ekeys + off, kn},
            .value = {wl->vals[i].data, wl->vals[i].len},
        };
        off += kn;
    }
    for (size_t i = 0; o->lease && i < wl->n; i++) {
        if (wl->w[i].deleted)
            continue;
        size_t kn = lease_attach_key(o->ekeys + off, o->lease, writes_key(wl, i), wl->w[i].klen);
        o->writes[n++] = (pc_mutation){.op = PC_OP_PUT, .key = {o->ekeys + off, kn}};
        off += kn;
        o->nputs++;
    }
    o->nwrites = n;
    qsort(o->writes, n, sizeof(*o->writes), cmp_mutation);
    for (size_t i = 1; i < n; i++) {
        if (cmp_mutation(&o->writes[i - 1], &o->writes[i]) == 0) {
            httpd_reply_error(req, 400, "bad_request", NULL, "a key is written twice");
            return false;
        }
    }
    return true;
}

static bool bad_condition(httpd_req *req)
{
    if (!httpd_replied(req))
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "each condition is {\"key\"} with exactly one of \"commit_ts\", "
                          "\"exists\" or \"value\"");
    return false;
}

/* One condition's kind and operand (its key is parsed with the others). */
static bool parse_condition(httpd_req *req, svc *s, json_t *it, codec_enc enc, condition *c)
{
    json_t *ts = json_object_get(it, "commit_ts"), *ex = json_object_get(it, "exists"),
           *v = json_object_get(it, "value");
    if ((ts != NULL) + (ex != NULL) + (v != NULL) != 1)
        return bad_condition(req);
    if (ts != NULL) {
        if (!json_is_integer(ts) || json_integer_value(ts) < 0)
            return bad_condition(req);
        c->kind = COND_COMMIT_TS;
        c->commit_ts = (uint64_t)json_integer_value(ts);
    } else if (ex != NULL) {
        if (!json_is_boolean(ex))
            return bad_condition(req);
        c->kind = COND_EXISTS;
        c->exists = json_is_true(ex);
    } else {
        c->kind = COND_VALUE;
        if (!codec_json_value(req, v, "conditions[].value", enc, s->cfg.max_value_bytes,
                              &c->value))
            return false;
    }
    return true;
}

static bool parse_conditions(httpd_req *req, svc *s, json_t *conds, one_shot *o)
{
    size_t n = json_array_size(conds), i;
    json_t *it, *keys;

    if (conds != NULL && !json_is_array(conds)) {
        httpd_reply_error(req, 400, "bad_request", NULL, "\"conditions\" must be an array");
        return false;
    }
    if (n > MAX_ITEMS) {
        httpd_reply_error(req, 400, "bad_request", NULL, "at most %d conditions", MAX_ITEMS);
        return false;
    }
    /* The keys as a list of their own, parsed like any list of keys. */
    if ((keys = json_array()) == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    json_array_foreach(conds, i, it) {
        static const char *const fields[] = {"key", "commit_ts", "exists", "value", NULL};
        json_t *k = json_object_get(it, "key");
        if (!json_is_object(it) || k == NULL) {
            json_decref(keys);
            return bad_condition(req);
        }
        char what[48];
        snprintf(what, sizeof what, "conditions[%zu]", i);
        if (!body_fields_known(req, it, what, fields)) {
            json_decref(keys);
            return false;
        }
        json_array_append(keys, k);
    }
    bool ok = keys_parse(req, keys, "conditions[].key", o->enc, MAX_ITEMS, &o->ckeys);
    json_decref(keys);
    if (!ok)
        return false;
    if ((o->conds = calloc(n ? n : 1, sizeof(*o->conds))) == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    json_array_foreach(conds, i, it) {
        if (!parse_condition(req, s, it, o->enc, &o->conds[i]))
            return false;
    }
    return true;
}

/* "lease": a lease id, or absent (0). false when it answered. */
static bool parse_lease(httpd_req *req, json_t *body, one_shot *o)
{
    json_t *l = json_object_get(body, "lease");
    if (l == NULL)
        return true;
    if (!json_is_integer(l) || json_integer_value(l) <= 0) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "\"lease\" must be a lease id (a positive integer from POST /v1/leases)");
        return false;
    }
    o->lease = (uint64_t)json_integer_value(l);
    return true;
}

bool one_shot_parse_txn(httpd_req *req, svc *s, json_t *body, one_shot *o)
{
    static const char *const fields[] = {"conditions", "reads", "writes", "lease", NULL};
    if (!json_is_object(body)) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "the body must be {\"conditions\":[...],\"reads\":[...],\"writes\":[...]}");
        return false;
    }
    if (!body_fields_known(req, body, "the body", fields))
        return false;
    return parse_lease(req, body, o) &&
           parse_conditions(req, s, json_object_get(body, "conditions"), o) &&
           keys_parse(req, json_object_get(body, "reads"), "reads", o->enc, MAX_ITEMS,
                      &o->reads) &&
           writes_parse(req, json_object_get(body, "writes"), o->enc, MAX_ITEMS,
                        s->cfg.max_value_bytes, &o->wl) &&
           build_mutations(req, o);
}

/* The one write of a single request as a write list. */
static bool single_write_list(httpd_req *req, write_list *wl, const char *key, size_t klen,
                              bool del)
{
    wl->w = calloc(1, sizeof(*wl->w));
    wl->vals = calloc(1, sizeof(*wl->vals));
    wl->cap = 1;
    if (wl->w == NULL || wl->vals == NULL || buf_append(&wl->keys, key, klen) != 0) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    wl->w[0].klen = klen;
    wl->w[0].deleted = del;
    wl->n = 1;
    return true;
}

bool one_shot_parse_single(httpd_req *req, svc *s, bool del, one_shot *o)
{
    char key[SVC_MAX_KEY];
    size_t klen;
    json_t *body = NULL, *v = NULL, *cas = NULL;
    bool ok = false;

    if (!codec_encoding(req, &o->enc) || !codec_path_key(req, "key", o->enc, key, &klen))
        return false;
    if (!del || httpd_body(req, NULL)[0] != '\0') {
        static const char *const put_fields[] = {"value", "if_commit_ts", "lease", NULL};
        static const char *const del_fields[] = {"if_commit_ts", NULL};
        if ((body = body_object(req, del ? del_fields : put_fields)) == NULL)
            return false;
        v = json_object_get(body, "value");
        cas = json_object_get(body, "if_commit_ts");
        if (!json_is_object(body) || (!del && v == NULL) || (del && v != NULL) ||
            (cas != NULL && (!json_is_integer(cas) || json_integer_value(cas) < 0))) {
            httpd_reply_error(req, 400, "bad_request", NULL,
                              del ? "the body may only hold {\"if_commit_ts\": C}"
                                  : "the body must be {\"value\": ..., \"if_commit_ts\"?: C, "
                                    "\"lease\"?: ID}");
            goto out;
        }
        if (!parse_lease(req, body, o))
            goto out;
    }
    if (!single_write_list(req, &o->wl, key, klen, del) ||
        (v != NULL &&
         !codec_json_value(req, v, "value", o->enc, s->cfg.max_value_bytes, &o->wl.vals[0])))
        goto out;
    o->wl.bytes = klen + o->wl.vals[0].len;
    if (cas != NULL) {
        /* if_commit_ts: a condition on the key's latest commit_ts. */
        o->conds = calloc(1, sizeof(*o->conds));
        o->ckeys.off = calloc(1, sizeof(size_t));
        o->ckeys.len = calloc(1, sizeof(size_t));
        if (o->conds == NULL || o->ckeys.off == NULL || o->ckeys.len == NULL ||
            buf_append(&o->ckeys.keys, key, klen) != 0) {
            httpd_reply_error(req, 500, "internal", NULL, "out of memory");
            goto out;
        }
        o->ckeys.len[0] = klen;
        o->ckeys.n = 1;
        o->conds[0] = (condition){.kind = COND_COMMIT_TS,
                                  .commit_ts = (uint64_t)json_integer_value(cas)};
    }
    ok = build_mutations(req, o);
out:
    json_decref(body);
    return ok;
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
