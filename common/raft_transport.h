/*
 * raft_transport.h — the connections between the members of a Raft group:
 * libraft 0.15's transport interface (struct raft_uv_transport, raft/uv.h)
 * implemented so that libraft only ever reads bytes that came from an
 * authenticated peer and passed the frame check (docs/DESIGN.md §7.2).
 *
 * libraft's own TCP transport hands the socket to libraft right after an
 * unauthenticated handshake. This one keeps the socket: each connection
 * has a thread of ours that runs mutual TLS on it (GnuTLS, the peer
 * credentials of --peer-cert-file, --peer-key-file and
 * --peer-trusted-ca-file), reads and checks the handshake and every
 * message header (raft_frame.h), and passes the bytes on through a local
 * socket pair, whose other end is the stream libraft gets. Anything that
 * fails closes the connection before libraft has read a byte of it.
 *
 *   peer ──TLS/TCP──> [conn thread: TLS, identity, frame check] ──pair──> libraft
 *
 * Identity: a member's certificate chains to the trusted CA and names the
 * member, by either of two subjectAltNames: an IP address, the host of its
 * --raft-peers address (fixed addresses), or the DNS name
 * "raft-member-<id>" (containers, whose addresses change; give each group
 * its own CA then, or a member of one group could stand for the member of
 * that id in another). Accepting, a --raft-peers member must claim its
 * address there; a member added since on another address (the
 * configuration in the log carries it, docs/DESIGN.md 7.3) an IPv4
 * address no --raft-peers member has (on loopback when the group runs
 * plain TCP because every member is); the certificate must name the
 * member at the claimed address. Connecting, the server's certificate
 * must name the member dialled, and a --raft-peers member is dialled
 * only at its address there.
 *
 * Hello: before libraft's handshake both sides send a 32-byte hello of
 * ours (the group's id, the sender's raft id, whether it has state, its
 * log's last index). A probe is a connection that only swaps hellos
 * (raft_transport_probe: how a member with an empty data dir finds out
 * whether its group exists, raft_identity.h). On a raft connection the
 * dialler checks that the member it reached is the raft id libraft asked
 * for in this group, and the acceptor that the hello's raft id is the
 * handshake's; a member that answers under another raft id is
 * remembered (raft_transport_seen) and not connected.
 *
 * Without credentials the connections are plain TCP (the frame check
 * still runs); the programs allow that only on loopback addresses unless
 * --peer-insecure is given (raft_transport_plain_allowed).
 *
 * Connections in libraft 0.15 carry one direction each: a member sends on
 * the connections it opened and reads those it accepted. A later
 * multiplexing of many groups over one connection per pair of nodes
 * belongs in the conn thread too: it would read a group id before each
 * frame and pass the frame to that group's pair.
 */
#ifndef PC_RAFT_TRANSPORT_H
#define PC_RAFT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>

#include "metrics.h"
#include "raft_frame.h"
#include "raft_identity.h"
#include "raft_peers.h"
#include "tls.h"

/* Connections at once, each a thread of ours: a member has one to and one
 * from each other member, and a few being replaced. */
#define RAFT_TRANSPORT_MAX_CONNS 64
/* Connections still in their handshakes, in all and from one address: a
 * stranger cannot hold more of them than this. */
#define RAFT_TRANSPORT_MAX_HANDSHAKES 16
#define RAFT_TRANSPORT_MAX_HANDSHAKES_PER_ADDR 4
/* Members whose last hello is remembered (raft_transport_seen). */
#define RAFT_TRANSPORT_SEEN_MAX 16
/* A TLS and libraft handshake must be done within this (ms). */
#define RAFT_TRANSPORT_HANDSHAKE_MS 5000
/* A peer that takes no byte for this long is cut off (ms). */
#define RAFT_TRANSPORT_STALL_MS 30000

typedef struct {
    const char *address;        /* this member's (--raft-peers); listened on from init */
    int listen_fd;              /* > 0: a socket raft_transport_listen made for address,
                                   listened on (a copy: the caller closes its own);
                                   0: init binds address itself */
    const raft_peer *peers;     /* --raft-peers: where those members are (others may join) */
    size_t npeers;
    tls_server *tls;            /* peer credentials (not owned); NULL: plain TCP */
    raft_frame_limits limits;   /* 0 fields: raft_frame defaults */
    metrics_registry *metrics;  /* may be NULL */
} raft_transport_config;

/* Bind and listen on a member's raft address (IPv4 "host:port") now, before
 * the program opens its data (listen_socket.h): *fd (> 2, the caller's)
 * goes to raft_transport_config.listen_fd. 0, or -1 with a reason that
 * names the address. */
int raft_transport_listen(const char *address, int *fd, char *err, size_t errlen);

/* Set t up (on the loop thread of loop). 0, or -1 with a reason. */
int raft_transport_init(struct raft_uv_transport *t, struct uv_loop_s *loop,
                        const raft_transport_config *cfg, char *err, size_t errlen);

/* Free t's memory, after libraft's close of the transport called back
 * (or when libraft never started: then its threads are stopped here). */
void raft_transport_free(struct raft_uv_transport *t);

/* What this member's hello says (raft_identity.h): the group's id (0: not
 * known yet), its raft id, whether it runs with libraft state; and its
 * log's last index (UINT64_MAX until set). Any thread. */
void raft_transport_set_self(struct raft_uv_transport *t, uint64_t cluster, uint64_t raft_id,
                             bool has_state);
void raft_transport_set_last_index(struct raft_uv_transport *t, uint64_t index);

/* Ask peer who it is (a probe: TLS, hellos, close; at most about a
 * second each for the connection and the answer). 0 with *out filled,
 * or -1 (no answer: out->answered false). Blocks: not on a loop that
 * libraft runs. */
int raft_transport_probe(struct raft_uv_transport *t, const raft_peer *peer,
                         raft_member_probe *out);

/* The raft id member's last hello in this group gave, whether it said it
 * has state, and when it came (time_mono_ms), if within max_age_ms: how
 * the leader learns that a member came back as a new incarnation. */
bool raft_transport_seen(struct raft_uv_transport *t, unsigned member, uint64_t max_age_ms,
                         uint64_t *raft_id, bool *has_state, uint64_t *at_ms);

/* Whether a certificate (a gnutls_x509_crt_t) names member id at host
 * (an IPv4 literal) as above. */
bool raft_transport_cert_names(void *x509_crt, uint64_t id, const char *host);

/* Whether every peer address is a loopback one (127.0.0.0/8): the only
 * group that may run without peer TLS unless --peer-insecure. */
bool raft_transport_plain_allowed(const raft_peer *peers, size_t npeers);

#endif
