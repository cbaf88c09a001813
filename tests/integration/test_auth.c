/*
 * test_auth.c — who may do what, with the real programs (the security
 * review's identity findings):
 *
 *  - a token file is taken whole or refused: a NUL, spaces, a token too
 *    short make the program refuse to start; a 4096-character token works;
 *    a token that differs in its last character, or is a prefix, is
 *    refused; the scheme "Bearer" is accepted in any case;
 *  - session ids cannot be guessed from what the service shows (its run
 *    id in /v1/health, another session's id);
 *  - the oracle asks for its token too, and the service sends it
 *    (--oracle-token-file).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svc_fixture.h"

static char *write_token(tl_stack *st, const char *name, const void *data, size_t len)
{
    char *path = malloc(700);
    assert_non_null(path);
    snprintf(path, 700, "%s/%s", st->dir, name);
    assert_int_equal(tl_write_file(path, data, len), 0);
    return path;
}

/* Start the service with only --auth-token-file path; its exit code if it
 * refused to start (0 if it is running: then it is stopped). */
static int service_with_token_file(tl_stack *st, const char *path)
{
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", tl_free_port());
    char data[700];
    snprintf(data, sizeof data, "%s/other", st->dir);
    const char *args[] = {"--listen", listen, "--data-dir", data, "--oracle", st->oracle.url,
                          "--auth-token-file", path, NULL};
    char log[700];
    snprintf(log, sizeof log, "%s/other.log", st->dir);
    pid_t pid = tl_spawn("percolator-service", args, NULL, log);
    assert_true(pid > 0);
    int rc = tl_wait_exit(pid, TL_STOP_MS);
    if (rc == -1) {
        tl_stop(pid, 5000);
        return 0;
    }
    char *text = tl_read_file(log, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "openssl rand -hex 32")); /* says how to make a good one */
    free(text);
    return rc;
}

static long get_with(tl_stack *st, const char *path, const char *header)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", st->svc.url, path);
    tl_resp r;
    assert_int_equal(tl_http_with("GET", url, NULL, 0, NULL, header, TL_REQUEST_MS, &r), 0);
    long status = r.status;
    tl_resp_free(&r);
    return status;
}

