/*
 * raft_group.c — see raft_group.h. Everything that touches libraft runs on
 * the loop thread; request threads only queue waits (under mu) and wake
 * the loop (uv_async_send, which is thread-safe). The wiring follows
 * oracle/raft_node.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <raft.h>

#include "engine_replica.h"
#include "httpd.h"
#include "log.h"
#include "raft_group.h"
#include "raft_host.h"
#include "timeutil.h"
#include "raft_identity.h"

/* One request thread's wait: for its batch to be applied, or for a read
 * barrier; or a proposal nobody waits for, whose callback gets the answer
 * (raft_group_submit).
 *
 * A wait's life, each step under g->mu:
 *
 *   made ---- enqueue (this member leads, its first barrier applied) ----> QUEUED
 *   made ---- enqueue refused (not leader, stopping) --------------------> answered at once
 *   QUEUED -- the loop's take_queue (taken = true) ---------------------> TAKEN
 *   QUEUED -- wait_for's deadline: unlinked, RG_UNAVAILABLE -------------> answered
 *   QUEUED -- fail_queued (leadership lost, stopping) -------------------> DONE
 *   TAKEN --- libraft's apply or barrier callback (finish) --------------> DONE
 *
 * Once TAKEN a wait has no deadline of its own: libraft answers every
 * entry and barrier it accepted (applied, or failed when leadership is
 * lost or the group stops), and the answer is the caller's only honest
 * outcome (a write may be committed by the next leader). DONE signals the
 * waiting thread, which owns the wait (on its stack) and frees its batch;
 * a submitted wait (cv NULL) is handed to its callback and freed by
 * finish, on the loop thread. */
typedef struct rg_wait {
    bool read;                /* a read barrier, else a proposal of batch */
    void *batch;              /* a copy, the wait's own */
    size_t len;
    rg_rc rc;
    bool done;
    bool taken;               /* proposed (or in a barrier): libraft answers it */
    pthread_cond_t *cv;       /* the waiting thread's (NULL: a submitted proposal) */
    void (*cb)(void *arg, rg_rc rc);
    void *arg;
    uint64_t queued_ns, taken_ns; /* monotonic: the stage metrics */
    struct rg_wait *next;
} rg_wait;

/* A proposal in flight: one entry, the batches of waits joined. */
typedef struct {
    struct raft_apply req;
    rg_wait *waits;           /* linked by next */
    int64_t nwaits;
} proposal;

/* Batches queued together are joined into one entry up to this size (one
 * append, one AppendEntries, one transaction per member to apply); a
 * bigger batch is an entry of its own. */
#define ENTRY_JOIN_MAX (1u << 20)

/* A read barrier in flight and the reads it serves. */
typedef struct {
    struct raft_barrier req;
    rg_wait *reads;
} read_barrier;

struct raft_group {
    raft_group_config cfg;
    raft_host *host;            /* libraft on its loop thread (common/raft_host.h) */
    struct raft_fsm fsm;
    pc_session *apply_session;  /* loop thread only */
    pc_session *image_session;  /* a snapshot's image: pinned on the loop thread, read on
                                   libraft's worker (fsm_snapshot_async), one at a time */
    pc_buf image;               /* the image being taken, owned until finalized */
    struct raft_buffer image_buf;/* what libraft is given of it */

    pthread_mutex_t mu;
    rg_wait *queue, **queue_tail;
    bool stopping;
    /* The new leader's first entry (loop thread only). */
    struct raft_barrier barrier;
    bool barrier_inflight, read_inflight;
    uint64_t barrier_term, ready_term;
    raft_group_status status;   /* under mu, refreshed by the loop */
    uint64_t term_seen;         /* loop thread: for the elections counter */

    metrics_series *m_term, *m_commit, *m_applied, *m_proposals, *m_failures, *m_elections;
    metrics_series *m_leader, *m_snapshots, *m_restores, *m_in_flight, *m_in_flight_max;
    metrics_series *m_entries, *m_skipped;
    /* percolator_raft_stage_seconds: where a request's time goes. */
    metrics_series *m_queue, *m_commit_wait, *m_read_wait, *m_apply;
    int64_t in_flight, in_flight_max;  /* loop thread: proposals libraft has not answered */
};

