/*
 * test_oracle.c — percolator-oracle's API, errors, restarts, state file and
 * flags, against the real program on a free loopback port (README: Configuration, Oracle).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hwm.h"
#include "testlib.h"

typedef tl_oracle_env fixture;

static int setup(void **state)
{
    *state = tl_oracle_env_new("oracle");
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    tl_oracle_env_free(*state);
    return 0;
}

/* POST path on the fixture's oracle; returns the parsed JSON (or NULL) and
 * the status. */
static json_t *call(fixture *f, const char *method, const char *path, long *status)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", f->o.url, path);
    tl_resp r;
    assert_int_equal(tl_http(method, url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    *status = r.status;
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    tl_resp_free(&r);
    return j;
}

static void assert_error(json_t *j, const char *code)
{
    assert_non_null(j);
    json_t *e = json_object_get(j, "error");
    assert_true(json_is_object(e));
    assert_string_equal(json_string_value(json_object_get(e, "code")), code);
    assert_true(json_is_string(json_object_get(e, "message")));
    assert_true(strlen(json_string_value(json_object_get(e, "message"))) > 0);
}

static void test_timestamps_are_blocks_that_increase(void **state)
{
    fixture *f = *state;
    assert_int_equal(tl_oracle_start(&f->o, f->data, 0), 0);
    long st;
    json_t *j = call(f, "POST", "/v1/timestamps", &st);
    assert_int_equal(st, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "count")), 1);
    json_int_t first = json_integer_value(json_object_get(j, "first"));
    assert_true(first >= 1);
    json_decref(j);

    j = call(f, "POST", "/v1/timestamps?count=1000", &st);
    assert_int_equal(st, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "count")), 1000);
    json_int_t second = json_integer_value(json_object_get(j, "first"));
    assert_true(second > first);
    json_decref(j);

    j = call(f, "POST", "/v1/timestamps?count=100000", &st);
    assert_int_equal(st, 200);
    json_int_t third = json_integer_value(json_object_get(j, "first"));
    assert_true(third >= second + 1000);
    json_decref(j);

    j = call(f, "POST", "/v1/timestamps?count=1", &st);
    assert_int_equal(st, 200);
    assert_true(json_integer_value(json_object_get(j, "first")) >= third + 100000);
    json_decref(j);
}

