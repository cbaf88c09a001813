/*
 * routes_regions.c — GET /v1/regions: the regions this node (a group's
 * leader, where a follower passes the request on) cuts the keyspace into
 * (region.h, DESIGN §6.2), in key order, with the batches each was sent.
 * What `percolator region list` prints.
 */
#include <stdatomic.h>

#include "codec.h"
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

static void h_regions(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    if (!codec_encoding(req, &enc))
        return;
    json_t *list = json_array();
    bool ok = list != NULL;
    for (size_t i = 0; ok && s->regions != NULL && i < router_count(s->regions); i++) {
        const region *r = router_at(s->regions, i);
        json_t *o = json_pack("{s:I,s:I,s:I}", "id", (json_int_t)r->id, "epoch",
                              (json_int_t)r->epoch, "batches", (json_int_t)atomic_load(&r->nbatches));
        ok = o != NULL && add_bound(o, "start", &r->start, enc) &&
             (r->unbounded ? json_object_set_new(o, "end", json_null()) == 0
                           : add_bound(o, "end", &r->end, enc));
        if (!ok)
            json_decref(o);
        else
            ok = json_array_append_new(list, o) == 0; /* it owns o, failed or not */
    }
    if (!ok) {
        json_decref(list);
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    httpd_reply_json(req, 200, json_pack("{s:o}", "regions", list));
}

const httpd_route regions_routes[] = {
    {.method = "GET", .pattern = "/v1/regions", .handler = h_regions},
};
const size_t regions_routes_n = sizeof(regions_routes) / sizeof(regions_routes[0]);