/* ---- the state machine: every entry is a write batch ---- */

/* An entry is the batch behind its length, 8 bytes big-endian, padded
 * with zeros to a multiple of 8 bytes: libraft 0.15 stores entries padded
 * so, but when it loads a stored batch of several entries at a restart it
 * finds an entry after one of another length at the wrong offset (seen:
 * 3 bytes off after an entry of 5 mod 8 bytes). */
#define ENTRY_HEADER 8

static void put_len(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_len(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static struct raft *R(raft_group *g)
{
    return raft_host_raft(g->host);
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    raft_group *g = fsm->data;
    /* libraft 0.15 passes no index: the entry being applied is the one
     * after the last applied (barriers advance it without calling us). */
    uint64_t index = raft_last_applied(R(g)) + 1;
    const uint8_t *p = buf->base;
    uint64_t len = buf->len >= ENTRY_HEADER ? get_len(p) : UINT64_MAX;
    uint64_t t0 = time_mono_ns();
    pc_rc rc = len <= buf->len - ENTRY_HEADER
                   ? pc_apply_batch(g->apply_session, p + ENTRY_HEADER, (size_t)len, index)
                   : PC_INVALID;
    metrics_observe(g->m_apply, (double)(time_mono_ns() - t0) / 1e9);
    *result = NULL;
    if (rc == PC_OK)
        return 0;
    char hex[33] = "";
    for (size_t i = 0; i < 16 && i < buf->len; i++)
        snprintf(hex + 2 * i, 3, "%02x", p[i]);
    /* An entry that does not decode (PC_INVALID: pc_batch_check refused it
     * before anything was written) changes nothing, on every member alike,
     * as the oracle does with a command it cannot apply: no leader of ours
     * proposes one, so it came from a peer that should not have sent it,
     * and one such peer must not stop the group (docs/DESIGN.md §7.2).
     * Anything else is the store failing: stop (§4.7). */
    if (rc == PC_INVALID) {
        metrics_inc(g->m_skipped, 1);
        log_error("service raft: entry %llu (%zu bytes: %s...) is not a write batch: skipped, "
                  "as on every member", (unsigned long long)index, buf->len, hex);
        return 0;
    }
    log_error("service raft: entry %llu (%zu bytes: %s..., batch %llu bytes) cannot be "
              "applied", (unsigned long long)index, buf->len, hex, (unsigned long long)len);
    g->cfg.apply_failed("applying a raft entry", rc);
    return 0;
}

/* A Raft snapshot is an image of the store (engine/image.c): every row of
 * the replicated tables and the applied index, from one WiredTiger
 * snapshot. Taken in three steps (libraft's fsm version 3) so that log
 * compaction holds up neither applies nor heartbeats (issue #28: reads
 * and writes stalled while the loop thread read the whole store):
 * fsm_snapshot pins the store's state on the loop thread, where nothing
 * is being applied (a snapshot transaction on image_session: cheap);
 * fsm_snapshot_async reads every row on libraft's worker thread while the
 * loop applies on; fsm_snapshot_finalize frees it on the loop thread once
 * libraft wrote it (or gave up). */
static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    raft_group *g = fsm->data;
    uint64_t at = 0;
    pc_rc rc = pc_image_pin(g->image_session, &at);
    if (rc != PC_OK) {
        log_warn("service raft: no snapshot taken: cannot pin the store's state (%d)", (int)rc);
        return RAFT_BUSY; /* libraft tries again at the next threshold */
    }
    *bufs = NULL;
    *n = 0;
    return 0;
}

/* libraft's worker thread: the pinned image's rows. */
static int fsm_snapshot_async(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    raft_group *g = fsm->data;
    uint64_t t0 = time_mono_ms();
    struct raft_buffer *b = &g->image_buf;
    pc_rc rc = pc_image_fill(g->image_session, &g->image);
    pc_rc unpinned = pc_image_unpin(g->image_session); /* the rows are read: let go */
    if (rc != PC_OK || unpinned != PC_OK) {
        log_warn("service raft: no snapshot taken: cannot read the store's image (%d)",
                 (int)(rc != PC_OK ? rc : unpinned));
        pc_buf_free(&g->image);
        return RAFT_IOERR;
    }
    b->base = g->image.data;
    b->len = g->image.len;
    *bufs = b;
    *n = 1;
    metrics_inc(g->m_snapshots, 1);
    log_info("service raft: an image of %zu bytes read in %llu ms, off the loop thread",
             b->len, (unsigned long long)(time_mono_ms() - t0));
    return 0;
}

/* The loop thread, once libraft is done with the snapshot (written, or
 * given up at any step): what the steps above took is freed. */
static int fsm_snapshot_finalize(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                                 unsigned *n)
{
    raft_group *g = fsm->data;
    (void)pc_image_unpin(g->image_session); /* pinned, if the worker never ran */
    *bufs = NULL;
    *n = 0;
    pc_buf_free(&g->image);
    return 0;
}

/* Install a snapshot: the leader's image replaces the store (skipped when
 * the store already applied past it: libraft hands the last snapshot back
 * at every start). A bad image is fatal, as a bad entry is. */
static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    raft_group *g = fsm->data;
    pc_rc rc = pc_image_install(g->apply_session, buf->base, buf->len);
    if (rc != PC_OK) {
        log_error("service raft: a snapshot of %zu bytes cannot be installed", buf->len);
        g->cfg.apply_failed("installing a raft snapshot", rc);
        return RAFT_MALFORMED;
    }
    log_info("service raft: installed a snapshot of %zu bytes", buf->len);
    metrics_inc(g->m_restores, 1);
    raft_free(buf->base); /* restore owns the buffer */
    return 0;
}

