/*
 * parts.h — a transaction's parts run side by side: the prewrites of its
 * regions at once, then its secondaries' commits at once, as TiKV's
 * client sends each region's part of a phase together (DESIGN §6.6). A few
 * threads of the node's, each with its own storage session, take parts
 * the coordinator offers; whatever none has taken when the coordinator
 * is done with its own it runs itself, so a busy pool delays a
 * transaction but never stops it, and no part waits on another.
 */
#ifndef PC_PARTS_H
#define PC_PARTS_H

#include "service.h"

#define PARTS_THREADS 4 /* parts run by the pool at once, the node's whole */
#define PARTS_WIDTH 8   /* parts of one transaction offered at once */

typedef struct parts_pool parts_pool;

typedef struct part_job {
    pc_rc (*run)(svc *s, pc_session *ps, void *arg);
    void *arg;
    pc_rc rc;                 /* what run returned */
    int state;                /* the pool's */
    struct part_job *next;    /* the pool's */
} part_job;

/* NULL: out of memory or threads. */
parts_pool *parts_start(svc *s);
/* After every thread that runs parts (workers, janitor) has stopped. */
void parts_stop(parts_pool *p);

/* Run jobs[0..n) (n at most PARTS_WIDTH): jobs[0] here, the others as the
 * pool takes them (here if it has not); returns when every one is done,
 * each job's rc set. p NULL: each here, one after another. */
void parts_run(parts_pool *p, svc *s, pc_session *ps, part_job *jobs, size_t n);

#endif
