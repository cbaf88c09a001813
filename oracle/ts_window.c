/*
 * ts_window.c — see ts_window.h. Loop thread only (fits_window runs inside
 * rp_take, under the proposer's mutex).
 */
#include <stdlib.h>

#include "log.h"
#include "ts_window.h"

/* The one command in flight. */
typedef struct {
    bool inflight;
    uint64_t wanted;          /* what its waits take; the rest of the command is a window */
    raft_term term;
} command;

struct ts_window {
    tw_config cfg;
    uint64_t lease_ms;
    command cmd;
    /* The window (docs/DESIGN.md §7.4): [win_next, win_end] was reserved
     * by a command this leader committed in window_term and is not handed
     * out yet (empty when win_next > win_end). It is handed out only under
     * the proposer's lease, which every committed entry of this leader
     * renews (rp_lease_left_ms). */
    uint64_t win_next, win_end, last_window_ms;
    raft_term window_term;
    uint64_t n_commands, n_window;
};

unsigned tw_lease_ms(unsigned election_ms)
{
    /* A follower that took an entry resets its election timer, which runs
     * at least the election timeout, and grants no vote while it knows a
     * leader (libraft's recvRequestVote); four fifths of it leave room for
     * clock rates and a loop iteration's delay (docs/DESIGN.md §7.4). */
    unsigned e = election_ms ? election_ms : 1000;
    return (unsigned)((uint64_t)e * 4 / 5);
}

ts_window *tw_new(const tw_config *cfg)
{
    ts_window *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    w->cfg = *cfg;
    w->lease_ms = tw_lease_ms(cfg->election_ms);
    w->win_next = 1; /* empty */
    return w;
}

void tw_free(ts_window *w)
{
    free(w);
}

static uint64_t now_ms(const ts_window *w)
{
    return w->cfg.now_ms(w->cfg.clock_arg);
}

static uint64_t hwm(const ts_window *w)
{
    return w->cfg.state->hwm;
}

/* A term changed hands, or this member stopped leading: its window is
 * gone (a new leader starts above every window: its barrier applies every
 * command before it proposes). */
static void drop_window(ts_window *w)
{
    w->win_next = 1;
    w->win_end = 0;
}

void tw_applied(ts_window *w, raft_proposer *p, struct raft *r, rp_wait *list, int status,
                void *result)
{
    command *c = &w->cmd;
    uint64_t first = status == 0 ? oracle_fsm_first(result) : 0;
    /* What the command reserved beyond its waits is the new window (its
     * commit renewed the proposer's lease already). The old window's rest
     * is dropped: it lies below what this command answered, and a request
     * that comes after those answers must get more (real-time order). */
    drop_window(w);
    /* Only in the term it was proposed in, while this member may propose:
     * a window is this leader's alone. */
    if (first != 0 && c->term == r->current_term && rp_ready(p, r)) {
        w->win_next = first + c->wanted;
        w->win_end = hwm(w);
        w->window_term = c->term;
    }
    for (rp_wait *x = list; x != NULL; x = x->next) {
        ts_wait *t = (ts_wait *)x;
        t->first = first;
        if (first != 0)
            first += t->count;
    }
    c->inflight = false;
}

/* Whether this leader may hand out from its window now. */
static bool lease_holds(raft_proposer *p, struct raft *r)
{
    return rp_lease_left_ms(p, r) > 0;
}

/* rp_take's test (under the proposer's mutex): whether the next queued
 * request fits in what is left of the window; it is handed that part. */
static bool fits_window(void *arg, const rp_wait *x)
{
    ts_window *w = arg;
    ts_wait *t = (ts_wait *)x;
    if (w->win_next > w->win_end || t->count > w->win_end - w->win_next + 1)
        return false;
    t->first = w->win_next;
    w->win_next += t->count;
    return true;
}

/* Answer queued requests from the window, in order, while the lease holds
 * and the window has enough. */
static void serve_window(ts_window *w, raft_proposer *p, struct raft *r)
{
    if (!lease_holds(p, r))
        return;
    rp_wait *list = rp_take_kind(p, TW_KIND, fits_window, w);
    if (list == NULL)
        return;
    size_t k = 0;
    for (rp_wait *x = list; x != NULL; x = x->next)
        k++;
    rp_finish(p, list, RP_OK);
    w->last_window_ms = now_ms(w);
    w->n_window += k;
    metrics_inc(w->cfg.m_window, k);
}

