/*
 * raft_proposer.h — what a member proposes to its Raft group and who waits
 * for it: the one proposer of both programs (the oracle's timestamp
 * commands, the service's write batches), on libraft 0.15.
 *
 * Request threads queue waits (rp_wait_for blocks; rp_submit hands the
 * answer to a callback). The loop thread — libraft's, in the programs
 * (common/raft_host.c calls rp_step before its owner's serve); the test's,
 * between fixture steps, in tests/unit/test_raft_proposer.c — calls
 * rp_step, which refreshes the status, fails the queue on a follower or
 * when stopping, appends a new leader's first barrier and serves queued
 * reads with one barrier; once it says the member is ready, the owner
 * takes the queued proposals (rp_take), makes entries of them as its
 * state machine wants (joined batches, one "advance by n" command) and
 * proposes each with rp_apply. libraft's callback answers every wait of
 * the entry.
 *
 * The rules it keeps (docs/DESIGN.md §7.1):
 *  - a new leader's first entry is a barrier of its term, and nothing is
 *    proposed before that barrier is applied: every entry an earlier
 *    leader committed is then applied here, so what the owner computes
 *    from its state machine is current. The same barrier gates membership
 *    changes (§7.3, Ongaro's fix to the single-server change bug);
 *  - a read may go on once a barrier appended after it was queued is
 *    applied (§9: linearizable reads without a log entry of their own);
 *    or, with lease_ms, at once while the leader's lease holds and it has
 *    applied everything it knows committed (the lease of DESIGN §7.4: an
 *    entry this leader appended at t and committed keeps every other
 *    member from leading before t + the election timeout);
 *  - nothing is proposed from inside a libraft callback (it crashed there
 *    while stepping down): callbacks wake the loop;
 *  - a proposal the owner computed from its state machine in one term is
 *    proposed in that term or not at all (rp_wait.term): a member that
 *    lost the lead and won it back may have missed what another leader
 *    committed in between, so what it computed before is stale;
 *  - a wait has a deadline only while queued; once libraft took it, its
 *    answer is libraft's (a write may be committed by the next leader, so
 *    "unavailable" is the honest answer to a lost one, never "not done").
 *
 * A wait's life, each step under the proposer's mutex:
 *
 *   made ---- enqueued (a ready leader, or a leader whose barrier is in
 *             flight when queue_unready) ---------------------------> QUEUED
 *   made ---- refused (stopping, not leader, not ready) --------------> answered
 *   QUEUED -- rp_take / rp_step's read barrier (taken) ---------------> TAKEN
 *   QUEUED -- rp_wait_for's deadline: unlinked, RP_UNAVAILABLE -------> answered
 *   QUEUED -- failed by rp_step (follower, stopping) -----------------> DONE
 *   TAKEN --- libraft's apply or barrier callback, or rp_finish -------> DONE
 *
 * DONE wakes the waiting thread, which owns the wait (on its stack); a
 * submitted wait is handed to its done callback, which owns it from then.
 */
#ifndef PC_RAFT_PROPOSER_H
#define PC_RAFT_PROPOSER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>

#include "metrics.h"
#include "raft_peers.h"

typedef enum {
    RP_OK = 0,
    RP_NOT_LEADER,    /* not proposed: another member leads (or none is known) */
    RP_UNAVAILABLE,   /* stopping, a leader not ready yet, or leadership or quorum lost
                         while it waited: a proposal may or may not be committed */
    RP_SKIPPED        /* committed, and the state machine wrote nothing for it, on
                         every member alike (rp_config.applied said so): it never
                         will, and proposing it again is safe */
} rp_rc;

/* One request's wait. The owner embeds it first in a struct of its own
 * (the batch, the count of timestamps) and sets read, and done for
 * rp_submit; the rest is the proposer's. */
/* rp_wait.term of a proposal computed while this member was not ready:
 * refused whatever happens next. */
#define RP_TERM_NONE UINT64_MAX