/* ---- the loop thread ---- */

static void refresh_status(raft_group *g)
{
    raft_id id = 0;
    const char *addr = NULL;
    raft_leader(R(g), &id, &addr);
    int st = raft_state(R(g));
    static const char *const names[] = {"unavailable", "follower", "candidate", "leader"};
    char lurl[RAFT_PEER_ADDR_MAX] = "";
    if (id != 0 && raft_host_heard_lately(g->host, id))
        raft_host_member_url(g->host, raft_member_of(id), lurl, sizeof lurl);
    uint64_t term = R(g)->current_term;
    raft_host_log_changes(g->host, "service");
    bool ready = st == RAFT_LEADER && g->ready_term == term;

    if (term > g->term_seen) {
        if (g->term_seen != 0)
            metrics_inc(g->m_elections, term - g->term_seen);
        g->term_seen = term;
    }
    metrics_set(g->m_term, (int64_t)term);
    metrics_set(g->m_commit, (int64_t)R(g)->commit_index);
    metrics_set(g->m_applied, (int64_t)raft_last_applied(R(g)));
    metrics_set(g->m_leader, ready ? 1 : 0);
    pthread_mutex_lock(&g->mu);
    g->status.role = st >= 0 && st <= 3 ? names[st] : "unavailable";
    g->status.leader_id = raft_member_of(id);
    snprintf(g->status.leader_http, sizeof(g->status.leader_http), "%s", lurl);
    g->status.term = term;
    g->status.commit_index = R(g)->commit_index;
    g->status.applied_index = raft_last_applied(R(g));
    g->status.ready_term = ready ? term : 0;
    pthread_mutex_unlock(&g->mu);
}

/* Answer a wait (mu held): wake its thread alone (dozens may wait: a
 * broadcast to all of them on every apply cost more than the apply), or
 * hand a submitted proposal's answer to its callback and free it. */
