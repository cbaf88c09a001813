/*
 * raft_host.h — one member of a Raft group on Canonical's C Raft library
 * (libraft 0.15: its on-disk log and TCP transport over libuv), hosted on
 * a libuv loop (raft_loop.h: one of its own, or one it shares with other
 * groups of the process), with the raft_io guard of docs/DESIGN.md §7.1
 * between libraft and its I/O. The oracle
 * (oracle/raft_node.c) and the service (service/raft_group.c) are both
 * built on it; what they replicate is their state machine (cfg.fsm) and
 * what they propose is theirs (cfg.serve).
 *
 * Peers talk through common/raft_transport.c (mutual TLS when peer_tls is
 * given, and a check of every frame before libraft reads it), or through
 * the node's network that many groups share (cfg.net: raft_io_net.h).
 *
 * Threads: everything that touches libraft runs on the loop thread. The
 * owner's serve callback runs there every 50 ms (the loop's shared tick)
 * and whenever another thread calls raft_host_wake (a job posted to the
 * loop, one queued at a time: thread-safe, coalescing), and
 * once more when the host stops, before libraft is closed (libraft then
 * fails what is in flight). Never call raft_apply from inside a libraft
 * callback: wake the loop and propose from serve.
 */
#ifndef PC_RAFT_HOST_H
#define PC_RAFT_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>

#include "raft_loop.h"
#include "raft_peers.h"
#include "raft_proposer.h"

typedef struct raft_host raft_host;

/* The exit status of a member libraft shut down for good (its disk failed,
 * or a message left its log where it cannot go on): the supervisor starts
 * it again. The service's storage failures exit the same. */
#define RAFT_HOST_EXIT_UNAVAILABLE 70

typedef struct {
    const char *kind;                /* "oracle", "service": part of the group's id */
    unsigned id;                     /* this member: one of the peers */
    const char *dir;                 /* raft log and snapshots; created if missing */
    const raft_peer *peers;
    size_t npeers;
    struct raft_fsm *fsm;            /* the replicated state machine */
    struct raft_loop *loop;          /* the loop to run on (not owned; it outlives the
                                      * member); NULL: a loop of its own */
    struct raft_net *net;            /* the node's network (raft_net.h; not owned, outlives
                                      * the member, loop required): messages go through it
                                      * and the member has no listener of its own; its
                                      * hellos and probes too (raft_io_net.h), so it joins
                                      * and is replaced as on its own transport. Its members
                                      * are at their --raft-peers addresses, the nodes'.
                                      * NULL: its own transport (raft_transport.h) */
    uint64_t net_group;              /* with net: the group's id there, the same on every
                                      * member and one group's on a node (a region's id) */
    unsigned election_ms;            /* 0: 1000; else as raft_host_check_timeouts */
    unsigned heartbeat_ms;           /* 0: 100 */
    unsigned snapshot_threshold;     /* a snapshot every this many entries */
    unsigned snapshot_trailing;      /* entries kept behind a snapshot */
    bool stagger_snapshots;          /* member i's snapshots at indexes i/3 of a period
                                      * apart from the others' (raft_host.c stagger) */
    bool image_first;                /* the state machine holds what the log does not (a store
                                      * restored from a backup): snapshot at once, keeping no
                                      * entry behind it, so that a member that catches up
                                      * installs the image instead of replaying the log */
    uint64_t max_entry_bytes;        /* the largest entry a member proposes (0: 64 MiB) */
    size_t segment_bytes;            /* libraft's log segment size, rounded down to its block
                                      * (0: its default, 8 MiB); the member keeps three of
                                      * them fallocated (DESIGN §6.5) */
    struct tls_server *peer_tls;     /* peer credentials (not owned); NULL: plain TCP */
    int listen_fd;                   /* > 0: this member's raft address, bound already
                                      * (raft_transport_config.listen_fd); 0: bind it */
    struct metrics_registry *metrics;/* the transport's metrics; may be NULL */
    void (*serve)(void *arg);        /* on the loop thread (above), after the proposer's
                                      * step: rp_ready says whether to propose */
    void *arg;
    rp_config proposer;              /* the member's proposer (raft_host_proposer); its
                                      * who, id, leader_url, wake and loop_arg are the host's */
} raft_host_config;

/* The election timeout and heartbeat a member may be given
 * (--raft-election-timeout-ms, --raft-heartbeat-ms): the election timeout
 * at least RAFT_HOST_BEATS_PER_ELECTION heartbeats. libraft's timers run
 * on a tick of one heartbeat, and a follower that sees too few heartbeats
 * within its timeout starts elections whenever one is late (etcd asks the
 * same, 5). 0, or -1 with a reason in err. */
#define RAFT_HOST_BEATS_PER_ELECTION 5
int raft_host_check_timeouts(unsigned election_ms, unsigned heartbeat_ms, char *err,
                             size_t errlen);

/* Start the member (raft_identity.h: bootstrapping a new group, or joining
 * an existing one from an empty data dir, which may wait for the other
 * members to answer); *out is set before the loop starts, so serve and
 * libraft's callbacks may use it.
 * 0, or -1 with a reason in err (nothing left running). */
int raft_host_start(const raft_host_config *cfg, raft_host **out, char *err, size_t errlen);

