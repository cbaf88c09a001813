/*
 * test_watch.c — the change feed, GET /v1/watch (docs/DESIGN.md §10),
 * with the real programs:
 *
 *  - every acknowledged change of a prefix (puts short and long, deletes,
 *    two-key transactions) is seen once, in commit order, by watchers that
 *    started before the writes, in the middle of them (a replay from the
 *    store that joins the ring of recent changes, itself kept small so
 *    that it evicts), after them, and by a watcher of one key; nothing
 *    outside the range is seen;
 *  - the resolved timestamp never passes a lock in flight: a session's
 *    commit held after its prewrites keeps every progress line below its
 *    start_ts, and its changes come once it commits;
 *  - a start below the GC safe point answers 410 compacted;
 *  - bad requests answer 400, a watcher past --watch-max 503;
 *  - in a three-member group under the bank workload (two clients moving
 *    money between 8 accounts, each transfer a compare-and-set
 *    transaction with a marker key): a watcher sent to the leader by a
 *    follower's 307 that loses its leader to kill -9, twice, resumes from
 *    its last progress on the new leader and sees every acknowledged
 *    change once, in commit order (a transfer whose answer was lost: at
 *    most once, by its marker), and the balances it replays add up after
 *    every transfer;
 *  - with a Raft group per region, leaders spread (--region-leaders-gather
 *    off): the same bank over three regions, the feed served by region 1's
 *    leader, which leads only that one; the other regions read from its
 *    copy, fenced each tick by their leaders' read index.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "svc_fixture.h"
#include "raft_member.h"
#include "svc_group.h"
#include "timeutil.h"
#include "watch_client.h"

#define WAIT_MS 60000

/* ---- the acknowledged history ---- */

typedef struct {
    char key[64];
    uint64_t commit_ts;
    bool del;
    char *value;                  /* NULL for a delete */
    bool maybe;                   /* not acknowledged: it may or may not have committed */
} change;

typedef struct {
    pthread_mutex_t mu;
    change *v;
    size_t n, cap;
} history;

static void history_add(history *h, const char *key, uint64_t ts, const char *value, bool maybe)
{
    pthread_mutex_lock(&h->mu);
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->v = realloc(h->v, h->cap * sizeof(*h->v));
        assert_non_null(h->v);
    }
    change *c = &h->v[h->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->key, sizeof c->key, "%s", key);
    c->commit_ts = ts;
    c->del = value == NULL;
    c->value = value ? strdup(value) : NULL;
    c->maybe = maybe;
    pthread_mutex_unlock(&h->mu);
}

static void history_free(history *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->v[i].value);
    free(h->v);
}

static uint64_t history_max_ts(history *h)
{
    uint64_t m = 0;
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].commit_ts > m)
            m = h->v[i].commit_ts;
    return m;
}

/* The events a watcher settled must be, in commit order and each once,
 * the acknowledged changes of [start, end) above after (a `maybe` one at
 * most once). Returns the number of events checked. */
static size_t check_events(json_t *events, history *h, const char *start, const char *end,
                           uint64_t after, const char *who)
{
    size_t n = json_array_size(events), acked = 0;
    bool *seen = calloc(h->n + 1, sizeof(bool));
    assert_non_null(seen);
    uint64_t last_ts = 0;
    const char *last_key = "";
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(events, i);
        const char *key = json_string_value(json_object_get(e, "key"));
        const char *type = json_string_value(json_object_get(e, "type"));
        uint64_t ts = (uint64_t)json_integer_value(json_object_get(e, "commit_ts"));
        assert_non_null(key);
        if (ts < last_ts || (ts == last_ts && strcmp(key, last_key) <= 0)) {
            fprintf(stderr, "%s: event %zu (%s at %llu) out of order after %s at %llu\n", who, i,
                    key, (unsigned long long)ts, last_key, (unsigned long long)last_ts);
            fail();
        }
        last_ts = ts;
        last_key = key;
        size_t j = 0;
        while (j < h->n && !(h->v[j].commit_ts == ts && strcmp(h->v[j].key, key) == 0))
            j++;
        if (j == h->n) {
            fprintf(stderr, "%s: event %s at %llu was never written\n", who, key,
                    (unsigned long long)ts);
            fail();
        }
        assert_false(seen[j]); /* once */
        seen[j] = true;
        change *c = &h->v[j];
        assert_string_equal(type, c->del ? "delete" : "put");
        if (!c->del)
            assert_string_equal(json_string_value(json_object_get(e, "value")), c->value);
    }
    for (size_t j = 0; j < h->n; j++) {
        change *c = &h->v[j];
        bool in = c->commit_ts > after && strcmp(c->key, start) >= 0 &&
                  (end == NULL || strcmp(c->key, end) < 0);
        if (in && !c->maybe) {
            acked++;
            if (!seen[j]) {
                fprintf(stderr, "%s: acknowledged %s %s at %llu never seen\n", who,
                        c->del ? "delete" : "put", c->key, (unsigned long long)c->commit_ts);
                for (size_t i = 0; i < n; i++) { /* the events around it */
                    json_t *e = json_array_get(events, i);
                    uint64_t ts = (uint64_t)json_integer_value(json_object_get(e, "commit_ts"));
                    if (ts + 3 >= c->commit_ts && ts <= c->commit_ts + 3)
                        fprintf(stderr, "  seen: %s at %llu\n",
                                json_string_value(json_object_get(e, "key")),
                                (unsigned long long)ts);
                }
                fail();
            }
        }
        if (!in && seen[j]) {
            fprintf(stderr, "%s: %s at %llu is outside the range\n", who, c->key,
                    (unsigned long long)c->commit_ts);
            fail();
        }
    }
    free(seen);
    printf("# %s: %zu events, %zu acknowledged changes in range, all once and in order\n", who,
           n, acked);
    return n;
}

