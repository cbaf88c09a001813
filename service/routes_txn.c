/*
 * routes_txn.c — transaction sessions, /v1/txns... (the spec's sessions): begin
 * takes start_ts from the oracle; reads go to the engine at start_ts after
 * the session's own buffered writes; writes stay buffered until commit,
 * which runs the coordinator's two-phase (or one-phase) commit.
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "buf.h"
#include "coordinator.h"
#include "keyspace.h"
#include "observers.h"
#include "reader.h"
#include "respond.h"
#include "writes.h"

#define MAX_BATCH_ITEMS 10000

static json_t *txn_json(const txn *t)
{
    static const char *const names[] = {"active", "active", "committed", "aborted"};
    int st = atomic_load(&t->state);
    json_t *j = json_pack("{s:s,s:I,s:s,s:I,s:I}", "id", t->id, "start_ts",
                          (json_int_t)t->start_ts, "state", names[st], "writes",
                          (json_int_t)t->writes, "lease_ttl_ms", (json_int_t)t->lease_ttl_ms);
    if (st == TXN_COMMITTED)
        json_object_set_new(j, "commit_ts", json_integer((json_int_t)t->commit_ts));
    if (t->end_reason != NULL && st != TXN_COMMITTED)
        json_object_set_new(j, "reason", json_string(t->end_reason));
    return j;
}

static void reply_too_many_sessions(httpd_req *req, svc *s)
{
    httpd_add_header(req, "Retry-After", "1");
    httpd_reply_error(req, 503, "too_many_sessions", json_pack("{s:i}", "retry_after_ms", 1000),
                      "%llu sessions are open (--max-sessions); commit or roll back one, "
                      "or retry later", (unsigned long long)s->cfg.max_sessions);
}

static void h_begin(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    uint64_t ttl = s->cfg.lease_ttl_ms, ts;
    size_t blen = 0;

    httpd_body(req, &blen);
    if (blen > 0) {
        json_t *body = body_object(req, (const char *const[]){"lease_ttl_ms", NULL}), *v;
        if (body == NULL)
            return;
        if ((v = json_object_get(body, "lease_ttl_ms")) != NULL) {
            if (!json_is_integer(v) || json_integer_value(v) < 100 ||
                json_integer_value(v) > 3600000) {
                json_decref(body);
                httpd_reply_error(req, 400, "bad_request", NULL,
                                  "lease_ttl_ms must be an integer from 100 to 3600000");
                return;
            }
            ttl = (uint64_t)json_integer_value(v);
        }
        json_decref(body);
    }
    /* Full already: refused without asking the oracle. The cap itself is
     * taken when the session is made (sessions_begin_capped). */
    if (sessions_open(s->sessions) >= s->cfg.max_sessions) {
        reply_too_many_sessions(req, s);
        return;
    }
    /* Sessions begin only where their writes can be proposed: they live
     * here, with the term they began in. */
    uint64_t term = svc_leader_term(s);
    if (term == 0) {
        reply_not_leader(req);
        return;
    }
    if (!svc_timestamp(s, &ts)) {
        reply_oracle_unavailable(req, s);
        return;
    }
    bool full;
    txn *t = sessions_begin_capped(s->sessions, ts, ttl, s->cfg.max_sessions, &full);
    if (t == NULL && full) {
        reply_too_many_sessions(req, s);
        return;
    }
    if (t == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    t->raft_term = term;
    metrics_inc(s->m.txn_begun, 1);
    httpd_reply_json(req, 201, json_pack("{s:s,s:I,s:I}", "id", t->id, "start_ts",
                                         (json_int_t)t->start_ts, "lease_ttl_ms",
                                         (json_int_t)ttl));
    sessions_release(s->sessions, t);
}

static void h_status(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    txn *t;
    if ((t = txn_open(req, s, true)) == NULL)
        return;
    httpd_reply_json(req, 200, txn_json(t));
    txn_close(s, t);
}

/* Read one key for a session: its own write, else the snapshot. Returns
 * the JSON item ({"key","value","commit_ts"} with found) or NULL after
 * answering an error. */
