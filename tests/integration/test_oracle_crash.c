/*
 * test_oracle_crash.c — the oracle's promise under kill -9 (DESIGN §1.5).
 *
 * Four client threads load a real oracle while the test kills it with
 * SIGKILL 25 times, restarting it on the same data dir and port each time.
 * Two threads use plain libcurl keep-alive requests with varying counts;
 * two share one coalescing oracle client (service/oracle_client.h). Every
 * block handed out is recorded, then checked:
 *   1. no timestamp was handed out twice (blocks never overlap);
 *   2. each thread's sequence strictly increases, across restarts;
 *   3. everything a later oracle process handed out is above everything an
 *      earlier one did.
 * For 3 a block is attributed to a process only if the process generation
 * did not change while the request was on the wire (the controller bumps
 * the generation right before each kill and right before each start).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oracle_client.h"
#include "testlib.h"
#include "timeutil.h"

#define KILLS 25
#define LOAD_MS 250            /* load between a restart and the next kill */
#define THREADS 4
#define MAX_BLOCKS 4000000     /* per thread, bounds memory */

typedef struct block {
    uint64_t first;
    uint32_t count;
    int32_t gen;               /* process generation, or -1 if it changed mid-request */
} block;

typedef struct worker {
    int id;
    bool use_client;           /* coalescing client, else plain libcurl */
    block *blocks;
    size_t n;
    unsigned errors;
    pthread_t thread;
} worker;

static tl_oracle oracle;
static oc_client *shared_client;
static _Atomic int generation;
static _Atomic bool stop_load;

static int cmp_block(const void *a, const void *b)
{
    const block *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* One plain keep-alive request; 0 and *first on success. */
static int plain_request(CURL *e, buf *body, unsigned count, uint64_t *first)
{
    char url[128];
    snprintf(url, sizeof url, "%s/v1/timestamps?count=%u", oracle.url, count);
    buf_reset(body);
    curl_easy_setopt(e, CURLOPT_URL, url);
    long status = 0;
    if (curl_easy_perform(e) != CURLE_OK ||
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status != 200)
        return -1;
    json_t *j = json_loadb(body->data, body->len, 0, NULL);
    json_t *f = json_object_get(j, "first"), *c = json_object_get(j, "count");
    int rc = -1;
    if (json_is_integer(f) && json_is_integer(c) && json_integer_value(c) == (json_int_t)count) {
        *first = (uint64_t)json_integer_value(f);
        rc = 0;
    }
    json_decref(j);
    return rc;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *arg)
{
    return buf_append(arg, p, size * nmemb) == 0 ? size * nmemb : 0;
}

static void *load(void *arg)
{
    worker *w = arg;
    buf body = BUF_INIT;
    CURL *e = NULL;
    struct curl_slist *hdrs = NULL;
    if (!w->use_client) {
        e = curl_easy_init();
        hdrs = curl_slist_append(NULL, "Content-Type:");
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 2000L);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
    }
    unsigned seed = (unsigned)w->id * 7919u + 1;
    while (!atomic_load(&stop_load) && w->n < MAX_BLOCKS) {
        int g0 = atomic_load(&generation);
        uint64_t first = 0;
        uint32_t count = 1;
        int rc;
        if (w->use_client) {
            rc = oc_timestamp(shared_client, &first) == OC_OK ? 0 : -1;
        } else {
            count = 1 + (uint32_t)(rand_r(&seed) % 100);
            rc = plain_request(e, &body, count, &first);
        }
        int g1 = atomic_load(&generation);
        if (rc != 0) {
            w->errors++;
            time_sleep_ms(1); /* the oracle is down; do not spin */
            continue;
        }
        /* Attributed to a process only when the whole request ran within
         * one process's life (an even generation). The odd window opens
         * just before the kill lands, so the old process may still answer
         * in it: such answers are checked for uniqueness, not ordering. */
        w->blocks[w->n++] = (block){first, count, g0 == g1 && g0 % 2 == 0 ? g0 : -1};
    }
    if (e)
        curl_easy_cleanup(e);
    curl_slist_free_all(hdrs);
    buf_free(&body);
    return NULL;
}

