/*
 * test_service_api.c — percolator-service's API over real HTTP on loopback
 * (DESIGN §2, the spec): every route, every error code provoked for real,
 * base64 with binary keys, the session lifecycle with lease expiry, auth,
 * an oracle outage, and restarts that keep every acknowledged commit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "svc_fixture.h"
#include "timeutil.h"

static tl_stack ST;

/* Call and check the status; returns the JSON answer (may be NULL). */
static json_t *expect(const char *method, const char *path, const char *body, long want)
{
    long status = 0;
    json_t *j = tl_call(&ST, method, path, body, &status);
    if (status != want) {
        char *dump = j ? json_dumps(j, 0) : NULL;
        print_error("%s %s -> %ld, expected %ld: %s\n", method, path, status, want,
                    dump ? dump : "(no body)");
        free(dump);
    }
    assert_int_equal(status, want);
    return j;
}

/* Expect an error answer with this status and code; returns it. */
static json_t *expect_error(const char *method, const char *path, const char *body, long want,
                            const char *code)
{
    json_t *j = expect(method, path, body, want);
    assert_non_null(j);
    assert_string_equal(tl_error_code(j), code);
    assert_true(json_is_string(json_object_get(json_object_get(j, "error"), "message")));
    return j;
}

static void expect_error_free(const char *method, const char *path, const char *body,
                              long want, const char *code)
{
    json_decref(expect_error(method, path, body, want, code));
}

static const char *str(json_t *j, const char *field)
{
    const char *s = json_string_value(json_object_get(j, field));
    assert_non_null(s);
    return s;
}

static json_int_t num(json_t *j, const char *field)
{
    json_t *v = json_object_get(j, field);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

/* Begin a session; its id into id. */
static void begin(char *id, size_t len, const char *body)
{
    json_t *j = expect("POST", "/v1/txns", body, 201);
    snprintf(id, len, "%s", str(j, "id"));
    assert_true(num(j, "start_ts") > 0);
    assert_true(num(j, "lease_ttl_ms") > 0);
    json_decref(j);
}

/* Percent-encode a key for a URL path (everything but unreserved bytes). */
static void path_key(char *out, size_t cap, const char *key)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)key; *p && o + 4 < cap; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~')
            out[o++] = (char)*p;
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", *p);
    }
    out[o] = '\0';
}

static json_int_t put(const char *key, const char *value)
{
    char path[256], body[256], enc[200];
    path_key(enc, sizeof(enc), key);
    snprintf(path, sizeof(path), "/v1/kv/%s", enc);
    snprintf(body, sizeof(body), "{\"value\":\"%s\"}", value);
    json_t *j = expect("PUT", path, body, 200);
    json_int_t cts = num(j, "commit_ts");
    json_decref(j);
    return cts;
}

static int group_setup(void **state)
{
    (void)state;
    const char *extra[] = {"--max-value-bytes", "1024", "--lock-wait-ms", "200", NULL};
    return tl_stack_start(&ST, extra);
}

static int group_teardown(void **state)
{
    (void)state;
    return tl_stack_stop(&ST);
}

static void health_metrics_and_spec(void **state)
{
    (void)state;
    json_t *j = expect("GET", "/v1/health", NULL, 200);
    assert_string_equal(str(j, "status"), "ok");
    assert_string_equal(str(j, "oracle"), "ok");
    json_decref(j);
    tl_resp r;
    tl_call_raw(&ST, "GET", "/metrics", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "percolator_txn_committed_total"));
    assert_non_null(strstr(r.body, "percolator_oracle_client_batch_size"));
    tl_resp_free(&r);
    tl_call_raw(&ST, "GET", "/openapi.yaml", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "openapi:"));
    tl_resp_free(&r);
    /* A single node has no Raft group to list or change. */
    j = expect("GET", "/v1/members", NULL, 409);
    assert_string_equal(str(json_object_get(j, "error"), "code"), "not_in_a_group");
    json_decref(j);
    json_decref(expect("DELETE", "/v1/members/2", NULL, 409));
    j = expect("GET", "/v1/locks?limit=5", NULL, 200);
    assert_true(json_is_array(json_object_get(j, "locks")));
    json_decref(j);
}

static void single_put_get_delete(void **state)
{
    (void)state;
    json_int_t c1 = put("fruit", "apple");
    json_t *j = expect("GET", "/v1/kv/fruit", NULL, 200);
    assert_string_equal(str(j, "key"), "fruit");
    assert_string_equal(str(j, "value"), "apple");
    assert_int_equal(num(j, "commit_ts"), c1);
    json_decref(j);
    json_int_t c2 = put("fruit", "pear");
    assert_true(c2 > c1);
    /* A snapshot read below the second write sees the first. */
    char path[64];
    snprintf(path, sizeof(path), "/v1/kv/fruit?ts=%lld", (long long)c2 - 1);
    j = expect("GET", path, NULL, 200);
    assert_string_equal(str(j, "value"), "apple");
    json_decref(j);
    j = expect("DELETE", "/v1/kv/fruit", NULL, 200);
    assert_true(num(j, "commit_ts") > c2);
    json_decref(j);
    expect_error_free("GET", "/v1/kv/fruit", NULL, 404, "not_found");
}

/* Keys with raw slashes, as Consul users write them: the rest of the path
 * is the key, the same key as with %2F (404 "no such endpoint" before). */
