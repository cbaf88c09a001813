/*
 * test_httpd.c — common/httpd in-process: routing and {param} decoding,
 * query parameters, the body rules (413, 415), the error envelope, extra
 * headers, keep-alive, metrics and the graceful stop.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "httpd.h"
#include "testlib.h"
#include "timeutil.h"

/* A request's time bound for this test's clients: generous, so that a
 * loaded machine (a CPU hog beside `make test`) cannot make one time out;
 * a server that works answers in milliseconds anyway. */
#define CLIENT_MS 30000

/* Wait (bounded, 60 s) until *flag is set; false if it never was. */
static bool await_flag(_Atomic int *flag)
{
    for (uint64_t t0 = time_mono_ms(); !atomic_load(flag);) {
        if (time_mono_ms() - t0 > 60000)
            return false;
        time_sleep_ms(5);
    }
    return true;
}

static _Atomic int slow_started, slow_done;

/* GET /v1/things/{id}/keys/{key}: echoes what it was given. */
static void h_echo(httpd_req *req, void *ctx)
{
    (void)ctx;
    size_t idlen, keylen, qlen = 0;
    const char *id = httpd_param(req, "id", &idlen);
    const char *key = httpd_param(req, "key", &keylen);
    const char *q = httpd_query(req, "q", &qlen);
    json_t *j = json_pack("{s:s%,s:s%,s:s%,s:b,s:s}", "id", id, idlen, "key", key, keylen,
                          "q", q ? q : "", qlen, "flag", httpd_query(req, "flag", NULL) != NULL,
                          "route", httpd_route_name(req));
    httpd_reply_json(req, 200, j);
}

/* GET /v1/files/{path...}: echoes the rest of the path. */
static void h_rest(httpd_req *req, void *ctx)
{
    (void)ctx;
    size_t len;
    const char *p = httpd_param(req, "path", &len);
    httpd_reply_json(req, 200,
                     json_pack("{s:s%,s:s}", "path", p, len, "route", httpd_route_name(req)));
}

/* POST /v1/things: parses the JSON body. */
static void h_post(httpd_req *req, void *ctx)
{
    (void)ctx;
    json_t *body = httpd_body_json(req);
    if (!body)
        return; /* 400 already answered */
    size_t len;
    httpd_body(req, &len);
    httpd_reply_json(req, 201, json_pack("{s:O,s:i}", "got", body, "bytes", (int)len));
    json_decref(body);
}

static void h_conflict(httpd_req *req, void *ctx)
{
    (void)ctx;
    httpd_add_header(req, "Retry-After", "2");
    httpd_reply_error(req, 409, "write_conflict", json_pack("{s:s,s:i}", "key", "k1", "conflict_commit_ts", 7),
                      "conflict on %s", "k1");
}

static void h_silent(httpd_req *req, void *ctx)
{
    (void)req;
    (void)ctx; /* forgets to reply */
}

static void h_text(httpd_req *req, void *ctx)
{
    (void)ctx;
    httpd_reply_text(req, 200, "application/yaml", "a: 1\n", 5);
}

static void h_slow(httpd_req *req, void *ctx)
{
    (void)ctx;
    atomic_store(&slow_started, 1);
    time_sleep_ms(400);
    atomic_store(&slow_done, 1);
    httpd_reply_empty(req, 204);
}

/* POST /v1/deferred?mode=M: the fast handler answers on the event thread
 * (reply), leaves it to the worker (worker), or defers it to a thread of
 * its own that answers 202 after 300 ms (defer) or gives it back to the
 * worker (dispatch). */
static void h_deferred_worker(httpd_req *req, void *ctx)
{
    (void)ctx;
    httpd_reply_json(req, 200, json_pack("{s:s}", "where", "worker"));
}

static _Atomic int deferred_started, deferred_done;

static void *deferred_thread(void *arg)
{
    httpd_req *req = arg;
    const char *mode = httpd_query(req, "mode", NULL);
    time_sleep_ms(300);
    if (strcmp(mode, "dispatch") == 0) {
        httpd_dispatch(req);
    } else {
        httpd_reply_json(req, 202, json_pack("{s:s}", "where", "deferred"));
        atomic_store(&deferred_done, 1);
        httpd_finish(req);
    }
    return NULL;
}

