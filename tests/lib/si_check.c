/*
 * si_check.c — see si_check.h.
 */
#include "si_check.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_OPS 8
#define STR 64
#define MAX_PRINTED 20

typedef struct {
    char key[STR], value[STR];
    bool found;
    uint64_t cts;
} si_op;

typedef struct {
    uint64_t start_ts, commit_ts;
    si_outcome outcome;
    bool inferred;  /* unknown outcome, but a read showed it committed */
    si_op reads[MAX_OPS], writes[MAX_OPS];
    unsigned nreads, nwrites;
} si_txn;

struct si_history {
    pthread_mutex_t mu;
    si_txn *t;
    size_t n, cap;
};

/* A committed version: a write of a committed (or inferred) transaction. */
typedef struct {
    const char *key, *value;
    uint64_t cts;
    size_t txn;
} version;

si_history *si_new(size_t max_txns)
{
    si_history *h = calloc(1, sizeof(*h));
    if (h == NULL || (h->t = calloc(max_txns, sizeof(*h->t))) == NULL) {
        free(h);
        return NULL;
    }
    h->cap = max_txns;
    pthread_mutex_init(&h->mu, NULL);
    return h;
}

void si_free(si_history *h)
{
    if (h == NULL)
        return;
    pthread_mutex_destroy(&h->mu);
    free(h->t);
    free(h);
}

long si_begin(si_history *h, uint64_t start_ts)
{
    pthread_mutex_lock(&h->mu);
    long t = h->n < h->cap ? (long)h->n++ : -1;
    pthread_mutex_unlock(&h->mu);
    if (t >= 0)
        h->t[t].start_ts = start_ts;
    return t;
}

static void set_op(si_op *o, const char *key, const char *value)
{
    snprintf(o->key, sizeof(o->key), "%s", key);
    snprintf(o->value, sizeof(o->value), "%s", value != NULL ? value : "");
}

void si_read(si_history *h, long t, const char *key, bool found, const char *value,
             uint64_t commit_ts)
{
    if (t < 0 || h->t[t].nreads == MAX_OPS)
        return;
    si_txn *x = &h->t[t];
    si_op *o = &x->reads[x->nreads++];
    set_op(o, key, found ? value : NULL);
    o->found = found;
    o->cts = found ? commit_ts : 0;
}

void si_write(si_history *h, long t, const char *key, const char *value)
{
    if (t < 0 || h->t[t].nwrites == MAX_OPS)
        return;
    si_txn *x = &h->t[t];
    set_op(&x->writes[x->nwrites++], key, value);
}

void si_end(si_history *h, long t, si_outcome outcome, uint64_t commit_ts)
{
    if (t < 0)
        return;
    h->t[t].outcome = outcome;
    h->t[t].commit_ts = outcome == SI_COMMITTED ? commit_ts : 0;
}

/* ---- checking ---- */