static void test_kill9_under_load_never_repeats_or_goes_back(void **state)
{
    (void)state;
    char *dir = tl_mkdtemp("oracle-crash");
    assert_non_null(dir);
    char data[600];
    snprintf(data, sizeof data, "%s/data", dir);

    atomic_store(&generation, 0);
    assert_int_equal(tl_oracle_start(&oracle, data, 0), 0);
    shared_client = oc_open(oracle.url, 1000, NULL);
    assert_non_null(shared_client);

    worker w[THREADS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < THREADS; i++) {
        w[i].id = i;
        w[i].use_client = i >= 2;
        w[i].blocks = malloc(MAX_BLOCKS * sizeof(block));
        assert_non_null(w[i].blocks);
        assert_int_equal(tl_thread_start(&w[i].thread, load, &w[i]), 0);
    }

    uint64_t t0 = time_mono_ms();
    int port = oracle.port;
    for (int k = 0; k < KILLS; k++) {
        time_sleep_ms(LOAD_MS);
        atomic_fetch_add(&generation, 1);   /* requests from now on may straddle */
        assert_int_equal(tl_kill9(oracle.pid), 0);
        atomic_fetch_add(&generation, 1);   /* the next process */
        if (tl_oracle_start(&oracle, data, port) != 0)
            fail_msg("restart %d failed", k + 1);
    }
    time_sleep_ms(LOAD_MS);
    atomic_store(&stop_load, true);
    for (int i = 0; i < THREADS; i++)
        tl_thread_join(w[i].thread, NULL);
    uint64_t elapsed = time_mono_ms() - t0;

    /* 2. per-thread strict increase, in the order the thread received them */
    size_t total = 0;
    for (int i = 0; i < THREADS; i++) {
        assert_true(w[i].n > 0);
        for (size_t j = 1; j < w[i].n; j++)
            if (w[i].blocks[j].first <= w[i].blocks[j - 1].first + w[i].blocks[j - 1].count - 1)
                fail_msg("thread %d: block %zu (first %llu) not above block %zu (last %llu)", i, j,
                         (unsigned long long)w[i].blocks[j].first, j - 1,
                         (unsigned long long)(w[i].blocks[j - 1].first + w[i].blocks[j - 1].count - 1));
        total += w[i].n;
    }

    /* 1. uniqueness: sort all blocks, no overlap, everything below 2^53 */
    block *all = malloc(total * sizeof(block));
    assert_non_null(all);
    size_t m = 0;
    uint64_t stamps = 0;
    for (int i = 0; i < THREADS; i++) {
        memcpy(all + m, w[i].blocks, w[i].n * sizeof(block));
        m += w[i].n;
    }
    qsort(all, total, sizeof(block), cmp_block);
    for (size_t j = 0; j < total; j++) {
        stamps += all[j].count;
        assert_true(all[j].first >= 1);
        assert_true(all[j].first + all[j].count - 1 < (UINT64_C(1) << 53));
        if (j > 0 && all[j].first <= all[j - 1].first + all[j - 1].count - 1)
            fail_msg("timestamp %llu handed out twice", (unsigned long long)all[j].first);
    }

    /* 3. process order: max of generation g < min of any later generation.
     * Generations of live processes are even: 0, 2, 4, ... */
    int gens = 2 * KILLS + 1;
    uint64_t *lo = calloc((size_t)gens, sizeof *lo), *hi = calloc((size_t)gens, sizeof *hi);
    assert_non_null(lo);
    assert_non_null(hi);
    for (size_t j = 0; j < total; j++) {
        int g = all[j].gen;
        if (g < 0)
            continue;
        assert_true(g < gens && g % 2 == 0);
        uint64_t last = all[j].first + all[j].count - 1;
        if (!lo[g] || all[j].first < lo[g])
            lo[g] = all[j].first;
        if (last > hi[g])
            hi[g] = last;
    }
    int served = 0;
    uint64_t max_before = 0;
    for (int g = 0; g < gens; g += 2) {
        if (!lo[g])
            continue;
        served++;
        if (lo[g] <= max_before)
            fail_msg("process %d handed out %llu, not above %llu from an earlier process", g / 2,
                     (unsigned long long)lo[g], (unsigned long long)max_before);
        max_before = hi[g];
    }
    /* The load really ran against most processes (how many depends on how
     * the 2 cores were shared: with builds running, a client can sleep
     * through a process's whole life). */
    assert_true(served >= KILLS * 3 / 4);

    /* The coalescing client recovered by itself after the last restart. */
    uint64_t ts;
    int rc = OC_UNAVAILABLE;
    for (int i = 0; i < 100 && rc != OC_OK; i++) {
        rc = oc_timestamp(shared_client, &ts);
        if (rc != OC_OK)
            time_sleep_ms(20);
    }
    assert_int_equal(rc, OC_OK);

    unsigned errors = 0;
    for (int i = 0; i < THREADS; i++)
        errors += w[i].errors;
    print_message("%d kills in %llu ms; %zu requests, %llu timestamps, %d processes served, "
                  "%u failed requests while down\n", KILLS, (unsigned long long)elapsed, total,
                  (unsigned long long)stamps, served, errors);

    free(lo);
    free(hi);
    free(all);
    for (int i = 0; i < THREADS; i++)
        free(w[i].blocks);
    oc_close(shared_client);
    assert_int_equal(tl_oracle_stop(&oracle), 0);
    tl_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(test_kill9_under_load_never_repeats_or_goes_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