static void f_deferred(httpd_req *req, void *ctx)
{
    (void)ctx;
    const char *mode = httpd_query(req, "mode", NULL);
    pthread_t t;
    if (mode == NULL || strcmp(mode, "worker") == 0)
        return;
    if (strcmp(mode, "reply") == 0) {
        httpd_reply_json(req, 200, json_pack("{s:s}", "where", "event"));
        return;
    }
    assert_true(httpd_defer(req));
    assert_false(httpd_defer(req)); /* once only */
    assert_int_equal(pthread_create(&t, NULL, deferred_thread, req), 0);
    pthread_detach(t);
    atomic_store(&deferred_started, 1);
}

static const httpd_route routes[] = {
    {.method = "POST", .pattern = "/v1/deferred", .handler = h_deferred_worker, .fast = f_deferred},
    {.method = "GET", .pattern = "/v1/things/{id}/keys/{key}", .handler = h_echo},
    {.method = "POST", .pattern = "/v1/things", .handler = h_post},
    {.method = "PUT", .pattern = "/v1/things/{id}/keys/{key}", .handler = h_conflict},
    {.method = "GET", .pattern = "/v1/silent", .handler = h_silent},
    {.method = "GET", .pattern = "/v1/files/{path...}", .handler = h_rest},
    {.method = "GET", .pattern = "/openapi.yaml", .handler = h_text},
    {.method = "POST", .pattern = "/v1/slow", .handler = h_slow},
};

/* ---- the authorize hook ---- */

static atomic_int posts_run;

static void h_count_post(httpd_req *req, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&posts_run, 1);
    httpd_reply_empty(req, 204);
}

static const char *need_key(const httpd_req *req, void *ctx)
{
    (void)ctx;
    const char *k = httpd_header(req, "X-Key");
    return k != NULL && strcmp(k, "yes") == 0 ? NULL : "send X-Key: yes";
}

static void test_authorize_refuses_before_the_handler(void **state)
{
    (void)state;
    static const httpd_route auth_routes[] = {
        {.method = "POST", .pattern = "/v1/things", .handler = h_count_post},
        {.method = "GET", .pattern = "/open", .handler = h_text, .public = true},
    };
    httpd_config cfg = {.listen = "127.0.0.1:0", .threads = 1, .routes = auth_routes,
                        .nroutes = 2, .max_body = 1 << 20, .authorize = need_key};
    httpd *h;
    char err[256], url[96];
    assert_int_equal(httpd_start(&cfg, &h, err, sizeof err), 0);
    size_t big = 512 << 10;
    char *body = malloc(big);
    assert_non_null(body);
    memset(body, ' ', big);
    body[0] = '{';
    body[big - 1] = '}';
    tl_resp r;
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/things", httpd_port(h));
    /* The client waits for "100 Continue" before sending its body, as
     * curl does for large bodies: the 401 comes instead and not a byte of
     * the body crosses. (A client that pushes the body unasked meets a
     * closed connection, and may lose the 401 to the kernel's reset:
     * test_service_limits checks that case on a raw socket.) */
    assert_int_equal(tl_http_with("POST", url, body, big, "application/json",
                                  "Expect: 100-continue", CLIENT_MS, &r), 0);
    assert_int_equal(r.status, 401);
    char v[64];
    assert_non_null(tl_resp_header(&r, "WWW-Authenticate", v, sizeof v));
    assert_string_equal(v, "Bearer");
    assert_non_null(strstr(r.body, "send X-Key: yes"));
    tl_resp_free(&r);
    assert_int_equal(atomic_load(&posts_run), 0); /* the handler never ran */
    assert_int_equal(tl_http_with("POST", url, "{}", 2, "application/json", "X-Key: yes",
                                  CLIENT_MS, &r), 0);
    assert_int_equal(r.status, 204);
    tl_resp_free(&r);
    assert_int_equal(atomic_load(&posts_run), 1);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/open", httpd_port(h));
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, CLIENT_MS, &r), 0);
    assert_int_equal(r.status, 200); /* public: no key needed */
    tl_resp_free(&r);
    free(body);
    httpd_stop(h, 1000);
}

