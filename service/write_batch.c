/*
 * write_batch.c — the committer thread of blind writes (see write_batch.h).
 *
 * One round:
 *   1. take every queued job (at most WB_MAX_ROUND), in arrival order;
 *   2. engine pc_one_pc_blind: hold every write's keys in memory, one
 *      oracle request for all their timestamps, one WiredTiger
 *      transaction per write (seed 001 §4.2.5, one-phase commit);
 *   3. one pc_sync: a single log flush makes the whole round durable;
 *   4. hand each job to its done(): the answers go out only now, so no
 *      client hears of a write that a crash could still take back.
 * A write whose key was held (by an earlier write of the same round, as a
 * rule) is put off to the next round, a few times, before it is handed
 * back with PC_LOCKED so that its route can wait for the key the slow way.
 */
#include <stdlib.h>

#include "failpoint.h"
#include "log.h"
#include "observers.h"
#include "write_batch.h"

#define PUT_OFF_ROUNDS 3

struct write_batch {
    svc *s;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    wb_job *head, *tail;
    bool stop;
    metrics_series *m_round;
};

static int round_timestamps(void *arg, size_t count, uint64_t *first)
{
    return svc_timestamps(arg, (unsigned)count, first) ? 0 : -1;
}

/* Take up to WB_MAX_ROUND jobs; 0 when stopped and nothing is left. */
static size_t take_round(write_batch *b, pc_session *ps, wb_job **job)
{
    size_t n = 0;
    pthread_mutex_lock(&b->mu);
    while (b->head == NULL && !b->stop)
        pthread_cond_wait(&b->cv, &b->mu);
    if (b->head != NULL) {
        /* Tests stall here to let a round fill up. */
        pthread_mutex_unlock(&b->mu);
        failpoint(ps, "write_batch_round");
        pthread_mutex_lock(&b->mu);
    }
    while (b->head != NULL && n < WB_MAX_ROUND) {
        job[n++] = b->head;
        b->head = b->head->next;
    }
    if (b->head == NULL)
        b->tail = NULL;
    pthread_mutex_unlock(&b->mu);
    return n;
}

/* Steps 2 and 3 for one round; every job's w.rc is set after it. */
static void commit_round(write_batch *b, pc_session *ps, wb_job **job, size_t n)
{
    pc_blind_write *w[WB_MAX_ROUND];
    size_t committed = 0;

    for (size_t i = 0; i < n; i++)
        w[i] = &job[i]->w;
    if (ps == NULL) {
        for (size_t i = 0; i < n; i++)
            w[i]->rc = PC_ERROR;
        return;
    }
    pc_one_pc_blind(ps, w, n, round_timestamps, b->s);
    for (size_t i = 0; i < n; i++)
        committed += w[i]->rc == PC_OK;
    if (committed == 0)
        return;
    pc_rc rc = pc_sync(ps);
    if (rc != PC_OK) {
        /* Committed but not known to be durable: PC_ERROR with the
         * commit_ts kept, as coord_commit reports it. */
        log_error("write batch: log flush failed for %zu commits: %s", committed,
                  pc_rc_name(rc));
        for (size_t i = 0; i < n; i++)
            if (w[i]->rc == PC_OK)
                w[i]->rc = rc;
        return;
    }
    metrics_inc(b->s->m.commits_1pc, committed);
    observers_wake(b->s);
}

/* Step 4: put off the writes whose key was busy, answer the others. */
static void finish_round(write_batch *b, wb_job **job, size_t n)
{
    wb_job *first = NULL, *last = NULL;

    for (size_t i = 0; i < n; i++) {
        pc_blind_write *w = &job[i]->w;
        bool busy = w->rc == PC_LOCKED && w->conflict.lock.start_ts == 0;
        if (busy && job[i]->rounds++ < PUT_OFF_ROUNDS) {
            job[i]->next = NULL;
            if (last != NULL)
                last->next = job[i];
            else
                first = job[i];
            last = job[i];
        } else {
            job[i]->done(job[i]);
        }
    }
    if (first == NULL)
        return;
    /* Back to the front of the queue, in their order. */
    pthread_mutex_lock(&b->mu);
    last->next = b->head;
    if (b->head == NULL)
        b->tail = last;
    b->head = first;
    pthread_mutex_unlock(&b->mu);
}

static void *committer_main(void *arg)
{
    write_batch *b = arg;
    pc_session *ps = svc_engine_session(b->s);
    wb_job *job[WB_MAX_ROUND];

    if (ps == NULL)
        log_error("write batch: no storage session; blind writes will fail");
    for (;;) {
        size_t n = take_round(b, ps, job);
        if (n == 0)
            return NULL;
        metrics_observe(b->m_round, (double)n);
        commit_round(b, ps, job, n);
        finish_round(b, job, n);
    }
}

write_batch *write_batch_start(svc *s)
{
    static const double buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    write_batch *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->s = s;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    if (s->metrics != NULL)
        b->m_round = metrics_series_get(
            metrics_histogram(s->metrics, "percolator_write_batch_size",
                              "blind writes committed together in one round (one oracle "
                              "request, one log flush)",
                              NULL, NULL, buckets, sizeof(buckets) / sizeof(buckets[0])),
            NULL, NULL);
    if (pthread_create(&b->thread, NULL, committer_main, b) != 0) {
        pthread_cond_destroy(&b->cv);
        pthread_mutex_destroy(&b->mu);
        free(b);
        return NULL;
    }
    return b;
}

bool write_batch_submit(write_batch *b, wb_job *job)
{
    job->next = NULL;
    job->rounds = 0;
    pthread_mutex_lock(&b->mu);
    if (b->stop) {
        pthread_mutex_unlock(&b->mu);
        return false;
    }
    if (b->tail != NULL)
        b->tail->next = job;
    else
        b->head = job;
    b->tail = job;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return true;
}

void write_batch_stop(write_batch *b)
{
    if (b == NULL)
        return;
    pthread_mutex_lock(&b->mu);
    b->stop = true;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}
