/*
 * routes.c — the oracle's HTTP handlers (see routes.h).
 *
 * The timestamps handler is the hot path: one tso_next() (an atomic
 * compare-and-swap in the common case) and a small JSON reply.
 */
#include "process_metrics.h"
#include "routes.h"

#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "raft_admin.h"

int oracle_parse_count(const char *s, unsigned *out)
{
    if (!s || !*s)
        return -1;
    unsigned long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (unsigned long)(*p - '0');
        if (v > TSO_MAX_COUNT)
            return -1;
    }
    if (v < 1)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* The reply that hands out first..first+count-1. */
static void reply_timestamps(httpd_req *req, oracle_ctx *ctx, uint64_t first, unsigned count)
{
    metrics_inc(ctx->m_timestamps, count);
    metrics_inc(ctx->m_requests, 1);
    /* Formatted by hand: this reply is the oracle's whole job, and jansson's
     * object building would dominate it. */
    char body[80];
    int n = snprintf(body, sizeof body, "{\"first\":%llu,\"count\":%u}",
                     (unsigned long long)first, count);
    httpd_reply_text(req, 200, "application/json", body, (size_t)n);
}

void oracle_reply_elsewhere(httpd_req *req, oracle_ctx *ctx, rn_rc rc)
{
    raft_node_status st;
    raft_node_get_status(ctx->raft, &st);
    json_t *leader = st.leader_id == 0 ? json_null()
                                       : json_pack("{s:i,s:s}", "id", (int)st.leader_id, "url",
                                                   st.leader_http);
    if (rc == RN_NOT_LEADER && st.leader_http[0] != '\0') {
        const char *q = httpd_query_string(req);
        buf loc = BUF_INIT; /* the path and query are the client's, of any length */
        if (buf_printf(&loc, "%s%s%s%s", st.leader_http, httpd_path(req),
                       q != NULL && *q ? "?" : "", q != NULL ? q : "") == 0) {
            httpd_add_header(req, "Location", loc.data);
            buf_free(&loc);
            httpd_reply_error(req, 307, "not_leader", json_pack("{s:o}", "leader", leader),
                              "this oracle is a follower: ask the leader, %u at %s",
                              st.leader_id, st.leader_http);
            return;
        }
        buf_free(&loc);
    }
    httpd_add_header(req, "Retry-After", "1");
    httpd_reply_error(req, 503, rc == RN_NOT_LEADER ? "not_leader" : "oracle_unavailable",
                      json_pack("{s:o,s:i}", "leader", leader, "retry_after_ms", 1000),
                      rc == RN_NOT_LEADER ? "this oracle is not the leader and knows of none yet"
                                          : "no quorum answered in time (an election may be "
                                            "under way)");
}

/* A member of a Raft group: only the leader hands out timestamps. A
 * follower answers 307 to the leader's URL when it knows it (curl -L and
 * the service's client follow it), else 503 not_leader. */
static void raft_timestamps(httpd_req *req, oracle_ctx *ctx, unsigned count)
{
    uint64_t first = 0;
    rn_rc rc = raft_node_timestamps(ctx->raft, count, 2000, &first);
    if (rc == RN_OK) {
        reply_timestamps(req, ctx, first, count);
        return;
    }
    if (rc == RN_EXHAUSTED) {
        httpd_add_header(req, "Retry-After", "3600");
        httpd_reply_error(req, 503, "oracle_unavailable", NULL,
                          "timestamp space exhausted: this oracle will never hand out another");
        return;
    }
    oracle_reply_elsewhere(req, ctx, rc);
}

static void handle_timestamps(httpd_req *req, void *arg)
{
    oracle_ctx *ctx = arg;
    unsigned count = 1;
    const char *q = httpd_query(req, "count", NULL);
    if (q && oracle_parse_count(q, &count) != 0) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "count must be an integer from 1 to %d, got '%.40s'", TSO_MAX_COUNT, q);
        return;
    }
    uint64_t first;
    char err[256];
    if (ctx->raft != NULL) {
        raft_timestamps(req, ctx, count);
        return;
    }
    int rc = tso_next(ctx->tso, count, &first, err, sizeof err);
    /* Both failures are the API's oracle_unavailable (503 with
     * Retry-After); the message tells them apart. */
    if (rc == TSO_ERR_EXHAUSTED) {
        httpd_add_header(req, "Retry-After", "3600");
        httpd_reply_error(req, 503, "oracle_unavailable", json_pack("{s:i}", "retry_after_ms", 3600000),
                          "%s: this oracle will never hand out another timestamp", err);
        return;
    }
    if (rc != TSO_OK) {
        httpd_add_header(req, "Retry-After", "1");
        httpd_reply_error(req, 503, "oracle_unavailable", json_pack("{s:i}", "retry_after_ms", 1000),
                          "cannot persist the high-water mark: %s", err);
        return;
    }
    reply_timestamps(req, ctx, first, count);
}

/* A member's health. Public: what an orchestrator or a client needs (up,
 * role, where the leader is). The group's internals (its id, term,
 * indexes, member ids) only with the token, when one is set
 * (docs/DESIGN.md §7.2). */