static void keys_with_raw_slashes(void **state)
{
    (void)state;
    json_decref(expect("PUT", "/v1/kv/docs/readme", "{\"value\":\"raw\"}", 200));
    json_t *j = expect("GET", "/v1/kv/docs%2Freadme", NULL, 200);
    assert_string_equal(str(j, "key"), "docs/readme");
    assert_string_equal(str(j, "value"), "raw");
    json_decref(j);
    json_decref(expect("PUT", "/v1/kv/docs%2Fdeep/a/b//c", "{\"value\":\"deep\"}", 200));
    j = expect("GET", "/v1/kv?prefix=docs%2F", NULL, 200);
    json_t *items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "key")),
                        "docs/deep/a/b//c");
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "key")),
                        "docs/readme");
    json_decref(j);
    /* In a session too. */
    char id[64], path[256];
    begin(id, sizeof id, NULL);
    snprintf(path, sizeof path, "/v1/txns/%s/keys/docs/readme", id);
    json_decref(expect("PUT", path, "{\"value\":\"in a session\"}", 204));
    j = expect("GET", path, NULL, 200);
    assert_string_equal(str(j, "key"), "docs/readme");
    json_decref(j);
    snprintf(path, sizeof path, "/v1/txns/%s/commit", id);
    json_decref(expect("POST", path, NULL, 200));
    j = expect("GET", "/v1/kv/docs/readme", NULL, 200);
    assert_string_equal(str(j, "value"), "in a session");
    json_decref(j);
    json_decref(expect("DELETE", "/v1/kv/docs/readme", NULL, 200));
    json_decref(expect("DELETE", "/v1/kv/docs/deep/a/b//c", NULL, 200));
    expect_error_free("GET", "/v1/kv/docs/readme", NULL, 404, "not_found");
}

static void compare_and_set(void **state)
{
    (void)state;
    /* 0 means "must not exist". */
    json_t *j = expect("PUT", "/v1/kv/cas", "{\"value\":\"v1\",\"if_commit_ts\":0}", 200);
    json_int_t c1 = num(j, "commit_ts");
    json_decref(j);
    j = expect_error("PUT", "/v1/kv/cas", "{\"value\":\"x\",\"if_commit_ts\":0}", 409,
                     "condition_failed");
    assert_string_equal(str(json_object_get(j, "error"), "key"), "cas");
    json_decref(j);
    char body[128];
    snprintf(body, sizeof(body), "{\"value\":\"v2\",\"if_commit_ts\":%lld}", (long long)c1);
    json_decref(expect("PUT", "/v1/kv/cas", body, 200));
    /* The same condition again is stale now. */
    expect_error_free("PUT", "/v1/kv/cas", body, 409, "condition_failed");
    j = expect("GET", "/v1/kv/cas", NULL, 200);
    assert_string_equal(str(j, "value"), "v2");
    json_decref(j);
}

static void session_lifecycle(void **state)
{
    (void)state;
    char id[64], path[256];
    put("s1", "before");
    begin(id, sizeof(id), NULL);
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/s1", id);
    json_t *j = expect("GET", path, NULL, 200);
    assert_string_equal(str(j, "value"), "before");
    json_decref(j);
    assert_null(expect("PUT", path, "{\"value\":\"mine\"}", 204));
    /* Own writes first; nobody else sees them before the commit. */
    j = expect("GET", path, NULL, 200);
    assert_string_equal(str(j, "value"), "mine");
    assert_int_equal(num(j, "commit_ts"), 0);
    json_decref(j);
    j = expect("GET", "/v1/kv/s1", NULL, 200);
    assert_string_equal(str(j, "value"), "before");
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/s2", id);
    assert_null(expect("DELETE", path, NULL, 204));
    expect_error_free("GET", path, NULL, 404, "not_found");
    snprintf(path, sizeof(path), "/v1/txns/%s/keepalive", id);
    j = expect("POST", path, NULL, 200);
    assert_true(num(j, "lease_ttl_ms") > 0);
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/txns/%s", id);
    j = expect("GET", path, NULL, 200);
    assert_string_equal(str(j, "state"), "active");
    assert_int_equal(num(j, "writes"), 2);
    json_decref(j);

    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    j = expect("POST", path, NULL, 200);
    json_int_t cts = num(j, "commit_ts");
    json_decref(j);
    j = expect("GET", "/v1/kv/s1", NULL, 200);
    assert_string_equal(str(j, "value"), "mine");
    assert_int_equal(num(j, "commit_ts"), cts);
    json_decref(j);

    /* Committed: only the status answers now. */
    snprintf(path, sizeof(path), "/v1/txns/%s", id);
    j = expect("GET", path, NULL, 200);
    assert_string_equal(str(j, "state"), "committed");
    assert_int_equal(num(j, "commit_ts"), cts);
    json_decref(j);
    const char *after[][2] = {{"POST", "commit"}, {"POST", "rollback"}, {"POST", "keepalive"},
                              {"GET", "keys/s1"}, {"PUT", "keys/s1"},   {"GET", "scan"}};
    for (size_t i = 0; i < sizeof(after) / sizeof(after[0]); i++) {
        snprintf(path, sizeof(path), "/v1/txns/%s/%s", id, after[i][1]);
        expect_error_free(after[i][0], path,
                          strcmp(after[i][0], "PUT") == 0 ? "{\"value\":\"x\"}" : NULL, 409,
                          "txn_not_active");
    }
    snprintf(path, sizeof(path), "/v1/txns/%s", id);
    expect_error_free("DELETE", path, NULL, 409, "txn_not_active");

    /* Rolled back: nothing written, and inactive. */
    begin(id, sizeof(id), NULL);
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/s1", id);
    assert_null(expect("PUT", path, "{\"value\":\"never\"}", 204));
    snprintf(path, sizeof(path), "/v1/txns/%s", id);
    assert_null(expect("DELETE", path, NULL, 204));
    j = expect("GET", path, NULL, 200);
    assert_string_equal(str(j, "state"), "aborted");
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    expect_error_free("POST", path, NULL, 409, "txn_not_active");
    j = expect("GET", "/v1/kv/s1", NULL, 200);
    assert_string_equal(str(j, "value"), "mine");
    json_decref(j);
    /* An unknown session is gone, as in a group (410, not 404). */
    expect_error_free("GET", "/v1/txns/nope-1", NULL, 410, "txn_expired");
    expect_error_free("POST", "/v1/txns/nope-1/commit", NULL, 410, "txn_expired");
}

