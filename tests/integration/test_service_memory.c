/*
 * test_service_memory.c — what a client can make the service hold in
 * memory (issue #18, docs/DESIGN.md §2 "Bounded memory"), with the real
 * programs:
 *
 *  - a scan page holds at most --max-reply-bytes of items and says `next`
 *    when the bytes cut it: following `next` yields every key once with
 *    its value, for latest scans, ?ts= snapshots, base64, and sessions
 *    whose buffered writes (puts and deletes) merge over the snapshot;
 *  - one item bigger than the cap still comes back, alone;
 *  - past --max-sessions, beginning a session answers 503
 *    too_many_sessions with Retry-After; commit, rollback and lease expiry
 *    give the places back; percolator_sessions_open counts them;
 *  - past --max-session-bytes, buffering a write (or a batch, all or
 *    nothing) answers 503 session_memory_full; rollback, commit and lease
 *    expiry give the bytes back; percolator_session_buffered_bytes
 *    counts them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "codec.h"
#include "svc_fixture.h"
#include "timeutil.h"

#define CAP 4096 /* --max-reply-bytes of the scan tests */

/* ---- helpers ---- */

/* s percent-encoded for a URL (every byte but unreserved ones). */
static void url_escape(const char *s, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s != '\0' && o + 4 < outlen; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
}

/* Bytes as base64 (malloc'd). */
static char *b64(const void *p, size_t len)
{
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    assert_non_null(out);
    b64_encode(p, len, out);
    return out;
}

/* The value of key i in the scan tests: len bytes, a pattern of its own
 * (text: letters; binary: every byte value). */
static void value_of(int i, size_t len, bool binary, char *out)
{
    for (size_t j = 0; j < len; j++)
        out[j] = binary ? (char)((i * 37 + (int)j * 11) & 0xff) : (char)('a' + (i + (int)j) % 26);
}

/* A key, a value (raw bytes) and whether it was seen. */
typedef struct {
    char key[64];
    size_t klen;
    char *val;
    size_t vlen;
    int seen;
} want_item;

/* Follow a scan from path (which has its query, e.g. "?prefix=r%2F")
 * through every `next`: each item must be one of want (in key order, each
 * once, with its value); every page that holds more than one item must be
 * at most CAP bytes of items. Returns the number of pages. */
static int follow(tl_stack *st, const char *path, bool base64, want_item *want, size_t nwant)
{
    char url[8192], after[1024] = "";
    int pages = 0;
    size_t next_want = 0;

    for (;;) {
        snprintf(url, sizeof url, "%s%s%s", path, after[0] ? "&after=" : "", after);
        json_t *j = tl_must(st, "GET", url, NULL, 200);
        json_t *items = json_object_get(j, "items"), *next = json_object_get(j, "next");
        pages++;
        assert_true(pages < 100);
        size_t n = json_array_size(items);
        if (n > 1) {
            char *text = json_dumps(items, JSON_COMPACT);
            assert_non_null(text);
            if (strlen(text) > CAP)
                print_error("page %d: %zu items in %zu bytes\n", pages, n, strlen(text));
            assert_true(strlen(text) <= CAP);
            free(text);
        }
        for (size_t i = 0; i < n; i++) {
            json_t *it = json_array_get(items, i);
            const char *k = json_string_value(json_object_get(it, "key"));
            const char *v = json_string_value(json_object_get(it, "value"));
            assert_non_null(k);
            assert_non_null(v);
            /* Key order with nothing skipped: the next wanted key. */
            assert_true(next_want < nwant);
            want_item *w = &want[next_want++];
            char *wk = base64 ? b64(w->key, w->klen) : strndup(w->key, w->klen);
            char *wv = base64 ? b64(w->val, w->vlen) : strndup(w->val, w->vlen);
            if (strcmp(k, wk) != 0)
                print_error("page %d item %zu: key %s, expected %s\n", pages, i, k, wk);
            assert_string_equal(k, wk);
            assert_string_equal(v, wv);
            w->seen++;
            free(wk);
            free(wv);
        }
        if (json_is_null(next)) {
            json_decref(j);
            break;
        }
        assert_true(json_is_string(next));
        url_escape(json_string_value(next), after, sizeof after);
        json_decref(j);
    }
    assert_int_equal(next_want, nwant);
    for (size_t i = 0; i < nwant; i++)
        assert_int_equal(want[i].seen, 1);
    return pages;
}

static void reset_seen(want_item *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        want[i].seen = 0;
}