/* Propose one command: advance the mark by the requests' counts (list,
 * k of them, wanting `wanted`) plus a window of `reserve`. */
static void propose_command(ts_window *w, raft_proposer *p, struct raft *r, rp_wait *list,
                            size_t k, uint64_t wanted, uint64_t reserve)
{
    struct raft_buffer buf;
    if (oracle_fsm_command(wanted + reserve, &buf) != 0) {
        log_warn("oracle raft: cannot make a command: out of memory");
        rp_finish(p, list, RP_UNAVAILABLE);
        return;
    }
    w->cmd = (command){.inflight = true, .wanted = wanted, .term = r->current_term};
    if (rp_apply(p, r, list, &buf) != 0) {
        w->cmd.inflight = false; /* its requests are answered */
        return;
    }
    w->n_commands++;
    metrics_inc(w->cfg.m_commands, 1);
    metrics_observe(w->cfg.m_batch, (double)k);
}

/* The window to ask for beyond `wanted`: TW_WINDOW, less near the end of
 * the timestamps (ORACLE_FSM_MAX_TS). */
static uint64_t reserve_for(const ts_window *w, uint64_t wanted)
{
    uint64_t left = ORACLE_FSM_MAX_TS - hwm(w);
    return left > wanted ? (left - wanted < TW_WINDOW ? left - wanted : TW_WINDOW) : 0;
}

/* Nothing waits. A leader that handed out from its window lately renews
 * its lease, and refills the window, once half of either is gone: its
 * requests then never wait for a Raft round. */
static void refill(ts_window *w, raft_proposer *p, struct raft *r)
{
    uint64_t now = now_ms(w), lease = w->lease_ms;
    int64_t left = rp_lease_left_ms(p, r); /* -1: none in this term (a transfer) */
    bool busy = w->last_window_ms != 0 && now - w->last_window_ms < lease;
    bool low = w->win_next > w->win_end || w->win_end - w->win_next + 1 < TW_WINDOW / 2 ||
               left < (int64_t)lease / 2;
    if (busy && low && left >= 0 && reserve_for(w, 0) > 0)
        propose_command(w, p, r, NULL, 0, 0, reserve_for(w, 0));
}

/* Answer what is queued: from the window while the lease holds, else in
 * one command that also reserves the next window; a busy leader renews its
 * lease and refills its window before either runs out.
 *
 * The proposer holds every command back until the leader's first barrier
 * of its term is applied: every earlier command is then applied, so the
 * mark is above every window an earlier leader had. One command is in
 * flight at a time: the requests that arrive meanwhile make the next,
 * bigger one. */
void tw_serve(ts_window *w, raft_proposer *p, struct raft *r)
{
    /* Not ready (a follower, or a leader before its barrier of the term
     * is applied), or ready in a later term than the window's. */
    bool ready = rp_ready(p, r);
    if (!ready || w->window_term != r->current_term)
        drop_window(w);
    if (!ready)
        return; /* the proposer failed the queue, or holds it for the barrier */
    serve_window(w, p, r);
    if (w->cmd.inflight)
        return;
    /* --min-timestamp: a leader first raises the group's mark to it (one
     * command that answers nobody); requests wait behind it. Every leader
     * does, so the floor holds whichever member leads. */
    if (w->cfg.min_ts > hwm(w)) {
        propose_command(w, p, r, NULL, 0, w->cfg.min_ts - hwm(w), 0);
        return;
    }
    rp_wait *ws = rp_take_kind(p, TW_KIND, NULL, NULL);
    uint64_t wanted = 0;
    size_t k = 0;
    for (rp_wait *x = ws; x != NULL; x = x->next, k++)
        wanted += ((ts_wait *)x)->count;
    if (ws != NULL) {
        propose_command(w, p, r, ws, k, wanted, reserve_for(w, wanted));
        return;
    }
    refill(w, p, r);
}

void tw_get_stats(const ts_window *w, tw_stats *out)
{
    *out = (tw_stats){.commands = w->n_commands, .window_requests = w->n_window,
                      .next = w->win_next, .end = w->win_end, .in_flight = w->cmd.inflight};
}
