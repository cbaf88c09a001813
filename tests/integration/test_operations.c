/*
 * test_operations.c — what an operator sees, with the real programs:
 *
 *  - --version on both programs;
 *  - JSON logs (--log-format json): every line is one JSON object; the
 *    access log (--access-log) has method, path, route, status, duration,
 *    bytes and the request id; X-Request-Id is kept when the client sends
 *    one and made up otherwise, and echoed either way; the route is
 *    labelled "METHOD path", in the access log and the metrics alike;
 *  - /metrics of both programs has percolator_build_info and process_*;
 *  - WiredTiger's own messages are lines of the service's log, in its
 *    format: with --log-format json, a second service on a data dir in use
 *    writes nothing but JSON lines, WiredTiger's lock error among them;
 *  - a busy port is named in the error, and a program whose --listen or
 *    raft port is busy exits 1 before it touches its data dir;
 *  - `make run` (scripts/run.sh) exits 1 when a program cannot start (make
 *    itself then exits 2, "Error 1"), and 0 after a SIGTERM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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
                assert_string_equal(json_string_value(json_object_get(j, "route")),
                                    "PUT /v1/kv/{key}");
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
    /* The metrics label the route as the access log does (one scheme,
     * "METHOD path" as the OpenAPI document writes it). */
    const char *put = "percolator_http_requests_total{route=\"PUT /v1/kv/{key}\",status=\"200\"}";
    const char *get = "percolator_http_requests_total{route=\"GET /v1/kv/{key}\",status=\"200\"}";
    assert_true(tl_service_metric(&st, put) == 1);
    assert_true(tl_service_metric(&st, get) == 1);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void metrics_tell_the_build_and_the_process(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    const char *bases[] = {st.svc.url, st.oracle.url};
    for (int i = 0; i < 2; i++) {
        assert_true(tl_metric_at(bases[i], "percolator_build_info{version=\"" PERCOLATOR_VERSION "\"}") == 1);
        double rss = tl_metric_at(bases[i], "process_resident_memory_bytes");
        double fds = tl_metric_at(bases[i], "process_open_fds");
        double cpu = tl_metric_at(bases[i], "process_cpu_seconds_total");
        double start = tl_metric_at(bases[i], "process_start_time_seconds");
        print_message("%s: rss %.0f bytes, %.0f fds, %.2f s CPU\n", bases[i], rss, fds, cpu);
        assert_true(rss > 1e6);
        assert_true(fds >= 3 && fds < 10000);
        assert_true(cpu >= 0);
        assert_true(start > 1.6e9); /* after 2020: a real clock reading */
        assert_true(tl_metric_at(bases[i], "process_max_fds") >= fds);
    }
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* A second service on the data dir of a running one: WiredTiger refuses
 * the lock, and says so through the service's log. */
static void wiredtiger_messages_go_through_the_log(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    char listen[64], out[700];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", tl_free_port());
    snprintf(out, sizeof out, "%s/second.log", st.dir);
    const char *json[] = {"--listen", listen, "--data-dir", st.svc.data, "--oracle",
                          st.oracle.url, "--log-format", "json", NULL};
    assert_int_equal(run_to_end("percolator-service", json, out), 1);

    /* Every line is one JSON object; WiredTiger's error is one of them. */
    char *text = tl_read_file(out, NULL);
    assert_non_null(text);
    int lines = 0;
    bool wt_lock = false, store = false;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        if (j == NULL)
            fail_msg("a line that is not JSON (%s): %s", e.text, line);
        lines++;
        const char *msg = json_string_value(json_object_get(j, "msg"));
        const char *level = json_string_value(json_object_get(j, "level"));
        assert_non_null(msg);
        assert_non_null(level);
        assert_non_null(json_string_value(json_object_get(j, "ts")));
        if (strstr(msg, "__posix_file_lock") != NULL && strstr(msg, "WiredTiger.lock") != NULL) {
            wt_lock = true;
            assert_string_equal(level, "error");
        }
        store = store || strstr(msg, "cannot open the store") != NULL;
        json_decref(j);
    }
    free(text);
    print_message("%d lines, all JSON\n", lines);
    assert_true(wt_lock);
    assert_true(store);

    /* In the text format the same message is a line of the log too: a
     * time and a level before WiredTiger's own text. */
    const char *plain[] = {"--listen", listen, "--data-dir", st.svc.data, "--oracle",
                           st.oracle.url, NULL};
    snprintf(out, sizeof out, "%s/third.log", st.dir); /* tl_spawn appends */
    assert_int_equal(run_to_end("percolator-service", plain, out), 1);
    text = tl_read_file(out, NULL);
    char *wt = strstr(text, "__posix_file_lock");
    assert_non_null(wt);
    char *bol = wt;
    while (bol > text && bol[-1] != '\n')
        bol--;
    assert_true(strncmp(bol, "20", 2) == 0); /* 2026-...Z */
    char *level = strstr(bol, "Z ERROR [");
    assert_true(level != NULL && level < wt);
    free(text);
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

/* A listening socket of the test's on a loopback port: the port is busy
 * while fd is open. */
static int hold_port(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Entries of a directory but . and ..; -1 if it cannot be read. */
static int entries(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* A busy --listen port, or this member's raft port, stops either program
 * with exit 1 and the port named, before it makes, opens or locks its data
 * dir: a service's (made beforehand) stays empty, an oracle's is not made. */
static void a_busy_port_stops_a_program_before_its_data(void **state)
{
    (void)state;
    char *dir = tl_mkdtemp("busy");
    int port, held = hold_port(&port);
    char busy[32], free1[32], free2[32], peers[128], want[128];
    snprintf(busy, sizeof busy, "127.0.0.1:%d", port);
    snprintf(free1, sizeof free1, "127.0.0.1:%d", tl_free_port());
    snprintf(free2, sizeof free2, "127.0.0.1:%d", tl_free_port());
    /* Member 1's raft address is the busy port (loopback: no peer TLS). */
    snprintf(peers, sizeof peers, "1=%s,2=127.0.0.1:%d,3=127.0.0.1:%d", busy, tl_free_port(),
             tl_free_port());
    snprintf(want, sizeof want, "cannot listen on %s: Address already in use", busy);
    struct {
        const char *prog, *name, *listen;
        bool raft;
    } cases[] = {
        {"percolator-service", "svc-listen", busy, false},
        {"percolator-service", "svc-raft", free1, true},
        {"percolator-oracle", "oracle-listen", busy, false},
        {"percolator-oracle", "oracle-raft", free2, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool svc = strcmp(cases[i].prog, "percolator-service") == 0;
        char data[700], out[700];
        snprintf(data, sizeof data, "%s/%s", dir, cases[i].name);
        snprintf(out, sizeof out, "%s/%s.log", dir, cases[i].name);
        if (svc)
            assert_int_equal(mkdir(data, 0755), 0);
        const char *args[16] = {"--listen", cases[i].listen, "--data-dir", data};
        int n = 4;
        if (svc) {
            args[n++] = "--oracle";
            args[n++] = "http://127.0.0.1:1";
        }
        if (cases[i].raft) {
            args[n++] = "--raft-id";
            args[n++] = "1";
            args[n++] = "--raft-peers";
            args[n++] = peers;
        }
        args[n] = NULL;
        assert_int_equal(run_to_end(cases[i].prog, args, out), 1);
        char *text = tl_read_file(out, NULL);
        assert_non_null(text);
        if (strstr(text, want) == NULL)
            fail_msg("%s: no \"%s\" in: %s", cases[i].name, want, text);
        free(text);
        if (svc) {
            assert_int_equal(entries(data), 0); /* no WiredTiger file, no raft dir */
        } else {
            struct stat sb;
            assert_int_equal(stat(data, &sb), -1);
            assert_int_equal(errno, ENOENT);
        }
    }
    close(held);
    tl_rmtree(dir);
    free(dir);
}

/* `make run`: a second run with the same ports, or the same data dir,
 * exits 1 and says why (make reports it and exits 2); the first stops
 * with 0 on SIGTERM. */
static void make_run_fails_loudly(void **state)
{
    (void)state;
    struct stat sb;
    assert_int_equal(stat("scripts/run.sh", &sb), 0); /* run from the repository's root */
    char *dir = tl_mkdtemp("run");
    char oracle[64], service[64], data[600], env_o[96], env_s[96], env_d[640], log1[640], log2[640],
        log3[640];
    snprintf(oracle, sizeof oracle, "127.0.0.1:%d", tl_free_port());
    snprintf(service, sizeof service, "127.0.0.1:%d", tl_free_port());
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(env_o, sizeof env_o, "ORACLE_LISTEN=%s", oracle);
    snprintf(env_s, sizeof env_s, "SERVICE_LISTEN=%s", service);
    snprintf(env_d, sizeof env_d, "RUN_DATA_DIR=%s", data);
    snprintf(log1, sizeof log1, "%s/run1.log", dir);
    snprintf(log2, sizeof log2, "%s/run2.log", dir);
    snprintf(log3, sizeof log3, "%s/make.log", dir);
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

    /* The same through make (its prerequisites taken as made, -o: the
     * test does not build): make says the recipe's status and exits 2. */
    const char *make_args[] = {"--no-print-directory", "-o", "deps", "-o", "all", "run", NULL};
    const char *make_env[] = {env_o, env_s, env_d, "MAKEFLAGS=", "MAKELEVEL=", "MFLAGS=", NULL};
    second = tl_spawn("/usr/bin/make", make_args, make_env, log3);
    assert_true(second > 0);
    assert_int_equal(tl_wait_exit(second, 20000), 2);
    text = tl_read_file(log3, NULL);
    assert_non_null(strstr(text, "already answers"));
    assert_non_null(strstr(text, "run] Error 1"));
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
        TL_TEST(both_programs_tell_their_version),
        TL_TEST(json_logs_access_log_and_request_ids),
        TL_TEST(metrics_tell_the_build_and_the_process),
        TL_TEST(wiredtiger_messages_go_through_the_log),
        TL_TEST(a_busy_port_is_named),
        TL_TEST(a_busy_port_stops_a_program_before_its_data),
        TL_TEST(make_run_fails_loudly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
