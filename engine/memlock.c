/*
 * memlock.c — the in-memory table of commits in flight.
 *
 * Two kinds of entry, both about keys whose newest commit is not yet safe
 * to read (docs/DESIGN.md §4.4):
 *
 *  - pending: a one-phase commit holds its keys from before it asks for
 *    its commit timestamp until it is in its batch. A reader whose
 *    snapshot is at or above the commit's start could otherwise read the
 *    key, find nothing yet, and later see the commit appear below its
 *    snapshot — a non-repeatable read (TiKV keeps in-memory locks for the
 *    same reason). A blind write's start is 0: its timestamp is unknown,
 *    so it blocks every snapshot for that moment.
 *  - committed, not durable: once the commit is in the batch, nothing is
 *    written yet: the entry is handed over to the session's latches and
 *    stays until the caller made the batch durable, applied it and
 *    released them (pc_latches_release), so a reader never meets a store
 *    that lacks a commit below its snapshot (docs/DESIGN.md §9). No read
 *    may return a version a crash could still take back: a read that found
 *    such a version answers PC_LOCKED and waits for the release instead.
 *    The commit point of a two-phase commit (its primary) is held the same
 *    way; so are blind writes until pc_one_pc_blind_durable.
 *
 * Entries are found by (key, tag): the tag is the start_ts given at
 * acquire (0 for blind writes), or the commit_ts of a two-phase commit
 * point. Only commits in flight are here, so the table is tiny, and
 * readers skip it when it is empty.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

typedef struct {
    uint8_t *key;
    size_t len;
    uint64_t tag;         /* identity with the key: see above */
    uint64_t from_ts;     /* snapshots at or above it must not read the key yet */
    uint64_t commit_ts;   /* 0: pending; else committed at it, not yet durable */
    const void *owner;    /* NULL, or the latches it is released with (propose mode) */
    /* No commit of this entry lands at or below it (a change feed's
     * resolved timestamp stays at or under it: pc_memlock_resolved): a
     * pending commit of start_ts commits above start_ts; a blind write's
     * timestamp, asked for after the entry was made, is above every
     * timestamp the store held then; a committed one lands at commit_ts. */
    uint64_t below;
} memlock;

struct pc_memlocks {
    const _Atomic uint64_t *ts_max; /* the store's highest timestamp (a blind write's floor) */
    pthread_mutex_t mu;
    pthread_cond_t released;  /* on CLOCK_MONOTONIC */
    atomic_size_t count;
    memlock *v;
    size_t n, cap;
};

pc_rc pc_memlocks_new(pc_memlocks **out, const _Atomic uint64_t *ts_max)
{
    pthread_condattr_t ca;
    pc_memlocks *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return PC_NOMEM;
    m->ts_max = ts_max;
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->released, &ca);
    pthread_condattr_destroy(&ca);
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

static bool same_key(const memlock *l, pc_slice k)
{
    return pc_key_cmp(l->key, l->len, k.data, k.len) == 0;
}

static ssize_t find(pc_memlocks *m, pc_slice k, uint64_t tag)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].tag == tag && same_key(&m->v[i], k))
            return (ssize_t)i;
    return -1;
}

static bool key_held(pc_memlocks *m, pc_slice k)
{
    for (size_t i = 0; i < m->n; i++)
        if (same_key(&m->v[i], k))
            return true;
    return false;
}

/* Append an entry; the caller holds m->mu. */
static pc_rc add(pc_memlocks *m, pc_slice k, uint64_t tag, uint64_t from_ts, uint64_t commit_ts)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        memlock *v = realloc(m->v, cap * sizeof(*v));
        if (v == NULL)
            return PC_NOMEM;
        m->v = v;
        m->cap = cap;
    }
    uint8_t *copy = malloc(k.len);
    if (copy == NULL)
        return PC_NOMEM;
    memcpy(copy, k.data, k.len);
    uint64_t below = commit_ts != 0 ? commit_ts - 1
                     : from_ts != 0 ? from_ts
                                    : atomic_load(m->ts_max);
    m->v[m->n++] = (memlock){copy, k.len, tag, from_ts, commit_ts, NULL, below};
    atomic_store(&m->count, m->n);
    return PC_OK;
}

pc_rc pc_memlock_acquire(pc_memlocks *m, const pc_mutation *muts, size_t n, uint64_t start_ts,
                         size_t *busy)
{
    pc_rc rc = PC_OK;
    size_t taken = 0;

    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        /* Exclusive: a key with any commit in flight is busy. */
        if (key_held(m, muts[i].key)) {
            *busy = i;
            rc = PC_LOCKED;
            break;
        }
        if ((rc = add(m, muts[i].key, start_ts, start_ts, 0)) != PC_OK)
            break;
        taken++;
    }
    pthread_mutex_unlock(&m->mu);
    if (rc != PC_OK)
        pc_memlock_release(m, muts, taken, start_ts);
    return rc;
}

pc_rc pc_memlock_hold_commit(pc_memlocks *m, pc_slice key, uint64_t commit_ts)
{
    pthread_mutex_lock(&m->mu);
    pc_rc rc = add(m, key, commit_ts, commit_ts, commit_ts);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

void pc_memlock_committed(pc_memlocks *m, const pc_mutation *muts, size_t n, uint64_t start_ts,
                          uint64_t commit_ts)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        ssize_t j = find(m, muts[i].key, start_ts);
        if (j < 0)
            continue;
        /* Older snapshots cannot see it: only those at or above it wait. */
        m->v[j].from_ts = commit_ts;
        m->v[j].commit_ts = commit_ts;
        m->v[j].below = commit_ts - 1;
    }
    pthread_cond_broadcast(&m->released);
    pthread_mutex_unlock(&m->mu);
}

