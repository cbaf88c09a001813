/*
 * raft_host.c — see raft_host.h.
 */
#include "raft_host.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <raft/uv.h>
#include <uv.h>

#include "log.h"
#include "raft_io_guard.h"
#include "raft_transport.h"

#define TICK_MS 50

struct raft_host {
    raft_host_config cfg;
    raft_peer peers[RAFT_PEERS_MAX];
    pthread_t thread;
    bool thread_started;
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t tick;
    struct raft_uv_transport transport; /* ours: TLS and the frame check (raft_transport.h) */
    struct raft_io io;          /* libraft's on-disk log, over that transport */
    raft_io_guard guard;        /* between libraft and io (docs/DESIGN.md §7.1) */
    struct raft raft;
    bool raft_started;

    metrics_series *m_dropped;  /* the guard's drops, counted on the loop's tick */
    uint64_t seen_dropped;
    /* What raft_host_log_changes last logged (loop thread). */
    raft_term logged_term;
    raft_id logged_leader;
    int logged_state;

    pthread_mutex_t mu;
    pthread_cond_t cv;          /* the loop is set up, or failed to */
    bool stopping, loop_ready, loop_failed;
    char loop_err[256];
};

static void on_closed_handle(uv_handle_t *handle)
{
    (void)handle;
}

/* libraft is closed: close what it ran on; the loop then ends. */
static void on_raft_closed(struct raft *r)
{
    raft_host *h = r->data;
    raft_uv_close(&h->io);
    raft_transport_free(&h->transport);
    uv_close((uv_handle_t *)&h->wake, on_closed_handle);
    uv_close((uv_handle_t *)&h->tick, on_closed_handle);
}

static void on_wake(uv_async_t *a)
{
    raft_host *h = a->data;
    pthread_mutex_lock(&h->mu);
    bool stopping = h->stopping;
    pthread_mutex_unlock(&h->mu);
    h->cfg.serve(h->cfg.arg);
    if (!stopping)
        return;
    /* Stop: the owner failed what it had queued; libraft fails what is in
     * flight as it closes. */
    uv_timer_stop(&h->tick);
    if (h->raft_started)
        raft_close(&h->raft, on_raft_closed);
    else
        on_raft_closed(&h->raft);
}

/* libraft 0.15 shuts a member down for good (RAFT_UNAVAILABLE) when its
 * disk fails under it, or a message leaves its log in a state it cannot
 * go on from (a leader's entry that conflicts with a committed one). Such
 * a member neither votes nor applies, so it must not go on answering
 * health: it stops at once, and the supervisor starts it again from its
 * log and store (docs/DESIGN.md §7.2). */
static void check_alive(raft_host *h)
{
    if (!h->raft_started || raft_state(&h->raft) != RAFT_UNAVAILABLE)
        return;
    pthread_mutex_lock(&h->mu);
    bool stopping = h->stopping;
    pthread_mutex_unlock(&h->mu);
    if (stopping)
        return;
    log_error("raft: libraft shut this member down (%s): stopping at once; start it again "
              "(its log and store are on disk)", raft_errmsg(&h->raft));
    _exit(RAFT_HOST_EXIT_UNAVAILABLE);
}

static void on_tick(uv_timer_t *t)
{
    raft_host *h = t->data;
    check_alive(h);
    metrics_inc(h->m_dropped, h->guard.dropped - h->seen_dropped);
    h->seen_dropped = h->guard.dropped;
    h->cfg.serve(h->cfg.arg);
}

/* What a peer's message may carry (raft_frame.h): libraft 0.15 sends a
 * follower every entry from the one it needs to the last in one
 * AppendEntries, and its log holds at most a snapshot's worth plus the
 * trailing entries (more while a snapshot is taken): twice that, and
 * room for a burst, is more than any member of ours sends. */
static raft_frame_limits frame_limits(const raft_host_config *cfg)
{
    uint64_t log_max = (uint64_t)cfg->snapshot_threshold + cfg->snapshot_trailing;
    return (raft_frame_limits){.max_entries = 2 * log_max + 1024,
                               .max_entry_bytes = cfg->max_entry_bytes};
}

/* Every member bootstraps the same configuration on its first start; on
 * later starts the log holds it (RAFT_CANTBOOTSTRAP). */
