/*
 * routes_kv.c — single requests (CONTRACT §5): point reads (latest, or a
 * snapshot with ?ts=), autocommit writes with optional compare-and-set,
 * scans, and the one-shot transaction /v1/txn with conditions.
 *
 * A one-shot write is a whole Percolator transaction run for the client:
 * begin (start_ts), check conditions at start_ts, commit. The client saw
 * nothing before the commit, so a write_conflict is retried here, with a
 * fresh start_ts, a few times. A blind write (no condition, no read) has
 * nothing to conflict with: it retries, waiting out locks, until
 * --lock-wait-ms runs out, and then answers key_locked, never
 * write_conflict (docs/DESIGN.md §5.2).
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "coordinator.h"
#include "keyspace.h"
#include "reader.h"
#include "respond.h"
#include "timeutil.h"
#include "write_batch.h"

#define ONE_SHOT_TRIES 5
#define MAX_ITEMS 1000 /* per list of /v1/txn: each item may take a 4 KiB key */

/* GET /v1/kv/{key}. On an event thread (on_worker false) only what
 * cannot wait runs: a latest read whose value is durable. A ?ts= read (it
 * may ask the oracle, wait on locks and on commits in flight) or a latest
 * read that meets a commit still being flushed returns without an answer,
 * and the route's worker runs it again from the start (docs/DESIGN.md §5:
 * nothing that waits runs on an event thread). */
static void get_key(httpd_req *req, svc *s, bool on_worker)
{
    codec_enc enc;
    char key[SVC_MAX_KEY], ek[KS_MAX];
    size_t klen;
    uint64_t ts, cts = 0;
    pc_buf v = {0};
    pc_conflict c;
    pc_session *ps;
    pc_rc rc;

    if (!codec_encoding(req, &enc) ||
        !codec_path_key(req, "key", enc, key, &klen) ||
        !codec_query_u64(req, "ts", 0, 1, (1ull << 53) - 1, &ts))
        return;
    if (ts != 0 && !on_worker)
        return;
    if ((ps = svc_engine_session(s)) == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "no storage session");
        return;
    }
    pc_slice k = {ek, ks_user(ek, key, klen)};
    if (ts != 0) {
        if (!svc_snapshot_begin(req, s, ts))
            return;
        rc = rd_get(s, ps, k, ts, &v, &cts, &c);
        svc_snapshot_end(s, ts);
    } else {
        /* The latest committed value: no timestamp, so no oracle needed. */
        rc = rd_get_latest(s, ps, k, &v, &cts, &c, on_worker);
        if (rc == PC_LOCKED && !on_worker) {
            pc_buf_free(&v);
            return;
        }
    }
    if (rc == PC_OK) {
        json_t *jk = codec_to_json(key, klen, enc), *jv = codec_to_json(v.data, v.len, enc);
        if (jk == NULL || jv == NULL) {
            json_decref(jk);
            json_decref(jv);
            codec_reply_not_text(req);
        } else {
            httpd_reply_json(req, 200, json_pack("{s:o,s:o,s:I}", "key", jk, "value", jv,
                                                 "commit_ts", (json_int_t)cts));
        }
    } else {
        reply_engine(req, s, rc, &c, enc);
    }
    pc_buf_free(&v);
}

static void f_get(httpd_req *req, void *ctx) { get_key(req, ctx, false); }
static void h_get(httpd_req *req, void *ctx) { get_key(req, ctx, true); }

