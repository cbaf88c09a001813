/*
 * test_observers.c — Percolator's notifications over HTTP (the paper's
 * §2.4; the spec's observers):
 *
 *  - registrations: create, replace, list, delete, kept across restarts;
 *  - at most once: 4 claimants while 2 writers commit 2,000 writes to 50
 *    keys; no (key, version) is acknowledged twice, and once the writers
 *    stop and the claimants drain, every key's newest version was processed;
 *  - collapsing: 10 writes before a claim are one notification;
 *  - a key or value that is not UTF-8 is claimed in text mode in base64,
 *    marked so (key_encoding / value_encoding);
 *  - a rolled-back or expired claim is handed out again; claims and acks
 *    survive a restart;
 *  - writes are observed however they were made;
 *  - the scan reads notify entries, not data: 200,000 clean keys and 10
 *    dirty ones cost about 10 entries to drain;
 *  - the example pipeline (examples/document-dedup) runs end to end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "svc_fixture.h"
#include "timeutil.h"


static const char *str(json_t *j, const char *f)
{
    const char *s = json_string_value(json_object_get(j, f));
    assert_non_null(s);
    return s;
}

/* Claim: the answer (200) or NULL (204). */
static json_t *claim(tl_stack *st, const char *observer, int wait_ms)
{
    char path[128];
    long status;
    snprintf(path, sizeof(path), "/v1/observers/%s/claim?wait_ms=%d", observer, wait_ms);
    json_t *j = tl_call(st, "POST", path, NULL, &status);
    if (status == 204)
        return NULL;
    assert_int_equal(status, 200);
    return j;
}

static long finish(tl_stack *st, json_t *c, const char *how)
{
    char path[160];
    long status;
    snprintf(path, sizeof(path), "/v1/txns/%s/%s", str(json_object_get(c, "txn"), "id"), how);
    json_decref(tl_call(st, "POST", path, NULL, &status));
    return status;
}

static void put(tl_stack *st, const char *key, const char *value)
{
    char path[256], body[256];
    snprintf(path, sizeof(path), "/v1/kv/%s", key);
    snprintf(body, sizeof(body), "{\"value\":\"%s\"}", value);
    json_decref(tl_expect(st, "PUT", path, body, 200));
}

