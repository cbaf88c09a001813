/*
 * raft_proposer.c — see raft_proposer.h. Request threads touch only the
 * queue and the status, under mu; everything that calls libraft runs on
 * the loop thread (rp_step, rp_apply and libraft's callbacks).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "raft_identity.h"
#include "raft_proposer.h"
#include "timeutil.h"

/* When an entry was appended and in which term: its commit renews the
 * lease (renew_lease). */
typedef struct {
    uint64_t at;
    raft_term term;
} appended;

/* An entry in flight and the waits it answers. */
typedef struct {
    struct raft_apply req;
    raft_proposer *p;
    rp_wait *waits;          /* linked by next */
    int64_t n;
    unsigned kind;           /* the owner's (rp_apply_kind) */
    appended when;
} proposal;

/* A read barrier in flight and the reads it serves. */
typedef struct {
    struct raft_barrier req;
    raft_proposer *p;
    rp_wait *reads;
    appended when;
} read_barrier;

struct raft_proposer {
    rp_config cfg;
    pthread_mutex_t mu;
    rp_wait *queue, **queue_tail;  /* under mu */
    bool stopping;                 /* under mu */
    rp_status status;              /* under mu, written by rp_step */

    /* Loop thread only. */
    struct raft_barrier barrier;   /* the new leader's first entry */
    bool barrier_inflight, read_inflight;
    bool stop_seen;                /* rp_step saw stopping */
    raft_term barrier_term, ready_term, warned_term;
    raft_term stale_checked;    /* the ready term fail_stale last ran in */
    unsigned entries_in_flight;
    int64_t props_in_flight, props_max;
    struct raft *r;                /* the raft rp_step was last given */
    appended first_when;           /* the first barrier's */
    /* The lease (raft_proposer.h): before lease_until, in lease_term, no
     * other member leads; never in no_lease_term (a transfer began). */
    uint64_t lease_until;
    raft_term lease_term, no_lease_term;
    _Atomic uint64_t lease_reads;
    /* Until when (cfg.now_ms) a request thread may answer a read itself
     * under the lease, published by the loop (serve_reads); 0: it may not
     * (see rp_read_now). */
    _Atomic uint64_t read_until;
    /* Proposals and barriers that failed, counted before their waiters
     * hear (rp_failures). */
    _Atomic uint64_t failures;
};