static void h_scan(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    char start[SVC_MAX_KEY + 1], end[SVC_MAX_KEY + 1];
    size_t slen = 0, elen = 0;
    uint64_t limit, ts;
    pc_session *ps;

    if (!codec_encoding(req, &enc) ||
        !parse_scan_range(req, enc, start, &slen, end, &elen, &limit) ||
        !codec_query_u64(req, "ts", 0, 1, (1ull << 53) - 1, &ts))
        return;
    /* Without ts a scan still reads one consistent snapshot: a fresh one
     * (far above the GC safe point, which trails by --gc-retention-ms). */
    bool pinned = ts != 0;
    if (pinned && !svc_snapshot_begin(req, s, ts))
        return;
    if (!pinned && !svc_timestamp(s, &ts)) {
        reply_oracle_unavailable(req);
        return;
    }
    if ((ps = svc_engine_session(s)) == NULL)
        httpd_reply_error(req, 500, "internal", NULL, "no storage session");
    else
        reply_scan_page(req, s, ps, start, slen, end, elen, ts, limit, NULL, enc);
    if (pinned)
        svc_snapshot_end(s, ts);
}

/* ---- one-shot transactions ---- */

typedef enum { COND_COMMIT_TS, COND_EXISTS, COND_VALUE } cond_kind;

typedef struct {
    cond_kind kind;
    char key[SVC_MAX_KEY];
    size_t klen;
    uint64_t commit_ts;   /* COND_COMMIT_TS: 0 = must not exist */
    bool exists;          /* COND_EXISTS */
    buf value;            /* COND_VALUE */
} condition;

typedef struct {
    condition *conds;
    size_t nconds;
    char (*reads)[SVC_MAX_KEY];
    size_t *read_lens, nreads;
    pc_mutation *writes;  /* engine keys, sorted, distinct */
    char *keybuf;
    buf *vals;            /* one per slot of writes */
    size_t nwrites, capwrites;
} one_shot;

static void one_shot_free(one_shot *o)
{
    for (size_t i = 0; i < o->nconds; i++)
        buf_free(&o->conds[i].value);
    free(o->conds);
    free(o->reads);
    free(o->read_lens);
    for (size_t i = 0; o->vals != NULL && i < o->capwrites; i++)
        buf_free(&o->vals[i]);
    free(o->vals);
    free(o->writes);
    free(o->keybuf);
}

static int cmp_mutation(const void *a, const void *b)
{
    const pc_mutation *x = a, *y = b;
    return key_cmp(x->key.data, x->key.len, y->key.data, y->key.len);
}

/* Sort the writes by key (the engine takes them in key order). A key
 * written twice in one request is refused: which write should win is not
 * obvious, and it is most likely a client's mistake. */
static bool sort_writes(httpd_req *req, one_shot *o)
{
    qsort(o->writes, o->nwrites, sizeof(*o->writes), cmp_mutation);
    for (size_t i = 1; i < o->nwrites; i++) {
        if (cmp_mutation(&o->writes[i - 1], &o->writes[i]) == 0) {
            httpd_reply_error(req, 400, "bad_request", NULL, "a key is written twice");
            return false;
        }
    }
    return true;
}