typedef struct fixture {
    httpd *h;
    metrics_registry *m;
    char base[64];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->m = metrics_registry_new();
    httpd_config cfg = {.listen = "127.0.0.1:0", .threads = 2, .routes = routes,
                        .nroutes = sizeof routes / sizeof routes[0], .metrics = f->m,
                        .max_body = 1 << 20};
    char err[256];
    if (httpd_start(&cfg, &f->h, err, sizeof err) != 0) {
        fprintf(stderr, "httpd_start: %s\n", err);
        return -1;
    }
    snprintf(f->base, sizeof f->base, "http://127.0.0.1:%u", httpd_port(f->h));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    httpd_stop(f->h, 2000);
    metrics_registry_free(f->m);
    free(f);
    return 0;
}

static json_t *req(fixture *f, const char *method, const char *path, const char *body,
                   const char *ctype, long *status, tl_resp *keep)
{
    char url[1024];
    snprintf(url, sizeof url, "%s%s", f->base, path);
    tl_resp r;
    assert_int_equal(tl_http(method, url, body, body ? strlen(body) : 0, ctype, CLIENT_MS, &r), 0);
    *status = r.status;
    json_t *j = json_loadb(r.body, r.len, JSON_ALLOW_NUL, NULL);
    if (keep)
        *keep = r;
    else
        tl_resp_free(&r);
    return j;
}

static const char *err_code(json_t *j)
{
    return json_string_value(json_object_get(json_object_get(j, "error"), "code"));
}

static void test_params_are_percent_decoded(void **state)
{
    fixture *f = *state;
    long st;
    json_t *j = req(f, "GET", "/v1/things/t%201/keys/a%2Fb%25c?q=x+y%26z&flag", NULL, NULL, &st, NULL);
    assert_int_equal(st, 200);
    assert_string_equal(json_string_value(json_object_get(j, "id")), "t 1");
    assert_string_equal(json_string_value(json_object_get(j, "key")), "a/b%c");
    assert_string_equal(json_string_value(json_object_get(j, "q")), "x y&z");
    assert_true(json_is_true(json_object_get(j, "flag")));
    assert_string_equal(json_string_value(json_object_get(j, "route")), "GET /v1/things/{id}/keys/{key}");
    json_decref(j);

    /* A NUL byte inside a key survives with its length. */
    j = req(f, "GET", "/v1/things/x/keys/a%00b", NULL, NULL, &st, NULL);
    assert_int_equal(st, 200);
    json_t *k = json_object_get(j, "key");
    assert_int_equal(json_string_length(k), 3);
    assert_memory_equal(json_string_value(k), "a\0b", 3);
    json_decref(j);

    j = req(f, "GET", "/v1/things/x/keys/bad%zz", NULL, NULL, &st, NULL);
    assert_int_equal(st, 400);
    assert_string_equal(err_code(j), "bad_request");
    json_decref(j);
}