/* Stop (from any thread but the loop's): serve runs once more, libraft is
 * closed, and once everything of the member is closed on its loop it is
 * freed (with its loop if it had its own). On a shared loop the other
 * groups run on meanwhile. */
void raft_host_stop(raft_host *h);

/* Run serve on the loop soon (any thread). */
void raft_host_wake(raft_host *h);

/* The raft instance (its functions: loop thread only). */
struct raft *raft_host_raft(raft_host *h);

/* The member's one proposer (raft_proposer.h): the host steps it on the
 * loop before every serve, stops it first when it stops, and its first
 * barrier of a term also gates membership changes (DESIGN §7.3). */
raft_proposer *raft_host_proposer(raft_host *h);
/* The member's view (any thread): the proposer's, as of the loop's last
 * step, with what the member is in its group (raft_host_membership). */
void raft_host_status(raft_host *h, rp_status *st);
/* Whether a member with this status is still catching up: more than
 * --raft-ready-lag (RAFT_HOST_READY_LAG by default) entries its leader
 * committed are not applied here yet (/v1/ready answers 503 then;
 * docs/DESIGN.md 7.3). A follower that keeps up lags by the entries in
 * flight, far fewer. Set once at start, for the process. */
#define RAFT_HOST_READY_LAG 1024
void raft_host_set_ready_lag(uint64_t entries);
/* Why a member with this status cannot serve yet (/v1/ready's 503 of
 * both programs), or NULL: not a voter yet (joining, or back without its
 * data and being caught up), lagging as above (the text, with the count,
 * goes to buf), or no leader known. */
const char *raft_host_not_ready(const rp_status *st, char *buf, size_t len);

/* Log one line when the term, the leader this member knows or its role
 * changed since the last call (loop thread; who: "oracle", "service"). */
void raft_host_log_changes(raft_host *h, const char *who);
/* Whether this member heard from server `id` (libraft id) within the last
 * election timeout; true for itself. A follower sends clients only to a
 * leader it heard from that lately: one silent longer is likely dead, and
 * an election is near (docs/DESIGN.md §9). Loop thread only. */
bool raft_host_heard_lately(raft_host *h, uint64_t id);

/* What this member is in its group (any thread): "waiting" (an empty data
 * dir, asking the others whether the group exists), "joining" (in no
 * configuration yet: it neither votes nor counts), "spare" or "standby"
 * (catching up), "voter" (raft_identity.h). */
const char *raft_host_membership(raft_host *h);

/* ---- membership, for the admin routes (docs/DESIGN.md 7.3) ---- */

typedef struct {
    unsigned member;                 /* --raft-id */
    uint64_t raft_id;                /* with its incarnation */
    char address[RAFT_PEER_ADDR_MAX];  /* its raft address */
    char url[RAFT_PEER_ADDR_MAX];      /* its HTTP URL ("" if not known) */
    const char *role;                /* "voter", "spare", "standby" */
    bool leader;                     /* leads, and was heard from lately
                                        (raft_host_heard_lately) */
    int64_t match_index;             /* the leader's view; -1 on a follower */
    bool reachable;                  /* the leader's view: answered lately */
} raft_host_member;

typedef struct {
    raft_host_member members[RAFT_PEERS_MAX];
    size_t n;
    bool leads;                      /* this member leads */
    uint64_t term, commit_index, last_index;
} raft_host_view;

/* The configuration and, on the leader, each member's progress, as of the
 * last tick (any thread). */
void raft_host_view_get(raft_host *h, raft_host_view *v);

typedef enum {
    RAFT_HOST_ADD,        /* a member in no configuration, as a spare (promoted once caught
                           * up): a --raft-peers one, or one at an address given */
    RAFT_HOST_REMOVE,     /* a member, unless the rest would be short of a quorum */
    RAFT_HOST_LEAD,       /* hand leadership to a voter (raft_transfer) */
} raft_host_op;

typedef enum {
    RAFT_HOST_DONE,
    RAFT_HOST_NOT_LEADER,  /* only the leader changes the group */
    RAFT_HOST_REFUSED,     /* err says why */
    RAFT_HOST_TIMEOUT,     /* no outcome within the wait (it may still happen) */
} raft_host_result;

/* Run op on member on the loop and wait up to wait_ms for libraft's
 * outcome (any thread but the loop's; one at a time: a second one waits
 * for the first). where: for RAFT_HOST_ADD, where the member is (its raft
 * address, and its URL) when --raft-peers does not say: the
 * configuration then carries both to every member (raft_peers.h); NULL
 * otherwise. err gets the reason for REFUSED and TIMEOUT. */
raft_host_result raft_host_change(raft_host *h, raft_host_op op, unsigned member,
                                  const raft_peer *where, unsigned wait_ms, char *err,
                                  size_t errlen);

/* The members as --raft-peers and --raft-urls give them. */
const raft_peer *raft_host_peers(const raft_host *h, size_t *n);

/* member's HTTP URL into out: the one its configuration address carries
 * (a member added on an address of its own), else --raft-urls'. Whether
 * one is known. Loop thread only. */
bool raft_host_member_url(raft_host *h, unsigned member, char *out, size_t len);

/* What the guard lowered so far (loop thread). */
uint64_t raft_host_commits_lowered(const raft_host *h);
uint64_t raft_host_replies_lowered(const raft_host *h);

#endif
