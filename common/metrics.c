/*
 * metrics.c — Prometheus counters, gauges and histograms (see metrics.h).
 *
 * Concurrency design: a family's series live in a fixed array of pointers
 * that only grows. Readers load the published count with acquire order and
 * scan; a writer that must add a series takes the family mutex, re-scans
 * (another thread may have added it meanwhile), fills the slot and publishes
 * the new count with release order. Series are never removed before the
 * registry is freed, so a pointer handed out stays valid.
 *
 * Values are atomics. A histogram sum is a double kept as its bit pattern in
 * a 64-bit atomic and updated with compare-and-swap. The rendered _count is
 * the sum of the buckets read at render time, so a scrape is always
 * self-consistent (+Inf bucket == _count) even while observations race it.
 */
#include "metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct metrics_series {
    const metrics_family *fam;     /* owner: a histogram needs its bounds */
    char *v1, *v2;                 /* label values (NULL when unused) */
    _Atomic uint64_t count;        /* counter value */
    _Atomic int64_t gauge;         /* gauge value */
    _Atomic uint64_t sum_bits;     /* histogram: sum of observations (double bits) */
    _Atomic uint64_t buckets[METRICS_MAX_BUCKETS + 1]; /* histogram, non-cumulative */
};

struct metrics_family {
    char *name, *help;
    metrics_type type;
    char *label1, *label2;
    double bounds[METRICS_MAX_BUCKETS];
    size_t nbounds;
    pthread_mutex_t mu;            /* serialises series creation */
    _Atomic size_t nseries;        /* published slots of series[] */
    metrics_series *series[METRICS_MAX_SERIES];
    metrics_family *next;
};

struct metrics_registry {
    pthread_mutex_t mu;            /* guards the family list */
    metrics_family *head, *tail;
};

const double metrics_latency_buckets[] = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
const size_t metrics_latency_nbuckets =
    sizeof metrics_latency_buckets / sizeof metrics_latency_buckets[0];

metrics_registry *metrics_registry_new(void)
{
    metrics_registry *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        return NULL;
    }
    return r;
}

static void series_free(metrics_series *s)
{
    if (!s)
        return;
    free(s->v1);
    free(s->v2);
    free(s);
}

static void family_free(metrics_family *f)
{
    if (!f)
        return;
    size_t n = atomic_load(&f->nseries);
    for (size_t i = 0; i < n; i++)
        series_free(f->series[i]);
    pthread_mutex_destroy(&f->mu);
    free(f->name);
    free(f->help);
    free(f->label1);
    free(f->label2);
    free(f);
}

void metrics_registry_free(metrics_registry *r)
{
    if (!r)
        return;
    metrics_family *f = r->head;
    while (f) {
        metrics_family *next = f->next;
        family_free(f);
        f = next;
    }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static char *dup_or_null(const char *s, bool *failed)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *failed = true;
    return d;
}

static metrics_family *family_register(metrics_registry *r, metrics_type type,
                                       const char *name, const char *help,
                                       const char *label1, const char *label2,
                                       const double *bounds, size_t nbounds)
{
    if (!r || !name || nbounds > METRICS_MAX_BUCKETS)
        return NULL;
    metrics_family *f = NULL;
    pthread_mutex_lock(&r->mu);
    for (metrics_family *it = r->head; it; it = it->next) {
        if (strcmp(it->name, name) == 0) {
            f = it->type == type ? it : NULL;
            goto done;
        }
    }
    f = calloc(1, sizeof *f);
    if (!f)
        goto done;
    bool failed = false;
    f->name = dup_or_null(name, &failed);
    f->help = dup_or_null(help ? help : "", &failed);
    /* label2 without label1 is treated as label1 */
    f->label1 = dup_or_null(label1 ? label1 : label2, &failed);
    f->label2 = dup_or_null(label1 ? label2 : NULL, &failed);
    f->type = type;
    for (size_t i = 0; i < nbounds; i++)
        f->bounds[i] = bounds[i];
    f->nbounds = nbounds;
    if (failed || pthread_mutex_init(&f->mu, NULL) != 0) {
        free(f->name);
        free(f->help);
        free(f->label1);
        free(f->label2);
        free(f);
        f = NULL;
        goto done;
    }
    if (r->tail)
        r->tail->next = f;
    else
        r->head = f;
    r->tail = f;
done:
    pthread_mutex_unlock(&r->mu);
    return f;
}