/* A last {name...} takes the rest of the path, raw slashes and all. */
static void test_a_rest_parameter_spans_segments(void **state)
{
    fixture *f = *state;
    long st;
    static const struct {
        const char *path, *want;
    } cases[] = {
        {"/v1/files/a", "a"},
        {"/v1/files/a/b", "a/b"},
        {"/v1/files/a%2Fb/c%20d", "a/b/c d"},
        {"/v1/files/a//b/", "a//b/"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = req(f, "GET", cases[i].path, NULL, NULL, &st, NULL);
        assert_int_equal(st, 200);
        assert_string_equal(json_string_value(json_object_get(j, "path")), cases[i].want);
        /* Labelled as the OpenAPI documents write the path: {path}. */
        assert_string_equal(json_string_value(json_object_get(j, "route")),
                            "GET /v1/files/{path}");
        json_decref(j);
    }
    json_decref(req(f, "GET", "/v1/files/", NULL, NULL, &st, NULL));
    assert_int_equal(st, 404); /* it must not be empty */
    json_decref(req(f, "GET", "/v1/files", NULL, NULL, &st, NULL));
    assert_int_equal(st, 404);
}

static void test_unknown_paths_and_methods(void **state)
{
    fixture *f = *state;
    long st;
    tl_resp r;
    json_t *j = req(f, "GET", "/v1/nothing", NULL, NULL, &st, NULL);
    assert_int_equal(st, 404);
    assert_string_equal(err_code(j), "not_found");
    json_decref(j);
    j = req(f, "GET", "/v1/things/x/keys/", NULL, NULL, &st, NULL); /* empty param */
    assert_int_equal(st, 404);
    json_decref(j);
    j = req(f, "DELETE", "/v1/things/x/keys/y", NULL, NULL, &st, &r);
    assert_int_equal(st, 405);
    assert_string_equal(err_code(j), "method_not_allowed");
    char allow[64];
    assert_non_null(tl_resp_header(&r, "Allow", allow, sizeof allow));
    assert_string_equal(allow, "GET, HEAD, PUT");
    tl_resp_free(&r);
    json_decref(j);
}

static void test_body_rules(void **state)
{
    fixture *f = *state;
    long st;
    json_t *j = req(f, "POST", "/v1/things", "{\"a\":1}", "application/json; charset=utf-8", &st, NULL);
    assert_int_equal(st, 201);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "got"), "a")), 1);
    json_decref(j);

    j = req(f, "POST", "/v1/things", "{\"a\":1}", "text/plain", &st, NULL);
    assert_int_equal(st, 415);
    assert_string_equal(err_code(j), "unsupported_media_type");
    json_decref(j);
    j = req(f, "POST", "/v1/things", "{\"a\":1}", "application/jsonx", &st, NULL);
    assert_int_equal(st, 415);
    json_decref(j);

    j = req(f, "POST", "/v1/things", "{nope", "application/json", &st, NULL);
    assert_int_equal(st, 400);
    assert_string_equal(err_code(j), "bad_request");
    json_decref(j);
    j = req(f, "POST", "/v1/things", NULL, NULL, &st, NULL);
    assert_int_equal(st, 400);
    json_decref(j);

    /* This server's limit is 1 MiB. */
    size_t big = (1 << 20) + 10;
    char *body = malloc(big + 1);
    memset(body, ' ', big);
    body[big] = '\0';
    j = req(f, "POST", "/v1/things", body, "application/json", &st, NULL);
    assert_int_equal(st, 413);
    assert_string_equal(err_code(j), "payload_too_large");
    json_decref(j);
    /* Just under the limit is accepted (whitespace around an array). */
    body[(1 << 20) - 10] = '\0';
    memcpy(body + 100, "[1]", 3);
    j = req(f, "POST", "/v1/things", body, "application/json", &st, NULL);
    assert_int_equal(st, 201);
    json_decref(j);
    free(body);
}

static void test_error_envelope_headers_and_text(void **state)
{
    fixture *f = *state;
    long st;
    tl_resp r;
    json_t *j = req(f, "PUT", "/v1/things/a/keys/b", "{}", "application/json", &st, &r);
    assert_int_equal(st, 409);
    json_t *e = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "write_conflict");
    assert_string_equal(json_string_value(json_object_get(e, "message")), "conflict on k1");
    assert_string_equal(json_string_value(json_object_get(e, "key")), "k1");
    assert_int_equal(json_integer_value(json_object_get(e, "conflict_commit_ts")), 7);
    char v[32];
    assert_string_equal(tl_resp_header(&r, "Retry-After", v, sizeof v), "2");
    assert_string_equal(tl_resp_header(&r, "Content-Type", v, sizeof v), "application/json");
    tl_resp_free(&r);
    json_decref(j);

    j = req(f, "GET", "/v1/silent", NULL, NULL, &st, NULL);
    assert_int_equal(st, 500);
    assert_string_equal(err_code(j), "internal");
    json_decref(j);

    j = req(f, "GET", "/openapi.yaml", NULL, NULL, &st, &r);
    assert_int_equal(st, 200);
    assert_string_equal(r.body, "a: 1\n");
    assert_string_equal(tl_resp_header(&r, "Content-Type", v, sizeof v), "application/yaml");
    tl_resp_free(&r);
    assert_null(j);
}

