/*
 * test_service_writes.c — autocommit writes through the committer
 * (service/write_batch.c), with the real programs:
 *
 *  - many clients writing distinct and shared keys at once: every write is
 *    answered, timestamps are unique, every key reads back as the write
 *    with the highest commit_ts left it;
 *  - writes that arrive together are committed in one round (one oracle
 *    request, one log flush), seen in /metrics with the committer held
 *    back by a failpoint;
 *  - SIGTERM while writes wait in the committer: they are answered, the
 *    service stops cleanly, and they are there after a restart;
 *  - kill -9 under write load, again and again: every acknowledged write
 *    is there after the restarts, with its commit_ts;
 *  - what the committer does not take (conditions, big bodies, one-phase
 *    commit off) still works, on the handler workers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svc_fixture.h"
#include "timeutil.h"

static uint64_t commit_ts_of(json_t *j)
{
    return (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
}

/* ---- many writers, distinct and shared keys ---- */

#define WRITERS 16
#define PER_WRITER 60
#define HOT 3

typedef struct {
    tl_stack *st;
    int id;
    uint64_t ts[PER_WRITER];      /* commit_ts of each write (0: not answered 200) */
    bool deleted[PER_WRITER];     /* a hot-key write that was a delete */
} writer;

static const char *hot_key(int seq) { return seq % 3 == 0 ? "hot0" : seq % 3 == 1 ? "hot1" : "hot2"; }

