/*
 * sessions.c — the session table: a hash of ids in striped buckets (no
 * global lock), reference counts so a session is never freed under a
 * request that uses it, and leases on the monotonic clock.
 */
#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine.h"
#include "sessions.h"

#define NBUCKETS 256

typedef struct bucket {
    pthread_mutex_t mu;
    txn *head;
} bucket;

struct sessions {
    char run_id[24];
    uint64_t retention_ms;
    atomic_uint_fast64_t seq;
    /* Stall detection (sessions_now). */
    uint64_t stall_ms;
    atomic_uint_fast64_t last_seen, stall_end, stall_len;
    void (*end_hook)(void *arg, txn *t);
    void *end_arg;
    /* Bounded memory: sessions open (active or committing) and the bytes
     * their buffers are charged (txn.charged), all sessions together;
     * mirrored in the gauges, if set. */
    atomic_size_t open, charged;
    metrics_series *open_gauge, *bytes_gauge;
    bucket b[NBUCKETS];
};

static bucket *bucket_of(sessions *s, uint64_t seq)
{
    return &s->b[seq % NBUCKETS];
}

/* The sequence a session id or owner names after `prefix` ("" or the run
 * id and '-'), and where it ends; false if it names none. */
static bool parse_seq(const char *p, size_t len, const char *prefix, uint64_t *seq,
                      size_t *end)
{
    size_t pl = strlen(prefix), i = pl;
    if (len < pl || memcmp(p, prefix, pl) != 0)
        return false;
    *seq = 0;
    for (; i < len && i - pl < 16 && isxdigit((unsigned char)p[i]); i++)
        *seq = *seq << 4 | (uint64_t)(isdigit((unsigned char)p[i]) ? p[i] - '0'
                                                                  : (p[i] | 0x20) - 'a' + 10);
    *end = i;
    return i > pl;
}

/* Equal, in a time that does not depend on where they differ. */
static bool same_secret(const char *a, const char *b, size_t len)
{
    unsigned diff = 0;
    for (size_t i = 0; i < len; i++)
        diff |= (unsigned char)a[i] ^ (unsigned char)b[i];
    return diff == 0;
}

sessions *sessions_new(const char *run_id, uint64_t retention_ms)
{
    sessions *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    snprintf(s->run_id, sizeof(s->run_id), "%s", run_id);
    s->retention_ms = retention_ms;
    atomic_init(&s->seq, 0);
    s->stall_ms = 5000;
    atomic_init(&s->last_seen, 0);
    atomic_init(&s->stall_end, 0);
    atomic_init(&s->stall_len, 0);
    atomic_init(&s->open, 0);
    atomic_init(&s->charged, 0);
    for (int i = 0; i < NBUCKETS; i++)
        pthread_mutex_init(&s->b[i].mu, NULL);
    return s;
}

static void free_buffer(txn *t)
{
    for (size_t i = 0; i < t->nw; i++) {
        free(t->w[i].key);
        free(t->w[i].val);
    }
    free(t->w);
    t->w = NULL;
    t->nw = t->capw = t->bytes = 0;
}

