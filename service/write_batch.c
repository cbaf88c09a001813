/*
 * write_batch.c — the committer of blind writes (see write_batch.h).
 *
 * Two threads make a pipeline, so that one round's flush (a single
 * node's log flush, a Raft group's quorum) overlaps the next round's
 * oracle request and proposal:
 *
 *   committer  1. takes every queued job (at most WB_MAX_ROUND), in
 *                 arrival order;
 *              2. each write takes the latches of its keys without
 *                 waiting (a write whose key an earlier round in flight
 *                 holds is put off to the next round, a few times, before
 *                 it is handed back with PC_LOCKED so that its route can
 *                 wait for the key the slow way); then engine
 *                 pc_one_pc_blind, in propose mode: one oracle request
 *                 for all their timestamps, each write's commit read from
 *                 the applied store and written into the round's batch
 *                 (TiKV's one-phase commit);
 *              3. submits the batch to the replicator (replicator.h) and
 *                 goes on with the next round: rounds in flight overlap,
 *                 and the replicator makes those queued together durable
 *                 at once (one log flush on a single node, one append per
 *                 member in a Raft group). A write that failed wrote
 *                 nothing and is answered at once (its done() runs here).
 *   syncer     4. once the replicator applied the round's batch (or
 *                 failed it), lets the keys go (pc_one_pc_blind_durable:
 *                 until then they are commits in flight, invisible; then
 *                 the latches) and answers every write of the round: no
 *                 client hears of a write that a crash could take back,
 *                 neither as a writer nor as a reader.
 *
 * When a whole round is put off, the committer waits for the next round
 * to be answered instead of spinning. A round's writes cost one batch,
 * one flush (per member), and one WiredTiger transaction (per member) to
 * apply, between them all.
 */
#include <stdlib.h>

#include "engine_replica.h"
#include "failpoint.h"
#include "log.h"
#include "write_batch.h"

/* Rounds a write may be put off because a key of it was held. A key held
 * by a write of the same round is free in the next one, so k writes of one
 * key that arrive together need k - 1 put-offs; past this, the write waits
 * for its key on a worker (reader.c's backoff) instead. */
#define PUT_OFF_ROUNDS 16

/* A FIFO of jobs linked through job->next. */
typedef struct {
    wb_job *head, *tail;
} job_list;

/* A round: its batch in flight, what it holds till then. */
typedef struct round {
    write_batch *b;
    job_list jobs;            /* the writes it commits */
    size_t njobs;
    pc_latches *latches;      /* their keys' latches (and nothing else) */
    rp_rc rc;                 /* how the replicator answered */
    struct round *next;
} round;

struct write_batch {
    svc *s;
    pthread_t committer, syncer;
    bool committer_started, syncer_started;
    pthread_mutex_t mu;
    pthread_cond_t cv, sync_cv;
    job_list queue;           /* submitted, not yet committed */
    round *applied, **applied_tail; /* rounds the replicator has answered */
    bool stop, sync_stop;
    uint64_t answered;        /* rounds answered by the syncer */
    size_t in_flight;         /* writes submitted, not yet applied and answered */
    int ready, failed;        /* threads that have (not) got a storage session */
    metrics_series *m_round;
};

static void list_push(job_list *l, wb_job *j)
{
    j->next = NULL;
    if (l->tail != NULL)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
}

/* Put the list `front` before l's jobs. */
static void list_prepend(job_list *l, job_list *front)
{
    if (front->head == NULL)
        return;
    front->tail->next = l->head;
    if (l->head == NULL)
        l->tail = front->tail;
    l->head = front->head;
}

static int round_timestamps(void *arg, size_t count, uint64_t *first)
{
    return svc_timestamps(arg, (unsigned)count, first) ? 0 : -1;
}

static region *job_region(svc *s, const wb_job *j)
{
    if (s->regions == NULL || router_count(s->regions) <= 1 || j->w.n == 0)
        return s->home;
    return router_find(s->regions, j->w.m[0].key.data, j->w.m[0].key.len);
}

