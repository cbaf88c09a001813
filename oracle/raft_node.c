/*
 * raft_node.c — see raft_node.h. Everything that touches libraft runs on
 * the loop thread; request threads queue their wishes on the member's
 * proposer (common/raft_proposer.h), which wakes the loop.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>

#include "log.h"
#include "raft_fsm.h"
#include "raft_host.h"
#include "raft_node.h"
#include "timeutil.h"

/* One HTTP request's wish for timestamps: a proposal on the member's
 * proposer, answered with its part of a command's range. */
typedef struct {
    rp_wait base;             /* first: the proposer's part */
    unsigned count;
    uint64_t first;           /* 0: none (the timestamp space is used up) */
} ts_wait;

/* The one command in flight (loop thread). */
typedef struct {
    bool inflight;
    uint64_t wanted;          /* what its waits take; the rest of the command is a window */
    raft_term term;
} command;

/* Timestamps a command reserves beyond what waits for it: the window the
 * leader hands out from without a Raft round while its lease holds
 * (docs/DESIGN.md §7.4). Refilled when half of it is gone. */
#define WINDOW 10000

struct raft_node {
    raft_node_config cfg;
    raft_host *host;          /* libraft on its loop thread (common/raft_host.h) */
    struct raft_fsm fsm;
    oracle_fsm_state state;

    command cmd;              /* loop thread only */
    _Atomic uint64_t hwm_seen;/* the mark, for raft_node_hwm (any thread) */

    /* The window (docs/DESIGN.md §7.4; loop thread only): [win_next,
     * win_end] was reserved by a command this leader committed in
     * window_term and is not handed out yet (empty when win_next >
     * win_end). It is handed out only under the proposer's lease, which
     * every committed entry of this leader renews (rp_lease_left_ms). */
    uint64_t win_next, win_end, last_window_ms;
    raft_term window_term;

    metrics_series *m_commands, *m_batch, *m_lowered_commits, *m_lowered_replies, *m_window;
    uint64_t seen_lowered_commits, seen_lowered_replies; /* loop thread only */
};

/* ---- parsing (common/raft_peers.c) ---- */

int raft_node_parse_peers(const char *peers, const char *urls, raft_node_config *cfg, char *err,
                          size_t errlen)
{
    return raft_peers_parse(peers, urls, cfg->id, cfg->peers, &cfg->npeers, err, errlen);
}

/* ---- the loop thread ---- */

static struct raft *R(raft_node *n)
{
    return raft_host_raft(n->host);
}

static raft_proposer *P(raft_node *n)
{
    return raft_host_proposer(n->host);
}

static void refresh_status(raft_node *n)
{
    raft_host_log_changes(n->host, "oracle");
    atomic_store(&n->hwm_seen, n->state.hwm);
    uint64_t commits = raft_host_commits_lowered(n->host), replies = raft_host_replies_lowered(n->host);
    metrics_inc(n->m_lowered_commits, commits - n->seen_lowered_commits);
    metrics_inc(n->m_lowered_replies, replies - n->seen_lowered_replies);
    n->seen_lowered_commits = commits;
    n->seen_lowered_replies = replies;
}

static uint64_t lease_ms(const raft_node *n);

/* The command in flight was applied (or failed), before the proposer
 * answers its requests (rp_config.applied, on the loop thread): each gets
 * its part of the range (first 0 when the space is used up). The
 * proposer wakes the loop for the next command afterwards. */
static void on_applied(void *arg, rp_wait *list, int status, void *result)
{
    raft_node *n = arg;
    command *c = &n->cmd;
    uint64_t first = status == 0 ? oracle_fsm_first(result) : 0;
    /* What the command reserved beyond its waits is the new window (its
     * commit renewed the proposer's lease already). The old window's rest
     * is dropped: it lies below what this command answered, and a request
     * that comes after those answers must get more (real-time order). */
    n->win_next = 1;
    n->win_end = 0;
    if (first != 0 && c->term == R(n)->current_term && raft_state(R(n)) == RAFT_LEADER) {
        n->win_next = first + c->wanted;
        n->win_end = n->state.hwm;
        n->window_term = c->term;
    }
    for (rp_wait *w = list; w != NULL; w = w->next) {
        ts_wait *t = (ts_wait *)w;
        t->first = first;
        if (first != 0)
            first += t->count;
    }
    c->inflight = false;
}

/* How long a commit keeps other members from leading: a follower that
 * took an entry resets its election timer, which runs at least the
 * election timeout, and grants no vote while it knows a leader
 * (libraft's recvRequestVote); four fifths of it leave room for clock
 * rates and a loop iteration's delay (docs/DESIGN.md §7.4). */