raft_proposer *rp_new(const rp_config *cfg)
{
    raft_proposer *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->cfg = *cfg;
    p->queue_tail = &p->queue;
    p->status.role = "unavailable";
    p->status.membership = "";
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

void rp_free(raft_proposer *p)
{
    if (p == NULL)
        return;
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static void wake(raft_proposer *p)
{
    if (p->cfg.wake != NULL)
        p->cfg.wake(p->cfg.loop_arg);
}

void rp_stop(raft_proposer *p)
{
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_mutex_unlock(&p->mu);
}

/* Answer w (mu held): wake its thread alone (dozens may wait: a broadcast
 * to all on every entry cost more than the entry), or hand it to its done
 * callback, which owns it from then. */
static void finish(raft_proposer *p, rp_wait *w, rp_rc rc)
{
    /* Taken: the time from libraft's taking it to its answer; never taken
     * (failed while queued): nothing to say about Raft. */
    if (w->taken_ns != 0)
        metrics_observe(w->read ? p->cfg.m_read : p->cfg.m_commit,
                        (double)(time_mono_ns() - w->taken_ns) / 1e9);
    w->rc = rc;
    w->answered = true;
    if (w->cv != NULL)
        pthread_cond_signal(w->cv);
    else
        w->done(w, rc);
}

static void finish_list(raft_proposer *p, rp_wait *list, rp_rc rc)
{
    for (rp_wait *w = list, *next; w != NULL; w = next) {
        next = w->next; /* done may free w */
        finish(p, w, rc);
    }
}

void rp_finish(raft_proposer *p, rp_wait *list, rp_rc rc)
{
    pthread_mutex_lock(&p->mu);
    finish_list(p, list, rc);
    pthread_mutex_unlock(&p->mu);
}

/* Fail every queued wait with rc (mu held). */
static void fail_queued(raft_proposer *p, rp_rc rc)
{
    rp_wait *list = p->queue;
    p->queue = NULL;
    p->queue_tail = &p->queue;
    finish_list(p, list, rc);
}

static rp_rc from_status(int status)
{
    return status == 0 ? RP_OK : status == RAFT_NOTLEADER ? RP_NOT_LEADER : RP_UNAVAILABLE;
}

/* ---- request threads ---- */

/* Queue w unless this member cannot take it now (mu held): RP_OK, or why. */
static rp_rc enqueue(raft_proposer *p, rp_wait *w)
{
    if (p->stopping)
        return RP_UNAVAILABLE;
    if (w->term != 0 && w->term != p->status.ready_term)
        return RP_NOT_LEADER; /* computed under another leadership: stale, not proposed */
    if (p->status.ready_term == 0) {
        if (p->status.leader_id != p->cfg.id || strcmp(p->status.role, "leader") != 0)
            return RP_NOT_LEADER;
        if (!p->cfg.queue_unready || w->read)
            return RP_UNAVAILABLE;
    }
    w->rc = RP_UNAVAILABLE;
    w->answered = w->taken = false;
    w->taken_ns = 0;
    w->next = NULL;
    w->queued_ns = time_mono_ns();
    *p->queue_tail = w;
    p->queue_tail = &w->next;
    return RP_OK;
}

/* Take w out of the queue (mu held; it is there). */
static void unlink_queued(raft_proposer *p, rp_wait *w)
{
    for (rp_wait **q = &p->queue; *q != NULL; q = &(*q)->next) {
        if (*q == w) {
            *q = w->next;
            if (p->queue_tail == &w->next)
                p->queue_tail = q;
            return;
        }
    }
}

rp_rc rp_wait_for(raft_proposer *p, rp_wait *w, unsigned wait_ms)
{
    pthread_cond_t cv;
    pthread_condattr_t ca;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)wait_ms * 1000000ull;
    until.tv_sec += (time_t)(ns / 1000000000ull);
    until.tv_nsec = (long)(ns % 1000000000ull);

    if (w->read && rp_read_now(p))
        return RP_OK;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);
    w->cv = &cv;
    pthread_mutex_lock(&p->mu);
    rp_rc rc = enqueue(p, w);
    if (rc != RP_OK) {
        pthread_mutex_unlock(&p->mu);
        pthread_cond_destroy(&cv);
        return rc;
    }
    pthread_mutex_unlock(&p->mu);
    wake(p);

    pthread_mutex_lock(&p->mu);
    while (!w->answered) {
        if (w->taken) {
            pthread_cond_wait(&cv, &p->mu); /* libraft answers it, one way or the other */
            continue;
        }
        if (pthread_cond_timedwait(&cv, &p->mu, &until) == ETIMEDOUT && !w->answered &&
            !w->taken) {
            unlink_queued(p, w);
            w->rc = RP_UNAVAILABLE;
            break;
        }
    }
    rc = w->rc;
    pthread_mutex_unlock(&p->mu);
    pthread_cond_destroy(&cv);
    return rc;
}

rp_rc rp_submit(raft_proposer *p, rp_wait *w)
{
    w->cv = NULL;
    pthread_mutex_lock(&p->mu);
    rp_rc rc = enqueue(p, w);
    pthread_mutex_unlock(&p->mu);
    if (rc == RP_OK)
        wake(p);
    return rc;
}

void rp_get_status(raft_proposer *p, rp_status *st)
{
    pthread_mutex_lock(&p->mu);
    *st = p->status;
    pthread_mutex_unlock(&p->mu);
}

uint64_t rp_ready_term(raft_proposer *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t term = p->status.ready_term;
    pthread_mutex_unlock(&p->mu);
    return term;
}

