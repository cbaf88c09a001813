/*
 * raft_group.h — percolator-service as one member of a Raft group
 * (libraft 0.15: its on-disk log and TCP transport over libuv; docs/DESIGN.md
 * §9). The replicated state is the engine's store: every entry is a write
 * batch (engine_replica.h, DESIGN §4.10), and every member applies the committed
 * entries in log order with pc_apply_batch at the entry's Raft index, on an
 * engine session of its own. A failed apply stops the process (exit 70):
 * the member would otherwise drift from the others.
 *
 * Threads: libraft runs on one libuv loop on a thread of its own
 * (common/raft_host.h); request threads queue what they want (a proposal,
 * a read barrier) on the member's proposer (common/raft_proposer.h: its
 * rules and a wait's life), which wakes the loop; the loop proposes, never
 * from inside a libraft callback. A new leader's first entry is a barrier,
 * and it proposes nothing before that barrier is applied (§7.1).
 *
 * Log compaction: every snapshot_entries entries libraft asks for a
 * snapshot, an image of the store (engine/image.c), and drops the log
 * before it; a member that lags behind the leader's log, or lost its data,
 * installs the leader's image and applies the entries after it.
 *
 * A region's group (cfg.region, DESIGN §6.5 step 3): one of many groups a
 * node hosts, each a region of the keyspace, all applying into the node's
 * one store, over the node's network (cfg.net) on shared loops. Its
 * entries apply with pc_apply_region_batch (the region's own applied
 * index), an entry that writes a key outside the region's range is
 * skipped on every member alike (no leader of ours proposes one), and its
 * snapshots are region images: its range of the store, whose install
 * replaces that range only. Its range is the region's row in the store
 * once there is one (engine_replica.h: set by the region's own log, a
 * split's entry among them, and carried by its images), else the
 * configuration's: read at start, after an entry that sets a row and
 * after an image, so a split narrows it on every member at the split's
 * index and a member that missed the split takes the image's range.
 */
#ifndef PC_RAFT_GROUP_H
#define PC_RAFT_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "metrics.h"
#include "raft_peers.h"
#include "raft_proposer.h"
#include "replicator.h"

typedef struct {
    unsigned id;                     /* this member: one of the peers */
    const char *dir;                 /* the raft log; created if missing */
    raft_peer peers[RAFT_PEERS_MAX];
    size_t npeers;
    pc_engine *engine;               /* what committed entries are applied to */
    unsigned snapshot_entries;       /* a snapshot every this many entries (0: 8192) */
    bool restored;                   /* the store came from a backup: the group's first
                                      * image is taken at once (raft_host_config.image_first) */
    unsigned election_ms;            /* 0: 1000; else as raft_host_check_timeouts */
    unsigned heartbeat_ms;           /* 0: 100 */
    struct tls_server *peer_tls;     /* peer credentials (not owned); NULL: plain TCP */
    int listen_fd;                   /* > 0: the raft port, bound already (raft_host.h) */
    /* Called when an entry cannot be applied; must not return. */
    void (*apply_failed)(const char *what, pc_rc rc);
    apply_listener listen;           /* who hears of applies (replicator.h); may be all NULL */
    uint64_t region;                 /* 0: the node's one group, every key; else the id of the
                                      * region this group is (above), and its id on the net */
    pc_slice start, end;             /* with region: its keys, [start, end) (end.data NULL: to
                                      * the end); copied */
    struct raft_loop *loop;          /* raft_host_config's: a loop shared with other groups,
                                      * or NULL (one of its own) */
    struct raft_net *net;            /* raft_host_config's: the node's network, or NULL (a
                                      * transport of its own on listen_fd) */
} raft_group_config;

typedef struct raft_group raft_group;

/* Start the member (bootstrapping the group on its first start). 0, or -1
 * with a reason in err. Its metrics go in m (may be NULL): a region's
 * group's series are labelled region="<id>" (percolator_raft_term{region=
 * "3"}), the families shared by the node's regions. */
int raft_group_start(const raft_group_config *cfg, metrics_registry *m, raft_group **out,
                     char *err, size_t errlen);
/* Stop: what waits fails, libraft is closed, everything is freed. */
void raft_group_stop(raft_group *g);

/* The member as its region's replicator (replicator.h): a batch is an
 * entry, proposed in the term it was computed in or not at all; its
 * proposal waits while queued (wait_ms), then libraft answers it (it
 * fails it when leadership is lost). Batches queued together are joined
 * into one entry. A read barrier: one barrier appended after the call
 * began is applied (this member was leader then, and every entry
 * committed before the call is applied here), or the leader's lease
 * still holds (DESIGN §9 item 3). */
replicator *raft_group_replicator(raft_group *g);

/* The member's view (common/raft_proposer.h: role, leader, term, indexes,
 * ready_term; common/raft_host.h: membership). */
typedef rp_status raft_group_status;

/* The member's view, refreshed by the loop (at most ~50 ms old). */
void raft_group_get_status(raft_group *g, raft_group_status *st);

/* The member's libraft host (common/raft_host.h: membership, admin). */
struct raft_host *raft_group_host(raft_group *g);
/* On the leader: whether every member of the configuration is a voter
 * that answered lately and holds the log up to max_lag entries behind
 * its end (at most half the entries kept behind an image): 1; 0 with
 * why; -1 not the leader (a split's precondition with --region-logs). */
int raft_group_all_caught_up(raft_group *g, uint64_t max_lag, char *why, size_t whylen);

#endif