/* A round is one batch, so one region's (DESIGN §6.2): the jobs of one
 * region stay in it; the others go back to the queue's front, in order,
 * for the next round (that is not a put-off). The region is that of the
 * first job not put off before, if any: put-off jobs wait for a round in
 * flight (their keys are held), and a round of only those would make the
 * committer wait while another region's writes could go. A job's region
 * is its first key's: a /v1/kv write has one key (one with keys in
 * several regions would make a batch the replicator refuses, failing its
 * round). Within a region the jobs keep their order. */
static size_t one_region(write_batch *b, wb_job **job, size_t n)
{
    size_t lead = 0;
    while (lead < n && job[lead]->rounds > 0)
        lead++;
    region *r = n > 0 ? job_region(b->s, job[lead < n ? lead : 0]) : NULL;
    job_list rest = {0};
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (job_region(b->s, job[i]) == r)
            job[k++] = job[i];
        else
            list_push(&rest, job[i]);
    }
    list_prepend(&b->queue, &rest);
    return k;
}

/* Step 1: up to WB_MAX_ROUND jobs of one region; 0 when stopped and
 * nothing is left. */
static size_t take_round(write_batch *b, pc_session *ps, wb_job **job)
{
    size_t n = 0;
    pthread_mutex_lock(&b->mu);
    while (b->queue.head == NULL && !b->stop)
        pthread_cond_wait(&b->cv, &b->mu);
    if (b->queue.head != NULL) {
        /* Tests stall here to let a round fill up. */
        pthread_mutex_unlock(&b->mu);
        failpoint(ps, "write_batch_round");
        pthread_mutex_lock(&b->mu);
    }
    while (b->queue.head != NULL && n < WB_MAX_ROUND) {
        job[n++] = b->queue.head;
        b->queue.head = b->queue.head->next;
    }
    if (b->queue.head == NULL)
        b->queue.tail = NULL;
    n = one_region(b, job, n);
    pthread_mutex_unlock(&b->mu);
    return n;
}

/* On the replicator's thread: the round's batch is applied (or failed);
 * the syncer takes it from here (this must not block: the replicator may
 * hold its lock). */
static void round_answered(void *arg, rp_rc rc)
{
    round *r = arg;
    write_batch *b = r->b;
    r->rc = rc;
    r->next = NULL;
    pthread_mutex_lock(&b->mu);
    *b->applied_tail = r;
    b->applied_tail = &r->next;
    pthread_cond_signal(&b->sync_cv);
    pthread_mutex_unlock(&b->mu);
}

/* Latch each write's keys without waiting, in arrival order: those that
 * got theirs go into w (return: how many), the others are put off (busy
 * till an earlier round is applied) or, put off too often, handed back
 * busy so that a worker waits for the key. */
static size_t latch_round(pc_session *ps, wb_job **job, size_t n, wb_job **mine,
                          job_list *later, job_list *failed)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        pc_slice keys[64];
        size_t nk = job[i]->w.n < 64 ? job[i]->w.n : 64;
        for (size_t j = 0; j < nk; j++)
            keys[j] = job[i]->w.m[j].key;
        /* More than 64 keys: the engine latches the rest (waiting), as it
         * would for a write of its own; /v1/kv writes have one key. */
        if (pc_session_try_latch(ps, keys, nk) == PC_OK) {
            mine[k++] = job[i];
        } else if (job[i]->rounds++ < PUT_OFF_ROUNDS) {
            list_push(later, job[i]);
        } else {
            job[i]->w.rc = PC_LOCKED;
            job[i]->w.conflict = (pc_conflict){0}; /* start_ts 0: busy, a worker waits */
            list_push(failed, job[i]);
        }
    }
    return k;
}

