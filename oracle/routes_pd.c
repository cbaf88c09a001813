/*
 * routes_pd.c — the placement driver's HTTP API on an oracle group's
 * members (api-spec/oracle.yaml, docs/DESIGN.md §6.3):
 *
 *   POST /v1/pd/nodes {"address"}        register a service node: {"id"}
 *   GET  /v1/pd/nodes                    the nodes, with what they last reported
 *   POST /v1/pd/heartbeat {"node","regions":[...]}  a node's regions it leads
 *   GET  /v1/pd/regions?key=K            the region holding K, and its leader
 *   GET  /v1/pd/regions?from=K&limit=N   regions in key order
 *   POST /v1/pd/ids?count=N              fresh ids (a split's new region)
 *
 * Region bounds are base64 (the internal keyspace is bytes). Changes go
 * through the group's log (oracle/raft_node.c: raft_node_pd); a report
 * that changes nothing is answered without a round. Only the leader
 * answers: a follower sends the request there, as for timestamps (its
 * map lags, and the leadership hints are the leader's alone).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "pd_live.h"
#include "pd_map.h"
#include "routes.h"
#include "timeutil.h"

#define PD_WAIT_MS 2000          /* a command's wait while queued */
#define PD_LIST_MAX 10000        /* regions in one GET /v1/pd/regions */
#define PD_LIST_DEFAULT 1000

/* The member may answer: a group's leader that may propose. Else the
 * reply is made (409 alone, 307 or 503 on a follower) and false. */
static bool leads(httpd_req *req, oracle_ctx *ctx)
{
    if (ctx->raft == NULL) {
        httpd_reply_error(req, 409, "not_in_a_group", NULL,
                          "the placement driver runs in an oracle group (--raft-id): this "
                          "oracle runs alone");
        return false;
    }
    raft_node_status st;
    raft_node_get_status(ctx->raft, &st);
    if (st.ready_term != 0)
        return true;
    oracle_reply_elsewhere(req, ctx, strcmp(st.role, "leader") == 0 ? RN_UNAVAILABLE
                                                                      : RN_NOT_LEADER);
    return false;
}

/* The request's JSON body when this member may answer, else NULL with the
 * reply made (elsewhere, or 400 for a body that is not JSON). */
static json_t *leader_body(httpd_req *req, oracle_ctx *ctx)
{
    return leads(req, ctx) ? httpd_body_json(req) : NULL;
}

/* The answer to a command that did not go through. */
static void reply_rc(httpd_req *req, oracle_ctx *ctx, rn_rc rc)
{
    if (rc == RN_TOO_BIG)
        httpd_reply_error(req, 413, "payload_too_large", NULL, "the command is larger than %zu bytes",
                          (size_t)RN_PD_MAX_BYTES);
    else
        oracle_reply_elsewhere(req, ctx, rc);
}

/* Propose cmd's bytes (freed here) and wait: true with *result, or the
 * reply made (a redirect, 503, 413) and false. */
static bool propose(httpd_req *req, oracle_ctx *ctx, oracle_pd_cmd cmd, buf *bytes,
                    uint64_t *result)
{
    rn_rc rc = raft_node_pd(ctx->raft, cmd, bytes, PD_WAIT_MS, result);
    buf_free(bytes);
    if (rc != RN_OK)
        reply_rc(req, ctx, rc);
    return rc == RN_OK;
}

/* ---- JSON ---- */

static json_t *key_json(const uint8_t *p, size_t n)
{
    char *s = malloc(4 * ((n + 2) / 3) + 1);
    if (s == NULL)
        return NULL;
    b64_encode(p, n, s);
    json_t *j = json_string(s);
    free(s);
    return j;
}

/* A base64 bound into *out (malloc'd; NULL for none) and *len. false
 * when malformed or past PD_MAX_KEY. */
static bool key_from(const char *s, uint8_t **out, uint32_t *len)
{
    size_t n = strlen(s);
    *out = NULL;
    *len = 0;
    if (n > 4 * ((PD_MAX_KEY + 2) / 3))
        return false;
    uint8_t *k = malloc(n / 4 * 3 + 1);
    long got = k != NULL ? b64_decode(s, n, k) : -1;
    if (got < 0 || got > PD_MAX_KEY) {
        free(k);
        return false;
    }
    *out = k;
    *len = (uint32_t)got;
    return true;
}

/* key_from for a query's value: a '+' of base64 left unescaped in a URL
 * reaches us as a space (form decoding), and base64 has no spaces. */
