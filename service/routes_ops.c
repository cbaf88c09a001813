/*
 * routes_ops.c — operations (the spec's ops routes): health, Prometheus metrics, the
 * outstanding locks, and the OpenAPI spec.
 */
#include <string.h>

#include "keyspace.h"
#include "process_metrics.h"
#include "respond.h"
#include "sessions.h"
#include "timeutil.h"

/* A Raft member's view: its role, the leader it knows (null: none), its
 * own id, its term, the last entry applied to its store and how many
 * entries the group committed beyond it (lag). Public: the
 * role and the leader's URL (what an orchestrator and a client need); the
 * group's internals (term, index, member ids) only with the token, when
 * one is set (docs/DESIGN.md §7.2). */
static void add_raft_health(json_t *h, svc *s, bool full)
{
    raft_group_status st;
    svc_raft_status(s, &st);
    json_t *leader = st.leader_id == 0 ? json_null()
                     : full ? json_pack("{s:i,s:s}", "id", (int)st.leader_id, "url",
                                        st.leader_http)
                            : json_pack("{s:s}", "url", st.leader_http);
    json_object_set_new(h, "role", json_string(st.role));
    json_object_set_new(h, "membership", json_string(st.membership));
    json_object_set_new(h, "leader", leader ? leader : json_null());
    if (!full)
        return;
    json_object_set_new(h, "id", json_integer((json_int_t)s->cfg.shared.raft_id));
    json_object_set_new(h, "term", json_integer((json_int_t)st.term));
    json_object_set_new(h, "applied_index", json_integer((json_int_t)st.applied_index));
    json_object_set_new(h, "lag", json_integer((json_int_t)st.lag));
}

static void h_health(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    /* Health needs no token (it is a public route), so it must cost nothing:
     * it reports the verdict on the last oracle answer instead of asking,
     * and does not fail on it: latest reads are served without the oracle. */
    static const char *const oracle_state[] = {
        [SVC_TS_OK] = "ok", [SVC_TS_UNREACHABLE] = "unreachable",
        [SVC_TS_BEHIND] = "behind", [SVC_TS_OUT_OF_RANGE] = "out_of_range"};
    int why = atomic_load(&s->ts_refusal);
    json_t *h = json_pack("{s:s,s:s,s:s,s:I}", "status", "ok", "oracle", oracle_state[why],
                          "run_id", s->run_id, "sessions_active",
                          (json_int_t)sessions_active(s->sessions));
    bool full = svc_authorize(req, s) == NULL;
    if (h != NULL && svc_replicated(s))
        add_raft_health(h, s, full);
    /* The data dir's size, as the size thread last found it (never a
     * walk here: this is an event thread); the token's, like the term. */
    if (h != NULL && full && s->size != NULL)
        json_object_set_new(h, "store_bytes", json_integer((json_int_t)store_size_bytes(s->size)));
    /* The regions this node holds (region.h), with the token too. */
    if (h != NULL && full && s->regions != NULL)
        json_object_set_new(h, "regions", json_integer((json_int_t)router_count(s->regions)));
    httpd_reply_json(req, 200, h);
}

/* Readiness (a load balancer's or an orchestrator's probe): 200 while the
 * service can commit, 503 not_ready while it cannot. Health stays liveness:
 * the process answers. */
static void h_ready(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    const char *why = svc_not_ready(s);
    char text[200];
    /* A member serves (itself or by passing requests on) once a leader is
     * known, as a voter not far behind it. */
    if (why == NULL && svc_replicated(s))
        why = svc_member_not_ready(s, text, sizeof text);
    httpd_reply_ready(req, why);
}

static void h_metrics(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    buf out = BUF_INIT;
    /* The safe point is read where reads are refused by it (the engine), so
     * the gauge is never behind a refusal, on a leader or on a follower. */
    metrics_set(s->m.gc_safe_point, (int64_t)pc_gc_safe_point(s->engine));
    if (metrics_render(s->metrics, &out) != 0 || process_metrics_render(&out) != 0) {
        buf_free(&out);
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    httpd_reply_text(req, 200, "text/plain; version=0.0.4", out.data ? out.data : "", out.len);
    buf_free(&out);
}

typedef struct {
    json_t *locks;
    codec_enc enc;
    uint64_t now;
    bool nomem;
} lock_list;

static int add_lock(void *arg, const pc_lock_view *l)
{
    lock_list *x = arg;
    /* Keys that are not text come in base64, marked (as in scans). */
    bool kb, pb;
    json_t *k = user_key_json(l->key, x->enc, &kb), *p = user_key_json(l->primary, x->enc, &pb);
    json_t *lock = k && p ? json_pack("{s:o,s:I,s:o,s:s#,s:I,s:I,s:s}", "key", k, "start_ts",
                                      (json_int_t)l->start_ts, "primary", p, "owner",
                                      (const char *)l->owner.data, (int)l->owner.len, "age_ms",
                                      (json_int_t)(x->now > l->wall_ms ? x->now - l->wall_ms : 0),
                                      "ttl_ms", (json_int_t)l->ttl_ms, "op",
                                      l->op == PC_OP_PUT ? "put" : "delete")
                          : NULL;
    if (lock == NULL) {
        if (k == NULL || p == NULL) {
            json_decref(k);
            json_decref(p);
        }
        x->nomem = true;
        return 1;
    }
    if ((kb && json_object_set_new(lock, "key_encoding", json_string("base64")) != 0) ||
        (pb && json_object_set_new(lock, "primary_encoding", json_string("base64")) != 0) ||
        json_array_append_new(x->locks, lock) != 0) {
        x->nomem = true;
        return 1;
    }
    return 0;
}

static void h_locks(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    uint64_t limit;
    pc_session *ps;

    if (!codec_encoding(req, &enc) ||
        !codec_query_u64(req, "limit", 100, 1, 10000, &limit))
        return;
    if ((ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
        return;
    }
    lock_list x = {json_array(), enc, time_wall_ms(), false};
    pc_rc rc = pc_lock_scan(ps, (pc_slice){"", 0}, limit, add_lock, &x);
    if (x.nomem) {
        json_decref(x.locks);
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
    } else if (rc != PC_OK) {
        json_decref(x.locks);
        reply_engine(req, s, rc, NULL, enc);
    } else {
        httpd_reply_json(req, 200, json_pack("{s:o}", "locks", x.locks));
    }
}

static void h_openapi(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    if (s->openapi == NULL) {
        httpd_reply_error(req, 404, "not_found", NULL, "the OpenAPI spec was not found at start-up");
        return;
    }
    httpd_reply_text(req, 200, "application/yaml", s->openapi, s->openapi_len);
}

const httpd_route ops_routes[] = {
    {.method = "GET", .pattern = "/v1/health", .handler = h_health, .public = true},
    /* Readiness may ask the oracle: off the event threads. */
    {.method = "GET", .pattern = "/v1/ready", .handler = h_ready, .blocking = true, .public = true},
    {.method = "GET", .pattern = "/metrics", .handler = h_metrics},
    {.method = "GET", .pattern = "/v1/locks", .handler = h_locks, .blocking = true},
    {.method = "GET", .pattern = "/openapi.yaml", .handler = h_openapi},
};
const size_t ops_routes_n = sizeof(ops_routes) / sizeof(ops_routes[0]);
