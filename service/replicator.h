/*
 * replicator.h — how a region's writes become durable: the one write path
 * (docs/DESIGN.md §6).
 *
 * Every engine action that may write runs in propose mode: it reads the
 * region's applied store and yields a write batch (engine_replica.h),
 * its keys latched. The region's replicator makes the batch durable and
 * applies it to the store; only then are the latches let go and the
 * writer answered. TiKV's storage has the same shape
 * (Engine::async_write: a write batch in, a callback when it is
 * durable). Two replicators keep one contract:
 *
 *   local (replicator_local.c)  a log of one member: batches queued
 *                               together are applied in one WiredTiger
 *                               transaction and made durable by one log
 *                               flush (group commit). A single node is a
 *                               group of one.
 *   raft  (raft_group.c)        a Raft group's log: a batch is an entry,
 *                               durable on a quorum, applied by every
 *                               member in log order.
 *
 * A batch is proposed in the term it was computed in or not at all
 * (raft_proposer.h; the local replicator's one term never ends), so a
 * member that lost the lead meanwhile refuses it instead of applying a
 * batch computed on a state that may miss another leader's commits.
 */
#ifndef PC_REPLICATOR_H
#define PC_REPLICATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "metrics.h"
#include "raft_proposer.h"

typedef struct replicator replicator;

/* Runs once per submitted batch with how it ended: RP_OK once it is
 * durable and applied here; RP_SKIPPED: committed, and written nowhere
 * (its keys are no longer its region's: safe to send again); else it
 * failed (in a Raft group it may still commit: a new leader applies every
 * earlier entry before it serves). On
 * the replicator's thread, maybe under its lock: quick, and no call back
 * into the replicator. */
typedef void (*replicator_done)(void *arg, rp_rc rc);

typedef struct {
    /* The term this replica may propose in now (0: it may not: a follower,
     * or a leader whose term's first barrier is not applied yet). */
    uint64_t (*ready_term)(replicator *r);
    /* Make a batch durable and apply it; wait until it is applied here:
     * RP_OK then (RP_SKIPPED: committed and written nowhere, as for
     * replicator_done). The batch is the caller's (read until the call returns).
     * wait_ms bounds the wait while it is still queued (a Raft group; once
     * proposed, libraft answers it). */
    rp_rc (*propose)(replicator *r, const void *batch, size_t len, uint64_t term,
                     unsigned wait_ms);
    /* The same without waiting (the batch is copied): RP_OK, and done(arg,
     * rc) runs once; else the refusal at once, and done never runs.
     * Batches are made durable in submit order. */
    rp_rc (*submit)(replicator *r, const void *batch, size_t len, uint64_t term,
                    replicator_done done, void *arg);
    /* A linearizable read may go on (RP_OK): no other replica leads (this
     * one led at its last step, under its lease, and no proposal of it
     * has failed since), and everything acknowledged to a writer is
     * applied here (a writer is answered once its batch is applied here;
     * what is committed and not yet applied is in flight for the engine's
     * reads). */
    rp_rc (*read_barrier)(replicator *r, unsigned wait_ms);
    /* The same without waiting: true when a read may go on at once (a
     * group's leader under its lease: raft_proposer.h rp_read_now; a
     * single node always); false: ask read_barrier, which may wait. */
    bool (*read_now)(replicator *r);
    /* A count that only grows, by one whenever a proposal failed whose
     * entry may yet be committed (raft_proposer.h rp_failures); a read
     * fenced before a change must fence again (svc_read_epoch sums these).
     * A log of one never changes it (a failed flush stops the process). */
    uint64_t (*failures)(replicator *r);
    /* Where this replica stands (role, leader, term, indexes). */
    void (*status)(replicator *r, rp_status *st);
} replicator_ops;

struct replicator {
    const replicator_ops *ops;
};

/* Who hears of what a replicator applies (the change feed, watch.h), on
 * its applying thread: begin and end around each apply, batch for each
 * batch applied between them, and lost when an image replaced the store
 * (its changes are not told); rows when a region's group applied an
 * entry or an image that set region rows (a split: the regions changed).
 * Quick: no waiting. Any field may be NULL. */
typedef struct {
    void (*begin)(void *arg);
    void (*batch)(void *arg, const void *batch, size_t len);
    void (*end)(void *arg);
    void (*lost)(void *arg);
    void (*rows)(void *arg);
    void *arg;
} apply_listener;

/* ---- the local replicator (replicator_local.c) ---- */

/* The term a local replicator is ready in, always. */
#define REPLICATOR_LOCAL_TERM 1

/* Start the local replicator of engine e: a thread of its own applies
 * what is submitted, in order, each group of queued batches as the next
 * index of the store's applied index (pc_apply_batch), then flushes the
 * log (pc_sync: fsync or write, as the engine was opened). A failed apply
 * or flush calls failed (which must not return: the store would drift
 * from what its writers were told). m (may be NULL): its metrics. NULL
 * when it cannot start (logged). listen (may be NULL) hears of applies. */
replicator *replicator_local_start(pc_engine *e, void (*failed)(const char *what, pc_rc rc),
                                   metrics_registry *m, const apply_listener *listen);
/* Apply what is queued, then stop and free. Call after every writer has
 * stopped. NULL: nothing. */
void replicator_local_stop(replicator *r);

#endif