static bool alloc_writes(httpd_req *req, one_shot *o, size_t n)
{
    o->writes = calloc(n ? n : 1, sizeof(*o->writes));
    o->vals = calloc(n ? n : 1, sizeof(*o->vals));
    o->keybuf = malloc((n ? n : 1) * KS_MAX);
    o->capwrites = n ? n : 1;
    if (o->writes == NULL || o->vals == NULL || o->keybuf == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    return true;
}

static bool add_write(httpd_req *req, one_shot *o, const char *key, size_t klen, bool del)
{
    size_t i = o->nwrites++;
    char *k = o->keybuf + i * KS_MAX;
    o->writes[i].op = del ? PC_OP_DELETE : PC_OP_PUT;
    o->writes[i].key = (pc_slice){k, ks_user(k, key, klen)};
    o->writes[i].value = (pc_slice){o->vals[i].data, o->vals[i].len};
    (void)req;
    return true;
}

/* Parse {"conditions":[...],"reads":[...],"writes":[...]}. */
static bool parse_txn(httpd_req *req, svc *s, json_t *body, codec_enc enc, one_shot *o)
{
    json_t *conds = json_object_get(body, "conditions"), *reads = json_object_get(body, "reads"),
           *writes = json_object_get(body, "writes"), *it;
    size_t i;

    if (!json_is_object(body) || (conds && !json_is_array(conds)) ||
        (reads && !json_is_array(reads)) || (writes && !json_is_array(writes))) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "the body must be {\"conditions\":[...],\"reads\":[...],\"writes\":[...]}");
        return false;
    }
    if (json_array_size(conds) > MAX_ITEMS || json_array_size(reads) > MAX_ITEMS ||
        json_array_size(writes) > MAX_ITEMS) {
        httpd_reply_error(req, 400, "bad_request", NULL, "at most %d items in each list",
                          MAX_ITEMS);
        return false;
    }
    o->conds = calloc(json_array_size(conds) + 1, sizeof(*o->conds));
    o->reads = calloc(json_array_size(reads) + 1, sizeof(*o->reads));
    o->read_lens = calloc(json_array_size(reads) + 1, sizeof(*o->read_lens));
    if (o->conds == NULL || o->reads == NULL || o->read_lens == NULL ||
        !alloc_writes(req, o, json_array_size(writes))) {
        if (!httpd_replied(req))
            httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    json_array_foreach(conds, i, it) {
        condition *c = &o->conds[o->nconds++];
        json_t *ts = json_object_get(it, "commit_ts"), *ex = json_object_get(it, "exists"),
               *v = json_object_get(it, "value");
        if (!json_is_object(it) ||
            !codec_json_key(req, json_object_get(it, "key"), "conditions[].key", enc, c->key,
                            &c->klen))
            goto bad_condition;
        if ((ts != NULL) + (ex != NULL) + (v != NULL) != 1)
            goto bad_condition;
        if (ts != NULL) {
            if (!json_is_integer(ts) || json_integer_value(ts) < 0)
                goto bad_condition;
            c->kind = COND_COMMIT_TS;
            c->commit_ts = (uint64_t)json_integer_value(ts);
        } else if (ex != NULL) {
            if (!json_is_boolean(ex))
                goto bad_condition;
            c->kind = COND_EXISTS;
            c->exists = json_is_true(ex);
        } else {
            c->kind = COND_VALUE;
            if (!codec_json_value(req, v, "conditions[].value", enc, s->cfg.max_value_bytes,
                                  &c->value))
                return false;
        }
    }
    json_array_foreach(reads, i, it) {
        if (!codec_json_key(req, it, "reads[]", enc, o->reads[i], &o->read_lens[i]))
            return false;
        o->nreads++;
    }
    json_array_foreach(writes, i, it) {
        char key[SVC_MAX_KEY];
        size_t klen;
        json_t *del = json_object_get(it, "delete"), *v = json_object_get(it, "value");
        if (!json_is_object(it) ||
            !codec_json_key(req, json_object_get(it, "key"), "writes[].key", enc, key, &klen))
            goto bad_write;
        if ((del != NULL && !json_is_boolean(del)) || (json_is_true(del) ? v != NULL : v == NULL))
            goto bad_write;
        if (v != NULL && !codec_json_value(req, v, "writes[].value", enc,
                                           s->cfg.max_value_bytes, &o->vals[o->nwrites]))
            return false;
        add_write(req, o, key, klen, json_is_true(del));
    }
    return sort_writes(req, o);
bad_condition:
    if (!httpd_replied(req))
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "each condition is {\"key\"} with exactly one of \"commit_ts\", "
                          "\"exists\" or \"value\"");
    return false;
bad_write:
    if (!httpd_replied(req))
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "each write is {\"key\",\"value\"} or {\"key\",\"delete\":true}");
    return false;
}

/* Check one condition at ts. PC_OK: holds; PC_NOT_FOUND: fails (why set);
 * anything else: the read failed. */