typedef struct rp_wait {
    bool read;                     /* a read barrier, else a proposal */
    unsigned kind;                 /* the owner's: which of its kinds of proposal
                                      (rp_take_kind); 0 unless it has several */
    uint64_t term;                 /* a proposal computed while this member was ready in
                                      this term (rp_status.ready_term): refused, or failed
                                      with RP_NOT_LEADER, once the term is not current;
                                      0: computed on the loop when proposed (the oracle) */
    void (*done)(struct rp_wait *w, rp_rc rc); /* rp_submit: the answer, on the loop thread,
                                      under the proposer's mutex (quick; no rp_ call) */
    rp_rc rc;
    bool answered;
    bool taken;                    /* libraft (or the owner) answers it now */
    pthread_cond_t *cv;            /* rp_wait_for's */
    uint64_t queued_ns, taken_ns;  /* monotonic: the stage metrics */
    struct rp_wait *next;
} rp_wait;

typedef struct {
    const char *role;              /* "leader", "follower", "candidate", "unavailable" */
    const char *membership;        /* raft_host_status fills it in (raft_host_membership) */
    unsigned leader_id;            /* --raft-id of the leader (0: unknown) */
    char leader_http[RAFT_PEER_ADDR_MAX]; /* "": unknown, or not heard from lately */
    uint64_t term, commit_index, applied_index;
    uint64_t ready_term;           /* leads, its first barrier applied in this term: it may
                                      propose (0: not) */
    uint64_t lag;                  /* entries committed that it has not applied: on the
                                      leader its own commit index minus applied, on a
                                      follower the highest commit index a leader sent it
                                      (raft_host_status fills it in) */
} rp_status;

typedef struct {
    const char *who;               /* "oracle", "service": logs */
    unsigned id;                   /* this member's --raft-id */
    /* Proposals that arrive at a leader whose first barrier is still in
     * flight wait for it (true: the oracle, whose answers need nothing but
     * the barrier) or are refused with RP_UNAVAILABLE (false: the service,
     * whose new leader first takes over its leader-only state). */
    bool queue_unready;
    /* The owner's: an entry's outcome, on the loop thread, before its
     * waits are answered (the kind it was proposed with, libraft's status
     * and the state machine's result); may be NULL. Returns what the
     * waits of an entry libraft applied (status 0) are answered: RP_OK,
     * or RP_SKIPPED when the state machine wrote nothing for it. */
    rp_rc (*applied)(void *arg, unsigned kind, rp_wait *list, int status, void *result);
    void *applied_arg;
    /* The loop's (common/raft_host.c fills them in): the leader's HTTP URL
     * into out if it was heard from lately (NULL: "" always); wake the
     * loop from any thread (NULL: the caller steps anyway). */
    bool (*leader_url)(void *arg, uint64_t raft_id, char *out, size_t len);
    void (*wake)(void *arg);
    uint64_t (*now_ms)(void *arg);   /* a monotonic clock (NULL: raft's io->time) */
    void *loop_arg;
    /* Reads under a lease (above): how long after an entry's append its
     * commit keeps the lead here (4/5 of the election timeout, as the
     * oracle's window); 0: every read waits for a barrier. */
    unsigned lease_ms;
    /* Metrics, each may be NULL: the stages (queued until taken; taken
     * until a proposal's or a read's answer), proposals, entries, failed
     * proposals, proposals in flight and the most at once. */
    metrics_series *m_queue, *m_commit, *m_read;
    metrics_series *m_proposals, *m_entries, *m_failures, *m_in_flight, *m_in_flight_max;
    metrics_series *m_lease_reads;
} rp_config;

typedef struct raft_proposer raft_proposer;

/* NULL when out of memory. */
raft_proposer *rp_new(const rp_config *cfg);
/* After libraft is closed (every callback ran). */
void rp_free(raft_proposer *p);
/* From now on every wait is refused or failed (the next rp_step fails the
 * queue; libraft fails what it holds as it closes). Any thread; it does
 * not wake the loop (the host does, if its loop runs). */