static bool query_key(const char *s, uint8_t **out, uint32_t *len)
{
    char *c = strdup(s);
    if (c == NULL) {
        *out = NULL;
        return false;
    }
    for (char *p = c; *p != '\0'; p++)
        if (*p == ' ')
            *p = '+';
    bool ok = key_from(c, out, len);
    free(c);
    return ok;
}

/* Regions copied out of the map (pd_map_each's callback runs under its
 * read lock: the JSON, which looks up node addresses, is made after). */
typedef struct {
    pd_region *rs;
    size_t n, cap;
    bool failed;
} region_list;

static json_t *region_json(oracle_ctx *ctx, const pd_region *r)
{
    json_t *reps = json_array();
    for (uint32_t i = 0; reps != NULL && i < r->nreplicas; i++)
        json_array_append_new(reps, json_integer((json_int_t)r->replicas[i]));
    json_t *o = json_pack("{s:I,s:o,s:o,s:I,s:I,s:o}", "id", (json_int_t)r->id, "start",
                          key_json(r->start, r->start_len), "end",
                          r->end_len ? key_json(r->end, r->end_len) : json_null(), "version",
                          (json_int_t)r->version, "conf_ver", (json_int_t)r->conf_ver,
                          "replicas", reps);
    pd_live_region live;
    char addr[PD_ADDR_MAX];
    bool hint = o != NULL && pd_live_get_region(ctx->live, r->id, &live);
    json_t *leader = hint && pd_map_node(raft_node_pd_map(ctx->raft), live.leader, addr)
                         ? json_pack("{s:I,s:s,s:I}", "id", (json_int_t)live.leader, "address",
                                     addr, "term", (json_int_t)live.term)
                         : json_null();
    if (o != NULL) {
        json_object_set_new(o, "leader", leader);
        json_object_set_new(o, "bytes", hint ? json_integer((json_int_t)live.bytes) : json_null());
        json_object_set_new(o, "keys", hint ? json_integer((json_int_t)live.keys) : json_null());
    } else {
        json_decref(leader);
    }
    return o;
}

static void add_region(void *arg, const pd_region *r)
{
    region_list *l = arg;
    if (l->failed || l->n == l->cap || pd_region_copy(&l->rs[l->n], r) != 0)
        l->failed = true;
    else
        l->n++;
}

/* ---- handlers ---- */

/* {"address": A}: the node's id, the one it had if A is registered. */
void oracle_pd_register(httpd_req *req, void *arg)
{
    oracle_ctx *ctx = arg;
    json_t *body = leader_body(req, ctx);
    if (body == NULL)
        return;
    const char *addr = json_string_value(json_object_get(body, "address"));
    char err[128];
    buf cmd = BUF_INIT;
    if (addr == NULL || pd_cmd_node(&cmd, addr, err, sizeof err) != 0) {
        httpd_reply_error(req, 400, "bad_request", NULL, "address: %s",
                          addr == NULL ? "a string is required" : err);
        json_decref(body);
        buf_free(&cmd);
        return;
    }
    uint64_t id = 0;
    bool applied = propose(req, ctx, ORACLE_PD_NODE, &cmd, &id);
    if (applied && id == 0)
        httpd_reply_error(req, 409, "pd_refused", NULL,
                          "address '%.100s' refused: %d nodes are registered already, or "
                          "the ids are used up", addr, PD_MAX_NODES);
    else if (applied)
        httpd_reply_json(req, 200, json_pack("{s:I,s:s}", "id", (json_int_t)id, "address", addr));
    json_decref(body);
}

typedef struct {
    oracle_ctx *ctx;
    json_t *list;
    bool failed;
} node_list;

/* pd_map_each_node's callback (under the map's read lock; the hints'
 * mutex is taken inside it, never the other way round). */
static void add_node(void *arg, const pd_node *n)
{
    node_list *l = arg;
    pd_live_node live;
    bool heard = pd_live_get_node(l->ctx->live, n->id, &live);
    uint64_t now = time_mono_ms();
    json_t *o = l->failed ? NULL
                          : json_pack("{s:I,s:s,s:o,s:o,s:o}", "id", (json_int_t)n->id, "address",
                                      n->addr, "heartbeat_ms_ago",
                                      heard ? json_integer((json_int_t)(now - live.at_ms))
                                            : json_null(),
                                      "leaders", heard ? json_integer((json_int_t)live.leaders)
                                                       : json_null(),
                                      "bytes", heard ? json_integer((json_int_t)live.bytes)
                                                     : json_null());
    if (o == NULL || json_array_append_new(l->list, o) != 0)
        l->failed = true;
}

