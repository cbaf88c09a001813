/*
 * raft_admin.c — see raft_admin.h.
 */
#include "raft_admin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* This member does not lead: 307 to the leader's URL (same path), or 503
 * not_leader while none is known. */
static void not_leader(httpd_req *req, raft_host *h)
{
    raft_host_view v;
    const raft_host_member *lp = NULL;
    raft_host_view_get(h, &v);
    for (size_t i = 0; i < v.n; i++)
        if (v.members[i].leader && v.members[i].url[0] != '\0')
            lp = &v.members[i];
    if (lp != NULL) {
        char loc[RAFT_PEER_ADDR_MAX + 64];
        snprintf(loc, sizeof loc, "%s%s", lp->url, httpd_path(req));
        httpd_add_header(req, "Location", loc);
        httpd_reply_error(req, 307, "not_leader", NULL,
                          "this member does not lead: the leader is member %u at %s", lp->member,
                          lp->url);
        return;
    }
    httpd_add_header(req, "Retry-After", "1");
    httpd_reply_error(req, 503, "not_leader", NULL,
                      "this member does not lead and knows of no leader yet (an election may "
                      "be under way)");
}

static bool leads(raft_host *h)
{
    raft_host_view v;
    raft_host_view_get(h, &v);
    return v.leads;
}

static void raft_admin_list(httpd_req *req, raft_host *h)
{
    raft_host_view v;
    raft_host_view_get(h, &v);
    if (!v.leads) {
        not_leader(req, h);
        return;
    }
    json_t *list = json_array();
    unsigned leader = 0;
    for (size_t i = 0; i < v.n && list != NULL; i++) {
        const raft_host_member *m = &v.members[i];
        const char *url = m->url;
        if (m->leader)
            leader = m->member;
        uint64_t match = m->match_index < 0 ? 0 : (uint64_t)m->match_index;
        char raft_id[24]; /* a string: it may not fit a JSON integer of 53 bits */
        snprintf(raft_id, sizeof raft_id, "%llu", (unsigned long long)m->raft_id);
        json_array_append_new(
            list, json_pack("{s:i,s:s,s:s,s:s,s:s,s:b,s:I,s:I,s:b}", "id", (int)m->member,
                            "raft_id", raft_id, "address", m->address, "url", url, "role",
                            m->role, "leader", m->leader, "match_index", (json_int_t)match,
                            "lag",
                            (json_int_t)(v.last_index > match ? v.last_index - match : 0),
                            "answers", m->reachable));
    }
    httpd_reply_json(req, 200,
                     json_pack("{s:o,s:i,s:I,s:I,s:I}", "members", list, "leader", (int)leader,
                               "term", (json_int_t)v.term, "commit_index",
                               (json_int_t)v.commit_index, "last_index",
                               (json_int_t)v.last_index));
}

/* Where a member to add is, when the body says: {"address": "HOST:PORT",
 * "url": "http://..."} (the url optional). 0 (w->raft "" when not
 * given), or -1 answered 400. */
static int where_of_body(httpd_req *req, json_t *j, raft_peer *w)
{
    json_t *addr = json_object_get(j, "address"), *url = json_object_get(j, "url");
    const char *why = NULL;
    memset(w, 0, sizeof *w);
    if (addr == NULL && url == NULL)
        return 0;
    if (!json_is_string(addr))
        why = "\"address\" must be the member's raft address, HOST:PORT";
    else if ((why = raft_peers_bad_address(json_string_value(addr))) == NULL &&
             url != NULL && (!json_is_string(url) || !raft_peers_url_ok(json_string_value(url))))
        why = "\"url\" must be the member's http:// or https:// URL (no spaces, under 128 "
              "bytes)";
    if (why != NULL) {
        httpd_reply_error(req, 400, "bad_request", NULL, "%s", why);
        return -1;
    }
    snprintf(w->raft, sizeof w->raft, "%s", json_string_value(addr));
    if (url != NULL)
        snprintf(w->http, sizeof w->http, "%s", json_string_value(url));
    return 0;
}

/* The member a request names: {"id": N} in the body, or the path's {id};
 * and for an add, where the member is when the body says (w).
 * 0 (answered 400) when missing or not a member number. */
static unsigned member_of_body(httpd_req *req, raft_peer *w)
{
    json_t *j = httpd_body_json(req);
    if (j == NULL)
        return 0; /* httpd_body_json answered */
    json_t *id = json_object_get(j, "id");
    json_int_t v = json_is_integer(id) ? json_integer_value(id) : 0;
    if (v < 1 || v > 0xffffffffLL) {
        json_decref(j);
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "the body must be {\"id\": N}, N a member number (--raft-id) >= 1");
        return 0;
    }
    int rc = w != NULL ? where_of_body(req, j, w) : 0;
    json_decref(j);
    return rc == 0 ? (unsigned)v : 0;
}

static unsigned member_of_path(httpd_req *req)
{
    size_t len = 0;
    const char *p = httpd_param(req, "id", &len);
    char buf[16];
    if (p == NULL || len == 0 || len >= sizeof buf) {
        httpd_reply_error(req, 400, "bad_request", NULL, "the path must name a member number");
        return 0;
    }
    memcpy(buf, p, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    unsigned long v = strtoul(buf, &end, 10);
    if (errno != 0 || *end != '\0' || buf[0] == '-' || v < 1 || v > 0xffffffffUL) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "'%.15s' is not a member number (--raft-id)", buf);
        return 0;
    }
    return (unsigned)v;
}

/* Run a change and answer its outcome. */
static void change(httpd_req *req, raft_host *h, raft_host_op op, unsigned member,
                   const raft_peer *where)
{
    char err[300];
    raft_host_result r = raft_host_change(h, op, member, where, RAFT_ADMIN_WAIT_MS, err,
                                          sizeof err);
    switch (r) {
    case RAFT_HOST_DONE:
        break;
    case RAFT_HOST_NOT_LEADER:
        not_leader(req, h);
        return;
    case RAFT_HOST_REFUSED:
        httpd_reply_error(req, 409, "membership_refused", NULL, "%s", err);
        return;
    case RAFT_HOST_TIMEOUT:
        httpd_reply_error(req, 504, "raft_unavailable", NULL, "%s", err);
        return;
    }
    static const char *const done[] = {
        [RAFT_HOST_ADD] = ("added as a spare: the leader promotes it to voter once it has "
                           "caught up"),
        [RAFT_HOST_REMOVE] = "removed",
        [RAFT_HOST_LEAD] = "the lead was handed over",
    };
    httpd_reply_json(req, 200, json_pack("{s:i,s:s}", "id", (int)member, "status", done[op]));
}

void raft_admin_serve(httpd_req *req, raft_host *h)
{
    const char *method = httpd_method(req), *route = httpd_route_name(req);
    if (!leads(h)) {
        not_leader(req, h);
        return;
    }
    if (strcmp(method, "GET") == 0) {
        raft_admin_list(req, h);
        return;
    }
    bool remove = strcmp(method, "DELETE") == 0;
    bool lead = !remove && strcmp(route, RAFT_ADMIN_ROUTE_LEAD) == 0;
    raft_peer where;
    where.raft[0] = '\0';
    unsigned m = remove ? member_of_path(req) : member_of_body(req, lead ? NULL : &where);
    if (m != 0)
        change(req, h, remove ? RAFT_HOST_REMOVE : lead ? RAFT_HOST_LEAD : RAFT_HOST_ADD, m,
               where.raft[0] != '\0' ? &where : NULL);
}