void rp_stop(raft_proposer *p);

/* ---- request threads ---- */

/* Queue w (a proposal the owner will take, or a read) and wait: while it
 * is queued at most wait_ms (then RP_UNAVAILABLE); once taken, until it is
 * answered. */
rp_rc rp_wait_for(raft_proposer *p, rp_wait *w, unsigned wait_ms);
/* Queue w without waiting: RP_OK, and w->done(w, rc) runs once when it is
 * answered; else the refusal at once (done never runs). No deadline. */
rp_rc rp_submit(raft_proposer *p, rp_wait *w);
/* Whether a read may go on at once on the calling thread, without a hop
 * to the loop: the loop found, at its last step, that this leader's
 * lease holds and that it had applied everything it knew committed, and
 * the lease has not run out since (cfg.now_ms; never without it). Counted
 * as a lease read. false: wait for a barrier (rp_wait_for, read). */
bool rp_read_now(raft_proposer *p);
/* How many proposals and barriers have failed, counted on the loop before
 * their waiters hear of it. A failed proposal's commits in flight are let
 * go when its writers hear, though its entry may still be committed by
 * the next leader: a read that saw this change between its fence and the
 * end of its read may have read past such a commit, and must fence again
 * (which a member that lost the lead refuses). */
uint64_t rp_failures(raft_proposer *p);
/* The member's view as of the last rp_step. */
void rp_get_status(raft_proposer *p, rp_status *st);
/* Its ready_term alone (one lock: every write asks it). */
uint64_t rp_ready_term(raft_proposer *p);

/* ---- the loop thread ---- */

/* See the top. Whether this member may propose now: it leads in r's
 * current term and that term's first barrier is applied (the queued
 * proposals of an earlier term are then failed). */
bool rp_step(raft_proposer *p, struct raft *r);
/* Whether this member may propose: it leads in r's current term, that
 * term's first barrier is applied, and rp_step did not see it stopping. */
bool rp_ready(const raft_proposer *p, struct raft *r);
/* Take the queued proposals from the head, in order, while fits(arg, w)
 * says so (NULL: all); reads stay queued. Called under the mutex. */
rp_wait *rp_take(raft_proposer *p, bool (*fits)(void *arg, const rp_wait *w), void *arg);
/* The same over the proposals of one kind: the others are passed over
 * (they stay queued, in order, for their own taker). */
rp_wait *rp_take_kind(raft_proposer *p, unsigned kind, bool (*fits)(void *arg, const rp_wait *w),
                      void *arg);
/* Propose buf (taken: libraft's, or freed) as one entry answering list
 * (taken waits, linked by next; NULL: an entry nobody waits for). 0, or
 * libraft's error: the waits are then answered at once. */
int rp_apply(raft_proposer *p, struct raft *r, rp_wait *list, struct raft_buffer *buf);
/* The same, for an entry of another kind than 0: kind is handed back to
 * rp_config.applied with the entry's outcome. */
int rp_apply_kind(raft_proposer *p, struct raft *r, unsigned kind, rp_wait *list,
                  struct raft_buffer *buf);
/* Answer taken waits the owner served itself, or could not propose. */
void rp_finish(raft_proposer *p, rp_wait *list, rp_rc rc);
/* Entries proposed with rp_apply that libraft has not answered yet. */
unsigned rp_in_flight(const raft_proposer *p);
/* No lease in r's current term from now on (a leadership transfer is
 * about to start: its target's election does not wait for a timeout). */
void rp_end_lease(raft_proposer *p, struct raft *r);
/* Reads answered under the lease, without a barrier. */
uint64_t rp_lease_reads(const raft_proposer *p);
/* The lease this leader holds now (the oracle hands out from its window
 * under it): the ms it has left; 0 when it holds none (not renewed
 * lately, not ready, a transfer running); -1 when none can be had in this
 * term (no lease_ms, or a transfer began in it). */
int64_t rp_lease_left_ms(raft_proposer *p, struct raft *r);

#endif