static json_t *member_health(oracle_ctx *ctx, bool full)
{
    raft_node_status st;
    raft_node_get_status(ctx->raft, &st);
    json_t *leader = st.leader_id == 0 ? json_null()
                     : full ? json_pack("{s:i,s:s}", "id", (int)st.leader_id, "url",
                                        st.leader_http)
                            : json_pack("{s:s}", "url", st.leader_http);
    json_t *h = json_pack("{s:s,s:s,s:s,s:o}", "status", "ok", "role", st.role,
                          "membership", st.membership, "leader", leader);
    if (h != NULL && full) {
        json_object_set_new(h, "id", json_integer((json_int_t)ctx->raft_id));
        json_object_set_new(h, "term", json_integer((json_int_t)st.term));
        json_object_set_new(h, "hwm", json_integer((json_int_t)raft_node_hwm(ctx->raft)));
        json_object_set_new(h, "applied_index", json_integer((json_int_t)st.applied_index));
        json_object_set_new(h, "lag", json_integer((json_int_t)st.lag));
        pd_counts c;
        pd_map_counts(raft_node_pd_map(ctx->raft), &c);
        json_object_set_new(h, "pd", json_pack("{s:I,s:I}", "nodes", (json_int_t)c.nodes,
                                               "regions", (json_int_t)c.regions));
    }
    return h;
}

static void handle_health(httpd_req *req, void *arg)
{
    oracle_ctx *ctx = arg;
    bool full = oracle_authorize(req, ctx) == NULL;
    json_t *h = ctx->raft != NULL
                    ? member_health(ctx, full)
                    : json_pack("{s:s,s:I,s:I}", "status", "ok",
                                "persisted_hwm", (json_int_t)tso_persisted(ctx->tso),
                                "next_timestamp", (json_int_t)tso_last(ctx->tso) + 1);
    /* The data dir's size as the size thread last found it (never a walk
     * on this event thread); with the token, like the term. */
    if (h != NULL && full && ctx->size != NULL)
        json_object_set_new(h, "store_bytes",
                            json_integer((json_int_t)store_size_bytes(ctx->size)));
    httpd_reply_json(req, 200, h);
}

static void handle_metrics(httpd_req *req, void *arg)
{
    oracle_ctx *ctx = arg;
    buf out = BUF_INIT;
    if (metrics_render(ctx->metrics, &out) != 0 || process_metrics_render(&out) != 0) {
        buf_free(&out);
        httpd_reply_error(req, 500, "internal", NULL, "out of memory rendering metrics");
        return;
    }
    httpd_reply_text(req, 200, "text/plain; version=0.0.4; charset=utf-8", out.data, out.len);
    buf_free(&out);
}

/* Readiness (an orchestrator's probe): a single oracle is ready once it
 * serves; a member of a group while it is a voter that leads or knows the
 * leader (a follower redirects there) and is not far behind it, else 503
 * not_ready: no leader known (an election), or a member still joining or
 * catching up (raft_host_not_ready, docs/DESIGN.md 7.3). */
static void handle_ready(httpd_req *req, void *arg)
{
    oracle_ctx *ctx = arg;
    const char *why = NULL;
    char text[200];
    if (ctx->raft != NULL) {
        raft_node_status st;
        raft_node_get_status(ctx->raft, &st);
        why = raft_host_not_ready(&st, text, sizeof text);
    }
    httpd_reply_ready(req, why);
}

/* Membership (common/raft_admin.h): a group's member only. */
static void handle_members(httpd_req *req, void *arg)
{
    oracle_ctx *ctx = arg;
    if (ctx->raft != NULL) {
        raft_admin_serve(req, raft_node_host(ctx->raft));
        return;
    }
    httpd_reply_error(req, 409, "not_in_a_group", NULL,
                      "this oracle runs alone: it has no Raft group (--raft-id)");
}

static const httpd_route routes[] = {
    {.method = "POST", .pattern = "/v1/timestamps", .handler = handle_timestamps},
    {.method = "GET", .pattern = "/v1/health", .handler = handle_health, .public = true},
    {.method = "GET", .pattern = "/v1/ready", .handler = handle_ready, .public = true},
    {.method = "GET", .pattern = "/metrics", .handler = handle_metrics},
    RAFT_ADMIN_ROUTES(handle_members),
    {.method = "POST", .pattern = "/v1/pd/nodes", .handler = oracle_pd_register},
    {.method = "GET", .pattern = "/v1/pd/nodes", .handler = oracle_pd_nodes},
    {.method = "POST", .pattern = "/v1/pd/heartbeat", .handler = oracle_pd_heartbeat},
    {.method = "GET", .pattern = "/v1/pd/regions", .handler = oracle_pd_regions},
    {.method = "POST", .pattern = "/v1/pd/ids", .handler = oracle_pd_ids},
};

const char *oracle_authorize(const httpd_req *req, void *ctx)
{
    oracle_ctx *c = ctx;
    if (c->auth.secret == NULL || token_matches(&c->auth, httpd_header(req, "Authorization")))
        return NULL;
    return "this request needs the header Authorization: Bearer <token>";
}

const httpd_route *oracle_routes(size_t *n)
{
    *n = sizeof routes / sizeof routes[0];
    return routes;
}

void oracle_ctx_init_metrics(oracle_ctx *ctx)
{
    ctx->m_timestamps = metrics_counter1(ctx->metrics, "percolator_oracle_timestamps_total",
                                         "timestamps handed out");
    ctx->m_requests = metrics_counter1(ctx->metrics, "percolator_oracle_requests_total",
                                       "successful POST /v1/timestamps requests");
    ctx->m_pd_heartbeats = metrics_counter1(ctx->metrics, "percolator_pd_heartbeats_total",
                                            "node heartbeats the placement driver answered");
    ctx->m_pd_taken = metrics_counter1(ctx->metrics, "percolator_pd_regions_taken_total",
                                       "reported regions the map took (a command applied)");
    ctx->m_pd_stale = metrics_counter1(ctx->metrics, "percolator_pd_regions_stale_total",
                                       "reported regions older than the map's (left out)");
    ctx->m_pd_unproposed = metrics_counter1(
        ctx->metrics, "percolator_pd_reports_unproposed_total",
        "heartbeats with changes the map would take none of (older than its regions, or past "
        "its limits): no Raft round");
}
