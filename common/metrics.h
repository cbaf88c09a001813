/*
 * metrics.h — Prometheus metrics: counters, gauges, histograms.
 *
 * A registry holds metric families (one name, one help line, one type, zero
 * to two label names). A family holds series, one per tuple of label values,
 * created on first use. Hot paths look a series up once (or per request: the
 * lookup is a short lock-free scan) and then update it with C11 atomics, so
 * recording never takes a lock. Rendering produces the Prometheus text format
 * (version 0.0.4) into a growable buffer.
 *
 * Bounds: a family holds at most METRICS_MAX_SERIES series; past that,
 * metrics_series() returns NULL and updates through NULL are ignored, so a
 * label fed from user input cannot grow memory without bound.
 */
#ifndef PERCOLATOR_METRICS_H
#define PERCOLATOR_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define METRICS_MAX_SERIES 512
#define METRICS_MAX_BUCKETS 32

typedef struct metrics_registry metrics_registry;
typedef struct metrics_family metrics_family;
typedef struct metrics_series metrics_series;

typedef enum metrics_type { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM } metrics_type;

metrics_registry *metrics_registry_new(void);
void metrics_registry_free(metrics_registry *r);

/* Register a family. label1/label2 may be NULL (fewer labels). Registering
 * the same name again returns the existing family if the type matches, else
 * NULL. Returns NULL when out of memory. */
metrics_family *metrics_counter(metrics_registry *r, const char *name, const char *help,
                                const char *label1, const char *label2);
metrics_family *metrics_gauge(metrics_registry *r, const char *name, const char *help,
                              const char *label1, const char *label2);
/* bounds: strictly increasing upper bounds (the +Inf bucket is implied),
 * at most METRICS_MAX_BUCKETS. */
metrics_family *metrics_histogram(metrics_registry *r, const char *name, const char *help,
                                  const char *label1, const char *label2,
                                  const double *bounds, size_t nbounds);

/* Standard bucket sets. */
extern const double metrics_latency_buckets[];   /* seconds, 50µs .. 10s */
extern const size_t metrics_latency_nbuckets;

/* The series for these label values (as many as the family has labels;
 * extra ones are ignored). Created on first use. NULL if f is NULL, the
 * family is full or memory is short. */
metrics_series *metrics_series_get(metrics_family *f, const char *v1, const char *v2);

/* Updates; each ignores a NULL series. */
void metrics_inc(metrics_series *s, uint64_t n);     /* counter (or gauge += n) */
void metrics_set(metrics_series *s, int64_t v);      /* gauge */
void metrics_add(metrics_series *s, int64_t delta);  /* gauge */
void metrics_observe(metrics_series *s, double v);   /* histogram */

/* Reading back (tests, and programs that report their own numbers). */
uint64_t metrics_counter_value(const metrics_series *s);
int64_t metrics_gauge_value(const metrics_series *s);
uint64_t metrics_histogram_count(const metrics_series *s);
double metrics_histogram_sum(const metrics_series *s);

/* Shorthands for families without labels: the single series. */
metrics_series *metrics_counter1(metrics_registry *r, const char *name, const char *help);
metrics_series *metrics_gauge1(metrics_registry *r, const char *name, const char *help);

/* Append the whole registry in Prometheus text format. 0 or -1 (memory). */
int metrics_render(metrics_registry *r, buf *out);

#endif