static pc_rc check_condition(svc *s, pc_session *ps, const condition *c, uint64_t ts,
                             char *why, size_t whylen, pc_conflict *conf)
{
    char ek[KS_MAX];
    pc_buf v = {0};
    uint64_t cts = 0;
    pc_rc rc = rd_get(s, ps, (pc_slice){ek, ks_user(ek, c->key, c->klen)}, ts, &v, &cts, conf);
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

/* How a one-shot write that failed with *rc goes on: true to try again.
 * Only conflicts are retried. A blind write waits a lock out (resolving a
 * dead owner's) and retries a newer write at once, until the deadline;
 * past it, whatever stopped it is reported as key_locked. Other one-shot
 * writes try ONE_SHOT_TRIES times with a short pause. */
typedef struct {
    bool blind;
    uint64_t deadline_ms;
    unsigned attempt, waits;
} retry_policy;

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

static retry_policy one_shot_policy(svc *s, const one_shot *o, bool want_reads)
{
    return (retry_policy){.blind = o->nconds == 0 && (!want_reads || o->nreads == 0),
                          .deadline_ms = time_mono_ms() + s->cfg.lock_wait_ms};
}

/* Run a one-shot transaction and answer the request: conditions and reads
 * at a fresh start_ts, then the commit; retried on conflicts. */
static void run_one_shot(httpd_req *req, svc *s, one_shot *o, codec_enc enc, bool want_reads)
{
    pc_session *ps = svc_engine_session(s);
    retry_policy policy = one_shot_policy(s, o, want_reads);
    char why[128];

    if (ps == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "no storage session");
        return;
    }
    for (;;) {
        uint64_t start, cts = 0;
        pc_conflict c;
        pc_rc rc = PC_OK;
        json_t *reads = NULL;

        if (!svc_timestamp(s, &start)) {
            reply_oracle_unavailable(req);
            return;
        }
        for (size_t i = 0; i < o->nconds && rc == PC_OK; i++) {
            rc = check_condition(s, ps, &o->conds[i], start, why, sizeof(why), &c);
            if (rc == PC_NOT_FOUND) {
                reply_condition_failed(req, o->conds[i].key, o->conds[i].klen, enc, i, why);
                return;
            }
        }
        if (rc == PC_OK && want_reads) {
            reads = json_array();
            for (size_t i = 0; i < o->nreads && rc == PC_OK; i++) {
                char ek[KS_MAX];
                pc_buf v = {0};
                uint64_t rts = 0;
                rc = rd_get(s, ps, (pc_slice){ek, ks_user(ek, o->reads[i], o->read_lens[i])},
                            start, &v, &rts, &c);
                json_t *jk = codec_to_json(o->reads[i], o->read_lens[i], enc), *item = NULL;
                if (rc == PC_OK) {
                    json_t *jv = codec_to_json(v.data, v.len, enc);
                    if (jk != NULL && jv != NULL)
                        item = json_pack("{s:O,s:b,s:o,s:I}", "key", jk, "found", 1, "value",
                                         jv, "commit_ts", (json_int_t)rts);
                    else
                        json_decref(jv);
                } else if (rc == PC_NOT_FOUND) {
                    rc = PC_OK;
                    if (jk != NULL)
                        item = json_pack("{s:O,s:b}", "key", jk, "found", 0);
                }
                json_decref(jk);
                pc_buf_free(&v);
                if (rc == PC_OK && item == NULL) {
                    json_decref(reads);
                    codec_reply_not_text(req);
                    return;
                }
                json_array_append_new(reads, item);
            }
        }
        if (rc == PC_OK)
            rc = coord_commit_internal(s, ps, start, o->writes, o->nwrites, &cts, &c);
        if (rc == PC_OK) {
            metrics_inc(s->m.txn_committed, 1);
            json_t *ans = json_pack("{s:I}", "commit_ts", (json_int_t)cts);
            if (want_reads)
                json_object_set_new(ans, "reads", reads);
            httpd_reply_json(req, 200, ans);
            return;
        }
        json_decref(reads);
        /* The client saw nothing yet: a conflict is retried with a fresh
         * snapshot (which re-checks the conditions). */
        if (retry_one_shot(s, ps, &policy, &rc, &c))
            continue;
        if (rc == PC_WRITE_CONFLICT || rc == PC_LOCKED)
            metrics_inc(metrics_series_get(s->m.txn_aborted, pc_rc_name(rc), NULL), 1);
        reply_engine(req, s, rc, &c, enc);
        return;
    }
}