/* ---- the loop thread ---- */

static uint64_t now_ms(const raft_proposer *p, struct raft *r)
{
    return p->cfg.now_ms != NULL ? p->cfg.now_ms(p->cfg.loop_arg) : (uint64_t)r->io->time(r->io);
}

/* Before an append: when, in which term (the clock read first: the entry
 * cannot reach anyone before it exists). */
static appended appending(const raft_proposer *p, struct raft *r)
{
    return (appended){.at = now_ms(p, r), .term = r->current_term};
}

/* An entry appended at a.at in a.term was committed and applied here: a
 * majority took it after a.at and reset their election timers then, so
 * none of them votes for another member before a.at + the election
 * timeout (DESIGN §7.4); lease_ms is 4/5 of it. */
static void renew_lease(raft_proposer *p, appended a, int status)
{
    struct raft *r = p->r;
    if (p->cfg.lease_ms == 0 || status != 0 || r == NULL || raft_state(r) != RAFT_LEADER ||
        a.term != r->current_term)
        return;
    if (p->lease_term != a.term || a.at + p->cfg.lease_ms > p->lease_until) {
        p->lease_until = a.at + p->cfg.lease_ms;
        p->lease_term = a.term;
    }
}

static bool lease_holds(raft_proposer *p, struct raft *r)
{
    return p->cfg.lease_ms != 0 && rp_ready(p, r) && p->lease_term == r->current_term &&
           p->no_lease_term != r->current_term && r->transfer == NULL &&
           now_ms(p, r) < p->lease_until;
}

void rp_end_lease(raft_proposer *p, struct raft *r)
{
    p->no_lease_term = r->current_term;
    p->lease_until = 0;
    atomic_store(&p->read_until, 0);
}

/* What the loop found at its last step, for the request threads
 * (rp_read_now, rp_wait_for of a read): under
 * the lease, with everything it knew committed applied, a read may go on
 * until the lease's end without a hop to the loop. Safe for the same
 * reason as the loop's own lease read: no other member leads before
 * lease_until, so nothing committed since this step is another leader's;
 * what this leader committed since is either applied here or not yet
 * acknowledged to anyone (a writer is answered only once its entry is
 * applied here: libraft's apply callback), so a read that misses it is
 * ordered before that write. Only with the owner's clock (cfg.now_ms),
 * which any thread may read; libraft's io->time is the loop's. */
static void publish_reads(raft_proposer *p, bool lease)
{
    atomic_store(&p->read_until, lease && p->cfg.now_ms != NULL ? p->lease_until : 0);
}

/* A proposal or a barrier failed (leadership lost, most likely), on the
 * loop, before its waiters hear of it: no read goes on at once from now
 * until the next step publishes again. The lease alone would still keep
 * another leader away, but a failed proposal's commits in flight are let
 * go when its writers hear of the failure, and the entry may yet be
 * committed by the next leader: a snapshot read or the change feed must
 * not read past it meanwhile. (While a member leads, a commit in flight
 * stays in the table until its batch is applied here.) */
static void reads_stop(raft_proposer *p, int status)
{
    if (status != 0) {
        atomic_store(&p->read_until, 0);
        atomic_fetch_add(&p->failures, 1);
    }
}

uint64_t rp_failures(raft_proposer *p)
{
    return atomic_load(&p->failures);
}

bool rp_read_now(raft_proposer *p)
{
    uint64_t until = atomic_load(&p->read_until);
    if (until == 0 || p->cfg.now_ms(p->cfg.loop_arg) >= until)
        return false;
    atomic_fetch_add(&p->lease_reads, 1);
    metrics_inc(p->cfg.m_lease_reads, 1);
    return true;
}

uint64_t rp_lease_reads(const raft_proposer *p)
{
    return atomic_load(&p->lease_reads);
}

int64_t rp_lease_left_ms(raft_proposer *p, struct raft *r)
{
    if (p->cfg.lease_ms == 0 || p->no_lease_term == r->current_term)
        return -1;
    if (!lease_holds(p, r))
        return 0;
    return (int64_t)(p->lease_until - now_ms(p, r));
}