metrics_family *metrics_counter(metrics_registry *r, const char *name, const char *help,
                                const char *label1, const char *label2)
{
    return family_register(r, METRICS_COUNTER, name, help, label1, label2, NULL, 0);
}

metrics_family *metrics_gauge(metrics_registry *r, const char *name, const char *help,
                              const char *label1, const char *label2)
{
    return family_register(r, METRICS_GAUGE, name, help, label1, label2, NULL, 0);
}

metrics_family *metrics_histogram(metrics_registry *r, const char *name, const char *help,
                                  const char *label1, const char *label2,
                                  const double *bounds, size_t nbounds)
{
    for (size_t i = 1; i < nbounds; i++)
        if (!(bounds[i] > bounds[i - 1]))
            return NULL;
    return family_register(r, METRICS_HISTOGRAM, name, help, label1, label2, bounds, nbounds);
}

static bool str_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

static metrics_series *scan(metrics_family *f, size_t n, const char *v1, const char *v2)
{
    for (size_t i = 0; i < n; i++)
        if (str_eq(f->series[i]->v1, v1) && str_eq(f->series[i]->v2, v2))
            return f->series[i];
    return NULL;
}

metrics_series *metrics_series_get(metrics_family *f, const char *v1, const char *v2)
{
    if (!f)
        return NULL;
    /* Keep only as many values as the family has labels; a missing one is "". */
    v1 = f->label1 ? (v1 ? v1 : "") : NULL;
    v2 = f->label2 ? (v2 ? v2 : "") : NULL;

    size_t n = atomic_load_explicit(&f->nseries, memory_order_acquire);
    metrics_series *s = scan(f, n, v1, v2);
    if (s)
        return s;

    pthread_mutex_lock(&f->mu);
    n = atomic_load_explicit(&f->nseries, memory_order_relaxed);
    s = scan(f, n, v1, v2);
    if (s || n >= METRICS_MAX_SERIES)
        goto done;
    s = calloc(1, sizeof *s);
    if (!s)
        goto done;
    bool failed = false;
    s->fam = f;
    s->v1 = dup_or_null(v1, &failed);
    s->v2 = dup_or_null(v2, &failed);
    if (failed) {
        series_free(s);
        s = NULL;
        goto done;
    }
    f->series[n] = s;
    atomic_store_explicit(&f->nseries, n + 1, memory_order_release);
done:
    pthread_mutex_unlock(&f->mu);
    return s;
}

void metrics_inc(metrics_series *s, uint64_t n)
{
    if (s) {
        atomic_fetch_add_explicit(&s->count, n, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->gauge, (int64_t)n, memory_order_relaxed);
    }
}

void metrics_set(metrics_series *s, int64_t v)
{
    if (s)
        atomic_store_explicit(&s->gauge, v, memory_order_relaxed);
}

void metrics_add(metrics_series *s, int64_t delta)
{
    if (s)
        atomic_fetch_add_explicit(&s->gauge, delta, memory_order_relaxed);
}

