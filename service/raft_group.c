/*
 * raft_group.c — see raft_group.h. Everything that touches libraft runs on
 * the loop thread; request threads queue their batches and reads on the
 * member's proposer (common/raft_proposer.h), which wakes the loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>

#include "engine_replica.h"
#include "failpoint.h"
#include "httpd.h"
#include "log.h"
#include "raft_group.h"
#include "raft_host.h"
#include "timeutil.h"

/* One request's batch: a proposal on the member's proposer. A submitted
 * one (raft_group_submit) is the proposer's until it calls rg_done, which
 * hands the answer on and frees it. */
typedef struct {
    rp_wait base;             /* first: the proposer's part */
    void *batch;              /* a copy, the wait's own */
    size_t len;
    bool alone;               /* an entry of its own: it sets a region row (a split), and
                               * a batch joined after it would be checked against the
                               * range before it */
    void (*cb)(void *arg, rp_rc rc);
    void *arg;
} rg_wait;

/* fsm_apply's result for an entry every member skipped (nothing written):
 * its proposal is answered RP_SKIPPED, not as written (on_applied). */
static char entry_skipped;

/* Batches queued together are joined into one entry up to this size (one
 * append, one AppendEntries, one transaction per member to apply); a
 * bigger batch is an entry of its own. */
#define ENTRY_JOIN_MAX (1u << 20)

struct raft_group {
    replicator base;            /* first: the service's write path (replicator.h) */
    raft_group_config cfg;      /* its start and end: copies, in keys; loop thread */
    pc_buf keys;                /* a region's start, then its end (its row's, once the
                                   store has one: follow_row) */
    uint64_t epoch;             /* its row's epoch; 0: none yet */
    char kind[32];              /* "service", or "region N": logs, and the group's id */
    raft_host *host;            /* libraft on its loop thread (common/raft_host.h) */
    struct raft_fsm fsm;
    pc_session *apply_session;  /* loop thread only */
    pc_session *image_session;  /* a snapshot's image: pinned on the loop thread, read on
                                   libraft's worker (fsm_snapshot_async), one at a time */
    pc_buf image;               /* the image being taken, owned until finalized */
    pc_buf image_keys;          /* the range it was pinned with (the worker's copy) */
    pc_slice image_start, image_end;
    struct raft_buffer image_buf;/* what libraft is given of it */

    uint64_t term_seen;         /* loop thread: for the elections counter */