void pc_memlock_release(pc_memlocks *m, const pc_mutation *muts, size_t n, uint64_t tag)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        ssize_t j = find(m, muts[i].key, tag);
        if (j < 0)
            continue;
        free(m->v[j].key);
        m->v[j] = m->v[--m->n];
    }
    atomic_store(&m->count, m->n);
    pthread_cond_broadcast(&m->released);
    pthread_mutex_unlock(&m->mu);
}

void pc_memlock_release_key(pc_memlocks *m, pc_slice key, uint64_t tag)
{
    pc_mutation one = {.op = PC_OP_PUT, .key = key};
    pc_memlock_release(m, &one, 1, tag);
}

void pc_memlock_hand_over(pc_memlocks *m, const pc_mutation *muts, size_t n, uint64_t tag,
                          const void *owner)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        ssize_t j = find(m, muts[i].key, tag);
        if (j >= 0)
            m->v[j].owner = owner;
    }
    pthread_mutex_unlock(&m->mu);
}

void pc_memlock_release_owner(pc_memlocks *m, const void *owner)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n;) {
        if (m->v[i].owner != owner) {
            i++;
            continue;
        }
        free(m->v[i].key);
        m->v[i] = m->v[--m->n];
    }
    atomic_store(&m->count, m->n);
    pthread_cond_broadcast(&m->released);
    pthread_mutex_unlock(&m->mu);
}

/* Does entry l keep a read of [start, end) (a point when point) at ts
 * from going on? */
static bool blocks(const memlock *l, pc_slice start, const pc_slice *end, bool point, uint64_t ts,
                   pc_memlock_mode mode)
{
    switch (mode) {
    case PC_MEMLOCK_SNAPSHOT:
        if (l->from_ts > ts)
            return false;
        break;
    case PC_MEMLOCK_COMMITTED:
        if (l->commit_ts == 0 || l->commit_ts > ts)
            return false;
        break;
    case PC_MEMLOCK_ANY:
        break;
    }
    if (point)
        return same_key(l, start);
    if (pc_key_cmp(l->key, l->len, start.data, start.len) < 0)
        return false;
    return end == NULL || end->len == 0 || pc_key_cmp(l->key, l->len, end->data, end->len) < 0;
}

/* The first blocking entry's index, or -1; the caller holds m->mu. */
static ssize_t first_blocking(pc_memlocks *m, pc_slice start, const pc_slice *end, bool point,
                              uint64_t ts, pc_memlock_mode mode)
{
    for (size_t i = 0; i < m->n; i++)
        if (blocks(&m->v[i], start, end, point, ts, mode))
            return (ssize_t)i;
    return -1;
}

bool pc_memlock_blocked(pc_memlocks *m, pc_slice start, const pc_slice *end, bool point,
                        uint64_t ts, pc_memlock_mode mode, pc_conflict *c)
{
    if (atomic_load(&m->count) == 0)
        return false;
    pthread_mutex_lock(&m->mu);
    ssize_t i = first_blocking(m, start, end, point, ts, mode);
    if (i >= 0 && c != NULL) {
        /* Report it as a lock of start 0 (nothing to resolve: wait). */
        pc_slice k = {m->v[i].key, m->v[i].len};
        pc_lock_rec l = {.op = PC_OP_PUT, .start_ts = 0, .primary = k};
        pc_conflict_from_lock(c, k, &l);
        c->in_flight_ts = ts;
        c->in_flight_mode = (int)mode;
    }
    pthread_mutex_unlock(&m->mu);
    return i >= 0;
}

uint64_t pc_memlock_resolved(pc_memlocks *m, uint64_t upto)
{
    if (atomic_load(&m->count) == 0)
        return upto;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].below < upto)
            upto = m->v[i].below;
    pthread_mutex_unlock(&m->mu);
    return upto;
}

uint64_t pc_memlock_oldest_commit(pc_memlocks *m, pc_slice key)
{
    uint64_t oldest = 0;
    if (atomic_load(&m->count) == 0)
        return 0;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n; i++) {
        const memlock *l = &m->v[i];
        if (l->commit_ts != 0 && (oldest == 0 || l->commit_ts < oldest) && same_key(l, key))
            oldest = l->commit_ts;
    }
    pthread_mutex_unlock(&m->mu);
    return oldest;
}

pc_rc pc_memlock_wait(pc_memlocks *m, pc_slice key, uint64_t ts, pc_memlock_mode mode,
                      uint64_t deadline_mono_ms)
{
    struct timespec deadline = {.tv_sec = (time_t)(deadline_mono_ms / 1000),
                                .tv_nsec = (long)(deadline_mono_ms % 1000) * 1000000};
    pc_rc rc = PC_OK;

    if (atomic_load(&m->count) == 0)
        return PC_OK;
    pthread_mutex_lock(&m->mu);
    while (first_blocking(m, key, NULL, true, ts, mode) >= 0) {
        if (pthread_cond_timedwait(&m->released, &m->mu, &deadline) == ETIMEDOUT) {
            rc = PC_LOCKED;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}
