/*
 * raft_net.h — a node's Raft network (docs/DESIGN.md §6.5, step 2): the
 * messages of every group on the node go to another node over one
 * connection, each a record tagged with its group, instead of a listener,
 * connections and threads per member (raft_transport.h).
 *
 *   record   [group][from raft id][to raft id][length] (little-endian u64s)
 *            then length bytes: one Raft message as libraft writes it
 *            (raft_codec.h), checked where it arrives (raft_io_net.h)
 *
 * A node dials each node it sends to once (one connection a pair and
 * direction; its source bound to its own host, which the acceptor
 * compares with the address the dialler's hello claims) and reads the
 * connections other nodes opened to it, one thread each. Nothing waits for
 * a slow group or a dead node: a record that does not fit a node's queue
 * (max_queue_bytes) is dropped and counted, as is one for a group this
 * node does not host; Raft sends again what is lost. Records being read
 * take at most 1 GiB in all: a connection that announces one past it is
 * closed.
 *
 * This first version is plain TCP on loopback addresses only (a node
 * refuses to start elsewhere): peer TLS, the probes of raft_identity.h
 * and members added at other addresses are the next parts (DESIGN §6.5).
 */
#ifndef PC_RAFT_NET_H
#define PC_RAFT_NET_H

#include <stddef.h>
#include <stdint.h>

#include "raft_peers.h"

typedef struct raft_net raft_net;

typedef struct {
    const char *address;        /* this node: "127.0.0.x:port" */
    int listen_fd;              /* > 0: bound to address already (not taken: duplicated) */
    uint64_t max_queue_bytes;   /* records waiting for one node (0: 64 MiB) */
    uint64_t max_record_bytes;  /* the longest record read (0: 320 MiB) */
} raft_net_config;

/* Start listening. 0, or -1 with a reason in err. */
int raft_net_start(const raft_net_config *cfg, raft_net **out, char *err, size_t errlen);

/* Stop every thread and close every connection (every group left first). */
void raft_net_stop(raft_net *n);

/* What a group is handed: one record's message (msg, len: malloc'd, now
 * the callee's), from raft id `from` at node `from_node`, to raft id
 * `to`. On a reader thread: it must not block. */
typedef void (*raft_net_deliver_fn)(void *arg, uint64_t from, uint64_t to, const char *from_node,
                                    uint8_t *msg, size_t len);

/* Records for group go to fn from now on. 0, or -1 (taken, or full). */
int raft_net_join(raft_net *n, uint64_t group, raft_net_deliver_fn fn, void *arg);
/* No record goes to group's fn once this returns (none is running). */
void raft_net_leave(raft_net *n, uint64_t group);

/* Queue msg (malloc'd, now the net's) for raft id `to` of group at node
 * `address`. 0, or -1: dropped (its node's queue is full, or too many
 * nodes, or the net stops). */
int raft_net_send(raft_net *n, uint64_t group, uint64_t from, uint64_t to, const char *address,
                  uint8_t *msg, size_t len);

/* Counters, for tests and metrics. */
typedef struct {
    uint64_t sent, received;    /* records */
    uint64_t dropped_full;      /* a node's queue full, or its connection lost */
    uint64_t dropped_unknown;   /* for a group this node does not host */
    uint64_t refused;           /* connections refused (hello, address, record) */
    uint64_t connections;       /* open now, both directions */
} raft_net_stats;
void raft_net_get_stats(raft_net *n, raft_net_stats *st);

#endif