static void registrations_are_kept(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    json_decref(tl_expect(&st, "PUT", "/v1/observers/one", "{\"prefix\":\"a/\"}", 201));
    json_decref(tl_expect(&st, "PUT", "/v1/observers/one", "{\"prefix\":\"b/\"}", 200));
    json_decref(tl_expect(&st, "PUT", "/v1/observers/two", "{\"prefix\":\"c/\"}", 201));
    put(&st, "c%2Fpending", "v"); /* dirty for "two" only */
    json_decref(tl_expect(&st, "DELETE", "/v1/observers/two", NULL, 204));
    json_decref(tl_expect(&st, "DELETE", "/v1/observers/two", NULL, 404));
    /* Its pending change went with it: a new observer of c/ sees only
     * changes made after it registered. */
    json_decref(tl_expect(&st, "PUT", "/v1/observers/three", "{\"prefix\":\"c/\"}", 201));
    assert_null(claim(&st, "three", 200));
    put(&st, "c%2Fnew", "v");
    json_t *c3 = claim(&st, "three", 2000);
    assert_non_null(c3);
    assert_string_equal(str(c3, "key"), "c/new");
    assert_int_equal(finish(&st, c3, "commit"), 200);
    json_decref(c3);
    json_decref(tl_expect(&st, "DELETE", "/v1/observers/three", NULL, 204));
    json_decref(tl_expect(&st, "PUT", "/v1/observers/bad%20name", "{\"prefix\":\"x\"}", 400));
    json_decref(tl_expect(&st, "PUT", "/v1/observers/x", "{\"prefx\":\"x\"}", 400));
    json_decref(tl_expect(&st, "POST", "/v1/observers/nobody/claim", NULL, 404));
    assert_int_equal(tl_service_stop(&st), 0);
    assert_int_equal(tl_service_start(&st), 0);
    json_t *j = tl_expect(&st, "GET", "/v1/observers", NULL, 200);
    json_t *list = json_object_get(j, "observers");
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(str(json_array_get(list, 0), "name"), "one");
    assert_string_equal(str(json_array_get(list, 0), "prefix"), "b/");
    json_decref(j);
    /* Still observing after the restart. */
    put(&st, "b%2F1", "v");
    json_t *c = claim(&st, "one", 2000);
    assert_non_null(c);
    assert_string_equal(str(c, "key"), "b/1");
    assert_int_equal(finish(&st, c, "commit"), 200);
    json_decref(c);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void ten_writes_are_one_notification(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    json_decref(tl_expect(&st, "PUT", "/v1/observers/obs", "{\"prefix\":\"d/\"}", 201));
    char v[16];
    for (int i = 0; i < 10; i++) {
        snprintf(v, sizeof(v), "v%d", i);
        put(&st, "d%2Fk", v);
    }
    json_t *c = claim(&st, "obs", 1000);
    assert_non_null(c);
    assert_string_equal(str(c, "value"), "v9");
    assert_int_equal(finish(&st, c, "commit"), 200);
    json_decref(c);
    assert_null(claim(&st, "obs", 300));
    assert_int_equal(tl_service_metric(&st, "percolator_notifications_claimed_total"), 1);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* A key (and value) that is not UTF-8, claimed in text mode: handed out in
 * base64 and marked so; before, the claim answered 500 "storage error
 * (nomem)" and the observer could not get past the key. */
static void a_key_that_is_not_text_is_claimed_in_base64(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    json_decref(tl_expect(&st, "PUT", "/v1/observers/bin", "{\"prefix\":\"n/\"}", 201));
    /* key n/\xff\xfe\x80 = bi///oA=, value \x00\xff\xc3( = AP/DKA== */
    json_decref(tl_expect(&st, "PUT", "/v1/kv/bi%2F%2F%2FoA%3D?encoding=base64",
                          "{\"value\":\"AP/DKA==\"}", 200));
    json_t *c = claim(&st, "bin", 1000);
    assert_non_null(c);
    assert_string_equal(str(c, "key"), "bi///oA=");
    assert_string_equal(str(c, "key_encoding"), "base64");
    assert_string_equal(str(c, "value"), "AP/DKA==");
    assert_string_equal(str(c, "value_encoding"), "base64");
    assert_int_equal(finish(&st, c, "commit"), 200);
    json_decref(c);
    assert_null(claim(&st, "bin", 300)); /* acknowledged: nothing left */
    /* A text key next to it is claimed as before, without the markers. */
    put(&st, "n%2Ftext", "plain");
    c = claim(&st, "bin", 1000);
    assert_non_null(c);
    assert_string_equal(str(c, "key"), "n/text");
    assert_null(json_object_get(c, "key_encoding"));
    assert_null(json_object_get(c, "value_encoding"));
    assert_int_equal(finish(&st, c, "commit"), 200);
    json_decref(c);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void rolled_back_or_expired_claims_come_back(void **state)
{
    (void)state;
    const char *extra[] = {"--lease-ttl-ms", "500", "--janitor-interval-ms", "100", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    json_decref(tl_expect(&st, "PUT", "/v1/observers/obs", "{\"prefix\":\"r/\"}", 201));
    put(&st, "r%2Fk", "v1");
    json_t *c = claim(&st, "obs", 1000);
    assert_non_null(c);
    assert_null(claim(&st, "obs", 100)); /* held by the first claimant */
    assert_int_equal(finish(&st, c, "rollback"), 204);
    json_decref(c);
    /* Rolled back: handed out again. Then left to expire: again. */
    c = claim(&st, "obs", 1000);
    assert_non_null(c);
    assert_string_equal(str(c, "key"), "r/k");
    json_decref(c);
    usleep(1200 * 1000);
    c = claim(&st, "obs", 2000);
    assert_non_null(c);
    assert_string_equal(str(c, "key"), "r/k");
    json_decref(c);
    /* A pending change survives a restart (the claim did not). */
    assert_int_equal(tl_service_stop(&st), 0);
    assert_int_equal(tl_service_start(&st), 0);
    c = claim(&st, "obs", 2000);
    assert_non_null(c);
    assert_int_equal(finish(&st, c, "commit"), 200);
    json_decref(c);
    /* So does the acknowledgment. */
    assert_int_equal(tl_service_stop(&st), 0);
    assert_int_equal(tl_service_start(&st), 0);
    assert_null(claim(&st, "obs", 300));
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void writes_are_observed_however_made(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    json_decref(tl_expect(&st, "PUT", "/v1/observers/obs", "{\"prefix\":\"w/\"}", 201));
    put(&st, "w%2Fkv", "1");
    json_decref(tl_expect(&st, "POST", "/v1/txn",
                     "{\"writes\":[{\"key\":\"w/txn\",\"value\":\"1\"},{\"key\":\"other\",\"value\":\"1\"}]}",
                     200));
    json_t *j = tl_expect(&st, "POST", "/v1/txns", NULL, 201);
    char path[160];
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/w%%2Fsession", str(j, "id"));
    json_decref(tl_expect(&st, "PUT", path, "{\"value\":\"1\"}", 204));
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", str(j, "id"));
    json_decref(tl_expect(&st, "POST", path, NULL, 200));
    json_decref(j);
    json_decref(tl_expect(&st, "DELETE", "/v1/kv/w%2Fkv", NULL, 200));

    /* Three keys are dirty; the observer transaction of one writes a
     * fourth, which is observed in turn. */
    const char *seen[8];
    int n = 0;
    json_t *c;
    while ((c = claim(&st, "obs", 500)) != NULL && n < 8) {
        seen[n] = strdup(str(c, "key"));
        if (strcmp(seen[n], "w/txn") == 0) {
            snprintf(path, sizeof(path), "/v1/txns/%s/keys/w%%2Fby-observer",
                     str(json_object_get(c, "txn"), "id"));
            json_decref(tl_expect(&st, "PUT", path, "{\"value\":\"1\"}", 204));
        }
        if (strcmp(seen[n], "w/kv") == 0)
            assert_true(json_is_null(json_object_get(c, "value"))); /* a delete */
        assert_int_equal(finish(&st, c, "commit"), 200);
        json_decref(c);
        n++;
    }
    assert_int_equal(n, 4);
    const char *want[] = {"w/kv", "w/txn", "w/session", "w/by-observer"};
    for (int w = 0; w < 4; w++) {
        bool found = false;
        for (int i = 0; i < n; i++)
            found |= strcmp(seen[i], want[w]) == 0;
        assert_true(found);
    }
    for (int i = 0; i < n; i++)
        free((void *)seen[i]);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- at most once ---- */

#define KEYS 50
#define WRITES 2000
#define CLAIMANTS 4

static tl_stack AM;
static atomic_int writers_left;
static _Atomic uint64_t newest[KEYS];

typedef struct {
    int id;
    struct {
        int key;
        uint64_t version;
    } done[WRITES + 100];
    int n;
} claimant;

static void *writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < WRITES / 2; i++) {
        char path[64], body[64];
        int k = (i * 7 + id * 13) % KEYS;
        snprintf(path, sizeof(path), "/v1/kv/am%%2Fk%02d", k);
        snprintf(body, sizeof(body), "{\"value\":\"w%d-%d\"}", id, i);
        json_t *j = tl_expect(&AM, "PUT", path, body, 200);
        uint64_t cts = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
        json_decref(j);
        uint64_t prev = atomic_load(&newest[k]);
        while (prev < cts && !atomic_compare_exchange_weak(&newest[k], &prev, cts))
            ;
    }
    atomic_fetch_sub(&writers_left, 1);
    return NULL;
}

static void *claimant_main(void *arg)
{
    claimant *c = arg;
    int idle = 0;
    for (int rounds = 0; rounds < 100000 && idle < 3; rounds++) {
        json_t *cl = claim(&AM, "am", 300);
        if (cl == NULL) {
            if (atomic_load(&writers_left) == 0)
                idle++;
            continue;
        }
        idle = 0;
        int key = atoi(str(cl, "key") + strlen("am/k"));
        uint64_t version = (uint64_t)json_integer_value(json_object_get(cl, "commit_ts"));
        long st = finish(&AM, cl, "commit");
        json_decref(cl);
        if (st == 200 && c->n < WRITES + 100) {
            c->done[c->n].key = key;
            c->done[c->n].version = version;
            c->n++;
        } else {
            assert_true(st == 409 || st == 410);
        }
    }
    return NULL;
}

static void each_change_is_acknowledged_at_most_once(void **state)
{
    (void)state;
    assert_int_equal(tl_stack_start(&AM, NULL), 0);
    json_decref(tl_expect(&AM, "PUT", "/v1/observers/am", "{\"prefix\":\"am/\"}", 201));
    atomic_store(&writers_left, 2);
    static claimant cs[CLAIMANTS];
    pthread_t th[CLAIMANTS + 2];
    for (int i = 0; i < CLAIMANTS; i++) {
        cs[i].id = i;
        cs[i].n = 0;
        assert_int_equal(tl_thread_start(&th[i], claimant_main, &cs[i]), 0);
    }
    for (intptr_t i = 0; i < 2; i++)
        assert_int_equal(tl_thread_start(&th[CLAIMANTS + i], writer, (void *)i), 0);
    for (int i = 0; i < CLAIMANTS + 2; i++)
        assert_int_equal(tl_thread_join(th[i], NULL), 0);

    /* No (key, version) twice; every key's newest version processed. */
    int total = 0;
    for (int i = 0; i < CLAIMANTS; i++)
        total += cs[i].n;
    for (int a = 0; a < CLAIMANTS; a++)
        for (int i = 0; i < cs[a].n; i++)
            for (int b = a; b < CLAIMANTS; b++)
                for (int j = (b == a ? i + 1 : 0); j < cs[b].n; j++)
                    if (cs[a].done[i].key == cs[b].done[j].key &&
                        cs[a].done[i].version == cs[b].done[j].version)
                        fail_msg("key %d version %llu acknowledged twice", cs[a].done[i].key,
                                 (unsigned long long)cs[a].done[i].version);
    for (int k = 0; k < KEYS; k++) {
        bool found = false;
        for (int a = 0; a < CLAIMANTS && !found; a++)
            for (int i = 0; i < cs[a].n && !found; i++)
                found = cs[a].done[i].key == k && cs[a].done[i].version == atomic_load(&newest[k]);
        if (!found)
            fail_msg("key %d: its newest version %llu was never processed", k,
                     (unsigned long long)atomic_load(&newest[k]));
    }
    print_message("%d writes to %d keys, %d observer transactions committed by %d claimants\n",
                  WRITES, KEYS, total, CLAIMANTS);
    assert_true(total >= KEYS && total <= WRITES);
    assert_int_equal(tl_stack_stop(&AM), 0);
}

/* ---- scanning follows dirty entries ---- */

static void draining_reads_notify_entries_not_data(void **state)
{
    (void)state;
    enum { CLEAN = 200000, PER_TXN = 1000 };
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    /* 200,000 keys under the prefix, written before anyone observes it. */
    size_t cap = PER_TXN * 40 + 64;
    char *body = malloc(cap);
    for (int t = 0; t < CLEAN / PER_TXN; t++) {
        size_t off = (size_t)snprintf(body, cap, "{\"writes\":[");
        for (int i = 0; i < PER_TXN; i++)
            off += (size_t)snprintf(body + off, cap - off, "%s{\"key\":\"s/c%07d\",\"value\":\"x\"}",
                                    i ? "," : "", t * PER_TXN + i);
        snprintf(body + off, cap - off, "]}");
        json_decref(tl_expect(&st, "POST", "/v1/txn", body, 200));
    }
    free(body);
    json_decref(tl_expect(&st, "PUT", "/v1/observers/scan", "{\"prefix\":\"s/\"}", 201));
    char key[32];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "s%%2Fd%07d", i * 19997);
        put(&st, key, "dirty");
    }
    double before = tl_service_metric(&st, "percolator_notify_entries_scanned_total");
    int claimed = 0;
    json_t *c;
    while ((c = claim(&st, "scan", 300)) != NULL && claimed < 20) {
        assert_int_equal(finish(&st, c, "commit"), 200);
        json_decref(c);
        claimed++;
    }
    double scanned = tl_service_metric(&st, "percolator_notify_entries_scanned_total") - before;
    print_message("%d clean keys, 10 dirty: %d claimed, %.0f notify entries read\n", CLEAN,
                  claimed, scanned);
    assert_int_equal(claimed, 10);
    /* Each claim reads the dirty entries still there (at most 10), never
     * the 200,000 clean keys. */
    assert_true(scanned >= 10 && scanned <= 10 * 11);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- the example ---- */

static void the_document_pipeline_runs(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "PERCOLATOR_URL=%s examples/document-dedup/demo.sh > %s/demo.out 2>&1",
             st.svc.url, st.dir);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof(cmd), "%s/demo.out", st.dir);
        tl_dump_file(cmd);
    }
    assert_int_equal(rc, 0);
    json_t *j = tl_expect(&st, "GET", "/v1/kv?prefix=dups/", NULL, 200);
    json_t *items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), 3);
    const char *canon[3];
    for (size_t i = 0; i < 3; i++)
        canon[i] = str(json_array_get(items, i), "value");
    const char *want[] = {"example.com/a", "example.com/b", "zzz.net/x"};
    for (int w = 0; w < 3; w++) {
        bool found = false;
        for (int i = 0; i < 3; i++)
            found |= strcmp(canon[i], want[w]) == 0;
        assert_true(found);
    }
    json_decref(j);
    assert_int_equal(tl_stack_stop(&st), 0);
}

int main(void)
{
    if (getenv("CMOCKA_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("CMOCKA_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        TL_TEST(registrations_are_kept),
        TL_TEST(ten_writes_are_one_notification),
        TL_TEST(a_key_that_is_not_text_is_claimed_in_base64),
        TL_TEST(rolled_back_or_expired_claims_come_back),
        TL_TEST(writes_are_observed_however_made),
        TL_TEST(each_change_is_acknowledged_at_most_once),
        TL_TEST(draining_reads_notify_entries_not_data),
        TL_TEST(the_document_pipeline_runs),
    };
    return cmocka_run_group_tests_name("observers", tests, NULL, NULL);
}
