/*
 * test_service_bank.c — snapshot isolation over HTTP (DESIGN §1.1): 20
 * accounts, 8 concurrent clients making 2,000 transfers, half through
 * sessions and half through one-shot /v1/txn compare-and-set, conflicts
 * retried by the clients, while a reader takes snapshots of every account.
 * The total must be conserved in every snapshot and at the end, with
 * one-phase commit on and off, and after a restart; and again with the
 * keyspace cut into regions (--region-split-keys) so that most transfers
 * span two (DESIGN §6.2), with GC running under them and eight more
 * splits (POST /v1/regions/split) made while the transfers run; the
 * twelve regions are the service's after a restart (the store keeps the
 * map); and regions split by size (--region-max-bytes) as 300 values of
 * 1 KiB are written, every value read back, in order, after the splits
 * and a restart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bank.h"
#include "svc_fixture.h"

#define ACCOUNTS 20
#define CLIENTS 8
#define TRANSFERS 2000
#define START_BALANCE 1000
#define TOTAL ((long)ACCOUNTS * START_BALANCE)

static tl_stack ST;
static atomic_int clients_done;

/* One call; asserts a known status. Returns the JSON (may be NULL). */
static json_t *call(const char *method, const char *path, const char *body, long *status)
{
    json_t *j = tl_call(&ST, method, path, body, status);
    if (*status >= 500) {
        char *d = j ? json_dumps(j, 0) : NULL;
        fprintf(stderr, "%s %s -> %ld %s\n", method, path, *status, d ? d : "");
        free(d);
        fail_msg("server error");
    }
    return j;
}

static void account(int i, char *out) { snprintf(out, 16, "acct%%2F%02d", i % 100); }
static void account_key(int i, char *out) { snprintf(out, 16, "acct/%02d", i % 100); }

/* A transfer of the shared client (tests/lib/bank.c): true when it
 * committed, false when a conflict refused it (409); anything else fails
 * the test. */
static bool transfer_by(bool session, int from, int to, long amount)
{
    char a[16], b[16];
    account_key(from, a);
    account_key(to, b);
    tl_transfer r = tl_bank_transfer(&ST, session, a, b, amount, NULL);
    if (r.status == 409)
        return false;
    if (r.status != 200 || !r.committing)
        fail_msg("a transfer got %ld (at the %s)", r.status, r.committing ? "commit" : "reads");
    return true;
}

static bool transfer_session(int from, int to, long amount)
{
    return transfer_by(true, from, to, amount);
}

static bool transfer_oneshot(int from, int to, long amount)
{
    return transfer_by(false, from, to, amount);
}

typedef struct {
    int id;
    unsigned seed;
    int done, retries;
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    for (int i = 0; i < TRANSFERS / CLIENTS; i++) {
        int from = rand_r(&c->seed) % ACCOUNTS;
        int to = (from + 1 + rand_r(&c->seed) % (ACCOUNTS - 1)) % ACCOUNTS;
        long amount = rand_r(&c->seed) % 100;
        bool by_session = (i + c->id) % 2 == 0;
        for (int attempt = 0;; attempt++) {
            bool ok = by_session ? transfer_session(from, to, amount)
                                 : transfer_oneshot(from, to, amount);
            if (ok)
                break;
            c->retries++;
            assert_true(attempt < 500);
            usleep((useconds_t)(1000 + rand_r(&c->seed) % 4000));
        }
        c->done++;
    }
    atomic_fetch_add(&clients_done, 1);
    return NULL;
}

/* Sum every account in one snapshot: a scan (no ts: a fresh snapshot). */
static long snapshot_sum(int *accounts)
{
    long st;
    json_t *j = call("GET", "/v1/kv?prefix=acct/&limit=100", NULL, &st);
    if (st == 409) {
        json_decref(j);
        return -1;
    }
    assert_int_equal(st, 200);
    json_t *items = json_object_get(j, "items");
    long sum = 0;
    for (size_t i = 0; i < json_array_size(items); i++)
        sum += tl_bank_balance(json_array_get(items, i));
    *accounts = (int)json_array_size(items);
    json_decref(j);
    return sum;
}

typedef struct {
    int snapshots;
} reader;

static void *reader_main(void *arg)
{
    reader *r = arg;
    while (atomic_load(&clients_done) < CLIENTS && r->snapshots < 100000) {
        int n = 0;
        long sum = snapshot_sum(&n);
        if (sum < 0)
            continue; /* a live lock outlasted --lock-wait-ms: try again */
        assert_int_equal(n, ACCOUNTS);
        assert_int_equal(sum, TOTAL);
        r->snapshots++;
    }
    return NULL;
}

