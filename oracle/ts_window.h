/*
 * ts_window.h — what an oracle leader proposes and how it answers
 * requests for timestamps: batched "advance by n" commands, and the window
 * it hands out from under its lease without a Raft round (docs/DESIGN.md
 * §7, §7.4).
 *
 * It runs on the loop thread of one member, on top of that member's
 * proposer (common/raft_proposer.h), which holds every proposal back until
 * the leader's first barrier of its term is applied and keeps the lease.
 * The window code owns nothing of the host: the product's loop
 * (oracle/raft_node.c, on common/raft_host.c) calls it after every rp_step
 * and from the proposer's applied callback; so does the fixture test
 * (tests/unit/test_oracle_raft_fsm.c), between fixture steps, on simulated
 * time.
 *
 * The rules it keeps:
 *  - one command in flight: the requests that arrive meanwhile make the
 *    next, bigger one;
 *  - every command asks for what its requests want plus TW_WINDOW more
 *    (less near ORACLE_FSM_MAX_TS); once applied in the term it was
 *    proposed in, its requests get the first part and the rest, up to the
 *    mark, is the window; the rest of the window before it is dropped (it
 *    lies below those answers, and a later request must get more);
 *  - requests are answered from the window, in order, only while the
 *    proposer's lease holds (rp_lease_left_ms) and only in the term the
 *    window was reserved in: a member that stopped leading, or leads again
 *    in a later term, drops it (another leader may have handed out above
 *    it meanwhile);
 *  - min_ts (--min-timestamp): a leader whose mark is below it first
 *    proposes one command that raises the mark to it, answering nobody;
 *  - a busy leader (it answered from its window within the lease) renews
 *    its lease and refills its window, with a command nobody waits on, once
 *    half of either is gone.
 */
#ifndef PC_TS_WINDOW_H
#define PC_TS_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include <raft.h>

#include "metrics.h"
#include "raft_fsm.h"
#include "raft_proposer.h"

/* The kind of a request for timestamps on the member's proposer
 * (rp_wait.kind): the window takes only these; the placement driver's
 * commands are another kind (raft_node.c). */
#define TW_KIND 0

/* Timestamps a command reserves beyond what waits for it. */
#define TW_WINDOW 10000

/* One request for timestamps: a proposal on the member's proposer. The
 * requester sets count (and base.done for rp_submit); once answered RP_OK,
 * first is its first timestamp, 0 when the timestamp space is used up. */
typedef struct {
    rp_wait base;             /* first: the proposer's part */
    unsigned count;
    uint64_t first;
} ts_wait;

typedef struct {
    const oracle_fsm_state *state; /* the member's replicated mark (not owned) */
    unsigned election_ms;          /* 0: 1000; the lease is tw_lease_ms of it */
    uint64_t min_ts;               /* a leader raises the mark to it first (0: none) */
    uint64_t (*now_ms)(void *arg); /* a monotonic clock, the proposer's */
    void *clock_arg;
    /* Metrics, each may be NULL: commands proposed, requests one command
     * answered, requests answered from the window. */
    metrics_series *m_commands, *m_batch, *m_window;
} tw_config;

/* What the window did so far (loop thread; tests and logs). */
typedef struct {
    uint64_t commands;        /* commands proposed (libraft took them) */
    uint64_t window_requests; /* requests answered from the window */
    uint64_t next, end;       /* the window left: next..end, empty when next > end */
    bool in_flight;           /* a command is in flight */
} tw_stats;

typedef struct ts_window ts_window;

/* The lease for an election timeout (0: 1000 ms): how long after an
 * entry's append its commit keeps other members from leading, less a
 * margin; the proposer's rp_config.lease_ms. */
unsigned tw_lease_ms(unsigned election_ms);

/* NULL when out of memory. */
ts_window *tw_new(const tw_config *cfg);
/* After libraft is closed (its callbacks may still call tw_applied). */
void tw_free(ts_window *w);

/* The loop's work after rp_step(p, r): answer what is queued on p, from
 * the window or in one command, raise the mark to min_ts, refill. */
void tw_serve(ts_window *w, raft_proposer *p, struct raft *r);

/* From p's rp_config.applied: the command in flight was applied (status
 * 0, result libraft's) or failed; hands list's requests their parts and
 * keeps the rest as the window. p answers them afterwards. */
void tw_applied(ts_window *w, raft_proposer *p, struct raft *r, rp_wait *list, int status,
                void *result);

void tw_get_stats(const ts_window *w, tw_stats *out);

#endif