static uint64_t lease_ms(const raft_node *n)
{
    unsigned e = n->cfg.election_ms ? n->cfg.election_ms : 1000;
    return (uint64_t)e * 4 / 5;
}

/* Whether this leader may hand out from its window now. */
static bool lease_holds(raft_node *n)
{
    return rp_lease_left_ms(P(n), R(n)) > 0;
}

/* rp_take's test (under the proposer's mutex): whether the next queued
 * request fits in what is left of the window; it is handed that part. */
static bool fits_window(void *arg, const rp_wait *w)
{
    raft_node *n = arg;
    ts_wait *t = (ts_wait *)w;
    if (n->win_next > n->win_end || t->count > n->win_end - n->win_next + 1)
        return false;
    t->first = n->win_next;
    n->win_next += t->count;
    return true;
}

/* Answer queued requests from the window, in order, while the lease holds
 * and the window has enough. */
static void serve_window(raft_node *n)
{
    if (!lease_holds(n))
        return;
    rp_wait *list = rp_take(P(n), fits_window, n);
    if (list == NULL)
        return;
    size_t k = 0;
    for (rp_wait *w = list; w != NULL; w = w->next)
        k++;
    rp_finish(P(n), list, RP_OK);
    n->last_window_ms = time_mono_ms();
    metrics_inc(n->m_window, k);
}

/* A term changed hands, or this member stopped leading: its window is
 * gone (a new leader starts above every window: its barrier applies every
 * command before it proposes). */
static void drop_window(raft_node *n)
{
    n->win_next = 1;
    n->win_end = 0;
}

/* Propose one command: advance the mark by the requests' counts (list,
 * k of them, wanting `wanted`) plus a window of `reserve`. */
static void propose_command(raft_node *n, rp_wait *list, size_t k, uint64_t wanted,
                            uint64_t reserve)
{
    struct raft_buffer buf;
    if (oracle_fsm_command(wanted + reserve, &buf) != 0) {
        log_warn("oracle raft: cannot make a command: out of memory");
        rp_finish(P(n), list, RP_UNAVAILABLE);
        return;
    }
    n->cmd = (command){.inflight = true, .wanted = wanted, .term = R(n)->current_term};
    if (rp_apply(P(n), R(n), list, &buf) != 0) {
        n->cmd.inflight = false; /* its requests are answered */
        return;
    }
    metrics_inc(n->m_commands, 1);
    metrics_observe(n->m_batch, (double)k);
}

/* The window to ask for beyond `wanted`: WINDOW, less near the end of the
 * timestamps (ORACLE_FSM_MAX_TS). */
static uint64_t reserve_for(const raft_node *n, uint64_t wanted)
{
    uint64_t left = ORACLE_FSM_MAX_TS - n->state.hwm;
    return left > wanted ? (left - wanted < WINDOW ? left - wanted : WINDOW) : 0;
}

/* Answer what is queued: from the window while the lease holds, else in
 * one command that also reserves the next window; a busy leader renews its
 * lease and refills its window before either runs out.
 *
 * The proposer (common/raft_proposer.h) holds every command back until
 * the leader's first barrier of its term is applied: every earlier command
 * is then applied, so the mark is above every window an earlier leader
 * had. One command is in flight at a time: the requests that arrive
 * meanwhile make the next, bigger one. */
static void propose(raft_node *n)
{
    struct raft *r = R(n);
    bool leader = raft_state(r) == RAFT_LEADER;
    if (!leader || n->window_term != r->current_term)
        drop_window(n);
    if (!rp_ready(P(n), r))
        return; /* the proposer failed the queue, or holds it for the barrier */
    serve_window(n);
    if (n->cmd.inflight)
        return;
    /* --min-timestamp: a leader first raises the group's mark to it (one
     * command that answers nobody); requests wait behind it. Every leader
     * does, so the floor holds whichever member leads. */
    if (n->cfg.min_ts > n->state.hwm) {
        propose_command(n, NULL, 0, n->cfg.min_ts - n->state.hwm, 0);
        return;
    }
    rp_wait *ws = rp_take(P(n), NULL, NULL);
    uint64_t wanted = 0;
    size_t k = 0;
    for (rp_wait *w = ws; w != NULL; w = w->next, k++)
        wanted += ((ts_wait *)w)->count;
    if (ws != NULL) {
        propose_command(n, ws, k, wanted, reserve_for(n, wanted));
        return;
    }
    /* Nothing waits. A leader that handed out from its window lately renews
     * its lease, and refills the window, once half of either is gone: its
     * requests then never wait for a Raft round. */
    uint64_t now = time_mono_ms(), lease = lease_ms(n);
    int64_t left = rp_lease_left_ms(P(n), r); /* -1: none in this term (a transfer) */
    bool busy = n->last_window_ms != 0 && now - n->last_window_ms < lease;
    bool low = n->win_next > n->win_end || n->win_end - n->win_next + 1 < WINDOW / 2 ||
               left < (int64_t)lease / 2;
    if (busy && low && left >= 0 && reserve_for(n, 0) > 0)
        propose_command(n, NULL, 0, 0, reserve_for(n, 0));
}

