/*
 * janitor.c — the background upkeep, on two threads, each with its own
 * storage session and each waking every --janitor-interval-ms: sessions
 * and locks on one (1, 2), garbage collection on the other (3), so that a
 * long GC pass never delays lock cleanup:
 *  1. reads the session clock (which notices a stall of the whole process
 *     and grants a grace TTL: see sessions_now) and expires sessions whose
 *     lease ran out;
 *  2. sweeps the lock table: a lock whose owner is gone (its session
 *     expired, ended, or belongs to an earlier run of the service) or whose
 *     wall time is older than its TTL (--max-lock-age-ms: a stuck owner) is
 *     resolved through its primary — rolled forward when the primary
 *     committed, rolled back otherwise (the paper's lazy cleanup, done eagerly
 *     here so abandoned locks do not wait for a reader);
 *  2b. ends the leases that ran out (leases.h), deleting their keys;
 *  3. runs MVCC garbage collection below a safe point: the timestamp the
 *     oracle gave --gc-retention-ms ago, never above the start of the
 *     oldest session still running or the oldest lock; the engine keeps it
 *     below every pinned read and stores it first (DESIGN §4.6);
 *  3b. measures the regions written to since their last check, and splits
 *     one past --region-max-bytes (splits.c, DESIGN §6.2).
 *
 * Every resolution is counted in /metrics and logged.
 */
#include <stdlib.h>
#include <string.h>

#include "gc_regions.h"
#include "janitor.h"
#include "leases.h"
#include "log.h"
#include "observers.h"
#include "resolve.h"
#include "sessions.h"
#include "timeutil.h"

#define SWEEP_BATCH 256

/* Two loops: one sweeps sessions and locks, the other collects garbage,
 * so a long GC pass never delays lock cleanup (DESIGN §4.5 deadlines). */
typedef struct loop {
    struct janitor *j;
    pthread_t thread;
    pc_session *ps;
    void (*tick)(struct janitor *j, pc_session *ps);
    bool started;
} loop;

struct janitor {
    svc *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    loop sweeper, collector;
    /* GC's clock: a timestamp and when it was taken. */
    uint64_t sample_ts, sample_ms, gc_last_ms;
};

typedef struct {
    svc *s;
    pc_liveness live;
    pc_conflict **dead;  /* copies of the dead locks found (each allocated:
                          * a pc_conflict points into itself, never move it) */
    size_t n, cap;
    pc_buf last;         /* resume the sweep after this key */
    bool more;
} sweep;

/* Collect the dead locks of one batch (resolved after the scan, outside
 * its transaction). */
static int sweep_one(void *arg, const pc_lock_view *l)
{
    sweep *w = arg;
    w->more = true;
    w->last.len = 0;
    if (pc_buf_append(&w->last, l->key.data, l->key.len) != PC_OK)
        return 1;
    bool owner_gone = !w->live.owner_alive(w->live.arg, l->owner.data, l->owner.len);
    bool too_old = w->live.now_ms >= l->wall_ms + l->ttl_ms;
    if (!owner_gone && !too_old)
        return 0;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        pc_conflict **v = realloc(w->dead, cap * sizeof(*v));
        if (v == NULL)
            return 1;
        w->dead = v;
        w->cap = cap;
    }
    if ((w->dead[w->n] = malloc(sizeof(pc_conflict))) == NULL)
        return 1;
    pc_lock_copy(w->dead[w->n++], l);
    return 0;
}