static void h_txn(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    json_t *body;
    one_shot o = {0};

    if (!codec_encoding(req, &enc) ||
        (body = httpd_body_json(req)) == NULL)
        return;
    if (parse_txn(req, s, body, enc, &o))
        run_one_shot(req, s, &o, enc, true);
    one_shot_free(&o);
    json_decref(body);
}

/* A write with nothing to check: one phase, one timestamp (the start is
 * the commit), retried on conflicts like any one-shot write. false when
 * it cannot go that way (one-phase commit off): run_one_shot then. */
static bool blind_write(httpd_req *req, svc *s, one_shot *o, codec_enc enc)
{
    pc_session *ps = svc_engine_session(s);
    retry_policy policy = one_shot_policy(s, o, false);
    if (ps == NULL || !s->cfg.one_pc)
        return false;
    for (;;) {
        uint64_t cts = 0;
        pc_conflict c;
        pc_rc rc = coord_blind_write(s, ps, o->writes, o->nwrites, &cts, &c);
        if (rc == PC_INVALID)
            return false;
        if (rc == PC_OK) {
            reply_committed(req, s, cts);
            return true;
        }
        if (retry_one_shot(s, ps, &policy, &rc, &c))
            continue;
        reply_engine(req, s, rc, &c, enc);
        return true;
    }
}

/* PUT and DELETE /v1/kv/{key}: a one-shot transaction of one write, with
 * if_commit_ts as a compare-and-set condition. */
typedef struct {
    codec_enc enc;
    one_shot o;           /* the write; a condition in o.conds when if_commit_ts was given */
} single;

/* Parse the request into w; false when it answered (a bad request). */
static bool parse_single(httpd_req *req, svc *s, bool del, single *w)
{
    char key[SVC_MAX_KEY];
    size_t klen;
    json_t *body = NULL, *v = NULL, *cas = NULL;
    one_shot *o = &w->o;
    bool ok = false;

    if (!codec_encoding(req, &w->enc) ||
        !codec_path_key(req, "key", w->enc, key, &klen))
        return false;
    if (!del || httpd_body(req, NULL)[0] != '\0') {
        if ((body = httpd_body_json(req)) == NULL)
            return false;
        v = json_object_get(body, "value");
        cas = json_object_get(body, "if_commit_ts");
        if (!json_is_object(body) || (!del && v == NULL) || (del && v != NULL) ||
            (cas != NULL && (!json_is_integer(cas) || json_integer_value(cas) < 0))) {
            httpd_reply_error(req, 400, "bad_request", NULL,
                              del ? "the body may only hold {\"if_commit_ts\": C}"
                                  : "the body must be {\"value\": ..., \"if_commit_ts\"?: C}");
            goto out;
        }
    }
    if (!alloc_writes(req, o, 1) ||
        (v != NULL &&
         !codec_json_value(req, v, "value", w->enc, s->cfg.max_value_bytes, &o->vals[0])))
        goto out;
    add_write(req, o, key, klen, del);
    if (cas != NULL) {
        o->conds = calloc(1, sizeof(*o->conds));
        if (o->conds == NULL) {
            httpd_reply_error(req, 500, "internal", NULL, "out of memory");
            goto out;
        }
        o->nconds = 1;
        o->conds[0].kind = COND_COMMIT_TS;
        memcpy(o->conds[0].key, key, klen);
        o->conds[0].klen = klen;
        o->conds[0].commit_ts = (uint64_t)json_integer_value(cas);
    }
    ok = true;
out:
    json_decref(body);
    return ok;
}

/* On a handler worker: the whole one-shot transaction, waiting out
 * locks and retrying conflicts. */
