/*
 * test_operations.c — what an operator sees, with the real programs:
 *
 *  - --version on both programs;
 *  - JSON logs (--log-format json): every line is one JSON object; the
 *    access log (--access-log) has method, path, route, status, duration,
 *    bytes and the request id; X-Request-Id is kept when the client sends
 *    one and made up otherwise, and echoed either way;
 *  - /metrics of both programs has percolator_build_info and process_*;
 *  - a busy port is named in the error;
 *  - `make run` (scripts/run.sh) exits non-zero when a program cannot
 *    start, and 0 after a SIGTERM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "svc_fixture.h"
#include "version.h"

/* Run a program to its end; its exit status, its output in out (a file). */
static int run_to_end(const char *prog, const char *const args[], const char *out)
{
    pid_t pid = tl_spawn(prog, args, NULL, out);
    assert_true(pid > 0);
    return tl_wait_exit(pid, TL_STOP_MS);
}

static void both_programs_tell_their_version(void **state)
{
    (void)state;
    char *dir = tl_mkdtemp("version");
    char out[600], want[64];
    const char *args[] = {"--version", NULL};
    const char *progs[] = {"percolator-oracle", "percolator-service"};
    for (int i = 0; i < 2; i++) {
        snprintf(out, sizeof out, "%s/%d.out", dir, i);
        assert_int_equal(run_to_end(progs[i], args, out), 0);
        char *text = tl_read_file(out, NULL);
        snprintf(want, sizeof want, "%s %s\n", progs[i], PERCOLATOR_VERSION);
        assert_string_equal(text, want);
        free(text);
    }
    tl_rmtree(dir);
    free(dir);
}

/* The header value of a raw reply's header name ("" if absent). */
static void header_of(const tl_resp *r, const char *name, char *out, size_t cap)
{
    if (tl_resp_header(r, name, out, cap) == NULL)
        out[0] = '\0';
}