static void sweep_locks(janitor *j, pc_session *ps)
{
    svc *s = j->s;
    sweep w = {.s = s};

    /* A member of a Raft group: only the leader resolves (through Raft),
     * checked each round; a new leader takes over. */
    if (!svc_leads(s))
        return;

    for (int batch = 0; batch < 100000; batch++) {
        w.live = svc_liveness(s);
        w.n = 0;
        w.more = false;
        pc_rc rc = pc_lock_scan(ps, (pc_slice){w.last.data, w.last.len}, SWEEP_BATCH, sweep_one, &w);
        if (rc != PC_OK) {
            log_warn("janitor: lock scan: %s", pc_rc_name(rc));
            for (size_t i = 0; i < w.n; i++)
                free(w.dead[i]);
            break;
        }
        for (size_t i = 0; i < w.n; i++) {
            pc_txn_status st;
            const pc_lock_view *l = &w.dead[i]->lock;
            rc = rs_resolve_met_lock(s, ps, l, s->m.janitor_resolved, &st);
            if (rc == PC_OK) {
                log_info("janitor: %s lock of txn %llu (owner %.*s)", rs_outcome(&st),
                         (unsigned long long)l->start_ts, (int)l->owner.len,
                         (const char *)l->owner.data);
            } else if (rc != PC_LOCKED) {
                log_warn("janitor: resolving a lock: %s", pc_rc_name(rc));
            }
            free(w.dead[i]);
        }
        if (!w.more)
            break;
    }
    free(w.dead);
    pc_buf_free(&w.last);
}

static int oldest_lock(void *arg, const pc_lock_view *l)
{
    uint64_t *oldest = arg;
    if (l->start_ts < *oldest)
        *oldest = l->start_ts;
    return 0;
}

/* A GC part is a batch, so one region's: it stops at the end of the
 * region its first key is in (DESIGN §6.2). */
static void gc_limit_to_region(svc *s, pc_gc_walk *walk)
{
    pc_slice at = pc_gc_walk_position(walk);
    region *r = router_count(s->regions) > 1 ? router_find(s->regions, at.data, at.len) : NULL;
    if (r != NULL && !r->unbounded)
        pc_gc_walk_limit(walk, r->end.data, r->end.len);
    else
        pc_gc_walk_limit(walk, NULL, 0);
}

/* GC below the timestamp taken --gc-retention-ms ago, below every running
 * session's snapshot, and below every outstanding lock: a lock's
 * transaction may still need its primary's record to be resolved. */
static void collect_garbage(janitor *j, pc_session *ps)
{
    svc *s = j->s;
    uint64_t now = time_mono_ms(), ts;

    /* In a group only the leader collects (its proposals are the GC of
     * every member); a follower keeps no clock sample of its own. */
    if (s->cfg.gc_retention_ms == 0 || now - j->gc_last_ms < s->cfg.gc_retention_ms / 2 ||
        !svc_leads(s))
        return;
    if (!svc_timestamp(s, &ts))
        return; /* no oracle, no clock: try later */
    if (j->sample_ts == 0 || now - j->sample_ms < s->cfg.gc_retention_ms) {
        if (j->sample_ts == 0) {
            j->sample_ts = ts;
            j->sample_ms = now;
        }
        return;
    }
    uint64_t safe = j->sample_ts, oldest = sessions_oldest_start(s->sessions);
    if (oldest != UINT64_MAX && oldest <= safe)
        safe = oldest - 1;
    uint64_t oldest_locked = UINT64_MAX;
    /* With a log per region, each region's locks are read where it is led,
     * once its log is applied there (gc_parts.h): a lagging store would
     * miss an old lock, and its primary's record would be collected. */
    pc_rc rc = s->cfg.region_logs
                   ? gc_regions_oldest_lock(s, ps, &oldest_locked)
                   : pc_lock_scan(ps, (pc_slice){"", 0}, 1000000, oldest_lock, &oldest_locked);
    if (rc != PC_OK)
        return;
    if (oldest_locked != UINT64_MAX && oldest_locked <= safe)
        safe = oldest_locked - 1;
    j->sample_ts = ts;
    j->sample_ms = now;
    j->gc_last_ms = now;
    if (safe <= pc_gc_safe_point(s->engine))
        return;
    /* The engine lowers it below every pinned read, refuses reads below it
     * from then on, stores it (in a group: proposes it, and it is applied
     * here before the first removal is proposed), and only then removes
     * versions, a part at a time (in a group each part is one proposal). */
    pc_gc_stats st = {0};
    pc_gc_walk *walk = NULL;
    bool done = false;
    svc_write_begin(s, ps, (pc_slice){NULL, 0}); /* no key: the first region's */
    rc = svc_write_end(s, ps, pc_gc_begin(ps, safe, &safe, &walk), NULL);
    /* Regions with logs of their own: each region's parts where it is led. */
    if (rc == PC_OK && walk != NULL && s->cfg.region_logs)
        rc = gc_regions_collect(s, ps, safe, &st);
    while (rc == PC_OK && walk != NULL && !done && !s->cfg.region_logs) {
        gc_limit_to_region(s, walk);
        svc_write_begin(s, ps, pc_gc_walk_position(walk));
        rc = svc_write_end(s, ps, pc_gc_next(ps, walk, &st, &done), NULL);
    }
    pc_gc_end(walk);
    if (rc == PC_SYNC_FAILED)
        svc_storage_failed("gc safe point", rc);
    if (rc != PC_OK) {
        metrics_inc(s->m.gc_versions_removed, st.versions_removed); /* what parts removed */
        log_warn("janitor: gc: %s", pc_rc_name(rc));
        return;
    }
    if (safe == 0)
        return; /* a pinned read kept it where it was */
    metrics_inc(s->m.gc_versions_removed, st.versions_removed);
    metrics_set(s->m.mvcc_versions, (int64_t)(st.versions - st.versions_removed));
    if (st.versions_removed > 0)
        log_info("janitor: gc below %llu: %llu keys, %llu of %llu versions removed",
                 (unsigned long long)safe, (unsigned long long)st.keys,
                 (unsigned long long)st.versions_removed, (unsigned long long)st.versions);
}