static void *write_loop(void *arg)
{
    writer *w = arg;
    char path[128], body[128];
    for (int seq = 0; seq < PER_WRITER; seq++) {
        json_t *j;
        long st;
        /* Every other write goes to a shared key, some of them deletes. */
        if (seq % 2 == 1) {
            snprintf(path, sizeof(path), "/v1/kv/%s", hot_key(seq / 2));
            w->deleted[seq] = (w->id + seq) % 7 == 0;
            snprintf(body, sizeof(body), "{\"value\":\"w%d-%d\"}", w->id, seq);
            st = tl_try_call(w->st, w->deleted[seq] ? "DELETE" : "PUT", path,
                          w->deleted[seq] ? NULL : body, &j);
        } else {
            snprintf(path, sizeof(path), "/v1/kv/d%02d-%03d", w->id, seq);
            snprintf(body, sizeof(body), "{\"value\":\"w%d-%d\"}", w->id, seq);
            st = tl_try_call(w->st, "PUT", path, body, &j);
        }
        w->ts[seq] = st == 200 ? commit_ts_of(j) : 0;
        json_decref(j);
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void concurrent_writes_are_each_committed_once(void **state)
{
    (void)state;
    tl_stack st;
    static writer w[WRITERS];
    pthread_t th[WRITERS];
    static uint64_t all[WRITERS * PER_WRITER];
    size_t n = 0;
    char path[128], want[64];

    assert_int_equal(tl_stack_start(&st, NULL), 0);
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){.st = &st, .id = i};
        assert_int_equal(tl_thread_start(&th[i], write_loop, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++)
        assert_int_equal(tl_thread_join(th[i], NULL), 0);

    /* Every write answered 200 with a timestamp of its own. */
    for (int i = 0; i < WRITERS; i++)
        for (int seq = 0; seq < PER_WRITER; seq++) {
            assert_true(w[i].ts[seq] > 0);
            all[n++] = w[i].ts[seq];
        }
    qsort(all, n, sizeof(all[0]), cmp_u64);
    for (size_t i = 1; i < n; i++)
        assert_true(all[i] > all[i - 1]);

    /* Distinct keys read back exactly. */
    for (int i = 0; i < WRITERS; i++)
        for (int seq = 0; seq < PER_WRITER; seq += 2) {
            snprintf(path, sizeof(path), "/v1/kv/d%02d-%03d", i, seq);
            json_t *j = tl_expect(&st, "GET", path, NULL, 200);
            snprintf(want, sizeof(want), "w%d-%d", i, seq);
            assert_string_equal(json_string_value(json_object_get(j, "value")), want);
            assert_int_equal(commit_ts_of(j), w[i].ts[seq]);
            json_decref(j);
        }
    /* A shared key holds the write with the highest commit_ts. */
    for (int h = 0; h < HOT; h++) {
        int bw = -1, bs = -1;
        for (int i = 0; i < WRITERS; i++)
            for (int seq = 1; seq < PER_WRITER; seq += 2)
                if ((seq / 2) % 3 == h && (bw < 0 || w[i].ts[seq] > w[bw].ts[bs]))
                    bw = i, bs = seq;
        snprintf(path, sizeof(path), "/v1/kv/%s", hot_key(h));
        long status;
        json_t *j = tl_call(&st, "GET", path, NULL, &status);
        if (w[bw].deleted[bs]) {
            assert_int_equal(status, 404);
        } else {
            assert_int_equal(status, 200);
            snprintf(want, sizeof(want), "w%d-%d", bw, bs);
            assert_string_equal(json_string_value(json_object_get(j, "value")), want);
            assert_int_equal(commit_ts_of(j), w[bw].ts[bs]);
        }
        json_decref(j);
    }
    double rounds = tl_service_metric(&st, "percolator_write_batch_size_count");
    double writes = tl_service_metric(&st, "percolator_write_batch_size_sum");
    print_message("%zu writes from %d clients: %.0f committer rounds (%.0f writes taken, "
                  "shared-key writes put off included)\n",
                  n, WRITERS, rounds, writes);
    assert_true(writes >= (double)n);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- writes that arrive together share a round ---- */

static void restart_with_failpoint(tl_stack *st, const char *point)
{
    assert_int_equal(tl_service_stop(st), 0);
    snprintf(st->svc.env[0], sizeof(st->svc.env[0]), "PERCOLATOR_FAILPOINT=%s", point);
    st->svc.nenv = 1;
    assert_int_equal(tl_service_start(st), 0);
}

#define TOGETHER 16

typedef struct {
    tl_stack *st;
    int i;
    long status;
    uint64_t ts;
} one_put;

static void *put_one(void *arg)
{
    one_put *p = arg;
    char path[64], body[64];
    json_t *j;
    snprintf(path, sizeof(path), "/v1/kv/t%02d", p->i);
    snprintf(body, sizeof(body), "{\"value\":\"v%d\"}", p->i);
    p->status = tl_try_call(p->st, "PUT", path, body, &j);
    p->ts = p->status == 200 ? commit_ts_of(j) : 0;
    json_decref(j);
    return NULL;
}

static void put_together(tl_stack *st, one_put *p, int n)
{
    pthread_t th[TOGETHER];
    for (int i = 0; i < n; i++) {
        p[i] = (one_put){.st = st, .i = i};
        assert_int_equal(tl_thread_start(&th[i], put_one, &p[i]), 0);
    }
    for (int i = 0; i < n; i++)
        assert_int_equal(tl_thread_join(th[i], NULL), 0);
}

static void writes_arriving_together_share_one_round(void **state)
{
    (void)state;
    tl_stack st;
    one_put p[TOGETHER];
    const char *no_gc[] = {"--gc-retention-ms", "0", NULL}; /* GC asks the oracle too */

    assert_int_equal(tl_stack_start(&st, no_gc), 0);
    /* The committer waits 2 s before it takes a round: the writes sent
     * meanwhile pile up and go together (2 s: sixteen clients started at
     * once may take a while to send on a loaded machine). */
    restart_with_failpoint(&st, "write_batch_round=sleep:2000");
    double oracle0 = tl_service_metric(&st, "percolator_oracle_client_requests_total{result=\"ok\"}");
    put_together(&st, p, TOGETHER);
    for (int i = 0; i < TOGETHER; i++)
        assert_int_equal(p[i].status, 200);
    double rounds = tl_service_metric(&st, "percolator_write_batch_size_count");
    double taken = tl_service_metric(&st, "percolator_write_batch_size_sum");
    double oracle = tl_service_metric(&st, "percolator_oracle_client_requests_total{result=\"ok\"}") - oracle0;
    print_message("%d writes sent at once: %.0f rounds, %.0f oracle requests\n", TOGETHER, rounds,
                  oracle);
    assert_int_equal((int)taken, TOGETHER);
    /* The first write may start a round alone before the others arrive;
     * the rest wait the 2 s and go together. */
    assert_true(rounds >= 1 && rounds <= 3);
    assert_true(oracle <= rounds);
    /* Consecutive timestamps within a round: one oracle range each. */
    uint64_t ts[TOGETHER];
    for (int i = 0; i < TOGETHER; i++)
        ts[i] = p[i].ts;
    qsort(ts, TOGETHER, sizeof(ts[0]), cmp_u64);
    int gaps = 0;
    for (int i = 1; i < TOGETHER; i++)
        gaps += ts[i] != ts[i - 1] + 1;
    assert_true(gaps <= (int)rounds - 1);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- SIGTERM while writes wait in the committer ---- */

/* SIGTERM once the committer sleeps with the eight writes in (the
 * failpoint's log line, and their eight connections open besides the
 * metrics request), however long a loaded machine takes to get there. */
static void *stop_soon(void *arg)
{
    tl_stack *st = arg;
    bool asleep = false;
    double open = 0;
    for (uint64_t t0 = time_mono_ms(); time_mono_ms() - t0 < 60000; time_sleep_ms(10)) {
        if (!asleep) {
            char *log = tl_read_file(st->svc.log, NULL);
            asleep = log != NULL && strstr(log, "failpoint write_batch_round: sleeping") != NULL;
            free(log);
        }
        if (asleep) { /* no cmocka assertion on this thread */
            char url[128];
            tl_resp r;
            snprintf(url, sizeof url, "%s/metrics", st->svc.url);
            if (tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r) == 0 && r.status == 200)
                open = tl_metric(r.body, "percolator_http_connections_open");
            tl_resp_free(&r);
            if (open >= 9)
                break;
        }
    }
    if (!asleep || open < 9)
        return (void *)(intptr_t)-2;
    return (void *)(intptr_t)tl_service_stop(st);
}

static void stop_answers_the_writes_it_holds(void **state)
{
    (void)state;
    tl_stack st;
    one_put p[8];
    pthread_t stopper;
    void *rc;

    assert_int_equal(tl_stack_start(&st, NULL), 0);
    restart_with_failpoint(&st, "write_batch_round=sleep:3000");
    /* The writes reach the committer, which sleeps 3 s before it takes
     * them (two such rounds stay within the service's 10 s of grace);
     * the stop begins meanwhile (stop_soon). */
    assert_int_equal(tl_thread_start(&stopper, stop_soon, &st), 0);
    put_together(&st, p, 8);
    assert_int_equal(tl_thread_join(stopper, &rc), 0);
    assert_int_equal((intptr_t)rc, 0); /* exit 0: stopped cleanly */
    for (int i = 0; i < 8; i++)
        assert_int_equal(p[i].status, 200);
    st.svc.nenv = 0;
    assert_int_equal(tl_service_start(&st), 0);
    for (int i = 0; i < 8; i++) {
        char path[64], want[16];
        snprintf(path, sizeof(path), "/v1/kv/t%02d", i);
        snprintf(want, sizeof(want), "v%d", i);
        json_t *j = tl_expect(&st, "GET", path, NULL, 200);
        assert_string_equal(json_string_value(json_object_get(j, "value")), want);
        assert_int_equal(commit_ts_of(j), p[i].ts);
        json_decref(j);
    }
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- kill -9 under write load ---- */

#define K_CLIENTS 8
#define K_PER_CLIENT 3000
#define K_KILLS 6

static tl_stack KS;
static atomic_int k_stop;
static uint64_t k_acked[K_CLIENTS][K_PER_CLIENT]; /* commit_ts of an acknowledged write */

static void *kill_writer(void *arg)
{
    int c = (int)(intptr_t)arg;
    char path[64], body[64];
    for (int seq = 0; seq < K_PER_CLIENT && !atomic_load(&k_stop); seq++) {
        json_t *j;
        snprintf(path, sizeof(path), "/v1/kv/c%d-%05d", c, seq);
        snprintf(body, sizeof(body), "{\"value\":\"%d.%d\"}", c, seq);
        if (tl_try_call(&KS, "PUT", path, body, &j) == 200)
            k_acked[c][seq] = commit_ts_of(j);
        else
            time_sleep_ms(5); /* down or restarting */
        json_decref(j);
    }
    return NULL;
}

static void acknowledged_writes_survive_kill9(void **state)
{
    (void)state;
    pthread_t th[K_CLIENTS];
    unsigned seed = 17;
    int acked = 0;

    assert_int_equal(tl_stack_start(&KS, NULL), 0);
    for (intptr_t i = 0; i < K_CLIENTS; i++)
        assert_int_equal(tl_thread_start(&th[i], kill_writer, (void *)i), 0);
    for (int k = 0; k < K_KILLS; k++) {
        time_sleep_ms(300 + (unsigned)(rand_r(&seed) % 400));
        assert_int_equal(tl_kill9(KS.svc.pid), 0);
        KS.svc.pid = 0;
        assert_int_equal(tl_service_start(&KS), 0);
    }
    time_sleep_ms(300);
    atomic_store(&k_stop, 1);
    for (int i = 0; i < K_CLIENTS; i++)
        assert_int_equal(tl_thread_join(th[i], NULL), 0);

    for (int c = 0; c < K_CLIENTS; c++)
        for (int seq = 0; seq < K_PER_CLIENT; seq++) {
            if (k_acked[c][seq] == 0)
                continue;
            char path[64], want[32];
            snprintf(path, sizeof(path), "/v1/kv/c%d-%05d", c, seq);
            snprintf(want, sizeof(want), "%d.%d", c, seq);
            json_t *j = tl_expect(&KS, "GET", path, NULL, 200);
            assert_string_equal(json_string_value(json_object_get(j, "value")), want);
            assert_int_equal(commit_ts_of(j), k_acked[c][seq]);
            json_decref(j);
            acked++;
        }
    print_message("%d kills: %d acknowledged writes, all present with their commit_ts\n",
                  K_KILLS, acked);
    assert_true(acked > 100);
    assert_int_equal(tl_stack_stop(&KS), 0);
}

/* ---- what the committer leaves to the workers ---- */

static void conditions_big_values_and_two_phase_still_work(void **state)
{
    (void)state;
    tl_stack st;
    const char *two_phase[] = {"--one-pc", "off", NULL};

    for (int pass = 0; pass < 2; pass++) {
        assert_int_equal(tl_stack_start(&st, pass ? two_phase : NULL), 0);
        json_t *j = tl_expect(&st, "PUT", "/v1/kv/a", "{\"value\":\"1\"}", 200);
        uint64_t ts = commit_ts_of(j);
        json_decref(j);
        char body[96];
        /* A condition: the worker's compare-and-set. */
        snprintf(body, sizeof(body), "{\"value\":\"2\",\"if_commit_ts\":%llu}",
                 (unsigned long long)(ts - 1));
        json_decref(tl_expect(&st, "PUT", "/v1/kv/a", body, 409));
        snprintf(body, sizeof(body), "{\"value\":\"2\",\"if_commit_ts\":%llu}",
                 (unsigned long long)ts);
        json_decref(tl_expect(&st, "PUT", "/v1/kv/a", body, 200));
        /* A body over the event thread's 64 KiB. */
        size_t vlen = 100000;
        char *big = malloc(vlen + 32);
        assert_non_null(big);
        strcpy(big, "{\"value\":\"");
        memset(big + 10, 'x', vlen);
        strcpy(big + 10 + vlen, "\"}");
        json_decref(tl_expect(&st, "PUT", "/v1/kv/big", big, 200));
        free(big);
        j = tl_expect(&st, "GET", "/v1/kv/big", NULL, 200);
        assert_int_equal(strlen(json_string_value(json_object_get(j, "value"))), vlen);
        json_decref(j);
        json_decref(tl_expect(&st, "DELETE", "/v1/kv/a", NULL, 200));
        json_decref(tl_expect(&st, "GET", "/v1/kv/a", NULL, 404));
        /* With one-phase commit off nothing goes through the committer. */
        double rounds = tl_service_metric(&st, "percolator_write_batch_size_count");
        assert_true(pass ? rounds == 0 : rounds >= 2);
        assert_int_equal(tl_stack_stop(&st), 0);
    }
}

int main(void)
{
    /* CMOCKA_TEST_FILTER=name runs the matching tests only (debugging). */
    if (getenv("CMOCKA_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("CMOCKA_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        TL_TEST(concurrent_writes_are_each_committed_once),
        TL_TEST(writes_arriving_together_share_one_round),
        TL_TEST(stop_answers_the_writes_it_holds),
        TL_TEST(acknowledged_writes_survive_kill9),
        TL_TEST(conditions_big_values_and_two_phase_still_work),
    };
    return cmocka_run_group_tests_name("service: autocommit writes through the committer",
                                       tests, NULL, NULL);
}