static int bootstrap(raft_host *h)
{
    struct raft_configuration conf;
    int rv = 0;
    raft_configuration_init(&conf);
    for (size_t i = 0; i < h->cfg.npeers && rv == 0; i++)
        rv = raft_configuration_add(&conf, h->peers[i].id, h->peers[i].raft, RAFT_VOTER);
    if (rv == 0 && (rv = raft_bootstrap(&h->raft, &conf)) == RAFT_CANTBOOTSTRAP)
        rv = 0;
    raft_configuration_close(&conf);
    return rv;
}

/* A setup that failed before libraft started: close what was opened, so
 * that the loop ends. */
static int setup_failed(raft_host *h, bool transport, bool io)
{
    if (io)
        raft_uv_close(&h->io);
    if (transport)
        raft_transport_free(&h->transport);
    uv_close((uv_handle_t *)&h->wake, on_closed_handle);
    uv_close((uv_handle_t *)&h->tick, on_closed_handle);
    return -1;
}

/* Set libraft up on the loop; 0 or -1 with h->loop_err. */
static int loop_setup(raft_host *h)
{
    raft_peer *me = raft_peers_find(h->peers, h->cfg.npeers, h->cfg.id);
    int rv;

    h->wake.data = h;
    h->tick.data = h;
    if (me == NULL) {
        snprintf(h->loop_err, sizeof(h->loop_err), "member %u is not among the peers", h->cfg.id);
        return -1;
    }
    if (uv_async_init(&h->loop, &h->wake, on_wake) != 0) {
        snprintf(h->loop_err, sizeof(h->loop_err), "cannot set up the event loop");
        return -1;
    }
    if (uv_timer_init(&h->loop, &h->tick) != 0) {
        uv_close((uv_handle_t *)&h->wake, on_closed_handle);
        snprintf(h->loop_err, sizeof(h->loop_err), "cannot set up the event loop");
        return -1;
    }
    char why[200];
    if (raft_transport_init(&h->transport, &h->loop, &(raft_transport_config){
            .peers = h->peers, .npeers = h->cfg.npeers, .tls = h->cfg.peer_tls,
            .limits = frame_limits(&h->cfg), .metrics = h->cfg.metrics}, why, sizeof why) != 0) {
        snprintf(h->loop_err, sizeof(h->loop_err), "raft transport: %s", why);
        return setup_failed(h, false, false);
    }
    if ((rv = raft_uv_init(&h->io, &h->loop, h->cfg.dir, &h->transport)) != 0) {
        snprintf(h->loop_err, sizeof(h->loop_err), "raft storage in %s: %s", h->cfg.dir,
                 raft_strerror(rv));
        return setup_failed(h, true, false);
    }
    raft_io_guard_init(&h->guard, &h->io);
    if ((rv = raft_init(&h->raft, &h->guard.io, h->cfg.fsm, h->cfg.id, me->raft)) != 0) {
        snprintf(h->loop_err, sizeof(h->loop_err), "raft: %s", raft_errmsg(&h->raft));
        return setup_failed(h, true, true);
    }
    h->raft.data = h;
    raft_set_election_timeout(&h->raft, h->cfg.election_ms ? h->cfg.election_ms : 1000);
    raft_set_heartbeat_timeout(&h->raft, h->cfg.heartbeat_ms ? h->cfg.heartbeat_ms : 100);
    raft_set_snapshot_threshold(&h->raft, h->cfg.snapshot_threshold);
    raft_set_snapshot_trailing(&h->raft, h->cfg.snapshot_trailing);
    raft_set_pre_vote(&h->raft, true);
    if ((rv = bootstrap(h)) != 0 || (rv = raft_start(&h->raft)) != 0) {
        snprintf(h->loop_err, sizeof(h->loop_err), "raft: %s", raft_strerror(rv));
        raft_close(&h->raft, on_raft_closed);
        return -1;
    }
    h->raft_started = true;
    uv_timer_start(&h->tick, on_tick, TICK_MS, TICK_MS);
    return 0;
}

static void *loop_main(void *arg)
{
    raft_host *h = arg;
    int ok = loop_setup(h);
    pthread_mutex_lock(&h->mu);
    h->loop_ready = ok == 0;
    h->loop_failed = ok != 0;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (ok == 0)
        h->cfg.serve(h->cfg.arg);
    uv_run(&h->loop, UV_RUN_DEFAULT); /* after a failed setup: until the closes ran */
    return NULL;
}