static void anomaly(si_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void anomaly(si_report *r, const char *fmt, ...)
{
    if (r->anomalies++ < MAX_PRINTED) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "SI ANOMALY: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
}

/* Every write, by value (values are unique to a writer and key). */
typedef struct {
    const char *value, *key;
    size_t txn;
} writer;

static int by_value(const void *a, const void *b)
{
    return strcmp(((const writer *)a)->value, ((const writer *)b)->value);
}

static int by_key_cts(const void *a, const void *b)
{
    const version *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c != 0 ? c : x->cts < y->cts ? -1 : x->cts > y->cts;
}

static bool committed(const si_txn *x)
{
    return x->outcome == SI_COMMITTED || x->inferred;
}

/* Rule 1, and the outcomes reads reveal. */
static void check_writers(si_history *h, writer *w, size_t nw, si_report *r)
{
    for (size_t i = 0; i < h->n; i++) {
        si_txn *x = &h->t[i];
        for (unsigned k = 0; k < x->nreads; k++) {
            si_op *o = &x->reads[k];
            if (!o->found)
                continue;
            r->reads++;
            writer key = {o->value, NULL, 0};
            writer *f = bsearch(&key, w, nw, sizeof(*w), by_value);
            if (f == NULL || strcmp(f->key, o->key) != 0) {
                anomaly(r, "txn %zu (start %llu) read %s=%s, which no transaction wrote there", i,
                        (unsigned long long)x->start_ts, o->key, o->value);
                continue;
            }
            si_txn *y = &h->t[f->txn];
            if (o->cts >= x->start_ts)
                anomaly(r, "txn %zu (start %llu) read %s=%s committed at %llu, not below its start",
                        i, (unsigned long long)x->start_ts, o->key, o->value,
                        (unsigned long long)o->cts);
            if (y->outcome == SI_ABORTED)
                anomaly(r, "txn %zu read %s=%s, written by txn %zu whose commit was refused", i,
                        o->key, o->value, f->txn);
            else if (y->outcome == SI_UNKNOWN && !y->inferred)
                y->inferred = true, y->commit_ts = o->cts;
            else if (y->commit_ts != o->cts)
                anomaly(r, "txn %zu read %s=%s at commit_ts %llu; its writer txn %zu committed at %llu",
                        i, o->key, o->value, (unsigned long long)o->cts, f->txn,
                        (unsigned long long)y->commit_ts);
        }
    }
}

/* The newest version of key below ts in v (sorted), NULL if none. */
static const version *newest_below(const version *v, size_t nv, const char *key, uint64_t ts)
{
    const version *best = NULL;
    size_t lo = 0, hi = nv;
    while (lo < hi) { /* first version of key */
        size_t mid = (lo + hi) / 2;
        if (strcmp(v[mid].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < nv && strcmp(v[i].key, key) == 0 && v[i].cts < ts; i++)
        best = &v[i];
    return best;
}

/* Rule 2. */
static void check_reads(si_history *h, const version *v, size_t nv, si_report *r)
{
    for (size_t i = 0; i < h->n; i++) {
        const si_txn *x = &h->t[i];
        for (unsigned k = 0; k < x->nreads; k++) {
            const si_op *o = &x->reads[k];
            const version *want = newest_below(v, nv, o->key, x->start_ts);
            r->reads += !o->found;
            if (want == NULL && o->found)
                anomaly(r, "txn %zu (start %llu) read %s=%s; no committed version is below its start",
                        i, (unsigned long long)x->start_ts, o->key, o->value);
            else if (want != NULL && !o->found)
                anomaly(r, "txn %zu (start %llu) found no %s; txn %zu committed %s=%s at %llu", i,
                        (unsigned long long)x->start_ts, o->key, want->txn, o->key, want->value,
                        (unsigned long long)want->cts);
            else if (want != NULL && strcmp(want->value, o->value) != 0)
                anomaly(r, "txn %zu (start %llu) read %s=%s (commit %llu); the newest below its "
                        "start is %s (txn %zu, commit %llu)",
                        i, (unsigned long long)x->start_ts, o->key, o->value,
                        (unsigned long long)o->cts, want->value, want->txn,
                        (unsigned long long)want->cts);
        }
    }
}

/* Rule 3: consecutive versions of a key come from transactions that do
 * not overlap (a later writer started after the earlier one committed). */
static void check_writes(si_history *h, const version *v, size_t nv, si_report *r)
{
    for (size_t i = 1; i < nv; i++) {
        if (strcmp(v[i - 1].key, v[i].key) != 0)
            continue;
        const si_txn *a = &h->t[v[i - 1].txn], *b = &h->t[v[i].txn];
        if (v[i - 1].cts == v[i].cts)
            anomaly(r, "txns %zu and %zu both committed %s at %llu", v[i - 1].txn, v[i].txn,
                    v[i].key, (unsigned long long)v[i].cts);
        else if (b->start_ts < a->commit_ts)
            anomaly(r, "lost update on %s: txn %zu (start %llu, commit %llu) and txn %zu (start "
                    "%llu, commit %llu) overlap",
                    v[i].key, v[i - 1].txn, (unsigned long long)a->start_ts,
                    (unsigned long long)a->commit_ts, v[i].txn, (unsigned long long)b->start_ts,
                    (unsigned long long)b->commit_ts);
    }
}

si_report si_check(si_history *h)
{
    si_report r = {0};
    size_t nw = 0, nv = 0;
    for (size_t i = 0; i < h->n; i++)
        nw += h->t[i].nwrites;
    writer *w = calloc(nw + 1, sizeof(*w));
    version *v = calloc(nw + 1, sizeof(*v));
    if (w == NULL || v == NULL) {
        anomaly(&r, "out of memory");
        goto out;
    }
    nw = 0;
    for (size_t i = 0; i < h->n; i++)
        for (unsigned k = 0; k < h->t[i].nwrites; k++)
            w[nw++] = (writer){h->t[i].writes[k].value, h->t[i].writes[k].key, i};
    qsort(w, nw, sizeof(*w), by_value);
    for (size_t i = 1; i < nw; i++)
        if (strcmp(w[i - 1].value, w[i].value) == 0)
            anomaly(&r, "value %s written twice (txns %zu, %zu): the workload must not", w[i].value,
                    w[i - 1].txn, w[i].txn);

    check_writers(h, w, nw, &r);
    for (size_t i = 0; i < h->n; i++) {
        const si_txn *x = &h->t[i];
        r.txns++;
        r.committed += x->outcome == SI_COMMITTED;
        r.aborted += x->outcome == SI_ABORTED;
        r.unknown += x->outcome == SI_UNKNOWN;
        r.inferred += x->inferred;
        for (unsigned k = 0; committed(x) && k < x->nwrites; k++)
            v[nv++] = (version){x->writes[k].key, x->writes[k].value, x->commit_ts, i};
    }
    qsort(v, nv, sizeof(*v), by_key_cts);
    check_reads(h, v, nv, &r);
    check_writes(h, v, nv, &r);
out:
    free(w);
    free(v);
    return r;
}

/* ---- the workload ---- */

static uint64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void pause_ms(unsigned ms)
{
    struct timespec t = {0, (long)ms * 1000000L};
    nanosleep(&t, NULL);
}

/* The outcome a commit's status means: 200 committed, a 4xx refused
 * (nothing of it committed), anything else unknown. */
static si_outcome outcome_of(long status)
{
    return status == 200 ? SI_COMMITTED : status >= 400 && status < 500 ? SI_ABORTED : SI_UNKNOWN;
}

/* One transaction; false when it could not begin. */
static bool one_txn(si_history *h, si_call_fn call, void *ctx, unsigned client, unsigned n,
                    unsigned nkeys, unsigned *seed, unsigned *committed_out)
{
    char path[160], body[512], id[96], k[2][16];
    json_t *j = NULL;
    long st = call(ctx, "POST", "/v1/txns", NULL, &j);
    json_t *jid = json_object_get(j, "id"), *jts = json_object_get(j, "start_ts");
    if (st != 201 || !json_is_string(jid) || !json_is_integer(jts)) {
        json_decref(j);
        return false;
    }
    snprintf(id, sizeof(id), "%s", json_string_value(jid));
    long t = si_begin(h, (uint64_t)json_integer_value(jts));
    json_decref(j);

    unsigned a = (unsigned)rand_r(seed) % nkeys, b = (a + 1 + (unsigned)rand_r(seed) % (nkeys - 1)) % nkeys;
    snprintf(k[0], sizeof(k[0]), "si%u", a);
    snprintf(k[1], sizeof(k[1]), "si%u", b);
    snprintf(path, sizeof(path), "/v1/txns/%s/batch", id);
    snprintf(body, sizeof(body), "{\"reads\":[\"%s\",\"%s\"]}", k[0], k[1]);
    if ((st = call(ctx, "POST", path, body, &j)) != 200)
        goto give_up;
    json_t *reads = json_object_get(j, "reads");
    for (size_t i = 0; i < 2; i++) {
        json_t *it = json_array_get(reads, i);
        si_read(h, t, k[i], json_is_true(json_object_get(it, "found")),
                json_string_value(json_object_get(it, "value")),
                (uint64_t)json_integer_value(json_object_get(it, "commit_ts")));
    }
    json_decref(j);
    j = NULL;

    /* Write the first key, and the second one time in two. */
    unsigned nw = 1 + (unsigned)rand_r(seed) % 2;
    char v[2][STR];
    for (unsigned i = 0; i < nw; i++) {
        snprintf(v[i], sizeof(v[i]), "c%u.t%u.%s", client, n, k[i]);
        si_write(h, t, k[i], v[i]);
    }
    if (nw == 1)
        snprintf(body, sizeof(body), "{\"writes\":[{\"key\":\"%s\",\"value\":\"%s\"}]}", k[0], v[0]);
    else
        snprintf(body, sizeof(body),
                 "{\"writes\":[{\"key\":\"%s\",\"value\":\"%s\"},{\"key\":\"%s\",\"value\":\"%s\"}]}",
                 k[0], v[0], k[1], v[1]);
    if ((st = call(ctx, "POST", path, body, NULL)) != 200)
        goto give_up;
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    st = call(ctx, "POST", path, NULL, &j);
    si_end(h, t, outcome_of(st), (uint64_t)json_integer_value(json_object_get(j, "commit_ts")));
    json_decref(j);
    *committed_out += st == 200;
    return true;
give_up:
    /* Never asked to commit: nothing of it can be committed. */
    json_decref(j);
    si_end(h, t, SI_ABORTED, 0);
    snprintf(path, sizeof(path), "/v1/txns/%s/rollback", id);
    call(ctx, "POST", path, NULL, NULL);
    return true;
}

unsigned si_run_client(si_history *h, si_call_fn call, void *ctx, unsigned client, unsigned n,
                       unsigned nkeys, unsigned seed, uint64_t deadline_ms)
{
    unsigned committed = 0;
    if (nkeys < 2)
        return 0;
    for (unsigned i = 0; i < n; i++) {
        if (deadline_ms != 0 && mono_ms() >= deadline_ms)
            break;
        if (!one_txn(h, call, ctx, client, i, nkeys, &seed, &committed))
            pause_ms(20); /* no session (failover, overload): try again shortly */
    }
    return committed;
}