static void write_conflict_aborts_the_session(void **state)
{
    (void)state;
    char a[64], path[256];
    put("wc", "0");
    begin(a, sizeof(a), NULL);
    put("wc", "1"); /* committed after a's start */
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/wc", a);
    json_t *j = expect("GET", path, NULL, 200);
    assert_string_equal(str(j, "value"), "0"); /* a's snapshot */
    json_decref(j);
    assert_null(expect("PUT", path, "{\"value\":\"2\"}", 204));
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", a);
    j = expect_error("POST", path, NULL, 409, "write_conflict");
    assert_string_equal(str(json_object_get(j, "error"), "key"), "wc");
    assert_true(num(json_object_get(j, "error"), "conflict_commit_ts") > 0);
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/txns/%s", a);
    j = expect("GET", path, NULL, 200);
    assert_string_equal(str(j, "state"), "aborted");
    json_decref(j);
    j = expect("GET", "/v1/kv/wc", NULL, 200);
    assert_string_equal(str(j, "value"), "1");
    json_decref(j);
}

static void batch_reads_then_writes(void **state)
{
    (void)state;
    char id[64], path[256];
    put("b1", "one");
    begin(id, sizeof(id), NULL);
    snprintf(path, sizeof(path), "/v1/txns/%s/batch", id);
    json_t *j = expect("POST", path,
                       "{\"reads\":[\"b1\",\"b2\"],\"writes\":[{\"key\":\"b2\",\"value\":\"two\"},"
                       "{\"key\":\"b1\",\"delete\":true}]}",
                       200);
    json_t *reads = json_object_get(j, "reads");
    assert_int_equal(json_array_size(reads), 2);
    assert_true(json_is_true(json_object_get(json_array_get(reads, 0), "found")));
    assert_string_equal(str(json_array_get(reads, 0), "value"), "one");
    assert_true(json_is_false(json_object_get(json_array_get(reads, 1), "found")));
    json_decref(j);
    /* The writes are buffered: a second batch reads them. */
    j = expect("POST", path, "{\"reads\":[\"b1\",\"b2\"]}", 200);
    reads = json_object_get(j, "reads");
    assert_true(json_is_false(json_object_get(json_array_get(reads, 0), "found")));
    assert_string_equal(str(json_array_get(reads, 1), "value"), "two");
    json_decref(j);
    expect_error_free("POST", path, "{\"writes\":[{\"key\":\"x\"}]}", 400, "bad_request");
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    json_decref(expect("POST", path, NULL, 200));
    expect_error_free("GET", "/v1/kv/b1", NULL, 404, "not_found");
}

static void scans_pages_prefixes_and_merging(void **state)
{
    (void)state;
    const char *keys[] = {"sc/a", "sc/b", "sc/c", "sc/d", "sc/e", "sd"};
    for (size_t i = 0; i < 6; i++)
        put(keys[i], "v");
    /* Page through the prefix two at a time. */
    char path[256], after[64] = "";
    size_t seen = 0;
    for (int page = 0; page < 10; page++) {
        if (after[0])
            snprintf(path, sizeof(path), "/v1/kv?prefix=sc/&limit=2&after=%s", after);
        else
            snprintf(path, sizeof(path), "/v1/kv?prefix=sc/&limit=2");
        json_t *j = expect("GET", path, NULL, 200);
        json_t *items = json_object_get(j, "items"), *next = json_object_get(j, "next");
        for (size_t i = 0; i < json_array_size(items); i++)
            assert_string_equal(str(json_array_get(items, i), "key"), keys[seen++]);
        bool last = json_is_null(next);
        if (!last)
            snprintf(after, sizeof(after), "%s", json_string_value(next));
        json_decref(j);
        if (last)
            break;
    }
    assert_int_equal(seen, 5);
    /* Half-open ranges. */
    json_t *j = expect("GET", "/v1/kv?start=sc/b&end=sc/d", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "items")), 2);
    assert_true(json_is_null(json_object_get(j, "next")));
    json_decref(j);
    /* A session's scan merges its own writes in. */
    char id[64];
    begin(id, sizeof(id), NULL);
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/sc%%2Fb", id);
    assert_null(expect("DELETE", path, NULL, 204));
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/sc%%2Fbb", id);
    assert_null(expect("PUT", path, "{\"value\":\"new\"}", 204));
    snprintf(path, sizeof(path), "/v1/txns/%s/scan?prefix=sc/&limit=3", id);
    j = expect("GET", path, NULL, 200);
    json_t *items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), 3);
    assert_string_equal(str(json_array_get(items, 0), "key"), "sc/a");
    assert_string_equal(str(json_array_get(items, 1), "key"), "sc/bb");
    assert_string_equal(str(json_array_get(items, 2), "key"), "sc/c");
    assert_string_equal(json_string_value(json_object_get(j, "next")), "sc/c");
    json_decref(j);
    expect_error_free("GET", "/v1/kv?prefix=a&start=b", NULL, 400, "bad_request");
    expect_error_free("GET", "/v1/kv?limit=0", NULL, 400, "bad_request");
    expect_error_free("GET", "/v1/kv?limit=abc", NULL, 400, "bad_request");
}

