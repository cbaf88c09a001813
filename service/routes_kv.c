/*
 * routes_kv.c — single requests: point reads (latest, or a snapshot with
 * ?ts=), scans, autocommit writes with optional compare-and-set, and the
 * one-shot transaction /v1/txn (both run by one_shot.c). A blind write
 * goes from the event thread straight to the write committer
 * (write_batch.c), parsed once: what the event thread parsed waits in the
 * request's slot for the worker, should the write need one.
 */
#include <stdlib.h>
#include <string.h>

#include "keyspace.h"
#include "one_shot.h"
#include "reader.h"
#include "region_call.h"
#include "respond.h"
#include "write_batch.h"

/* GET /v1/kv/{key}. On an event thread (on_worker false) only what
 * cannot wait runs: a latest read whose value is durable, which on a
 * group's leader also needs its lease to let it read at once. A ?ts= read
 * (it may ask the oracle, wait on locks and on commits in flight), or a
 * latest read that meets a commit still in flight, a lock to resolve in
 * a group, or a member that cannot read at once, returns without an
 * answer, and the route's worker runs it again from the start
 * (docs/DESIGN.md §5: nothing that waits runs on an event thread). */
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
    /* A ?ts= read may wait: on a worker. A latest read runs here when it
     * needs no wait (rd_get_latest: on a Raft member, while its lease lets
     * it read at once), else it is handed to the worker below. */
    if (ts != 0 && !on_worker)
        return;
    if ((ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
        return;
    }
    pc_slice k = {ek, ks_user(ek, key, klen)};
    if (ts != 0) {
        svc_snapshot snap = svc_snapshot_begin(s, ts);
        if (snap != SVC_SNAP_OK) {
            reply_snapshot_refused(req, s, snap, ts);
            return;
        }
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
    svc_snapshot snap = pinned ? svc_snapshot_begin(s, ts) : SVC_SNAP_OK;
    if (snap != SVC_SNAP_OK) {
        reply_snapshot_refused(req, s, snap, ts);
        return;
    }
    if (!pinned && !svc_timestamp(s, &ts)) {
        reply_oracle_unavailable(req, s);
        return;
    }
    if ((ps = svc_engine_session(s)) == NULL)
        reply_no_session(req);
    else
        reply_scan_page(req, s, ps, start, slen, end, elen, ts, limit, NULL, enc);
    if (pinned)
        svc_snapshot_end(s, ts);
}

/* ---- one-shot transactions (one_shot.h) ---- */

static void h_txn(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    json_t *body;
    one_shot o = {0};

    if (!codec_encoding(req, &o.enc) || (body = httpd_body_json(req)) == NULL)
        return;
    if (one_shot_parse_txn(req, s, body, &o)) {
        one_shot_outcome out;
        one_shot_exec(s, &o, true, &out);
        reply_one_shot(req, s, &o, &out, true);
        one_shot_outcome_free(&out);
    }
    one_shot_free(&o);
    json_decref(body);
}

/* A parsed single write kept in the request's slot for the worker. */
static void one_shot_slot_free(void *p)
{
    one_shot_free(p);
    free(p);
}

/* PUT and DELETE /v1/kv/{key} on a handler worker: the whole one-shot
 * transaction, waiting out locks and retrying conflicts. The fast path
 * may have parsed the request already (the slot). */
static void single_write(httpd_req *req, svc *s, bool del)
{
    one_shot *o = httpd_slot(req), local = {0};
    if (o == NULL) {
        o = &local;
        if (!one_shot_parse_single(req, s, del, o)) {
            one_shot_free(o);
            return;
        }
    }
    one_shot_outcome out;
    if (!one_shot_exec_blind(s, o, &out))
        one_shot_exec(s, o, false, &out);
    reply_one_shot(req, s, o, &out, false);
    one_shot_outcome_free(&out);
    one_shot_free(&local);
}

/* ---- blind writes through the committer (write_batch.h) ---- */

#define FAST_MAX_BODY (64u << 10) /* bigger bodies are decoded on a worker */

typedef struct {
    wb_job job;           /* first: done() gets this pointer back */
    httpd_req *req;
    svc *s;
    one_shot *o;          /* owned by the request's slot */
} batched_write;

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
            reply_engine(b->req, b->s, w->rc, &w->conflict, b->o->enc);
        httpd_finish(b->req);
    }
    free(b);
}

/* Whether a write's region is led by another node: the committer proposes
 * to this node's groups only, so such a write runs on a worker, its two
 * phases sent to that node (actions.h). */
static bool led_elsewhere(svc *s, const one_shot *o)
{
    char url[RAFT_PEER_ADDR_MAX];
    for (size_t i = 0; i < o->nwrites; i++)
        if (region_call_elsewhere(s, o->writes[i].key, url, sizeof url))
            return true;
    return false;
}

/* On the event thread: parse (once: the request's slot keeps it for the
 * worker), and hand a blind write to the committer. Anything else (a
 * condition, a big body, one-phase commit off) returns without an answer
 * and runs on a worker as single_write. */
static void fast_write(httpd_req *req, svc *s, bool del)
{
    size_t len;
    one_shot *o;
    batched_write *b;

    httpd_body(req, &len);
    if (s->batch == NULL || !s->cfg.one_pc || len > FAST_MAX_BODY ||
        (o = calloc(1, sizeof(*o))) == NULL)
        return;
    if (!one_shot_parse_single(req, s, del, o)) {
        one_shot_slot_free(o); /* answered: a bad request */
        return;
    }
    httpd_set_slot(req, o, one_shot_slot_free);
    if (!one_shot_blind(o) || led_elsewhere(s, o) || (b = calloc(1, sizeof(*b))) == NULL)
        return;
    if (!httpd_defer(req)) {
        free(b);
        return;
    }
    *b = (batched_write){.req = req, .s = s, .o = o};
    b->job.w.m = o->writes;
    b->job.w.n = o->nwrites;
    b->job.done = batched_done;
    if (!write_batch_submit(s->batch, &b->job)) {
        httpd_dispatch(req); /* the committer is stopping */
        free(b);
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
    {.method = "GET", .pattern = "/v1/kv", .handler = h_scan, .blocking = true},
    {.method = "GET", .pattern = "/v1/kv/{key...}", .handler = h_get, .blocking = true,
     .fast = f_get},
    /* Blind writes go from the event thread to the committer (f_*); the
     * rest run on a worker (h_*). */
    {.method = "PUT", .pattern = "/v1/kv/{key...}", .handler = h_put, .fast = f_put},
    {.method = "DELETE", .pattern = "/v1/kv/{key...}", .handler = h_delete, .fast = f_delete},
    {.method = "POST", .pattern = "/v1/txn", .handler = h_txn},
};
const size_t kv_routes_n = sizeof(kv_routes) / sizeof(kv_routes[0]);
