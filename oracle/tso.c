/*
 * tso.c — timestamp allocator over the persisted high-water mark.
 *
 * Invariant: every timestamp handed out is <= `limit`, and `limit` is only
 * raised after hwm_persist() wrote a mark >= the new limit. Since `limit`
 * only grows, a thread that read limit L and then won the compare-and-swap
 * of `next` from n to n+count with n+count-1 <= L owns timestamps that are
 * covered by a durable mark, even if the limit moved meanwhile.
 *
 * After a restart `next` is the persisted mark + 1 and `limit` the mark: the
 * first request persists a new window. Timestamps reserved by the old run
 * but never handed out are skipped; that is the price of never asking the
 * disk on the fast path.
 *
 * Window sizing: start at 2^20. If the previous extension was less than a
 * second ago the window doubles (up to 2^34); after ten quiet seconds it
 * halves. Under a steady load the mark is written about once a second.
 */
#include "tso.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "hwm.h"
#include "log.h"
#include "timeutil.h"

#define WINDOW_MIN (UINT64_C(1) << 20)
#define WINDOW_MAX (UINT64_C(1) << 34)

struct tso {
    hwm_store *store;
    _Atomic uint64_t next;        /* next timestamp to hand out */
    _Atomic uint64_t limit;       /* highest timestamp covered by the durable mark */
    pthread_mutex_t extend_mu;    /* one extension at a time */
    uint64_t window;              /* guarded by extend_mu */
    uint64_t last_extend_ms;      /* guarded by extend_mu */
    metrics_series *m_persisted, *m_fsyncs, *m_persists, *m_window;
    metrics_series *m_persist_lat;
};

int tso_open(const char *dir, metrics_registry *metrics, tso **out, char *err, size_t errlen)
{
    *out = NULL;
    tso *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint64_t mark;
    if (hwm_open(dir, &t->store, &mark, err, errlen) != 0) {
        free(t);
        return -1;
    }
    if (mark >= TSO_MAX_TS)
        log_warn("oracle: persisted mark %llu is at the end of the timestamp space",
                 (unsigned long long)mark);
    if (pthread_mutex_init(&t->extend_mu, NULL) != 0) {
        hwm_close(t->store);
        free(t);
        snprintf(err, errlen, "cannot create a mutex");
        return -1;
    }
    atomic_init(&t->next, mark + 1);
    atomic_init(&t->limit, mark);
    t->window = WINDOW_MIN;
    if (metrics) {
        t->m_persisted = metrics_gauge1(metrics, "percolator_oracle_persisted_hwm",
                                        "high-water mark on disk: no timestamp above it has been handed out");
        t->m_fsyncs = metrics_counter1(metrics, "percolator_oracle_fsyncs_total",
                                       "fsync calls made to persist the high-water mark");
        t->m_persists = metrics_counter1(metrics, "percolator_oracle_hwm_persists_total",
                                         "times the high-water mark was raised");
        t->m_window = metrics_gauge1(metrics, "percolator_oracle_window",
                                     "timestamps reserved by the latest persist");
        metrics_family *lat = metrics_histogram(metrics, "percolator_oracle_persist_seconds",
                                                "time to persist the high-water mark",
                                                NULL, NULL, metrics_latency_buckets,
                                                metrics_latency_nbuckets);
        t->m_persist_lat = metrics_series_get(lat, NULL, NULL);
        metrics_set(t->m_persisted, (int64_t)mark);
    }
    *out = t;
    return 0;
}

/* Raise the limit so that `want` is covered. Called with extend_mu held. */
static int extend(tso *t, uint64_t want, char *err, size_t errlen)
{
    uint64_t limit = atomic_load(&t->limit);
    if (want <= limit)
        return TSO_OK; /* another thread extended while we waited */
    if (want > TSO_MAX_TS) {
        snprintf(err, errlen, "timestamp space exhausted (2^53)");
        return TSO_ERR_EXHAUSTED;
    }
    uint64_t now = time_mono_ms();
    if (t->last_extend_ms && now - t->last_extend_ms < 1000)
        t->window = t->window * 2 > WINDOW_MAX ? WINDOW_MAX : t->window * 2;
    else if (t->last_extend_ms && now - t->last_extend_ms > 10000)
        t->window = t->window / 2 < WINDOW_MIN ? WINDOW_MIN : t->window / 2;

    uint64_t mark = want + t->window;
    if (mark > TSO_MAX_TS || mark < want)
        mark = TSO_MAX_TS;

    unsigned fsyncs = 0;
    uint64_t t0 = time_mono_ns();
    int rc = hwm_persist(t->store, mark, &fsyncs, err, errlen);
    metrics_inc(t->m_fsyncs, fsyncs);
    if (rc != 0) {
        log_error("oracle: cannot persist high-water mark %llu: %s", (unsigned long long)mark, err);
        return TSO_ERR_IO;
    }
    metrics_observe(t->m_persist_lat, (double)(time_mono_ns() - t0) / 1e9);
    metrics_inc(t->m_persists, 1);
    metrics_set(t->m_persisted, (int64_t)mark);
    metrics_set(t->m_window, (int64_t)t->window);
    t->last_extend_ms = now;
    /* Publish only now: the mark is durable. */
    atomic_store(&t->limit, mark);
    log_debug("oracle: high-water mark now %llu", (unsigned long long)mark);
    return TSO_OK;
}

int tso_next(tso *t, uint32_t count, uint64_t *first, char *err, size_t errlen)
{
    if (count < 1 || count > TSO_MAX_COUNT) {
        snprintf(err, errlen, "count must be 1..%d", TSO_MAX_COUNT);
        return TSO_ERR_ARG;
    }
    for (;;) {
        uint64_t limit = atomic_load(&t->limit);
        uint64_t n = atomic_load(&t->next);
        uint64_t last = n + count - 1;
        if (last <= limit) {
            if (atomic_compare_exchange_weak(&t->next, &n, n + count)) {
                *first = n;
                return TSO_OK;
            }
            continue; /* another thread took some; retry */
        }
        pthread_mutex_lock(&t->extend_mu);
        int rc = extend(t, last, err, errlen);
        pthread_mutex_unlock(&t->extend_mu);
        if (rc != TSO_OK)
            return rc;
    }
}

int tso_raise(tso *t, uint64_t min, char *err, size_t errlen)
{
    if (min > TSO_MAX_TS) {
        snprintf(err, errlen, "--min-timestamp %llu is above 2^53",
                 (unsigned long long)min);
        return TSO_ERR_ARG;
    }
    if (min <= atomic_load(&t->limit))
        return TSO_OK;
    pthread_mutex_lock(&t->extend_mu);
    unsigned fsyncs = 0;
    int rc = hwm_persist(t->store, min, &fsyncs, err, errlen);
    metrics_inc(t->m_fsyncs, fsyncs);
    if (rc == 0) {
        metrics_set(t->m_persisted, (int64_t)min);
        /* Durable first: nothing at or below min is ever handed out. */
        atomic_store(&t->limit, min);
        atomic_store(&t->next, min + 1);
    }
    pthread_mutex_unlock(&t->extend_mu);
    return rc == 0 ? TSO_OK : TSO_ERR_IO;
}

uint64_t tso_persisted(const tso *t)
{
    return atomic_load(&((tso *)t)->limit);
}

uint64_t tso_last(const tso *t)
{
    return atomic_load(&((tso *)t)->next) - 1;
}

void tso_close(tso *t)
{
    if (!t)
        return;
    hwm_close(t->store);
    pthread_mutex_destroy(&t->extend_mu);
    free(t);
}
