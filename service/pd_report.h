/*
 * pd_report.h — a service node's reports to the placement driver, the
 * oracle group (docs/DESIGN.md §6.3): as TiKV's stores and region leaders
 * report to PD.
 *
 * A thread registers this node (its URL) once, then every interval sends
 * a heartbeat: the regions this node leads (all of them on a group's
 * leader or a single service; none on a follower, whose heartbeat only
 * says it is alive), each with its range, its epoch as the version, the
 * group's members as replicas (each registered by its URL, so the driver
 * knows their ids) and its size when measured. A single oracle has no
 * driver (409 not_in_a_group): the thread says so once and stops
 * reporting. Requests go to the oracle member that answered last, follow
 * a follower's 307 to the leader, and move to the next member when one
 * does not answer; a failed round is tried again at the next interval.
 */
#ifndef PC_PD_REPORT_H
#define PC_PD_REPORT_H

#include <stddef.h>

#include "oracle_client.h"
#include "raft_peers.h"
#include "service.h"

typedef struct {
    const char *oracle;          /* --oracle: the members' URLs, comma-separated */
    const char *token;           /* the oracle's token (NULL: none) */
    const oc_tls *tls;           /* for https:// members (NULL: none) */
    const char *self_url;        /* this node's URL, as the cluster reaches it */
    const raft_peer *members;    /* a replicated service's members, or NULL */
    size_t nmembers;
    unsigned interval_ms;        /* 0: never report */
} pd_report_config;

typedef struct pd_report pd_report;

/* Start reporting (NULL, and nothing started, when interval_ms is 0 or
 * out of memory: *failed says which). */
pd_report *pd_report_start(svc *s, const pd_report_config *cfg, bool *failed);
/* Stop the thread (a request under way gives up at once) and free. NULL
 * is fine. */
void pd_report_stop(pd_report *r);

#endif
