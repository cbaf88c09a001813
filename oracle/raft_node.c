/*
 * raft_node.c — see raft_node.h. Everything that touches libraft runs on
 * the loop thread; other threads only queue requests (under mu) and wake
 * the loop (uv_async_send, which is thread-safe).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <raft.h>

#include "log.h"
#include "raft_fsm.h"
#include "raft_host.h"
#include "raft_identity.h"
#include "raft_node.h"
#include "timeutil.h"

/* One HTTP request's wish for timestamps. */
typedef struct ts_wait {
    unsigned count;
    uint64_t first;
    rn_rc rc;
    bool done;
    bool batched;             /* taken into a command: it will be answered */
    struct ts_wait *next;
} ts_wait;

/* One command in flight and the requests it answers. */
typedef struct {
    struct raft_apply req;
    ts_wait *waits;
    uint64_t wanted;          /* what the waits take; the rest of the command is a window */
    uint64_t proposed_ms;     /* time_mono_ms() before raft_apply: a lease starts there */
    raft_term term;
} batch;

/* Timestamps a command reserves beyond what waits for it: the window the
 * leader hands out from without a Raft round while its lease holds
 * (docs/DESIGN.md §7.4). Refilled when half of it is gone. */
#define WINDOW 10000

struct raft_node {
    raft_node_config cfg;
    raft_host *host;          /* libraft on its loop thread (common/raft_host.h) */
    struct raft_fsm fsm;
    oracle_fsm_state state;

    pthread_mutex_t mu;
    pthread_cond_t cv;        /* a wait is done */
    ts_wait *queue, **queue_tail;
    bool stopping;
    batch *inflight;          /* loop thread only */
    /* A new leader's first entry is a barrier (loop thread only): see
     * propose(). */
    struct raft_barrier barrier;
    bool barrier_inflight;
    uint64_t barrier_term, ready_term;
    raft_node_status status;  /* under mu, refreshed by the loop */
    char role[16];