/* PUT key (raw bytes) = val through /v1/kv; its commit_ts. */
static uint64_t put_kv(tl_stack *st, const char *key, size_t klen, const char *val, size_t vlen,
                       bool base64)
{
    char path[512], k[256];
    char *bv = base64 ? b64(val, vlen) : strndup(val, vlen);
    char *kk = base64 ? b64(key, klen) : strndup(key, klen);
    char *body = malloc(strlen(bv) + 32);
    assert_non_null(body);
    url_escape(kk, k, sizeof k);
    snprintf(path, sizeof path, "/v1/kv/%s%s", k, base64 ? "?encoding=base64" : "");
    sprintf(body, "{\"value\":\"%s\"}", bv);
    json_t *j = tl_must(st, "PUT", path, body, 200);
    uint64_t cts = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
    json_decref(j);
    free(body);
    free(bv);
    free(kk);
    return cts;
}

static void free_want(want_item *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(want[i].val);
}

static void start_scan_stack(tl_stack *st)
{
    /* Leases far out: a loaded machine must not end a session between
     * two of its requests (the default lease is 10 s). */
    const char *extra[] = {"--max-reply-bytes", "4KiB", "--lease-ttl-ms", "600000", NULL};
    assert_int_equal(tl_stack_start(st, extra), 0);
}

/* ---- scans ---- */

enum { NKEYS = 24, VLEN = 1000 };

/* NKEYS text keys r/00.. with VLEN-byte values; the last commit_ts. */
static uint64_t load_text(tl_stack *st, want_item *want)
{
    uint64_t cts = 0;
    for (int i = 0; i < NKEYS; i++) {
        want_item *w = &want[i];
        w->klen = (size_t)snprintf(w->key, sizeof w->key, "r/%02d", i);
        w->val = malloc(VLEN);
        assert_non_null(w->val);
        w->vlen = VLEN;
        value_of(i, VLEN, false, w->val);
        cts = put_kv(st, w->key, w->klen, w->val, w->vlen, false);
    }
    return cts;
}