static size_t sink(char *p, size_t s, size_t n, void *a)
{
    (void)p;
    (void)a;
    return s * n;
}

static void test_keep_alive_and_metrics(void **state)
{
    fixture *f = *state;
    CURL *e = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s/v1/things/a/keys/b", f->base);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
    long connects = 0;
    for (int i = 0; i < 20; i++) {
        assert_int_equal(curl_easy_perform(e), CURLE_OK);
        long c;
        curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &c);
        connects += c;
    }
    curl_easy_cleanup(e);
    assert_int_equal(connects, 1);

    buf out = BUF_INIT;
    assert_int_equal(metrics_render(f->m, &out), 0);
    assert_true(tl_metric(out.data, "percolator_http_requests_total{route=\"GET /v1/things/{id}/keys/{key}\",status=\"200\"}") == 20);
    assert_true(tl_metric(out.data, "percolator_http_request_seconds_count{route=\"GET /v1/things/{id}/keys/{key}\"}") == 20);
    buf_free(&out);
}

static void *slow_client(void *arg)
{
    fixture *f = arg;
    long st;
    tl_resp r;
    char url[128];
    snprintf(url, sizeof url, "%s/v1/slow", f->base);
    tl_http("POST", url, NULL, 0, NULL, CLIENT_MS, &r);
    st = r.status;
    tl_resp_free(&r);
    return (void *)(intptr_t)st;
}

static void test_stop_finishes_requests_in_flight(void **state)
{
    fixture *f = *state;
    atomic_store(&slow_started, 0);
    atomic_store(&slow_done, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_client, f), 0);
    /* The stop must come while the handler runs (it sleeps 400 ms): wait
     * until it has started, however long a loaded machine takes. */
    assert_true(await_flag(&slow_started));
    httpd_stop(f->h, CLIENT_MS);
    f->h = NULL;
    assert_int_equal(atomic_load(&slow_done), 1);
    void *st;
    pthread_join(t, &st);
    assert_int_equal((intptr_t)st, 204);
}

static void test_fast_handlers_reply_defer_or_hand_on(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *mode, *where;
        long status;
    } cases[] = {{"reply", "event", 200},
                 {"worker", "worker", 200},
                 {"defer", "deferred", 202},
                 {"dispatch", "worker", 200}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64];
        long st;
        snprintf(path, sizeof path, "/v1/deferred?mode=%s", cases[i].mode);
        json_t *j = req(f, "POST", path, NULL, NULL, &st, NULL);
        assert_int_equal(st, cases[i].status);
        assert_string_equal(json_string_value(json_object_get(j, "where")), cases[i].where);
        json_decref(j);
    }
}

static void *deferred_client(void *arg)
{
    fixture *f = arg;
    tl_resp r;
    char url[128];
    snprintf(url, sizeof url, "%s/v1/deferred?mode=defer", f->base);
    tl_http("POST", url, NULL, 0, NULL, CLIENT_MS, &r);
    long st = r.status;
    tl_resp_free(&r);
    return (void *)(intptr_t)st;
}

static void test_stop_waits_for_deferred_requests(void **state)
{
    fixture *f = *state;
    atomic_store(&deferred_started, 0);
    atomic_store(&deferred_done, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, deferred_client, f), 0);
    /* Stop once the request is deferred (its thread answers 300 ms later),
     * not after a fixed nap a loaded machine can outlast. */
    assert_true(await_flag(&deferred_started));
    /* No grace at all: the deferred request still comes back first (MHD
     * must not stop with a connection suspended). */
    httpd_stop(f->h, 0);
    f->h = NULL;
    assert_int_equal(atomic_load(&deferred_done), 1);
    void *st;
    pthread_join(t, &st);
    assert_int_equal((intptr_t)st, 202);
}

/* Is reply (NUL-terminated) one whole answer: its headers and the
 * Content-Length bytes of body after them (none to a HEAD)? */
