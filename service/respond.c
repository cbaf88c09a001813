/*
 * respond.c — shared answers of the service's routes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keyspace.h"
#include "log.h"
#include "reader.h"
#include "respond.h"
#include "timeutil.h"

json_t *user_key_json(pc_slice engine_key, codec_enc enc, bool *b64)
{
    pc_slice user;
    *b64 = false;
    if (!ks_is_user(engine_key, &user))
        return json_string("(internal)");
    return codec_to_json_marked(user.data, user.len, enc, b64);
}

/* The key field of an error: as text if it can be, else base64. */
static json_t *key_extra(const void *key, size_t len, codec_enc enc)
{
    bool b64;
    json_t *k = codec_to_json_marked(key, len, enc, &b64);
    json_t *extra = json_object();
    if (b64)
        json_object_set_new(extra, "key_encoding", json_string("base64"));
    json_object_set_new(extra, "key", k);
    return extra;
}

void reply_committed(httpd_req *req, svc *s, uint64_t cts)
{
    metrics_inc(s->m.txn_committed, 1);
    httpd_reply_json(req, 200, json_pack("{s:I}", "commit_ts", (json_int_t)cts));
}

/* A member that begins to lead but could not take over the leader's
 * state (svc_take_over): as a leader not ready yet, retried. */
void reply_not_taken_over(httpd_req *req)
{
    httpd_add_header(req, "Retry-After", "1");
    httpd_reply_error(req, 503, "not_leader", json_pack("{s:i}", "retry_after_ms", 1000),
                      "this member has just begun to lead and could not yet take over the "
                      "leader's state (see its log): retry");
}

bool reply_unless_taken_over(httpd_req *req, svc *s)
{
    if (svc_take_over(s))
        return false;
    reply_not_taken_over(req);
    return true;
}

void reply_oracle_unavailable(httpd_req *req, svc *s)
{
    if (svc_takeover_failed()) { /* svc_timestamps stopped before the oracle */
        reply_not_taken_over(req);
        return;
    }
    uint64_t ts = atomic_load(&s->ts_refused);
    httpd_add_header(req, "Retry-After", "1");
    switch ((svc_ts_refusal)atomic_load(&s->ts_refusal)) {
    case SVC_TS_BEHIND:
        httpd_reply_error(req, 503, "oracle_behind",
                          json_pack("{s:i,s:I,s:I}", "retry_after_ms", 1000, "oracle_ts",
                                    (json_int_t)ts, "store_max_ts",
                                    (json_int_t)atomic_load(&s->store_max_ts)),
                          "the timestamp oracle is behind the store: it handed out %llu, the "
                          "store holds timestamps up to %llu (the oracle lost its state)",
                          (unsigned long long)ts,
                          (unsigned long long)atomic_load(&s->store_max_ts));
        return;
    case SVC_TS_OUT_OF_RANGE:
        httpd_reply_error(req, 503, "oracle_out_of_range",
                          json_pack("{s:i,s:I}", "retry_after_ms", 1000, "oracle_ts",
                                    (json_int_t)ts),
                          "the timestamp oracle handed out %llu, at or above the limit %llu "
                          "(2^53 - 2^32)", (unsigned long long)ts,
                          (unsigned long long)SVC_TS_LIMIT);
        return;
    default:
        httpd_reply_error(req, 503, "oracle_unavailable",
                          json_pack("{s:i}", "retry_after_ms", 1000),
                          "the timestamp oracle cannot be reached; retry later");
        return;
    }
}

void reply_lease_refused(httpd_req *req, uint64_t id, lease_hold why)
{
    if (why == LEASE_FULL)
        httpd_reply_error(req, 409, "lease_full", json_pack("{s:I}", "lease", (json_int_t)id),
                          "lease %llu has %d keys attached already", (unsigned long long)id,
                          LEASE_MAX_KEYS);
    else
        httpd_reply_error(req, 404, "lease_not_found", json_pack("{s:I}", "lease", (json_int_t)id),
                          "no lease %llu: it was never granted, or it expired or was revoked",
                          (unsigned long long)id);
}

void reply_not_leader(httpd_req *req)
{
    httpd_add_header(req, "Retry-After", "1");
    httpd_reply_error(req, 503, "not_leader", json_pack("{s:i}", "retry_after_ms", 1000),
                      "this member is not (or no longer) the leader; retry (any member "
                      "redirects to the leader)");
}

