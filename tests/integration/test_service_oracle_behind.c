/*
 * test_service_oracle_behind.c — an oracle behind the store (issue #18,
 * docs/DESIGN.md §4.8), with the real programs:
 *
 *  - keys are committed; the oracle loses its state (a fresh one on an
 *    empty data dir starts again at 1) and the service restarts with it:
 *    every transaction (begin, blind write, one-shot, a scan at a fresh
 *    snapshot) answers 503 oracle_behind naming both timestamps, nothing
 *    is written, latest reads and snapshot reads at stored timestamps
 *    still work; once an oracle above the store answers again (the old one
 *    back), writes work, also to the existing keys;
 *    or a fresh oracle started with --min-timestamp at the store's largest
 *    timestamp (the refusal names it) takes over;
 *  - an oracle near 2^53 is refused too (503 oracle_out_of_range).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hwm.h"
#include "svc_fixture.h"

#define NKEYS 5

static uint64_t put(tl_stack *st, const char *key, const char *value)
{
    char path[128], body[128];
    snprintf(path, sizeof(path), "/v1/kv/%s", key);
    snprintf(body, sizeof(body), "{\"value\":\"%s\"}", value);
    json_t *j = tl_must(st, "PUT", path, body, 200);
    uint64_t cts = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
    json_decref(j);
    return cts;
}

static void expect_read(tl_stack *st, const char *path, const char *want)
{
    json_t *j = tl_must(st, "GET", path, NULL, 200);
    assert_string_equal(json_string_value(json_object_get(j, "value")), want);
    json_decref(j);
}

/* A 503 with code, whose message names every number of nums (0: none). */
static json_t *expect_refused(tl_stack *st, const char *method, const char *path,
                              const char *body, const char *code)
{
    json_t *j = tl_must(st, method, path, body, 503);
    assert_string_equal(tl_error_code(j), code);
    return j;
}

/* The oracle of the stack replaced by one on data_dir, on the same port
 * (the service keeps its --oracle URL). */
static void swap_oracle(tl_stack *st, const char *data_dir)
{
    int port = st->oracle.port;
    assert_int_equal(tl_oracle_stop(&st->oracle), 0);
    assert_int_equal(tl_oracle_start(&st->oracle, data_dir, port), 0);
}

