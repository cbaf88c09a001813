/*
 * raft_node.c — see raft_node.h. Everything that touches libraft runs on
 * the loop thread; request threads queue their wishes on the member's
 * proposer (common/raft_proposer.h), which wakes the loop. What the
 * leader proposes and how it answers (its commands and its window) is
 * oracle/ts_window.c; this file is the host's wiring around it.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <raft.h>

#include "raft_fsm.h"
#include "raft_host.h"
#include "raft_node.h"
#include "timeutil.h"
#include "ts_window.h"

/* A placement-driver command's wait (raft_node_pd): its entry, made on
 * the request's thread, and what applying it gave. */
typedef struct {
    rp_wait base;             /* first; kind RN_PD_KIND */
    struct raft_buffer cmd;   /* libraft's once given (the loop proposed it) */
    bool given;
    uint64_t result;
} pd_wait;

#define RN_PD_KIND 1 /* rp_wait.kind of a placement-driver command (TW_KIND: timestamps) */

struct raft_node {
    raft_node_config cfg;
    raft_host *host;          /* libraft on its loop thread (common/raft_host.h) */
    struct raft_fsm fsm;
    oracle_fsm_state state;
    pd_map *pd;               /* the placement driver's map (oracle/pd_map.h) */
    ts_window *win;           /* what the leader proposes and answers (ts_window.h) */

    _Atomic uint64_t hwm_seen;/* the mark, for raft_node_hwm (any thread) */

    metrics_series *m_lowered_commits, *m_lowered_replies;
    metrics_series *m_pd_nodes, *m_pd_regions; /* the map as this member applied it */
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
    pd_counts c;
    pd_map_counts(n->pd, &c);
    metrics_set(n->m_pd_nodes, (int64_t)c.nodes);
    metrics_set(n->m_pd_regions, (int64_t)c.regions);
}

/* The command in flight was applied (or failed), before the proposer
 * answers its requests (rp_config.applied, on the loop thread). The
 * proposer wakes the loop for the next command afterwards. */
static rp_rc on_applied(void *arg, unsigned kind, rp_wait *list, int status, void *result)
{
    raft_node *n = arg;
    if (kind == TW_KIND) {
        tw_applied(n->win, P(n), R(n), list, status, result);
        return RP_OK;
    }
    for (rp_wait *x = list; x != NULL; x = x->next)
        ((pd_wait *)x)->result = status == 0 ? oracle_fsm_first(result) : 0;
    return RP_OK;
}

/* Propose every queued placement-driver command, each an entry of its
 * own (one report's regions; libraft writes the entries appended together
 * in one go). They are not held back by a timestamp command in flight. */
static void serve_pd(raft_node *n)
{
    rp_wait *list = rp_take_kind(P(n), RN_PD_KIND, NULL, NULL);
    for (rp_wait *x = list, *next; x != NULL; x = next) {
        next = x->next;
        x->next = NULL;
        pd_wait *w = (pd_wait *)x;
        w->given = true; /* rp_apply frees the buffer if it fails */
        rp_apply_kind(P(n), R(n), RN_PD_KIND, x, &w->cmd);
    }
}

/* The loop's work, every tick and whenever woken, after the proposer's
 * step (common/raft_host.h): refresh the status, propose what is queued. */
static void serve(void *arg)
{
    raft_node *n = arg;
    refresh_status(n);
    tw_serve(n->win, P(n), R(n));
    if (rp_ready(P(n), R(n)))
        serve_pd(n);
}

/* The window's clock (ts_window.h): the proposer's (common/raft_host.c). */
static uint64_t mono_ms(void *arg)
{
    (void)arg;
    return time_mono_ms();
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
    tw_config wc = {.state = &n->state, .election_ms = cfg->election_ms, .min_ts = cfg->min_ts,
                    .now_ms = mono_ms};
    if (m != NULL) {
        wc.m_commands = metrics_counter1(m, "percolator_oracle_raft_commands_total",
                                         "advance commands proposed by this node as leader");
        wc.m_batch = metrics_series_get(
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
        n->m_pd_nodes = metrics_gauge1(m, "percolator_pd_nodes",
                                       "service nodes in the placement driver's map, as this "
                                       "member applied it");
        n->m_pd_regions = metrics_gauge1(m, "percolator_pd_regions",
                                         "regions in the placement driver's map, as this member "
                                         "applied it");
        wc.m_window = metrics_counter1(m, "percolator_oracle_raft_window_requests_total",
                                       "timestamp requests the leader answered from its "
                                       "window under its lease, without a Raft round");
    }
    if ((n->pd = pd_map_new()) == NULL) {
        snprintf(err, errlen, "out of memory");
        free(n);
        return -1;
    }
    oracle_fsm_init(&n->fsm, &n->state, n->pd);
    if ((n->win = tw_new(&wc)) == NULL) {
        snprintf(err, errlen, "out of memory");
        pd_map_free(n->pd);
        free(n);
        return -1;
    }
    raft_host_config hc = {
        .kind = "oracle", .id = cfg->id, .dir = cfg->dir, .peers = cfg->peers, .npeers = cfg->npeers,
        .fsm = &n->fsm, .election_ms = cfg->election_ms, .heartbeat_ms = cfg->heartbeat_ms,
        .snapshot_threshold = 1024, .snapshot_trailing = 128, .serve = serve, .arg = n,
        /* The oracle's entries: its 16-byte command, libraft's barriers and
         * configurations (a few hundred bytes for RAFT_PEERS_MAX members),
         * the placement driver's commands (RN_PD_MAX_BYTES). */
        .max_entry_bytes = RN_PD_MAX_BYTES + 24, .peer_tls = cfg->peer_tls, .listen_fd = cfg->listen_fd,
        .metrics = m, .loop = cfg->loop, .segment_bytes = cfg->segment_bytes,
        .net = cfg->net, .net_group = cfg->net_group,
        /* Requests that reach a new leader wait for its first barrier (a
         * round): the oracle needs nothing else to answer them. The lease
         * is the window's (ts_window.h). */
        .proposer = {.queue_unready = true, .applied = on_applied, .applied_arg = n,
                     .lease_ms = tw_lease_ms(cfg->election_ms)},
    };
    if (raft_host_start(&hc, &n->host, err, errlen) != 0) {
        tw_free(n->win);
        pd_map_free(n->pd);
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
    tw_free(n->win);         /* libraft is closed: no callback calls it any more */
    pd_map_free(n->pd);
    free(n);
}

rn_rc raft_node_pd(raft_node *n, oracle_pd_cmd cmd, const buf *bytes, unsigned wait_ms,
                   uint64_t *result)
{
    *result = 0;
    if (bytes->len > RN_PD_MAX_BYTES)
        return RN_TOO_BIG;
    pd_wait w = {.base.kind = RN_PD_KIND};
    if (oracle_fsm_pd_command(cmd, bytes, &w.cmd) != 0)
        return RN_UNAVAILABLE;
    rp_rc rc = rp_wait_for(P(n), &w.base, wait_ms);
    if (!w.given)
        oracle_fsm_command_free(&w.cmd); /* never proposed */
    if (rc == RP_OK)
        *result = w.result;
    return rc == RP_OK ? RN_OK : rc == RP_NOT_LEADER ? RN_NOT_LEADER : RN_UNAVAILABLE;
}

pd_map *raft_node_pd_map(raft_node *n)
{
    return n->pd;
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
