/*
 * bench_oracle.c — timestamps per second from percolator-oracle.
 *
 * Starts its own oracle (from PERCOLATOR_BIN_DIR) on a free loopback port
 * with a temp data dir, then measures, each row for BENCH_SECONDS (default
 * 3) seconds:
 *   (a) one timestamp per HTTP request over 1, 16 and 64 keep-alive
 *       connections (libcurl multi; two client threads when more than one
 *       connection);
 *   (b) batched requests, count=1000 and count=10000, 16 connections;
 *   (c) the service's coalescing client (service/oracle_client.h) called by
 *       64 threads, one timestamp per call.
 * Client and oracle share the machine, so the figures are for both.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oracle_client.h"
#include "testlib.h"
#include "timeutil.h"

static unsigned seconds = 3;
static tl_oracle oracle;

static size_t sink(char *p, size_t s, size_t n, void *a)
{
    (void)p;
    (void)a;
    return s * n;
}

typedef struct driver {
    int conns;
    unsigned count;
    uint64_t ok, failed;
    pthread_t thread;
} driver;

static CURL *make_handle(const char *url, struct curl_slist *hdrs)
{
    CURL *e = curl_easy_init();
    if (!e)
        return NULL;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    return e;
}

/* Keep `conns` requests in flight on one multi handle until the deadline. */
static void *drive(void *arg)
{
    driver *d = arg;
    char url[128];
    snprintf(url, sizeof url, "%s/v1/timestamps?count=%u", oracle.url, d->count);
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type:");
    CURLM *m = curl_multi_init();
    CURL **h = calloc((size_t)d->conns, sizeof *h);
    if (!hdrs || !m || !h)
        goto done;
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)d->conns);
    for (int i = 0; i < d->conns; i++) {
        h[i] = make_handle(url, hdrs);
        if (!h[i] || curl_multi_add_handle(m, h[i]) != CURLM_OK)
            goto done;
    }
    uint64_t deadline = time_mono_ms() + seconds * 1000u;
    int running = d->conns;
    while (running > 0) {
        if (curl_multi_perform(m, &running) != CURLM_OK)
            break;
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            CURL *e = msg->easy_handle;
            long status = 0;
            curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
            if (msg->data.result == CURLE_OK && status == 200)
                d->ok++;
            else
                d->failed++;
            curl_multi_remove_handle(m, e);
            if (time_mono_ms() < deadline && curl_multi_add_handle(m, e) == CURLM_OK)
                running++;
        }
        if (running > 0)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
done:
    for (int i = 0; h && i < d->conns; i++) {
        if (h[i]) {
            curl_multi_remove_handle(m, h[i]);
            curl_easy_cleanup(h[i]);
        }
    }
    free(h);
    if (m)
        curl_multi_cleanup(m);
    curl_slist_free_all(hdrs);
    return NULL;
}

static void row_http(const char *label, int conns, unsigned count)
{
    int threads = conns > 1 ? 2 : 1;
    driver d[2];
    memset(d, 0, sizeof d);
    uint64_t t0 = time_mono_ns();
    for (int i = 0; i < threads; i++) {
        d[i].conns = conns / threads;
        d[i].count = count;
        pthread_create(&d[i].thread, NULL, drive, &d[i]);
    }
    uint64_t ok = 0, failed = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(d[i].thread, NULL);
        ok += d[i].ok;
        failed += d[i].failed;
    }
    double secs = (double)(time_mono_ns() - t0) / 1e9;
    printf("%-44s %12.0f %15.0f%s\n", label, (double)ok / secs, (double)ok * count / secs,
           failed ? "  (some requests failed!)" : "");
    fflush(stdout);
}

typedef struct caller {
    oc_client *c;
    _Atomic uint64_t *total;
    _Atomic uint64_t *failed;
    uint64_t deadline;
    pthread_t thread;
} caller;

static void *call(void *arg)
{
    caller *k = arg;
    uint64_t n = 0, bad = 0, ts;
    while (time_mono_ms() < k->deadline) {
        for (int i = 0; i < 64; i++) {
            if (oc_timestamp(k->c, &ts) == OC_OK)
                n++;
            else
                bad++;
        }
    }
    atomic_fetch_add(k->total, n);
    atomic_fetch_add(k->failed, bad);
    return NULL;
}

static void row_client(int threads)
{
    oc_client *c = oc_open(oracle.url, 2000, NULL);
    if (!c) {
        printf("cannot open the oracle client\n");
        return;
    }
    _Atomic uint64_t total = 0, failed = 0;
    caller *k = calloc((size_t)threads, sizeof *k);
    uint64_t t0 = time_mono_ns();
    uint64_t deadline = time_mono_ms() + seconds * 1000u;
    for (int i = 0; i < threads; i++) {
        k[i] = (caller){c, &total, &failed, deadline, 0};
        pthread_create(&k[i].thread, NULL, call, &k[i]);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(k[i].thread, NULL);
    double secs = (double)(time_mono_ns() - t0) / 1e9;
    uint64_t reqs = oc_requests(c);
    char label[80];
    snprintf(label, sizeof label, "(c) coalescing client, %d threads", threads);
    printf("%-44s %12.0f %15.0f  (avg batch %.1f)%s\n", label, (double)reqs / secs,
           (double)total / secs, reqs ? (double)total / (double)reqs : 0.0,
           failed ? "  (some calls failed!)" : "");
    free(k);
    oc_close(c);
}

int main(void)
{
    const char *s = getenv("BENCH_SECONDS");
    if (s && atoi(s) > 0 && atoi(s) <= 60)
        seconds = (unsigned)atoi(s);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char *dir = tl_mkdtemp("bench-oracle");
    if (!dir) {
        fprintf(stderr, "bench: cannot create a temp dir\n");
        return 1;
    }
    char data[600];
    snprintf(data, sizeof data, "%s/data", dir);
    if (tl_oracle_start(&oracle, data, 0) != 0) {
        fprintf(stderr, "bench: cannot start %s/percolator-oracle\n", tl_bin_dir());
        tl_rmtree(dir);
        free(dir);
        return 1;
    }
    printf("percolator-oracle benchmark: %ld CPUs shared by client and oracle, %u s per row\n",
           sysconf(_SC_NPROCESSORS_ONLN), seconds);
    printf("%-44s %12s %15s\n", "row", "requests/s", "timestamps/s");
    row_http("(a) count=1, 1 connection", 1, 1);
    row_http("(a) count=1, 16 connections", 16, 1);
    row_http("(a) count=1, 64 connections", 64, 1);
    row_http("(b) count=1000, 16 connections", 16, 1000);
    row_http("(b) count=10000, 16 connections", 16, 10000);
    row_client(64);

    int rc = tl_oracle_stop(&oracle);
    tl_rmtree(dir);
    free(dir);
    curl_global_cleanup();
    return rc == 0 ? 0 : 1;
}