static tl_watch *watch_at(int port, const char *query)
{
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/watch?%s", port, query);
    tl_watch *w = tl_watch_start(url, 120000);
    assert_non_null(w);
    return w;
}

/* ---- one node: everything once, in order ---- */

#define WRITERS 3
#define OPS 120

typedef struct {
    tl_stack *st;
    history *h;
    int id;
} writer;

static void *write_loop(void *arg)
{
    writer *w = arg;
    char path[128], key[64], body[1024], value[700];
    for (int i = 0; i < OPS; i++) {
        json_t *j = NULL;
        long status;
        int kind = (i + w->id) % 5;
        snprintf(key, sizeof key, "%s%d-%d", kind == 4 ? "z/" : "w/", w->id, i % 17);
        if (kind == 0 || kind == 4) { /* a short put (z/: outside the watched prefix) */
            snprintf(value, sizeof value, "s%d-%d", w->id, i);
        } else if (kind == 1) {       /* a long put: its value lives in the data table */
            memset(value, 'a' + (char)(i % 26), 600);
            snprintf(value + 600, sizeof value - 600, "%d-%d", w->id, i);
        }
        if (kind == 2) {
            snprintf(path, sizeof path, "/v1/kv/%s", key);
            status = tl_try_call(w->st, "DELETE", path, NULL, &j);
            if (status == 200)
                history_add(w->h, key, (uint64_t)json_integer_value(json_object_get(j, "commit_ts")),
                            NULL, false);
        } else if (kind == 3) {       /* a two-key transaction: one commit_ts */
            char k2[64];
            snprintf(k2, sizeof k2, "w/t%d-%d", w->id, i % 5);
            snprintf(body, sizeof body,
                     "{\"writes\":[{\"key\":\"%s\",\"value\":\"a%d\"},{\"key\":\"%s\",\"value\":\"b%d\"}]}",
                     key, i, k2, i);
            status = tl_try_call(w->st, "POST", "/v1/txn", body, &j);
            if (status == 200) {
                uint64_t ts = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
                char v1[32], v2[32];
                snprintf(v1, sizeof v1, "a%d", i);
                snprintf(v2, sizeof v2, "b%d", i);
                history_add(w->h, key, ts, v1, false);
                history_add(w->h, k2, ts, v2, false);
            }
        } else {
            snprintf(path, sizeof path, "/v1/kv/%s", key);
            snprintf(body, sizeof body, "{\"value\":\"%s\"}", value);
            status = tl_try_call(w->st, "PUT", path, body, &j);
            if (status == 200)
                history_add(w->h, key, (uint64_t)json_integer_value(json_object_get(j, "commit_ts")),
                            value, false);
        }
        assert_int_equal(status, 200);
        json_decref(j);
    }
    return NULL;
}

static void every_change_is_seen_once_in_commit_order(void **state)
{
    (void)state;
    /* A ring of 1 MiB (the least): the long values evict it again and
     * again, so watchers also read from the store mid-stream. */
    const char *extra[] = {"--watch-buffer-bytes", "1048576", NULL};
    tl_stack st;
    history h = {.mu = PTHREAD_MUTEX_INITIALIZER};
    assert_int_equal(tl_stack_start(&st, extra), 0);

    tl_watch *from_start = watch_at(st.svc.port, "prefix=w%2F&start_ts=0");
    tl_watch *one_key = watch_at(st.svc.port, "key=w%2Ft0-3&start_ts=0");
    writer w[WRITERS];
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){&st, &h, i};
        assert_int_equal(tl_thread_start(&t[i], write_loop, &w[i]), 0);
    }
    /* Mid-stream: from the first acknowledged change on. */
    while (1) {
        pthread_mutex_lock(&h.mu);
        size_t n = h.n;
        pthread_mutex_unlock(&h.mu);
        if (n >= 60)
            break;
        time_sleep_ms(5);
    }
    pthread_mutex_lock(&h.mu);
    uint64_t mid_after = h.v[20].commit_ts;
    pthread_mutex_unlock(&h.mu);
    char q[128];
    snprintf(q, sizeof q, "prefix=w%%2F&start_ts=%llu", (unsigned long long)mid_after);
    tl_watch *mid = watch_at(st.svc.port, q);
    for (int i = 0; i < WRITERS; i++)
        tl_thread_join(t[i], NULL);
    tl_watch *after_all = watch_at(st.svc.port, "prefix=w%2F&start_ts=0");

    uint64_t last = history_max_ts(&h);
    tl_watch *all[] = {from_start, one_key, mid, after_all};
    const char *names[] = {"from the start", "one key", "from the middle", "after the writes"};
    for (int i = 0; i < 4; i++) {
        if (!tl_watch_wait_progress(all[i], last, WAIT_MS)) {
            long status;
            fprintf(stderr, "%s: progress %llu, wanted %llu (ended %d)\n", names[i],
                    (unsigned long long)tl_watch_progress(all[i]), (unsigned long long)last,
                    tl_watch_ended(all[i], &status));
            fail();
        }
    }
    json_t *e0 = tl_watch_settled(from_start), *e1 = tl_watch_settled(one_key),
           *e2 = tl_watch_settled(mid), *e3 = tl_watch_settled(after_all);
    size_t n0 = check_events(e0, &h, "w/", "w0", 0, names[0]);
    check_events(e1, &h, "w/t0-3", "w/t0-3\x01", 0, names[1]);
    check_events(e2, &h, "w/", "w0", mid_after, names[2]);
    size_t n3 = check_events(e3, &h, "w/", "w0", 0, names[3]);
    assert_int_equal(n0, n3);
    assert_true(n0 > 200);
    json_decref(e0);
    json_decref(e1);
    json_decref(e2);
    json_decref(e3);
    for (int i = 0; i < 4; i++)
        tl_watch_stop(all[i]);
    history_free(&h);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- the resolved timestamp and a lock in flight ---- */