void oracle_pd_nodes(httpd_req *req, void *arg)
{
    oracle_ctx *ctx = arg;
    if (!leads(req, ctx))
        return;
    node_list l = {.ctx = ctx, .list = json_array()};
    l.failed = l.list == NULL;
    if (!l.failed)
        pd_map_each_node(raft_node_pd_map(ctx->raft), add_node, &l);
    if (l.failed) {
        json_decref(l.list);
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    httpd_reply_json(req, 200, json_pack("{s:o}", "nodes", l.list));
}

/* Whether j is an integer from lo to PD_MAX_ID (what JSON carries exactly). */
static bool in_range(json_t *j, json_int_t lo)
{
    return json_is_integer(j) && json_integer_value(j) >= lo &&
           json_integer_value(j) <= (json_int_t)PD_MAX_ID;
}

/* A reported region from JSON into r (bounds malloc'd) and what the
 * leader keeps of it into hint; false with the reason in why. */
static bool parse_region(json_t *o, pd_region *r, pd_live_region *hint, const char **why)
{
    memset(r, 0, sizeof *r);
    json_t *id = json_object_get(o, "id"), *ver = json_object_get(o, "version"),
           *cv = json_object_get(o, "conf_ver"), *st = json_object_get(o, "start"),
           *en = json_object_get(o, "end"), *reps = json_object_get(o, "replicas"),
           *by = json_object_get(o, "bytes"), *ks = json_object_get(o, "keys"),
           *tm = json_object_get(o, "term");
    *why = "id, version and conf_ver must be integers from 0 (id from 1) to 2^53-1";
    if (!json_is_object(o) || !in_range(id, 1) || !in_range(ver, 0) || !in_range(cv, 0))
        return false;
    r->id = (uint64_t)json_integer_value(id);
    r->version = (uint64_t)json_integer_value(ver);
    r->conf_ver = (uint64_t)json_integer_value(cv);
    *why = "start must be base64 of at most 8192 bytes";
    if (!json_is_string(st) || !key_from(json_string_value(st), &r->start, &r->start_len))
        return false;
    *why = "end must be null (the end of the keyspace) or non-empty base64 of at most 8192 bytes";
    if (en != NULL && !json_is_null(en) &&
        (!json_is_string(en) || !key_from(json_string_value(en), &r->end, &r->end_len) ||
         r->end_len == 0))
        return false;
    *why = "replicas must be an array of at most 7 node ids (1 to 2^53-1)";
    if (reps != NULL && (!json_is_array(reps) || json_array_size(reps) > PD_MAX_REPLICAS))
        return false;
    for (size_t i = 0; reps != NULL && i < json_array_size(reps); i++) {
        json_t *x = json_array_get(reps, i);
        if (!in_range(x, 1))
            return false;
        r->replicas[r->nreplicas++] = (uint64_t)json_integer_value(x);
    }
    *why = "bytes, keys and term must be integers from 0 to 2^53-1";
    if ((by != NULL && !in_range(by, 0)) || (ks != NULL && !in_range(ks, 0)) ||
        (tm != NULL && !in_range(tm, 0)))
        return false;
    *hint = (pd_live_region){
        .bytes = by != NULL ? (uint64_t)json_integer_value(by) : 0,
        .keys = ks != NULL ? (uint64_t)json_integer_value(ks) : 0,
        .term = tm != NULL ? (uint64_t)json_integer_value(tm) : 0,
    };
    *why = "start must be below end";
    return pd_region_valid(r);
}

typedef struct {
    pd_region *rs;
    pd_live_region *hints;
    size_t n;
} report;

static void report_free(report *rp)
{
    for (size_t i = 0; rp->rs != NULL && i < rp->n; i++)
        pd_region_clear(&rp->rs[i]);
    free(rp->rs);
    free(rp->hints);
}

/* The report's regions; false when a reply was made. */
static bool parse_report(httpd_req *req, json_t *regions, report *rp)
{
    size_t n = json_array_size(regions);
    if (!json_is_array(regions) || n > PD_MAX_REPORT) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "regions must be an array of at most %d regions", PD_MAX_REPORT);
        return false;
    }
    rp->rs = calloc(n + 1, sizeof *rp->rs);
    rp->hints = calloc(n + 1, sizeof *rp->hints);
    if (rp->rs == NULL || rp->hints == NULL) {
        httpd_reply_error(req, 503, "busy", NULL, "out of memory");
        return false;
    }
    for (; rp->n < n; rp->n++) {
        const char *why;
        if (!parse_region(json_array_get(regions, rp->n), &rp->rs[rp->n], &rp->hints[rp->n],
                          &why)) {
            pd_region_clear(&rp->rs[rp->n]);
            httpd_reply_error(req, 400, "bad_request", NULL, "regions[%zu]: %s", rp->n, why);
            return false;
        }
    }
    return true;
}

