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
#include <stdint.h>

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
/* Requests under way give up at once, and no new one is made (new ids
 * are then PD_ID_UNAVAILABLE): so that stopping waits for no driver. NULL
 * is fine. */
void pd_report_cancel(pd_report *r);
/* Cancel, stop the thread and free. NULL is fine. Nothing may call
 * pd_report_new_id once it is called. */
void pd_report_stop(pd_report *r);

typedef enum {
    PD_ID_OK,
    PD_ID_NONE,                  /* no driver: not reporting (r NULL), or a single oracle */
    PD_ID_UNAVAILABLE            /* the driver did not answer (or stopping) */
} pd_id_rc;

/* A fresh id from the driver into *id, at least min (the router's next
 * id: ids this service made itself before it had a driver are below it).
 * Ids from the one counter of the driver are unique in the cluster, which
 * a split's new region needs once many groups share the keyspace (TiKV
 * asks PD the same way). Any thread; waits for the driver (the oracle's
 * timeout per member tried). On PD_ID_UNAVAILABLE, why (whylen bytes)
 * says what the driver answered, for the client. */
pd_id_rc pd_report_new_id(pd_report *r, uint64_t min, uint64_t *id, char *why, size_t whylen);

#endif