static void one_shot_transaction(void **state)
{
    (void)state;
    json_int_t c = put("os1", "x");
    char body[512];
    snprintf(body, sizeof(body),
             "{\"conditions\":[{\"key\":\"os1\",\"commit_ts\":%lld},{\"key\":\"os2\","
             "\"exists\":false},{\"key\":\"os1\",\"value\":\"x\"}],\"reads\":[\"os1\",\"os2\"],"
             "\"writes\":[{\"key\":\"os2\",\"value\":\"y\"},{\"key\":\"os1\",\"delete\":true}]}",
             (long long)c);
    json_t *j = expect("POST", "/v1/txn", body, 200);
    assert_true(num(j, "commit_ts") > c);
    json_t *reads = json_object_get(j, "reads");
    assert_string_equal(str(json_array_get(reads, 0), "value"), "x");
    assert_true(json_is_false(json_object_get(json_array_get(reads, 1), "found")));
    json_decref(j);
    /* Now os2 exists: the same request fails on that condition. */
    j = expect_error("POST", "/v1/txn", body, 409, "condition_failed");
    json_t *err = json_object_get(j, "error");
    assert_true(strcmp(str(err, "key"), "os1") == 0 || strcmp(str(err, "key"), "os2") == 0);
    json_decref(j);
    expect_error_free("POST", "/v1/txn", "{\"conditions\":[{\"key\":\"a\"}]}", 400, "bad_request");
    expect_error_free("POST", "/v1/txn",
                      "{\"writes\":[{\"key\":\"d\",\"value\":\"1\"},{\"key\":\"d\",\"value\":\"2\"}]}",
                      400, "bad_request");
}

static void base64_round_trips_binary(void **state)
{
    (void)state;
    /* key bytes 00 ff 2f 61 ("\0\xff/a"), value bytes 00 01 fe ff. */
    json_t *j = expect("PUT", "/v1/kv/AP8vYQ%3D%3D?encoding=base64", "{\"value\":\"AAH+/w==\"}",
                       200);
    json_decref(j);
    j = expect("GET", "/v1/kv/AP8vYQ%3D%3D?encoding=base64", NULL, 200);
    assert_string_equal(str(j, "key"), "AP8vYQ==");
    assert_string_equal(str(j, "value"), "AAH+/w==");
    json_decref(j);
    /* As text, those bytes cannot be shown: a clear 400. */
    expect_error_free("GET", "/v1/kv/%00%FF%2Fa", NULL, 400, "bad_request");
    j = expect("GET", "/v1/kv?prefix=AP8%3D&encoding=base64", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "items")), 1);
    json_decref(j);
    /* A text scan over someone's binary key does not fail (it answered 400
     * for every scan whose range covered it): the item comes in base64,
     * marked; a next that is not text too, and it is passed back with
     * after_encoding=base64. */
    json_decref(expect("PUT", "/v1/kv/%00%2Fzz", "{\"value\":\"text\"}", 200));
    j = expect("GET", "/v1/kv?start=%00&end=%01&limit=2", NULL, 200);
    json_t *items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), 2);
    json_t *it = json_array_get(items, 0); /* "\0/zz": text, as it is */
    assert_int_equal(json_string_length(json_object_get(it, "key")), 4);
    assert_null(json_object_get(it, "key_encoding"));
    it = json_array_get(items, 1);
    assert_string_equal(str(it, "key"), "AP8vYQ==");
    assert_string_equal(str(it, "key_encoding"), "base64");
    assert_string_equal(str(it, "value"), "AAH+/w==");
    assert_string_equal(str(it, "value_encoding"), "base64");
    json_decref(j);
    /* A page cut at a key that is not text: next in base64, marked, and
     * passed back with after_encoding=base64. */
    j = expect("GET", "/v1/kv?start=%00&end=%01&limit=1&after=%00%2Fzz", NULL, 200);
    assert_string_equal(str(json_array_get(json_object_get(j, "items"), 0), "key"), "AP8vYQ==");
    if (!json_is_null(json_object_get(j, "next"))) {
        assert_string_equal(str(j, "next"), "AP8vYQ==");
        assert_string_equal(str(j, "next_encoding"), "base64");
    }
    json_decref(j);
    j = expect("GET", "/v1/kv?start=%00&end=%01&after=AP8vYQ%3D%3D&after_encoding=base64", NULL,
               200);
    assert_int_equal(json_array_size(json_object_get(j, "items")), 0);
    json_decref(j);
    json_decref(expect("DELETE", "/v1/kv/%00%2Fzz", NULL, 200));
    /* A session with base64 keys and values, a slash inside the key. */
    char id[64], path[256];
    begin(id, sizeof(id), NULL);
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/L3gv?encoding=base64", id); /* "/x/" */
    assert_null(expect("PUT", path, "{\"value\":\"AA==\"}", 204));
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    json_decref(expect("POST", path, NULL, 200));
    j = expect("GET", "/v1/kv/%2Fx%2F", NULL, 200);
    assert_int_equal(json_string_length(json_object_get(j, "value")), 1);
    json_decref(j);
    expect_error_free("GET", "/v1/kv/!!!?encoding=base64", NULL, 400, "bad_request");
    expect_error_free("PUT", "/v1/kv/a?encoding=base64", "{\"value\":\"abc\"}", 400, "bad_request");
    expect_error_free("GET", "/v1/kv/a?encoding=rot13", NULL, 400, "bad_request");
}