static void single_write(httpd_req *req, svc *s, bool del)
{
    single w = {0};
    if (parse_single(req, s, del, &w) && (w.o.nconds > 0 || !blind_write(req, s, &w.o, w.enc)))
        run_one_shot(req, s, &w.o, w.enc, false);
    one_shot_free(&w.o);
}

/* ---- blind writes through the committer (write_batch.h) ---- */

#define FAST_MAX_BODY (64u << 10) /* bigger bodies are decoded on a worker */

typedef struct {
    wb_job job;           /* first: done() gets this pointer back */
    httpd_req *req;
    svc *s;
    single w;
} batched_write;

static void batched_free(batched_write *b)
{
    one_shot_free(&b->w.o);
    free(b);
}

/* On the committer thread, once the round is durable (or failed). */
static void batched_done(wb_job *job)
{
    batched_write *b = (batched_write *)job;
    pc_blind_write *w = &job->w;

    if (w->rc == PC_LOCKED || w->rc == PC_WRITE_CONFLICT) {
        /* Busy key or a newer write: the worker's path waits and retries
         * (with a fresh timestamp) as any one-shot write does. */
        httpd_dispatch(b->req);
    } else {
        if (w->rc == PC_OK)
            reply_committed(b->req, b->s, w->commit_ts);
        else
            reply_engine(b->req, b->s, w->rc, &w->conflict, b->w.enc);
        httpd_finish(b->req);
    }
    batched_free(b);
}

/* On the event thread: parse, and hand a blind write to the committer.
 * Anything else (a condition, a big body, one-phase commit off) returns
 * without an answer and runs on a worker as single_write. */
static void fast_write(httpd_req *req, svc *s, bool del)
{
    size_t len;
    batched_write *b;

    httpd_body(req, &len);
    if (s->batch == NULL || !s->cfg.one_pc || len > FAST_MAX_BODY ||
        (b = calloc(1, sizeof(*b))) == NULL)
        return;
    b->req = req;
    b->s = s;
    if (!parse_single(req, s, del, &b->w) || b->w.o.nconds > 0 || !httpd_defer(req)) {
        batched_free(b);
        return;
    }
    b->job.w.m = b->w.o.writes;
    b->job.w.n = b->w.o.nwrites;
    b->job.done = batched_done;
    if (!write_batch_submit(s->batch, &b->job)) {
        httpd_dispatch(req); /* the committer is stopping */
        batched_free(b);
    }
}

static void f_put(httpd_req *req, void *ctx) { fast_write(req, ctx, false); }
static void f_delete(httpd_req *req, void *ctx) { fast_write(req, ctx, true); }
static void h_put(httpd_req *req, void *ctx) { single_write(req, ctx, false); }
static void h_delete(httpd_req *req, void *ctx) { single_write(req, ctx, true); }

const httpd_route kv_routes[] = {
    /* A scan asks the oracle and may wait on locks: off the event threads.
     * Latest point reads stay on them (the hot path, f_get); whatever may
     * wait goes to a worker (h_get). */
    {.method = "GET", .pattern = "/v1/kv", .handler = h_scan, .name = "kv_scan", .blocking = true},
    {.method = "GET", .pattern = "/v1/kv/{key}", .handler = h_get,
     .name = "kv_get", .blocking = true, .fast = f_get},
    /* Blind writes go from the event thread to the committer (f_*); the
     * rest run on a worker (h_*). */
    {.method = "PUT", .pattern = "/v1/kv/{key}", .handler = h_put, .name = "kv_put", .fast = f_put},
    {.method = "DELETE", .pattern = "/v1/kv/{key}", .handler = h_delete,
     .name = "kv_delete", .fast = f_delete},
    {.method = "POST", .pattern = "/v1/txn", .handler = h_txn, .name = "txn_oneshot"},
};
const size_t kv_routes_n = sizeof(kv_routes) / sizeof(kv_routes[0]);