static double bits_to_double(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static uint64_t double_to_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

void metrics_observe(metrics_series *s, double v)
{
    if (!s)
        return;
    const metrics_family *f = s->fam;
    size_t i = 0;
    while (i < f->nbounds && v > f->bounds[i])
        i++;
    atomic_fetch_add_explicit(&s->buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
    uint64_t old = atomic_load_explicit(&s->sum_bits, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&s->sum_bits, &old,
                                                  double_to_bits(bits_to_double(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

uint64_t metrics_counter_value(const metrics_series *s)
{
    return s ? atomic_load_explicit(&s->count, memory_order_relaxed) : 0;
}

int64_t metrics_gauge_value(const metrics_series *s)
{
    return s ? atomic_load_explicit(&s->gauge, memory_order_relaxed) : 0;
}

uint64_t metrics_histogram_count(const metrics_series *s)
{
    return metrics_counter_value(s);
}

double metrics_histogram_sum(const metrics_series *s)
{
    return s ? bits_to_double(atomic_load_explicit(&s->sum_bits, memory_order_relaxed)) : 0.0;
}

metrics_series *metrics_counter1(metrics_registry *r, const char *name, const char *help)
{
    return metrics_series_get(metrics_counter(r, name, help, NULL, NULL), NULL, NULL);
}

metrics_series *metrics_gauge1(metrics_registry *r, const char *name, const char *help)
{
    return metrics_series_get(metrics_gauge(r, name, help, NULL, NULL), NULL, NULL);
}

/* Help text escapes backslash and newline; label values also escape '"'. */
static int put_escaped(buf *out, const char *s, bool quote)
{
    for (const char *p = s; *p; p++) {
        int rc;
        if (*p == '\\')
            rc = buf_puts(out, "\\\\");
        else if (*p == '\n')
            rc = buf_puts(out, "\\n");
        else if (quote && *p == '"')
            rc = buf_puts(out, "\\\"");
        else
            rc = buf_append(out, p, 1);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* {l1="v1",l2="v2"[,le="x"]} — or nothing at all when there are no labels. */
static int put_labels(buf *out, const metrics_family *f, const metrics_series *s,
                      const char *le)
{
    if (!f->label1 && !le)
        return 0;
    int rc = buf_puts(out, "{");
    const char *sep = "";
    if (f->label1) {
        rc |= buf_printf(out, "%s=\"", f->label1);
        rc |= put_escaped(out, s->v1, true);
        rc |= buf_puts(out, "\"");
        sep = ",";
    }
    if (f->label2) {
        rc |= buf_printf(out, ",%s=\"", f->label2);
        rc |= put_escaped(out, s->v2, true);
        rc |= buf_puts(out, "\"");
    }
    if (le)
        rc |= buf_printf(out, "%sle=\"%s\"", sep, le);
    rc |= buf_puts(out, "}");
    return rc ? -1 : 0;
}

static int render_histogram(buf *out, const metrics_family *f, const metrics_series *s)
{
    int rc = 0;
    uint64_t cum = 0;
    char le[64];
    for (size_t i = 0; i <= f->nbounds; i++) {
        cum += atomic_load_explicit(&s->buckets[i], memory_order_relaxed);
        if (i < f->nbounds)
            snprintf(le, sizeof le, "%.9g", f->bounds[i]);
        else
            snprintf(le, sizeof le, "+Inf");
        rc |= buf_printf(out, "%s_bucket", f->name);
        rc |= put_labels(out, f, s, le);
        rc |= buf_printf(out, " %llu\n", (unsigned long long)cum);
    }
    rc |= buf_printf(out, "%s_sum", f->name);
    rc |= put_labels(out, f, s, NULL);
    rc |= buf_printf(out, " %.9g\n", metrics_histogram_sum(s));
    rc |= buf_printf(out, "%s_count", f->name);
    rc |= put_labels(out, f, s, NULL);
    rc |= buf_printf(out, " %llu\n", (unsigned long long)cum);
    return rc ? -1 : 0;
}

int metrics_render(metrics_registry *r, buf *out)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    for (metrics_family *f = r->head; f && rc == 0; f = f->next) {
        rc |= buf_printf(out, "# HELP %s ", f->name);
        rc |= put_escaped(out, f->help, false);
        rc |= buf_printf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
        size_t n = atomic_load_explicit(&f->nseries, memory_order_acquire);
        for (size_t i = 0; i < n && rc == 0; i++) {
            const metrics_series *s = f->series[i];
            if (f->type == METRICS_HISTOGRAM) {
                rc |= render_histogram(out, f, s);
                continue;
            }
            rc |= buf_puts(out, f->name);
            rc |= put_labels(out, f, s, NULL);
            if (f->type == METRICS_COUNTER)
                rc |= buf_printf(out, " %llu\n", (unsigned long long)metrics_counter_value(s));
            else
                rc |= buf_printf(out, " %lld\n", (long long)metrics_gauge_value(s));
        }
    }
    pthread_mutex_unlock(&r->mu);
    return rc ? -1 : 0;
}