/* Blind writes (PUT and DELETE /v1/kv) of keys in one region per thread,
 * all at once: the committer's rounds would mix regions unless each
 * round is one region's (write_batch.c). Each answer must be 200. */
static void *blind_main(void *arg)
{
    int region = (int)(intptr_t)arg; /* 0..3: acct/02~, acct/07~, acct/12~, acct/17~ */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 40; i++) {
            char path[64];
            long st;
            snprintf(path, sizeof path, "/v1/kv/acct%%2F%02d~blind%d", 2 + 5 * region, i);
            json_decref(call(pass == 0 ? "PUT" : "DELETE", path,
                             pass == 0 ? "{\"value\":\"0\"}" : NULL, &st));
            assert_int_equal(st, 200);
        }
    return NULL;
}

/* Splits while the transfers run (a command in the log: DESIGN §6.2),
 * each answered with the map after it. */
static const char *const more_splits[] = {"acct/02", "acct/07", "acct/12", "acct/17",
                                          "acct/01", "acct/08", "acct/13", "acct/19"};
#define MORE_SPLITS (sizeof more_splits / sizeof more_splits[0])
#define ALL_REGIONS (4 + MORE_SPLITS)

static void *splitter_main(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < MORE_SPLITS; i++) {
        usleep(150 * 1000);
        char body[64];
        snprintf(body, sizeof body, "{\"key\":\"%s\"}", more_splits[i]);
        json_t *j = tl_must(&ST, "POST", "/v1/regions/split", body, 200);
        assert_int_equal(json_array_size(json_object_get(j, "regions")), 5 + i);
        json_decref(j);
    }
    /* A key that starts a region already: refused, nothing changed. */
    json_decref(tl_must(&ST, "POST", "/v1/regions/split", "{\"key\":\"acct/07\"}", 409));
    return NULL;
}

/* The regions after the splits, in key order: starts and ends chain, every
 * split key starts one, and a region a split cut has a later epoch. */
static void check_map(void)
{
    json_t *regions = tl_must(&ST, "GET", "/v1/regions", NULL, 200);
    json_t *list = json_object_get(regions, "regions");
    assert_int_equal(json_array_size(list), ALL_REGIONS);
    const char *prev_end = "";
    size_t split_starts = 0, later_epochs = 0;
    for (size_t i = 0; i < ALL_REGIONS; i++) {
        json_t *g = json_array_get(list, i);
        const char *start = json_string_value(json_object_get(g, "start"));
        assert_non_null(start);
        assert_string_equal(start, prev_end);
        for (size_t k = 0; k < MORE_SPLITS; k++)
            split_starts += strcmp(start, more_splits[k]) == 0;
        later_epochs += json_integer_value(json_object_get(g, "epoch")) > 1;
        json_t *end = json_object_get(g, "end");
        if (i + 1 < ALL_REGIONS)
            prev_end = json_string_value(end);
        else
            assert_true(json_is_null(end));
    }
    assert_int_equal(split_starts, MORE_SPLITS);
    assert_true(later_epochs >= 2 * MORE_SPLITS - 4); /* both parts of each, some twice */
    json_decref(regions);
    json_t *health = tl_must(&ST, "GET", "/v1/health", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(health, "regions")), ALL_REGIONS);
    json_decref(health);
}

/* With regions: every account region took batches, transactions spanned
 * regions (they cannot commit in one phase), and GC's parts went through
 * (a part across two regions would be refused). */