void reply_no_session(httpd_req *req)
{
    httpd_reply_error(req, 500, "internal", NULL, "no storage session");
}

/* The replicator could not commit (or fence) for this request: the client
 * retries, here or at the new leader (DESIGN §9). */
static void reply_refused(httpd_req *req, pc_rc why)
{
    if (why == PC_NOT_LEADER) {
        reply_not_leader(req);
        return;
    }
    httpd_add_header(req, "Retry-After", "1");
    httpd_reply_error(req, 503, "raft_unavailable", json_pack("{s:i}", "retry_after_ms", 1000),
                      "the write could not be committed by a quorum in time (leadership lost "
                      "or an election under way): it may or may not have been applied; retry");
}

void reply_engine(httpd_req *req, svc *s, pc_rc rc, const pc_conflict *c, codec_enc enc)
{
    if (rc == PC_NOT_LEADER || rc == PC_UNAVAILABLE) {
        reply_refused(req, rc);
        return;
    }
    pc_slice user = {"", 0};
    json_t *extra = NULL;

    if (c != NULL && (rc == PC_WRITE_CONFLICT || rc == PC_LOCKED)) {
        if (!ks_is_user(c->lock.key, &user)) {
            /* An observer's acknowledgment ('a' name '\0' key): its key. */
            const char *k = c->lock.key.data, *nul = c->lock.key.len > 0 && k[0] == KS_ACK
                                                        ? memchr(k, '\0', c->lock.key.len) : NULL;
            user = nul ? (pc_slice){nul + 1, c->lock.key.len - (size_t)(nul + 1 - k)} : c->lock.key;
        }
        extra = key_extra(user.data, user.len, enc);
    }
    switch (rc) {
    case PC_WRITE_CONFLICT:
        metrics_inc(metrics_series_get(s->m.conflicts, "write_conflict", NULL), 1);
        if (c != NULL)
            json_object_set_new(extra, "conflict_commit_ts", json_integer((json_int_t)c->commit_ts));
        httpd_reply_error(req, 409, "write_conflict", extra,
                          "another transaction committed a write to this key after this "
                          "transaction started");
        return;
    case PC_LOCKED:
        metrics_inc(metrics_series_get(s->m.conflicts, "key_locked", NULL), 1);
        if (c != NULL && c->lock.start_ts != 0)
            json_object_set_new(extra, "lock_start_ts", json_integer((json_int_t)c->lock.start_ts));
        httpd_reply_error(req, 409, "key_locked", extra,
                          "the key is locked by another transaction that is still running");
        return;
    case PC_TS_UNAVAILABLE:
        reply_oracle_unavailable(req, s);
        return;
    case PC_ROLLED_BACK:
        httpd_reply_error(req, 410, "txn_expired", NULL,
                          "the transaction was rolled back (its locks were cleaned up)");
        return;
    case PC_NOT_FOUND:
        httpd_reply_error(req, 404, "not_found", NULL, "no such key");
        return;
    case PC_INVALID:
        httpd_reply_error(req, 400, "bad_request", NULL, "invalid request");
        return;
    default:
        json_decref(extra);
        log_error("engine: %s", pc_rc_name(rc));
        httpd_reply_error(req, 500, "internal", NULL, "storage error (%s)", pc_rc_name(rc));
        return;
    }
}

void reply_condition_failed(httpd_req *req, const void *key, size_t klen, codec_enc enc,
                            size_t index, const char *why)
{
    json_t *extra = key_extra(key, klen, enc);
    json_object_set_new(extra, "condition", json_integer((json_int_t)index));
    httpd_reply_error(req, 409, "condition_failed", extra, "condition %zu failed: %s", index,
                      why);
}

/* `after` is in the request's encoding, unless after_encoding=base64 says
 * it is base64: a text scan's `next` that is not text comes in base64
 * ("next_encoding":"base64"), and is passed back as it came. */
static codec_enc after_encoding(httpd_req *req, codec_enc enc)
{
    const char *ae = httpd_query(req, "after_encoding", NULL);
    return ae != NULL && strcmp(ae, "base64") == 0 ? ENC_BASE64 : enc;
}