static void a_fresh_oracle_is_refused_until_one_above_the_store_is_back(void **state)
{
    (void)state;
    tl_stack st;
    char key[32], value[32], path[128], fresh[700], orig[700];
    uint64_t cts[NKEYS], max = 0;

    assert_int_equal(tl_stack_start(&st, NULL), 0);
    snprintf(orig, sizeof(orig), "%s", st.oracle.dir);
    snprintf(fresh, sizeof(fresh), "%s/oracle-fresh", st.dir);
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(value, sizeof(value), "v%d", i);
        cts[i] = put(&st, key, value);
        max = cts[i] > max ? cts[i] : max;
    }
    /* A two-phase transaction too: its locks and records are counted. */
    json_t *t = tl_must(&st, "POST", "/v1/txns", NULL, 201);
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/k0",
             json_string_value(json_object_get(t, "id")));
    json_decref(tl_must(&st, "PUT", path, "{\"value\":\"v0-2pc\"}", 204));
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", json_string_value(json_object_get(t, "id")));
    json_decref(t);
    json_t *c = tl_must(&st, "POST", path, NULL, 200);
    cts[0] = (uint64_t)json_integer_value(json_object_get(c, "commit_ts"));
    max = cts[0] > max ? cts[0] : max;
    json_decref(c);

    /* The oracle loses its state; the service restarts with the new one. */
    assert_int_equal(tl_service_stop(&st), 0);
    swap_oracle(&st, fresh);
    assert_int_equal(tl_service_start(&st), 0);

    /* Readiness asks the oracle and says why not; health (which asks
     * nothing) then reports the verdict. */
    json_t *h = tl_must(&st, "GET", "/v1/ready", NULL, 503);
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(h, "error"),
                                                             "message")), "behind"));
    json_decref(h);
    h = tl_must(&st, "GET", "/v1/health", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(h, "oracle")), "behind");
    json_decref(h);

    json_t *e = expect_refused(&st, "POST", "/v1/txns", NULL, "oracle_behind");
    json_t *err = json_object_get(e, "error");
    assert_int_equal(json_integer_value(json_object_get(err, "store_max_ts")), max);
    uint64_t oracle_ts = (uint64_t)json_integer_value(json_object_get(err, "oracle_ts"));
    assert_true(oracle_ts >= 1 && oracle_ts <= max);
    char num[32];
    const char *msg = json_string_value(json_object_get(err, "message"));
    snprintf(num, sizeof(num), "%llu", (unsigned long long)max);
    assert_non_null(strstr(msg, num));
    snprintf(num, sizeof(num), "%llu", (unsigned long long)oracle_ts);
    assert_non_null(strstr(msg, num));
    json_decref(e);
    json_decref(expect_refused(&st, "PUT", "/v1/kv/k1", "{\"value\":\"lost\"}", "oracle_behind"));
    json_decref(expect_refused(&st, "PUT", "/v1/kv/new", "{\"value\":\"lost\"}", "oracle_behind"));
    json_decref(expect_refused(&st, "DELETE", "/v1/kv/k2", NULL, "oracle_behind"));
    json_decref(expect_refused(&st, "POST", "/v1/txn",
                               "{\"writes\":[{\"key\":\"k3\",\"value\":\"lost\"}]}",
                               "oracle_behind"));
    json_decref(expect_refused(&st, "GET", "/v1/kv?prefix=k", NULL, "oracle_behind"));

    /* Reads of what is committed need no new timestamp. */
    for (int i = 0; i < NKEYS; i++) {
        snprintf(path, sizeof(path), "/v1/kv/k%d", i);
        snprintf(value, sizeof(value), i == 0 ? "v0-2pc" : "v%d", i);
        expect_read(&st, path, value);
        snprintf(path, sizeof(path), "/v1/kv/k%d?ts=%llu", i, (unsigned long long)cts[i]);
        expect_read(&st, path, value);
    }
    json_decref(tl_must(&st, "GET", "/v1/kv/new", NULL, 404));

    /* The oracle with its state is back (the service was not restarted). */
    swap_oracle(&st, orig);
    uint64_t after = put(&st, "k1", "v1-after");
    assert_true(after > max);
    expect_read(&st, "/v1/kv/k1", "v1-after");
    expect_read(&st, "/v1/kv/k2", "v2"); /* the refused DELETE did nothing */
    expect_read(&st, "/v1/kv/k3", "v3");
    json_decref(tl_must(&st, "GET", "/v1/kv/new", NULL, 404));
    json_decref(tl_must(&st, "POST", "/v1/txns", NULL, 201));
    h = tl_must(&st, "GET", "/v1/health", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(h, "oracle")), "ok");
    json_decref(h);

    char *log = tl_read_file(st.svc.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "the timestamp oracle is behind the store"));
    free(log);

    /* The way out when the oracle's state is gone for good: a fresh oracle
     * started with --min-timestamp at the largest timestamp the refusal
     * names hands out only above it, and writes work again. */
    char fresh2[700], floor[32];
    snprintf(fresh2, sizeof(fresh2), "%s/oracle-fresh2", st.dir);
    assert_int_equal(tl_service_stop(&st), 0); /* it remembers the old oracle's mark */
    swap_oracle(&st, fresh2);
    assert_int_equal(tl_service_start(&st), 0);
    e = expect_refused(&st, "PUT", "/v1/kv/k4", "{\"value\":\"lost\"}", "oracle_behind");
    uint64_t store_max = (uint64_t)json_integer_value(
        json_object_get(json_object_get(e, "error"), "store_max_ts"));
    json_decref(e);
    assert_true(store_max >= after);
    snprintf(floor, sizeof(floor), "%llu", (unsigned long long)store_max);
    setenv("PERCOLATOR_MIN_TIMESTAMP", floor, 1);
    swap_oracle(&st, fresh2);
    unsetenv("PERCOLATOR_MIN_TIMESTAMP");
    uint64_t again = put(&st, "k4", "v4-again");
    assert_true(again > store_max);
    expect_read(&st, "/v1/kv/k4", "v4-again");
    printf("# --min-timestamp %s: the next commit at %llu\n", floor, (unsigned long long)again);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void an_oracle_near_2_53_is_refused(void **state)
{
    (void)state;
    tl_stack st;
    char near[700], err[256];

    assert_int_equal(tl_stack_start(&st, NULL), 0);
    /* An oracle whose persisted mark is 2^31 below 2^53. */
    snprintf(near, sizeof(near), "%s/oracle-near", st.dir);
    hwm_store *h;
    uint64_t mark;
    assert_int_equal(hwm_open(near, &h, &mark, err, sizeof(err)), 0);
    assert_int_equal(hwm_persist(h, (UINT64_C(1) << 53) - (UINT64_C(1) << 31), NULL, err,
                                 sizeof(err)), 0);
    hwm_close(h);
    swap_oracle(&st, near);
    json_decref(expect_refused(&st, "POST", "/v1/txns", NULL, "oracle_out_of_range"));
    json_decref(expect_refused(&st, "PUT", "/v1/kv/x", "{\"value\":\"1\"}", "oracle_out_of_range"));
    json_decref(tl_must(&st, "GET", "/v1/kv/x", NULL, 404));
    assert_int_equal(tl_stack_stop(&st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(a_fresh_oracle_is_refused_until_one_above_the_store_is_back),
        TL_TEST(an_oracle_near_2_53_is_refused),
    };
    return cmocka_run_group_tests_name("service: an oracle behind the store", tests, NULL, NULL);
}
