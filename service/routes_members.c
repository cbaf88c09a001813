/*
 * routes_members.c — a replicated service's membership (common/raft_admin.h;
 * docs/DESIGN.md §7.3): list, add, remove, hand the lead over. A single
 * node has no group: 409 not_in_a_group.
 */
#include "raft_admin.h"
#include "respond.h"

static void h_members(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    if (svc_replicated(s)) {
        raft_admin_serve(req, svc_raft_host(s));
        return;
    }
    httpd_reply_error(req, 409, "not_in_a_group", NULL,
                      "this service runs alone: it has no Raft group (--raft-id)");
}

const httpd_route members_routes[] = {RAFT_ADMIN_ROUTES(h_members)};
const size_t members_routes_n = sizeof(members_routes) / sizeof(members_routes[0]);