static void finish(raft_group *g, rg_wait *w, rg_rc rc)
{
    /* Taken: the time from libraft's taking it to its answer (a Raft
     * round and the apply here, or a barrier's round); never taken
     * (failed while queued): nothing to say about Raft. */
    if (w->taken_ns != 0)
        metrics_observe(w->read ? g->m_read_wait : g->m_commit_wait,
                        (double)(time_mono_ns() - w->taken_ns) / 1e9);
    w->rc = rc;
    w->done = true;
    if (w->cv != NULL) {
        pthread_cond_signal(w->cv);
    } else {
        w->cb(w->arg, rc);
        free(w->batch);
        free(w);
    }
}

static rg_rc from_status(int status)
{
    return status == 0 ? RG_OK : status == RAFT_NOTLEADER ? RG_NOT_LEADER : RG_UNAVAILABLE;
}

static void on_applied(struct raft_apply *req, int status, void *result)
{
    (void)result;
    proposal *p = (proposal *)req;
    raft_group *g = req->data;
    g->in_flight -= p->nwaits;
    metrics_set(g->m_in_flight, g->in_flight);
    if (status != 0) {
        log_warn("service raft: a proposal failed: %s", raft_strerror(status));
        metrics_inc(g->m_failures, (uint64_t)p->nwaits);
    }
    pthread_mutex_lock(&g->mu);
    for (rg_wait *w = p->waits, *next; w != NULL; w = next) {
        next = w->next; /* finish may free w */
        finish(g, w, from_status(status));
    }
    pthread_mutex_unlock(&g->mu);
    free(p);
    raft_host_wake(g->host); /* go on from the loop, not from inside libraft */
}

static void on_read_barrier(struct raft_barrier *req, int status)
{
    read_barrier *b = (read_barrier *)req;
    raft_group *g = req->data;
    pthread_mutex_lock(&g->mu);
    for (rg_wait *w = b->reads, *next; w != NULL; w = next) {
        next = w->next;
        finish(g, w, from_status(status));
    }
    pthread_mutex_unlock(&g->mu);
    g->read_inflight = false;
    free(b);
    raft_host_wake(g->host);
}

static void on_first_barrier(struct raft_barrier *req, int status)
{
    raft_group *g = req->data;
    g->barrier_inflight = false;
    if (status == 0)
        g->ready_term = g->barrier_term;
    else
        log_warn("service raft: the new leader's barrier failed: %s", raft_strerror(status));
    refresh_status(g);
    raft_host_wake(g->host);
}

/* Take the queue out (mu held); *reads gets the read waits, the return
 * value the proposals, each in arrival order. */
static rg_wait *take_queue(raft_group *g, rg_wait **reads)
{
    rg_wait *props = NULL, **pt = &props, **rt = reads;
    *reads = NULL;
    for (rg_wait *w = g->queue, *next; w != NULL; w = next) {
        next = w->next;
        w->next = NULL;
        w->taken = true;
        w->taken_ns = time_mono_ns();
        metrics_observe(g->m_queue, (double)(w->taken_ns - w->queued_ns) / 1e9);
        if (w->read) {
            *rt = w;
            rt = &w->next;
        } else {
            *pt = w;
            pt = &w->next;
        }
    }
    g->queue = NULL;
    g->queue_tail = &g->queue;
    return props;
}

/* Fail every queued wait with rc (mu held). */
static void fail_queued(raft_group *g, rg_rc rc)
{
    for (rg_wait *w = g->queue, *next; w != NULL; w = next) {
        next = w->next;
        finish(g, w, rc);
    }
    g->queue = NULL;
    g->queue_tail = &g->queue;
}

/* The entry for a batch (see ENTRY_HEADER); false: out of memory. */
static bool make_entry(struct raft_buffer *buf, const void *batch, size_t len)
{
    size_t size = ENTRY_HEADER + (len + 7) / 8 * 8;
    if ((buf->base = raft_calloc(1, size)) == NULL)
        return false;
    put_len(buf->base, len);
    memcpy((uint8_t *)buf->base + ENTRY_HEADER, batch, len);
    buf->len = size;
    return true;
}