    metrics_series *m_term, *m_commit, *m_applied, *m_elections;
    metrics_series *m_leader, *m_snapshots, *m_restores, *m_skipped, *m_apply;
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

/* Apply one batch at index: the node's one log's, or the region's, which
 * the engine refuses (PC_INVALID, nothing written) unless all its keys
 * are the region's and it sets no named value (they are the node's: a
 * region's image carries none, so a replica that catches up by one would
 * miss it). Its safe point may rise (GC runs on each region's leader;
 * images carry it). */
static pc_rc apply_batch(raft_group *g, const void *batch, size_t len, uint64_t index)
{
    if (g->cfg.region == 0)
        return pc_apply_batch(g->apply_session, batch, len, index);
    return pc_apply_region_batch(g->apply_session, g->cfg.region, g->cfg.start, g->cfg.end,
                                 batch, len, index);
}

/* The range as the group's own copy: [start, end) into keys (end.data
 * NULL: to the end), start and end pointing into it. */
static pc_rc copy_range(pc_slice start, pc_slice end, pc_buf *keys, pc_slice *kstart,
                        pc_slice *kend)
{
    keys->len = 0;
    if (pc_buf_append(keys, start.data, start.len) != PC_OK ||
        (end.data != NULL && pc_buf_append(keys, end.data, end.len) != PC_OK))
        return PC_NOMEM;
    *kstart = (pc_slice){keys->data != NULL ? keys->data : "", start.len};
    *kend = end.data != NULL ? (pc_slice){keys->data + start.len, end.len} : (pc_slice){NULL, 0};
    return PC_OK;
}

/* A region's range follows its row (DESIGN §6.5 step 6 (f)): read again
 * after an entry that set a row and after an image, so a split in the
 * region's log narrows it on every replica at the same index, and a
 * replica that missed the split takes the image's range. Loop thread. */
static pc_rc follow_row(raft_group *g)
{
    pc_buf mem = {0};
    pc_region_row r;
    pc_rc rc = pc_region_row_get(g->apply_session, g->cfg.region, &r, &mem);
    if (rc == PC_OK && r.epoch != g->epoch) {
        pc_buf keys = {0};
        pc_slice start, end;
        rc = copy_range(r.start, r.end, &keys, &start, &end);
        if (rc == PC_OK) {
            pc_buf_free(&g->keys);
            g->keys = keys;
            g->cfg.start = start;
            g->cfg.end = end;
            g->epoch = r.epoch;
            log_info("%s raft: its range is its row's at epoch %llu (%zu-byte start, %s)",
                     g->kind, (unsigned long long)r.epoch, r.start.len,
                     r.end.data != NULL ? "an end" : "to the end of the keyspace");
        } else {
            pc_buf_free(&keys);
        }
    }
    pc_buf_free(&mem);
    return rc == PC_NOT_FOUND ? PC_OK : rc;
}

static int sets_row(void *arg, const pc_region_row *r)
{
    (void)r;
    *(bool *)arg = true;
    return 1;
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    raft_group *g = fsm->data;
    /* libraft 0.15 passes no index: the entry being applied is the one
     * after the last applied (barriers advance it without calling us). */
    uint64_t index = raft_last_applied(R(g)) + 1;
    const uint8_t *p = buf->base;
    uint64_t len = buf->len >= ENTRY_HEADER ? get_len(p) : UINT64_MAX;
    failpoint(g->apply_session, "raft_apply"); /* tests: a member slow to apply */
    uint64_t t0 = time_mono_ns();
    const apply_listener *hear = &g->cfg.listen;
    if (hear->begin != NULL)
        hear->begin(hear->arg);
    pc_rc rc = len <= buf->len - ENTRY_HEADER
                   ? apply_batch(g, p + ENTRY_HEADER, (size_t)len, index)
                   : PC_INVALID;
    bool row = false;
    if (rc == PC_OK && g->cfg.region != 0 &&
        pc_batch_region_rows(p + ENTRY_HEADER, (size_t)len, sets_row, &row) == PC_OK && row)
        rc = follow_row(g);
    if (rc == PC_OK && row && hear->rows != NULL)
        hear->rows(hear->arg);
    if (rc == PC_OK && hear->batch != NULL)
        hear->batch(hear->arg, p + ENTRY_HEADER, (size_t)len);
    if (hear->end != NULL)
        hear->end(hear->arg);
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
    uint64_t passed = 0;
    if (rc == PC_INVALID && g->cfg.region != 0 &&
        pc_region_applied_index(g->apply_session, g->cfg.region, &passed) == PC_OK &&
        index <= passed) {
        /* A replay (a restart) of an entry this store passed already, now
         * outside the range a later split narrowed: nothing to do. */
        log_debug("%s raft: entry %llu replayed, applied before the region's range narrowed",
                  g->kind, (unsigned long long)index);
        return 0;
    }
    if (rc == PC_INVALID) {
        *result = &entry_skipped;
        metrics_inc(g->m_skipped, 1);
        log_error("%s raft: entry %llu (%zu bytes: %s...) is not a write batch%s: skipped, as "
                  "on every member", g->kind, (unsigned long long)index, buf->len, hex,
                  g->cfg.region != 0 ? " of the region's (its keys, its rows or a split of "
                                       "them at a new epoch, no named value)"
                                     : "");
        return 0;
    }
    log_error("%s raft: entry %llu (%zu bytes: %s..., batch %llu bytes) cannot be applied",
              g->kind, (unsigned long long)index, buf->len, hex, (unsigned long long)len);
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
    pc_rc rc = pc_region_image_pin(g->image_session, g->cfg.region, &at);
    /* The worker reads the range as it is now; the loop may change the
     * group's own meanwhile (a split applied). */
    if (rc == PC_OK && g->cfg.region != 0 &&
        copy_range(g->cfg.start, g->cfg.end, &g->image_keys, &g->image_start, &g->image_end) !=
            PC_OK) {
        (void)pc_image_unpin(g->image_session);
        rc = PC_NOMEM;
    }
    if (rc != PC_OK) {
        log_warn("%s raft: no snapshot taken: cannot pin the store's state (%d)", g->kind,
                 (int)rc);
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
    pc_rc rc = g->cfg.region == 0
                   ? pc_image_fill(g->image_session, &g->image)
                   : pc_region_image_fill(g->image_session, g->image_start, g->image_end,
                                          &g->image);
    pc_rc unpinned = pc_image_unpin(g->image_session); /* the rows are read: let go */
    if (rc != PC_OK || unpinned != PC_OK) {
        log_warn("%s raft: no snapshot taken: cannot read the store's image (%d)", g->kind,
                 (int)(rc != PC_OK ? rc : unpinned));
        pc_buf_free(&g->image);
        return RAFT_IOERR;
    }
    b->base = g->image.data;
    b->len = g->image.len;
    *bufs = b;
    *n = 1;
    metrics_inc(g->m_snapshots, 1);
    log_info("%s raft: an image of %zu bytes at index %llu read in %llu ms, off the loop "
             "thread", g->kind, b->len, (unsigned long long)pc_image_index(b->base, b->len),
             (unsigned long long)(time_mono_ms() - t0));
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
    pc_buf_free(&g->image_keys);
    return 0;
}

/* Install a snapshot: the leader's image replaces the store (skipped when
 * the store already applied past it: libraft hands the last snapshot back
 * at every start). A bad image is fatal, as a bad entry is. */
static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    raft_group *g = fsm->data;
    /* libraft restores its last snapshot at every start too; the store,
     * which outlives the process, usually applied it and more already,
     * and then keeps its state (pc_image_install skips it). */
    uint64_t at = pc_image_index(buf->base, buf->len), applied = 0;
    uint64_t region = g->cfg.region;
    bool older = (region == 0 ? pc_applied_index(g->apply_session, &applied)
                              : pc_region_applied_index(g->apply_session, region, &applied)) ==
                     PC_OK &&
                 at != 0 && at <= applied;
    pc_rc rc = region == 0 ? pc_image_install(g->apply_session, buf->base, buf->len)
                           : pc_region_image_install(g->apply_session, region, g->cfg.start,
                                                     g->cfg.end, buf->base, buf->len);
    if (rc == PC_OK && region != 0)
        rc = follow_row(g); /* the image's range, if it narrowed ours */
    if (rc != PC_OK) {
        log_error("%s raft: a snapshot of %zu bytes cannot be installed", g->kind, buf->len);
        g->cfg.apply_failed("installing a raft snapshot", rc);
        return RAFT_MALFORMED;
    }
    if (older) {
        log_info("%s raft: a snapshot of %zu bytes at index %llu is older than the store "
                 "(applied up to %llu): the store is kept", g->kind, buf->len, (unsigned long long)at,
                 (unsigned long long)applied);
    } else {
        if (g->cfg.listen.lost != NULL)
            g->cfg.listen.lost(g->cfg.listen.arg); /* its changes were never told */
        if (region != 0 && g->cfg.listen.rows != NULL)
            g->cfg.listen.rows(g->cfg.listen.arg); /* its row may be narrower */
        log_info("%s raft: installed a snapshot of %zu bytes at index %llu", g->kind, buf->len,
                 (unsigned long long)at);
        metrics_inc(g->m_restores, 1);
    }
    raft_free(buf->base); /* restore owns the buffer */
    return 0;
}

/* ---- the loop thread ---- */

static const replicator_ops raft_ops;

static raft_proposer *P(raft_group *g)
{
    return raft_host_proposer(g->host);
}

/* The gauges and the elections counter, from the proposer's status. */
static void refresh_metrics(raft_group *g)
{
    rp_status st;
    rp_get_status(P(g), &st);
    raft_host_log_changes(g->host, "service");
    if (st.term > g->term_seen) {
        if (g->term_seen != 0)
            metrics_inc(g->m_elections, st.term - g->term_seen);
        g->term_seen = st.term;
    }
    metrics_set(g->m_term, (int64_t)st.term);
    metrics_set(g->m_commit, (int64_t)st.commit_index);
    metrics_set(g->m_applied, (int64_t)st.applied_index);
    metrics_set(g->m_leader, st.ready_term != 0 ? 1 : 0);
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
static void propose_entry(raft_group *g, rp_wait *list, size_t n)
{
    pc_buf joined = {0};
    struct raft_buffer buf = {0};
    const rg_wait *w0 = (const rg_wait *)list;
    const void *batch = w0->batch;
    size_t len = w0->len;
    bool joined_ok = true;

    for (rp_wait *w = list; n > 1 && w != NULL && joined_ok; w = w->next)
        joined_ok = pc_batch_join(&joined, ((rg_wait *)w)->batch, ((rg_wait *)w)->len) == PC_OK;
    if (n > 1) {
        batch = joined.data;
        len = joined.len;
    }
    bool made = joined_ok && make_entry(&buf, batch, len);
    pc_buf_free(&joined);
    if (!made) {
        log_warn("service raft: cannot make an entry of %zu batches (%s)", n,
                 joined_ok ? "out of memory" : "a batch does not join");
        rp_finish(P(g), list, RP_UNAVAILABLE);
        return;
    }
    (void)rp_apply(P(g), R(g), list, &buf); /* answers the waits itself if it fails */
}

/* Cut the proposals (in queue order) into entries of at most
 * ENTRY_JOIN_MAX bytes and propose each; one that sets a region row goes
 * alone (a split: whatever follows it is checked against the range it
 * makes, in an entry after it). */
static void propose_all(raft_group *g, rp_wait *props)
{
    while (props != NULL) {
        rp_wait *first = props, **tail = &props->next;
        size_t bytes = ((rg_wait *)props)->len, n = 1;
        bool alone = ((rg_wait *)props)->alone;
        while (!alone && *tail != NULL && !((rg_wait *)*tail)->alone &&
               bytes + ((rg_wait *)*tail)->len <= ENTRY_JOIN_MAX) {
            bytes += ((rg_wait *)*tail)->len;
            n++;
            tail = &(*tail)->next;
        }
        props = *tail;
        *tail = NULL;
        propose_entry(g, first, n);
    }
}

/* An entry's outcome, before its waits are answered (rp_config.applied):
 * one every member skipped wrote nothing, and its writers must not hear
 * that it did (a batch of a region's keys queued behind the split that
 * moved them: DESIGN §6.5, step 6). */
static rp_rc on_applied(void *arg, unsigned kind, rp_wait *list, int status, void *result)
{
    (void)arg;
    (void)kind;
    (void)list;
    (void)status;
    return result == &entry_skipped ? RP_SKIPPED : RP_OK;
}

/* The loop's work, every tick and whenever woken, after the proposer's
 * step (common/raft_host.h): once this member is a ready leader, every
 * batch queued goes in entries. */
static void on_loop(void *arg)
{
    raft_group *g = arg;
    refresh_metrics(g);
    if (rp_ready(P(g), R(g)))
        propose_all(g, rp_take(P(g), NULL, NULL));
}

/* ---- the API ---- */

/* A series of the group: the family's one, or with region (a region's
 * group, --region-logs) the region's of a family labelled by region. */
static metrics_series *gauge(metrics_registry *m, const char *name, const char *help,
                             const char *region)
{
    return region == NULL ? metrics_gauge1(m, name, help)
                          : metrics_series_get(metrics_gauge(m, name, help, "region", NULL),
                                               region, NULL);
}

static metrics_series *counter(metrics_registry *m, const char *name, const char *help,
                               const char *region)
{
    return region == NULL ? metrics_counter1(m, name, help)
                          : metrics_series_get(metrics_counter(m, name, help, "region", NULL),
                                               region, NULL);
}

/* The group's metrics: its own, and the proposer's series in pc; with
 * region, each series the region's (a node's regions share the families;
 * past METRICS_MAX_SERIES regions a region's updates go nowhere). */
static void init_metrics(raft_group *g, metrics_registry *m, rp_config *pc, const char *region)
{
    g->m_term = gauge(m, "percolator_raft_term", "The Raft term this member is in.", region);
    g->m_commit = gauge(m, "percolator_raft_commit_index",
                        "The highest Raft entry this member knows committed.", region);
    g->m_applied = gauge(m, "percolator_raft_applied_index",
                         "The last Raft entry applied to this member's store.", region);
    g->m_leader = gauge(m, "percolator_raft_leader",
                        "1 while this member leads and may propose, else 0.", region);
    pc->m_proposals = counter(m, "percolator_raft_proposals_total",
                              "Write batches this member proposed as leader (one an "
                              "action, or a round of blind writes).",
                              region);
    g->m_skipped = counter(m, "percolator_raft_entries_skipped_total",
                           "committed entries that were not write batches, skipped "
                           "on every member (docs/DESIGN.md 7.2)",
                           region);
    pc->m_entries = counter(m, "percolator_raft_entries_total",
                            "Raft entries those batches went in: the batches queued "
                            "together are joined into one entry.",
                            region);
    pc->m_failures = counter(m, "percolator_raft_proposal_failures_total",
                             "Proposals that failed (leadership lost, no quorum).", region);
    pc->m_in_flight = gauge(m, "percolator_raft_proposals_in_flight",
                            "Batches this member proposed that libraft has not answered "
                            "yet (committed and applied, or failed).",
                            region);
    pc->m_lease_reads = counter(m, "percolator_raft_lease_reads_total",
                                "Reads this member answered as leader under its "
                                "lease, without a read barrier's round.",
                                region);
    pc->m_in_flight_max = gauge(m, "percolator_raft_proposals_in_flight_max",
                                "The most proposals this member had in flight at once "
                                "since it started (actions on other keys run alongside).",
                                region);
    g->m_elections = counter(m, "percolator_raft_elections_total",
                             "New terms this member has seen since it started.", region);
    g->m_snapshots = counter(m, "percolator_raft_snapshots_total",
                             "Snapshots (images of the store) this member took.", region);
    g->m_restores =
        counter(m, "percolator_raft_snapshot_installs_total",
                "Snapshots this member installed (it lagged or lost its data).", region);
    metrics_family *stage = metrics_histogram(
        m, "percolator_raft_stage_seconds",
        "Where a write's or a read's time goes on the leader: queue (waiting for the loop to "
        "take it), commit (proposed until committed and applied here), read (a read barrier's "
        "round), apply (one entry applied to the store, every member)",
        "stage", region != NULL ? "region" : NULL, metrics_latency_buckets,
        metrics_latency_nbuckets);
    pc->m_queue = metrics_series_get(stage, "queue", region);
    pc->m_commit = metrics_series_get(stage, "commit", region);
    pc->m_read = metrics_series_get(stage, "read", region);
    g->m_apply = metrics_series_get(stage, "apply", region);
}

int raft_group_start(const raft_group_config *cfg, metrics_registry *m, raft_group **out,
                     char *err, size_t errlen)
{
    raft_group *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    g->base.ops = &raft_ops;
    g->cfg = *cfg;
    snprintf(g->kind, sizeof g->kind, "service");
    if (cfg->region != 0 && cfg->end.data != NULL && cfg->end.len == 0) {
        snprintf(err, errlen, "region %llu: an empty end key (no key is below it)",
                 (unsigned long long)cfg->region);
        free(g);
        return -1;
    }
    if (cfg->region != 0) {
        /* the range's keys, the group's own (start, then end) */
        snprintf(g->kind, sizeof g->kind, "region %llu", (unsigned long long)cfg->region);
        if (copy_range(cfg->start, cfg->end, &g->keys, &g->cfg.start, &g->cfg.end) != PC_OK) {
            snprintf(err, errlen, "out of memory");
            pc_buf_free(&g->keys);
            free(g);
            return -1;
        }
    }
    /* A new leader refuses writes until its first barrier is applied: the
     * service takes over its leader-only state then (service/takeover.c). */
    rp_config pc = {.queue_unready = false,
                    .applied = on_applied,
                    /* Reads under the leader's lease (DESIGN §9 item 3). */
                    .lease_ms = (cfg->election_ms ? cfg->election_ms : 1000) * 4 / 5};
    char region[24];
    snprintf(region, sizeof region, "%llu", (unsigned long long)cfg->region);
    init_metrics(g, m, &pc, cfg->region != 0 ? region : NULL);
    if (pc_session_open(cfg->engine, &g->apply_session) != PC_OK ||
        pc_session_open(cfg->engine, &g->image_session) != PC_OK) {
        snprintf(err, errlen, "cannot open a storage session for the raft applier");
        goto fail;
    }
    /* The store's row, once it has one, is the range: the configuration's
     * is where the region began (a split since narrowed it). */
    if (cfg->region != 0 && follow_row(g) != PC_OK) {
        snprintf(err, errlen, "cannot read region %llu's row in the store",
                 (unsigned long long)cfg->region);
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
     * quarter more than that behind it (libraft takes the next image a
     * few entries late): a member that installs an image can go on from
     * the log even when the leader took its next image meanwhile (with a
     * tenth kept, as before, a member catching up under writes needed a
     * second image of the store: docs/DESIGN.md 7.3). */
    unsigned every = cfg->snapshot_entries ? cfg->snapshot_entries : 8192;
    raft_host_config hc = {
        .kind = g->kind, .id = cfg->id, .dir = cfg->dir, .peers = cfg->peers, .npeers = cfg->npeers,
        .fsm = &g->fsm, .election_ms = cfg->election_ms, .heartbeat_ms = cfg->heartbeat_ms,
        .snapshot_threshold = every,
        .snapshot_trailing = every + every / 4, .serve = on_loop, .arg = g,
        .stagger_snapshots = true, /* one member's image at a time (raft_host.c stagger) */
        .image_first = cfg->restored,
        /* An entry is one request's batch (each key and value at most twice:
         * a data row and its lock or write record) or batches joined up to
         * ENTRY_JOIN_MAX. */
        .max_entry_bytes = 2 * (uint64_t)HTTPD_DEFAULT_MAX_BODY + (1u << 20),
        .peer_tls = cfg->peer_tls, .listen_fd = cfg->listen_fd, .metrics = m,
        .proposer = pc, .loop = cfg->loop, .net = cfg->net, .net_group = cfg->region,
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
    pc_buf_free(&g->keys);
    free(g);
    return -1;
}

void raft_group_stop(raft_group *g)
{
    if (g == NULL)
        return;
    raft_host_stop(g->host); /* the proposer fails what is queued, libraft what it holds */
    pc_session_close(g->apply_session);
    pc_session_close(g->image_session); /* its transaction, if a snapshot never finished */
    pc_buf_free(&g->image);
    pc_buf_free(&g->image_keys);
    pc_buf_free(&g->keys);
    free(g);
}

/* A wait's own copy of a batch (whether it goes alone: a region's batch
 * that sets a row); false: out of memory. */
static bool copy_batch(raft_group *g, rg_wait *w, const void *batch, size_t len)
{
    if ((w->batch = malloc(len > 0 ? len : 1)) == NULL)
        return false;
    memcpy(w->batch, batch, len);
    w->len = len;
    w->alone = false;
    if (g->cfg.region != 0)
        (void)pc_batch_region_rows(batch, len, sets_row, &w->alone);
    return true;
}

static raft_group *G(replicator *r)
{
    return (raft_group *)r;
}

static uint64_t rg_ready_term(replicator *r)
{
    return rp_ready_term(P(G(r)));
}

static rp_rc rg_propose(replicator *r, const void *batch, size_t len, uint64_t term,
                        unsigned wait_ms)
{
    rg_wait w = {.base.read = false, .base.term = term};
    if (!copy_batch(G(r), &w, batch, len))
        return RP_UNAVAILABLE;
    rp_rc rc = rp_wait_for(P(G(r)), &w.base, wait_ms);
    free(w.batch);
    return rc;
}

/* A submitted batch's answer (the proposer's mutex held): hand it on, free. */
static void rg_done(rp_wait *base, rp_rc rc)
{
    rg_wait *w = (rg_wait *)base;
    w->cb(w->arg, rc);
    free(w->batch);
    free(w);
}

static rp_rc rg_submit(replicator *r, const void *batch, size_t len, uint64_t term,
                       replicator_done done, void *arg)
{
    rg_wait *w = calloc(1, sizeof(*w));
    if (w == NULL || !copy_batch(G(r), w, batch, len)) {
        free(w);
        return RP_UNAVAILABLE;
    }
    w->base.done = rg_done;
    w->base.term = term;
    w->cb = done;
    w->arg = arg;
    rp_rc rc = rp_submit(P(G(r)), &w->base);
    if (rc != RP_OK) {
        free(w->batch);
        free(w);
    }
    return rc;
}

static rp_rc rg_read_barrier(replicator *r, unsigned wait_ms)
{
    rp_wait w = {.read = true};
    return rp_wait_for(P(G(r)), &w, wait_ms);
}

static bool rg_read_now(replicator *r)
{
    return rp_read_now(P(G(r)));
}

static uint64_t rg_failures(replicator *r)
{
    return rp_failures(P(G(r)));
}

static void rg_status(replicator *r, rp_status *st)
{
    raft_host_status(G(r)->host, st);
}

static const replicator_ops raft_ops = {
    .ready_term = rg_ready_term,
    .propose = rg_propose,
    .submit = rg_submit,
    .read_barrier = rg_read_barrier,
    .read_now = rg_read_now,
    .failures = rg_failures,
    .status = rg_status,
};

replicator *raft_group_replicator(raft_group *g)
{
    return &g->base;
}

void raft_group_get_status(raft_group *g, raft_group_status *st)
{
    raft_host_status(g->host, st);
}

struct raft_host *raft_group_host(raft_group *g)
{
    return g->host;
}

int raft_group_all_caught_up(raft_group *g, uint64_t max_lag, char *why, size_t whylen)
{
    raft_host_view v;
    raft_host_view_get(g->host, &v);
    if (!v.leads) {
        snprintf(why, whylen, "not the leader");
        return -1;
    }
    /* Well inside the entries kept behind an image (its trailing), so
     * that what is proposed now reaches every member by the log. */
    uint64_t every = g->cfg.snapshot_entries ? g->cfg.snapshot_entries : 8192;
    if (max_lag > (every + every / 4) / 2)
        max_lag = (every + every / 4) / 2;
    for (size_t i = 0; i < v.n; i++) {
        const raft_host_member *m = &v.members[i];
        if (strcmp(m->role, "voter") != 0 || !m->reachable || m->match_index < 0 ||
            (uint64_t)m->match_index + max_lag < v.last_index) {
            snprintf(why, whylen, "member %u is %s", m->member,
                     strcmp(m->role, "voter") != 0 ? "not a voter yet"
                     : !m->reachable                ? "not answering"
                                                    : "behind the log");
            return 0;
        }
    }
    return 1;
}