static bool whole_reply(const char *reply, size_t len, bool head)
{
    const char *end = strstr(reply, "\r\n\r\n");
    if (end == NULL)
        return false;
    const char *te = strcasestr(reply, "\r\nTransfer-Encoding: chunked");
    if (te != NULL && te < end && !head)
        return len >= 5 && strcmp(reply + len - 5, "0\r\n\r\n") == 0;
    const char *cl = strcasestr(reply, "\r\nContent-Length:");
    size_t want = cl != NULL && cl < end && !head ? strtoul(cl + 17, NULL, 10) : 0;
    return len >= (size_t)(end + 4 - reply) + want;
}

/* Send raw bytes, get the raw reply: read until it is whole or the server
 * closes the connection (not until a timeout, which a loaded machine
 * could reach first, or which would make every answer cost its length). */
static int raw(fixture *f, const char *req, char *out, size_t cap)
{
    int fd = tl_dial(NULL, httpd_port(f->h));
    assert_true(fd >= 0);
    assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    size_t got = 0;
    uint64_t t0 = time_mono_ms();
    out[0] = '\0';
    while (got + 1 < cap && !whole_reply(out, got, strncmp(req, "HEAD ", 5) == 0) &&
           time_mono_ms() - t0 < CLIENT_MS) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        out[got] = '\0';
    }
    close(fd);
    assert_true(got > 0);
    return tl_raw_status(out);
}

/* The JSON body of a raw reply: it must parse (valid UTF-8 included). */
static json_t *raw_json(const char *reply)
{
    const char *body = strstr(reply, "\r\n\r\n");
    assert_non_null(body);
    json_error_t e;
    json_t *j = json_loads(body + 4, 0, &e);
    if (j == NULL)
        fprintf(stderr, "not JSON (%s): %s\n", e.text, body + 4);
    assert_non_null(j);
    return j;
}

/* Bytes that are not UTF-8 in what an error message quotes are escaped,
 * never a 500 (the review's fuzzing found 712 such requests). */
static void test_error_messages_escape_bytes_that_are_not_utf8(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(raw(f, "GET /v1/nothing\xff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                         out, sizeof out), 404);
    json_t *j = raw_json(out);
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(j, "error"),
                                                             "message")), "\\xFF"));
    json_decref(j);
    /* The 404 message quotes 100 bytes of the path: cut inside a
     * two-byte character, the half left is escaped. */
    char req[512], path[160];
    memset(path, 'a', 98);
    snprintf(path + 98, sizeof path - 98, "\xc3\xa9\xc3\xa9");
    snprintf(req, sizeof req, "GET /%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    assert_int_equal(raw(f, req, out, sizeof out), 404);
    json_decref(raw_json(out));
    /* A method with such a byte: refused, 4xx, whoever refuses it. */
    int st = raw(f, "G\xffT /v1/things HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", out,
                 sizeof out);
    assert_true(st >= 400 && st < 500);
}

/* Ambiguous body lengths are refused (request smuggling), as are JSON
 * objects that name a key twice. */
static void test_ambiguous_requests_are_refused(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(raw(f, "POST /v1/things HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: 2\r\nContent-Length: 7\r\n\r\n{}",
                         out, sizeof out), 400);
    json_decref(raw_json(out));
    assert_int_equal(raw(f, "POST /v1/things HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                         out, sizeof out), 400);
    json_decref(raw_json(out));
    /* The same length twice is not ambiguous. */
    assert_int_equal(raw(f, "POST /v1/things HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: 2\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                         out, sizeof out), 201);
    long st;
    json_t *j = req(f, "POST", "/v1/things", "{\"a\":1,\"a\":2}", "application/json", &st, NULL);
    assert_int_equal(st, 400);
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(j, "error"),
                                                             "message")), "duplicate"));
    json_decref(j);
}