/* Propose the batches of the waits in list (linked by next, n of them)
 * as one entry: joined in queue order (pc_batch_join), since each action
 * latched its keys, the order among them is free, and one entry costs
 * every member one append and one transaction where n would cost n. */
static void propose_entry(raft_group *g, rg_wait *list, int64_t n)
{
    proposal *p = calloc(1, sizeof(*p));
    pc_buf joined = {0};
    struct raft_buffer buf = {0};
    const void *batch = list->batch;
    size_t len = list->len;
    bool joined_ok = true;
    int rv = RAFT_NOMEM;

    for (rg_wait *w = list; n > 1 && w != NULL && joined_ok; w = w->next)
        joined_ok = pc_batch_join(&joined, w->batch, w->len) == PC_OK;
    if (n > 1) {
        batch = joined.data;
        len = joined.len;
    }
    if (!joined_ok)
        rv = RAFT_MALFORMED;
    else if (p != NULL && make_entry(&buf, batch, len)) {
        p->waits = list;
        p->nwaits = n;
        p->req.data = g;
        rv = raft_apply(R(g), &p->req, &buf, 1, on_applied);
    }
    pc_buf_free(&joined);
    if (rv == 0) {
        metrics_inc(g->m_proposals, (uint64_t)n);
        metrics_inc(g->m_entries, 1);
        g->in_flight += n;
        metrics_set(g->m_in_flight, g->in_flight);
        if (g->in_flight > g->in_flight_max)
            metrics_set(g->m_in_flight_max, g->in_flight_max = g->in_flight);
        return; /* libraft owns the buffer now */
    }
    log_warn("service raft: cannot propose: %s", raft_strerror(rv));
    metrics_inc(g->m_failures, (uint64_t)n);
    raft_free(buf.base);
    free(p);
    pthread_mutex_lock(&g->mu);
    for (rg_wait *w = list, *next; w != NULL; w = next) {
        next = w->next;
        finish(g, w, rv == RAFT_NOTLEADER ? RG_NOT_LEADER : RG_UNAVAILABLE);
    }
    pthread_mutex_unlock(&g->mu);
}

/* Cut the proposals (in queue order) into entries of at most
 * ENTRY_JOIN_MAX bytes and propose each. */
static void propose_all(raft_group *g, rg_wait *props)
{
    while (props != NULL) {
        rg_wait *first = props, **tail = &props->next;
        size_t bytes = props->len;
        int64_t n = 1;
        while (*tail != NULL && bytes + (*tail)->len <= ENTRY_JOIN_MAX) {
            bytes += (*tail)->len;
            n++;
            tail = &(*tail)->next;
        }
        props = *tail;
        *tail = NULL;
        propose_entry(g, first, n);
    }
}

/* Reads that arrive while a barrier is in flight wait for the next one:
 * the one in flight may have been appended before they arrived. */
static void barrier_for_reads(raft_group *g, rg_wait *reads)
{
    read_barrier *b = calloc(1, sizeof(*b));
    int rv = RAFT_NOMEM;
    if (b != NULL) {
        b->reads = reads;
        b->req.data = g;
        rv = raft_barrier(R(g), &b->req, on_read_barrier);
    }
    if (rv == 0) {
        g->read_inflight = true;
        return;
    }
    free(b);
    pthread_mutex_lock(&g->mu);
    for (rg_wait *w = reads, *next; w != NULL; w = next) {
        next = w->next;
        finish(g, w, rv == RAFT_NOTLEADER ? RG_NOT_LEADER : RG_UNAVAILABLE);
    }
    pthread_mutex_unlock(&g->mu);
}

/* Serve the queue: fail it on a follower, hold it until a new leader's
 * first barrier is applied (every earlier entry is then applied here, and
 * libraft 0.15's defect of DESIGN §7.1 mostly commits a barrier), then
 * propose every batch queued and one barrier for every read queued. */
