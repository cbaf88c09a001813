/*
 * test_cli.c — bin/percolator, the command-line client, against the real
 * oracle and service on loopback: each case runs the client as a child
 * process and checks its stdout, stderr and exit code (README "Command-line
 * client"), and, where it matters, what the service stored (read back with
 * plain HTTP, not with the client).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "svc_fixture.h"

static tl_stack stack;

/* Run bin/percolator against the stack with args (NULL-terminated) and
 * stdin; the result (call tl_run_free). --endpoint comes first. */
static tl_run_result cli_in(const char *in, const char *const args[])
{
    const char *argv[32] = {"--endpoint", stack.svc.url};
    int n = 2;
    for (int i = 0; args[i]; i++) {
        assert_true(n < 31);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    tl_run_result r;
    assert_int_equal(tl_run("percolator", argv, NULL, in, in ? strlen(in) : 0, 30000, &r), 0);
    return r;
}

#define CLI(...) cli_in(NULL, (const char *const[]){__VA_ARGS__, NULL})
#define CLI_STDIN(in, ...) cli_in(in, (const char *const[]){__VA_ARGS__, NULL})

/* Assert the exit code and stdout; print both streams on a mismatch. */
static void expect(tl_run_result *r, int status, const char *out)
{
    if (r->status != status || (out && strcmp(r->out, out) != 0))
        fprintf(stderr, "exit %d (want %d)\nstdout: [%s]\nwant:   [%s]\nstderr: [%s]\n",
                r->status, status, r->out, out ? out : "(any)", r->err);
    assert_int_equal(r->status, status);
    if (out)
        assert_string_equal(r->out, out);
    tl_run_free(r);
}

static int setup(void **state)
{
    (void)state;
    return tl_stack_start(&stack, NULL);
}

static int teardown(void **state)
{
    (void)state;
    return tl_stack_stop(&stack);
}

static bool is_number_line(const char *s)
{
    size_t n = strspn(s, "0123456789");
    return n > 0 && strcmp(s + n, "\n") == 0;
}

/* put prints the commit_ts; get prints the value; the key travels
 * percent-encoded whole: '/', spaces, non-ASCII and '?' stay in the key
 * (read back with the key encoded by hand), never make another path. */
static void put_get_round_trip_with_awkward_keys(void **state)
{
    (void)state;
    const char *key = "dir/a b/\xc3\xa9t\xc3\xa9?x=1&encoding=base64#f";
    tl_run_result r = CLI("put", key, "caf\xc3\xa9 au lait");
    assert_true(is_number_line(r.out));
    expect(&r, 0, NULL);
    r = CLI("get", key);
    expect(&r, 0, "caf\xc3\xa9 au lait\n");

    json_t *j = tl_expect(&stack, "GET",
                          "/v1/kv/dir%2Fa%20b%2F%C3%A9t%C3%A9%3Fx%3D1%26encoding%3Dbase64%23f", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(j, "key")), key);
    json_decref(j);
    j = tl_expect(&stack, "GET", "/v1/kv/dir", NULL, 404); /* no shorter key was written */
    json_decref(j);

    /* after "--", arguments that start with '-' are a key and a value */
    r = CLI("put", "--", "-k", "-1");
    expect(&r, 0, NULL);
    r = CLI("get", "--", "-k");
    expect(&r, 0, "-1\n");

    /* --json prints the service's reply; a value from stdin is taken as is */
    r = CLI_STDIN("line one\nline two\n", "put", "multi", "-");
    expect(&r, 0, NULL);
    r = CLI("--json", "get", "multi");
    json_t *got = json_loads(r.out, 0, NULL);
    assert_non_null(got);
    assert_string_equal(json_string_value(json_object_get(got, "value")), "line one\nline two\n");
    json_decref(got);
    expect(&r, 0, NULL);
}

/* Binary keys and values in base64, on the command line and from stdin
 * with line breaks (as `base64` writes them). */