static void scan_pages_are_cut_by_bytes(void **state)
{
    (void)state;
    tl_stack st;
    want_item want[NKEYS] = {0};
    start_scan_stack(&st);
    uint64_t ts = load_text(&st, want);

    /* 24 items of ~1 KB under a 4 KiB cap: several pages, each cut with
     * next although the count limit (100) is far. */
    int pages = follow(&st, "/v1/kv?prefix=r%2F", false, want, NKEYS);
    print_message("latest: %d keys of %d bytes in %d pages\n", NKEYS, VLEN, pages);
    assert_true(pages >= NKEYS * VLEN / CAP);

    /* A snapshot (?ts=) scan pages the same way, and shows the snapshot:
     * a newer version of r/00 is not in it. */
    char newer[VLEN];
    memset(newer, 'z', sizeof newer);
    put_kv(&st, "r/00", 4, newer, sizeof newer, false);
    char path[128];
    snprintf(path, sizeof path, "/v1/kv?prefix=r%%2F&ts=%llu", (unsigned long long)ts);
    reset_seen(want, NKEYS);
    assert_true(follow(&st, path, false, want, NKEYS) >= NKEYS * VLEN / CAP);

    /* The count limit still cuts too: limit=2 with small pages. */
    reset_seen(want, NKEYS);
    memcpy(want[0].val, newer, VLEN);
    assert_int_equal(follow(&st, "/v1/kv?prefix=r%2F&limit=2", false, want, NKEYS), NKEYS / 2);
    free_want(want, NKEYS);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void scan_pages_are_cut_by_bytes_in_base64(void **state)
{
    (void)state;
    tl_stack st;
    want_item want[NKEYS] = {0};
    start_scan_stack(&st);
    /* Binary keys "\x01\xff" + i and binary values: base64 takes 4 bytes
     * for every 3, and the cap counts what the JSON takes. */
    for (int i = 0; i < NKEYS; i++) {
        want_item *w = &want[i];
        w->key[0] = 1;
        w->key[1] = (char)0xff;
        w->key[2] = (char)i;
        w->klen = 3;
        w->val = malloc(VLEN);
        assert_non_null(w->val);
        w->vlen = VLEN;
        value_of(i, VLEN, true, w->val);
        put_kv(&st, w->key, w->klen, w->val, w->vlen, true);
    }
    char prefix[16], path[128];
    url_escape("Af8=", prefix, sizeof prefix); /* "\x01\xff" */
    snprintf(path, sizeof path, "/v1/kv?prefix=%s&encoding=base64", prefix);
    int pages = follow(&st, path, true, want, NKEYS);
    print_message("base64: %d keys of %d bytes in %d pages\n", NKEYS, VLEN, pages);
    /* 1336 bytes of base64 a value: at most 3 items a page, and 2 when
     * the estimate counts the keys and the JSON around them. */
    assert_true(pages >= NKEYS / 3);
    free_want(want, NKEYS);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* A session's buffered writes merge over the snapshot: deletes hide keys
 * (a whole page's worth first, so the engine's answer is all hidden),
 * puts replace values or add keys; every page stays cut by bytes. */
static void session_scan_pages_are_cut_by_bytes(void **state)
{
    (void)state;
    tl_stack st;
    want_item base[NKEYS] = {0}, want[NKEYS + 4];
    size_t nwant = 0;
    start_scan_stack(&st);
    load_text(&st, base);

    json_t *j = tl_must(&st, "POST", "/v1/txns", NULL, 201);
    char id[64], path[256];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    char body[VLEN + 32], val[VLEN];
    for (int i = 0; i < NKEYS; i++) {
        if (i < 8) { /* deleted: r/00 .. r/07 */
            snprintf(path, sizeof path, "/v1/txns/%s/keys/r%%2F%02d", id, i);
            json_decref(tl_must(&st, "DELETE", path, NULL, 204));
            continue;
        }
        want[nwant] = base[i];
        want[nwant].val = malloc(VLEN);
        assert_non_null(want[nwant].val);
        memcpy(want[nwant].val, base[i].val, VLEN);
        if (i % 5 == 0) { /* replaced by a short value */
            snprintf(path, sizeof path, "/v1/txns/%s/keys/r%%2F%02d", id, i);
            json_decref(tl_must(&st, "PUT", path, "{\"value\":\"short\"}", 204));
            memcpy(want[nwant].val, "short", 5);
            want[nwant].vlen = 5;
        }
        nwant++;
        if (i % 7 == 0) { /* a new key after it: r/NNx */
            value_of(100 + i, VLEN, false, val);
            snprintf(path, sizeof path, "/v1/txns/%s/keys/r%%2F%02dx", id, i);
            snprintf(body, sizeof body, "{\"value\":\"%.*s\"}", VLEN, val);
            json_decref(tl_must(&st, "PUT", path, body, 204));
            want_item *w = &want[nwant++];
            *w = (want_item){.vlen = VLEN, .val = malloc(VLEN)};
            assert_non_null(w->val);
            memcpy(w->val, val, VLEN);
            w->klen = (size_t)snprintf(w->key, sizeof w->key, "r/%02dx", i);
        }
    }
    snprintf(path, sizeof path, "/v1/txns/%s/scan?prefix=r%%2F", id);
    int pages = follow(&st, path, false, want, nwant);
    print_message("session: %zu keys in %d pages\n", nwant, pages);
    assert_true(pages >= 4);
    free_want(want, nwant);
    free_want(base, NKEYS);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void one_item_bigger_than_the_cap_comes_alone(void **state)
{
    (void)state;
    tl_stack st;
    want_item want[3] = {{.key = "big/1", .klen = 5, .vlen = 3 * CAP},
                         {.key = "big/2", .klen = 5, .vlen = 2 * CAP},
                         {.key = "big/3", .klen = 5, .vlen = 10}};
    start_scan_stack(&st);
    for (int i = 0; i < 3; i++) {
        want[i].val = malloc(want[i].vlen);
        assert_non_null(want[i].val);
        value_of(i, want[i].vlen, false, want[i].val);
        put_kv(&st, want[i].key, want[i].klen, want[i].val, want[i].vlen, false);
    }
    json_t *j = tl_must(&st, "GET", "/v1/kv?prefix=big%2F", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "items")), 1);
    assert_string_equal(json_string_value(json_object_get(j, "next")), "big/1");
    json_decref(j);
    /* Each big one alone, then the small one: every item exactly once. */
    assert_int_equal(follow(&st, "/v1/kv?prefix=big%2F", false, want, 3), 3);
    free_want(want, 3);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- sessions ---- */

static void begin_session(tl_stack *st, const char *body, char *id, size_t len)
{
    json_t *j = tl_must(st, "POST", "/v1/txns", body, 201);
    snprintf(id, len, "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
}

/* The next POST /v1/txns answers 503 too_many_sessions, Retry-After set. */
static void expect_sessions_full(tl_stack *st)
{
    tl_resp r;
    char retry[16];
    tl_call_raw(st, "POST", "/v1/txns", NULL, 0, NULL, &r);
    if (r.status != 503)
        print_error("POST /v1/txns -> %ld %s\n", r.status, r.body ? r.body : "");
    assert_int_equal(r.status, 503);
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    assert_string_equal(tl_error_code(j), "too_many_sessions");
    assert_non_null(tl_resp_header(&r, "Retry-After", retry, sizeof retry));
    json_decref(j);
    tl_resp_free(&r);
}

/* Wait (bounded by 60 s, far past the leases these tests wait out, so
 * that a loaded machine gets there too) until a gauge reads want. */
static void await_metric(tl_stack *st, const char *name, double want)
{
    uint64_t t0 = time_mono_ms();
    double v;
    while ((v = tl_service_metric(st, name)) != want && time_mono_ms() - t0 < 60000)
        time_sleep_ms(50);
    if (v != want)
        print_error("%s: %g after %llu ms, expected %g\n", name, v,
                    (unsigned long long)(time_mono_ms() - t0), want);
    assert_true(v == want);
}

static void sessions_are_capped(void **state)
{
    (void)state;
    tl_stack st;
    const char *extra[] = {"--max-sessions", "3", "--janitor-interval-ms", "50",
                           "--lease-ttl-ms", "600000", NULL};
    char id[3][64], path[160];
    assert_int_equal(tl_stack_start(&st, extra), 0);

    for (int i = 0; i < 3; i++)
        begin_session(&st, NULL, id[i], sizeof id[i]);
    expect_sessions_full(&st);
    assert_true(tl_service_metric(&st, "percolator_sessions_open") == 3);
    /* Autocommit writes are not sessions a client holds: never refused. */
    json_decref(tl_must(&st, "PUT", "/v1/kv/k", "{\"value\":\"v\"}", 200));

    /* A commit gives its place back ... */
    snprintf(path, sizeof path, "/v1/txns/%s/keys/a", id[0]);
    json_decref(tl_must(&st, "PUT", path, "{\"value\":\"1\"}", 204));
    snprintf(path, sizeof path, "/v1/txns/%s/commit", id[0]);
    json_decref(tl_must(&st, "POST", path, NULL, 200));
    assert_true(tl_service_metric(&st, "percolator_sessions_open") == 2);
    begin_session(&st, NULL, id[0], sizeof id[0]);
    expect_sessions_full(&st);

    /* ... and so does a rollback ... */
    snprintf(path, sizeof path, "/v1/txns/%s/rollback", id[1]);
    json_decref(tl_must(&st, "POST", path, NULL, 204));
    begin_session(&st, NULL, id[1], sizeof id[1]);
    expect_sessions_full(&st);

    /* ... and a lease running out (the janitor ends the session). */
    snprintf(path, sizeof path, "/v1/txns/%s", id[2]);
    json_decref(tl_must(&st, "DELETE", path, NULL, 204));
    begin_session(&st, "{\"lease_ttl_ms\":100}", id[2], sizeof id[2]);
    await_metric(&st, "percolator_sessions_open", 2);
    begin_session(&st, NULL, id[2], sizeof id[2]);
    expect_sessions_full(&st);
    assert_true(tl_service_metric(&st, "percolator_sessions_open") == 3);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* {"value":"<n bytes>"} */
static char *value_body(size_t n, char c)
{
    char *b = malloc(n + 16);
    assert_non_null(b);
    memcpy(b, "{\"value\":\"", 10);
    memset(b + 10, c, n);
    memcpy(b + 10 + n, "\"}", 3);
    return b;
}

/* A write into a session answers 503 session_memory_full, Retry-After set. */
static void expect_memory_full(tl_stack *st, const char *method, const char *path,
                               const char *body)
{
    tl_resp r;
    char retry[16];
    tl_call_raw(st, method, path, body, strlen(body), "application/json", &r);
    if (r.status != 503)
        print_error("%s %s -> %ld %.300s\n", method, path, r.status, r.body ? r.body : "");
    assert_int_equal(r.status, 503);
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    assert_string_equal(tl_error_code(j), "session_memory_full");
    assert_non_null(tl_resp_header(&r, "Retry-After", retry, sizeof retry));
    json_decref(j);
    tl_resp_free(&r);
}

static void session_bytes_are_capped(void **state)
{
    (void)state;
    tl_stack st;
    /* 1 MiB for all sessions together; each may buffer 16 MiB alone. */
    /* Leases of 10 minutes but where a test asks for a short one: a loaded
     * machine must not end a session between two of its requests. */
    const char *extra[] = {"--max-session-bytes", "1MiB", "--janitor-interval-ms", "50",
                           "--lease-ttl-ms", "600000", NULL};
    enum { V = 300000 };
    const double one = V + 3; /* a value and its key "k/N" */
    char a[64], b[64], c[64], path[160];
    char *big = value_body(V, 'x');
    assert_int_equal(tl_stack_start(&st, extra), 0);

    begin_session(&st, NULL, a, sizeof a);
    begin_session(&st, NULL, b, sizeof b);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "/v1/txns/%s/keys/k%%2F%d", a, i);
        json_decref(tl_must(&st, "PUT", path, big, 204));
    }
    assert_true(tl_service_metric(&st, "percolator_session_buffered_bytes") == 3 * one);
    /* A fourth value would take them past 1 MiB: refused, in this session
     * and in another one. Overwriting a key with the same size is not. */
    snprintf(path, sizeof path, "/v1/txns/%s/keys/k%%2F3", a);
    expect_memory_full(&st, "PUT", path, big);
    snprintf(path, sizeof path, "/v1/txns/%s/keys/k%%2F0", b);
    expect_memory_full(&st, "PUT", path, big);
    snprintf(path, sizeof path, "/v1/txns/%s/keys/k%%2F1", a);
    json_decref(tl_must(&st, "PUT", path, big, 204));
    assert_true(tl_service_metric(&st, "percolator_session_buffered_bytes") == 3 * one);

    /* A rollback gives the bytes back. */
    snprintf(path, sizeof path, "/v1/txns/%s/rollback", a);
    json_decref(tl_must(&st, "POST", path, NULL, 204));
    assert_true(tl_service_metric(&st, "percolator_session_buffered_bytes") == 0);
    snprintf(path, sizeof path, "/v1/txns/%s/keys/k%%2F0", b);
    json_decref(tl_must(&st, "PUT", path, big, 204));

    /* A batch is charged whole before any of it is buffered: all or
     * nothing. */
    size_t blen = 3 * (V + 64) + 64, o = 0;
    char *batch = malloc(blen);
    assert_non_null(batch);
    o += (size_t)snprintf(batch + o, blen - o, "{\"writes\":[");
    for (int i = 1; i <= 3; i++) {
        o += (size_t)snprintf(batch + o, blen - o, "%s{\"key\":\"k/%d\",\"value\":\"", i > 1 ? "," : "", i);
        memset(batch + o, 'y', V);
        o += V;
        o += (size_t)snprintf(batch + o, blen - o, "\"}");
    }
    snprintf(batch + o, blen - o, "]}");
    snprintf(path, sizeof path, "/v1/txns/%s/batch", b);
    expect_memory_full(&st, "POST", path, batch);
    free(batch);
    assert_true(tl_service_metric(&st, "percolator_session_buffered_bytes") == one);
    snprintf(path, sizeof path, "/v1/txns/%s", b);
    json_t *j = tl_must(&st, "GET", path, NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "writes")), 1);
    json_decref(j);

    /* A commit gives them back. */
    snprintf(path, sizeof path, "/v1/txns/%s/commit", b);
    json_decref(tl_must(&st, "POST", path, NULL, 200));
    assert_true(tl_service_metric(&st, "percolator_session_buffered_bytes") == 0);

    /* And so does a lease running out. */
    begin_session(&st, "{\"lease_ttl_ms\":3000}", c, sizeof c);
    snprintf(path, sizeof path, "/v1/txns/%s/keys/k%%2F0", c);
    json_decref(tl_must(&st, "PUT", path, big, 204));
    double held = tl_service_metric(&st, "percolator_session_buffered_bytes");
    /* The PUT renewed the 3 s lease; a session still alive after the
     * metric was read (this request renews it again) was alive when it
     * was read, so its bytes were counted then. A machine so loaded that
     * the lease ran out in between cannot tell: then only the expiry is
     * checked below. */
    snprintf(path, sizeof path, "/v1/txns/%s", c);
    long alive = tl_try_call(&st, "GET", path, NULL, NULL);
    if (alive == 200)
        assert_true(held == one);
    else
        print_message("the 3 s lease ran out before its bytes could be read (GET: %ld)\n", alive);
    assert_true(alive == 200 || alive == 410);
    await_metric(&st, "percolator_session_buffered_bytes", 0);
    await_metric(&st, "percolator_sessions_open", 0);
    free(big);
    assert_int_equal(tl_stack_stop(&st), 0);
}

int main(void)
{
    if (getenv("CMOCKA_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("CMOCKA_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        TL_TEST(scan_pages_are_cut_by_bytes),
        TL_TEST(scan_pages_are_cut_by_bytes_in_base64),
        TL_TEST(session_scan_pages_are_cut_by_bytes),
        TL_TEST(one_item_bigger_than_the_cap_comes_alone),
        TL_TEST(sessions_are_capped),
        TL_TEST(session_bytes_are_capped),
    };
    return cmocka_run_group_tests_name("service: bounded memory", tests, NULL, NULL);
}
