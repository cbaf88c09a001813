/*
 * raft_admin.h — a Raft group's membership over HTTP, the same for the
 * oracle's group and the service's (docs/DESIGN.md §7.3, the spec's
 * "members" routes); the program routes them and checks the token:
 *
 *   GET    /v1/members            the configuration, and the leader's view
 *                                 of each member (lag, whether it answers)
 *   POST   /v1/members  {"id":N}  add a --raft-peers member that is in no
 *                                 configuration, as a spare; the leader
 *                                 promotes it once it has caught up;
 *                                 {"id":N,"address":"HOST:PORT","url":U}:
 *                                 a member on an address no --raft-peers
 *                                 gives (the configuration carries both)
 *   DELETE /v1/members/{id}       remove a member, unless the voters left
 *                                 that answer would be short of a quorum
 *   POST   /v1/leader   {"id":N}  hand the lead to a voter
 *
 * Only the leader changes or reports the group: another member answers
 * 307 to the leader's URL when it knows it, else 503 not_leader.
 */
#ifndef PC_RAFT_ADMIN_H
#define PC_RAFT_ADMIN_H

#include "httpd.h"
#include "raft_host.h"

/* How long a change may take before the answer is 504 (ms). */
#define RAFT_ADMIN_WAIT_MS 10000

/* The routes, for a program's table: every one goes to a handler of the
 * program's that finds its raft host and calls raft_admin_serve (which
 * tells the lead route apart by its label, httpd_route_name). */
#define RAFT_ADMIN_ROUTE_LEAD "POST /v1/leader"
#define RAFT_ADMIN_ROUTES(fn)                                                                   \
    {.method = "GET", .pattern = "/v1/members", .handler = (fn)},                               \
    {.method = "POST", .pattern = "/v1/members", .handler = (fn)},                              \
    {.method = "DELETE", .pattern = "/v1/members/{id}", .handler = (fn)},                       \
    {.method = "POST", .pattern = "/v1/leader", .handler = (fn)}

/* Serve one of those routes on h. */
void raft_admin_serve(httpd_req *req, raft_host *h);

#endif