static void txn_free(txn *t)
{
    free_buffer(t);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

void sessions_free(sessions *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < NBUCKETS; i++) {
        txn *t = s->b[i].head;
        while (t != NULL) {
            txn *next = t->next;
            if (t->claim != NULL && s->end_hook != NULL)
                s->end_hook(s->end_arg, t); /* frees the claim */
            txn_free(t);
            t = next;
        }
        pthread_mutex_destroy(&s->b[i].mu);
    }
    free(s);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sessions_set_gauges(sessions *s, metrics_series *open, metrics_series *bytes)
{
    s->open_gauge = open;
    s->bytes_gauge = bytes;
}

/* Add n to *v unless that takes it past max; false (nothing added) then. */
static bool add_capped(atomic_size_t *v, size_t n, size_t max)
{
    size_t cur = atomic_load(v);
    do {
        if (n > max || cur > max - n)
            return false;
    } while (!atomic_compare_exchange_weak(v, &cur, cur + n));
    return true;
}

txn *sessions_begin(sessions *s, uint64_t start_ts, uint64_t lease_ttl_ms)
{
    return sessions_begin_capped(s, start_ts, lease_ttl_ms, SIZE_MAX, NULL);
}

txn *sessions_begin_capped(sessions *s, uint64_t start_ts, uint64_t lease_ttl_ms,
                           size_t max_open, bool *full)
{
    if (full != NULL)
        *full = false;
    if (!add_capped(&s->open, 1, max_open)) {
        if (full != NULL)
            *full = true;
        return NULL;
    }
    unsigned char secret[16];
    txn *t = getrandom(secret, sizeof secret, 0) == (ssize_t)sizeof secret
                 ? calloc(1, sizeof(*t))
                 : NULL;
    if (t == NULL) {
        atomic_fetch_sub(&s->open, 1);
        return NULL;
    }
    metrics_add(s->open_gauge, 1);
    uint64_t seq = atomic_fetch_add(&s->seq, 1) + 1;
    int n = snprintf(t->id, sizeof(t->id), "%llx-", (unsigned long long)seq);
    for (size_t i = 0; i < sizeof secret; i++)
        n += snprintf(t->id + n, sizeof(t->id) - (size_t)n, "%02x", secret[i]);
    snprintf(t->owner, sizeof(t->owner), "%s-%llx", s->run_id, (unsigned long long)seq);
    t->seq = seq;
    t->start_ts = start_ts;
    t->lease_ttl_ms = lease_ttl_ms;
    atomic_init(&t->lease_deadline_ms, mono_ms() + lease_ttl_ms);
    atomic_init(&t->state, TXN_ACTIVE);
    pthread_mutex_init(&t->mu, NULL);
    t->refs = 1;
    bucket *b = bucket_of(s, seq);
    pthread_mutex_lock(&b->mu);
    t->next = b->head;
    b->head = t;
    pthread_mutex_unlock(&b->mu);
    return t;
}

txn *sessions_get(sessions *s, const char *id, size_t len)
{
    uint64_t seq;
    size_t end;
    txn *t;

    if (!parse_seq(id, len, "", &seq, &end))
        return NULL;
    bucket *b = bucket_of(s, seq);
    pthread_mutex_lock(&b->mu);
    for (t = b->head; t != NULL; t = t->next)
        if (t->seq == seq && strlen(t->id) == len && same_secret(t->id, id, len))
            break;
    if (t != NULL)
        t->refs++;
    pthread_mutex_unlock(&b->mu);
    return t;
}

void sessions_release(sessions *s, txn *t)
{
    if (t == NULL)
        return;
    bucket *b = bucket_of(s, t->seq);
    pthread_mutex_lock(&b->mu);
    t->refs--;
    pthread_mutex_unlock(&b->mu);
}

void sessions_set_stall_ms(sessions *s, uint64_t stall_ms)
{
    s->stall_ms = stall_ms;
}

uint64_t sessions_now(sessions *s)
{
    uint64_t now = mono_ms();
    uint64_t prev = atomic_load(&s->last_seen);
    /* Keep the latest reading; the one that sees the gap reports it. */
    while (prev < now && !atomic_compare_exchange_weak(&s->last_seen, &prev, now))
        ;
    if (prev != 0 && prev < now && now - prev > s->stall_ms) {
        atomic_store(&s->stall_len, now - prev);
        atomic_store(&s->stall_end, now);
    }
    return now;
}

uint64_t sessions_stall_credit_ms(sessions *s)
{
    uint64_t end = atomic_load(&s->stall_end), now = mono_ms();
    /* The grace lasts as long as the longest lease could need: the stall
     * itself, again, is a fair bound. */
    uint64_t len = atomic_load(&s->stall_len);
    return end != 0 && now <= end + len ? len : 0;
}

void sessions_last_stall(sessions *s, uint64_t *end, uint64_t *len)
{
    *end = atomic_load(&s->stall_end);
    *len = atomic_load(&s->stall_len);
}

/* The lease's end, counting the grace a stall gives to sessions that were
 * alive when it began. */
static uint64_t lease_end(sessions *s, const txn *t)
{
    uint64_t deadline = atomic_load(&t->lease_deadline_ms);
    uint64_t end = atomic_load(&s->stall_end), len = atomic_load(&s->stall_len);
    if (end != 0 && deadline >= end - len && end + t->lease_ttl_ms > deadline)
        return end + t->lease_ttl_ms;
    return deadline;
}

bool sessions_renew(sessions *s, txn *t)
{
    uint64_t now = sessions_now(s);
    if (now > lease_end(s, t))
        return false;
    atomic_store(&t->lease_deadline_ms, now + t->lease_ttl_ms);
    return true;
}

void sessions_set_end_hook(sessions *s, void (*fn)(void *arg, txn *t), void *arg)
{
    s->end_hook = fn;
    s->end_arg = arg;
}

void sessions_commit_begin(txn *t)
{
    assert(atomic_load(&t->state) == TXN_ACTIVE);
    atomic_store(&t->state, TXN_COMMITTING);
}

void sessions_commit_retry(txn *t)
{
    assert(atomic_load(&t->state) == TXN_COMMITTING);
    atomic_store(&t->state, TXN_ACTIVE);
}

void sessions_end(sessions *s, txn *t, txn_state state, const char *reason)
{
    int from = atomic_load(&t->state);
    /* Only a running session ends, and only a commit commits. */
    assert(from == TXN_ACTIVE || from == TXN_COMMITTING);
    assert(state == TXN_ABORTED || (state == TXN_COMMITTED && from == TXN_COMMITTING));
    (void)from;
    if (t->claim != NULL && s->end_hook != NULL)
        s->end_hook(s->end_arg, t);
    t->end_reason = reason;
    /* Nobody asks after the service's own sessions: drop them at the next
     * reap instead of keeping them for the retention time. */
    t->ended_ms = t->internal ? 0 : mono_ms();
    free_buffer(t);
    sessions_charge(s, t, 0, 0);
    atomic_fetch_sub(&s->open, 1);
    metrics_add(s->open_gauge, -1);
    atomic_store(&t->state, state);
}

bool sessions_charge(sessions *s, txn *t, size_t bytes, size_t max_total)
{
    if (bytes > t->charged) {
        if (!add_capped(&s->charged, bytes - t->charged, max_total))
            return false;
        metrics_add(s->bytes_gauge, (int64_t)(bytes - t->charged));
    } else {
        atomic_fetch_sub(&s->charged, t->charged - bytes);
        metrics_add(s->bytes_gauge, -(int64_t)(t->charged - bytes));
    }
    t->charged = bytes;
    return true;
}

size_t sessions_open(sessions *s)
{
    return atomic_load(&s->open);
}

size_t sessions_charged(sessions *s)
{
    return atomic_load(&s->charged);
}

bool sessions_owner_alive(sessions *s, const void *owner, size_t len, uint64_t now_ms)
{
    (void)now_ms;
    char prefix[sizeof(s->run_id) + 1];
    uint64_t seq;
    size_t end;
    bool alive = false;

    snprintf(prefix, sizeof prefix, "%s-", s->run_id);
    if (!parse_seq(owner, len, prefix, &seq, &end) || end != len)
        return false; /* an earlier run's, or not ours: dead */
    bucket *b = bucket_of(s, seq);
    txn *t;
    pthread_mutex_lock(&b->mu);
    for (t = b->head; t != NULL && t->seq != seq; t = t->next)
        ;
    if (t != NULL)
        t->refs++;
    pthread_mutex_unlock(&b->mu);
    if (t != NULL) {
        int st = atomic_load(&t->state);
        alive = st == TXN_COMMITTING || (st == TXN_ACTIVE && sessions_now(s) <= lease_end(s, t));
        sessions_release(s, t);
    }
    return alive;
}

size_t sessions_reap(sessions *s, uint64_t now_ms)
{
    (void)now_ms;
    uint64_t now = sessions_now(s);
    size_t expired = 0;

    for (int i = 0; i < NBUCKETS; i++) {
        bucket *b = &s->b[i];
        pthread_mutex_lock(&b->mu);
        for (txn **pp = &b->head; *pp != NULL;) {
            txn *t = *pp;
            int st = atomic_load(&t->state);
            if (st == TXN_ACTIVE && now > lease_end(s, t) && pthread_mutex_trylock(&t->mu) == 0) {
                /* Re-check under the session's lock: a request may have renewed it. */
                if (atomic_load(&t->state) == TXN_ACTIVE && now > lease_end(s, t)) {
                    sessions_end(s, t, TXN_ABORTED, "expired");
                    expired++;
                }
                pthread_mutex_unlock(&t->mu);
            }
            st = atomic_load(&t->state);
            bool done = st == TXN_COMMITTED || st == TXN_ABORTED;
            /* ended_ms may be later than `now` (a session that ended in
             * this very pass): no unsigned wrap-around may reap it early. */
            if (done && t->refs == 0 && now >= t->ended_ms &&
                now - t->ended_ms > s->retention_ms) {
                *pp = t->next;
                txn_free(t);
                continue;
            }
            pp = &t->next;
        }
        pthread_mutex_unlock(&b->mu);
    }
    return expired;
}

uint64_t sessions_oldest_start(sessions *s)
{
    uint64_t oldest = UINT64_MAX;
    for (int i = 0; i < NBUCKETS; i++) {
        pthread_mutex_lock(&s->b[i].mu);
        for (txn *t = s->b[i].head; t != NULL; t = t->next) {
            int st = atomic_load(&t->state);
            if ((st == TXN_ACTIVE || st == TXN_COMMITTING) && t->start_ts < oldest)
                oldest = t->start_ts;
        }
        pthread_mutex_unlock(&s->b[i].mu);
    }
    return oldest;
}

size_t sessions_active(sessions *s)
{
    size_t n = 0;
    for (int i = 0; i < NBUCKETS; i++) {
        pthread_mutex_lock(&s->b[i].mu);
        for (txn *t = s->b[i].head; t != NULL; t = t->next)
            n += atomic_load(&t->state) == TXN_ACTIVE;
        pthread_mutex_unlock(&s->b[i].mu);
    }
    return n;
}

size_t txn_lower_bound(const txn *t, const void *key, size_t klen)
{
    size_t lo = 0, hi = t->nw;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pc_key_cmp(t->w[mid].key, t->w[mid].klen, key, klen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const txn_write *txn_find(const txn *t, const void *key, size_t klen)
{
    size_t i = txn_lower_bound(t, key, klen);
    if (i < t->nw && pc_key_cmp(t->w[i].key, t->w[i].klen, key, klen) == 0)
        return &t->w[i];
    return NULL;
}

size_t txn_bytes_after(const txn *t, const void *key, size_t klen, size_t vlen)
{
    const txn_write *w = txn_find(t, key, klen);
    return t->bytes - (w != NULL ? w->klen + w->vlen : 0) + klen + vlen;
}

txn_buffer_rc txn_buffer(txn *t, const void *key, size_t klen, bool deleted, const void *val,
               size_t vlen, size_t max_bytes)
{
    size_t i = txn_lower_bound(t, key, klen);
    bool exists = i < t->nw && pc_key_cmp(t->w[i].key, t->w[i].klen, key, klen) == 0;
    size_t old = exists ? t->w[i].klen + t->w[i].vlen : 0;

    if (t->bytes - old + klen + vlen > max_bytes)
        return TXN_TOO_BIG;
    char *v = malloc(vlen ? vlen : 1);
    if (v == NULL)
        return TXN_NOMEM;
    if (vlen)
        memcpy(v, val, vlen);
    if (exists) {
        free(t->w[i].val);
        t->w[i].val = v;
        t->w[i].vlen = vlen;
        t->w[i].deleted = deleted;
        t->bytes = t->bytes - old + klen + vlen;
        return TXN_BUFFERED;
    }
    char *k = malloc(klen);
    if (k == NULL) {
        free(v);
        return TXN_NOMEM;
    }
    memcpy(k, key, klen);
    if (t->nw == t->capw) {
        size_t cap = t->capw ? t->capw * 2 : 8;
        txn_write *w = realloc(t->w, cap * sizeof(*w));
        if (w == NULL) {
            free(k);
            free(v);
            return TXN_NOMEM;
        }
        t->w = w;
        t->capw = cap;
    }
    memmove(&t->w[i + 1], &t->w[i], (t->nw - i) * sizeof(*t->w));
    t->w[i] = (txn_write){k, klen, deleted, v, vlen};
    t->nw++;
    t->writes = t->nw;
    t->bytes += klen + vlen;
    return TXN_BUFFERED;
}