static json_t *session_read(httpd_req *req, svc *s, pc_session *ps, const txn *t,
                            const char *key, size_t klen, codec_enc enc, bool *found)
{
    const txn_write *w = txn_find(t, key, klen);
    pc_buf v = {0};
    uint64_t cts = 0;
    json_t *jk = codec_to_json(key, klen, enc), *jv;

    if (jk == NULL) {
        codec_reply_not_text(req);
        return NULL;
    }
    if (w != NULL) {
        *found = !w->deleted;
        if (!*found)
            return jk;
        /* Not committed yet: commit_ts 0 marks the session's own write. */
        if ((jv = codec_to_json(w->val, w->vlen, enc)) == NULL)
            goto not_text;
        return json_pack("{s:o,s:o,s:i}", "key", jk, "value", jv, "commit_ts", 0);
    }
    char ek[KS_MAX];
    pc_conflict c;
    pc_rc rc = rd_get(s, ps, (pc_slice){ek, ks_user(ek, key, klen)}, t->start_ts, &v, &cts, &c);
    *found = rc == PC_OK;
    if (rc == PC_NOT_FOUND)
        return jk;
    if (rc != PC_OK) {
        json_decref(jk);
        pc_buf_free(&v);
        reply_engine(req, s, rc, &c, enc);
        return NULL;
    }
    jv = codec_to_json(v.data, v.len, enc);
    pc_buf_free(&v);
    if (jv == NULL)
        goto not_text;
    return json_pack("{s:o,s:o,s:I}", "key", jk, "value", jv, "commit_ts", (json_int_t)cts);
not_text:
    json_decref(jk);
    codec_reply_not_text(req);
    return NULL;
}

