/*
 * test_oracle_client.c — the service's coalescing oracle client
 * (service/oracle_client.h) against a real oracle: batching, keep-alive,
 * the distinct "unavailable" error, timeouts and recovery.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "oracle_client.h"
#include "testlib.h"
#include "timeutil.h"

typedef tl_oracle_env fixture;

static int setup(void **state)
{
    *state = tl_oracle_env_new("oracle-client");
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    tl_oracle_env_free(*state);
    return 0;
}

/* A value from the oracle's /metrics. */
static double oracle_metric(const tl_oracle *o, const char *name)
{
    return tl_metric_at(o->url, name);
}

typedef struct caller {
    oc_client *c;
    pthread_barrier_t *start;
    int calls;
    uint64_t *got;       /* calls entries */
    int failures;
    pthread_t thread;
} caller;

static void *call_loop(void *arg)
{
    caller *k = arg;
    pthread_barrier_wait(k->start);
    for (int i = 0; i < k->calls; i++)
        if (oc_timestamp(k->c, &k->got[i]) != OC_OK)
            k->failures++;
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Run n threads x calls timestamps through one client; return the number of
 * oracle requests it took (read from the oracle's own /metrics) and check
 * every timestamp is unique and each thread's sequence increases. */
static double run_callers(fixture *f, oc_client *c, int n, int calls)
{
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, (unsigned)n), 0);
    caller *k = calloc((size_t)n, sizeof *k);
    uint64_t *all = calloc((size_t)n * (size_t)calls, sizeof *all);
    assert_non_null(k);
    assert_non_null(all);
    double before = oracle_metric(&f->o, "percolator_oracle_requests_total");
    assert_true(before >= 0);
    for (int i = 0; i < n; i++) {
        k[i] = (caller){c, &start, calls, all + (size_t)i * (size_t)calls, 0, 0};
        assert_int_equal(tl_thread_start(&k[i].thread, call_loop, &k[i]), 0);
    }
    for (int i = 0; i < n; i++)
        tl_thread_join(k[i].thread, NULL);
    double after = oracle_metric(&f->o, "percolator_oracle_requests_total");
    for (int i = 0; i < n; i++) {
        assert_int_equal(k[i].failures, 0);
        for (int j = 1; j < calls; j++)
            assert_true(k[i].got[j] > k[i].got[j - 1]);
    }
    size_t total = (size_t)n * (size_t)calls;
    qsort(all, total, sizeof *all, cmp_u64);
    for (size_t j = 1; j < total; j++)
        if (all[j] == all[j - 1])
            fail_msg("timestamp %llu given to two callers", (unsigned long long)all[j]);
    pthread_barrier_destroy(&start);
    free(all);
    free(k);
    return after - before;
}

static void test_concurrent_callers_are_coalesced(void **state)
{
    fixture *f = *state;
    assert_int_equal(tl_oracle_start(&f->o, f->data, 0), 0);
    metrics_registry *m = metrics_registry_new();
    oc_client *c = oc_open(f->o.url, 20000, m); /* far past a loaded machine's slowest answer */
    assert_non_null(c);

    /* 64 callers, each asking once, all at the same moment. */
    double requests = run_callers(f, c, 64, 1);
    print_message("64 simultaneous callers: %.0f oracle requests\n", requests);
    assert_true(requests >= 1);
    assert_true(requests <= 32);

    /* 64 callers asking continuously: 64 x 50 = 3200 timestamps. */
    double conns = oracle_metric(&f->o, "percolator_http_connections_total");
    requests = run_callers(f, c, 64, 50);
    /* Three new connections are the metric scrapes (one each); the client's
     * own connection is kept alive across all its requests. */
    conns = oracle_metric(&f->o, "percolator_http_connections_total") - conns;
    assert_true(conns <= 4);
    print_message("64 callers x 50 timestamps: %.0f oracle requests\n", requests);
    assert_true(requests >= 1);
    assert_true(requests * 4 <= 3200);
    /* The client counts the same requests. */
    assert_true(oc_requests(c) >= (uint64_t)requests);

    buf out = BUF_INIT;
    assert_int_equal(metrics_render(m, &out), 0);
    assert_non_null(strstr(out.data, "percolator_oracle_client_batch_size_bucket"));
    assert_true(tl_metric(out.data, "percolator_oracle_client_requests_total{result=\"ok\"}") ==
                (double)oc_requests(c));
    buf_free(&out);
    oc_close(c);
    metrics_registry_free(m);
}

static void test_unreachable_oracle_is_a_distinct_error_and_recovers(void **state)
{
    fixture *f = *state;
    int port = tl_free_port();
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    /* A client timeout a loaded machine cannot reach when the oracle is
     * up; a refused connection is reported at once, far within it. */
    oc_client *c = oc_open(url, 20000, NULL);
    assert_non_null(c);

    uint64_t ts = 0;
    uint64_t t0 = time_mono_ms();
    assert_int_equal(oc_timestamp(c, &ts), OC_UNAVAILABLE);
    assert_true(time_mono_ms() - t0 < 10000);
    assert_false(oc_available(c));
    assert_string_equal(oc_strerror(OC_UNAVAILABLE), "timestamp oracle unavailable");

    /* The oracle comes up on that port: the same client recovers by itself. */
    assert_int_equal(tl_oracle_start(&f->o, f->data, port), 0);
    assert_int_equal(oc_timestamp(c, &ts), OC_OK);
    assert_true(oc_available(c));
    uint64_t first = ts;

    /* Down again (kill -9), then back: errors while down, fine after. */
    assert_int_equal(tl_kill9(f->o.pid), 0);
    f->o.pid = 0;
    assert_int_equal(oc_timestamp(c, &ts), OC_UNAVAILABLE);
    assert_int_equal(tl_oracle_start(&f->o, f->data, port), 0);
    assert_int_equal(oc_timestamp(c, &ts), OC_OK);
    assert_true(ts > first);
    oc_close(c);
}

/* A server that accepts TCP connections but never answers. */
static void test_a_silent_oracle_times_out(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));

    oc_client *c = oc_open(url, 300, NULL);
    assert_non_null(c);
    uint64_t ts, t0 = time_mono_ms();
    assert_int_equal(oc_timestamp(c, &ts), OC_UNAVAILABLE);
    uint64_t took = time_mono_ms() - t0;
    assert_true(took >= 250);
    assert_true(took < 3000);
    oc_close(c);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_concurrent_callers_are_coalesced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreachable_oracle_is_a_distinct_error_and_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_silent_oracle_times_out, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
