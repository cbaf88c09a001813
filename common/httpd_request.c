/*
 * httpd_request.c — what a handler reads of its request (method, path,
 * parameters, query, headers, body, id) and the slot a fast handler leaves
 * for the worker.
 */
#include <string.h>

#include "httpd_internal.h"

const char *httpd_method(const httpd_req *rq) { return rq->method; }
const char *httpd_path(const httpd_req *rq) { return rq->uri; }
const char *httpd_query_string(const httpd_req *rq) { return rq->query_str; }
const char *httpd_route_name(const httpd_req *rq) { return rq->route ? rq->route->label : "unmatched"; }

static const char *kv_find(const kv *arr, int n, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    for (int i = 0; i < n; i++) {
        if (arr[i].klen == nl && memcmp(arr[i].key, name, nl) == 0) {
            if (len)
                *len = arr[i].vlen;
            return arr[i].val;
        }
    }
    return NULL;
}

const char *httpd_param(const httpd_req *rq, const char *name, size_t *len)
{
    return kv_find(rq->params, rq->nparams, name, len);
}

const char *httpd_query(const httpd_req *rq, const char *name, size_t *len)
{
    return kv_find(rq->query, rq->nquery, name, len);
}

const char *httpd_header(const httpd_req *rq, const char *name)
{
    return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

const char *httpd_body(const httpd_req *rq, size_t *len)
{
    if (len)
        *len = rq->body.len;
    return rq->body.data ? rq->body.data : "";
}

json_t *httpd_body_json(httpd_req *rq)
{
    if (rq->body.len == 0) {
        httpd_reply_error(rq, 400, "bad_request", NULL, "a JSON body is required");
        return NULL;
    }
    json_error_t e;
    json_t *j = json_loadb(rq->body.data, rq->body.len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &e);
    if (!j)
        httpd_reply_error(rq, 400, "bad_request", NULL, "body is not valid JSON: %s (at byte %d)",
                          e.text, e.position);
    return j;
}

const char *httpd_request_id(const httpd_req *rq)
{
    return rq->rid;
}

void httpd_set_slot(httpd_req *rq, void *p, void (*free_fn)(void *))
{
    if (rq->slot != NULL && rq->slot_free != NULL)
        rq->slot_free(rq->slot);
    rq->slot = p;
    rq->slot_free = free_fn;
}

void *httpd_slot(const httpd_req *rq)
{
    return rq->slot;
}