static void h_get_key(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    char key[SVC_MAX_KEY];
    size_t klen;
    txn *t;
    pc_session *ps;
    bool found;

    if (!codec_encoding(req, &enc) ||
        !codec_path_key(req, "key", enc, key, &klen) || (t = txn_open(req, s, false)) == NULL)
        return;
    if ((ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
    } else {
        json_t *item = session_read(req, s, ps, t, key, klen, enc, &found);
        if (item != NULL && found)
            httpd_reply_json(req, 200, item);
        else if (item != NULL) {
            json_decref(item);
            httpd_reply_error(req, 404, "not_found", NULL, "no such key");
        }
    }
    txn_close(s, t);
}

/* After a commit that left its prewrite locks (503 with the oracle down),
 * the locks hold the buffered values under the buffer's first key as the
 * primary: the buffer must stay as it is until the commit is retried or
 * rolled back (docs/DESIGN.md §3.3). true when it answered 409. */
static bool refuse_pending(httpd_req *req, const txn *t)
{
    if (!t->commit_pending)
        return false;
    httpd_reply_error(req, 409, "commit_pending", NULL,
                      "a commit of this transaction is pending (its locks are written): "
                      "retry POST /v1/txns/%s/commit or roll it back; no more writes",
                      t->id);
    return true;
}

/* Charge the session for `bytes` of buffer against what all sessions
 * together may hold; false after answering 503 session_memory_full. */
static bool charge(httpd_req *req, svc *s, txn *t, size_t bytes)
{
    if (sessions_charge(s->sessions, t, bytes, s->cfg.max_session_bytes))
        return true;
    httpd_add_header(req, "Retry-After", "1");
    httpd_reply_error(req, 503, "session_memory_full", json_pack("{s:i}", "retry_after_ms", 1000),
                      "all sessions together buffer %llu bytes (--max-session-bytes); "
                      "retry later", (unsigned long long)s->cfg.max_session_bytes);
    return false;
}

/* Buffer one write, answering 413 when the session grows too big, 503
 * when all sessions together would. */
static bool buffer_write(httpd_req *req, svc *s, txn *t, const char *key, size_t klen,
                         bool deleted, const buf *val)
{
    size_t vlen = val ? val->len : 0, after = txn_bytes_after(t, key, klen, vlen);
    /* Charged before it is buffered (a batch may have been charged for
     * all its writes already); txn_close charges what it took at the end. */
    if (after <= s->cfg.max_txn_bytes && after > t->charged && !charge(req, s, t, after))
        return false;
    txn_buffer_rc r = txn_buffer(t, key, klen, deleted, val ? val->data : NULL, vlen,
                                 s->cfg.max_txn_bytes);
    if (r == TXN_TOO_BIG)
        httpd_reply_error(req, 413, "payload_too_large", NULL,
                          "the transaction would buffer more than %llu bytes",
                          (unsigned long long)s->cfg.max_txn_bytes);
    else if (r == TXN_NOMEM)
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
    return r == TXN_BUFFERED;
}

static void h_put_key(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    char key[SVC_MAX_KEY];
    size_t klen;
    buf val = BUF_INIT;
    json_t *body = NULL;
    txn *t;

    if (!codec_encoding(req, &enc) ||
        !codec_path_key(req, "key", enc, key, &klen) ||
        (body = body_object(req, (const char *const[]){"value", NULL})) == NULL)
        return;
    if (json_object_get(body, "value") == NULL) {
        httpd_reply_error(req, 400, "bad_request", NULL, "the body must be {\"value\": ...}");
        goto out;
    }
    if (!codec_json_value(req, json_object_get(body, "value"), "value", enc,
                          s->cfg.max_value_bytes, &val))
        goto out;
    if ((t = txn_open(req, s, false)) == NULL)
        goto out;
    if (!refuse_pending(req, t) && buffer_write(req, s, t, key, klen, false, &val))
        httpd_reply_empty(req, 204);
    txn_close(s, t);
out:
    json_decref(body);
    buf_free(&val);
}

static void h_delete_key(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    char key[SVC_MAX_KEY];
    size_t klen;
    txn *t;

    if (!codec_encoding(req, &enc) ||
        !codec_path_key(req, "key", enc, key, &klen) || (t = txn_open(req, s, false)) == NULL)
        return;
    if (!refuse_pending(req, t) && buffer_write(req, s, t, key, klen, true, NULL))
        httpd_reply_empty(req, 204);
    txn_close(s, t);
}

/* One read of a batch as its answer item: {"key","found":true,"value",
 * "commit_ts"} or {"key","found":false}; NULL when it answered. */
static json_t *batch_read(httpd_req *req, svc *s, pc_session *ps, txn *t, const char *key,
                          size_t klen, codec_enc enc)
{
    bool found;
    json_t *r = session_read(req, s, ps, t, key, klen, enc, &found);
    if (r == NULL || found) {
        if (r != NULL)
            json_object_set_new(r, "found", json_true());
        return r;
    }
    json_t *k = r;
    r = json_pack("{s:O,s:b}", "key", k, "found", 0);
    json_decref(k);
    return r;
}

/* {"reads":[k...],"writes":[{"key","value"}|{"key","delete":true}...]}:
 * everything is parsed and checked before anything is buffered. */
static void h_batch(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    json_t *body = NULL, *out = NULL;
    key_list rl = {0};
    write_list wl = {0};
    txn *t = NULL;
    pc_session *ps;

    if (!codec_encoding(req, &enc) ||
        (body = body_object(req, (const char *const[]){"reads", "writes", NULL})) == NULL)
        return;
    if (!keys_parse(req, json_object_get(body, "reads"), "reads", enc, MAX_BATCH_ITEMS, &rl) ||
        !writes_parse(req, json_object_get(body, "writes"), enc, MAX_BATCH_ITEMS,
                      s->cfg.max_value_bytes, &wl) ||
        (t = txn_open(req, s, false)) == NULL)
        goto out;
    if (wl.n > 0 && refuse_pending(req, t))
        goto out;
    /* All or nothing: refuse a batch that could push the session over its
     * limit before buffering any of it (counted as if every key were new). */
    if (t->bytes + wl.bytes > s->cfg.max_txn_bytes) {
        httpd_reply_error(req, 413, "payload_too_large", NULL,
                          "the transaction would buffer more than %llu bytes",
                          (unsigned long long)s->cfg.max_txn_bytes);
        goto out;
    }
    /* The same for all sessions together: the batch is charged in full
     * before any of it is buffered (txn_close charges what it took). */
    if (wl.n > 0 && !charge(req, s, t, t->bytes + wl.bytes))
        goto out;
    if ((ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
        goto out;
    }
    out = json_array();
    for (size_t i = 0; i < rl.n; i++) {
        json_t *r = batch_read(req, s, ps, t, keys_at(&rl, i), rl.len[i], enc);
        if (r == NULL)
            goto out;
        json_array_append_new(out, r);
    }
    for (size_t i = 0; i < wl.n; i++) {
        if (!buffer_write(req, s, t, writes_key(&wl, i), wl.w[i].klen, wl.w[i].deleted,
                          &wl.vals[i]))
            goto out;
    }
    httpd_reply_json(req, 200, json_pack("{s:o}", "reads", out));
    out = NULL;
out:
    if (t != NULL)
        txn_close(s, t);
    json_decref(out);
    json_decref(body);
    writes_free(&wl);
    keys_free(&rl);
}

static void h_scan(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    char start[SVC_MAX_KEY + 1], end[SVC_MAX_KEY + 1];
    size_t slen = 0, elen = 0;
    uint64_t limit;
    txn *t;
    pc_session *ps;

    if (!codec_encoding(req, &enc) ||
        !parse_scan_range(req, enc, start, &slen, end, &elen, &limit) ||
        (t = txn_open(req, s, false)) == NULL)
        return;
    if ((ps = svc_engine_session(s)) == NULL)
        reply_no_session(req);
    else
        reply_scan_page(req, s, ps, start, slen, end, elen, t->start_ts, limit, t, enc);
    txn_close(s, t);
}

static void h_commit(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    txn *t;
    pc_session *ps;
    pc_conflict c;
    char *keys = NULL;
    uint64_t cts = 0;

    if (!codec_encoding(req, &enc) ||
        (t = txn_open(req, s, false)) == NULL)
        return;
    size_t nm = 0;
    pc_mutation *m = coord_mutations(t, &keys, &nm);
    if ((ps = svc_engine_session(s)) == NULL || m == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        goto out;
    }
    /* While committing, the owner counts as alive whatever its lease. */
    sessions_commit_begin(t);
    pc_rc rc = coord_commit(s, ps, t, m, nm, &cts, &c);
    if (rc == PC_OK) {
        t->commit_ts = cts;
        if (t->claim != NULL)
            observers_committed(s, ps, t);
        sessions_end(s->sessions, t, TXN_COMMITTED, "committed");
        reply_committed(req, s, cts);
    } else if (rc == PC_TS_UNAVAILABLE) {
        /* Nothing committed: the commit may be retried (with the same
         * writes, if it left locks: t->commit_pending). */
        sessions_commit_retry(t);
        reply_oracle_unavailable(req, s);
    } else {
        const char *why = rc == PC_WRITE_CONFLICT ? "write_conflict"
                          : rc == PC_LOCKED       ? "key_locked"
                          : rc == PC_ROLLED_BACK  ? "expired"
                                                  : "error";
        sessions_end(s->sessions, t, TXN_ABORTED, why);
        metrics_inc(metrics_series_get(s->m.txn_aborted, why, NULL), 1);
        reply_engine(req, s, rc, &c, enc);
    }
out:
    free(m);
    free(keys);
    txn_close(s, t);
}

static void h_rollback(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    txn *t;
    if ((t = txn_open(req, s, false)) == NULL)
        return;
    /* Writes are buffered until commit: nothing reached the engine, unless
     * a commit is pending, whose locks go now. */
    if (t->commit_pending) {
        char *keys = NULL;
        size_t nm = 0;
        pc_mutation *m = coord_mutations(t, &keys, &nm);
        pc_session *ps = svc_engine_session(s);
        if (m == NULL || ps == NULL) {
            free(m);
            free(keys);
            httpd_reply_error(req, 500, "internal", NULL, "out of memory");
            txn_close(s, t);
            return;
        }
        coord_rollback(s, ps, t, m, nm);
        free(m);
        free(keys);
    }
    sessions_end(s->sessions, t, TXN_ABORTED, "rollback");
    metrics_inc(metrics_series_get(s->m.txn_aborted, "rollback", NULL), 1);
    httpd_reply_empty(req, 204);
    txn_close(s, t);
}

static void h_keepalive(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    txn *t;
    if ((t = txn_open(req, s, false)) == NULL)
        return;
    httpd_reply_json(req, 200, json_pack("{s:I}", "lease_ttl_ms", (json_int_t)t->lease_ttl_ms));
    txn_close(s, t);
}

const httpd_route txn_routes[] = {
    {.method = "POST", .pattern = "/v1/txns", .handler = h_begin},
    /* Session reads wait for the session (a commit may hold it): off the
     * event threads. */
    {.method = "GET", .pattern = "/v1/txns/{id}", .handler = h_status, .blocking = true},
    {.method = "DELETE", .pattern = "/v1/txns/{id}", .handler = h_rollback},
    {.method = "GET", .pattern = "/v1/txns/{id}/keys/{key...}", .handler = h_get_key,
     .blocking = true},
    {.method = "PUT", .pattern = "/v1/txns/{id}/keys/{key...}", .handler = h_put_key},
    {.method = "DELETE", .pattern = "/v1/txns/{id}/keys/{key...}", .handler = h_delete_key},
    {.method = "POST", .pattern = "/v1/txns/{id}/batch", .handler = h_batch},
    {.method = "GET", .pattern = "/v1/txns/{id}/scan", .handler = h_scan, .blocking = true},
    {.method = "POST", .pattern = "/v1/txns/{id}/commit", .handler = h_commit},
    {.method = "POST", .pattern = "/v1/txns/{id}/rollback", .handler = h_rollback},
    {.method = "POST", .pattern = "/v1/txns/{id}/keepalive", .handler = h_keepalive},
};
const size_t txn_routes_n = sizeof(txn_routes) / sizeof(txn_routes[0]);