static void test_bad_requests_get_json_errors(void **state)
{
    fixture *f = *state;
    assert_int_equal(tl_oracle_start(&f->o, f->data, 0), 0);
    static const char *const bad[] = {"0", "-1", "100001", "abc", "", "1.5", "+5", "1e3",
                                      "99999999999999999999999", "%20", NULL};
    for (int i = 0; bad[i]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/timestamps?count=%s", bad[i]);
        long st;
        json_t *j = call(f, "POST", path, &st);
        if (st != 400)
            fail_msg("count=%s answered %ld", bad[i], st);
        assert_error(j, "bad_request");
        json_decref(j);
    }
    long st;
    tl_expect_off_spec(true); /* routes and methods the API does not have */
    json_t *j = call(f, "GET", "/v1/timestamps", &st);
    assert_int_equal(st, 405);
    assert_error(j, "method_not_allowed");
    json_decref(j);
    j = call(f, "DELETE", "/v1/health", &st);
    assert_int_equal(st, 405);
    assert_error(j, "method_not_allowed");
    json_decref(j);
    j = call(f, "GET", "/v1/nope", &st);
    assert_int_equal(st, 404);
    assert_error(j, "not_found");
    json_decref(j);
    j = call(f, "POST", "/v1/timestamps/extra", &st);
    assert_int_equal(st, 404);
    assert_error(j, "not_found");
    json_decref(j);
    tl_expect_off_spec(false);

    /* A body that is not JSON-typed: 415. */
    char url[256];
    snprintf(url, sizeof url, "%s/v1/timestamps", f->o.url);
    tl_resp r;
    assert_int_equal(tl_http("POST", url, "x", 1, "text/plain", TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 415);
    j = json_loads(r.body, 0, NULL);
    assert_error(j, "unsupported_media_type");
    json_decref(j);
    tl_resp_free(&r);

    /* Over 64 MiB: 413, before a byte of it is read. The oracle takes no
     * body (1 KiB at most), so for one this far over it answers at once
     * and lets the connection close rather than read it: a client that
     * sends the body without waiting may see the reset before the answer
     * (common/httpd.c); one that asks first (Expect: 100-continue, as curl
     * does for large bodies) always reads the 413. */
    size_t big = ((size_t)64 << 20) + 1;
    char *body = calloc(1, big);
    assert_non_null(body);
    assert_int_equal(tl_http_with("POST", url, body, big, "application/json",
                                  "Expect: 100-continue", 30000, &r),
                     0);
    assert_int_equal(r.status, 413);
    j = json_loads(r.body, 0, NULL);
    assert_error(j, "payload_too_large");
    json_decref(j);
    tl_resp_free(&r);
    free(body);

    /* And the oracle still works. */
    uint64_t first;
    assert_int_equal(tl_oracle_next(&f->o, 1, &first), 0);
}

static void test_health_and_metrics(void **state)
{
    fixture *f = *state;
    assert_int_equal(tl_oracle_start(&f->o, f->data, 0), 0);
    uint64_t first;
    for (int i = 0; i < 5; i++)
        assert_int_equal(tl_oracle_next(&f->o, 10, &first), 0);

    long st;
    json_t *j = call(f, "GET", "/v1/health", &st);
    assert_int_equal(st, 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ok");
    json_decref(j);

    char url[256];
    snprintf(url, sizeof url, "%s/metrics", f->o.url);
    tl_resp r;
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 200);
    char ct[128];
    assert_non_null(tl_resp_header(&r, "Content-Type", ct, sizeof ct));
    assert_non_null(strstr(ct, "text/plain"));
    assert_true(tl_metric(r.body, "percolator_oracle_timestamps_total") == 50);
    assert_true(tl_metric(r.body, "percolator_oracle_requests_total") == 5);
    double hwm = tl_metric(r.body, "percolator_oracle_persisted_hwm");
    assert_true(hwm >= (double)(first + 9));
    assert_true(tl_metric(r.body, "percolator_oracle_fsyncs_total") >= 2);
    assert_true(tl_metric(r.body,
        "percolator_http_requests_total{route=\"POST /v1/timestamps\",status=\"200\"}") == 5);
    assert_non_null(strstr(r.body, "# TYPE percolator_http_request_seconds histogram"));
    tl_resp_free(&r);
}

/* Restarts, clean or not, continue above everything handed out before. */
static void test_restart_starts_above_everything_before(void **state)
{
    fixture *f = *state;
    uint64_t last = 0;
    for (int round = 0; round < 6; round++) {
        assert_int_equal(tl_oracle_start(&f->o, f->data, 0), 0);
        uint64_t first;
        assert_int_equal(tl_oracle_next(&f->o, 1, &first), 0);
        assert_true(first > last);
        assert_int_equal(tl_oracle_next(&f->o, 500, &first), 0);
        assert_true(first > last);
        last = first + 499;
        if (round % 2 == 0) {
            assert_int_equal(tl_oracle_stop(&f->o), 0); /* SIGTERM: exit 0 */
        } else {
            assert_int_equal(tl_kill9(f->o.pid), 0);
            f->o.pid = 0;
        }
    }
    /* The state file is the mark, in its documented format. */
    char path[700];
    snprintf(path, sizeof path, "%s/%s", f->data, HWM_STATE_FILE);
    size_t len;
    char *text = tl_read_file(path, &len);
    assert_non_null(text);
    uint64_t mark;
    assert_int_equal(hwm_parse(text, len, &mark), 0);
    assert_true(mark >= last);
    free(text);
}

static int start_expect_exit(fixture *f, char *log, size_t loglen)
{
    char listen[64];
    int port = tl_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    char logpath[700];
    snprintf(logpath, sizeof logpath, "%s/refused.log", f->dir);
    unlink(logpath);
    const char *args[] = {"--listen", listen, "--data-dir", f->data, NULL};
    pid_t pid = tl_spawn("percolator-oracle", args, NULL, logpath);
    assert_true(pid > 0);
    int rc = tl_wait_exit(pid, TL_STOP_MS);
    if (rc == -1)
        tl_stop(pid, 1000);
    char *text = tl_read_file(logpath, NULL);
    snprintf(log, loglen, "%s", text ? text : "");
    free(text);
    return rc;
}

static void test_corrupt_state_file_refuses_to_start(void **state)
{
    fixture *f = *state;
    /* First a real oracle writes a real mark. */
    assert_int_equal(tl_oracle_start(&f->o, f->data, 0), 0);
    uint64_t first;
    assert_int_equal(tl_oracle_next(&f->o, 1, &first), 0);
    assert_int_equal(tl_oracle_stop(&f->o), 0);

    char path[700];
    snprintf(path, sizeof path, "%s/%s", f->data, HWM_STATE_FILE);
    size_t len;
    char *good = tl_read_file(path, &len);
    assert_non_null(good);

    char flipped[128];
    snprintf(flipped, sizeof flipped, "%s", good);
    char *digit = strstr(flipped, "hwm=") + 4;
    *digit = *digit == '9' ? '1' : (char)(*digit + 1);   /* CRC no longer matches */
    const char *cases[] = {"", "garbage\n", flipped, "percolator-oracle-state v1 hwm=\n", NULL};
    size_t lens[] = {0, 8, strlen(flipped), 32, 0};
    for (int i = 0; cases[i]; i++) {
        assert_int_equal(tl_write_file(path, cases[i], lens[i]), 0);
        char log[4096];
        int rc = start_expect_exit(f, log, sizeof log);
        if (rc == 0 || rc == -1)
            fail_msg("case %d: oracle did not refuse to start (rc %d)", i, rc);
        if (!strstr(log, "corrupt"))
            fail_msg("case %d: no clear message; log: %s", i, log);
    }
    /* A truncated copy of a good file is corrupt too. */
    assert_int_equal(tl_write_file(path, good, len - 3), 0);
    char log[4096];
    assert_int_not_equal(start_expect_exit(f, log, sizeof log), 0);
    assert_non_null(strstr(log, "corrupt"));

    /* An unreadable state (a directory in its place) also stops start-up. */
    unlink(path);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_not_equal(start_expect_exit(f, log, sizeof log), 0);
    assert_non_null(strstr(log, "cannot start"));
    rmdir(path);

    /* Restoring the good file brings the oracle back above the old mark. */
    assert_int_equal(tl_write_file(path, good, len), 0);
    assert_int_equal(tl_oracle_start(&f->o, f->data, 0), 0);
    uint64_t again;
    assert_int_equal(tl_oracle_next(&f->o, 1, &again), 0);
    assert_true(again > first);
    free(good);
}

static void test_two_oracles_cannot_share_a_data_dir(void **state)
{
    fixture *f = *state;
    assert_int_equal(tl_oracle_start(&f->o, f->data, 0), 0);
    char log[4096];
    int rc = start_expect_exit(f, log, sizeof log);
    assert_true(rc > 0);
    assert_non_null(strstr(log, "in use"));
}

/* Timestamps stay below 2^53: near the end the oracle refuses, never wraps. */
static void test_timestamps_stay_below_2_pow_53(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkdir(f->data, 0755), 0);
    uint64_t top = (UINT64_C(1) << 53) - 1;
    char text[128], path[700];
    int n = hwm_format(top - 100, text, sizeof text);
    assert_true(n > 0);
    snprintf(path, sizeof path, "%s/%s", f->data, HWM_STATE_FILE);
    assert_int_equal(tl_write_file(path, text, (size_t)n), 0);

    assert_int_equal(tl_oracle_start(&f->o, f->data, 0), 0);
    uint64_t first;
    assert_int_equal(tl_oracle_next(&f->o, 50, &first), 0);
    assert_true(first == top - 99);
    assert_int_equal(tl_oracle_next(&f->o, 50, &first), 0);
    assert_true(first + 49 == top);
    long st;
    json_t *j = call(f, "POST", "/v1/timestamps", &st);
    assert_int_equal(st, 503);
    assert_error(j, "oracle_unavailable");
    json_decref(j);
}

