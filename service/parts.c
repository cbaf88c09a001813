/*
 * parts.c — see parts.h.
 */
#include <pthread.h>
#include <stdlib.h>

#include "log.h"
#include "parts.h"

enum { QUEUED, TAKEN, DONE };

struct parts_pool {
    svc *s;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    part_job *head;           /* offered, not taken */
    bool stop;
    pthread_t t[PARTS_THREADS];
    size_t nthreads;
};

static void *pool_main(void *arg)
{
    parts_pool *p = arg;
    /* The thread's own session (svc_engine_session keeps it); without
     * one it takes no part: the callers run theirs. */
    pc_session *ps = svc_engine_session(p->s);
    if (ps == NULL) {
        log_error("parts: a pool thread has no storage session: it takes no part");
        return NULL;
    }
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->head == NULL)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->stop)
            break;
        part_job *j = p->head;
        p->head = j->next;
        j->state = TAKEN;
        pthread_mutex_unlock(&p->mu);
        pc_rc rc = j->run(p->s, ps, j->arg);
        pthread_mutex_lock(&p->mu);
        j->rc = rc;
        j->state = DONE;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

parts_pool *parts_start(svc *s)
{
    parts_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->s = s;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (; p->nthreads < PARTS_THREADS; p->nthreads++)
        if (pthread_create(&p->t[p->nthreads], NULL, pool_main, p) != 0) {
            parts_stop(p);
            return NULL;
        }
    return p;
}

void parts_stop(parts_pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < p->nthreads; i++)
        pthread_join(p->t[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p);
}

/* Take j back if the pool has not: true when the caller is to run it. */
static bool take_back(parts_pool *p, part_job *j)
{
    for (part_job **at = &p->head; *at != NULL; at = &(*at)->next)
        if (*at == j) {
            *at = j->next;
            j->state = TAKEN;
            return true;
        }
    return false;
}

void parts_run(parts_pool *p, svc *s, pc_session *ps, part_job *jobs, size_t n)
{
    if (p == NULL || n < 2 || n > PARTS_WIDTH) {
        for (size_t i = 0; i < n; i++)
            jobs[i].rc = jobs[i].run(s, ps, jobs[i].arg);
        return;
    }
    pthread_mutex_lock(&p->mu);
    for (size_t i = n - 1; i >= 1; i--) { /* the head is jobs[1]: taken first */
        jobs[i].state = QUEUED;
        jobs[i].next = p->head;
        p->head = &jobs[i];
    }
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    jobs[0].rc = jobs[0].run(s, ps, jobs[0].arg);
    /* Every part no pool thread has begun is the caller's, taken back at
     * once; then the wait for those begun. */
    bool mine[PARTS_WIDTH] = {false};
    pthread_mutex_lock(&p->mu);
    for (size_t i = 1; i < n; i++)
        mine[i] = take_back(p, &jobs[i]);
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 1; i < n; i++)
        if (mine[i])
            jobs[i].rc = jobs[i].run(s, ps, jobs[i].arg);
    pthread_mutex_lock(&p->mu);
    for (size_t i = 1; i < n; i++)
        while (!mine[i] && jobs[i].state != DONE)
            pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