/* The loop's work, every tick and whenever woken, after the proposer's
 * step (common/raft_host.h): refresh the status, propose what is queued. */
static void serve(void *arg)
{
    raft_node *n = arg;
    refresh_status(n);
    propose(n);
}

/* ---- the API ---- */

int raft_node_start(const raft_node_config *cfg, metrics_registry *m, raft_node **out, char *err,
                    size_t errlen)
{
    static const double buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024};
    raft_node *n = calloc(1, sizeof(*n));
    if (n == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    n->cfg = *cfg;
    if (m != NULL) {
        n->m_commands = metrics_counter1(m, "percolator_oracle_raft_commands_total",
                                         "advance commands proposed by this node as leader");
        n->m_batch = metrics_series_get(
            metrics_histogram(m, "percolator_oracle_raft_batch_requests",
                              "timestamp requests answered by one command", NULL, NULL, buckets,
                              sizeof(buckets) / sizeof(buckets[0])),
            NULL, NULL);
        metrics_family *lowered = metrics_counter(
            m, "percolator_oracle_raft_guard_lowered_total",
            "libraft 0.15 claims this node's raft_io guard lowered to what the leader proved "
            "(docs/DESIGN.md 7.1)",
            "what", NULL);
        n->m_lowered_commits = metrics_series_get(lowered, "leader_commit", NULL);
        n->m_lowered_replies = metrics_series_get(lowered, "reply_last_index", NULL);
        n->m_window = metrics_counter1(m, "percolator_oracle_raft_window_requests_total",
                                       "timestamp requests the leader answered from its "
                                       "window under its lease, without a Raft round");
    }
    oracle_fsm_init(&n->fsm, &n->state);
    raft_host_config hc = {
        .kind = "oracle", .id = cfg->id, .dir = cfg->dir, .peers = cfg->peers, .npeers = cfg->npeers,
        .fsm = &n->fsm, .election_ms = cfg->election_ms, .heartbeat_ms = cfg->heartbeat_ms,
        .snapshot_threshold = 1024, .snapshot_trailing = 128, .serve = serve, .arg = n,
        /* The oracle's entries: its 16-byte command, libraft's barriers and
         * configurations (a few hundred bytes for RAFT_PEERS_MAX members). */
        .max_entry_bytes = 4096, .peer_tls = cfg->peer_tls, .listen_fd = cfg->listen_fd,
        .metrics = m,
        /* Requests that reach a new leader wait for its first barrier (a
         * round): the oracle needs nothing else to answer them. */
        .proposer = {.queue_unready = true, .applied = on_applied, .applied_arg = n,
                     .lease_ms = (unsigned)lease_ms(n)},
    };
    if (raft_host_start(&hc, &n->host, err, errlen) != 0) {
        free(n);
        return -1;
    }
    *out = n;
    return 0;
}

void raft_node_stop(raft_node *n)
{
    if (n == NULL)
        return;
    raft_host_stop(n->host); /* the proposer fails what is queued, libraft what it holds */
    free(n);
}

rn_rc raft_node_timestamps(raft_node *n, unsigned count, unsigned wait_ms, uint64_t *first)
{
    ts_wait w = {.count = count};
    rp_rc rc = rp_wait_for(P(n), &w.base, wait_ms);
    *first = rc == RP_OK ? w.first : 0;
    if (rc == RP_OK)
        return w.first != 0 ? RN_OK : RN_EXHAUSTED;
    return rc == RP_NOT_LEADER ? RN_NOT_LEADER : RN_UNAVAILABLE;
}

void raft_node_get_status(raft_node *n, raft_node_status *st)
{
    raft_host_status(n->host, st);
}

uint64_t raft_node_hwm(raft_node *n)
{
    return atomic_load(&n->hwm_seen);
}

struct raft_host *raft_node_host(raft_node *n)
{
    return n->host;
}