static void bad_input_gets_4xx(void **state)
{
    (void)state;
    char *path = malloc(5000), *body;
    /* Keys: 4096 bytes are fine, 4097 are not. */
    strcpy(path, "/v1/kv/");
    memset(path + 7, 'k', 4096);
    path[7 + 4096] = '\0';
    json_decref(expect("PUT", path, "{\"value\":\"big key\"}", 200));
    json_decref(expect("GET", path, NULL, 200));
    strcat(path, "k");
    expect_error_free("PUT", path, "{\"value\":\"x\"}", 400, "bad_request");
    free(path);
    /* Fields the API does not have are refused, named (a TTL is not a
     * feature that silently works). */
    static const struct {
        const char *method, *path, *body, *field;
    } unknown[] = {
        {"PUT", "/v1/kv/u", "{\"value\":\"x\",\"ttl\":5}", "\"ttl\""},
        {"DELETE", "/v1/kv/u", "{\"if_commit_ts\":0,\"force\":true}", "\"force\""},
        {"POST", "/v1/txn", "{\"writes\":[{\"key\":\"a\",\"value\":\"1\",\"ttl\":1}]}",
         "writes[0]"},
        {"POST", "/v1/txn", "{\"conditions\":[{\"key\":\"a\",\"exist\":false}]}", "conditions[0]"},
        {"POST", "/v1/txn", "{\"write\":[]}", "\"write\""},
        {"POST", "/v1/txns", "{\"lease_ms\":1000}", "\"lease_ms\""},
        {"PUT", "/v1/observers/o1", "{\"prefix\":\"a\",\"filter\":\"b\"}", "\"filter\""},
    };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        json_t *e = expect_error(unknown[i].method, unknown[i].path, unknown[i].body, 400,
                                 "bad_request");
        const char *msg = json_string_value(json_object_get(json_object_get(e, "error"), "message"));
        if (strstr(msg, unknown[i].field) == NULL)
            fail_msg("%s %s: the message does not name %s: %s", unknown[i].method,
                     unknown[i].path, unknown[i].field, msg);
        json_decref(e);
    }
    /* Values over --max-value-bytes (1024 here). */
    body = malloc(2000);
    strcpy(body, "{\"value\":\"");
    memset(body + 10, 'v', 1025);
    strcpy(body + 10 + 1025, "\"}");
    expect_error_free("PUT", "/v1/kv/big", body, 413, "payload_too_large");
    free(body);
    /* Bodies over 64 MiB. */
    size_t huge = (64u << 20) + 1;
    body = malloc(huge);
    memset(body, ' ', huge);
    tl_resp r;
    tl_call_raw(&ST, "PUT", "/v1/kv/huge", body, huge, "application/json", &r);
    assert_int_equal(r.status, 413);
    assert_non_null(strstr(r.body, "payload_too_large"));
    tl_resp_free(&r);
    free(body);
    /* Malformed JSON, bad UTF-8, the wrong content type. */
    expect_error_free("PUT", "/v1/kv/a", "{\"value\":", 400, "bad_request");
    expect_error_free("PUT", "/v1/kv/a", "[1,2]", 400, "bad_request");
    expect_error_free("PUT", "/v1/kv/a", "{\"value\":\"\xff\xfe\"}", 400, "bad_request");
    expect_error_free("GET", "/v1/kv/%C3%28", NULL, 400, "bad_request");
    tl_call_raw(&ST, "PUT", "/v1/kv/a", "{\"value\":\"x\"}", 13, "text/plain", &r);
    assert_int_equal(r.status, 415);
    assert_non_null(strstr(r.body, "unsupported_media_type"));
    tl_resp_free(&r);
    tl_call_raw(&ST, "PUT", "/v1/kv/a", "{\"value\":\"x\"}", 13, "application/json; charset=utf-8", &r);
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
    /* Unknown paths, wrong methods, bad parameters. */
    tl_expect_off_spec(true);
    expect_error_free("GET", "/v1/nothing", NULL, 404, "not_found");
    expect_error_free("PATCH", "/v1/kv/a", NULL, 405, "method_not_allowed");
    expect_error_free("POST", "/v1/kv/a", NULL, 405, "method_not_allowed");
    tl_expect_off_spec(false);
    expect_error_free("GET", "/v1/kv/a?ts=-3", NULL, 400, "bad_request");
    /* A snapshot the oracle has not reached yet would not be repeatable. */
    expect_error_free("GET", "/v1/kv/a?ts=9007199254740000", NULL, 400, "bad_request");
    expect_error_free("POST", "/v1/txns", "{\"lease_ttl_ms\":\"long\"}", 400, "bad_request");
    expect_error_free("POST", "/v1/txns", "{\"lease_ttl_ms\":1}", 400, "bad_request");
    /* The store is intact after all that. */
    json_t *j = expect("GET", "/v1/kv/s1", NULL, 200);
    assert_string_equal(str(j, "value"), "mine");
    json_decref(j);
}

static void an_expired_lease_answers_410(void **state)
{
    (void)state;
    char id[64], path[256], body[64];
    /* A short lease, but long enough for the PUT to land in it: a loaded
     * machine may take longer between two requests than the lease, so
     * the lease doubles until it does (the PUT answers 410 until then). */
    unsigned ttl = 200;
    long put = 0;
    for (; ttl <= 51200 && put != 204; ttl *= 2) {
        snprintf(body, sizeof(body), "{\"lease_ttl_ms\":%u}", ttl);
        begin(id, sizeof(id), body);
        snprintf(path, sizeof(path), "/v1/txns/%s/keys/exp", id);
        put = tl_try_call(&ST, "PUT", path, "{\"value\":\"v\"}", NULL);
        assert_true(put == 204 || put == 410);
    }
    assert_int_equal(put, 204);
    ttl /= 2;
    time_sleep_ms(3 * ttl); /* untouched for three leases */
    expect_error_free("GET", path, NULL, 410, "txn_expired");
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    expect_error_free("POST", path, NULL, 410, "txn_expired");
    expect_error_free("GET", "/v1/kv/exp", NULL, 404, "not_found");
    /* Requests renew the lease: a session touched every 500 ms lives on
     * past twice its lease of 2 s (a lease long enough that a loaded
     * machine does not let it run out between two touches). */
    begin(id, sizeof(id), "{\"lease_ttl_ms\":2000}");
    snprintf(path, sizeof(path), "/v1/txns/%s/keepalive", id);
    for (int i = 0; i < 8; i++) {
        usleep(500 * 1000);
        json_decref(expect("POST", path, NULL, 200));
    }
}