/* Propose the regions of rp the map does not hold as they are and would
 * not refuse as outdated (pd_map_classify; v has room for rp->n verdicts);
 * how many it took into *taken, how many it held into *unchanged. A
 * command the map as it is would take nothing of (each changed region
 * overlapped by a newer one, or the map past a limit) costs no round
 * either: the next heartbeat tries again. */
static rn_rc propose_changes(oracle_ctx *ctx, const report *rp, pd_verdict *v, uint64_t *taken,
                             size_t *unchanged)
{
    pd_map *map = raft_node_pd_map(ctx->raft);
    *unchanged = pd_map_classify(map, rp->rs, rp->n, v);
    *taken = 0;
    pd_region *changed = calloc(rp->n + 1, sizeof *changed);
    if (changed == NULL)
        return RN_UNAVAILABLE;
    size_t k = 0;
    for (size_t i = 0; i < rp->n; i++)
        if (v[i] == PD_CHANGED)
            changed[k++] = rp->rs[i]; /* bounds shared with rp */
    rn_rc rc = RN_OK;
    if (k > 0) {
        buf cmd = BUF_INIT;
        char err[128];
        if (pd_cmd_regions(&cmd, changed, k, err, sizeof err) != 0)
            rc = RN_UNAVAILABLE;
        else if (!pd_map_would_take(map, (const uint8_t *)cmd.data, cmd.len))
            metrics_inc(ctx->m_pd_unproposed, 1);
        else
            rc = raft_node_pd(ctx->raft, ORACLE_PD_REGIONS, &cmd, PD_WAIT_MS, taken);
        buf_free(&cmd);
    }
    free(changed);
    return rc;
}

/* {"node": N, "regions": [...]}: the regions node N leads, as it sees
 * them. The map takes the newer ones (pd_map.h); the leader keeps N as
 * the leader of each region the map then holds as reported. */
void oracle_pd_heartbeat(httpd_req *req, void *arg)
{
    oracle_ctx *ctx = arg;
    json_t *body = leader_body(req, ctx);
    if (body == NULL)
        return;
    json_t *jn = json_object_get(body, "node");
    pd_map *map = raft_node_pd_map(ctx->raft);
    if (!json_is_integer(jn) || json_integer_value(jn) < 1) {
        httpd_reply_error(req, 400, "bad_request", NULL, "node must be a node id (an integer)");
        json_decref(body);
        return;
    }
    if (!pd_map_node(map, (uint64_t)json_integer_value(jn), NULL)) {
        httpd_reply_error(req, 404, "unknown_node", NULL,
                          "node must be the id of a registered node (POST /v1/pd/nodes)");
        json_decref(body);
        return;
    }
    uint64_t node = (uint64_t)json_integer_value(jn);
    report rp = {0};
    json_t *regions = json_object_get(body, "regions"), *none = json_array();
    bool parsed = parse_report(req, regions != NULL ? regions : none, &rp);
    json_decref(none);
    if (!parsed) {
        report_free(&rp);
        json_decref(body);
        return;
    }
    uint64_t taken = 0;
    size_t unchanged = 0;
    pd_verdict *v = calloc(rp.n + 1, sizeof *v);
    rn_rc rc = v == NULL ? RN_UNAVAILABLE : propose_changes(ctx, &rp, v, &taken, &unchanged);
    if (rc != RN_OK) {
        reply_rc(req, ctx, rc);
        free(v);
        report_free(&rp);
        json_decref(body);
        return;
    }
    /* What the map holds now, the changes applied: the leader hints are
     * recorded for those; the others are stale (another report is newer). */
    size_t held = pd_map_classify(map, rp.rs, rp.n, v);
    uint64_t now = time_mono_ms(), bytes = 0;
    for (size_t i = 0; i < rp.n; i++) {
        if (v[i] != PD_HELD)
            continue;
        bytes = bytes + rp.hints[i].bytes > (uint64_t)INT64_MAX /* both below 2^63 */
                    ? (uint64_t)INT64_MAX
                    : bytes + rp.hints[i].bytes;
        rp.hints[i].leader = node;
        rp.hints[i].at_ms = now;
        pd_live_set_region(ctx->live, rp.rs[i].id, &rp.hints[i]);
    }
    pd_live_node nv = {.at_ms = now, .leaders = held, .bytes = bytes};
    pd_live_set_node(ctx->live, node, &nv);
    metrics_inc(ctx->m_pd_heartbeats, 1);
    metrics_inc(ctx->m_pd_taken, taken);
    metrics_inc(ctx->m_pd_stale, rp.n - held);
    httpd_reply_json(req, 200, json_pack("{s:I,s:I,s:I,s:I}", "regions", (json_int_t)rp.n,
                                         "unchanged", (json_int_t)unchanged, "taken",
                                         (json_int_t)taken, "stale", (json_int_t)(rp.n - held)));
    free(v);
    report_free(&rp);
    json_decref(body);
}