bool parse_scan_range(httpd_req *req, codec_enc enc, char *start, size_t *slen, char *end,
                      size_t *elen, uint64_t *limit)
{
    char prefix[SVC_MAX_KEY + 1], after[SVC_MAX_KEY + 1];
    size_t plen = 0, alen = 0;

    if (!codec_query_u64(req, "limit", 100, 1, 10000, limit) ||
        !codec_query_key(req, "prefix", enc, prefix, &plen) ||
        !codec_query_key(req, "start", enc, start, slen) ||
        !codec_query_key(req, "end", enc, end, elen) ||
        !codec_query_key(req, "after", after_encoding(req, enc), after, &alen))
        return false;
    if (plen > 0 && (*slen > 0 || *elen > 0)) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "give either prefix or start/end, not both");
        return false;
    }
    if (plen > 0) {
        /* prefix p is [p, the first key past every key starting with p) */
        memcpy(start, prefix, plen);
        *slen = plen;
        memcpy(end, prefix, plen);
        *elen = plen;
        if (!ks_prefix_end(end, elen))
            *elen = 0;
    }
    if (alen > 0) {
        /* The page after `after` starts just past it: after + "\0". */
        if (alen > SVC_MAX_KEY) {
            httpd_reply_error(req, 400, "bad_request", NULL, "after is too long");
            return false;
        }
        if (pc_key_cmp(after, alen, start, *slen) >= 0) {
            memcpy(start, after, alen);
            start[alen] = '\0';
            *slen = alen + 1;
        }
    }
    return true;
}

typedef struct {
    json_t *items;
    size_t n, limit;
    size_t bytes, max_bytes;  /* the items' JSON so far (an upper bound), and the cap */
    bool full;                /* an item did not fit (count or bytes): a next page exists */
    const void *last;
    size_t last_len;
    bool nomem;
} page;

struct page_arg {
    page *p;
    codec_enc enc;
};

/* The bytes of p[0..len) as a JSON string, quotes included: an upper
 * bound. Base64 is 4 bytes per 3 (padded); text is the bytes themselves,
 * but a quote, backslash or slash may take 2 and a control byte 6
 * (\u00XX), whatever jansson actually picks. */
static size_t json_string_bytes(const void *p, size_t len, codec_enc enc)
{
    /* Not text in a text scan: base64, and its ',"key_encoding":"base64"'. */
    if (enc == ENC_TEXT && !codec_utf8_valid(p, len))
        return 2 + 4 * ((len + 2) / 3) + 26;
    if (enc == ENC_BASE64)
        return 2 + 4 * ((len + 2) / 3);
    const unsigned char *c = p;
    size_t n = 2;
    for (size_t i = 0; i < len; i++)
        n += c[i] < 0x20 || c[i] == 0x7f ? 6 : c[i] == '"' || c[i] == '\\' || c[i] == '/' ? 2 : 1;
    return n;
}

/* {"key":,"value":,"commit_ts":} is 30 bytes, a timestamp below 2^53 at
 * most 16 digits, and a comma between items. */
#define ITEM_JSON_OVERHEAD 47

/* Add one item; false when the page is full: limit items already, or
 * this one would take the items past max_bytes (never the first item, so
 * that a page always moves on, even when one item alone is bigger). */
static bool page_add(page *p, const void *key, size_t klen, const void *val, size_t vlen,
                     uint64_t commit_ts, codec_enc enc)
{
    size_t cost = ITEM_JSON_OVERHEAD + json_string_bytes(key, klen, enc) +
                  json_string_bytes(val, vlen, enc);
    if (p->n == p->limit || (p->n > 0 && cost > p->max_bytes - p->bytes)) {
        p->full = true;
        return false;
    }
    /* Someone else's binary key or value must not fail a text scan: such
     * an item comes in base64, marked (DESIGN §2). */
    bool kb, vb;
    json_t *k = codec_to_json_marked(key, klen, enc, &kb);
    json_t *v = codec_to_json_marked(val, vlen, enc, &vb);
    if (k == NULL || v == NULL) {
        json_decref(k);
        json_decref(v);
        p->nomem = true;
        return false;
    }
    json_t *item = json_pack("{s:o,s:o,s:I}", "key", k, "value", v, "commit_ts",
                             (json_int_t)commit_ts);
    if (item != NULL &&
        ((kb && json_object_set_new(item, "key_encoding", json_string("base64")) != 0) ||
         (vb && json_object_set_new(item, "value_encoding", json_string("base64")) != 0))) {
        json_decref(item);
        item = NULL;
    }
    if (item == NULL || json_array_append_new(p->items, item) != 0) {
        p->nomem = true;
        return false;
    }
    p->n++;
    p->bytes = cost > p->max_bytes - p->bytes ? p->max_bytes : p->bytes + cost;
    p->last = key;
    p->last_len = klen;
    return true;
}

