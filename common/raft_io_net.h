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
 * Threads: the raft_io methods on the loop thread, deliveries on the
 * net's readers.
 */
#ifndef PC_RAFT_IO_NET_H
#define PC_RAFT_IO_NET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>

#include "raft_frame.h"
#include "raft_loop.h"
#include "raft_net.h"
#include "raft_peers.h"

typedef struct raft_io_net {
    struct raft_io io;              /* what the guard wraps */
    struct raft_io *inner;          /* libraft's libuv I/O */
    raft_net *net;
    raft_loop *loop;
    uint64_t group;
    raft_id self;                   /* this member's raft id (init) */
    raft_frame_limits lim;
    raft_peer peers[RAFT_PEERS_MAX];
    size_t npeers;
    uint64_t max_inbound_bytes;
    raft_io_tick_cb tick;           /* the guard's, called with &io */
    raft_io_recv_cb recv;
    raft_io_close_cb closed;
    bool joined, closing, inner_closed;
    atomic_uint_fast64_t inbound_bytes[2];  /* posted, not yet handed to libraft: by lane
                                             * (raft_net_lane), so an image never has
                                             * this member's messages dropped */
    atomic_uint_fast64_t pending;        /* jobs posted to the loop, not yet run */
    atomic_uint_fast64_t dropped;        /* received, and refused or dropped */
} raft_io_net;

/* Wrap inner. group: the group's id on the net (both ends agree on it);
 * peers: the group's members and where they are. 0, or -1 (too many
 * peers). n must stay where it is until libraft closed it. */
int raft_io_net_init(raft_io_net *n, struct raft_io *inner, raft_net *net, raft_loop *loop,
                     uint64_t group, const raft_peer *peers, size_t npeers,
                     const raft_frame_limits *lim);

/* A libraft transport that never connects and accepts nothing, for
 * raft_uv_init under a raft_io_net (whose sends never reach it). Its
 * close is answered on loop. */
void raft_io_net_null_transport(struct raft_uv_transport *t, raft_loop *loop);

#endif