/* GET /v1/ready until it answers want (it asks the oracle at most once a
 * second), at most 60 s (a loaded machine may take a while). */
static void wait_ready(long want)
{
    long status = 0;
    for (uint64_t t0 = time_mono_ms(); status != want && time_mono_ms() - t0 < 60000;) {
        json_decref(tl_call(&ST, "GET", "/v1/ready", NULL, &status));
        if (status != want)
            time_sleep_ms(100);
    }
    assert_int_equal(status, want);
}

static void oracle_outage_503_then_recovery(void **state)
{
    (void)state;
    put("oo", "before");
    wait_ready(200);
    assert_int_equal(tl_oracle_stop(&ST.oracle), 0);
    /* Readiness goes 503 with the oracle (health stays 200: liveness). */
    wait_ready(503);
    expect_error_free("GET", "/v1/ready", NULL, 503, "not_ready");
    tl_resp r;
    tl_call_raw(&ST, "POST", "/v1/txns", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "oracle_unavailable"));
    char ra[32];
    assert_non_null(tl_resp_header(&r, "Retry-After", ra, sizeof(ra)));
    tl_resp_free(&r);
    expect_error_free("PUT", "/v1/kv/oo", "{\"value\":\"during\"}", 503, "oracle_unavailable");
    /* Latest reads need no timestamp. */
    json_t *j = expect("GET", "/v1/kv/oo", NULL, 200);
    assert_string_equal(str(j, "value"), "before");
    json_decref(j);
    j = expect("GET", "/v1/health", NULL, 200);
    assert_string_equal(str(j, "oracle"), "unreachable");
    json_decref(j);
    /* A session too big for one phase (two-phase commit) gets 503 from a
     * commit while the oracle is down... */
    char odata[700], id[64], path[256];
    snprintf(odata, sizeof(odata), "%s", ST.oracle.dir);
    assert_int_equal(tl_oracle_start(&ST.oracle, odata, ST.oracle.port), 0);
    wait_ready(200);
    begin(id, sizeof(id), NULL);
    for (int i = 0; i < 70; i++) {
        snprintf(path, sizeof(path), "/v1/txns/%s/keys/big%d", id, i);
        assert_null(expect("PUT", path, "{\"value\":\"v\"}", 204));
    }
    assert_int_equal(tl_oracle_stop(&ST.oracle), 0);
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    expect_error_free("POST", path, NULL, 503, "oracle_unavailable");
    /* ...and the same commit succeeds once the oracle is back, with no
     * restart of the service. */
    assert_int_equal(tl_oracle_start(&ST.oracle, odata, ST.oracle.port), 0);
    json_decref(expect("POST", path, NULL, 200));
    json_decref(expect("GET", "/v1/kv/big69", NULL, 200));
    put("oo", "after");
    begin(id, sizeof(id), NULL);
}

static void restarts_keep_acknowledged_commits(void **state)
{
    (void)state;
    json_int_t c = put("durable1", "kept");
    assert_int_equal(tl_service_stop(&ST), 0);
    assert_int_equal(tl_service_start(&ST), 0);
    json_t *j = expect("GET", "/v1/kv/durable1", NULL, 200);
    assert_int_equal(num(j, "commit_ts"), c);
    json_decref(j);
    /* kill -9 right after the acknowledgment. */
    put("durable2", "also kept");
    char id[64], path[256];
    begin(id, sizeof(id), NULL);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "/v1/txns/%s/keys/durable-s%d", id, i);
        assert_null(expect("PUT", path, "{\"value\":\"s\"}", 204));
    }
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    json_decref(expect("POST", path, NULL, 200));
    assert_int_equal(tl_kill9(ST.svc.pid), 0);
    ST.svc.pid = 0;
    assert_int_equal(tl_service_start(&ST), 0);
    json_decref(expect("GET", "/v1/kv/durable2", NULL, 200));
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "/v1/kv/durable-s%d", i);
        json_decref(expect("GET", path, NULL, 200));
    }
    /* The session of the earlier run is gone. */
    snprintf(path, sizeof(path), "/v1/txns/%s", id);
    expect_error_free("GET", path, NULL, 410, "txn_expired");
}

/* A stack of its own, started with flag naming a file of its dir that
 * holds text; the one before, to put back when done. */
static tl_stack start_with_file(const char *flag, const char *name, const char *text)
{
    tl_stack saved = ST;
    char path[700];
    snprintf(path, sizeof(path), "%s/%s", saved.dir, name);
    assert_int_equal(tl_write_file(path, text, strlen(text)), 0);
    const char *extra[] = {flag, path, NULL};
    assert_int_equal(tl_stack_start(&ST, extra), 0);
    return saved;
}

/* POST /v1/region-calls with the peers' header hdr (NULL: none): the
 * answer, if JSON, after checking its status. */
static json_t *region_call_with(const char *hdr, const char *body, long want)
{
    char url[128];
    tl_resp r;
    snprintf(url, sizeof url, "%s/v1/region-calls", ST.svc.url);
    assert_int_equal(tl_http_with("POST", url, body, strlen(body), "application/json", hdr, 5000,
                                  &r), 0);
    if (r.status != want)
        print_error("region call -> %ld, expected %ld: %s\n", r.status, want,
                    r.body != NULL ? r.body : "");
    assert_int_equal(r.status, want);
    json_t *j = r.body != NULL ? json_loads(r.body, 0, NULL) : NULL;
    tl_resp_free(&r);
    return j;
}

#define PEER "X-Percolator-Peer-Token: peer-secret-0123456789"
#define RC_HEAD "{\"run\":\"r\",\"observers\":\"0000000000000000\","

/* A region call's prewrite at start_ts of the one key key64 (base64), its
 * own primary, value "2". */