/* The collector's round: GC, then the regions' size checks (splits.c). */
static void collect(janitor *j, pc_session *ps)
{
    collect_garbage(j, ps);
    svc_split_big_regions(j->s, ps);
}

static void sweep_sessions_and_locks(janitor *j, pc_session *ps)
{
    svc *s = j->s;
    /* A member that just became leader takes over the leader's state
     * (the observers' registrations among it) before anything else. */
    svc_take_over(s);
    /* A node answered that this one's observed prefixes are not those of
     * its own store (a registration whose commit answered "may have run"
     * and ran): read them again, as the leader (routes_region_calls.c). */
    if (atomic_exchange(&s->observers_behind, false) && svc_leads(s))
        observers_reload(s, ps);
    svc_region_leaders_gather(s);
    size_t expired = sessions_reap(s->sessions, time_wall_ms());
    if (expired > 0) {
        metrics_inc(metrics_series_get(s->m.txn_aborted, "expired", NULL), expired);
        log_info("janitor: %zu session(s) expired", expired);
    }
    sweep_locks(j, ps);
    if (svc_leads(s))
        leases_expire(s, ps);
}

/* Run l->tick every --janitor-interval-ms until told to stop. */
static void *loop_main(void *arg)
{
    loop *l = arg;
    janitor *j = l->j;

    pthread_mutex_lock(&j->mu);
    while (!j->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + j->s->cfg.janitor_interval_ms * 1000000ull;
        until.tv_sec += (time_t)(ns / 1000000000ull);
        until.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&j->cv, &j->mu, &until);
        if (j->stop)
            break;
        pthread_mutex_unlock(&j->mu);
        l->tick(j, l->ps);
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

static bool loop_start(janitor *j, loop *l, void (*tick)(janitor *, pc_session *))
{
    l->j = j;
    l->tick = tick;
    /* Without its own storage session there would be no cleanup at all:
     * refuse to start rather than run without it. */
    if (pc_session_open(j->s->engine, &l->ps) != PC_OK)
        return false;
    if (pthread_create(&l->thread, NULL, loop_main, l) != 0) {
        pc_session_close(l->ps);
        return false;
    }
    l->started = true;
    return true;
}

static void loop_join(loop *l)
{
    if (!l->started)
        return;
    pthread_join(l->thread, NULL);
    pc_session_close(l->ps);
}

janitor *janitor_start(svc *s)
{
    janitor *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return NULL;
    j->s = s;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    if (!loop_start(j, &j->sweeper, sweep_sessions_and_locks) || !loop_start(j, &j->collector, collect)) {
        janitor_stop(j);
        return NULL;
    }
    return j;
}

void janitor_stop(janitor *j)
{
    if (j == NULL)
        return;
    pthread_mutex_lock(&j->mu);
    j->stop = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    loop_join(&j->sweeper);
    loop_join(&j->collector);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}