static void json_logs_access_log_and_request_ids(void **state)
{
    (void)state;
    const char *extra[] = {"--log-format", "json", "--access-log", "on", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    char url[128], id[160];
    snprintf(url, sizeof url, "%s/v1/kv/op%%2Fkey", st.svc.url);
    tl_resp r;
    assert_int_equal(tl_http_with("PUT", url, "{\"value\":\"1\"}", 13, "application/json",
                                  "X-Request-Id: client-id.42:x", 5000, &r), 0);
    assert_int_equal(r.status, 200);
    header_of(&r, "X-Request-Id", id, sizeof id);
    assert_string_equal(id, "client-id.42:x");
    tl_resp_free(&r);
    /* Without one, or with one that may not go into a header or a log
     * line as it is: one of ours. */
    assert_int_equal(tl_http_with("GET", url, NULL, 0, NULL, "X-Request-Id: bad id\"", TL_REQUEST_MS, &r),
                     0);
    assert_int_equal(r.status, 200);
    header_of(&r, "X-Request-Id", id, sizeof id);
    assert_true(strlen(id) > 0);
    assert_string_not_equal(id, "bad id\"");
    char made[160];
    snprintf(made, sizeof made, "%s", id);
    tl_resp_free(&r);

    /* Every line of the log is a JSON object; the access lines say what
     * was asked and answered. */
    char *log = tl_read_file(st.svc.log, NULL);
    assert_non_null(log);
    int lines = 0, access = 0;
    bool saw_client = false, saw_made = false;
    for (char *save = NULL, *line = strtok_r(log, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        if (j == NULL)
            fail_msg("a log line that is not JSON (%s): %s", e.text, line);
        lines++;
        assert_non_null(json_string_value(json_object_get(j, "ts")));
        assert_non_null(json_string_value(json_object_get(j, "level")));
        const char *msg = json_string_value(json_object_get(j, "msg"));
        assert_non_null(msg);
        if (strcmp(msg, "access") == 0) {
            access++;
            const char *rid = json_string_value(json_object_get(j, "request_id"));
            const char *method = json_string_value(json_object_get(j, "method"));
            if (strcmp(rid, "client-id.42:x") == 0) {
                saw_client = true;
                assert_string_equal(method, "PUT");
                assert_string_equal(json_string_value(json_object_get(j, "path")), "/v1/kv/op%2Fkey");
                assert_string_equal(json_string_value(json_object_get(j, "route")), "kv_put");
                assert_int_equal(json_integer_value(json_object_get(j, "status")), 200);
                assert_true(json_integer_value(json_object_get(j, "bytes")) > 0);
                assert_true(json_is_number(json_object_get(j, "duration_ms")));
            }
            saw_made = saw_made || strcmp(rid, made) == 0;
        }
        json_decref(j);
    }
    print_message("%d log lines, all JSON; %d access lines\n", lines, access);
    assert_true(saw_client);
    assert_true(saw_made);
    free(log);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* A sample from a program's /metrics (base URL); -1 if absent. */
static double metric_of(const char *base, const char *name)
{
    char url[128];
    snprintf(url, sizeof url, "%s/metrics", base);
    tl_resp r;
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 200);
    double v = tl_metric(r.body, name);
    tl_resp_free(&r);
    return v;
}

static void metrics_tell_the_build_and_the_process(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    const char *bases[] = {st.svc.url, st.oracle.url};
    for (int i = 0; i < 2; i++) {
        assert_true(metric_of(bases[i], "percolator_build_info{version=\"" PERCOLATOR_VERSION "\"}") == 1);
        double rss = metric_of(bases[i], "process_resident_memory_bytes");
        double fds = metric_of(bases[i], "process_open_fds");
        double cpu = metric_of(bases[i], "process_cpu_seconds_total");
        double start = metric_of(bases[i], "process_start_time_seconds");
        print_message("%s: rss %.0f bytes, %.0f fds, %.2f s CPU\n", bases[i], rss, fds, cpu);
        assert_true(rss > 1e6);
        assert_true(fds >= 3 && fds < 10000);
        assert_true(cpu >= 0);
        assert_true(start > 1.6e9); /* after 2020: a real clock reading */
        assert_true(metric_of(bases[i], "process_max_fds") >= fds);
    }
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void a_busy_port_is_named(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    char listen[64], data[700], out[700];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", st.svc.port);
    snprintf(data, sizeof data, "%s/second", st.dir);
    snprintf(out, sizeof out, "%s/second.log", st.dir);
    const char *args[] = {"--listen", listen, "--data-dir", data, NULL};
    assert_int_equal(run_to_end("percolator-oracle", args, out), 1);
    char *text = tl_read_file(out, NULL);
    char want[128];
    snprintf(want, sizeof want, "cannot listen on %s: Address already in use", listen);
    assert_non_null(strstr(text, want));
    assert_null(strstr(text, "port 0")); /* MHD's misleading message is gone */
    free(text);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* `make run`: a second run with the same ports, or the same data dir,
 * exits 1 and says why; the first stops with 0 on SIGTERM. */
static void make_run_fails_loudly(void **state)
{
    (void)state;
    struct stat sb;
    assert_int_equal(stat("scripts/run.sh", &sb), 0); /* run from the repository's root */
    char *dir = tl_mkdtemp("run");
    char oracle[64], service[64], data[600], env_o[96], env_s[96], env_d[640], log1[640], log2[640];
    snprintf(oracle, sizeof oracle, "127.0.0.1:%d", tl_free_port());
    snprintf(service, sizeof service, "127.0.0.1:%d", tl_free_port());
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(env_o, sizeof env_o, "ORACLE_LISTEN=%s", oracle);
    snprintf(env_s, sizeof env_s, "SERVICE_LISTEN=%s", service);
    snprintf(env_d, sizeof env_d, "RUN_DATA_DIR=%s", data);
    snprintf(log1, sizeof log1, "%s/run1.log", dir);
    snprintf(log2, sizeof log2, "%s/run2.log", dir);
    const char *args[] = {"scripts/run.sh", NULL};
    const char *env[] = {env_o, env_s, env_d, NULL};
    pid_t first = tl_spawn("/bin/bash", args, env, log1);
    assert_true(first > 0);
    char url[96];
    snprintf(url, sizeof url, "http://%s", service);
    assert_int_equal(tl_wait_health(url, first, TL_START_MS), 0);

    /* The same ports: refused before anything starts. */
    pid_t second = tl_spawn("/bin/bash", args, env, log2);
    assert_int_equal(tl_wait_exit(second, TL_STOP_MS), 1);
    char *text = tl_read_file(log2, NULL);
    assert_non_null(strstr(text, "already answers"));
    free(text);

    /* Other ports, the same data: the oracle cannot lock its data dir. */
    char env_o2[96], env_s2[96];
    snprintf(env_o2, sizeof env_o2, "ORACLE_LISTEN=127.0.0.1:%d", tl_free_port());
    snprintf(env_s2, sizeof env_s2, "SERVICE_LISTEN=127.0.0.1:%d", tl_free_port());
    const char *env2[] = {env_o2, env_s2, env_d, NULL};
    second = tl_spawn("/bin/bash", args, env2, log2);
    assert_int_equal(tl_wait_exit(second, TL_STOP_MS), 1);
    text = tl_read_file(log2, NULL);
    assert_non_null(strstr(text, "the oracle did not start"));
    assert_non_null(strstr(text, "LOCK"));
    free(text);

    assert_int_equal(tl_stop(first, TL_STOP_MS), 0);
    tl_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(both_programs_tell_their_version),
        cmocka_unit_test(json_logs_access_log_and_request_ids),
        cmocka_unit_test(metrics_tell_the_build_and_the_process),
        cmocka_unit_test(a_busy_port_is_named),
        cmocka_unit_test(make_run_fails_loudly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
