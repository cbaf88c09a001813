/*
 * replicator_local.c — a log of one member (replicator.h): a single node
 * is a group of one.
 *
 * Writers queue their batches; one thread takes every batch queued so
 * far, joins them, applies them in one WiredTiger transaction as the next
 * index of the store (pc_apply_batch records it with the writes), flushes
 * the log once (pc_sync), and only then answers each writer. WiredTiger's
 * log is the log: a batch is durable once the flush that follows its
 * apply is, and a restart replays it with the store (nothing to replay
 * here). Batches queued while a flush runs form the next group, so one
 * fsync serves every writer that arrived during the last one — the group
 * commit of a Raft leader's append, without the quorum.
 *
 * The batches of one group never touch the same keys (the engine's
 * latches keep proposals on one key apart until the first is applied and
 * answered), so joining them changes nothing.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine_replica.h"
#include "failpoint.h"
#include "log.h"
#include "replicator.h"

/* Batches queued together are joined up to this size; a bigger one is a
 * group of its own (the next turn takes the rest). */
#define JOIN_MAX (4u << 20)

typedef struct lr_wait {
    const void *batch;          /* propose: the caller's; submit: copy, owned */
    size_t len;
    bool owned;
    replicator_done done;       /* NULL: propose, the caller waits for answered */
    void *arg;
    bool answered;
    rp_rc rc;
    struct lr_wait *next;
} lr_wait;

typedef struct {
    replicator base;            /* first: what the service holds */
    pc_engine *engine;
    void (*failed)(const char *what, pc_rc rc);
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;     /* the thread waits for batches */
    pthread_cond_t done_cv;     /* proposers wait for their answer */
    lr_wait *head, **tail;
    bool stop;
    int ready;                  /* 1: the thread has its session, -1: it could not */
    uint64_t applied;           /* the store's applied index (the thread's) */
    apply_listener listen;      /* who hears of applies (replicator.h) */
    metrics_series *m_groups, *m_batches, *m_group_bytes;
} local_repl;

static local_repl *L(replicator *r)
{
    return (local_repl *)r;
}

static uint64_t local_ready_term(replicator *r)
{
    (void)r;
    return REPLICATOR_LOCAL_TERM;
}