    /* The window and the lease (docs/DESIGN.md §7.4; loop thread only):
     * [win_next, win_end] was reserved by a command this leader committed
     * and is not handed out yet (empty when win_next > win_end); before
     * lease_until (time_mono_ms) no other member can lead in lease_term. */
    uint64_t win_next, win_end;
    uint64_t lease_until, last_window_ms;
    raft_term lease_term, no_lease_term;

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

/* Answer one request; mu held. */
static void finish(ts_wait *w, rn_rc rc, uint64_t first)
{
    w->rc = rc;
    w->first = first;
    w->done = true;
}

static void refresh_status(raft_node *n)
{
    raft_id id = 0;
    const char *addr = NULL;
    raft_leader(R(n), &id, &addr);
    int st = raft_state(R(n));
    static const char *const names[] = {"unavailable", "follower", "candidate", "leader"};
    char lurl[RAFT_PEER_ADDR_MAX] = "";
    if (id != 0 && raft_host_heard_lately(n->host, id))
        raft_host_member_url(n->host, raft_member_of(id), lurl, sizeof lurl);
    raft_host_log_changes(n->host, "oracle");

    pthread_mutex_lock(&n->mu);
    n->status.role = st >= 0 && st <= 3 ? names[st] : "unavailable";
    n->status.leader_id = raft_member_of(id);
    snprintf(n->status.leader_http, sizeof(n->status.leader_http), "%s", lurl);
    n->status.term = R(n)->current_term;
    n->status.hwm = n->state.hwm;
    n->status.applied_index = raft_last_applied(R(n));
    pthread_mutex_unlock(&n->mu);
    uint64_t commits = raft_host_commits_lowered(n->host), replies = raft_host_replies_lowered(n->host);
    metrics_inc(n->m_lowered_commits, commits - n->seen_lowered_commits);
    metrics_inc(n->m_lowered_replies, replies - n->seen_lowered_replies);
    n->seen_lowered_commits = commits;
    n->seen_lowered_replies = replies;
}

static void propose(raft_node *n);
static uint64_t lease_ms(const raft_node *n);

/* The command of a batch was applied (or failed): answer its requests. */
static void on_applied(struct raft_apply *req, int status, void *result)
{
    batch *b = (batch *)req;
    raft_node *n = req->data;
    uint64_t first = status == 0 ? oracle_fsm_first(result) : 0;
    rn_rc rc = status != 0 ? RN_UNAVAILABLE : first == 0 ? RN_EXHAUSTED : RN_OK;
    /* What the command reserved beyond its waits is the new window, and
     * its commit the new lease. The old window's rest is dropped: it lies
     * below what this command answered, and a request that comes after
     * those answers must get more (real-time order). */
    n->win_next = 1;
    n->win_end = 0;
    if (rc == RN_OK && b->term == R(n)->current_term && raft_state(R(n)) == RAFT_LEADER) {
        n->win_next = first + b->wanted;
        n->win_end = n->state.hwm;
        n->lease_until = b->proposed_ms + lease_ms(n);
        n->lease_term = b->term;
    }

    if (status != 0)
        log_warn("oracle raft: a command failed: %s", raft_strerror(status));
    pthread_mutex_lock(&n->mu);
    for (ts_wait *w = b->waits, *next; w != NULL; w = next) {
        next = w->next;
        finish(w, rc, rc == RN_OK ? first : 0);
        if (rc == RN_OK)
            first += w->count;
    }
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
    free(b);
    n->inflight = NULL;
    /* The next command from the loop, not from inside libraft: this
     * callback may run while libraft is stepping down, where raft_apply
     * must not be called (it crashed there). */
    raft_host_wake(n->host);
}

static void on_barrier(struct raft_barrier *req, int status)
{
    raft_node *n = req->data;
    n->barrier_inflight = false;
    if (status == 0)
        n->ready_term = n->barrier_term;
    else
        log_warn("oracle raft: the new leader's barrier failed: %s", raft_strerror(status));
    raft_host_wake(n->host); /* go on from the loop, not from inside libraft */
}

/* Fail every queued request with rc. */
static void fail_queued(raft_node *n, rn_rc rc)
{
    pthread_mutex_lock(&n->mu);
    for (ts_wait *w = n->queue, *next; w != NULL; w = next) {
        next = w->next;
        finish(w, rc, 0);
    }
    n->queue = NULL;
    n->queue_tail = &n->queue;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
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
    struct raft *r = R(n);
    return raft_state(r) == RAFT_LEADER && n->ready_term == r->current_term &&
           n->lease_term == r->current_term && n->no_lease_term != r->current_term &&
           r->transfer == NULL && time_mono_ms() < n->lease_until;
}

/* Answer queued requests from the window, in order, while the lease holds
 * and the window has enough. */
static void serve_window(raft_node *n)
{
    if (!lease_holds(n))
        return;
    size_t k = 0;
    pthread_mutex_lock(&n->mu);
    while (n->queue != NULL && n->win_next <= n->win_end &&
           n->queue->count <= n->win_end - n->win_next + 1) {
        ts_wait *w = n->queue;
        n->queue = w->next;
        finish(w, RN_OK, n->win_next);
        n->win_next += w->count;
        k++;
    }
    if (n->queue == NULL)
        n->queue_tail = &n->queue;
    if (k > 0)
        pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
    if (k > 0) {
        n->last_window_ms = time_mono_ms();
        metrics_inc(n->m_window, k);
    }
}

/* A term changed hands, or this member stopped leading: its window and
 * lease are gone (a new leader starts above every window: its barrier
 * applies every command before it proposes). */
static void drop_window(raft_node *n)
{
    n->win_next = 1;
    n->win_end = 0;
    n->lease_until = 0;
}

/* Propose one command: advance the mark by the requests' counts (waits,
 * wanted) plus a window of `reserve`. */
static void propose_command(raft_node *n, ts_wait *ws, size_t k, uint64_t wanted,
                            uint64_t reserve)
{
    batch *b = calloc(1, sizeof(*b));
    struct raft_buffer buf;
    int rv = RAFT_NOMEM;
    if (b != NULL && oracle_fsm_command(wanted + reserve, &buf) == 0) {
        b->waits = ws;
        b->wanted = wanted;
        b->term = R(n)->current_term;
        b->proposed_ms = time_mono_ms(); /* before the entry can reach anyone */
        b->req.data = n;
        if ((rv = raft_apply(R(n), &b->req, &buf, 1, on_applied)) != 0)
            raft_free(buf.base);
    }
    if (rv != 0) {
        log_warn("oracle raft: cannot propose: %s", raft_strerror(rv));
        pthread_mutex_lock(&n->mu);
        for (ts_wait *w = ws; w != NULL; w = w->next)
            finish(w, rv == RAFT_NOTLEADER ? RN_NOT_LEADER : RN_UNAVAILABLE, 0);
        pthread_cond_broadcast(&n->cv);
        pthread_mutex_unlock(&n->mu);
        free(b);
        return;
    }
    n->inflight = b;
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
 * A leader's first entry in its term is a barrier, and no command goes
 * before it commits. Besides making sure every earlier command is applied
 * (so that the mark is above every window an earlier leader had), it
 * narrows a defect of libraft 0.15 (docs/DESIGN.md §7.1): a follower
 * that still holds a stale entry answers an empty AppendEntries with its
 * last stored index, and the leader may count it as holding its own entry
 * there. With one command in flight per leader, the entry such a false
 * count commits is usually this barrier, which hands out nothing; a stale
 * suffix of two entries can still let a command through (not closed here:
 * see §7.1). */
static void propose(raft_node *n)
{
    struct raft *r = R(n);
    bool leader = raft_state(r) == RAFT_LEADER;
    if (!leader || n->lease_term != r->current_term)
        drop_window(n);
    if (leader && r->transfer != NULL)
        n->no_lease_term = r->current_term; /* its TimeoutNow may elect another at once */
    if (n->barrier_inflight)
        return;
    if (leader && !n->stopping && n->ready_term != r->current_term) {
        if (n->inflight != NULL)
            return;
        n->barrier.data = n;
        n->barrier_term = r->current_term;
        int rv = raft_barrier(r, &n->barrier, on_barrier);
        if (rv == 0) {
            n->barrier_inflight = true;
            return; /* requests wait in the queue until it commits */
        }
        log_warn("oracle raft: cannot append the leader's barrier: %s", raft_strerror(rv));
        fail_queued(n, RN_UNAVAILABLE);
        return;
    }
    if (!leader || n->stopping) {
        fail_queued(n, n->stopping ? RN_UNAVAILABLE : RN_NOT_LEADER);
        return;
    }
    serve_window(n);
    if (n->inflight != NULL)
        return;
    /* --min-timestamp: a leader first raises the group's mark to it (one
     * command that answers nobody); requests wait behind it. Every leader
     * does, so the floor holds whichever member leads. */
    if (n->cfg.min_ts > n->state.hwm) {
        propose_command(n, NULL, 0, n->cfg.min_ts - n->state.hwm, 0);
        return;
    }
    pthread_mutex_lock(&n->mu);
    ts_wait *ws = n->queue;
    n->queue = NULL;
    n->queue_tail = &n->queue;
    uint64_t wanted = 0;
    size_t k = 0;
    for (ts_wait *w = ws; w != NULL; w = w->next, k++) {
        wanted += w->count;
        w->batched = true;
    }
    pthread_mutex_unlock(&n->mu);
    if (ws != NULL) {
        propose_command(n, ws, k, wanted, reserve_for(n, wanted));
        return;
    }
    /* Nothing waits. A leader that handed out from its window lately renews
     * its lease, and refills the window, once half of either is gone: its
     * requests then never wait for a Raft round. */
    uint64_t now = time_mono_ms(), lease = lease_ms(n);
    bool busy = n->last_window_ms != 0 && now - n->last_window_ms < lease;
    bool low = n->win_next > n->win_end || n->win_end - n->win_next + 1 < WINDOW / 2 ||
               n->lease_until < now + lease / 2;
    if (busy && low && n->no_lease_term != r->current_term && reserve_for(n, 0) > 0)
        propose_command(n, NULL, 0, 0, reserve_for(n, 0));
}

/* The loop's work, every tick and whenever woken: refresh the status,
 * propose what is queued (or fail it when stopping). */
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
    n->queue_tail = &n->queue;
    n->status.role = "unavailable";
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
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
    };
    if (raft_host_start(&hc, &n->host, err, errlen) != 0) {
        pthread_cond_destroy(&n->cv);
        pthread_mutex_destroy(&n->mu);
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
    pthread_mutex_lock(&n->mu);
    n->stopping = true; /* serve fails what is queued; libraft what is in flight */
    pthread_mutex_unlock(&n->mu);
    raft_host_stop(n->host);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

rn_rc raft_node_timestamps(raft_node *n, unsigned count, unsigned wait_ms, uint64_t *first)
{
    ts_wait w = {.count = count};
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)wait_ms * 1000000ull;
    until.tv_sec += (time_t)(ns / 1000000000ull);
    until.tv_nsec = (long)(ns % 1000000000ull);

    pthread_mutex_lock(&n->mu);
    if (n->stopping || strcmp(n->status.role, "leader") != 0) {
        pthread_mutex_unlock(&n->mu);
        return n->stopping ? RN_UNAVAILABLE : RN_NOT_LEADER;
    }
    *n->queue_tail = &w;
    n->queue_tail = &w.next;
    pthread_mutex_unlock(&n->mu);
    raft_host_wake(n->host);

    pthread_mutex_lock(&n->mu);
    while (!w.done) {
        if (w.batched) {
            /* In a command: libraft answers it, one way or the other. */
            pthread_cond_wait(&n->cv, &n->mu);
            continue;
        }
        if (pthread_cond_timedwait(&n->cv, &n->mu, &until) == ETIMEDOUT && !w.done &&
            !w.batched) {
            /* Still queued: take it out (the loop has not seen it). */
            for (ts_wait **p = &n->queue; *p != NULL; p = &(*p)->next) {
                if (*p == &w) {
                    *p = w.next;
                    if (n->queue_tail == &w.next)
                        n->queue_tail = p;
                    break;
                }
            }
            w.rc = RN_UNAVAILABLE;
            break;
        }
    }
    pthread_mutex_unlock(&n->mu);
    *first = w.first;
    return w.rc;
}

void raft_node_get_status(raft_node *n, raft_node_status *st)
{
    pthread_mutex_lock(&n->mu);
    *st = n->status;
    pthread_mutex_unlock(&n->mu);
    st->membership = n->host != NULL ? raft_host_membership(n->host) : "waiting";
}

struct raft_host *raft_node_host(raft_node *n)
{
    return n->host;
}