/* ?key=K: the region holding K; ?from=K&limit=N: up to N regions in key
 * order from the one holding K (from "" without either). */
void oracle_pd_regions(httpd_req *req, void *arg)
{
    oracle_ctx *ctx = arg;
    if (!leads(req, ctx))
        return;
    const char *key = httpd_query(req, "key", NULL), *from = httpd_query(req, "from", NULL),
               *lim = httpd_query(req, "limit", NULL);
    uint8_t *k = NULL;
    uint32_t klen = 0;
    if (key != NULL && from != NULL) {
        httpd_reply_error(req, 400, "bad_request", NULL, "give key or from, not both");
        return;
    }
    const char *which = key != NULL ? key : from != NULL ? from : "";
    if (!query_key(which, &k, &klen)) {
        httpd_reply_error(req, 400, "bad_request", NULL, "%s must be base64 of at most %d bytes",
                          key != NULL ? "key" : "from", PD_MAX_KEY);
        return;
    }
    unsigned limit = PD_LIST_DEFAULT;
    if (lim != NULL) {
        char *end;
        unsigned long v = strtoul(lim, &end, 10);
        if (*lim < '0' || *lim > '9' || *end != '\0' || v < 1 || v > PD_LIST_MAX) {
            httpd_reply_error(req, 400, "bad_request", NULL, "limit must be 1 to %d",
                              PD_LIST_MAX);
            free(k);
            return;
        }
        limit = (unsigned)v;
    }
    pd_map *map = raft_node_pd_map(ctx->raft);
    if (key != NULL) {
        pd_region r = {0};
        int found = pd_map_find(map, k, klen, &r);
        free(k);
        json_t *o = found == 1 ? region_json(ctx, &r) : NULL;
        pd_region_clear(&r);
        if (found == 0)
            httpd_reply_error(req, 404, "no_region", NULL, "no region holds this key");
        else if (o == NULL)
            httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        else
            httpd_reply_json(req, 200, json_pack("{s:o}", "region", o));
        return;
    }
    region_list l = {.cap = limit, .rs = calloc(limit, sizeof(pd_region))};
    l.failed = l.rs == NULL;
    if (!l.failed)
        pd_map_each(map, k, klen, limit, add_region, &l);
    free(k);
    json_t *list = l.failed ? NULL : json_array();
    for (size_t i = 0; list != NULL && i < l.n; i++)
        if (json_array_append_new(list, region_json(ctx, &l.rs[i])) != 0) {
            json_decref(list);
            list = NULL;
        }
    for (size_t i = 0; i < l.n; i++)
        pd_region_clear(&l.rs[i]);
    free(l.rs);
    if (list == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    pd_counts c;
    pd_map_counts(map, &c);
    httpd_reply_json(req, 200, json_pack("{s:o,s:I}", "regions", list, "total",
                                         (json_int_t)c.regions));
}

/* ?count=N: N fresh ids, {"first","count"}. */
void oracle_pd_ids(httpd_req *req, void *arg)
{
    oracle_ctx *ctx = arg;
    if (!leads(req, ctx))
        return;
    const char *q = httpd_query(req, "count", NULL);
    char *end = NULL;
    unsigned long n = q != NULL ? strtoul(q, &end, 10) : 1;
    buf cmd = BUF_INIT;
    char err[128];
    if ((q != NULL && (*q < '0' || *q > '9' || *end != '\0')) ||
        pd_cmd_ids(&cmd, n, err, sizeof err) != 0) {
        httpd_reply_error(req, 400, "bad_request", NULL, "count must be 1 to %d", PD_MAX_IDS);
        buf_free(&cmd);
        return;
    }
    uint64_t first = 0;
    bool applied = propose(req, ctx, ORACLE_PD_IDS, &cmd, &first);
    if (applied && first == 0)
        httpd_reply_error(req, 409, "pd_refused", NULL, "the ids are used up");
    else if (applied)
        httpd_reply_json(req, 200, json_pack("{s:I,s:I}", "first", (json_int_t)first, "count",
                                             (json_int_t)n));
}