static void serve(raft_group *g)
{
    if (g->barrier_inflight)
        return;
    bool leader = raft_state(R(g)) == RAFT_LEADER;
    pthread_mutex_lock(&g->mu);
    bool stopping = g->stopping;
    if (!leader || stopping) {
        if (g->queue != NULL)
            fail_queued(g, stopping ? RG_UNAVAILABLE : RG_NOT_LEADER);
        pthread_mutex_unlock(&g->mu);
        return;
    }
    bool empty = g->queue == NULL;
    pthread_mutex_unlock(&g->mu);
    if (g->ready_term != R(g)->current_term) {
        g->barrier.data = g;
        g->barrier_term = R(g)->current_term;
        int rv = raft_barrier(R(g), &g->barrier, on_first_barrier);
        if (rv == 0) {
            g->barrier_inflight = true;
            return;
        }
        log_warn("service raft: cannot append the leader's barrier: %s", raft_strerror(rv));
        pthread_mutex_lock(&g->mu);
        fail_queued(g, RG_UNAVAILABLE);
        pthread_mutex_unlock(&g->mu);
        return;
    }
    if (empty)
        return;
    rg_wait *reads = NULL, *props;
    pthread_mutex_lock(&g->mu);
    if (g->read_inflight) {
        /* Leave the reads queued for the next barrier; take the batches. */
        rg_wait *keep = NULL, **kt = &keep, **pt = &props;
        props = NULL;
        for (rg_wait *w = g->queue, *next; w != NULL; w = next) {
            next = w->next;
            w->next = NULL;
            if (w->read) {
                *kt = w;
                kt = &w->next;
            } else {
                w->taken = true;
                *pt = w;
                pt = &w->next;
            }
        }
        g->queue = keep;
        g->queue_tail = keep != NULL ? kt : &g->queue; /* never the local keep */
    } else {
        props = take_queue(g, &reads);
    }
    pthread_mutex_unlock(&g->mu);
    propose_all(g, props);
    if (reads != NULL)
        barrier_for_reads(g, reads);
}

/* The loop's work, every tick and whenever woken (common/raft_host.h). */
static void on_loop(void *arg)
{
    raft_group *g = arg;
    refresh_status(g);
    serve(g);
}

/* ---- the API ---- */

static void init_metrics(raft_group *g, metrics_registry *m)
{
    g->m_term = metrics_gauge1(m, "percolator_raft_term", "The Raft term this member is in.");
    g->m_commit = metrics_gauge1(m, "percolator_raft_commit_index",
                                 "The highest Raft entry this member knows committed.");
    g->m_applied = metrics_gauge1(m, "percolator_raft_applied_index",
                                  "The last Raft entry applied to this member's store.");
    g->m_leader = metrics_gauge1(m, "percolator_raft_leader",
                                 "1 while this member leads and may propose, else 0.");
    g->m_proposals = metrics_counter1(m, "percolator_raft_proposals_total",
                                      "Write batches this member proposed as leader (one an "
                                      "action, or a round of blind writes).");
    g->m_skipped = metrics_counter1(m, "percolator_raft_entries_skipped_total",
                                    "committed entries that were not write batches, skipped "
                                    "on every member (docs/DESIGN.md 7.2)");
    g->m_entries = metrics_counter1(m, "percolator_raft_entries_total",
                                    "Raft entries those batches went in: the batches queued "
                                    "together are joined into one entry.");
    g->m_failures = metrics_counter1(m, "percolator_raft_proposal_failures_total",
                                     "Proposals that failed (leadership lost, no quorum).");
    g->m_in_flight = metrics_gauge1(m, "percolator_raft_proposals_in_flight",
                                    "Batches this member proposed that libraft has not answered "
                                    "yet (committed and applied, or failed).");
    g->m_in_flight_max = metrics_gauge1(m, "percolator_raft_proposals_in_flight_max",
                                        "The most proposals this member had in flight at once "
                                        "since it started (actions on other keys run alongside).");
    g->m_elections = metrics_counter1(m, "percolator_raft_elections_total",
                                      "New terms this member has seen since it started.");
    g->m_snapshots = metrics_counter1(m, "percolator_raft_snapshots_total",
                                      "Snapshots (images of the store) this member took.");
    g->m_restores = metrics_counter1(m, "percolator_raft_snapshot_installs_total",
                                     "Snapshots this member installed (it lagged or lost its data).");
    metrics_family *stage = metrics_histogram(
        m, "percolator_raft_stage_seconds",
        "Where a write's or a read's time goes on the leader: queue (waiting for the loop to "
        "take it), commit (proposed until committed and applied here), read (a read barrier's "
        "round), apply (one entry applied to the store, every member)",
        "stage", NULL, metrics_latency_buckets, metrics_latency_nbuckets);
    g->m_queue = metrics_series_get(stage, "queue", NULL);
    g->m_commit_wait = metrics_series_get(stage, "commit", NULL);
    g->m_read_wait = metrics_series_get(stage, "read", NULL);
    g->m_apply = metrics_series_get(stage, "apply", NULL);
}

