/*
 * raft_net.h — a node's Raft network (docs/DESIGN.md §6.5, step 2): the
 * messages of every group on the node go to another node over one
 * connection, each a record tagged with its group, instead of a listener,
 * connections and threads per member (raft_transport.h).
 *
 *   hello      "pcRN", version 2, lane, address length (u16), realm
 *              (u64), address
 *   record     [group][from raft id][to raft id][length] (little-endian
 *              u64s) then length bytes: one Raft message as libraft writes
 *              it (raft_codec.h), checked where it arrives (raft_io_net.h)
 *   keepalive  a record header of zeros (group 0, length 0), sent on a
 *              connection quiet for a third of idle_ms
 *
 * A node dials each node it sends to, once a lane: a connection for
 * messages and one for images (raft_net_lane below), each one-way. The
 * node dialled reads it (one thread a connection) if a group there names
 * the dialler's node; a newer connection from a node on a lane replaces
 * the older. Nothing waits for a slow group or a dead node: a record that
 * does not fit its lane's queue is dropped and counted, as is one for a
 * group the node does not host; Raft sends again what is lost. Every
 * queue takes one record when it is empty, so a record up to its lane's
 * longest always goes in the end. What bounds memory:
 *
 *   a lane's send queue     messages: max_queue_bytes, or one record;
 *                           images: one; besides the record being written
 *   records being read      max_reading_bytes for all readers of a lane,
 *                           or one record (a reader waits for room: TCP
 *                           holds the rest back at the sender)
 *   messages handed on and  max_held_bytes for all groups, from a lane, or
 *   not yet taken           one message (raft_net_hold, by the groups'
 *                           receivers)
 * Each lane has its own budgets: an image being read or decoded never
 * holds up a message.
 *
 * A connection silent for idle_ms (each read must make progress within
 * it; every node of a cluster is given the same) is closed; so is one
 * that announces a record longer than its lane takes (max_record_bytes,
 * max_image_bytes), and one whose record's body is not in after idle_ms
 * and its length at 4 MiB/s (room among the records being read is taken
 * for a whole record when its header arrives, so a record trickled in
 * would hold it). When the last group naming a node leaves, the lanes to
 * it are given back and its connections here closed.
 *
 * Identity. With peer TLS (cfg.tls: the --peer-* credentials,
 * peer_tls.h) every connection is mutual TLS against the trusted CA, and
 * a node is who its certificate names: the dialler checks that the
 * acceptor's names the host it dialled, the acceptor that the dialler's
 * names the host its hello claims (IP subjectAltNames). Without it a node
 * runs on loopback addresses only, and a dialler's source address must be
 * the host its hello claims (a process on that host can still speak as
 * the node). The probes of raft_identity.h travel as records too
 * (raft_io_net.h); members at other addresses than their node's are the
 * next part (DESIGN §6.5).
 */
#ifndef PC_RAFT_NET_H
#define PC_RAFT_NET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raft_peers.h"

typedef struct raft_net raft_net;

typedef struct {
    const char *address;        /* this node: "127.0.0.x:port" */
    int listen_fd;              /* > 0: bound to address already (not taken: duplicated) */
    uint64_t max_queue_bytes;   /* records waiting for one node (0: 64 MiB) */
    uint64_t max_record_bytes;  /* the longest message sent or read (0: 320 MiB) */
    uint64_t max_image_bytes;   /* the longest image sent or read (0: 4 GiB) */
    uint64_t max_reading_bytes; /* records being read, all readers, a lane (0: 1 GiB) */
    uint64_t max_held_bytes;    /* messages handed to groups and not yet taken, a lane
                                 * (0: 512 MiB) */
    unsigned idle_ms;           /* a silent connection is closed after this (0: 30 s) */
    unsigned hello_ms;          /* an accepted connection's TLS handshake and hello within
                                 * this (0: 5 s); until then one address holds at most 8 */
    struct tls_server *tls;     /* peer credentials (tls.h; not owned, outlive the net):
                                 * mutual TLS on every connection. NULL: plain TCP, on
                                 * loopback addresses only */
    uint64_t realm;             /* every node of a cluster is given the same: a hello
                                 * naming another is refused (counted and logged), so
                                 * nodes made for different clusters never exchange a
                                 * record (the service: its region seed's digest) */
} raft_net_config;

