/*
 * raft_io_net.h — a raft_io whose messages go through the node's network
 * (raft_net.h) while everything else (the log on disk, the timer) is
 * libraft's own I/O underneath: docs/DESIGN.md §6.5, step 2. It sits
 * between the guard (raft_io_guard.h) and libraft's libuv I/O, which is
 * given a transport that never connects.
 *
 * Sending: the message is encoded (raft_codec.h) and queued for the node
 * the group's peers put its destination at (not the address in the
 * configuration, which may carry a URL too); the send is answered on the
 * loop once queued, or failed (RAFT_NOCONNECTION) when the queue refused
 * it: to libraft, a lost message. An image (InstallSnapshot) goes on the
 * net's images lane, every other message on its messages lane.
 *
 * Receiving, on the net's reader thread: the record must be for this
 * member's raft id, from a member the group's peers put at the node it
 * came from; the bytes must pass the frame check of §7.2 (raft_codec_decode
 * runs raft_frame_message under the member's limits), and every
 * configuration in them (a RAFT_CHANGE entry's, an image's) must name
 * only the group's peers at their addresses. Then it is posted to the
 * member's loop, which hands it to libraft, unless the messages waiting
 * there already hold max_inbound_bytes, or all the node's groups hold the
 * net's max_held_bytes (raft_net_hold): then it is dropped (counted).
 * Either bound takes one message when nothing is held, so a message of
 * any size the frame check passes goes through in the end.
 *
 * Probes and hellos (raft_identity.h, DESIGN §6.5): a member joins the
 * net when it is set up, before libraft runs, so that one with an empty
 * data dir can ask the others whether its group exists, and a joining
 * one say who it is now. They travel as control records (`to` = 0, on
 * the messages lane), from and to the group's peers like any record:
 *   [type][cluster][raft id][has state][last index][nonce]  (LE u64s)
 * A hello (type 1) is answered with this member's own (type 2, the same
 * nonce, random), which raft_io_net_probe waits for; a hello or an answer
 * is remembered (raft_io_net_seen) when both members know the same group.
 * A Raft message says who sent it too (a member with libraft state), as
 * each connection's hello does on a member's own transport: it is noted
 * even before libraft starts, then dropped.
 *
 * Threads: the raft_io methods on the loop thread, deliveries on the
 * net's readers, probes on the caller's (a decider's or prober's).
 */
#ifndef PC_RAFT_IO_NET_H
#define PC_RAFT_IO_NET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>

#include "raft_frame.h"
#include "raft_identity.h"
#include "raft_loop.h"
#include "raft_net.h"
#include "raft_peers.h"

/* Probes waiting for their answer at once (a decider or a prober asks
 * one member at a time). */
#define RAFT_IO_NET_PROBES 4

typedef struct raft_io_net {
    struct raft_io io;              /* what the guard wraps (raft_io_net_wrap) */
    struct raft_io *inner;          /* libraft's libuv I/O */
    raft_net *net;
    raft_loop *loop;
    uint64_t group;
    raft_frame_limits lim;
    raft_peer peers[RAFT_PEERS_MAX];
    size_t npeers;
    uint64_t max_inbound_bytes;
    raft_io_tick_cb tick;           /* the guard's, called with &io */
    raft_io_recv_cb recv;
    raft_io_close_cb closed;
    bool joined, closing, inner_closed;
    /* What this member's hellos and answers say (raft_io_net_set_self);
     * self is also the raft id Raft messages must be for. */
    atomic_uint_fast64_t self, cluster, last_index;
    atomic_bool has_state;
    atomic_bool started;                 /* libraft started it: Raft messages are posted */
    atomic_uint_fast64_t inbound_bytes[2];  /* posted, not yet handed to libraft: by lane
                                             * (raft_net_lane), so an image never has
                                             * this member's messages dropped */
    atomic_uint_fast64_t pending;        /* jobs posted to the loop, not yet run */
    atomic_uint_fast64_t dropped;        /* received, and refused or dropped */
    pthread_mutex_t mu;                  /* the seen notes and the probes waiting */
    pthread_cond_t answered;
    raft_seen seen[RAFT_PEERS_MAX];      /* by peer; ms also read without mu */
    struct {
        uint64_t nonce;                  /* 0: free */
        unsigned member;
        bool done;
        raft_member_probe answer;
    } probes[RAFT_IO_NET_PROBES];
    uint64_t next_nonce;
} raft_io_net;

/* Join the net as group (its id there, the same on every member; peers:
 * its members and where they are; lim: the member's frame limits), before
 * libraft runs: hellos are answered from now on. 0, or -1 with why (too
 * many peers, or the group is on this node already). */
int raft_io_net_init(raft_io_net *n, raft_net *net, raft_loop *loop, uint64_t group,
                     const raft_peer *peers, size_t npeers, const raft_frame_limits *lim,
                     const char **why);

/* Wrap libraft's I/O: n->io is the raft_io to give libraft (under the
 * guard). libraft's close of it leaves the net; n must stay where it is
 * until that close is answered. */
void raft_io_net_wrap(raft_io_net *n, struct raft_io *inner);

/* Free what init took, once libraft's close of n was answered or libraft
 * never took it (a member stopped while it decided: then it leaves the
 * net here; no delivery runs after it). Not while a probe waits. */
void raft_io_net_free(raft_io_net *n);

/* As raft_transport.h's: what this member's hellos and answers say (the
 * group's id, 0 while not known; its raft id; whether it runs with libraft
 * state), and its log's last index. Any thread. */
void raft_io_net_set_self(raft_io_net *n, uint64_t cluster, uint64_t raft_id, bool has_state);
void raft_io_net_set_last_index(raft_io_net *n, uint64_t index);

/* Say hello to peer and wait for its answer (RAFT_IO_NET_PROBE_MS at
 * most). 0 with *out filled, or -1 (out->answered false). Blocks: not on
 * the loop. A hello from peer meanwhile (it is up now, and asks too)
 * sends the probe again: the first went while peer did not host the
 * group yet and was dropped, and the answer comes at once, while the
 * others still answer from the state the group is made from, not a
 * second later, when they may have made it (raft_host.c decide). */
#define RAFT_IO_NET_PROBE_MS 1000
int raft_io_net_probe(raft_io_net *n, const raft_peer *peer, raft_member_probe *out);

/* The raft id member's last hello, answer or Raft message in this group
 * gave (hellos and answers only from a member that knows the group, and
 * once this one does), whether it said it has state, and when it came, if
 * within max_age_ms. */
bool raft_io_net_seen(raft_io_net *n, unsigned member, uint64_t max_age_ms, uint64_t *raft_id,
                      bool *has_state, uint64_t *at_ms);

/* A libraft transport that never connects and accepts nothing, for
 * raft_uv_init under a raft_io_net (whose sends never reach it). Its
 * close is answered on loop. */
void raft_io_net_null_transport(struct raft_uv_transport *t, raft_loop *loop);

#endif