static void prewrite_call(char *out, size_t len, json_int_t start_ts, const char *key64)
{
    snprintf(out, len,
             RC_HEAD "\"action\":\"prewrite\",\"start_ts\":%lld,\"primary\":\"%s\","
                     "\"owner\":\"eA==\",\"wall_ms\":1,\"ttl_ms\":3000,\"mutations\":"
                     "[{\"op\":\"put\",\"key\":\"%s\",\"value\":\"Mg==\"}]}",
             (long long)start_ts, key64, key64);
}

/* POST /v1/region-calls (how nodes send a region's actions to its leader,
 * DESIGN §6.6): only with the nodes' shared secret (--peer-token-file, in
 * X-Percolator-Peer-Token), checked before the body is read; a single
 * node leads every region, so it runs them; what they answer is the
 * action's outcome (200 with rc), a malformed call 400 naming what is
 * wrong. Keys are base64 of the engine's keys: "urc-a" is the user key
 * rc-a. */
static void region_calls_run_here_and_refuse_what_is_malformed(void **state)
{
    (void)state;
    const char *get = RC_HEAD "\"action\":\"get_latest\",\"keys\":[\"dXJjLWE=\"]}";
    /* Without --peer-token-file no node serves them, whatever it is sent. */
    json_decref(region_call_with(PEER, get, 401));
    tl_stack saved = start_with_file("--peer-token-file", "peer-token", "peer-secret-0123456789\n");
    json_decref(region_call_with(NULL, get, 401));
    json_decref(region_call_with("X-Percolator-Peer-Token: peer-secret-012345678X", get, 401));
    /* A timestamp, then a commit after it (the public API needs no peer
     * secret). */
    json_t *j = expect("POST", "/v1/txns", NULL, 201);
    json_int_t early = num(j, "start_ts");
    json_decref(j);
    j = expect("PUT", "/v1/kv/rc-a", "{\"value\":\"1\"}", 200);
    json_int_t cts = num(j, "commit_ts");
    json_decref(j);
    /* A prewrite at the earlier timestamp meets that commit: write_conflict,
     * named. */
    char pw[512];
    prewrite_call(pw, sizeof pw, early, "dXJjLWE=");
    j = region_call_with(PEER, pw, 200);
    assert_string_equal(str(j, "rc"), "write_conflict");
    json_t *c = json_object_get(j, "conflict");
    assert_string_equal(str(c, "key"), "dXJjLWE=");
    assert_true(num(c, "commit_ts") == cts);
    json_decref(j);
    /* The newest value, and a key with none. */
    j = region_call_with(PEER, get, 200);
    assert_string_equal(str(j, "rc"), "ok");
    assert_string_equal(str(j, "value"), "MQ==");
    assert_true(num(j, "commit_ts") == cts);
    json_decref(j);
    j = region_call_with(PEER, RC_HEAD "\"action\":\"get\",\"ts\":1,\"keys\":[\"dXJjLWE=\"]}",
                         200);
    assert_string_equal(str(j, "rc"), "not_found");
    json_decref(j);
    /* A scan of [urc-, urc-~) at a fresh timestamp: the one key. */
    json_t *t = expect("POST", "/v1/txns", NULL, 201);
    char body[320];
    snprintf(body, sizeof body,
             RC_HEAD "\"action\":\"scan\",\"ts\":%lld,\"limit\":10,\"max_bytes\":4096,"
                     "\"keys\":[\"dXJjLQ==\",\"dXJjLX4=\"]}",
             (long long)num(t, "start_ts"));
    json_decref(t);
    j = region_call_with(PEER, body, 200);
    assert_string_equal(str(j, "rc"), "ok");
    json_t *items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(str(json_array_get(items, 0), "key"), "dXJjLWE=");
    assert_string_equal(str(json_array_get(items, 0), "value"), "MQ==");
    assert_true(json_is_false(json_object_get(j, "more")));
    json_decref(j);
    /* What GC asks of a region (DESIGN §6.6): its oldest lock, from the
     * key given (that key's own lock too) to the region's end; a lock
     * left by a prewrite at a fresh timestamp on urc-b is found from urc-b,
     * not from urc-c; one node's region runs to the end (last). */
    t = expect("POST", "/v1/txns", NULL, 201);
    json_int_t fresh = num(t, "start_ts");
    json_decref(t);
    prewrite_call(pw, sizeof pw, fresh, "dXJjLWI=");
    j = region_call_with(PEER, pw, 200);
    assert_string_equal(str(j, "rc"), "ok");
    json_decref(j);
    j = region_call_with(PEER, RC_HEAD "\"action\":\"oldest_lock\",\"keys\":[\"dXJjLWI=\"]}", 200);
    assert_string_equal(str(j, "rc"), "ok");
    assert_true(num(j, "oldest") == fresh);
    assert_true(json_is_true(json_object_get(j, "last")));
    json_decref(j);
    j = region_call_with(PEER, RC_HEAD "\"action\":\"oldest_lock\",\"keys\":[\"dXJjLWM=\"]}", 200);
    assert_true(num(j, "oldest") == 0);
    json_decref(j);
    snprintf(body, sizeof body,
             RC_HEAD "\"action\":\"rollback\",\"start_ts\":%lld,\"keys\":[\"dXJjLWI=\"]}",
             (long long)fresh);
    j = region_call_with(PEER, body, 200);
    assert_string_equal(str(j, "rc"), "ok");
    json_decref(j);
    /* A GC below a safe point this store does not hold: unavailable, nothing
     * removed (the collector stores it first, in region 1's log). */
    snprintf(body, sizeof body, RC_HEAD "\"action\":\"gc\",\"ts\":%lld,\"keys\":[\"\"]}",
             (long long)fresh);
    j = region_call_with(PEER, body, 200);
    assert_string_equal(str(j, "rc"), "unavailable");
    json_decref(j);
    /* A read index is a region's own log's: one node has none to name. */
    j = region_call_with(PEER, RC_HEAD "\"action\":\"read_index\",\"keys\":[\"\"]}", 200);
    assert_string_equal(str(j, "rc"), "unavailable");
    json_decref(j);
    /* Malformed: each refused with what is wrong, nothing run. */
    static const char *const bad[] = {
        RC_HEAD "\"action\":\"smash\"}",
        "{\"action\":\"get\",\"observers\":\"0000000000000000\",\"keys\":[\"dXJjLWE=\"]}",
        "{\"action\":\"get\",\"run\":\"\",\"observers\":\"0000000000000000\",\"keys\":[\"dXJjLWE=\"]}",
        "{\"action\":\"get\",\"run\":\"r\",\"observers\":\"xyz\",\"keys\":[\"dXJjLWE=\"]}",
        RC_HEAD "\"action\":\"get\",\"keys\":[\"!!\"]}",
        RC_HEAD "\"action\":\"get\",\"keys\":[\"dXJjLWE=\",\"dXJjLWE=\"]}",
        RC_HEAD "\"action\":\"commit\",\"keys\":[]}",
        RC_HEAD "\"action\":\"prewrite\",\"mutations\":[{\"op\":\"lock\",\"key\":\"dXJjLWE=\","
                "\"value\":\"\"}]}",
        RC_HEAD "\"action\":\"get\",\"ts\":-1,\"keys\":[\"dXJjLWE=\"]}",
        /* A timestamp past the oracle's 2^53 would raise the store's floor for good. */
        RC_HEAD "\"action\":\"check_txn_status\",\"start_ts\":4611686018427387904,"
                "\"primary\":\"dXJjLWE=\"}",
        RC_HEAD "\"action\":\"get\",\"keys\":[],\"extra\":1}",
        RC_HEAD "\"action\":\"get_latest\",\"step_over\":1,\"keys\":[\"dXJjLWE=\"]}",
        RC_HEAD "\"action\":\"scan\",\"ts\":5,\"limit\":0,\"max_bytes\":10,\"keys\":[\"\",\"\"]}",
        RC_HEAD "\"action\":\"scan\",\"ts\":5,\"limit\":5,\"max_bytes\":10,\"keys\":[\"\"]}",
        RC_HEAD "\"action\":\"gc\",\"keys\":[\"\"]}", /* no safe point */
        RC_HEAD "\"action\":\"oldest_lock\",\"keys\":[\"\",\"\"]}",
        RC_HEAD "\"action\":\"read_index\",\"keys\":[]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = region_call_with(PEER, bad[i], 400);
        assert_string_equal(tl_error_code(j), "bad_request");
        json_decref(j);
    }
    /* More keys than a call takes. */
    size_t cap = 16 + 1025 * 12 + 128;
    char *big = malloc(cap);
    assert_non_null(big);
    size_t n = (size_t)snprintf(big, cap, RC_HEAD "\"action\":\"rollback\",\"keys\":[");
    for (int i = 0; i < 1025; i++)
        n += (size_t)snprintf(big + n, cap - n, "%s\"dXJjLWE=\"", i ? "," : "");
    snprintf(big + n, cap - n, "]}");
    json_decref(region_call_with(PEER, big, 400));
    free(big);
    assert_int_equal(tl_stack_stop(&ST), 0);
    ST = saved;
}