/* Start listening. 0, or -1 with a reason in err. */
int raft_net_start(const raft_net_config *cfg, raft_net **out, char *err, size_t errlen);

/* Stop every thread and close every connection (every group left first). */
void raft_net_stop(raft_net *n);

/* What a group is handed: one record's message (msg, len: malloc'd, now
 * the callee's), from raft id `from` at node `from_node`, to raft id
 * `to`. On a reader thread, outside the net's locks: it may take its
 * time (that reader waits) but must not join or leave a group. */
typedef enum raft_net_lane raft_net_lane;
typedef void (*raft_net_deliver_fn)(void *arg, uint64_t from, uint64_t to, const char *from_node,
                                    raft_net_lane lane, uint8_t *msg, size_t len);

/* Records for group (not 0) go to fn from now on; nodes (n of them): the
 * addresses of the other nodes the group has members on, whose
 * connections this node accepts from now on. 0, or -1 (taken, or full). */
int raft_net_join(raft_net *n, uint64_t group, const char *const *nodes, size_t nnodes,
                  raft_net_deliver_fn fn, void *arg);
/* No record goes to group's fn once this returns (none is running). The
 * lanes to nodes that no group on this node names any more are given back
 * (their writers ended, what waited dropped) and the connections from them
 * closed. */
void raft_net_leave(raft_net *n, uint64_t group);

/* The two connections a node keeps to another, each with its queue and
 * writer: an image, which can take seconds to send, never holds the
 * other groups' messages behind it (TiKV sends snapshots apart too). */
enum raft_net_lane {
    RAFT_NET_MESSAGES = 0,      /* queue: max_queue_bytes; records: max_record_bytes */
    RAFT_NET_IMAGES = 1,        /* one image waiting a node, besides the one being sent;
                                 * records: max_image_bytes */
};

/* Queue msg (malloc'd, now the net's) for raft id `to` of group at node
 * `address`, on lane. 0, or -1: dropped (the lane's queue is full, the
 * record is longer than the lane takes, too many nodes, or the net
 * stops). */
int raft_net_send(raft_net *n, uint64_t group, uint64_t from, uint64_t to, const char *address,
                  raft_net_lane lane, uint8_t *msg, size_t len);

/* Whether the net runs peer TLS (else: plain TCP on loopback only). */
bool raft_net_has_tls(const raft_net *n);

/* The longest message raft_net_send takes on lane. */
uint64_t raft_net_max_message(const raft_net *n, raft_net_lane lane);

/* A group's receiver holds len bytes handed to it from lane until
 * raft_net_release: true, or false (the node's groups already hold
 * max_held_bytes from that lane: drop it). Each lane has its own, so that
 * an image never has messages dropped. */
bool raft_net_hold(raft_net *n, raft_net_lane lane, uint64_t len);
void raft_net_release(raft_net *n, raft_net_lane lane, uint64_t len);

/* Add len to *used unless that passes max while *used is not 0: a budget
 * that always takes one. true if taken. */
bool raft_net_budget_take(atomic_uint_fast64_t *used, uint64_t max, uint64_t len);

/* Counters, for tests and metrics. */
typedef struct {
    uint64_t sent, received;    /* records */
    uint64_t dropped_full;      /* a node's queue full, or its connection lost */
    uint64_t dropped_too_big;   /* longer than max_record_bytes: never sent */
    uint64_t dropped_unknown;   /* for a group this node does not host */
    uint64_t refused;           /* connections refused (hello, node, address, record) */
    uint64_t other_realm;       /* of them, hellos naming another realm */
    uint64_t other_version;     /* of them, hellos of another version */
    uint64_t replaced;          /* connections closed for a newer one from their node */
    uint64_t accepted;          /* connections accepted since the start */
    uint64_t connections;       /* open now, both directions */
    uint64_t lanes;             /* lanes to other nodes now (two a node at most) */
} raft_net_stats;
void raft_net_get_stats(raft_net *n, raft_net_stats *st);

#endif