/* HEAD on a GET route: the GET's status and headers, no body. */
static void test_head_answers_like_get(void **state)
{
    fixture *f = *state;
    char out[4096];
    assert_int_equal(raw(f, "HEAD /v1/things/a/keys/b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                         out, sizeof out), 200);
    const char *end = strstr(out, "\r\n\r\n");
    assert_non_null(end);
    assert_string_equal(end + 4, ""); /* no body */
    assert_non_null(strcasestr(out, "Content-Type: application/json"));
    assert_int_equal(raw(f, "HEAD /v1/things HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                         out, sizeof out), 405);
    assert_non_null(strstr(out, "Allow: POST"));
    /* The Allow header of a GET route names HEAD too. */
    long st;
    tl_resp r;
    json_decref(req(f, "DELETE", "/v1/things/x/keys/y", NULL, NULL, &st, &r));
    char allow[64];
    assert_non_null(tl_resp_header(&r, "Allow", allow, sizeof allow));
    assert_string_equal(allow, "GET, HEAD, PUT");
    tl_resp_free(&r);
}

/* A client that stalls in the middle of its body does not hold up a stop
 * (the review saw "11 request(s) still running" and an 11.8 s stop). */
static void test_stop_does_not_wait_for_stalled_bodies(void **state)
{
    fixture *f = *state;
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = tl_dial(NULL, httpd_port(f->h));
        assert_true(fds[i] >= 0);
        static const char half[] = "POST /v1/things HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                   "application/json\r\nContent-Length: 100\r\n\r\n{\"a\":";
        assert_int_equal(send(fds[i], half, sizeof half - 1, MSG_NOSIGNAL), (ssize_t)sizeof half - 1);
    }
    /* The server has the three connections (a loaded machine may take a
     * while to accept them), then a moment to read what they sent. */
    double open = 0;
    for (uint64_t t = time_mono_ms(); time_mono_ms() - t < 60000; time_sleep_ms(10)) {
        buf out = BUF_INIT;
        assert_int_equal(metrics_render(f->m, &out), 0);
        open = tl_metric(out.data, "percolator_http_connections_open");
        buf_free(&out);
        if (open == 3)
            break;
    }
    assert_true(open == 3);
    time_sleep_ms(200);
    /* A grace far longer than any stop takes, even on a loaded machine:
     * a stop that waited for the stalled bodies would take all of it. */
    uint64_t t0 = time_mono_ms();
    httpd_stop(f->h, 60000);
    f->h = NULL;
    uint64_t took = time_mono_ms() - t0;
    fprintf(stderr, "stop with 3 stalled bodies took %llu ms\n", (unsigned long long)took);
    assert_true(took < 30000); /* not the grace period: nothing was being answered */
    for (int i = 0; i < 3; i++)
        close(fds[i]);
}

static void test_listen_parsing(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    socklen_t len;
    char err[128];
    assert_int_equal(httpd_parse_listen("127.0.0.1:8090", &ss, &len, err, sizeof err), 0);
    assert_int_equal(httpd_parse_listen("[::1]:80", &ss, &len, err, sizeof err), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(httpd_parse_listen(":8080", &ss, &len, err, sizeof err), 0);
    assert_int_equal(httpd_parse_listen("127.0.0.1", &ss, &len, err, sizeof err), -1);
    assert_int_equal(httpd_parse_listen("127.0.0.1:99999", &ss, &len, err, sizeof err), -1);
    assert_int_equal(httpd_parse_listen("127.0.0.1:x", &ss, &len, err, sizeof err), -1);
    assert_int_equal(httpd_parse_listen("", &ss, &len, err, sizeof err), -1);
    char out[16];
    assert_int_equal(httpd_percent_decode("a%41+", 5, out, true), 3);
    assert_string_equal(out, "aA ");
    assert_int_equal(httpd_percent_decode("%4", 2, out, false), -1);
    assert_int_equal(httpd_percent_decode("%", 1, out, false), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_authorize_refuses_before_the_handler),
        cmocka_unit_test_setup_teardown(test_params_are_percent_decoded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_rest_parameter_spans_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_paths_and_methods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_envelope_headers_and_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive_and_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_finishes_requests_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fast_handlers_reply_defer_or_hand_on, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_waits_for_deferred_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_messages_escape_bytes_that_are_not_utf8, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ambiguous_requests_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_answers_like_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_does_not_wait_for_stalled_bodies, setup, teardown),
        cmocka_unit_test(test_listen_parsing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