/* Steps 2 and 3. */
static void propose_round(write_batch *b, pc_session *ps, wb_job **job, size_t n)
{
    pc_blind_write *w[WB_MAX_ROUND];
    wb_job *mine[WB_MAX_ROUND];
    job_list later = {0}, failed = {0};
    pc_buf batch = {0};
    round *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        for (size_t i = 0; i < n; i++) {
            job[i]->w.rc = PC_NOMEM;
            job[i]->done(job[i]);
        }
        return;
    }
    r->b = b;
    /* Before the round reads the store: its region's term (its jobs are
     * one region's: one_region). */
    uint64_t term;
    pc_slice hint = n > 0 && job[0]->w.n > 0 ? job[0]->w.m[0].key : (pc_slice){NULL, 0};
    replicator *repl = svc_write_term(b->s, hint, &term);
    pc_session_propose(ps, &batch);
    size_t k = latch_round(ps, job, n, mine, &later, &failed);
    for (size_t i = 0; i < k; i++)
        w[i] = &mine[i]->w;
    pc_one_pc_blind(ps, w, k, round_timestamps, b->s);
    for (size_t i = 0; i < k; i++) {
        bool busy = w[i]->rc == PC_LOCKED && w[i]->conflict.lock.start_ts == 0;
        if (busy && mine[i]->rounds++ < PUT_OFF_ROUNDS) {
            list_push(&later, mine[i]);
        } else if (w[i]->rc == PC_OK) {
            list_push(&r->jobs, mine[i]);
            r->njobs++;
        } else {
            list_push(&failed, mine[i]);
        }
    }
    r->latches = pc_session_take_latches(ps);
    pc_session_propose(ps, NULL);

    pthread_mutex_lock(&b->mu);
    if (later.head != NULL && r->njobs == 0 && failed.head == NULL && b->in_flight > 0) {
        /* Only put-off writes: their keys wait for a round in flight. */
        uint64_t seen = b->answered;
        while (b->answered == seen && b->in_flight > 0)
            pthread_cond_wait(&b->cv, &b->mu);
    }
    list_prepend(&b->queue, &later);
    b->in_flight += r->njobs;
    pthread_mutex_unlock(&b->mu);

    if (r->njobs == 0) {
        pc_latches_release(r->latches);
        free(r);
    } else {
        region *rg = svc_region_of_batch(b->s, batch.data, batch.len);
        rp_rc rc = !svc_batch_is_of(b->s, rg, repl)
                       ? RP_UNAVAILABLE
                       : rg->repl->ops->submit(rg->repl, batch.data, batch.len, term,
                                               round_answered, r);
        if (rc != RP_OK)
            round_answered(r, rc); /* refused at once: answered the same way */
        else
            region_count_batch(rg, batch.len);
    }
    pc_buf_free(&batch);
    for (wb_job *j = failed.head, *next; j != NULL; j = next) {
        next = j->next; /* done() frees j */
        j->done(j);
    }
}

/* Step 4 for every round the replicator has answered; false when stopped
 * and nothing is in flight. */
static bool answer_rounds(write_batch *b, pc_session *ps)
{
    pthread_mutex_lock(&b->mu);
    while (b->applied == NULL && !(b->sync_stop && b->in_flight == 0))
        pthread_cond_wait(&b->sync_cv, &b->mu);
    round *list = b->applied;
    b->applied = NULL;
    b->applied_tail = &b->applied;
    pthread_mutex_unlock(&b->mu);
    if (list == NULL)
        return false;

    for (round *r = list, *next; r != NULL; r = next) {
        next = r->next;
        pc_blind_write *w[WB_MAX_ROUND];
        size_t k = 0;
        for (wb_job *j = r->jobs.head; j != NULL; j = j->next)
            w[k++] = &j->w;
        /* Applied, or the replicator failed it (in a group it may still
         * commit: a new leader applies every earlier entry before it
         * serves, DESIGN §9): the
         * commits in flight first, then the latches (pc_latches_release's
         * order), then the answers. */
        pc_one_pc_blind_durable(ps, w, k);
        pc_latches_release(r->latches);
        if (r->rc == RP_OK) {
            metrics_inc(b->s->m.commits_1pc, k);
            svc_committed(b->s);
        }
        pthread_mutex_lock(&b->mu);
        b->in_flight -= r->njobs;
        b->answered++;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        for (wb_job *j = r->jobs.head, *jn; j != NULL; j = jn) {
            jn = j->next; /* done() frees j */
            if (r->rc != RP_OK)
                j->w.rc = svc_refused(r->rc);
            j->done(j);
        }
        free(r);
    }
    return true;
}