int raft_host_check_timeouts(unsigned election_ms, unsigned heartbeat_ms, char *err,
                             size_t errlen)
{
    if (heartbeat_ms == 0 || election_ms < RAFT_HOST_BEATS_PER_ELECTION * heartbeat_ms) {
        snprintf(err, errlen,
                 "--raft-election-timeout-ms (%u) must be at least %u times "
                 "--raft-heartbeat-ms (%u)",
                 election_ms, RAFT_HOST_BEATS_PER_ELECTION, heartbeat_ms);
        return -1;
    }
    return 0;
}

int raft_host_start(const raft_host_config *cfg, raft_host **out, char *err, size_t errlen)
{
    raft_host *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (cfg->npeers > RAFT_PEERS_MAX) {
        snprintf(err, errlen, "more than %d members", RAFT_PEERS_MAX);
        free(h);
        return -1;
    }
    h->cfg = *cfg;
    memcpy(h->peers, cfg->peers, cfg->npeers * sizeof(h->peers[0]));
    if (cfg->metrics != NULL)
        h->m_dropped = metrics_counter1(
            cfg->metrics, "percolator_raft_messages_dropped_total",
            "raft messages no member sends, dropped before libraft would abort on them "
            "(docs/DESIGN.md 7.2)");
    h->cfg.peers = h->peers;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (mkdir(cfg->dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", cfg->dir, strerror(errno));
        goto fail;
    }
    if (uv_loop_init(&h->loop) != 0) {
        snprintf(err, errlen, "cannot create an event loop");
        goto fail;
    }
    *out = h; /* before the loop runs: its callbacks may use it */
    if (pthread_create(&h->thread, NULL, loop_main, h) != 0) {
        uv_loop_close(&h->loop);
        snprintf(err, errlen, "cannot start the raft thread");
        goto fail;
    }
    h->thread_started = true;
    pthread_mutex_lock(&h->mu);
    while (!h->loop_ready && !h->loop_failed)
        pthread_cond_wait(&h->cv, &h->mu);
    bool failed = h->loop_failed;
    pthread_mutex_unlock(&h->mu);
    if (failed) {
        snprintf(err, errlen, "%s", h->loop_err);
        raft_host_stop(h);
        *out = NULL;
        return -1;
    }
    return 0;
fail:
    *out = NULL;
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
    return -1;
}

void raft_host_stop(raft_host *h)
{
    if (h == NULL)
        return;
    if (h->thread_started) {
        pthread_mutex_lock(&h->mu);
        h->stopping = true;
        bool ready = h->loop_ready;
        pthread_mutex_unlock(&h->mu);
        if (ready)
            uv_async_send(&h->wake);
        pthread_join(h->thread, NULL);
        uv_loop_close(&h->loop);
    }
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void raft_host_wake(raft_host *h)
{
    uv_async_send(&h->wake);
}

struct raft *raft_host_raft(raft_host *h)
{
    return &h->raft;
}

void raft_host_log_changes(raft_host *h, const char *who)
{
    static const char *const names[] = {"unavailable", "follower", "candidate", "leader"};
    raft_id id = 0;
    const char *addr = NULL;
    raft_leader(&h->raft, &id, &addr);
    int st = raft_state(&h->raft);
    raft_term term = h->raft.current_term;
    if (term == h->logged_term && id == h->logged_leader && st == h->logged_state)
        return;
    const char *role = st >= 0 && st <= 3 ? names[st] : "unavailable";
    if (id == h->cfg.id && st == RAFT_LEADER)
        log_info("%s raft: term %llu: this member (%u) leads", who, (unsigned long long)term,
                 h->cfg.id);
    else if (id != 0)
        log_info("%s raft: term %llu: member %llu at %s leads; this member (%u) is a %s", who,
                 (unsigned long long)term, (unsigned long long)id, addr ? addr : "?", h->cfg.id,
                 role);
    else if (st == RAFT_CANDIDATE)
        log_info("%s raft: term %llu: no leader; this member (%u) stands for election (no "
                 "leader heard within the election timeout)", who, (unsigned long long)term,
                 h->cfg.id);
    else
        log_info("%s raft: term %llu: no leader known; this member (%u) is a %s", who,
                 (unsigned long long)term, h->cfg.id, role);
    h->logged_term = term;
    h->logged_leader = id;
    h->logged_state = st;
}

uint64_t raft_host_commits_lowered(const raft_host *h)
{
    return h->guard.commits_lowered;
}

uint64_t raft_host_replies_lowered(const raft_host *h)
{
    return h->guard.replies_lowered;
}