static void check_regions(void)
{
    double cross = tl_service_metric(&ST, "percolator_commits_cross_region_total");
    double two_phase = tl_service_metric(&ST, "percolator_commits_two_phase_total");
    print_message("regions: %.0f cross-region commits of %.0f two-phase\n", cross, two_phase);
    assert_true(cross > TRANSFERS / 4);
    assert_true(two_phase >= cross);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(tl_thread_start(&th[i], blind_main, (void *)(intptr_t)i), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(tl_thread_join(th[i], NULL), 0);
    for (int id = 1; id <= 4; id++) {
        char name[96];
        snprintf(name, sizeof name, "percolator_region_batches_total{region=\"%d\"}", id);
        double b = tl_service_metric(&ST, name);
        print_message("region %d: %.0f batches\n", id, b);
        assert_true(b > 0);
    }
    /* The regions as the API and the command-line client list them. */
    check_map();
    print_message("regions: %.0f batches cut before a split went to the shared log\n",
                  tl_service_metric(&ST, "percolator_region_stale_batches_total"));
    assert_true(tl_service_metric(&ST, "percolator_region_map_installs_total") >= MORE_SPLITS);
    const char *args[] = {"--endpoint", ST.svc.url, "region", "list", NULL};
    tl_run_result out;
    assert_int_equal(tl_run("percolator", args, NULL, NULL, 0, 30000, &out), 0);
    assert_int_equal(out.status, 0);
    print_message("%s", out.out);
    assert_non_null(strstr(out.out, "acct/10"));
    assert_int_equal(strchr(out.out, '\n') != NULL, 1);
    size_t rows = 0;
    for (const char *p = out.out; (p = strchr(p, '\n')) != NULL; p++)
        rows++;
    assert_int_equal(rows, 1 + ALL_REGIONS); /* a heading and a row per region */
    tl_run_free(&out);

    /* A range whose end is below its start reads nothing, in whatever
     * regions its ends are (it met no region and answered 503). */
    long st;
    json_t *j = call("GET", "/v1/kv?start=acct%2F17&end=acct%2F02", NULL, &st);
    assert_int_equal(st, 200);
    assert_int_equal(json_array_size(json_object_get(j, "items")), 0);
    json_decref(j);
    double removed = 0;
    for (int i = 0; i < 150 && removed <= 0; i++) {
        removed = tl_service_metric(&ST, "percolator_gc_versions_removed_total");
        if (removed <= 0)
            usleep(100 * 1000);
    }
    print_message("gc: %.0f versions removed\n", removed);
    assert_true(removed > 0);
}

static void run_bank(const char *one_pc, const char *splits)
{
    const char *extra[] = {"--one-pc", one_pc, "--lock-wait-ms", "2000", NULL, NULL, NULL, NULL,
                           NULL};
    if (splits != NULL) {
        extra[4] = "--region-split-keys";
        extra[5] = splits;
        extra[6] = "--gc-retention-ms";
        extra[7] = "1000";
    }
    assert_int_equal(tl_stack_start(&ST, extra), 0);
    atomic_store(&clients_done, 0);

    /* Open the accounts in one transaction. */
    char body[4096] = "{\"writes\":[";
    for (int i = 0; i < ACCOUNTS; i++) {
        char k[16];
        account_key(i, k);
        snprintf(body + strlen(body), sizeof(body) - strlen(body),
                 "%s{\"key\":\"%s\",\"value\":\"%d\"}", i ? "," : "", k, START_BALANCE);
    }
    strcat(body, "]}");
    long st;
    json_decref(call("POST", "/v1/txn", body, &st));
    assert_int_equal(st, 200);

    pthread_t th[CLIENTS + 2];
    client c[CLIENTS];
    reader r = {0};
    int threads = CLIENTS + 1;
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = (client){.id = i, .seed = (unsigned)(i * 7919 + 17)};
        assert_int_equal(tl_thread_start(&th[i], client_main, &c[i]), 0);
    }
    assert_int_equal(tl_thread_start(&th[CLIENTS], reader_main, &r), 0);
    if (splits != NULL)
        assert_int_equal(tl_thread_start(&th[threads++], splitter_main, NULL), 0);
    for (int i = 0; i < threads; i++)
        assert_int_equal(tl_thread_join(th[i], NULL), 0);
    int done = 0, retries = 0;
    for (int i = 0; i < CLIENTS; i++) {
        done += c[i].done;
        retries += c[i].retries;
    }
    print_message("one-pc %s: %d transfers, %d retries after conflicts, %d snapshots summed\n",
                  one_pc, done, retries, r.snapshots);
    assert_int_equal(done, TRANSFERS);
    assert_true(r.snapshots > 0);

    /* At the end: no locks, the total by latest reads and by a scan, and
     * again after a restart. */
    for (int pass = 0; pass < 2; pass++) {
        json_t *j = call("GET", "/v1/locks", NULL, &st);
        assert_int_equal(json_array_size(json_object_get(j, "locks")), 0);
        json_decref(j);
        long sum = 0;
        for (int i = 0; i < ACCOUNTS; i++) {
            char path[64], k[16];
            account(i, k);
            snprintf(path, sizeof(path), "/v1/kv/%s", k);
            j = call("GET", path, NULL, &st);
            assert_int_equal(st, 200);
            sum += tl_bank_balance(j);
            json_decref(j);
        }
        assert_int_equal(sum, TOTAL);
        int n;
        assert_int_equal(snapshot_sum(&n), TOTAL);
        if (pass == 0 && splits != NULL)
            check_regions();
        if (pass == 1 && splits != NULL)
            check_map(); /* the store's map, not --region-split-keys' */
        if (pass == 0) {
            assert_int_equal(tl_service_stop(&ST), 0);
            assert_int_equal(tl_service_start(&ST), 0);
        }
    }
    assert_int_equal(tl_stack_stop(&ST), 0);
}

static void bank_with_one_phase_commit(void **state)
{
    (void)state;
    run_bank("on", NULL);
}

static void bank_with_two_phase_commit_only(void **state)
{
    (void)state;
    run_bank("off", NULL);
}

