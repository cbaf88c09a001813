/*
 * httpd_route.c — the routing table: compiling a route's pattern into
 * segments, and finding the route a request's method and raw path match
 * (or deciding its 404 / 405).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd_internal.h"

void httpd_route_free(route *r)
{
    for (int i = 0; i < r->nseg; i++)
        free(r->seg[i].text);
    free(r->label);
}

int httpd_route_compile(route *r, const httpd_route *def)
{
    memset(r, 0, sizeof *r);
    r->def = def;
    const char *p = def->pattern;
    if (!p || p[0] != '/')
        return -1;
    if (strcmp(p, "/") != 0) {
        p++;
        while (*p) {
            const char *slash = strchr(p, '/');
            size_t len = slash ? (size_t)(slash - p) : strlen(p);
            if (len == 0 || r->nseg >= MAX_SEGMENTS)
                return -1;
            segment *s = &r->seg[r->nseg++];
            s->is_param = len >= 3 && p[0] == '{' && p[len - 1] == '}';
            s->rest = s->is_param && len >= 6 && memcmp(p + len - 4, "...}", 4) == 0;
            s->text = s->rest       ? strndup(p + 1, len - 5)
                      : s->is_param ? strndup(p + 1, len - 2)
                                    : strndup(p, len);
            if (!s->text)
                return -1;
            p += len;
            if (s->rest && *p != '\0')
                return -1; /* the rest of the path comes last */
            if (*p == '/')
                p++;
        }
    }
    int nparams = 0;
    for (int i = 0; i < r->nseg; i++)
        nparams += r->seg[i].is_param;
    if (nparams > MAX_PARAMS)
        return -1;
    /* One label scheme for both programs' metrics and access logs: the
     * method and the path as the OpenAPI documents write it, so a rest
     * parameter {key...} is labelled {key} ("PUT /v1/kv/{key}"). */
    size_t n = strlen(def->method) + strlen(def->pattern) + 2;
    r->label = malloc(n);
    if (!r->label)
        return -1;
    char *o = r->label + snprintf(r->label, n, "%s ", def->method);
    for (const char *p = def->pattern; *p != '\0'; p++) {
        if (strncmp(p, "...}", 4) == 0)
            p += 3;
        *o++ = *p;
    }
    *o = '\0';
    return 0;
}

/* Does the raw path match the route's segments (literals compared raw)? */
static bool route_matches(const route *r, const char *path, size_t plen)
{
    if (plen == 0 || path[0] != '/')
        return false;
    if (r->nseg == 0)
        return plen == 1;
    size_t i = 1;
    for (int k = 0; k < r->nseg; k++) {
        if (i > plen)
            return false;
        const char *slash = memchr(path + i, '/', plen - i);
        size_t len = slash ? (size_t)(slash - (path + i)) : plen - i;
        if (r->seg[k].rest)
            return i < plen; /* whatever is left, if anything is */
        if (len == 0)
            return false;
        if (!r->seg[k].is_param &&
            (strlen(r->seg[k].text) != len || memcmp(r->seg[k].text, path + i, len) != 0))
            return false;
        i += len;
        if (k + 1 < r->nseg) {
            if (i >= plen || path[i] != '/')
                return false;
            i++;
        }
    }
    return i == plen;
}

/* A GET route also answers HEAD (RFC 9110 §9.3.2): the same status and
 * headers, and MHD leaves the body out. */
static bool method_matches(const char *route_method, const char *method)
{
    return strcmp(route_method, method) == 0 ||
           (strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0);
}

void httpd_route_request(httpd_req *rq)
{
    httpd *h = rq->h;
    char allow[128] = "";
    size_t alen = 0;
    for (size_t i = 0; i < h->nroutes; i++) {
        route *r = &h->routes[i];
        if (!route_matches(r, rq->uri, rq->path_len))
            continue;
        if (method_matches(r->def->method, rq->method)) {
            rq->route = r;
            break;
        }
        bool get = strcmp(r->def->method, "GET") == 0;
        int k = snprintf(allow + alen, sizeof allow - alen, "%s%s%s", alen ? ", " : "",
                         r->def->method, get ? ", HEAD" : "");
        if (k > 0 && (size_t)k < sizeof allow - alen)
            alen += (size_t)k;
    }
    if (!rq->route) {
        if (alen) {
            httpd_set_early(rq, 405, "method_not_allowed",
                            "method %s is not allowed here (allowed: %s)", rq->method, allow);
            httpd_add_header(rq, "Allow", allow);
        } else {
            httpd_set_early(rq, 404, "not_found", "no such endpoint: %s %.*s", rq->method,
                            (int)(rq->path_len > 100 ? 100 : rq->path_len), rq->uri);
        }
        return;
    }
    /* Decoded pieces are never longer than their encoded form; each needs
     * one NUL, and pieces are separated by at least one byte in the URI. */
    rq->scratch = malloc(2 * rq->target_len + 2);
    if (!rq->scratch) {
        httpd_set_early(rq, 500, "internal", "out of memory");
        return;
    }
    char *out = rq->scratch;
    if (httpd_decode_params(rq, &out) != 0 || httpd_decode_query(rq, &out) != 0)
        httpd_set_early(rq, 400, "bad_request", "malformed percent-encoding in the URL");
}