/* Queue w; false when stopping (or a term not ours: never current). */
static rp_rc enqueue(local_repl *l, lr_wait *w, uint64_t term)
{
    if (term != REPLICATOR_LOCAL_TERM)
        return RP_NOT_LEADER;
    pthread_mutex_lock(&l->mu);
    if (l->stop) {
        pthread_mutex_unlock(&l->mu);
        return RP_UNAVAILABLE;
    }
    w->next = NULL;
    *l->tail = w;
    l->tail = &w->next;
    pthread_cond_signal(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    return RP_OK;
}

static rp_rc local_propose(replicator *r, const void *batch, size_t len, uint64_t term,
                           unsigned wait_ms)
{
    (void)wait_ms; /* the thread answers every queued batch, stopping included */
    local_repl *l = L(r);
    lr_wait w = {.batch = batch, .len = len};
    rp_rc rc = enqueue(l, &w, term);
    if (rc != RP_OK)
        return rc;
    pthread_mutex_lock(&l->mu);
    while (!w.answered)
        pthread_cond_wait(&l->done_cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    return w.rc;
}

static rp_rc local_submit(replicator *r, const void *batch, size_t len, uint64_t term,
                          replicator_done done, void *arg)
{
    lr_wait *w = calloc(1, sizeof(*w));
    void *copy = malloc(len > 0 ? len : 1);
    if (w == NULL || copy == NULL) {
        free(w);
        free(copy);
        return RP_UNAVAILABLE;
    }
    memcpy(copy, batch, len);
    *w = (lr_wait){.batch = copy, .len = len, .owned = true, .done = done, .arg = arg};
    rp_rc rc = enqueue(L(r), w, term);
    if (rc != RP_OK) {
        free(copy);
        free(w);
    }
    return rc;
}

/* Everything applied was answered before its writer was: nothing to wait
 * for, and a group of one always leads. */
static rp_rc local_read_barrier(replicator *r, unsigned wait_ms)
{
    (void)r;
    (void)wait_ms;
    return RP_OK;
}

static bool local_read_now(replicator *r)
{
    (void)r;
    return true;
}

static uint64_t local_failures(replicator *r)
{
    (void)r;
    return 0;
}

static void local_status(replicator *r, rp_status *st)
{
    local_repl *l = L(r);
    pthread_mutex_lock(&l->mu);
    uint64_t applied = l->applied;
    pthread_mutex_unlock(&l->mu);
    *st = (rp_status){
        .role = "leader",
        .membership = "single",
        .term = REPLICATOR_LOCAL_TERM,
        .ready_term = REPLICATOR_LOCAL_TERM,
        .commit_index = applied,
        .applied_index = applied,
    };
}

static const replicator_ops local_ops = {
    .ready_term = local_ready_term,
    .propose = local_propose,
    .submit = local_submit,
    .read_barrier = local_read_barrier,
    .read_now = local_read_now,
    .failures = local_failures,
    .status = local_status,
};

/* The waits queued so far, at most JOIN_MAX bytes of them (at least one);
 * NULL when stopping and nothing is left. */
static lr_wait *take_group(local_repl *l)
{
    pthread_mutex_lock(&l->mu);
    while (l->head == NULL && !l->stop)
        pthread_cond_wait(&l->work_cv, &l->mu);
    lr_wait *first = l->head, *last = first;
    size_t bytes = first != NULL ? first->len : 0;
    while (last != NULL && last->next != NULL && bytes + last->next->len <= JOIN_MAX) {
        last = last->next;
        bytes += last->len;
    }
    if (last != NULL) {
        l->head = last->next;
        if (l->head == NULL)
            l->tail = &l->head;
        last->next = NULL;
    }
    pthread_mutex_unlock(&l->mu);
    return first;
}

/* Apply a group as the next index (one batch of them all) and make it
 * durable; the indexes it used. A failure does not return (l->failed). */
static uint64_t apply_group(local_repl *l, pc_session *ps, lr_wait *group)
{
    pc_buf joined = {0};
    size_t n = 0, bytes = 0;
    bool one = true;
    for (lr_wait *w = group; w != NULL; w = w->next) {
        n++;
        bytes += w->len;
    }
    for (lr_wait *w = group; n > 1 && w != NULL && one; w = w->next)
        one = pc_batch_join(&joined, w->batch, w->len) == PC_OK;
    uint64_t used = 0;
    pc_rc rc = PC_OK;
    const apply_listener *hear = &l->listen;
    if (hear->begin != NULL)
        hear->begin(hear->arg);
    if (n == 1)
        rc = pc_apply_batch(ps, group->batch, group->len, l->applied + ++used);
    else if (one)
        rc = pc_apply_batch(ps, joined.data, joined.len, l->applied + ++used);
    else /* out of memory to join them: one index each */
        for (lr_wait *w = group; w != NULL && rc == PC_OK; w = w->next)
            rc = pc_apply_batch(ps, w->batch, w->len, l->applied + ++used);
    if (rc != PC_OK)
        l->failed("applying a write batch", rc);
    /* Told before the flush below: what a crash could still take back is
     * either in the table of commits in flight, which keeps the resolved
     * timestamp below it (memlock.c), or a secondary's commit, which a
     * resolve makes again at the same commit_ts (docs/DESIGN.md §10). */
    for (lr_wait *w = group; hear->batch != NULL && w != NULL; w = w->next)
        hear->batch(hear->arg, w->batch, w->len);
    if (hear->end != NULL)
        hear->end(hear->arg);
    pc_buf_free(&joined);
    /* Tests widen the window between apply and flush here, or fail the
     * flush. */
    failpoint(ps, "local_sync");
    rc = failpoint_fails("local_sync") ? PC_SYNC_FAILED : pc_sync(ps);
    if (rc != PC_OK)
        l->failed("flushing the log after a write batch", rc);
    metrics_inc(l->m_groups, 1);
    metrics_inc(l->m_batches, n);
    metrics_observe(l->m_group_bytes, (double)bytes);
    return used;
}

/* Answer a group: proposers under the lock (one wake-up for them all),
 * then the submitted waits' callbacks. A proposer's wait lives on its
 * stack: not touched once it is answered. */
static void answer_group(local_repl *l, lr_wait *group, uint64_t used)
{
    lr_wait *submitted = NULL, **tail = &submitted;
    pthread_mutex_lock(&l->mu);
    l->applied += used;
    for (lr_wait *w = group, *next; w != NULL; w = next) {
        next = w->next;
        if (w->done != NULL) {
            *tail = w;
            tail = &w->next;
        } else {
            w->rc = RP_OK;
            w->answered = true;
        }
    }
    *tail = NULL;
    pthread_cond_broadcast(&l->done_cv);
    pthread_mutex_unlock(&l->mu);
    for (lr_wait *w = submitted, *next; w != NULL; w = next) {
        next = w->next;
        w->done(w->arg, RP_OK);
        free((void *)w->batch);
        free(w);
    }
}

static void *local_main(void *arg)
{
    local_repl *l = arg;
    pc_session *ps = NULL;
    uint64_t applied = 0;
    bool ok = pc_session_open(l->engine, &ps) == PC_OK && pc_applied_index(ps, &applied) == PC_OK;
    pthread_mutex_lock(&l->mu);
    l->ready = ok ? 1 : -1;
    l->applied = applied;
    pthread_cond_broadcast(&l->done_cv);
    pthread_mutex_unlock(&l->mu);
    if (!ok) {
        pc_session_close(ps);
        return NULL;
    }
    lr_wait *group;
    while ((group = take_group(l)) != NULL) {
        answer_group(l, group, apply_group(l, ps, group));
    }
    pc_session_close(ps);
    return NULL;
}

static void init_metrics(local_repl *l, metrics_registry *m)
{
    static const double buckets[] = {256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304};
    if (m == NULL)
        return;
    l->m_groups = metrics_counter1(m, "percolator_local_groups_total",
                                   "groups of write batches applied in one transaction and "
                                   "made durable by one log flush (a single node)");
    l->m_batches = metrics_counter1(m, "percolator_local_batches_total",
                                    "write batches applied (a single node; one per action that "
                                    "wrote, or per round of the blind-write committer)");
    l->m_group_bytes = metrics_series_get(
        metrics_histogram(m, "percolator_local_group_bytes",
                          "bytes of a group of write batches applied together (a single node)",
                          NULL, NULL, buckets, sizeof(buckets) / sizeof(buckets[0])),
        NULL, NULL);
}

replicator *replicator_local_start(pc_engine *e, void (*failed)(const char *what, pc_rc rc),
                                   metrics_registry *m, const apply_listener *listen)
{
    local_repl *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    if (listen != NULL)
        l->listen = *listen;
    l->base.ops = &local_ops;
    l->engine = e;
    l->failed = failed;
    l->tail = &l->head;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->done_cv, NULL);
    init_metrics(l, m);
    if (pthread_create(&l->thread, NULL, local_main, l) != 0) {
        log_error("local replicator: cannot start its thread");
        replicator_local_stop(&l->base);
        return NULL;
    }
    l->started = true;
    pthread_mutex_lock(&l->mu);
    while (l->ready == 0)
        pthread_cond_wait(&l->done_cv, &l->mu);
    bool ok = l->ready > 0;
    pthread_mutex_unlock(&l->mu);
    if (!ok) {
        log_error("local replicator: no storage session, or the applied index cannot be read");
        replicator_local_stop(&l->base);
        return NULL;
    }
    log_info("local replicator: a group of one, applied index %llu",
             (unsigned long long)l->applied);
    return &l->base;
}

void replicator_local_stop(replicator *r)
{
    if (r == NULL)
        return;
    local_repl *l = L(r);
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    if (l->started)
        pthread_join(l->thread, NULL);
    pthread_cond_destroy(&l->done_cv);
    pthread_cond_destroy(&l->work_cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