/* Each thread needs its own storage session; write_batch_start waits for
 * both to say whether they got one. */
static pc_session *thread_session(write_batch *b)
{
    pc_session *ps = svc_engine_session(b->s);
    pthread_mutex_lock(&b->mu);
    if (ps != NULL)
        b->ready++;
    else
        b->failed++;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return ps;
}

static void *committer_main(void *arg)
{
    write_batch *b = arg;
    pc_session *ps = thread_session(b);
    wb_job *job[WB_MAX_ROUND];

    if (ps == NULL)
        return NULL; /* write_batch_start gives up */
    for (;;) {
        size_t n = take_round(b, ps, job);
        if (n == 0)
            return NULL;
        metrics_observe(b->m_round, (double)n);
        propose_round(b, ps, job, n);
    }
}

/* Step 4 for every round, till stopped. */
static void *syncer_main(void *arg)
{
    write_batch *b = arg;
    pc_session *ps = thread_session(b);

    if (ps == NULL)
        return NULL; /* write_batch_start gives up */
    while (answer_rounds(b, ps))
        ;
    return NULL;
}

write_batch *write_batch_start(svc *s)
{
    static const double buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    write_batch *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->s = s;
    b->applied_tail = &b->applied;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    if (s->metrics != NULL)
        b->m_round = metrics_series_get(
            metrics_histogram(s->metrics, "percolator_write_batch_size",
                              "blind writes committed together in one round (one oracle "
                              "request, one log flush)",
                              NULL, NULL, buckets, sizeof(buckets) / sizeof(buckets[0])),
            NULL, NULL);
    pthread_cond_init(&b->sync_cv, NULL);
    if (pthread_create(&b->syncer, NULL, syncer_main, b) != 0) {
        write_batch_stop(b);
        return NULL;
    }
    b->syncer_started = true;
    if (pthread_create(&b->committer, NULL, committer_main, b) != 0) {
        write_batch_stop(b);
        return NULL;
    }
    b->committer_started = true;
    pthread_mutex_lock(&b->mu);
    while (b->ready + b->failed < 2)
        pthread_cond_wait(&b->cv, &b->mu);
    bool ok = b->failed == 0;
    pthread_mutex_unlock(&b->mu);
    if (!ok) {
        log_error("write batch: no storage session for the committer threads");
        write_batch_stop(b);
        return NULL;
    }
    return b;
}

bool write_batch_submit(write_batch *b, wb_job *job)
{
    job->rounds = 0;
    pthread_mutex_lock(&b->mu);
    if (b->stop) {
        pthread_mutex_unlock(&b->mu);
        return false;
    }
    list_push(&b->queue, job);
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return true;
}

void write_batch_stop(write_batch *b)
{
    if (b == NULL)
        return;
    /* The committer first (it empties the queue, put-off jobs included),
     * then the syncer (it answers what the committer passed on). */
    pthread_mutex_lock(&b->mu);
    b->stop = true;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (b->committer_started)
        pthread_join(b->committer, NULL);
    pthread_mutex_lock(&b->mu);
    b->sync_stop = true;
    pthread_cond_signal(&b->sync_cv);
    pthread_mutex_unlock(&b->mu);
    if (b->syncer_started)
        pthread_join(b->syncer, NULL);
    pthread_cond_destroy(&b->sync_cv);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}
