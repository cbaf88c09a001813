/*
 * test_metrics.c — common/metrics: the Prometheus text format, labels,
 * histograms, and lock-free updates from many threads.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"

static char *render(metrics_registry *r, buf *out)
{
    buf_reset(out);
    assert_int_equal(metrics_render(r, out), 0);
    return out->data;
}

static void test_counter_gauge_and_labels_render(void **state)
{
    (void)state;
    metrics_registry *r = metrics_registry_new();
    assert_non_null(r);
    metrics_series *c = metrics_counter1(r, "x_total", "things\nseen");
    metrics_inc(c, 3);
    metrics_series *g = metrics_gauge1(r, "x_level", "level");
    metrics_set(g, -7);
    metrics_family *f = metrics_counter(r, "req_total", "requests", "route", "status");
    metrics_inc(metrics_series_get(f, "GET /a", "200"), 2);
    metrics_inc(metrics_series_get(f, "GET /a", "200"), 1);
    metrics_inc(metrics_series_get(f, "we\"ird\\", "404"), 1);
    /* same name, same type: same family; other type: refused */
    assert_ptr_equal(metrics_counter(r, "req_total", "x", "route", "status"), f);
    assert_null(metrics_gauge(r, "req_total", "x", NULL, NULL));

    buf out = BUF_INIT;
    char *t = render(r, &out);
    assert_non_null(strstr(t, "# HELP x_total things\\nseen\n# TYPE x_total counter\nx_total 3\n"));
    assert_non_null(strstr(t, "# TYPE x_level gauge\nx_level -7\n"));
    assert_non_null(strstr(t, "req_total{route=\"GET /a\",status=\"200\"} 3\n"));
    assert_non_null(strstr(t, "req_total{route=\"we\\\"ird\\\\\",status=\"404\"} 1\n"));
    assert_int_equal(metrics_counter_value(c), 3);
    assert_int_equal(metrics_gauge_value(g), -7);
    buf_free(&out);
    metrics_registry_free(r);
}

static void test_histogram_buckets_are_cumulative(void **state)
{
    (void)state;
    metrics_registry *r = metrics_registry_new();
    const double b[] = {1, 5, 10};
    metrics_family *f = metrics_histogram(r, "lat_seconds", "latency", "route", NULL, b, 3);
    assert_non_null(f);
    metrics_series *s = metrics_series_get(f, "a", NULL);
    metrics_observe(s, 0.5);
    metrics_observe(s, 1);    /* le="1" is inclusive */
    metrics_observe(s, 7);
    metrics_observe(s, 100);
    buf out = BUF_INIT;
    char *t = render(r, &out);
    assert_non_null(strstr(t, "lat_seconds_bucket{route=\"a\",le=\"1\"} 2\n"));
    assert_non_null(strstr(t, "lat_seconds_bucket{route=\"a\",le=\"5\"} 2\n"));
    assert_non_null(strstr(t, "lat_seconds_bucket{route=\"a\",le=\"10\"} 3\n"));
    assert_non_null(strstr(t, "lat_seconds_bucket{route=\"a\",le=\"+Inf\"} 4\n"));
    assert_non_null(strstr(t, "lat_seconds_sum{route=\"a\"} 108.5\n"));
    assert_non_null(strstr(t, "lat_seconds_count{route=\"a\"} 4\n"));
    /* unordered bounds are refused */
    const double bad[] = {2, 1};
    assert_null(metrics_histogram(r, "bad", "", NULL, NULL, bad, 2));
    buf_free(&out);
    metrics_registry_free(r);
}

static void test_series_are_bounded(void **state)
{
    (void)state;
    metrics_registry *r = metrics_registry_new();
    metrics_family *f = metrics_counter(r, "many_total", "", "k", NULL);
    char v[32];
    for (int i = 0; i < METRICS_MAX_SERIES; i++) {
        snprintf(v, sizeof v, "%d", i);
        assert_non_null(metrics_series_get(f, v, NULL));
    }
    assert_null(metrics_series_get(f, "one-too-many", NULL));
    metrics_inc(NULL, 1); /* ignored */
    metrics_observe(NULL, 1);
    metrics_registry_free(r);
}

typedef struct ctx {
    metrics_family *f;
    metrics_series *h;
} ctx;

static void *hammer(void *arg)
{
    ctx *c = arg;
    for (int i = 0; i < 20000; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i % 10);
        metrics_inc(metrics_series_get(c->f, v, NULL), 1);
        metrics_observe(c->h, 0.25);
    }
    return NULL;
}

static void test_concurrent_updates_are_not_lost(void **state)
{
    (void)state;
    metrics_registry *r = metrics_registry_new();
    const double b[] = {0.1, 1};
    ctx c = {metrics_counter(r, "hits_total", "", "k", NULL),
             metrics_series_get(metrics_histogram(r, "h", "", NULL, NULL, b, 2), NULL, NULL)};
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer, &c), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    uint64_t total = 0;
    for (int i = 0; i < 10; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        total += metrics_counter_value(metrics_series_get(c.f, v, NULL));
    }
    assert_int_equal(total, 8 * 20000);
    assert_int_equal(metrics_histogram_count(c.h), 8 * 20000);
    assert_true(metrics_histogram_sum(c.h) == 8 * 20000 * 0.25);
    metrics_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_gauge_and_labels_render),
        cmocka_unit_test(test_histogram_buckets_are_cumulative),
        cmocka_unit_test(test_series_are_bounded),
        cmocka_unit_test(test_concurrent_updates_are_not_lost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