bool rp_ready(const raft_proposer *p, struct raft *r)
{
    return !p->stop_seen && raft_state(r) == RAFT_LEADER && p->ready_term == r->current_term;
}

unsigned rp_in_flight(const raft_proposer *p)
{
    return p->entries_in_flight;
}

static void refresh_status(raft_proposer *p, struct raft *r)
{
    static const char *const names[] = {"unavailable", "follower", "candidate", "leader"};
    raft_id id = 0;
    const char *addr = NULL;
    raft_leader(r, &id, &addr);
    int st = raft_state(r);
    char url[RAFT_PEER_ADDR_MAX] = "";
    if (id != 0 && p->cfg.leader_url != NULL &&
        !p->cfg.leader_url(p->cfg.loop_arg, id, url, sizeof url))
        url[0] = '\0';
    pthread_mutex_lock(&p->mu);
    p->status.role = st >= 0 && st <= 3 ? names[st] : "unavailable";
    p->status.leader_id = raft_member_of(id);
    snprintf(p->status.leader_http, sizeof p->status.leader_http, "%s", url);
    p->status.term = r->current_term;
    p->status.commit_index = r->commit_index;
    p->status.applied_index = raft_last_applied(r);
    p->status.ready_term = rp_ready(p, r) ? r->current_term : 0;
    pthread_mutex_unlock(&p->mu);
}

static void on_first_barrier(struct raft_barrier *req, int status)
{
    raft_proposer *p = req->data;
    p->barrier_inflight = false;
    reads_stop(p, status);
    renew_lease(p, p->first_when, status);
    if (status == 0)
        p->ready_term = p->barrier_term;
    else
        log_warn("%s raft: the barrier of term %llu failed: %s", p->cfg.who,
                 (unsigned long long)p->barrier_term, raft_strerror(status));
    wake(p); /* go on from the loop, not from inside libraft */
}

/* A new leader's first entry: a barrier of its term (the first rule of
 * raft_proposer.h). Refused while a leadership transfer runs, for
 * instance: what waits fails, and it is tried again at the next step
 * (said once a term). */
static void append_first_barrier(raft_proposer *p, struct raft *r)
{
    p->barrier.data = p;
    p->barrier_term = r->current_term;
    p->first_when = appending(p, r);
    int rv = raft_barrier(r, &p->barrier, on_first_barrier);
    if (rv == 0) {
        p->barrier_inflight = true;
        return;
    }
    if (p->warned_term != r->current_term) {
        p->warned_term = r->current_term;
        log_warn("%s raft: cannot append the barrier of term %llu: %s (tried again at every "
                 "step)", p->cfg.who, (unsigned long long)r->current_term, raft_strerror(rv));
    }
    pthread_mutex_lock(&p->mu);
    fail_queued(p, RP_UNAVAILABLE);
    pthread_mutex_unlock(&p->mu);
}

static void on_read_barrier(struct raft_barrier *req, int status)
{
    read_barrier *b = (read_barrier *)req;
    raft_proposer *p = b->p;
    reads_stop(p, status);
    renew_lease(p, b->when, status);
    pthread_mutex_lock(&p->mu);
    finish_list(p, b->reads, from_status(status));
    pthread_mutex_unlock(&p->mu);
    p->read_inflight = false;
    free(b);
    wake(p);
}

/* Mark w taken (mu held). */
static void take(raft_proposer *p, rp_wait *w)
{
    w->taken = true;
    w->taken_ns = time_mono_ns();
    metrics_observe(p->cfg.m_queue, (double)(w->taken_ns - w->queued_ns) / 1e9);
}

/* Take queued waits out (mu held), in order: every read (read), or the
 * proposals (of kind, unless it is -1) from the head while fits says so;
 * the rest stay queued. */