/* Accounts 00-04, 05-09, 10-14 and 15-19 in four regions. */
static void bank_across_regions(void **state)
{
    (void)state;
    run_bank("on", "acct%2F05,acct%2F10,acct%2F15");
}

/* ---- regions split as they grow ---- */

#define GROW_KEYS 300
#define GROW_WRITERS 4
#define GROW_MAX "65536"

static void *grow_main(void *arg)
{
    int w = (int)(intptr_t)arg;
    char body[1100] = "{\"value\":\"";
    size_t n = strlen(body);
    memset(body + n, 'a' + w, 1024);
    strcpy(body + n + 1024, "\"}");
    for (int k = w; k < GROW_KEYS; k += GROW_WRITERS) {
        char path[64];
        snprintf(path, sizeof path, "/v1/kv/grow%%2F%03d", k);
        json_decref(tl_must(&ST, "PUT", path, body, 200));
    }
    return NULL;
}

/* The regions now: their count, the largest measured size, and whether
 * every one was measured (may be NULL). */
static size_t regions_now(double *largest, bool *all_measured)
{
    json_t *j = tl_must(&ST, "GET", "/v1/regions", NULL, 200), *r;
    size_t i, n = json_array_size(json_object_get(j, "regions")), measured = 0;
    *largest = 0;
    json_array_foreach(json_object_get(j, "regions"), i, r) {
        json_t *b = json_object_get(r, "bytes");
        measured += json_is_integer(b);
        if (json_is_integer(b) && (double)json_integer_value(b) > *largest)
            *largest = (double)json_integer_value(b);
    }
    json_decref(j);
    if (all_measured != NULL)
        *all_measured = measured == n;
    return n;
}

/* Every value once, in key order, by a scan across the regions. */
static void every_value_in_order(void)
{
    json_t *j = tl_must(&ST, "GET", "/v1/kv?prefix=grow/&limit=1000", NULL, 200), *it;
    json_t *items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), GROW_KEYS);
    size_t i;
    json_array_foreach(items, i, it) {
        char want[32];
        snprintf(want, sizeof want, "grow/%03zu", i);
        assert_string_equal(json_string_value(json_object_get(it, "key")), want);
        const char *v = json_string_value(json_object_get(it, "value"));
        assert_int_equal(strlen(v), 1024);
        assert_int_equal(v[0], 'a' + (int)(i % GROW_WRITERS));
    }
    json_decref(j);
}

static void regions_split_as_they_grow(void **state)
{
    (void)state;
    const char *extra[] = {"--region-max-bytes", GROW_MAX, "--janitor-interval-ms", "100", NULL};
    assert_int_equal(tl_stack_start(&ST, extra), 0);
    pthread_t th[GROW_WRITERS];
    for (int i = 0; i < GROW_WRITERS; i++)
        assert_int_equal(tl_thread_start(&th[i], grow_main, (void *)(intptr_t)i), 0);
    for (int i = 0; i < GROW_WRITERS; i++)
        assert_int_equal(tl_thread_join(th[i], NULL), 0);
    /* The janitor measures what was written since its last look, and
     * each new region once: within a few of its rounds the splits settle
     * and every region has a size. */
    double largest = 0, splits = 0;
    size_t n = 0;
    bool measured = false;
    for (int round = 0; round < 100 && !measured; round++) {
        usleep(200 * 1000);
        n = regions_now(&largest, &measured);
        splits = tl_service_metric(&ST, "percolator_region_auto_splits_total");
    }
    double checks = tl_service_metric(&ST, "percolator_region_size_checks_total");
    print_message("grow: %zu regions after %.0f splits and %.0f size checks, the largest "
                  "measured %.0f bytes\n", n, splits, checks, largest);
    /* 300 KiB of values over 64 KiB regions: none measured above the limit
     * (a region past it is split once measured). */
    assert_true(measured);
    assert_true(n >= 4);
    assert_int_equal(splits, (double)(n - 1));
    assert_true(checks >= splits + (double)n);
    assert_true(largest > 0 && largest <= 65536);
    every_value_in_order();
    /* The store keeps the map. */
    assert_int_equal(tl_service_stop(&ST), 0);
    assert_int_equal(tl_service_start(&ST), 0);
    assert_int_equal(regions_now(&largest, NULL), n);
    every_value_in_order();
    assert_int_equal(tl_stack_stop(&ST), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(bank_with_one_phase_commit),
        TL_TEST(bank_with_two_phase_commit_only),
        TL_TEST(bank_across_regions),
        TL_TEST(regions_split_as_they_grow),
    };
    return cmocka_run_group_tests_name("service: bank transfers", tests, NULL, NULL);
}