static void test_flags_help_env_and_errors(void **state)
{
    fixture *f = *state;
    char logpath[700];
    snprintf(logpath, sizeof logpath, "%s/flags.log", f->dir);

    const char *help[] = {"--help", NULL};
    pid_t pid = tl_spawn("percolator-oracle", help, NULL, logpath);
    assert_int_equal(tl_wait_exit(pid, TL_STOP_MS), 0);
    char *text = tl_read_file(logpath, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "--listen"));
    assert_non_null(strstr(text, "PERCOLATOR_LISTEN"));
    assert_non_null(strstr(text, "127.0.0.1:8090"));
    assert_non_null(strstr(text, "--data-dir"));
    assert_non_null(strstr(text, "PERCOLATOR_DATA_DIR"));
    free(text);

    /* Bad flags and values: exit 2 with exactly one line. */
    static const char *const bad[][3] = {
        {"--bogus", NULL, NULL}, {"--listen", "nope", NULL}, {"--threads", "x", NULL},
        {"--listen", NULL, NULL}, {"--log-level", "loud", NULL}, {"stray", NULL, NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unlink(logpath);
        pid = tl_spawn("percolator-oracle", bad[i], NULL, logpath);
        int rc = tl_wait_exit(pid, TL_STOP_MS);
        if (rc != 2)
            fail_msg("%s: exit %d, want 2", bad[i][0], rc);
        text = tl_read_file(logpath, NULL);
        assert_non_null(text);
        char *nl = strchr(text, '\n');
        assert_non_null(nl);
        assert_true(nl[1] == '\0'); /* one line */
        free(text);
    }
    unlink(logpath);
    const char *envbad[] = {"PERCOLATOR_THREADS=many", NULL};
    pid = tl_spawn("percolator-oracle", NULL, envbad, logpath);
    assert_int_equal(tl_wait_exit(pid, TL_STOP_MS), 2);

    /* The environment twins work, and a flag wins over its twin. */
    int port = tl_free_port();
    char envlisten[64], envdir[700], url[64];
    snprintf(envlisten, sizeof envlisten, "PERCOLATOR_LISTEN=127.0.0.1:%d", port);
    snprintf(envdir, sizeof envdir, "PERCOLATOR_DATA_DIR=%s", f->data);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    const char *env[] = {envlisten, envdir, NULL};
    pid = tl_spawn("percolator-oracle", NULL, env, logpath);
    assert_int_equal(tl_wait_health(url, pid, TL_START_MS), 0);
    assert_int_equal(tl_stop(pid, TL_STOP_MS), 0);

    int port2 = tl_free_port();
    char listen2[64];
    snprintf(listen2, sizeof listen2, "127.0.0.1:%d", port2);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port2);
    const char *args[] = {"--listen", listen2, NULL};
    pid = tl_spawn("percolator-oracle", args, env, logpath);
    assert_int_equal(tl_wait_health(url, pid, TL_START_MS), 0);
    assert_int_equal(tl_stop(pid, TL_STOP_MS), 0);
}