static void binary_values_with_base64(void **state)
{
    (void)state;
    tl_run_result r = CLI("--base64", "put", "AP8=", "3q2+7w==");
    expect(&r, 0, NULL);
    r = CLI("get", "AP8=", "--base64");
    expect(&r, 0, "3q2+7w==\n");
    json_t *j = tl_expect(&stack, "GET", "/v1/kv/AP8%3D?encoding=base64", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(j, "value")), "3q2+7w==");
    json_decref(j);

    r = CLI_STDIN("AAEC\nAwQF\n", "--base64", "put", "AP8=", "-");
    expect(&r, 0, NULL);
    r = CLI("--base64", "get", "AP8=");
    expect(&r, 0, "AAECAwQF\n");

    /* The key's bytes are 00 ff: not text, so a text get is refused (400
     * asks for base64): a usage error, with the service's reason. */
    r = CLI("--base64", "put", "aGk=", "/w==");
    expect(&r, 0, NULL);
    r = CLI("get", "hi");
    assert_non_null(strstr(r.err, "bad_request"));
    expect(&r, 2, "");
    /* A value that is not UTF-8 cannot be sent as text. */
    r = CLI("put", "bin", "\xff\xfe");
    assert_non_null(strstr(r.err, "--base64"));
    expect(&r, 2, "");
}

/* del, then get: exit 1 with the service's not_found on stderr. */
static void del_then_get_is_not_found(void **state)
{
    (void)state;
    tl_run_result r = CLI("put", "gone", "soon");
    expect(&r, 0, NULL);
    r = CLI("del", "gone");
    assert_true(is_number_line(r.out));
    expect(&r, 0, NULL);
    r = CLI("get", "gone");
    assert_non_null(strstr(r.err, "404 not_found"));
    expect(&r, 1, "");
}

/* Seven keys under a prefix, three a page: every key once, in order, and
 * nothing outside the prefix; --limit stops early. */
static void scan_follows_pages(void **state)
{
    (void)state;
    const char *keys[] = {"s/1", "s/2", "s/3", "s/4", "s/5", "s/6", "s/7", "s0", "r"};
    for (int i = 0; i < 9; i++) {
        tl_run_result r = CLI("put", keys[i], keys[i]);
        expect(&r, 0, NULL);
    }
    tl_run_result r = CLI("scan", "--prefix", "s/", "--page-size", "3");
    expect(&r, 0, "s/1\ts/1\ns/2\ts/2\ns/3\ts/3\ns/4\ts/4\ns/5\ts/5\ns/6\ts/6\ns/7\ts/7\n");
    r = CLI("scan", "--prefix", "s/", "--page-size", "3", "--limit", "5");
    expect(&r, 0, "s/1\ts/1\ns/2\ts/2\ns/3\ts/3\ns/4\ts/4\ns/5\ts/5\n");
    r = CLI("scan", "--start", "s/6", "--end", "s0", "--page-size", "1", "--json");
    expect(&r, 0, NULL);
    r = CLI("scan", "--start", "s/6", "--end", "s0", "--page-size", "1");
    expect(&r, 0, "s/6\ts/6\ns/7\ts/7\n");
}

/* txn: the reply printed; a failed condition is exit 1, and nothing is
 * written; the document may come on stdin. put --if-commit-ts too. */
static void txn_and_conditions(void **state)
{
    (void)state;
    tl_run_result r = CLI("txn", "{\"writes\":[{\"key\":\"t/a\",\"value\":\"1\"}]}");
    assert_non_null(strstr(r.out, "\"commit_ts\":"));
    expect(&r, 0, NULL);
    r = CLI("txn", "{\"conditions\":[{\"key\":\"t/a\",\"value\":\"2\"}],"
                   "\"writes\":[{\"key\":\"t/a\",\"value\":\"3\"}]}");
    assert_non_null(strstr(r.err, "condition_failed"));
    expect(&r, 1, "");
    r = CLI_STDIN("{\"conditions\":[{\"key\":\"t/a\",\"value\":\"1\"}],\"reads\":[\"t/a\"]}", "txn");
    assert_non_null(strstr(r.out, "\"value\":\"1\""));
    expect(&r, 0, NULL);
    r = CLI("txn", "[1,2]");
    expect(&r, 2, "");

    r = CLI("put", "t/a", "4", "--if-commit-ts", "1");
    assert_non_null(strstr(r.err, "condition_failed"));
    expect(&r, 1, "");
    r = CLI("get", "t/a");
    expect(&r, 0, "1\n");
    r = CLI("put", "t/new", "x", "--if-commit-ts", "0");
    expect(&r, 0, NULL);
    /* Compare-and-delete: refused on a stale commit_ts, done on the latest. */
    r = CLI("del", "t/new", "--if-commit-ts", "1");
    assert_non_null(strstr(r.err, "condition_failed"));
    expect(&r, 1, "");
    r = CLI("--json", "get", "t/new");
    json_t *j = json_loads(r.out, 0, NULL);
    assert_non_null(j);
    char latest[32];
    snprintf(latest, sizeof latest, "%lld", (long long)json_integer_value(json_object_get(j, "commit_ts")));
    json_decref(j);
    expect(&r, 0, NULL);
    r = CLI("del", "t/new", "--if-commit-ts", latest);
    expect(&r, 0, NULL);
    r = CLI("get", "t/new");
    expect(&r, 1, "");
}