static rp_wait *take_where(raft_proposer *p, bool read, int64_t kind,
                           bool (*fits)(void *, const rp_wait *), void *arg)
{
    rp_wait *got = NULL, **gt = &got, *keep = NULL, **kt = &keep;
    bool stopped = false; /* proposals: from the head while they fit */
    for (rp_wait *w = p->queue, *next; w != NULL; w = next) {
        next = w->next;
        w->next = NULL;
        bool mine = w->read == read && (read || kind < 0 || w->kind == (unsigned)kind);
        bool want = mine && !stopped && (fits == NULL || fits(arg, w));
        if (!read && mine && !want)
            stopped = true;
        if (want) {
            take(p, w);
            *gt = w;
            gt = &w->next;
        } else {
            *kt = w;
            kt = &w->next;
        }
    }
    p->queue = keep;
    p->queue_tail = keep != NULL ? kt : &p->queue;
    return got;
}

rp_wait *rp_take(raft_proposer *p, bool (*fits)(void *arg, const rp_wait *w), void *arg)
{
    pthread_mutex_lock(&p->mu);
    rp_wait *got = take_where(p, false, -1, fits, arg);
    pthread_mutex_unlock(&p->mu);
    return got;
}

rp_wait *rp_take_kind(raft_proposer *p, unsigned kind, bool (*fits)(void *arg, const rp_wait *w),
                      void *arg)
{
    pthread_mutex_lock(&p->mu);
    rp_wait *got = take_where(p, false, kind, fits, arg);
    pthread_mutex_unlock(&p->mu);
    return got;
}

/* Every read queued now is served by one barrier appended now (the second
 * rule); reads that arrive while it is in flight wait for the next one,
 * since the one in flight may have been appended before they arrived. */
