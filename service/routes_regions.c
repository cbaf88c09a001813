/*
 * routes_regions.c — GET /v1/regions: the regions this node (a group's
 * leader, where a follower passes the request on) cuts the keyspace into
 * (region.h, DESIGN §6.2), in key order, with the batches each was sent;
 * POST /v1/regions/split: split the region holding a key before it (a
 * command in the log: splits.c). What `percolator region list` and
 * `percolator region split` print.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "codec.h"
#include "keyspace.h"
#include "respond.h"
#include "service.h"

/* A region's bound as the API shows keys: the user key (text, or base64
 * marked in `<name>_encoding`); the first region starts at "" (below
 * every key, the service's own records too). */
static bool add_bound(json_t *o, const char *name, const pc_buf *b, codec_enc enc)
{
    bool b64 = false;
    json_t *k = b->len == 0 ? json_string("")
                            : user_key_json((pc_slice){b->data, b->len}, enc, &b64);
    char marked[32];
    snprintf(marked, sizeof marked, "%s_encoding", name);
    return k != NULL && json_object_set_new(o, name, k) == 0 &&
           (!b64 || json_object_set_new(o, marked, json_string("base64")) == 0);
}

/* The regions as the API shows them: 200 {"regions": [...]}. */
static void reply_regions(httpd_req *req, svc *s, codec_enc enc)
{
    region **all = NULL;
    size_t n = s->regions != NULL ? router_list(s->regions, &all) : 0;
    json_t *list = json_array();
    bool ok = list != NULL && (s->regions == NULL || all != NULL);
    for (size_t i = 0; ok && i < n; i++) {
        const region *r = all[i];
        int64_t size = atomic_load(&r->size);
        json_t *o = json_pack("{s:I,s:I,s:I,s:o}", "id", (json_int_t)r->id, "epoch",
                              (json_int_t)r->epoch, "batches", (json_int_t)atomic_load(&r->nbatches),
                              "bytes", size >= 0 ? json_integer((json_int_t)size) : json_null());
        ok = o != NULL && add_bound(o, "start", &r->start, enc) &&
             (r->unbounded ? json_object_set_new(o, "end", json_null()) == 0
                           : add_bound(o, "end", &r->end, enc));
        unsigned leader;
        uint64_t term;
        if (ok && svc_region_group(s, r, &leader, &term)) /* --region-logs */
            ok = json_object_set_new(o, "leader", json_integer(leader)) == 0 &&
                 json_object_set_new(o, "term", json_integer((json_int_t)term)) == 0;
        if (!ok)
            json_decref(o);
        else
            ok = json_array_append_new(list, o) == 0; /* it owns o, failed or not */
    }
    free(all);
    if (!ok) {
        json_decref(list);
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    httpd_reply_json(req, 200, json_pack("{s:o}", "regions", list));
}

/* ?local=true: this member's own map, as it applied it, not passed on to
 * the leader (replica.c svc_elsewhere): members compared one by one. */
static void h_regions(httpd_req *req, void *ctx)
{
    codec_enc enc;
    const char *local = httpd_query(req, "local", NULL);
    if (local != NULL && strcmp(local, "true") != 0 && strcmp(local, "false") != 0) {
        httpd_reply_error(req, 400, "bad_request", NULL, "local must be true or false");
        return;
    }
    if (codec_encoding(req, &enc))
        reply_regions(req, ctx, enc);
}

/* {"key": K}: the region holding user key K is split before it; the
 * answer is the map after the split. */
static void h_split(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    json_t *body = NULL;
    char key[SVC_MAX_KEY], ekey[KS_MAX], err[320];
    size_t len = 0;
    if (!codec_encoding(req, &enc) ||
        (body = body_object(req, (const char *const[]){"key", NULL})) == NULL)
        return;
    if (!codec_json_key(req, json_object_get(body, "key"), "key", enc, key, &len) ||
        reply_unless_taken_over(req, s))
        goto out;
    size_t elen = ks_user(ekey, key, len);
    err[0] = '\0';
    pc_rc rc = svc_split_region(s, ekey, elen, err, sizeof err);
    if (rc == PC_INVALID) {
        httpd_reply_error(req, 409, "split_refused", NULL, "%s", err);
    } else if (rc == PC_UNAVAILABLE && err[0] != '\0') { /* a member not caught up (splits.c) */
        httpd_add_header(req, "Retry-After", "1");
        httpd_reply_error(req, 503, "split_unavailable",
                          json_pack("{s:i}", "retry_after_ms", 1000), "%s", err);
    } else if (rc == PC_TS_UNAVAILABLE) { /* the placement driver's id (splits.c) */
        httpd_add_header(req, "Retry-After", "1");
        httpd_reply_error(req, 503, "pd_unavailable", json_pack("{s:i}", "retry_after_ms", 1000),
                          "%s", err);
    } else if (rc != PC_OK)
        reply_engine(req, s, rc, NULL, enc);
    else
        reply_regions(req, s, enc);
out:
    json_decref(body);
}

const httpd_route regions_routes[] = {
    {.method = "GET", .pattern = "/v1/regions", .handler = h_regions},
    {.method = "POST", .pattern = "/v1/regions/split", .handler = h_split},
};
const size_t regions_routes_n = sizeof(regions_routes) / sizeof(regions_routes[0]);