int raft_group_start(const raft_group_config *cfg, metrics_registry *m, raft_group **out,
                     char *err, size_t errlen)
{
    raft_group *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    g->cfg = *cfg;
    g->queue_tail = &g->queue;
    g->status.role = "unavailable";
    pthread_mutex_init(&g->mu, NULL);
    init_metrics(g, m);
    if (pc_session_open(cfg->engine, &g->apply_session) != PC_OK ||
        pc_session_open(cfg->engine, &g->image_session) != PC_OK) {
        snprintf(err, errlen, "cannot open a storage session for the raft applier");
        goto fail;
    }
    memset(&g->fsm, 0, sizeof(g->fsm));
    g->fsm.version = 3;
    g->fsm.data = g;
    g->fsm.apply = fsm_apply;
    g->fsm.snapshot = fsm_snapshot;
    g->fsm.snapshot_async = fsm_snapshot_async;
    g->fsm.snapshot_finalize = fsm_snapshot_finalize;
    g->fsm.restore = fsm_restore;
    /* Log compaction: an image every snapshot_entries entries, keeping a
     * tenth of that behind it for members that lag a little. */
    unsigned every = cfg->snapshot_entries ? cfg->snapshot_entries : 8192;
    raft_host_config hc = {
        .kind = "service", .id = cfg->id, .dir = cfg->dir, .peers = cfg->peers, .npeers = cfg->npeers,
        .fsm = &g->fsm, .election_ms = cfg->election_ms, .heartbeat_ms = cfg->heartbeat_ms,
        .snapshot_threshold = every,
        .snapshot_trailing = every / 10 > 0 ? every / 10 : 1, .serve = on_loop, .arg = g,
        .image_first = cfg->restored,
        /* An entry is one request's batch (each key and value at most twice:
         * a data row and its lock or write record) or batches joined up to
         * ENTRY_JOIN_MAX. */
        .max_entry_bytes = 2 * (uint64_t)HTTPD_DEFAULT_MAX_BODY + (1u << 20),
        .peer_tls = cfg->peer_tls, .listen_fd = cfg->listen_fd, .metrics = m,
    };
    if (raft_host_start(&hc, &g->host, err, errlen) != 0)
        goto fail;
    *out = g;
    return 0;
fail:
    if (g->apply_session != NULL)
        pc_session_close(g->apply_session);
    if (g->image_session != NULL)
        pc_session_close(g->image_session);
    pthread_mutex_destroy(&g->mu);
    free(g);
    return -1;
}

