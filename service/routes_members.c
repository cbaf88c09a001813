/*
 * routes_members.c — a replicated service's membership (common/raft_admin.h;
 * docs/DESIGN.md §7.3): list, add, remove, hand the lead over. A single
 * node has no group: 409 not_in_a_group. With --region-logs every region
 * is a group: the list and the lead are region 1's (the other regions'
 * leaders follow its lead: region_logs.c), and a change of members (which
 * would have to be every region's) is refused for now: 409
 * membership_refused.
 */
#include <string.h>

#include "raft_admin.h"
#include "respond.h"

static void h_members(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    if (svc_replicated(s) && s->cfg.region_logs && strcmp(httpd_method(req), "GET") != 0 &&
        strcmp(httpd_path(req), "/v1/leader") != 0) {
        httpd_reply_error(req, 409, "membership_refused", NULL,
                          "with --region-logs each region is a Raft group of its own: changing "
                          "the members of them all is not supported yet (DESIGN §6.5)");
        return;
    }
    if (svc_replicated(s)) {
        raft_admin_serve(req, svc_raft_host(s));
        return;
    }
    httpd_reply_error(req, 409, "not_in_a_group", NULL,
                      "this service runs alone: it has no Raft group (--raft-id)");
}

const httpd_route members_routes[] = {RAFT_ADMIN_ROUTES(h_members)};
const size_t members_routes_n = sizeof(members_routes) / sizeof(members_routes[0]);
