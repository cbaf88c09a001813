/*
 * raft_loop.c — see raft_loop.h.
 */
#include "raft_loop.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#include "log.h"

typedef struct job {
    raft_loop_fn fn;
    void *arg;
    struct job *next;
} job;

typedef struct {
    raft_loop_fn fn;            /* NULL: removed during a pass, compacted after it */
    void *arg;
} ticker;

struct raft_loop {
    uv_loop_t loop;
    uv_async_t post;            /* other threads -> loop: jobs, or the stop */
    uv_timer_t tick;
    pthread_t thread;

    pthread_mutex_t mu;         /* the queue and stopping */
    job *head, *tail;
    bool stopping;

    /* loop thread only */
    ticker *tickers;
    size_t nticks, cap;
    bool ticking;               /* a pass is running: removals leave holes */
    bool closed;                /* post and tick are closing */
};

static void on_closed(uv_handle_t *h)
{
    (void)h;
}

/* The jobs posted so far, in order; then, if the loop is to stop, its own
 * handles close and uv_run returns (every group closed its own before). */
static void on_post(uv_async_t *a)
{
    raft_loop *l = a->data;
    pthread_mutex_lock(&l->mu);
    job *j = l->head;
    l->head = l->tail = NULL;
    bool stopping = l->stopping;
    pthread_mutex_unlock(&l->mu);
    while (j != NULL) {
        job *next = j->next;
        j->fn(j->arg);
        free(j);
        j = next;
    }
    if (!stopping || l->closed)
        return;
    pthread_mutex_lock(&l->mu);
    bool more = l->head != NULL; /* posted by a job just run: run it first */
    pthread_mutex_unlock(&l->mu);
    if (more) {
        uv_async_send(&l->post);
        return;
    }
    if (l->nticks > 0) { /* a group would tick on a loop that is gone */
        log_error("raft loop: stopped with %zu groups still on it", l->nticks);
        abort();
    }
    l->closed = true;
    uv_close((uv_handle_t *)&l->post, on_closed);
    uv_close((uv_handle_t *)&l->tick, on_closed);
}

static void on_tick(uv_timer_t *t)
{
    raft_loop *l = t->data;
    l->ticking = true;
    for (size_t i = 0; i < l->nticks; i++) /* those added meanwhile run too */
        if (l->tickers[i].fn != NULL)
            l->tickers[i].fn(l->tickers[i].arg);
    l->ticking = false;
    size_t k = 0;
    for (size_t i = 0; i < l->nticks; i++)
        if (l->tickers[i].fn != NULL)
            l->tickers[k++] = l->tickers[i];
    l->nticks = k;
    if (k == 0)
        uv_timer_stop(&l->tick);
}

static void *loop_main(void *arg)
{
    raft_loop *l = arg;
    uv_run(&l->loop, UV_RUN_DEFAULT);
    return NULL;
}

int raft_loop_start(raft_loop **out, char *err, size_t errlen)
{
    raft_loop *l = calloc(1, sizeof *l);
    *out = NULL;
    if (l == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (uv_loop_init(&l->loop) != 0) {
        snprintf(err, errlen, "cannot create an event loop");
        free(l);
        return -1;
    }
    l->post.data = l;
    l->tick.data = l;
    bool async_ok = uv_async_init(&l->loop, &l->post, on_post) == 0;
    bool timer_ok = async_ok && uv_timer_init(&l->loop, &l->tick) == 0;
    bool mutex_ok = timer_ok && pthread_mutex_init(&l->mu, NULL) == 0;
    if (!mutex_ok || pthread_create(&l->thread, NULL, loop_main, l) != 0) {
        snprintf(err, errlen, "cannot set up the event loop or its thread");
        if (async_ok)
            uv_close((uv_handle_t *)&l->post, on_closed);
        if (timer_ok)
            uv_close((uv_handle_t *)&l->tick, on_closed);
        /* runs the close callbacks; what it and uv_loop_close answer
         * changes nothing here: the loop is dropped either way */
        (void)uv_run(&l->loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&l->loop);
        if (mutex_ok)
            pthread_mutex_destroy(&l->mu);
        free(l);
        return -1;
    }
    *out = l;
    return 0;
}

void raft_loop_stop(raft_loop *l)
{
    if (l == NULL)
        return;
    if (raft_loop_on_thread(l)) { /* it would join itself */
        log_error("raft loop: stopped from its own thread");
        abort();
    }
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_mutex_unlock(&l->mu);
    uv_async_send(&l->post);
    pthread_join(l->thread, NULL);
    if (uv_loop_close(&l->loop) != 0)
        log_warn("raft loop: handles still open when it stopped");
    pthread_mutex_destroy(&l->mu);
    free(l->tickers);
    free(l);
}

struct uv_loop_s *raft_loop_uv(raft_loop *l)
{
    return &l->loop;
}

int raft_loop_post(raft_loop *l, raft_loop_fn fn, void *arg)
{
    job *j = malloc(sizeof *j);
    if (j == NULL)
        return -1;
    *j = (job){fn, arg, NULL};
    pthread_mutex_lock(&l->mu);
    if (l->stopping) { /* its handles may be closing: nothing more runs */
        pthread_mutex_unlock(&l->mu);
        free(j);
        return -1;
    }
    if (l->tail != NULL)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
    pthread_mutex_unlock(&l->mu);
    /* libuv's uv_async_send only fails on a handle that is not an async
     * one: never here. */
    (void)uv_async_send(&l->post);
    return 0;
}

bool raft_loop_on_thread(const raft_loop *l)
{
    return pthread_equal(pthread_self(), l->thread) != 0;
}

int raft_loop_tick_add(raft_loop *l, raft_loop_fn fn, void *arg)
{
    if (l->nticks == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        ticker *t = realloc(l->tickers, cap * sizeof *t);
        if (t == NULL)
            return -1;
        l->tickers = t;
        l->cap = cap;
    }
    if (!uv_is_active((uv_handle_t *)&l->tick) &&
        uv_timer_start(&l->tick, on_tick, RAFT_LOOP_TICK_MS, RAFT_LOOP_TICK_MS) != 0)
        return -1;
    l->tickers[l->nticks++] = (ticker){fn, arg};
    return 0;
}

void raft_loop_tick_remove(raft_loop *l, void *arg)
{
    for (size_t i = 0; i < l->nticks; i++) {
        if (l->tickers[i].arg != arg || l->tickers[i].fn == NULL)
            continue;
        if (l->ticking) {
            l->tickers[i].fn = NULL; /* on_tick compacts */
            return;
        }
        l->tickers[i] = l->tickers[--l->nticks];
        if (l->nticks == 0)
            uv_timer_stop(&l->tick);
        return;
    }
}
