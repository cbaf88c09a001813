/*
 * memlock.c — the in-memory lock table of one-phase commit.
 *
 * one_pc writes no lock: it takes its commit timestamp from the oracle and
 * then commits data and write records in one WiredTiger transaction. In
 * between, a reader whose start_ts is above that commit timestamp could
 * read the key, find nothing yet, and later see the commit appear below
 * its snapshot — a non-repeatable read. So one_pc holds its keys here from
 * before it asks for the timestamp until its WiredTiger commit, and
 * snapshot readers at or above its start_ts wait for it (TiKV keeps such
 * in-memory locks for the same reason). Only in-flight one-phase commits
 * are here, so the table is tiny, and readers skip it when it is empty.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define MEMLOCK_WAIT_MS 5000

typedef struct {
    uint8_t *key;
    size_t len;
    uint64_t start_ts;
} memlock;

struct pc_memlocks {
    pthread_mutex_t mu;
    pthread_cond_t released;
    atomic_size_t count;
    memlock *v;
    size_t n, cap;
};

pc_rc pc_memlocks_new(pc_memlocks **out)
{
    pc_memlocks *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return PC_NOMEM;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->released, NULL);
    atomic_init(&m->count, 0);
    *out = m;
    return PC_OK;
}

void pc_memlocks_free(pc_memlocks *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].key);
    free(m->v);
    pthread_cond_destroy(&m->released);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static ssize_t find(pc_memlocks *m, pc_slice k)
{
    for (size_t i = 0; i < m->n; i++)
        if (pc_key_cmp(m->v[i].key, m->v[i].len, k.data, k.len) == 0)
            return (ssize_t)i;
    return -1;
}

pc_rc pc_memlock_acquire(pc_memlocks *m, const pc_mutation *muts, size_t n, uint64_t start_ts,
                         size_t *busy)
{
    pc_rc rc = PC_OK;
    size_t taken = 0;

    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        if (find(m, muts[i].key) >= 0) {
            *busy = i;
            rc = PC_LOCKED;
            break;
        }
        if (m->n == m->cap) {
            size_t cap = m->cap ? m->cap * 2 : 16;
            memlock *v = realloc(m->v, cap * sizeof(*v));
            if (v == NULL) {
                rc = PC_NOMEM;
                break;
            }
            m->v = v;
            m->cap = cap;
        }
        uint8_t *copy = malloc(muts[i].key.len);
        if (copy == NULL) {
            rc = PC_NOMEM;
            break;
        }
        memcpy(copy, muts[i].key.data, muts[i].key.len);
        m->v[m->n++] = (memlock){copy, muts[i].key.len, start_ts};
        taken++;
    }
    atomic_store(&m->count, m->n);
    pthread_mutex_unlock(&m->mu);
    if (rc != PC_OK)
        pc_memlock_release(m, muts, taken, start_ts);
    return rc;
}

void pc_memlock_release(pc_memlocks *m, const pc_mutation *muts, size_t n, uint64_t start_ts)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        ssize_t j = find(m, muts[i].key);
        if (j < 0 || m->v[j].start_ts != start_ts)
            continue;
        free(m->v[j].key);
        m->v[j] = m->v[--m->n];
    }
    atomic_store(&m->count, m->n);
    pthread_cond_broadcast(&m->released);
    pthread_mutex_unlock(&m->mu);
}

static bool blocks(const memlock *l, pc_slice start, const pc_slice *end, bool point, uint64_t ts)
{
    if (l->start_ts > ts)
        return false;
    if (point)
        return pc_key_cmp(l->key, l->len, start.data, start.len) == 0;
    if (pc_key_cmp(l->key, l->len, start.data, start.len) < 0)
        return false;
    return end == NULL || end->len == 0 || pc_key_cmp(l->key, l->len, end->data, end->len) < 0;
}

pc_rc pc_memlock_wait(pc_memlocks *m, pc_slice start, const pc_slice *end, bool point,
                      uint64_t ts)
{
    struct timespec deadline;
    pc_rc rc = PC_OK;

    if (atomic_load(&m->count) == 0)
        return PC_OK;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += MEMLOCK_WAIT_MS / 1000;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        bool blocked = false;
        for (size_t i = 0; i < m->n && !blocked; i++)
            blocked = blocks(&m->v[i], start, end, point, ts);
        if (!blocked)
            break;
        if (pthread_cond_timedwait(&m->released, &m->mu, &deadline) == ETIMEDOUT) {
            rc = PC_LOCKED;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}
