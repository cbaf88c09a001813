/*
 * raft_node.h — percolator-oracle as one node of a Raft group, on
 * Canonical's C Raft library (libraft 0.15, Debian's libraft-dev: its
 * on-disk log and TCP transport over libuv). The project's code is the
 * state machine (raft_fsm.h) and this wiring; election, log and quorum are
 * the library's (docs/DESIGN.md §7).
 *
 * Threads: libraft is driven by a libuv loop on a thread of its own, or
 * by one it shares with other groups (common/raft_host.h, raft_loop.h). An HTTP handler asks for timestamps through
 * raft_node_timestamps, which queues the request on the member's proposer
 * (common/raft_proposer.h) and waits; the loop answers it from the
 * leader's window while its lease holds, or takes every request queued
 * since its last command and proposes one "advance by the sum" command
 * (the paper's batching), and hands each request its part of the range
 * once the command is applied. One command is in flight at a time: the
 * requests that arrive meanwhile make the next, bigger one. That policy is
 * oracle/ts_window.h; this is its host.
 */
#ifndef PC_RAFT_NODE_H
#define PC_RAFT_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "metrics.h"
#include "pd_map.h"
#include "raft_fsm.h"
#include "raft_peers.h"
#include "raft_proposer.h"

#define RAFT_NODE_MAX_PEERS RAFT_PEERS_MAX
#define RAFT_NODE_ADDR_MAX RAFT_PEER_ADDR_MAX

typedef raft_peer raft_node_peer;    /* common/raft_peers.h */

typedef struct {
    unsigned id;                     /* this node: one of the peers */
    const char *dir;                 /* raft log and snapshots; created if missing */
    raft_node_peer peers[RAFT_NODE_MAX_PEERS];
    size_t npeers;
    unsigned election_ms;            /* 0: 1000 */
    unsigned heartbeat_ms;           /* 0: 100 */
    struct tls_server *peer_tls;     /* peer credentials (not owned); NULL: plain TCP */
    int listen_fd;                   /* > 0: the raft port, bound already (raft_host.h) */
    uint64_t min_ts;                 /* --min-timestamp: a leader raises the mark to it first */
    struct raft_loop *loop;          /* a loop shared with other groups (raft_loop.h; not
                                      * owned); NULL: one of its own */
    size_t segment_bytes;            /* raft_host_config's; 0: libraft's default */
    struct raft_net *net;            /* raft_host_config's: the node's network, or NULL */
    uint64_t net_group;
} raft_node_config;

typedef struct raft_node raft_node;

/* Parse "1=host:port,2=host:port,..." into cfg->peers (raft addresses);
 * with urls (may be NULL) "1=http://host:port,..." their HTTP URLs. 0, or
 * -1 with a reason in err. */
int raft_node_parse_peers(const char *peers, const char *urls, raft_node_config *cfg, char *err,
                          size_t errlen);

/* Start the node (bootstrapping the group on its first start). 0, or -1
 * with a reason in err. */
int raft_node_start(const raft_node_config *cfg, metrics_registry *m, raft_node **out, char *err,
                    size_t errlen);
/* Stop: pending requests fail, the loop closes libraft, everything is freed. */
void raft_node_stop(raft_node *n);

typedef enum {
    RN_OK = 0,
    RN_NOT_LEADER,   /* ask the leader (raft_node_status says which, if known) */
    RN_UNAVAILABLE,  /* leadership lost or no quorum while the request waited */
    RN_EXHAUSTED,    /* the timestamp space is used up */
    RN_TOO_BIG       /* a placement-driver command past RN_PD_MAX_BYTES */
} rn_rc;

/* The largest placement-driver command (its bytes): the service's HTTP
 * body limit keeps every report below it. */
#define RN_PD_MAX_BYTES ((size_t)2 << 20)

/* count timestamps first..first+count-1, strictly above every timestamp
 * any node handed out before this call began. Blocks until the command is
 * applied (bounded: libraft fails it when leadership is lost), or until
 * wait_ms while it is still queued. */
rn_rc raft_node_timestamps(raft_node *n, unsigned count, unsigned wait_ms, uint64_t *first);

/* The node's view (common/raft_proposer.h: role, leader, term, applied
 * index; common/raft_host.h: membership). */
typedef rp_status raft_node_status;

/* The node's view, refreshed by the loop (at most ~50 ms old). */
void raft_node_get_status(raft_node *n, raft_node_status *st);
/* The high-water mark this node applied (any thread; at most ~50 ms old). */
uint64_t raft_node_hwm(raft_node *n);

/* Propose a placement-driver command (bytes made by pd_cmd_*, oracle/
 * pd_map.h) and wait for it, as raft_node_timestamps waits: *result is
 * what applying it gave (pd_apply_*). Only the leader proposes. */
rn_rc raft_node_pd(raft_node *n, oracle_pd_cmd cmd, const buf *bytes, unsigned wait_ms,
                   uint64_t *result);
/* The member's map as it applied it (any thread; pd_map.h's readers). */
pd_map *raft_node_pd_map(raft_node *n);

/* The member's libraft host (common/raft_host.h: membership, admin). */
struct raft_host *raft_node_host(raft_node *n);

#endif