static void serve_reads(raft_proposer *p, struct raft *r)
{
    /* Under the lease no other member leads, so whatever was committed
     * before a queued read came was committed by this leader, and is
     * applied once everything it knows committed is. */
    bool lease = lease_holds(p, r) && raft_last_applied(r) >= r->commit_index;
    publish_reads(p, lease);
    if (p->read_inflight && !lease)
        return;
    pthread_mutex_lock(&p->mu);
    rp_wait *reads = take_where(p, true, -1, NULL, NULL);
    if (lease && reads != NULL) {
        uint64_t k = 0;
        for (rp_wait *w = reads; w != NULL; w = w->next)
            k++;
        atomic_fetch_add(&p->lease_reads, k);
        metrics_inc(p->cfg.m_lease_reads, k);
        finish_list(p, reads, RP_OK);
        reads = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    if (reads == NULL)
        return;
    read_barrier *b = calloc(1, sizeof(*b));
    int rv = RAFT_NOMEM;
    if (b != NULL) {
        b->p = p;
        b->reads = reads;
        b->when = appending(p, r);
        rv = raft_barrier(r, &b->req, on_read_barrier);
    }
    reads_stop(p, rv);
    if (rv == 0) {
        p->read_inflight = true;
        return;
    }
    free(b);
    rp_finish(p, reads, rv == RAFT_NOTLEADER ? RP_NOT_LEADER : RP_UNAVAILABLE);
}

static void fail_stale(raft_proposer *p, uint64_t term);

bool rp_step(raft_proposer *p, struct raft *r)
{
    p->r = r;
    refresh_status(p, r);
    bool leader = raft_state(r) == RAFT_LEADER;
    if (leader && r->transfer != NULL)
        rp_end_lease(p, r); /* its target's election does not wait for a timeout */
    pthread_mutex_lock(&p->mu);
    bool stopping = p->stop_seen = p->stopping;
    if ((!leader || stopping) && p->queue != NULL)
        fail_queued(p, stopping ? RP_UNAVAILABLE : RP_NOT_LEADER);
    pthread_mutex_unlock(&p->mu);
    if (!leader || stopping || p->ready_term != r->current_term)
        publish_reads(p, false);
    if (!leader || stopping)
        return false;
    if (p->ready_term != r->current_term) {
        if (!p->barrier_inflight)
            append_first_barrier(p, r);
        return false;
    }
    /* rp_submit refuses a wait of another term than the ready one, so
     * only one queued before the ready term changed can be stale. */
    if (p->stale_checked != r->current_term) {
        fail_stale(p, r->current_term);
        p->stale_checked = r->current_term;
    }
    serve_reads(p, r);
    return true;
}

/* Fail the queued proposals computed in another term than this one (the
 * third rule): never proposed, so RP_NOT_LEADER, and the caller retries
 * on the current state. */
static void fail_stale(raft_proposer *p, uint64_t term)
{
    pthread_mutex_lock(&p->mu);
    rp_wait *keep = NULL, **kt = &keep, *stale = NULL, **st = &stale;
    for (rp_wait *w = p->queue, *next; w != NULL; w = next) {
        next = w->next;
        w->next = NULL;
        bool old = !w->read && w->term != 0 && w->term != term;
        *(old ? st : kt) = w;
        if (old)
            st = &w->next;
        else
            kt = &w->next;
    }
    p->queue = keep;
    p->queue_tail = keep != NULL ? kt : &p->queue;
    finish_list(p, stale, RP_NOT_LEADER);
    pthread_mutex_unlock(&p->mu);
}

static void on_applied(struct raft_apply *req, int status, void *result)
{
    proposal *e = (proposal *)req;
    raft_proposer *p = e->p;
    reads_stop(p, status);
    renew_lease(p, e->when, status);
    p->entries_in_flight--;
    p->props_in_flight -= e->n;
    metrics_set(p->cfg.m_in_flight, p->props_in_flight);
    if (status != 0) {
        log_warn("%s raft: a proposal failed: %s", p->cfg.who, raft_strerror(status));
        metrics_inc(p->cfg.m_failures, (uint64_t)e->n);
    }
    rp_rc rc = from_status(status);
    if (p->cfg.applied != NULL) {
        rp_rc own = p->cfg.applied(p->cfg.applied_arg, e->kind, e->waits, status, result);
        if (status == 0)
            rc = own;
    }
    rp_finish(p, e->waits, rc);
    free(e);
    wake(p); /* the next proposal from the loop, not from inside libraft */
}

int rp_apply(raft_proposer *p, struct raft *r, rp_wait *list, struct raft_buffer *buf)
{
    return rp_apply_kind(p, r, 0, list, buf);
}

int rp_apply_kind(raft_proposer *p, struct raft *r, unsigned kind, rp_wait *list,
                  struct raft_buffer *buf)
{
    int64_t n = 0;
    for (rp_wait *w = list; w != NULL; w = w->next)
        n++;
    proposal *e = calloc(1, sizeof(*e));
    int rv = RAFT_NOMEM;
    if (e != NULL) {
        e->p = p;
        e->waits = list;
        e->n = n;
        e->kind = kind;
        e->req.data = p;
        e->when = appending(p, r);
        rv = raft_apply(r, &e->req, buf, 1, on_applied);
    }
    if (rv == 0) {
        p->entries_in_flight++;
        metrics_inc(p->cfg.m_proposals, (uint64_t)n);
        metrics_inc(p->cfg.m_entries, 1);
        p->props_in_flight += n;
        metrics_set(p->cfg.m_in_flight, p->props_in_flight);
        if (p->props_in_flight > p->props_max)
            metrics_set(p->cfg.m_in_flight_max, p->props_max = p->props_in_flight);
        return 0; /* libraft owns the buffer now */
    }
    log_warn("%s raft: cannot propose: %s", p->cfg.who, raft_strerror(rv));
    reads_stop(p, rv);
    metrics_inc(p->cfg.m_failures, (uint64_t)n);
    raft_free(buf->base);
    buf->base = NULL;
    free(e);
    rp_finish(p, list, rv == RAFT_NOTLEADER ? RP_NOT_LEADER : RP_UNAVAILABLE);
    return rv;
}