typedef struct {
    tl_stack *st;
    char path[160];
    long status;
    uint64_t commit_ts;
} committer;

static void *commit_it(void *arg)
{
    committer *c = arg;
    json_t *j = NULL;
    c->status = tl_try_call(c->st, "POST", c->path, NULL, &j);
    c->commit_ts = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
    json_decref(j);
    return NULL;
}

static void progress_stays_below_a_lock_in_flight(void **state)
{
    (void)state;
    const char *extra[] = {"--one-pc", "off", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    assert_int_equal(tl_service_stop(&st), 0);
    snprintf(st.svc.env[0], sizeof st.svc.env[0], "PERCOLATOR_FAILPOINT=after_prewrites=sleep:4000");
    st.svc.nenv = 1;
    assert_int_equal(tl_service_start(&st), 0);
    for (int i = 0; i < 3; i++) /* timestamps before the session's */
        json_decref(tl_expect(&st, "PUT", "/v1/kv/other", "{\"value\":\"x\"}", 200));

    json_t *j = tl_expect(&st, "POST", "/v1/txns", NULL, 201);
    uint64_t start_ts = (uint64_t)json_integer_value(json_object_get(j, "start_ts"));
    const char *id = json_string_value(json_object_get(j, "id"));
    committer c = {.st = &st};
    char path[200];
    snprintf(c.path, sizeof c.path, "/v1/txns/%s/commit", id);
    snprintf(path, sizeof path, "/v1/txns/%s/keys/l%%2Fa", id);
    json_decref(tl_expect(&st, "PUT", path, "{\"value\":\"one\"}", 204));
    snprintf(path, sizeof path, "/v1/txns/%s/keys/l%%2Fb", id);
    json_decref(tl_expect(&st, "PUT", path, "{\"value\":\"two\"}", 204));
    json_decref(j);
    pthread_t t;
    assert_int_equal(tl_thread_start(&t, commit_it, &c), 0);
    /* The commit stalls 4 s after its prewrites: wait for its locks. */
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    size_t locks = 0;
    while (locks < 2 && time_mono_ms() < deadline) {
        json_t *l = tl_expect(&st, "GET", "/v1/locks", NULL, 200);
        locks = json_array_size(json_object_get(l, "locks"));
        json_decref(l);
        if (locks < 2)
            time_sleep_ms(20);
    }
    assert_int_equal(locks, 2);
    /* A watcher from just below the locks' start_ts: while they are in
     * flight, no progress line may pass start_ts - 1, although the oracle's
     * timestamps move on (every tick of the feed takes one). */
    char q[96];
    snprintf(q, sizeof q, "prefix=l%%2F&start_ts=%llu", (unsigned long long)start_ts - 1);
    tl_watch *w = watch_at(st.svc.port, q);
    time_sleep_ms(2000);
    json_t *during = tl_watch_lines(w);
    size_t progress_lines = 0;
    for (size_t i = 0; i < json_array_size(during); i++) {
        json_t *e = json_array_get(during, i);
        assert_string_equal(json_string_value(json_object_get(e, "type")), "progress");
        uint64_t r = (uint64_t)json_integer_value(json_object_get(e, "resolved_ts"));
        assert_true(r <= start_ts - 1);
        progress_lines++;
    }
    printf("# while the commit of start_ts %llu was held: %zu progress lines, none above %llu\n",
           (unsigned long long)start_ts, progress_lines, (unsigned long long)start_ts - 1);
    assert_true(progress_lines >= 1); /* the stream lives: a line a second */
    json_decref(during);
    tl_thread_join(t, NULL);
    assert_int_equal(c.status, 200);
    assert_true(tl_watch_wait_progress(w, c.commit_ts, WAIT_MS));
    json_t *events = tl_watch_settled(w);
    assert_int_equal(json_array_size(events), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(events, i);
        assert_int_equal(json_integer_value(json_object_get(e, "commit_ts")), (json_int_t)c.commit_ts);
        assert_string_equal(json_string_value(json_object_get(e, "key")), i == 0 ? "l/a" : "l/b");
    }
    json_decref(events);
    tl_watch_stop(w);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* A watcher that begins while an abandoned lock holds the resolved
 * timestamp back (its owner was killed after its primary's prewrite)
 * must still get a change committed above that lock before it began: the
 * feed starts above every change applied before it watched, and reads
 * those from the store once the lock is resolved. */
static void a_change_committed_before_the_feed_started_is_seen(void **state)
{
    (void)state;
    const char *extra[] = {"--one-pc", "off", "--janitor-interval-ms", "3000", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    json_decref(tl_expect(&st, "PUT", "/v1/kv/h%2F0", "{\"value\":\"first\"}", 200));
    assert_int_equal(tl_service_stop(&st), 0);
    snprintf(st.svc.env[0], sizeof st.svc.env[0], "PERCOLATOR_FAILPOINT=after_prewrite_primary");
    st.svc.nenv = 1;
    assert_int_equal(tl_service_start(&st), 0);
    json_t *j = tl_expect(&st, "POST", "/v1/txns", NULL, 201);
    uint64_t start_ts = (uint64_t)json_integer_value(json_object_get(j, "start_ts"));
    char path[200];
    snprintf(path, sizeof path, "/v1/txns/%s/keys/h%%2Fa",
             json_string_value(json_object_get(j, "id")));
    json_decref(tl_expect(&st, "PUT", path, "{\"value\":\"never\"}", 204));
    snprintf(path, sizeof path, "/v1/txns/%s/commit", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    assert_int_equal(tl_try_call(&st, "POST", path, NULL, NULL), 0); /* it dies there */
    assert_true(tl_wait_exit(st.svc.pid, WAIT_MS) >= 0);
    st.svc.pid = 0;
    st.svc.nenv = 0;
    st.svc.nargs = 0; /* one-phase commits again, the janitor as slow */
    snprintf(st.svc.args[st.svc.nargs++], sizeof st.svc.args[0], "--janitor-interval-ms");
    snprintf(st.svc.args[st.svc.nargs++], sizeof st.svc.args[0], "3000");
    assert_int_equal(tl_service_start(&st), 0);
    j = tl_expect(&st, "PUT", "/v1/kv/h%2Fx", "{\"value\":\"above\"}", 200);
    uint64_t above = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
    json_decref(j);
    assert_true(above > start_ts);
    j = tl_expect(&st, "GET", "/v1/locks", NULL, 200);
    size_t locks = json_array_size(json_object_get(j, "locks"));
    json_decref(j);
    printf("# lock at %llu %s when the watch began; h/x committed at %llu before it\n",
           (unsigned long long)start_ts, locks ? "still held" : "already resolved",
           (unsigned long long)above);
    char q[96];
    snprintf(q, sizeof q, "prefix=h%%2F&start_ts=%llu", (unsigned long long)start_ts - 1);
    tl_watch *w = watch_at(st.svc.port, q);
    assert_true(tl_watch_wait_progress(w, above, WAIT_MS));
    json_t *events = tl_watch_settled(w);
    assert_int_equal(json_array_size(events), 1); /* h/x; h/a was rolled back */
    json_t *e = json_array_get(events, 0);
    assert_string_equal(json_string_value(json_object_get(e, "key")), "h/x");
    assert_int_equal(json_integer_value(json_object_get(e, "commit_ts")), (json_int_t)above);
    json_decref(events);
    tl_watch_stop(w);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* A client that does not keep up (it reads a byte a second) holds its
 * place, and GC, back: with a 1 ms retention (cuts after the 10 s floor)
 * the feed ends it with watch_too_slow, while a watcher that reads goes on
 * with every change. */
static void a_watcher_that_does_not_keep_up_is_cut(void **state)
{
    (void)state;
    const char *extra[] = {"--gc-retention-ms", "1", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    int fd = tl_dial("127.0.0.1", st.svc.port);
    assert_true(fd >= 0);
    int small = 4096; /* little room in the kernel for what it does not read */
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    const char req[] = "GET /v1/watch?prefix=s%2F HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(write(fd, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
    tl_watch *good = watch_at(st.svc.port, "prefix=s%2F");
    /* Its first progress line: it watches from before the first write. */
    assert_true(tl_watch_wait_progress(good, 1, WAIT_MS));
    /* 16 MiB of changes: far more than the watcher's queue and both
     * sockets' buffers. */
    char *body = malloc(70000);
    assert_non_null(body);
    memcpy(body, "{\"value\":\"", 10);
    memset(body + 10, 'v', 65536);
    memcpy(body + 10 + 65536, "\"}", 3);
    uint64_t last = 0; /* the last write's commit_ts */
    for (int i = 0; i < 256; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/kv/s%%2F%d", i);
        json_t *put = tl_expect(&st, "PUT", path, body, 200);
        last = (uint64_t)json_integer_value(json_object_get(put, "commit_ts"));
        json_decref(put);
    }
    free(body);
    assert_true(last > 0);
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    double cut = 0;
    char byte;
    while ((cut = tl_service_metric(&st, "percolator_watchers_cut_total")) < 1 &&
           time_mono_ms() < deadline) {
        ssize_t got = read(fd, &byte, 1); /* a byte a second: not keeping up */
        (void)got;
        time_sleep_ms(1000);
    }
    printf("# watchers cut: %.0f after %llu s\n", cut,
           (unsigned long long)(WAIT_MS - (deadline - time_mono_ms())) / 1000);
    assert_true(cut >= 1);
    /* The one that read is still there, with all 256 changes: every one
     * is before the progress line that passes the last write (the feed
     * sends a change before any progress above it). */
    long status = 0;
    assert_true(tl_watch_wait_progress(good, last, WAIT_MS));
    assert_false(tl_watch_ended(good, &status));
    json_t *lines = tl_watch_lines(good);
    size_t puts = 0;
    for (size_t i = 0; i < json_array_size(lines); i++)
        puts += strcmp(json_string_value(json_object_get(json_array_get(lines, i), "type")),
                       "put") == 0;
    assert_int_equal(puts, 256);
    json_decref(lines);
    tl_watch_stop(good);
    close(fd);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- refusals ---- */

static void a_start_below_the_safe_point_is_compacted(void **state)
{
    (void)state;
    const char *extra[] = {"--gc-retention-ms", "1", "--janitor-interval-ms", "50", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    for (int i = 0; i < 5; i++)
        json_decref(tl_expect(&st, "PUT", "/v1/kv/g", "{\"value\":\"v\"}", 200));
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    double sp = 0;
    while ((sp = tl_service_metric(&st, "percolator_gc_safe_point")) < 2 &&
           time_mono_ms() < deadline)
        time_sleep_ms(50);
    assert_true(sp >= 2);
    json_t *j = tl_expect(&st, "GET", "/v1/watch?start_ts=1", NULL, 410);
    assert_string_equal(tl_error_code(j), "compacted");
    uint64_t safe = (uint64_t)json_integer_value(
        json_object_get(json_object_get(j, "error"), "safe_point"));
    assert_true(safe >= 2);
    json_decref(j);
    /* At a timestamp GC has not passed, a watch begins. */
    char q[64];
    snprintf(q, sizeof q, "start_ts=%llu", (unsigned long long)safe + 1000000);
    tl_watch *w = watch_at(st.svc.port, q);
    time_sleep_ms(300);
    long status = 0;
    assert_false(tl_watch_ended(w, &status));
    tl_watch_stop(w);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void bad_watch_requests_are_refused(void **state)
{
    (void)state;
    const char *extra[] = {"--watch-max", "1", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    json_t *j = tl_expect(&st, "GET", "/v1/watch?key=a&prefix=b", NULL, 400);
    assert_string_equal(tl_error_code(j), "bad_request");
    json_decref(j);
    json_decref(tl_expect(&st, "GET", "/v1/watch?start_ts=-1", NULL, 400));
    json_decref(tl_expect(&st, "GET", "/v1/watch?start_ts=abc", NULL, 400));
    json_decref(tl_expect(&st, "GET", "/v1/watch?key=", NULL, 400));
    json_decref(tl_expect(&st, "GET", "/v1/watch?prefix=%25%25&encoding=base64", NULL, 400));

    tl_watch *first = watch_at(st.svc.port, "prefix=a");
    assert_true(tl_watch_wait_progress(first, 1, WAIT_MS));
    j = tl_expect(&st, "GET", "/v1/watch?prefix=b", NULL, 503);
    assert_string_equal(tl_error_code(j), "too_many_watchers");
    json_decref(j);
    tl_watch_stop(first);
    /* Its slot is given back once its connection is gone. */
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    tl_watch *second = NULL;
    while (second == NULL && time_mono_ms() < deadline) {
        tl_watch *w = watch_at(st.svc.port, "prefix=b");
        time_sleep_ms(200);
        long status = 0;
        if (tl_watch_ended(w, &status))
            tl_watch_stop(w);
        else
            second = w;
    }
    assert_non_null(second);
    tl_watch_stop(second);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- a group: a leader killed under a watcher ---- */

/* The bank workload on g/: ACCTS accounts of 100; each transfer reads two
 * (POST /v1/txn reads) and writes both and its marker g/mark-N with a
 * compare-and-set on the balances it read, one transaction. */
#define ACCTS 8
#define BANKERS 2

typedef struct {
    tl_svc_group *g;
    history *h;
    atomic_bool stop;
    atomic_int writes;      /* transfers acknowledged */
    atomic_int next;        /* the next marker's number */
} group_writer;

/* POST /v1/txn with body at the leader; 200's JSON or NULL (*lost: no
 * answer, or a 5xx that may follow a lost one). */
static json_t *txn_at_leader(tl_svc_group *g, const char *body, bool *lost)
{
    char url[128];
    int leader = tl_group_leader(g, -1, 10000);
    *lost = false;
    if (leader < 0)
        return NULL;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/txn", g->http[leader]);
    tl_resp r = {0};
    int rc = tl_http("POST", url, body, strlen(body), "application/json", 10000, &r);
    json_t *j = rc == 0 && r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    *lost = rc != 0 || r.status == 0 || r.status >= 500;
    tl_resp_free(&r);
    return j;
}

/* The bank's ACCTS accounts, 100 each, written at the leader and noted. */
static void open_accounts(tl_svc_group *g, history *h)
{
    for (int a = 0; a < ACCTS; a++) {
        char key[32], open[96];
        bool lost;
        snprintf(key, sizeof key, "g/acct-%d", a);
        snprintf(open, sizeof open, "{\"writes\":[{\"key\":\"%s\",\"value\":\"100\"}]}", key);
        json_t *j = txn_at_leader(g, open, &lost);
        assert_non_null(j);
        history_add(h, key, (uint64_t)json_integer_value(json_object_get(j, "commit_ts")), "100",
                    false);
        json_decref(j);
    }
}

static void *group_write_loop(void *arg)
{
    group_writer *gw = arg;
    unsigned seed = (unsigned)atomic_fetch_add(&gw->next, 1) * 7919u + 1;
    char body[512], keys[3][32], vals[2][32];
    while (!atomic_load(&gw->stop)) {
        int from = (int)(rand_r(&seed) % ACCTS), to = (int)(rand_r(&seed) % (ACCTS - 1));
        to += to >= from;
        bool lost;
        snprintf(body, sizeof body, "{\"reads\":[\"g/acct-%d\",\"g/acct-%d\"]}", from, to);
        json_t *j = txn_at_leader(gw->g, body, &lost);
        if (j == NULL)
            continue;
        json_t *reads = json_object_get(j, "reads");
        json_t *ra = json_array_get(reads, 0), *rb = json_array_get(reads, 1);
        long fa = strtol(json_string_value(json_object_get(ra, "value")), NULL, 10);
        long tb = strtol(json_string_value(json_object_get(rb, "value")), NULL, 10);
        long long ca = json_integer_value(json_object_get(ra, "commit_ts"));
        long long cb = json_integer_value(json_object_get(rb, "commit_ts"));
        json_decref(j);
        long amount = fa < 7 ? fa : 7;
        int mark = atomic_fetch_add(&gw->next, 1);
        snprintf(keys[0], sizeof keys[0], "g/acct-%d", from);
        snprintf(keys[1], sizeof keys[1], "g/acct-%d", to);
        snprintf(keys[2], sizeof keys[2], "g/mark-%05d", mark);
        snprintf(vals[0], sizeof vals[0], "%ld", fa - amount);
        snprintf(vals[1], sizeof vals[1], "%ld", tb + amount);
        snprintf(body, sizeof body,
                 "{\"conditions\":[{\"key\":\"%s\",\"commit_ts\":%lld},{\"key\":\"%s\","
                 "\"commit_ts\":%lld}],\"writes\":[{\"key\":\"%s\",\"value\":\"%s\"},"
                 "{\"key\":\"%s\",\"value\":\"%s\"},{\"key\":\"%s\",\"value\":\"x\"}]}",
                 keys[0], ca, keys[1], cb, keys[0], vals[0], keys[1], vals[1], keys[2]);
        j = txn_at_leader(gw->g, body, &lost);
        if (j != NULL || lost) {
            /* Acknowledged at its commit_ts; or it may have committed, at
             * a timestamp its marker will tell (settle_maybe). */
            uint64_t cts = j ? (uint64_t)json_integer_value(json_object_get(j, "commit_ts")) : 0;
            history_add(gw->h, keys[0], cts, vals[0], j == NULL);
            history_add(gw->h, keys[1], cts, vals[1], j == NULL);
            history_add(gw->h, keys[2], cts, "x", j == NULL);
            if (j != NULL)
                atomic_fetch_add(&gw->writes, 1);
        }
        json_decref(j);
        time_sleep_ms(5);
    }
    return NULL;
}

/* A transfer whose answer was lost committed if its marker was seen: its
 * three changes take the marker's commit_ts (values as seen: the balances
 * it read may not be the ones it wrote, when a retry went in). */
static void settle_maybe(history *h, json_t *events)
{
    for (size_t i = 0; i + 2 < h->n; i++) {
        change *c = &h->v[i];
        if (!c->maybe || strncmp(h->v[i + 2].key, "g/mark-", 7) != 0 || !h->v[i + 2].maybe)
            continue;
        for (size_t k = 0; k < json_array_size(events); k++) {
            json_t *e = json_array_get(events, k);
            if (strcmp(json_string_value(json_object_get(e, "key")), h->v[i + 2].key) != 0)
                continue;
            uint64_t ts = (uint64_t)json_integer_value(json_object_get(e, "commit_ts"));
            for (size_t m = i; m < i + 3; m++) {
                h->v[m].commit_ts = ts;
                for (size_t q = 0; q < json_array_size(events); q++) {
                    json_t *f = json_array_get(events, q);
                    if ((uint64_t)json_integer_value(json_object_get(f, "commit_ts")) == ts &&
                        strcmp(json_string_value(json_object_get(f, "key")), h->v[m].key) == 0) {
                        free(h->v[m].value);
                        h->v[m].value = strdup(json_string_value(json_object_get(f, "value")));
                    }
                }
            }
        }
        i += 2;
    }
}

/* Replayed in commit order, the watched balances always add up: after
 * each transaction's changes (one commit_ts), the total is ACCTS * 100. */
static void check_conserved(json_t *events)
{
    long bal[ACCTS] = {0}, total = 0;
    size_t n = json_array_size(events), commits = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(events, i);
        const char *key = json_string_value(json_object_get(e, "key"));
        uint64_t ts = (uint64_t)json_integer_value(json_object_get(e, "commit_ts"));
        if (strncmp(key, "g/acct-", 7) == 0) {
            int a = atoi(key + 7);
            long v = strtol(json_string_value(json_object_get(e, "value")), NULL, 10);
            total += v - bal[a];
            bal[a] = v;
        }
        json_t *next = i + 1 < n ? json_array_get(events, i + 1) : NULL;
        bool last_of_commit =
            next == NULL || (uint64_t)json_integer_value(json_object_get(next, "commit_ts")) != ts;
        if (last_of_commit && i + 1 >= ACCTS) { /* the accounts all opened */
            commits++;
            if (total != ACCTS * 100) {
                fprintf(stderr, "after the commit at %llu the balances add up to %ld\n",
                        (unsigned long long)ts, total);
                fail();
            }
        }
    }
    printf("# the watched balances add up to %d after each of %zu transfers\n", ACCTS * 100,
           commits);
    assert_true(commits > 0);
}

/* Settled events of every stream a client read, one after another. */
static json_t *settled_of(tl_watch *const *ws, int n)
{
    json_t *all = json_array();
    for (int i = 0; i < n; i++) {
        json_t *e = tl_watch_settled(ws[i]);
        json_array_extend(all, e);
        json_decref(e);
    }
    return all;
}

static void a_watcher_resumes_on_the_new_leader(void **state)
{
    (void)state;
    tl_svc_group g;
    history h = {.mu = PTHREAD_MUTEX_INITIALIZER};
    tl_group_start(&g, "watch", TL_GROUP_NODES, NULL, NULL);
    int leader = tl_group_leader(&g, -1, WAIT_MS);
    assert_true(leader >= 0);
    int follower = (leader + 1) % TL_GROUP_NODES;
    /* Else the follower, not yet heard from the new leader, answers 503 not_leader. */
    assert_true(tl_group_knows_leader(&g, follower, leader, WAIT_MS));
    /* Through a follower: it answers 307 to the leader. */
    tl_watch *ws[4];
    int nws = 0;
    ws[nws++] = watch_at(g.http[follower], "prefix=g%2F&start_ts=0");
    /* The accounts, then the bank's transfers. */
    open_accounts(&g, &h);
    group_writer gw = {.g = &g, .h = &h};
    pthread_t t[BANKERS];
    for (int b = 0; b < BANKERS; b++)
        assert_int_equal(tl_thread_start(&t[b], group_write_loop, &gw), 0);
    for (int kill = 0; kill < 2; kill++) {
        while (atomic_load(&gw.writes) < 30 * (kill + 1))
            time_sleep_ms(10);
        leader = tl_group_leader(&g, -1, WAIT_MS);
        assert_true(leader >= 0);
        printf("# kill -9 of member %d (leader) after %d writes\n", leader, atomic_load(&gw.writes));
        assert_int_equal(tl_kill9(g.pid[leader]), 0);
        g.pid[leader] = 0;
        /* The stream ends with the leader; the client resumes from its
         * last progress on any other member (307 to the new leader). */
        long status = 0;
        uint64_t deadline = time_mono_ms() + WAIT_MS;
        while (!tl_watch_ended(ws[nws - 1], &status) && time_mono_ms() < deadline)
            time_sleep_ms(20);
        assert_true(tl_watch_ended(ws[nws - 1], &status));
        uint64_t resume = tl_watch_progress(ws[nws - 1]);
        int other = (leader + 1) % TL_GROUP_NODES;
        if (g.pid[other] == 0)
            other = (leader + 2) % TL_GROUP_NODES;
        char q[96];
        snprintf(q, sizeof q, "prefix=g%%2F&start_ts=%llu", (unsigned long long)resume);
        printf("# resumed from %llu on member %d\n", (unsigned long long)resume, other);
        /* A member that knows no leader yet answers 503: the client retries. */
        tl_watch *next = NULL;
        while (next == NULL && time_mono_ms() < deadline) {
            tl_watch *w = watch_at(g.http[other], q);
            time_sleep_ms(300);
            if (tl_watch_ended(w, &status))
                tl_watch_stop(w);
            else
                next = w;
        }
        assert_non_null(next);
        ws[nws++] = next;
        tl_group_member_start(&g, leader); /* back, as a follower */
    }
    while (atomic_load(&gw.writes) < 90)
        time_sleep_ms(10);
    atomic_store(&gw.stop, true);
    for (int b = 0; b < BANKERS; b++)
        tl_thread_join(t[b], NULL);
    uint64_t last = history_max_ts(&h);
    assert_true(tl_watch_wait_progress(ws[nws - 1], last, WAIT_MS));
    json_t *events = settled_of(ws, nws);
    settle_maybe(&h, events);
    check_events(events, &h, "g/", "g0", 0, "the bank across two leader kills");
    check_conserved(events);
    json_decref(events);
    for (int i = 0; i < nws; i++)
        tl_watch_stop(ws[i]);
    history_free(&h);
    tl_group_stop(&g);
}

/* With --region-logs and --region-leaders-gather off each region keeps
 * the leader it elected: region 1's lead is handed (POST /v1/leader) until
 * another member leads some region. Region 1's leader, or -1. */
static int leaders_spread(tl_svc_group *g)
{
    uint64_t end = time_mono_ms() + WAIT_MS;
    while (time_mono_ms() < end) {
        int l = tl_group_leader(g, -1, 10000);
        json_t *j = NULL;
        if (l < 0 || tl_raft_call(g->http[l], "GET", "/v1/regions?local=true", NULL, 5000, &j) !=
                         200) {
            json_decref(j);
            time_sleep_ms(200);
            continue;
        }
        json_t *list = json_object_get(j, "regions"), *r;
        json_int_t first = json_integer_value(json_object_get(json_array_get(list, 0), "leader"));
        bool known = json_array_size(list) > 1, spread = false;
        size_t k;
        json_array_foreach(list, k, r) {
            json_int_t led = json_integer_value(json_object_get(r, "leader"));
            known = known && led != 0;
            spread = spread || led != first;
        }
        json_decref(j);
        if (known && spread && first == l + 1) {
            printf("# region 1 led by member %d, another region by another member\n", l + 1);
            return l;
        }
        if (known && !spread) {
            char body[32];
            snprintf(body, sizeof body, "{\"id\":%d}", (l + 1) % TL_GROUP_NODES + 1);
            long st = tl_raft_call(g->http[l], "POST", "/v1/leader", body, 15000, NULL);
            printf("# every region led by member %d: region 1's lead handed on: %ld\n", l + 1, st);
        }
        time_sleep_ms(500);
    }
    return -1;
}

/* The feed with regions led by other members (DESIGN §10, §6.6): region
 * 1's leader serves it, its copy of every other region fenced each tick
 * by that region's leader's read index (follower_fence.h). Three regions
 * (accounts 0-3 | accounts 4-7 | the markers), each transfer writing in
 * two or three of them, leaders spread: every acknowledged change once,
 * in commit order, the balances adding up after every transfer, and read
 * indexes asked of the other members. */
static void a_watcher_sees_regions_led_by_other_members(void **state)
{
    (void)state;
    tl_svc_group g;
    history h = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char token[64];
    snprintf(token, sizeof token, "/tmp/pc-watch-token-%d", (int)getpid());
    assert_int_equal(tl_write_file(token, "peer-secret-0123456789\n", 23), 0);
    const char *extra[] = {"--region-logs", "--region-split-keys", "g/acct-4,g/mark-",
                           "--region-leaders-gather", "off", "--peer-token-file", token, NULL};
    /* Every apply 3 ms slow (a failpoint): a copy lags its leader, so a
     * copy read before its read index was applied misses changes. */
    tl_group_start(&g, "watch-regions", TL_GROUP_NODES, "PERCOLATOR_FAILPOINT=raft_apply=sleep:3",
                   extra);
    int leader = leaders_spread(&g);
    assert_true(leader >= 0);
    tl_watch *w = watch_at(g.http[leader], "prefix=g%2F&start_ts=0");
    open_accounts(&g, &h);
    group_writer gw = {.g = &g, .h = &h};
    pthread_t t[BANKERS];
    for (int b = 0; b < BANKERS; b++)
        assert_int_equal(tl_thread_start(&t[b], group_write_loop, &gw), 0);
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    while (atomic_load(&gw.writes) < 60 && time_mono_ms() < deadline)
        time_sleep_ms(10);
    atomic_store(&gw.stop, true);
    for (int b = 0; b < BANKERS; b++)
        tl_thread_join(t[b], NULL);
    assert_true(atomic_load(&gw.writes) >= 60);
    uint64_t last = history_max_ts(&h);
    assert_true(tl_watch_wait_progress(w, last, WAIT_MS));
    json_t *events = tl_watch_settled(w);
    settle_maybe(&h, events);
    check_events(events, &h, "g/", "g0", 0, "the bank over regions led by other members");
    check_conserved(events);
    json_decref(events);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", g.http[leader]);
    double asked = tl_metric_at(base, "percolator_region_calls_sent_total"
                                      "{action=\"read_index\",result=\"ok\"}");
    double refused = tl_metric_at(base, "percolator_region_calls_sent_total"
                                        "{action=\"read_index\",result=\"not_leader\"}");
    printf("# read indexes asked of other members: %.0f answered, %.0f not_leader\n", asked,
           refused > 0 ? refused : 0);
    assert_true(asked >= 1);
    tl_watch_stop(w);
    history_free(&h);
    tl_group_stop(&g);
    unlink(token);
}

/* ---- the command-line client ---- */

/* `percolator watch` prints every change once, in commit order, across a
 * restart of the service under it (a stream ended with shutting_down,
 * then no service for a while: it resumes from its last progress). */
static void the_cli_follows_and_resumes(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    char ep[96], out[700];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", st.svc.port);
    snprintf(out, sizeof out, "%s/watch.out", st.dir);
    const char *args[] = {"--endpoints", ep, "--retries", "50", "--timeout-ms", "3000",
                          "watch", "c/", "--start-ts", "0", "--count", "6", NULL};
    json_decref(tl_expect(&st, "PUT", "/v1/kv/c%2Fa", "{\"value\":\"1\"}", 200));
    pid_t cli = tl_spawn("percolator", args, NULL, out);
    assert_true(cli > 0);
    json_decref(tl_expect(&st, "PUT", "/v1/kv/c%2Fb", "{\"value\":\"2\"}", 200));
    json_decref(tl_expect(&st, "DELETE", "/v1/kv/c%2Fa", NULL, 200));
    json_decref(tl_expect(&st, "PUT", "/v1/kv/other", "{\"value\":\"x\"}", 200));
    time_sleep_ms(500);
    assert_int_equal(tl_service_stop(&st), 0); /* the stream ends: shutting_down */
    time_sleep_ms(500);
    assert_int_equal(tl_service_start(&st), 0); /* same port, same store */
    json_decref(tl_expect(&st, "PUT", "/v1/kv/c%2Fc", "{\"value\":\"3\"}", 200));
    const char *txn = "{\"writes\":[{\"key\":\"c/d\",\"value\":\"4\"},"
                      "{\"key\":\"c/e\",\"value\":\"5\"}]}";
    json_decref(tl_expect(&st, "POST", "/v1/txn", txn, 200));
    assert_int_equal(tl_wait_exit(cli, WAIT_MS), 0);
    size_t len = 0;
    char *text = tl_read_file(out, &len);
    assert_non_null(text);
    printf("# percolator watch printed:\n%s", text);
    /* Six lines: the changes of c/ in commit order, each once. */
    const char *want[] = {"put\tc/a\t1", "put\tc/b\t2", "delete\tc/a", "put\tc/c\t3",
                          "put\tc/d\t4", "put\tc/e\t5"};
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    unsigned long long last = 0;
    for (size_t i = 0; i < 6; i++, line = strtok_r(NULL, "\n", &save)) {
        assert_non_null(line);
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        unsigned long long ts = strtoull(line, NULL, 10);
        assert_true(ts >= last && ts > 0);
        last = ts;
        assert_string_equal(tab + 1, want[i]);
    }
    assert_null(line);
    free(text);
    assert_int_equal(tl_stack_stop(&st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(every_change_is_seen_once_in_commit_order),
        TL_TEST(progress_stays_below_a_lock_in_flight),
        TL_TEST(a_change_committed_before_the_feed_started_is_seen),
        TL_TEST(a_start_below_the_safe_point_is_compacted),
        TL_TEST(bad_watch_requests_are_refused),
        TL_TEST(a_watcher_that_does_not_keep_up_is_cut),
        TL_TEST(a_watcher_resumes_on_the_new_leader),
        TL_TEST(a_watcher_sees_regions_led_by_other_members),
        TL_TEST(the_cli_follows_and_resumes),
    };
    /* PERCOLATOR_TEST_ONLY=<name>: run one test (cmocka's filter). */
    if (getenv("PERCOLATOR_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("PERCOLATOR_TEST_ONLY"));
    return cmocka_run_group_tests_name("service: the change feed (GET /v1/watch)", tests, NULL,
                                       NULL);
}