/* Keep-alive: many requests over one client connection use one TCP
 * connection (guards against MHD answering "Connection: close"). */
static size_t sink(char *p, size_t s, size_t n, void *a)
{
    (void)p;
    (void)a;
    return s * n;
}

static void test_connections_are_kept_alive(void **state)
{
    fixture *f = *state;
    assert_int_equal(tl_oracle_start(&f->o, f->data, 0), 0);
    CURL *e = curl_easy_init();
    assert_non_null(e);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type:");
    char url[256];
    long total_connects = 0;
    for (int i = 0; i < 50; i++) {
        snprintf(url, sizeof url, "%s%s", f->o.url, i % 2 ? "/v1/health" : "/v1/timestamps?count=3");
        curl_easy_setopt(e, CURLOPT_URL, url);
        if (i % 2) {
            curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        } else {
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
        }
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
        assert_int_equal(curl_easy_perform(e), CURLE_OK);
        long code = 0, connects = 0;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects);
        assert_int_equal(code, 200);
        total_connects += connects;
    }
    assert_int_equal(total_connects, 1);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_timestamps_are_blocks_that_increase, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests_get_json_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health_and_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_starts_above_everything_before, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_state_file_refuses_to_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_oracles_cannot_share_a_data_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timestamps_stay_below_2_pow_53, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flags_help_env_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connections_are_kept_alive, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