static bool page_item(void *arg, const rd_item *it)
{
    struct page_arg *a = arg;
    return page_add(a->p, it->key.data, it->key.len, it->value.data, it->value.len,
                    it->commit_ts, a->enc);
}

/* Where the next page starts (after=), as JSON; null on the last page.
 * *b64: it is a key that is not text, in base64. */
static json_t *page_next(const page *p, const rd_view *v, codec_enc enc, bool *b64)
{
    *b64 = false;
    if (p->full)
        return codec_to_json_marked(p->last, p->last_len, enc, b64);
    /* The page took every item of the view, but the engine stopped early
     * (its byte budget, with the session's own writes shrinking or hiding
     * what it read): nothing past its last key is known yet. */
    pc_slice user;
    if (v->it.more && v->it.n > 0 && ks_is_user(v->it.items[v->it.n - 1].key, &user))
        return codec_to_json_marked(user.data, user.len, enc, b64);
    return json_null();
}

void reply_scan_page(httpd_req *req, svc *s, pc_session *ps, const char *start, size_t slen,
                     const char *end, size_t elen, uint64_t ts, size_t limit, const txn *own,
                     codec_enc enc)
{
    pc_conflict c;
    page p = {.items = json_array(), .limit = limit, .max_bytes = s->cfg.max_reply_bytes};
    struct page_arg a = {&p, enc};
    /* The items must stay alive until the page is answered (p.last). */
    rd_view v = {0};
    pc_rc rc = rd_scan_view(s, ps, start, slen, end, elen, ts, limit, own, &v, &c);
    if (rc != PC_OK) {
        json_decref(p.items);
        rd_view_free(&v);
        reply_engine(req, s, rc, &c, enc);
        return;
    }
    rd_view_each(&v, page_item, &a);
    bool next_b64;
    json_t *next = p.nomem ? NULL : page_next(&p, &v, enc, &next_b64);
    json_t *reply = next ? json_pack("{s:o,s:o}", "items", p.items, "next", next) : NULL;
    if (reply == NULL) {
        json_decref(next);
        json_decref(p.items);
        rd_view_free(&v);
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    if (next_b64)
        json_object_set_new(reply, "next_encoding", json_string("base64"));
    httpd_reply_json(req, 200, reply);
    rd_view_free(&v);
}

txn *txn_open(httpd_req *req, svc *s, bool any_state)
{
    size_t len = 0;
    const char *id = httpd_param(req, "id", &len);
    txn *t = id ? sessions_get(s->sessions, id, len) : NULL;

    /* An id unknown here answers 410 on a single node and in a group
     * alike: the session may have expired and been forgotten
     * (--txn-retention-ms), or lived before a restart, or (a Raft member)
     * on a leader that has since lost its leadership; nothing tells those
     * apart from an id never issued. */
    if (t == NULL || t->raft_term != svc_leader_term(s)) {
        bool leader_gone = t != NULL;
        if (t != NULL)
            sessions_release(s->sessions, t);
        httpd_reply_error(req, 410, "txn_expired", NULL, "%s",
                          leader_gone
                              ? "the transaction is gone: it was begun on a leader that has "
                                "since lost its leadership (its prewritten locks, if any, are "
                                "resolved like any dead owner's)"
                              : "no such transaction here: it expired and was forgotten, was "
                                "begun before a restart or under another leader, or never "
                                "existed");
        return NULL;
    }
    pthread_mutex_lock(&t->mu);
    int st = atomic_load(&t->state);
    if (st == TXN_ACTIVE && !sessions_renew(s->sessions, t)) {
        sessions_end(s->sessions, t, TXN_ABORTED, "expired");
        metrics_inc(metrics_series_get(s->m.txn_aborted, "expired", NULL), 1);
        st = TXN_ABORTED;
    }
    if (any_state || st == TXN_ACTIVE)
        return t;
    if (t->end_reason != NULL && strcmp(t->end_reason, "expired") == 0)
        httpd_reply_error(req, 410, "txn_expired", NULL,
                          "the transaction's lease expired and it was rolled back");
    else
        httpd_reply_error(req, 409, "txn_not_active", NULL, "the transaction has already %s",
                          st == TXN_COMMITTED ? "committed" : "been rolled back");
    txn_close(s, t);
    return NULL;
}

void txn_close(svc *s, txn *t)
{
    /* The session is charged what its buffer holds (a write charged
     * before buffering; an ended session holds nothing): this only
     * shrinks, so it cannot fail. */
    sessions_charge(s->sessions, t, t->bytes, SIZE_MAX);
    pthread_mutex_unlock(&t->mu);
    sessions_release(s->sessions, t);
}

/* ---- one-shot transactions (one_shot.h) ---- */

/* One read's answer item, {"key","found":true,"value","commit_ts"} or
 * {"key","found":false}; NULL when out of memory (the value was checked
 * to be representable before the commit). */
static json_t *read_item(const void *key, size_t klen, const one_shot_read *r, codec_enc enc)
{
    json_t *jk = codec_to_json(key, klen, enc), *item = NULL;
    if (jk != NULL && !r->found) {
        item = json_pack("{s:O,s:b}", "key", jk, "found", 0);
    } else if (jk != NULL) {
        json_t *jv = codec_to_json(r->value.data, r->value.len, enc);
        if (jv != NULL)
            item = json_pack("{s:O,s:b,s:o,s:I}", "key", jk, "found", 1, "value", jv,
                             "commit_ts", (json_int_t)r->commit_ts);
    }
    json_decref(jk);
    return item;
}

void reply_one_shot(httpd_req *req, svc *s, const one_shot *o, const one_shot_outcome *out,
                    bool want_reads)
{
    switch (out->rc) {
    case PC_OK:
        break;
    case PC_NOT_FOUND:
        if (out->lease != LEASE_HELD)
            reply_lease_refused(req, o->lease, out->lease);
        else if (out->cond_failed && out->cond < o->ckeys.n)
            reply_condition_failed(req, keys_at(&o->ckeys, out->cond), o->ckeys.len[out->cond],
                                   o->enc, out->cond, out->why);
        else
            reply_engine(req, s, out->rc, &out->conflict, o->enc);
        return;
    case PC_INVALID:
        if (out->not_text)
            codec_reply_not_text(req);
        else
            reply_engine(req, s, out->rc, &out->conflict, o->enc);
        return;
    case PC_TS_UNAVAILABLE:
        reply_oracle_unavailable(req, s);
        return;
    case PC_NOMEM:
        if (out->no_session)
            reply_no_session(req);
        else
            reply_engine(req, s, out->rc, &out->conflict, o->enc);
        return;
    default:
        reply_engine(req, s, out->rc, &out->conflict, o->enc);
        return;
    }
    if (!want_reads) {
        reply_committed(req, s, out->commit_ts);
        return;
    }
    json_t *ans = json_pack("{s:I}", "commit_ts", (json_int_t)out->commit_ts);
    json_t *reads = json_array();
    for (size_t i = 0; ans != NULL && reads != NULL && i < out->nreads; i++) {
        json_t *item = read_item(keys_at(&o->reads, i), o->reads.len[i], &out->reads[i], o->enc);
        if (item == NULL || json_array_append_new(reads, item) != 0) {
            json_decref(reads);
            reads = NULL;
        }
    }
    if (ans == NULL || reads == NULL) {
        json_decref(ans);
        json_decref(reads);
        httpd_reply_error(req, 500, "internal", NULL, "out of memory (the transaction "
                          "committed at %llu)", (unsigned long long)out->commit_ts);
        return;
    }
    json_object_set_new(ans, "reads", reads);
    metrics_inc(s->m.txn_committed, 1);
    httpd_reply_json(req, 200, ans);
}

void reply_snapshot_refused(httpd_req *req, svc *s, svc_snapshot why, uint64_t ts)
{
    if (why == SVC_SNAP_FUTURE)
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "ts %llu is in the future: the oracle has not handed it out yet",
                          (unsigned long long)ts);
    else if (why == SVC_SNAP_COLLECTED)
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "ts %llu is below the garbage-collection safe point %llu",
                          (unsigned long long)ts,
                          (unsigned long long)pc_gc_safe_point(s->engine));
    else
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
}
