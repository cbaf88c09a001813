/*
 * routes_observers.c — /v1/observers... (the spec's observers).
 */
#include <string.h>

#include "body.h"
#include "observers.h"
#include "respond.h"

/* The {name} path parameter, checked; NULL after answering 400. */
static const char *name_param(httpd_req *req, char *out)
{
    size_t len = 0;
    const char *name = httpd_param(req, "name", &len);
    if (name == NULL || !observers_name_ok(name, len)) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "an observer name is 1..%d characters of A-Z a-z 0-9 . _ -",
                          OBS_NAME_MAX);
        return NULL;
    }
    memcpy(out, name, len);
    out[len] = '\0';
    return out;
}

static void h_put(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    char name[OBS_NAME_MAX + 1], prefix[SVC_MAX_KEY];
    size_t plen = 0;
    json_t *body = NULL, *p;
    pc_session *ps;
    bool created = false;

    if (!codec_encoding(req, &enc) || !name_param(req, name) ||
        (body = body_object(req, (const char *const[]){"prefix", NULL})) == NULL)
        return;
    p = json_object_get(body, "prefix");
    if (!json_is_object(body) || !json_is_string(p)) {
        httpd_reply_error(req, 400, "bad_request", NULL, "the body must be {\"prefix\": \"...\"}");
        goto out;
    }
    /* An empty prefix watches every key. */
    if (json_string_length(p) > 0 && !codec_json_key(req, p, "prefix", enc, prefix, &plen))
        goto out;
    if ((ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
        goto out;
    }
    if (reply_unless_taken_over(req, s))
        goto out;
    pc_rc rc = observers_put(s, ps, name, prefix, plen, &created);
    if (rc == PC_INVALID) {
        httpd_reply_error(req, 400, "bad_request", NULL, "at most %d observers", OBS_MAX);
    } else if (rc != PC_OK) {
        reply_engine(req, s, rc, NULL, enc);
    } else {
        json_t *jp = codec_to_json(prefix, plen, enc);
        httpd_reply_json(req, created ? 201 : 200,
                         json_pack("{s:s,s:o}", "name", name, "prefix", jp ? jp : json_string("")));
    }
out:
    json_decref(body);
}

static void h_delete(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    char name[OBS_NAME_MAX + 1];
    pc_session *ps;

    if (!name_param(req, name))
        return;
    if ((ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
        return;
    }
    if (reply_unless_taken_over(req, s)) /* the registrations are the leader's */
        return;
    pc_rc rc = observers_delete(s, ps, name);
    if (rc == PC_OK)
        httpd_reply_empty(req, 204);
    else if (rc == PC_NOT_FOUND)
        httpd_reply_error(req, 404, "not_found", NULL, "no such observer");
    else
        reply_engine(req, s, rc, NULL, ENC_TEXT);
}

static void h_list(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    pc_session *ps;

    if (!codec_encoding(req, &enc))
        return;
    if ((ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
        return;
    }
    if (reply_unless_taken_over(req, s)) /* the registrations are the leader's */
        return;
    json_t *list = observers_list(s, ps, enc);
    if (list == NULL)
        codec_reply_not_text(req);
    else
        httpd_reply_json(req, 200, list);
}

static void h_claim(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    char name[OBS_NAME_MAX + 1];
    uint64_t wait_ms;
    pc_session *ps;
    txn *t = NULL;
    json_t *item = NULL;
    bool no_observer = false;

    if (!codec_encoding(req, &enc) || !name_param(req, name) ||
        !codec_query_u64(req, "wait_ms", 0, 0, 60000, &wait_ms))
        return;
    if ((ps = svc_engine_session(s)) == NULL) {
        reply_no_session(req);
        return;
    }
    if (reply_unless_taken_over(req, s)) /* the registrations are the leader's */
        return;
    pc_rc rc = observers_claim(s, ps, name, wait_ms, enc, &t, &item, &no_observer);
    if (rc == PC_OK) {
        httpd_reply_json(req, 200, item);
        sessions_release(s->sessions, t);
    } else if (no_observer) {
        httpd_reply_error(req, 404, "not_found", NULL, "no such observer");
    } else if (rc == PC_NOT_FOUND) {
        httpd_reply_empty(req, 204);
    } else {
        reply_engine(req, s, rc, NULL, enc);
    }
}

const httpd_route observer_routes[] = {
    {.method = "GET", .pattern = "/v1/observers", .handler = h_list, .blocking = true},
    {.method = "PUT", .pattern = "/v1/observers/{name}", .handler = h_put},
    {.method = "DELETE", .pattern = "/v1/observers/{name}", .handler = h_delete},
    {.method = "POST", .pattern = "/v1/observers/{name}/claim", .handler = h_claim},
};
const size_t observer_routes_n = sizeof(observer_routes) / sizeof(observer_routes[0]);
