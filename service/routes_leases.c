/*
 * routes_leases.c — /v1/leases...: grant, keep alive, revoke and look up
 * leases (leases.h; docs/DESIGN.md §11). A put attaches a key to a lease
 * with "lease" in its body (one_shot.c).
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "leases.h"
#include "respond.h"

/* The {id} path parameter; false after answering 400. */
static bool id_param(httpd_req *req, uint64_t *id)
{
    size_t len = 0;
    const char *p = httpd_param(req, "id", &len);
    if (p == NULL || !lease_id_parse(p, len, id)) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "a lease id is a positive integer below 2^53 (from POST /v1/leases)");
        return false;
    }
    return true;
}

/* The start of a request about lease {id}: its id, a storage session, and
 * the leases read back on a member that has just begun to lead. false
 * when it answered. */
static bool lease_request(httpd_req *req, svc *s, uint64_t *id, pc_session **ps)
{
    if (!id_param(req, id))
        return false;
    if ((*ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
        return false;
    }
    return !reply_unless_taken_over(req, s);
}

/* A lease action that failed. */
static void reply_failed(httpd_req *req, svc *s, pc_rc rc, uint64_t id, codec_enc enc)
{
    if (rc == PC_NOT_FOUND) {
        reply_lease_refused(req, id, LEASE_MISSING);
    } else if (rc == PC_WRITE_CONFLICT || rc == PC_LOCKED) {
        /* Its keys kept being written while it ended: it stays ending
         * (refused to puts and keep-alives), and the janitor goes on. */
        httpd_add_header(req, "Retry-After", "1");
        httpd_reply_error(req, 503, "busy", json_pack("{s:i}", "retry_after_ms", 1000),
                          "lease %llu is ending but its keys are busy: the janitor ends it "
                          "shortly; revoke again to wait for it", (unsigned long long)id);
    } else if (rc == PC_TS_UNAVAILABLE)
        reply_oracle_unavailable(req, s);
    else
        reply_engine(req, s, rc, NULL, enc);
}

static void h_grant(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    json_t *body, *ttl;
    pc_session *ps;
    uint64_t id = 0;

    if ((body = body_object(req, (const char *const[]){"ttl_ms", NULL})) == NULL)
        return;
    ttl = json_object_get(body, "ttl_ms");
    if (!json_is_object(body) || !json_is_integer(ttl) ||
        json_integer_value(ttl) < (json_int_t)LEASE_MIN_TTL_MS ||
        json_integer_value(ttl) > (json_int_t)LEASE_MAX_TTL_MS) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "the body must be {\"ttl_ms\": N} with N from %llu to %llu",
                          (unsigned long long)LEASE_MIN_TTL_MS,
                          (unsigned long long)LEASE_MAX_TTL_MS);
        goto out;
    }
    if ((ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
        goto out;
    }
    if (reply_unless_taken_over(req, s))
        goto out;
    uint64_t ttl_ms = (uint64_t)json_integer_value(ttl);
    pc_rc rc = leases_grant(s, ps, ttl_ms, &id);
    if (rc == PC_OK) {
        httpd_reply_json(req, 201, json_pack("{s:I,s:I}", "id", (json_int_t)id, "ttl_ms",
                                             (json_int_t)ttl_ms));
    } else if (rc == PC_INVALID) {
        httpd_add_header(req, "Retry-After", "1");
        httpd_reply_error(req, 503, "too_many_leases", json_pack("{s:i}", "retry_after_ms", 1000),
                          "%llu leases exist (--lease-max): revoke one, or let one expire",
                          (unsigned long long)s->cfg.lease_max);
    } else if (rc == PC_TS_UNAVAILABLE) {
        reply_oracle_unavailable(req, s);
    } else {
        reply_engine(req, s, rc, NULL, ENC_TEXT);
    }
out:
    json_decref(body);
}

static void h_keepalive(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    uint64_t id, ttl_ms = 0;
    pc_session *ps;
    if (!lease_request(req, s, &id, &ps))
        return;
    if (leases_keepalive(s, id, &ttl_ms) != PC_OK)
        reply_lease_refused(req, id, LEASE_MISSING);
    else
        httpd_reply_json(req, 200, json_pack("{s:I,s:I}", "id", (json_int_t)id, "ttl_ms",
                                             (json_int_t)ttl_ms));
}

static void h_revoke(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    uint64_t id, cts = 0;
    size_t deleted = 0;
    pc_session *ps;

    if (!lease_request(req, s, &id, &ps))
        return;
    pc_rc rc = leases_revoke(s, ps, id, &deleted, &cts);
    if (rc == PC_OK)
        httpd_reply_json(req, 200, json_pack("{s:I,s:I,s:I}", "id", (json_int_t)id,
                                             "deleted_keys", (json_int_t)deleted, "commit_ts",
                                             (json_int_t)cts));
    else
        reply_failed(req, s, rc, id, ENC_TEXT);
}

static void h_lookup(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    uint64_t id;
    pc_session *ps;
    json_t *ans = NULL;

    if (!codec_encoding(req, &enc) || !lease_request(req, s, &id, &ps))
        return;
    pc_rc rc = leases_lookup(s, ps, id, enc, &ans);
    if (rc == PC_OK && ans == NULL)
        codec_reply_not_text(req);
    else if (rc == PC_OK)
        httpd_reply_json(req, 200, ans);
    else
        reply_failed(req, s, rc, id, enc);
}

static void h_list(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    if (reply_unless_taken_over(req, s))
        return;
    json_t *list = leases_list(s);
    if (list == NULL)
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
    else
        httpd_reply_json(req, 200, list);
}

const httpd_route lease_routes[] = {
    {.method = "GET", .pattern = "/v1/leases", .handler = h_list, .blocking = true},
    {.method = "POST", .pattern = "/v1/leases", .handler = h_grant},
    {.method = "GET", .pattern = "/v1/leases/{id}", .handler = h_lookup, .blocking = true},
    {.method = "DELETE", .pattern = "/v1/leases/{id}", .handler = h_revoke},
    {.method = "POST", .pattern = "/v1/leases/{id}/keepalive", .handler = h_keepalive},
};
const size_t lease_routes_n = sizeof(lease_routes) / sizeof(lease_routes[0]);