static void token_files_are_taken_whole_or_refused(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    /* "\0\n" made the empty bearer token valid; a token of spaces was
     * accepted; a short one is a password anyone can try. */
    static const struct {
        const char *name, *data;
        size_t len;
    } bad[] = {
        {"nul", "\0\n", 2},
        {"nul-inside", "abcdefgh\0ijklmnopqrst\n", 22},
        {"spaces", "                    \n", 21},
        {"two-lines", "abcdefghijklmnop\nqrstuvwxyz012345\n", 34},
        {"short", "abc123\n", 7},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *path = write_token(&st, bad[i].name, bad[i].data, bad[i].len);
        int rc = service_with_token_file(&st, path);
        print_message("token file '%s': the service exits %d\n", bad[i].name, rc);
        assert_int_equal(rc, 2);
        free(path);
    }

    /* A 4096-character token (the old limit cut a 4096-byte file). */
    char tok[4097 + 1];
    for (int i = 0; i < 4096; i++)
        tok[i] = "abcdefghijklmnopqrstuvwxyz0123456789-._~+/"[i % 42];
    tok[4096] = '\n';
    char *path = write_token(&st, "long", tok, 4097);
    tok[4096] = '\0';
    assert_int_equal(tl_service_stop(&st), 0);
    snprintf(st.svc.args[st.svc.nargs++], sizeof st.svc.args[0], "--auth-token-file");
    snprintf(st.svc.args[st.svc.nargs++], sizeof st.svc.args[0], "%s", path);
    assert_int_equal(tl_service_start(&st), 0);
    char *h = malloc(4200);
    assert_non_null(h);
    snprintf(h, 4200, "Authorization: Bearer %s", tok);
    assert_int_equal(get_with(&st, "/v1/kv?limit=1", h), 200);
    snprintf(h, 4200, "Authorization: bEARER   %s", tok); /* any case, any spaces */
    assert_int_equal(get_with(&st, "/v1/kv?limit=1", h), 200);
    snprintf(h, 4200, "Authorization: Bearer %.4095s", tok); /* a prefix */
    assert_int_equal(get_with(&st, "/v1/kv?limit=1", h), 401);
    snprintf(h, 4200, "Authorization: Bearer %.4095sX", tok); /* the last one differs */
    assert_int_equal(get_with(&st, "/v1/kv?limit=1", h), 401);
    snprintf(h, 4200, "Authorization: Bearer %sX", tok); /* one more */
    assert_int_equal(get_with(&st, "/v1/kv?limit=1", h), 401);
    assert_int_equal(get_with(&st, "/v1/kv?limit=1", "Authorization: Bearer "), 401);
    assert_int_equal(get_with(&st, "/v1/kv?limit=1", "Authorization: Basic eDp5"), 401);
    assert_int_equal(get_with(&st, "/v1/health", NULL), 200); /* health is public */
    free(h);
    free(path);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static bool matches(const char *re, const char *s)
{
    regex_t r;
    assert_int_equal(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
    bool ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

/* The review read a neighbour's uncommitted value and rolled its session
 * back by guessing "<run_id>-<n>" with the run id from /v1/health. */
static void session_ids_cannot_be_guessed(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    json_t *a = tl_expect(&st, "POST", "/v1/txns", "{}", 201);
    json_t *b = tl_expect(&st, "POST", "/v1/txns", "{}", 201);
    const char *ida = json_string_value(json_object_get(a, "id"));
    const char *idb = json_string_value(json_object_get(b, "id"));
    print_message("session ids: %s %s\n", ida, idb);
    /* A sequence and 128 bits from the kernel, in hex. */
    assert_true(matches("^[0-9a-f]{1,16}-[0-9a-f]{32}$", ida));
    assert_true(matches("^[0-9a-f]{1,16}-[0-9a-f]{32}$", idb));
    assert_string_not_equal(strchr(ida, '-'), strchr(idb, '-'));

    char path[256];
    snprintf(path, sizeof path, "/v1/txns/%s/keys/k", ida);
    json_decref(tl_expect(&st, "PUT", path, "{\"value\":\"secret\"}", 204));

    /* What the old ids were made of: the run id and a counter. A guessed
     * id is unknown, answered as any unknown id is (410 txn_expired:
     * nothing tells an id never issued from one that expired). */
    json_t *health = tl_expect(&st, "GET", "/v1/health", NULL, 200);
    const char *run = json_string_value(json_object_get(health, "run_id"));
    for (int n = 1; n <= 4; n++) {
        snprintf(path, sizeof path, "/v1/txns/%s-%x/keys/k", run ? run : "", n);
        json_decref(tl_expect(&st, "GET", path, NULL, 410));
        snprintf(path, sizeof path, "/v1/txns/%x/keys/k", n);
        json_decref(tl_expect(&st, "GET", path, NULL, 410));
    }
    /* The right sequence with one hex digit of the secret changed. */
    char forged[128];
    snprintf(forged, sizeof forged, "%s", ida);
    char *last = forged + strlen(forged) - 1;
    *last = *last == '0' ? '1' : '0';
    snprintf(path, sizeof path, "/v1/txns/%s/keys/k", forged);
    json_decref(tl_expect(&st, "GET", path, NULL, 410));
    snprintf(path, sizeof path, "/v1/txns/%s/rollback", forged);
    json_decref(tl_expect(&st, "POST", path, NULL, 410));

    /* The owner holds the value still. */
    snprintf(path, sizeof path, "/v1/txns/%s/keys/k", ida);
    json_t *v = tl_expect(&st, "GET", path, NULL, 200);
    assert_string_equal(json_string_value(json_object_get(v, "value")), "secret");
    json_decref(v);
    json_decref(health);
    json_decref(a);
    json_decref(b);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* Restart the stack's oracle with --auth-token-file path (same port, same data). */
static void oracle_with_token(tl_stack *st, const char *path)
{
    assert_int_equal(tl_oracle_stop(&st->oracle), 0);
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", st->oracle.port);
    const char *args[] = {"--listen", listen, "--data-dir", st->oracle.dir, "--auth-token-file",
                          path, NULL};
    st->oracle.pid = tl_spawn("percolator-oracle", args, NULL, st->oracle.log);
    assert_true(st->oracle.pid > 0);
    assert_int_equal(tl_wait_health(st->oracle.url, st->oracle.pid, TL_START_MS), 0);
}

static long oracle_post(tl_stack *st, const char *header)
{
    char url[128];
    snprintf(url, sizeof url, "%s/v1/timestamps?count=1", st->oracle.url);
    tl_resp r;
    assert_int_equal(tl_http_with("POST", url, NULL, 0, NULL, header, TL_REQUEST_MS, &r), 0);
    long status = r.status;
    tl_resp_free(&r);
    return status;
}

static void the_oracle_asks_for_its_token(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    static const char tok[] = "0123456789abcdef0123456789abcdef";
    char *path = write_token(&st, "oracle-token", tok, sizeof tok - 1);
    oracle_with_token(&st, path);

    assert_int_equal(oracle_post(&st, NULL), 401);
    assert_int_equal(oracle_post(&st, "Authorization: Bearer 0123456789abcdef0123456789abcdeX"),
                     401);
    assert_int_equal(oracle_post(&st, "Authorization: Bearer " "0123456789abcdef0123456789abcdef"),
                     200);
    /* The service without the token cannot commit: 503, and its log says why. */
    json_t *j = tl_expect(&st, "PUT", "/v1/kv/k", "{\"value\":\"1\"}", 503);
    assert_string_equal(tl_error_code(j), "oracle_unavailable");
    json_decref(j);
    char *log = tl_read_file(st.svc.log, NULL);
    assert_non_null(strstr(log, "oracle answered 401"));
    free(log);

    /* With --oracle-token-file it can. */
    assert_int_equal(tl_service_stop(&st), 0);
    snprintf(st.svc.args[st.svc.nargs++], sizeof st.svc.args[0], "--oracle-token-file");
    snprintf(st.svc.args[st.svc.nargs++], sizeof st.svc.args[0], "%s", path);
    assert_int_equal(tl_service_start(&st), 0);
    json_decref(tl_expect(&st, "PUT", "/v1/kv/k", "{\"value\":\"1\"}", 200));
    j = tl_expect(&st, "GET", "/v1/kv/k", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(j, "value")), "1");
    json_decref(j);
    free(path);
    assert_int_equal(tl_stack_stop(&st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(token_files_are_taken_whole_or_refused),
        TL_TEST(session_ids_cannot_be_guessed),
        TL_TEST(the_oracle_asks_for_its_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
