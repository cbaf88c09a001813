/*
 * write_batch.h — group commit of blind autocommit writes.
 *
 * A blind write (PUT or DELETE of keys with no condition) needs one
 * timestamp, a batch made durable by the replicator (replicator.h: the
 * log flushed on a single node, a quorum in a Raft group) and applied
 * before its answer. Done by each request's own thread, every write costs
 * an oracle round trip, a durable wait and several thread wake-ups. Here
 * one committer thread takes every write queued since its last round and
 * runs them together: one oracle request for all their timestamps, one
 * batch for the round (a conflict fails only its own write), one durable
 * wait for the whole round, then every answer. The more writers wait, the
 * bigger the round: the cost per write falls as load rises, the way etcd
 * batches its raft log and TiKV its raftstore.
 *
 * Jobs come from the event threads (routes_kv.c); each job's `done` runs
 * on one of the batcher's two threads once its write is durable (the
 * syncer) or has failed (the committer, at once: nothing was written).
 *
 * One committer is a batching point, not a lock: transactions of sessions
 * and /v1/txn run on the handler workers beside it, and the committer's
 * rounds grow with the load, so its throughput does too (measured in
 * bench/RESULTS.md); a write that must wait for a key does so on a worker.
 */
#ifndef PC_WRITE_BATCH_H
#define PC_WRITE_BATCH_H

#include "engine.h"
#include "service.h"

#define WB_MAX_ROUND 256 /* writes per round; more wait for the next one */

/*
 * A job's life (the caller fills w and done, then write_batch_submit):
 *
 *   submitted --------------------------------------------> QUEUED
 *   QUEUED ---- the committer takes it into a round -------> IN ROUND
 *   IN ROUND -- a key held by an earlier write: back at
 *               the queue's front, rounds++ (a few times) --> QUEUED
 *   IN ROUND -- failed, nothing written (PC_LOCKED after
 *               too many put-offs, a conflict, no
 *               timestamp) ---------------------------------> ANSWERED (committer)
 *   IN ROUND -- its commit in the round's batch, submitted
 *               to the replicator ---------------------------> DURABLE WAIT
 *   DURABLE WAIT -- the replicator's answer for the round's
 *               batch (applied, or failed: w.rc
 *               PC_NOT_LEADER or PC_UNAVAILABLE) ------------> ANSWERED (syncer)
 *
 * ANSWERED is done(job), on the committer or syncer thread: from then on
 * the job is done's (routes_kv.c frees it). write_batch_stop answers every
 * job still queued before it returns: no job is left without its done().
 */
typedef struct wb_job wb_job;
struct wb_job {
    pc_blind_write w;          /* the caller fills w.m and w.n; results come back in w */
    void (*done)(wb_job *job); /* on a batcher thread; owns the job from then on */
    unsigned rounds;           /* rounds it was put off (its key was busy) */
    wb_job *next;
};

typedef struct write_batch write_batch;

/* Start the committer and syncer threads, each with its storage session.
 * NULL when they cannot start. */
write_batch *write_batch_start(svc *s);
/* Queue a job; its done() runs later on a batcher thread. false when
 * the committer is stopping (the job was not taken). */
bool write_batch_submit(write_batch *b, wb_job *job);
/* Finish every queued job, then stop the thread and free. NULL is fine. */
void write_batch_stop(write_batch *b);

#endif