void raft_group_stop(raft_group *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    g->stopping = true; /* serve fails what is queued; libraft what is in flight */
    pthread_mutex_unlock(&g->mu);
    raft_host_stop(g->host);
    pc_session_close(g->apply_session);
    pc_session_close(g->image_session); /* its transaction, if a snapshot never finished */
    pc_buf_free(&g->image);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* Queue w, wake the loop, wait for the answer: while w is still queued
 * at most wait_ms (then it is taken out: RG_UNAVAILABLE); once taken,
 * until libraft answers. */
/* Queue w unless this member cannot propose now (mu held): RG_OK, or why. */
static rg_rc enqueue(raft_group *g, rg_wait *w)
{
    if (g->stopping || g->status.ready_term == 0)
        return g->stopping || g->status.leader_id == g->cfg.id ? RG_UNAVAILABLE : RG_NOT_LEADER;
    w->queued_ns = time_mono_ns();
    *g->queue_tail = w;
    g->queue_tail = &w->next;
    return RG_OK;
}

static rg_rc wait_for(raft_group *g, rg_wait *w, unsigned wait_ms)
{
    pthread_cond_t cv;
    pthread_condattr_t ca;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)wait_ms * 1000000ull;
    until.tv_sec += (time_t)(ns / 1000000000ull);
    until.tv_nsec = (long)(ns % 1000000000ull);

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);
    w->cv = &cv;
    pthread_mutex_lock(&g->mu);
    rg_rc queued = enqueue(g, w);
    pthread_mutex_unlock(&g->mu);
    if (queued != RG_OK) {
        pthread_cond_destroy(&cv);
        return queued;
    }
    raft_host_wake(g->host);

    pthread_mutex_lock(&g->mu);
    while (!w->done) {
        if (w->taken) {
            pthread_cond_wait(&cv, &g->mu);
            continue;
        }
        if (pthread_cond_timedwait(&cv, &g->mu, &until) == ETIMEDOUT && !w->done &&
            !w->taken) {
            for (rg_wait **p = &g->queue; *p != NULL; p = &(*p)->next) {
                if (*p == w) {
                    *p = w->next;
                    if (g->queue_tail == &w->next)
                        g->queue_tail = p;
                    break;
                }
            }
            w->rc = RG_UNAVAILABLE;
            break;
        }
    }
    pthread_mutex_unlock(&g->mu);
    pthread_cond_destroy(&cv);
    return w->rc;
}

/* A wait's own copy of a batch; false: out of memory. */
static bool copy_batch(rg_wait *w, const void *batch, size_t len)
{
    if ((w->batch = malloc(len > 0 ? len : 1)) == NULL)
        return false;
    memcpy(w->batch, batch, len);
    w->len = len;
    return true;
}

rg_rc raft_group_propose(raft_group *g, const void *batch, size_t len, unsigned wait_ms)
{
    rg_wait w = {.read = false};
    if (!copy_batch(&w, batch, len))
        return RG_UNAVAILABLE;
    rg_rc rc = wait_for(g, &w, wait_ms);
    free(w.batch);
    return rc;
}

rg_rc raft_group_submit(raft_group *g, const void *batch, size_t len,
                        void (*done)(void *arg, rg_rc rc), void *arg)
{
    rg_wait *w = calloc(1, sizeof(*w));
    if (w == NULL || !copy_batch(w, batch, len)) {
        free(w);
        return RG_UNAVAILABLE;
    }
    w->cb = done;
    w->arg = arg;
    pthread_mutex_lock(&g->mu);
    rg_rc rc = enqueue(g, w);
    pthread_mutex_unlock(&g->mu);
    if (rc != RG_OK) {
        free(w->batch);
        free(w);
        return rc;
    }
    raft_host_wake(g->host);
    return RG_OK;
}

rg_rc raft_group_read_barrier(raft_group *g, unsigned wait_ms)
{
    rg_wait w = {.read = true};
    return wait_for(g, &w, wait_ms);
}

void raft_group_get_status(raft_group *g, raft_group_status *st)
{
    pthread_mutex_lock(&g->mu);
    *st = g->status;
    pthread_mutex_unlock(&g->mu);
    st->membership = g->host != NULL ? raft_host_membership(g->host) : "waiting";
}

struct raft_host *raft_group_host(raft_group *g)
{
    return g->host;
}