static void auth_token_is_required(void **state)
{
    (void)state;
    tl_stack saved = start_with_file("--auth-token-file", "token", "s3cret-0123456789\n");
    json_decref(expect("GET", "/v1/health", NULL, 200));
    expect_error_free("GET", "/v1/kv/a", NULL, 401, "unauthorized");
    expect_error_free("POST", "/v1/txns", NULL, 401, "unauthorized");
    char url[128];
    snprintf(url, sizeof(url), "%s/metrics", ST.svc.url);
    tl_resp r;
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 401);
    tl_resp_free(&r);
    /* The right token opens every route; a wrong one none. */
    assert_int_equal(tl_http_with("GET", url, NULL, 0, NULL, "Authorization: Bearer s3cret-0123456789",
                                  5000, &r), 0);
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
    assert_int_equal(tl_http_with("GET", url, NULL, 0, NULL, "Authorization: Bearer s3cret-012345678X",
                                  5000, &r), 0);
    assert_int_equal(r.status, 401);
    tl_resp_free(&r);
    snprintf(url, sizeof(url), "%s/v1/kv/a", ST.svc.url);
    assert_int_equal(tl_http_with("PUT", url, "{\"value\":\"1\"}", 13, "application/json",
                                  "Authorization: Bearer s3cret-0123456789", 5000, &r), 0);
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
    assert_int_equal(tl_stack_stop(&ST), 0);
    ST = saved;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(health_metrics_and_spec),
        TL_TEST(single_put_get_delete),
        TL_TEST(keys_with_raw_slashes),
        TL_TEST(compare_and_set),
        TL_TEST(session_lifecycle),
        TL_TEST(write_conflict_aborts_the_session),
        TL_TEST(batch_reads_then_writes),
        TL_TEST(scans_pages_prefixes_and_merging),
        TL_TEST(one_shot_transaction),
        TL_TEST(base64_round_trips_binary),
        TL_TEST(bad_input_gets_4xx),
        TL_TEST(region_calls_run_here_and_refuse_what_is_malformed),
        TL_TEST(an_expired_lease_answers_410),
        TL_TEST(oracle_outage_503_then_recovery),
        TL_TEST(restarts_keep_acknowledged_commits),
        TL_TEST(auth_token_is_required),
    };
    return cmocka_run_group_tests_name("service API", tests, group_setup, group_teardown);
}
