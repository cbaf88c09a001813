/*
 * routes_region_calls.c — POST /v1/region-calls: an action another node
 * sends this one as the leader of its region (region_call.h, actions.h;
 * docs/DESIGN.md §6.6). Served here or refused (rc "not_leader"), never
 * passed on (replica.c svc_elsewhere leaves it here); the answer is 200
 * with the action's rc and results, whatever the rc, so that the sender
 * tells the action's answer from the route's (4xx: a malformed call).
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "observers.h"
#include "reader.h"
#include "region_call.h"
#include "respond.h"

static void h_region_call(httpd_req *req, void *ctx)
{
    static const char *const fields[] = {"action",   "run",     "observers", "start_ts",
                                         "primary",  "owner",   "owner_alive", "wall_ms",
                                         "ttl_ms",   "ts",      "limit",     "max_bytes",
                                         "step_over",
                                         "mutations", "keys", NULL};
    svc *s = ctx;
    json_t *body = NULL;
    region_call_in in = {0};
    char why[256];
    pc_session *ps;

    /* The peers' token was checked before the body was read (svc.c
     * svc_authorize). */
    if ((body = body_object(req, fields)) == NULL)
        return;
    if (!region_call_decode(body, s->cfg.max_value_bytes, &in, why, sizeof why)) {
        httpd_reply_error(req, 400, "bad_request", NULL, "%s", why);
        goto out;
    }
    if ((ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
        goto out;
    }
    pc_conflict c = {0};
    pc_txn_status st = {0};
    pc_buf value = {0};
    pc_items items = {0};
    pc_buf next = {0};
    pc_gc_stats gc = {0};
    uint64_t cts = 0;
    bool last = false;
    act_read_index ri = {0};
    act_answer ans = {.c = &c, .st = &st, .value = &value, .commit_ts = &cts, .items = &items,
                      .gc = &gc, .next = &next, .last = &last, .ri = &ri};
    pc_rc rc;
    uint64_t term;
    /* Only the region's ready leader answers: a follower's store, or a new
     * leader's before its first barrier, may not hold what the sender
     * asks about (a commit point would find no lock). Nothing proposed. */
    /* Only a commit marks notify entries (the engine's commit of a locked
     * key: a commit, its primary's, a resolution rolling forward). */
    bool marks = in.a.kind == ACT_COMMIT || in.a.kind == ACT_COMMIT_PRIMARY ||
                 (in.a.kind == ACT_RESOLVE_LOCK && in.a.ts != 0);
    bool differ = false;
    svc_write_term(s, act_key(&in.a), &term);
    if (term == RP_TERM_NONE) {
        rc = PC_NOT_LEADER;
    } else if (marks && !observers_match(s, ps, in.observers)) {
        /* A commit here marks what the sender's observers watch, or runs
         * not at all (observers.h observers_match); the sender is told,
         * in case it is the one behind its store. */
        rc = PC_UNAVAILABLE;
        differ = true;
    } else {
        bool read = in.a.kind == ACT_GET || in.a.kind == ACT_GET_LATEST ||
                    in.a.kind == ACT_SCAN;
        region_call_serving(in.run);
        rc = (read ? rd_here : act_here)(s, ps, &in.a, &ans);
        region_call_serving(NULL);
    }
    if (rc == PC_SYNC_FAILED)
        svc_storage_failed("an action sent by another node", rc);
    metrics_inc(metrics_series_get(s->m.region_calls_served, act_name(in.a.kind), NULL), 1);
    json_t *o = region_answer_encode(rc, &in.a, &ans);
    if (o != NULL && differ && json_object_set_new(o, "observers_differ", json_true()) != 0) {
        json_decref(o);
        o = NULL;
    }
    if (o == NULL)
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
    else
        httpd_reply_json(req, 200, o);
    pc_buf_free(&value);
    pc_buf_free(&next);
    pc_items_free(&items);
out:
    region_call_in_free(&in);
    json_decref(body);
}

const httpd_route region_call_routes[] = {
    {.method = "POST", .pattern = REGION_CALL_PATH, .handler = h_region_call},
};
const size_t region_call_routes_n = sizeof(region_call_routes) / sizeof(region_call_routes[0]);