/* Usage errors are exit 2 and name the problem. */
static void usage_errors(void **state)
{
    (void)state;
    static const char *const cases[][5] = {
        {"frobnicate", NULL}, {"get", NULL}, {"get", "a", "b", NULL}, {"put", "a", "b", "--ts"},
        {"put", "a", "b", "--wat"}, {"scan", "--prefix", "a", "--start"},
        {"get", "a", "--ts", "-1"}, {"del", "", NULL}, {"watch-claim", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_run_result r = cli_in(NULL, cases[i]);
        assert_true(r.err_len > 0);
        expect(&r, 2, "");
    }
    tl_run_result r = CLI("scan", "--prefix", "a", "--start", "b");
    assert_non_null(strstr(r.err, "--prefix"));
    expect(&r, 2, "");
    r = CLI("--help");
    assert_non_null(strstr(r.out, "exit codes"));
    expect(&r, 0, NULL);
}

/* region split cuts the region holding the key, and the table that
 * follows shows both parts; a key that starts a region already is the
 * server's refusal (exit 3); a key is one argument. A value written
 * before the split reads the same after it. */
static void region_split_and_list(void **state)
{
    (void)state;
    tl_run_result r = CLI("put", "reg/b", "1");
    expect(&r, 0, NULL);
    r = CLI("region", "split", "reg/a");
    assert_non_null(strstr(r.out, "ID     EPOCH  START"));
    assert_non_null(strstr(r.out, "(start)                  reg/a"));
    assert_non_null(strstr(r.out, "reg/a                    (end)"));
    expect(&r, 0, NULL);
    r = CLI("region", "split", "reg/a");
    assert_non_null(strstr(r.err, "409 split_refused"));
    expect(&r, 3, "");
    r = CLI("region", "split");
    expect(&r, 2, "");
    r = CLI("region", "split", "a", "b");
    expect(&r, 2, "");
    r = CLI("region", "list");
    size_t rows = 0;
    for (const char *p = r.out; (p = strchr(p, '\n')) != NULL; p++)
        rows++;
    assert_int_equal(rows, 3); /* a heading and two regions */
    expect(&r, 0, NULL);
    r = CLI("get", "reg/b");
    expect(&r, 0, "1\n");
}

/* Nothing listening: exit 4, also after retries. */
static void unreachable_endpoint_is_exit_4(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", tl_free_port());
    const char *args[] = {"--endpoint", url, "--retries", "2", "get", "k", NULL};
    tl_run_result r;
    assert_int_equal(tl_run("percolator", args, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
    assert_non_null(strstr(r.err, "cannot reach"));
    expect(&r, 4, "");
    /* PERCOLATOR_ENDPOINT is the default endpoint */
    char env[96];
    snprintf(env, sizeof env, "PERCOLATOR_ENDPOINT=%s", url);
    const char *env_args[] = {"get", "k", NULL}, *envs[] = {env, NULL};
    assert_int_equal(tl_run("percolator", env_args, envs, NULL, 0, TL_REQUEST_MS, &r), 0);
    expect(&r, 4, "");
}

/* `percolator status` on a single service and its oracle: a row each,
 * role "single", no Raft figures ("-"), and the data dir's size; with
 * --json the health answers, store_bytes in each. */
/* Until url's /v1/health says store_bytes > 0 (at most 10 s): the figure
 * is a walk of the data dir done once a second, and an oracle's dir holds
 * its state file only once it handed out a timestamp. */
static void wait_store_bytes(const char *url)
{
    char health[200];
    snprintf(health, sizeof health, "%s/v1/health", url);
    for (int i = 0; i < 100; i++) {
        tl_resp resp;
        json_int_t bytes = 0;
        if (tl_http("GET", health, NULL, 0, NULL, TL_REQUEST_MS, &resp) == 0 &&
            resp.status == 200) {
            json_t *h = json_loads(resp.body, 0, NULL);
            bytes = json_integer_value(json_object_get(h, "store_bytes"));
            json_decref(h);
        }
        tl_resp_free(&resp);
        if (bytes > 0)
            return;
        usleep(100 * 1000);
    }
    fail_msg("%s never reported store_bytes > 0", url);
}

static void status_of_single_nodes(void **state)
{
    (void)state;
    char ts[200];
    tl_resp resp;
    snprintf(ts, sizeof ts, "%s/v1/timestamps?count=1", stack.oracle.url);
    assert_int_equal(tl_http("POST", ts, NULL, 0, NULL, TL_REQUEST_MS, &resp), 0);
    assert_int_equal(resp.status, 200); /* the oracle's state file exists from here */
    tl_resp_free(&resp);
    wait_store_bytes(stack.svc.url);
    wait_store_bytes(stack.oracle.url);
    char eps[160];
    snprintf(eps, sizeof eps, "%s,%s", stack.svc.url, stack.oracle.url);
    const char *args[] = {"--endpoints", eps, "status", NULL};
    tl_run_result r;
    assert_int_equal(tl_run("percolator", args, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 0);
    char *save = NULL, *line = strtok_r(r.out, "\n", &save);
    assert_non_null(line);
    assert_true(strncmp(line, "ENDPOINT ", 9) == 0);
    assert_non_null(strstr(line, " ID  STATUS  ROLE "));
    assert_non_null(strstr(line, " TERM  APPLIED  LAG  STORE SIZE  LEADER"));
    const char *urls[] = {stack.svc.url, stack.oracle.url};
    for (int i = 0; i < 2; i++) {
        line = strtok_r(NULL, "\n", &save);
        assert_non_null(line);
        char ep[64], id[8], st[16], role[16], mem[8], term[8], applied[8], lag[8], num[16],
            unit[8], leader[8];
        assert_int_equal(sscanf(line, "%63s %7s %15s %15s %7s %7s %7s %7s %15s %7s %7s", ep, id,
                                st, role, mem, term, applied, lag, num, unit, leader),
                         11);
        assert_string_equal(ep, urls[i]);
        assert_string_equal(st, "ok");
        assert_string_equal(role, "single");
        assert_string_equal(applied, "-");
        assert_string_equal(lag, "-");
        assert_true(atof(num) > 0);
        assert_true(strcmp(unit, "B") == 0 || strcmp(unit, "KiB") == 0 ||
                    strcmp(unit, "MiB") == 0 || strcmp(unit, "GiB") == 0);
        assert_string_equal(leader, "-");
    }
    assert_null(strtok_r(NULL, "\n", &save));
    tl_run_free(&r);

    const char *json_args[] = {"--endpoints", eps, "--json", "status", NULL};
    assert_int_equal(tl_run("percolator", json_args, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 0);
    json_t *list = json_loads(r.out, 0, NULL);
    assert_int_equal(json_array_size(list), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *h = json_array_get(list, i);
        assert_string_equal(json_string_value(json_object_get(h, "endpoint")), urls[i]);
        assert_true(json_integer_value(json_object_get(h, "store_bytes")) > 0);
        assert_null(json_object_get(h, "lag")); /* no leader among them */
    }
    json_decref(list);
    tl_run_free(&r);
}

/* A service that asks for a token: without one exit 6 (401), with
 * --token-file or PERCOLATOR_TOKEN_FILE it works; a bad file is exit 2. */
static void token_required(void **state)
{
    (void)state;
    tl_stack st;
    char *dir = tl_mkdtemp("cli-token");
    assert_non_null(dir);
    char tok[600], bad[600];
    snprintf(tok, sizeof tok, "%s/token", dir);
    snprintf(bad, sizeof bad, "%s/bad", dir);
    assert_int_equal(tl_write_file(tok, "0123456789abcdef0123\n", 21), 0);
    assert_int_equal(tl_write_file(bad, "short\n", 6), 0);
    const char *extra[] = {"--auth-token-file", tok, NULL};
    assert_int_equal(tl_stack_start(&st, extra), 0);

    const char *no_token[] = {"--endpoint", st.svc.url, "put", "k", "v", NULL};
    tl_run_result r;
    assert_int_equal(tl_run("percolator", no_token, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
    assert_non_null(strstr(r.err, "401 unauthorized"));
    expect(&r, 6, "");
    const char *with[] = {"--endpoint", st.svc.url, "--token-file", tok, "put", "k", "v", NULL};
    assert_int_equal(tl_run("percolator", with, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
    expect(&r, 0, NULL);
    char env[700];
    snprintf(env, sizeof env, "PERCOLATOR_TOKEN_FILE=%s", tok);
    const char *get[] = {"--endpoint", st.svc.url, "get", "k", NULL}, *envs[] = {env, NULL};
    assert_int_equal(tl_run("percolator", get, envs, NULL, 0, TL_REQUEST_MS, &r), 0);
    expect(&r, 0, "v\n");
    /* status needs no token, but the store's size goes only with it. */
    const char *status[] = {"--endpoint", st.svc.url, "--json", "status", NULL, NULL, NULL};
    for (int with = 0; with < 2; with++) {
        if (with) {
            status[4] = "--token-file";
            status[5] = tok;
        }
        assert_int_equal(tl_run("percolator", status, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
        assert_int_equal(r.status, 0);
        json_t *list = json_loads(r.out, 0, NULL);
        json_t *size = json_object_get(json_array_get(list, 0), "store_bytes");
        assert_int_equal(size != NULL, with);
        json_decref(list);
        tl_run_free(&r);
    }
    const char *badf[] = {"--endpoint", st.svc.url, "--token-file", bad, "get", "k", NULL};
    assert_int_equal(tl_run("percolator", badf, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
    expect(&r, 2, "");

    assert_int_equal(tl_stack_stop(&st), 0);
    assert_int_equal(tl_rmtree(dir), 0);
    free(dir);
}

typedef struct committer {
    tl_stack *st;
    char path[160];
    long status;
} committer;

static void *commit_thread(void *arg)
{
    committer *c = arg;
    c->status = tl_try_call(c->st, "POST", c->path, NULL, NULL);
    return NULL;
}

/* A live lock on a key (a session's commit stalled after its prewrites by
 * a failpoint): a scan and a blind put wait --lock-wait-ms and get 409
 * key_locked: exit 3. */
static void conflict_is_exit_3(void **state)
{
    (void)state;
    const char *extra[] = {"--one-pc", "off", "--lock-wait-ms", "200", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    assert_int_equal(tl_service_stop(&st), 0);
    snprintf(st.svc.env[0], sizeof st.svc.env[0], "PERCOLATOR_FAILPOINT=after_prewrites=sleep:3000");
    st.svc.nenv = 1;
    assert_int_equal(tl_service_start(&st), 0);

    committer c = {.st = &st};
    json_t *j = tl_expect(&st, "POST", "/v1/txns", NULL, 201);
    const char *id = json_string_value(json_object_get(j, "id"));
    assert_non_null(id);
    char path[160];
    snprintf(path, sizeof path, "/v1/txns/%s/keys/locked", id);
    json_decref(tl_expect(&st, "PUT", path, "{\"value\":\"v\"}", 204));
    snprintf(c.path, sizeof c.path, "/v1/txns/%s/commit", id);
    json_decref(j);
    pthread_t th;
    assert_int_equal(tl_thread_start(&th, commit_thread, &c), 0);
    /* Wait (bounded) until the lock is there. */
    size_t locks = 0;
    for (int i = 0; i < 200 && locks == 0; i++) {
        j = tl_expect(&st, "GET", "/v1/locks", NULL, 200);
        locks = json_array_size(json_object_get(j, "locks"));
        json_decref(j);
        if (locks == 0)
            usleep(10000);
    }
    assert_true(locks > 0);

    /* A scan reads a fresh snapshot, above the lock's start: it waits on
     * the lock, then 409 key_locked. (A latest get does not wait: it reads
     * the latest committed version.) */
    const char *scan[] = {"--endpoint", st.svc.url, "scan", "--prefix", "lock", NULL};
    tl_run_result r;
    assert_int_equal(tl_run("percolator", scan, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
    if (strstr(r.err, "409 key_locked") == NULL)
        fprintf(stderr, "scan: exit %d, stderr [%s]\n", r.status, r.err);
    assert_non_null(strstr(r.err, "409 key_locked"));
    expect(&r, 3, "");
    const char *put[] = {"--endpoint", st.svc.url, "put", "locked", "w", NULL};
    assert_int_equal(tl_run("percolator", put, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
    if (strstr(r.err, "409 key_locked") == NULL)
        fprintf(stderr, "put: exit %d, stderr [%s]\n", r.status, r.err);
    assert_non_null(strstr(r.err, "409 key_locked"));
    expect(&r, 3, "");

    assert_int_equal(tl_thread_join(th, NULL), 0);
    assert_int_equal(c.status, 200);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static double pending(const char *observer)
{
    json_t *j = tl_expect(&stack, "GET", "/v1/observers", NULL, 200);
    double n = -1;
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(j, "observers"), i, o)
        if (strcmp(json_string_value(json_object_get(o, "name")), observer) == 0)
            n = (double)json_integer_value(json_object_get(o, "pending"));
    json_decref(j);
    return n;
}

/* watch-claim prints the change and acknowledges it (nothing pending
 * after); --no-ack rolls the claim back, so the change is claimed again;
 * nothing to claim is exit 1, an unknown observer too. */
static void watch_claim(void **state)
{
    (void)state;
    json_decref(tl_expect(&stack, "PUT", "/v1/observers/cli-w", "{\"prefix\":\"w/\"}", 201));
    tl_run_result r = CLI("put", "w/a", "first");
    expect(&r, 0, NULL);
    r = CLI("watch-claim", "cli-w", "--wait-ms", "3000");
    expect(&r, 0, "w/a\tfirst\n");
    assert_true(pending("cli-w") == 0);
    r = CLI("watch-claim", "cli-w", "--wait-ms", "200");
    assert_non_null(strstr(r.err, "nothing to claim"));
    expect(&r, 1, "");

    r = CLI("put", "w/b", "second");
    expect(&r, 0, NULL);
    r = CLI("watch-claim", "cli-w", "--no-ack", "--wait-ms", "3000");
    expect(&r, 0, "w/b\tsecond\n");
    assert_true(pending("cli-w") == 1);
    r = CLI("del", "w/b");
    expect(&r, 0, NULL);
    r = CLI("watch-claim", "cli-w", "--count", "5", "--wait-ms", "300", "--json");
    json_t *c = json_loads(r.out, 0, NULL); /* one line: the delete */
    assert_non_null(c);
    assert_string_equal(json_string_value(json_object_get(c, "key")), "w/b");
    assert_true(json_is_null(json_object_get(c, "value")));
    json_decref(c);
    expect(&r, 0, NULL);
    assert_true(pending("cli-w") == 0);

    r = CLI("watch-claim", "no-such-observer", "--wait-ms", "0");
    assert_non_null(strstr(r.err, "404"));
    expect(&r, 1, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(put_get_round_trip_with_awkward_keys),
        TL_TEST(binary_values_with_base64),
        TL_TEST(del_then_get_is_not_found),
        TL_TEST(scan_follows_pages),
        TL_TEST(txn_and_conditions),
        TL_TEST(usage_errors),
        TL_TEST(unreachable_endpoint_is_exit_4),
        TL_TEST(status_of_single_nodes),
        TL_TEST(token_required),
        TL_TEST(conflict_is_exit_3),
        TL_TEST(watch_claim),
        TL_TEST(region_split_and_list),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
