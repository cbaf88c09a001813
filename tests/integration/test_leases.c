/*
 * test_leases.c — keys that expire (POST /v1/leases...; docs/DESIGN.md
 * §11), with the real programs:
 *
 *  - a lease kept alive lives on; left alone, its keys are deleted no
 *    sooner than its TTL after the last keep-alive was sent and no later
 *    than a janitor interval after that (plus slack for a loaded machine);
 *    a key written again without the lease, or deleted, is not touched;
 *  - a revoke deletes every attached key in one transaction (a watcher
 *    sees them all at one commit_ts); a put with an ended lease writes
 *    nothing; puts racing a revoke either went with the lease or wrote
 *    nothing;
 *  - bad requests answer 400, an unknown lease 404, --lease-max 503, a
 *    lease with LEASE_MAX_KEYS keys 409 lease_full;
 *  - a restart (kill -9) and, in a three-member group, a leader's kill -9:
 *    the lease lives on with its whole TTL from the new start, never ends
 *    before it, and ends after it; a full lease is still full after the
 *    restart;
 *  - the command-line client grants, attaches, looks up and revokes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svc_fixture.h"
#include "svc_group.h"
#include "timeutil.h"
#include "watch_client.h"

#define WAIT_MS 60000
#define TTL_MS 2000
#define JANITOR_MS 200
/* How late past its deadline a lease may end on a loaded machine: the
 * janitor's interval is the design's bound, this is the test's. */
#define SLACK_MS 5000

static const char *const lease_flags[] = {"--janitor-interval-ms", "200", NULL};

static uint64_t grant(tl_stack *st, uint64_t ttl_ms)
{
    char body[48];
    snprintf(body, sizeof body, "{\"ttl_ms\":%llu}", (unsigned long long)ttl_ms);
    json_t *j = tl_expect(st, "POST", "/v1/leases", body, 201);
    uint64_t id = (uint64_t)json_integer_value(json_object_get(j, "id"));
    assert_true(id > 0);
    assert_int_equal(json_integer_value(json_object_get(j, "ttl_ms")), (json_int_t)ttl_ms);
    json_decref(j);
    return id;
}

static uint64_t put(tl_stack *st, const char *key, const char *value, uint64_t lease)
{
    char path[128], body[128];
    snprintf(path, sizeof path, "/v1/kv/%s", key);
    if (lease)
        snprintf(body, sizeof body, "{\"value\":\"%s\",\"lease\":%llu}", value,
                 (unsigned long long)lease);
    else
        snprintf(body, sizeof body, "{\"value\":\"%s\"}", value);
    json_t *j = tl_expect(st, "PUT", path, body, 200);
    uint64_t cts = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
    json_decref(j);
    return cts;
}

static long get_status(tl_stack *st, const char *key)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/kv/%s", key);
    return tl_try_call(st, "GET", path, NULL, NULL);
}

/* The keys of GET /v1/leases/{id}, comma-joined, or NULL on a 404. */
static char *lease_keys(tl_stack *st, uint64_t id)
{
    char path[64];
    json_t *j = NULL;
    snprintf(path, sizeof path, "/v1/leases/%llu", (unsigned long long)id);
    long status = tl_try_call(st, "GET", path, NULL, &j);
    if (status == 404) {
        assert_string_equal(tl_error_code(j), "lease_not_found");
        json_decref(j);
        return NULL;
    }
    assert_int_equal(status, 200);
    char out[1024] = "";
    json_t *k;
    size_t i;
    json_array_foreach(json_object_get(j, "keys"), i, k) {
        if (i > 0)
            strcat(out, ",");
        strncat(out, json_string_value(k), sizeof out - strlen(out) - 2);
    }
    json_decref(j);
    return strdup(out);
}

/* Poll key until it is gone; the time (monotonic ms) its 404 arrived. */
static uint64_t wait_gone(tl_stack *st, const char *key, uint64_t deadline)
{
    while (time_mono_ms() < deadline) {
        long status = get_status(st, key);
        uint64_t now = time_mono_ms();
        if (status == 404)
            return now;
        assert_int_equal(status, 200);
        time_sleep_ms(20);
    }
    fail_msg("%s was never deleted", key);
    return 0;
}

/* ---- expiry ---- */

static void a_lease_ends_after_its_ttl_and_not_before(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, lease_flags), 0);
    tl_watch *w = NULL;
    {
        char url[128];
        snprintf(url, sizeof url, "%s/v1/watch?start_ts=0", st.svc.url);
        assert_non_null(w = tl_watch_start(url, 120000));
    }
    uint64_t id = grant(&st, TTL_MS);
    put(&st, "a", "1", id);
    put(&st, "b", "1", id);
    put(&st, "b", "2", 0); /* written again without the lease: detached */
    put(&st, "d", "1", id);
    json_decref(tl_expect(&st, "DELETE", "/v1/kv/d", NULL, 200)); /* deleted: detached */
    char txn[160];
    snprintf(txn, sizeof txn,
             "{\"writes\":[{\"key\":\"c1\",\"value\":\"x\"},{\"key\":\"c2\",\"value\":\"y\"}],"
             "\"lease\":%llu}", (unsigned long long)id);
    json_decref(tl_expect(&st, "POST", "/v1/txn", txn, 200));
    put(&st, "e", "1", 0);
    char *keys = lease_keys(&st, id);
    assert_string_equal(keys, "a,c1,c2");
    free(keys);

    /* Kept alive for three TTLs: nothing ends. */
    char ka[64];
    snprintf(ka, sizeof ka, "/v1/leases/%llu/keepalive", (unsigned long long)id);
    uint64_t until = time_mono_ms() + 3 * TTL_MS, sent = 0;
    while (time_mono_ms() < until) {
        sent = time_mono_ms();
        json_decref(tl_expect(&st, "POST", ka, NULL, 200));
        assert_int_equal(get_status(&st, "a"), 200);
        time_sleep_ms(TTL_MS / 4);
    }
    /* Left alone: gone no sooner than TTL after the last keep-alive was
     * sent, and within a janitor interval after (plus the test's slack). */
    uint64_t gone = wait_gone(&st, "a", sent + TTL_MS + JANITOR_MS + SLACK_MS);
    printf("# the key went %llu ms after the last keep-alive (TTL %d ms, janitor %d ms)\n",
           (unsigned long long)(gone - sent), TTL_MS, JANITOR_MS);
    assert_true(gone >= sent + TTL_MS);
    assert_int_equal(get_status(&st, "c1"), 404);
    assert_int_equal(get_status(&st, "c2"), 404);
    assert_int_equal(get_status(&st, "b"), 200);
    assert_int_equal(get_status(&st, "d"), 404);
    assert_int_equal(get_status(&st, "e"), 200);
    assert_null(lease_keys(&st, id));
    json_t *j = tl_expect(&st, "POST", ka, NULL, 404);
    assert_string_equal(tl_error_code(j), "lease_not_found");
    json_decref(j);
    assert_true(tl_service_metric(&st, "percolator_leases_expired_total") == 1);
    assert_true(tl_service_metric(&st, "percolator_leases") == 0);

    /* The watcher saw the three deletes at one commit_ts, and nothing of
     * the leases' own records. */
    uint64_t last = put(&st, "e", "2", 0);
    assert_true(tl_watch_wait_progress(w, last, WAIT_MS));
    json_t *events = tl_watch_settled(w);
    uint64_t del_ts = 0;
    size_t dels = 0, i;
    json_t *e;
    json_array_foreach(events, i, e) {
        const char *key = json_string_value(json_object_get(e, "key"));
        assert_true(strlen(key) <= 2 && (key[0] >= 'a' && key[0] <= 'e'));
        if (strcmp(json_string_value(json_object_get(e, "type")), "delete") != 0 ||
            strcmp(key, "d") == 0)
            continue;
        uint64_t ts = (uint64_t)json_integer_value(json_object_get(e, "commit_ts"));
        assert_true(del_ts == 0 || ts == del_ts);
        del_ts = ts;
        dels++;
    }
    assert_int_equal(dels, 3);
    json_decref(events);
    tl_watch_stop(w);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- revoke ---- */

static void a_revoke_deletes_the_keys_in_one_transaction(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, lease_flags), 0);
    uint64_t id = grant(&st, 60000);
    char key[16];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "r%02d", i);
        put(&st, key, "v", id);
    }
    put(&st, "r05", "again", 0);
    put(&st, "r06", "again", id); /* again with the lease: still attached */
    json_t *list = tl_expect(&st, "GET", "/v1/leases", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(list, "leases")), 1);
    json_decref(list);

    char path[64];
    snprintf(path, sizeof path, "/v1/leases/%llu", (unsigned long long)id);
    json_t *j = tl_expect(&st, "DELETE", path, NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "deleted_keys")), 19);
    uint64_t cts = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
    json_decref(j);
    /* One transaction: a scan just below its commit_ts still has them all,
     * one at it has none of them. */
    char q[96];
    snprintf(q, sizeof q, "/v1/kv?prefix=r&ts=%llu", (unsigned long long)cts - 1);
    j = tl_expect(&st, "GET", q, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "items")), 20);
    json_decref(j);
    snprintf(q, sizeof q, "/v1/kv?prefix=r&ts=%llu", (unsigned long long)cts);
    j = tl_expect(&st, "GET", q, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "items")), 1);
    json_decref(j);
    assert_int_equal(get_status(&st, "r05"), 200);

    /* Ended: a put with it writes nothing; a second revoke is a 404. */
    snprintf(q, sizeof q, "{\"value\":\"late\",\"lease\":%llu}", (unsigned long long)id);
    j = tl_expect(&st, "PUT", "/v1/kv/late", q, 404);
    assert_string_equal(tl_error_code(j), "lease_not_found");
    json_decref(j);
    assert_int_equal(get_status(&st, "late"), 404);
    json_decref(tl_expect(&st, "DELETE", path, NULL, 404));
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* Puts racing a revoke: each either committed before the lease ended (and
 * its key went with it) or was refused (and wrote nothing). No key may
 * outlive the lease. */
typedef struct {
    tl_stack *st;
    uint64_t lease;
    int id;
    atomic_int *stop;
    int ok, refused;
} racer;

static void *race_puts(void *arg)
{
    racer *r = arg;
    char path[64], body[96];
    snprintf(body, sizeof body, "{\"value\":\"v\",\"lease\":%llu}", (unsigned long long)r->lease);
    for (int i = 0; i < 400 && !atomic_load(r->stop); i++) {
        snprintf(path, sizeof path, "/v1/kv/w%d-%03d", r->id, i);
        long status = tl_try_call(r->st, "PUT", path, body, NULL);
        if (status == 200)
            r->ok++;
        else if (status == 404)
            r->refused++;
        else
            fail_msg("a put with the lease answered %ld", status);
        if (r->refused > 3)
            break;
    }
    return NULL;
}

static void no_key_outlives_a_revoke_it_raced(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, lease_flags), 0);
    uint64_t id = grant(&st, 60000);
    atomic_int stop = 0;
    racer r[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        r[i] = (racer){.st = &st, .lease = id, .id = i, .stop = &stop};
        assert_int_equal(tl_thread_start(&t[i], race_puts, &r[i]), 0);
    }
    time_sleep_ms(300);
    char path[64];
    snprintf(path, sizeof path, "/v1/leases/%llu", (unsigned long long)id);
    json_t *j = tl_expect(&st, "DELETE", path, NULL, 200);
    long deleted = (long)json_integer_value(json_object_get(j, "deleted_keys"));
    json_decref(j);
    time_sleep_ms(200);
    atomic_store(&stop, 1);
    int ok = 0, refused = 0;
    for (int i = 0; i < 3; i++) {
        tl_thread_join(t[i], NULL);
        ok += r[i].ok;
        refused += r[i].refused;
    }
    printf("# %d puts committed with the lease, %d refused after it ended; %ld deleted\n", ok,
           refused, deleted);
    assert_true(deleted > 0 && refused > 0);
    assert_int_equal(ok, deleted);
    j = tl_expect(&st, "GET", "/v1/kv?prefix=w", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "items")), 0);
    json_decref(j);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- bad requests and limits ---- */

/* A put to a full lease: 409 lease_full, nothing written. */
static void expect_full(tl_stack *st, uint64_t lease)
{
    char one[96];
    snprintf(one, sizeof one, "{\"value\":\"v\",\"lease\":%llu}", (unsigned long long)lease);
    json_t *j = tl_expect(st, "PUT", "/v1/kv/f1000", one, 409);
    assert_string_equal(tl_error_code(j), "lease_full");
    json_decref(j);
    assert_int_equal(get_status(st, "f1000"), 404);
}

/* LEASE_MAX_KEYS (1000) keys f0000..f0999 in one transaction fill lease;
 * one more is refused. */
static void fill_and_check_full(tl_stack *st, uint64_t lease)
{
    size_t cap = 1000 * 48 + 64, len = 0;
    char *body = malloc(cap);
    assert_non_null(body);
    len += (size_t)snprintf(body + len, cap - len, "{\"lease\":%llu,\"writes\":[",
                            (unsigned long long)lease);
    for (int i = 0; i < 1000; i++)
        len += (size_t)snprintf(body + len, cap - len, "%s{\"key\":\"f%04d\",\"value\":\"v\"}",
                                i ? "," : "", i);
    snprintf(body + len, cap - len, "]}");
    json_decref(tl_expect(st, "POST", "/v1/txn", body, 200));
    free(body);
    expect_full(st, lease);
}

static void bad_lease_requests_are_refused(void **state)
{
    (void)state;
    const char *extra[] = {"--lease-max", "2", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    const char *bad_grants[] = {"{}", "{\"ttl_ms\":999}", "{\"ttl_ms\":\"5000\"}",
                                "{\"ttl_ms\":604800001}", "{\"ttl_ms\":5000,\"keys\":[]}",
                                "[5000]"};
    for (size_t i = 0; i < sizeof bad_grants / sizeof bad_grants[0]; i++) {
        json_t *j = tl_expect(&st, "POST", "/v1/leases", bad_grants[i], 400);
        assert_string_equal(tl_error_code(j), "bad_request");
        json_decref(j);
    }
    const char *bad_ids[] = {"/v1/leases/0", "/v1/leases/abc", "/v1/leases/-1",
                             "/v1/leases/9007199254740992", "/v1/leases/01"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++)
        json_decref(tl_expect(&st, "GET", bad_ids[i], NULL, 400));
    json_decref(tl_expect(&st, "GET", "/v1/leases/12345", NULL, 404));
    json_decref(tl_expect(&st, "POST", "/v1/leases/12345/keepalive", NULL, 404));
    json_decref(tl_expect(&st, "DELETE", "/v1/leases/12345", NULL, 404));
    /* A put names a lease by its id, a number; an unknown one writes nothing. */
    json_decref(tl_expect(&st, "PUT", "/v1/kv/k", "{\"value\":\"v\",\"lease\":\"7\"}", 400));
    json_decref(tl_expect(&st, "PUT", "/v1/kv/k", "{\"value\":\"v\",\"lease\":0}", 400));
    json_decref(tl_expect(&st, "DELETE", "/v1/kv/k", "{\"lease\":7}", 400));
    json_t *j = tl_expect(&st, "PUT", "/v1/kv/k", "{\"value\":\"v\",\"lease\":7}", 404);
    assert_string_equal(tl_error_code(j), "lease_not_found");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "error"), "lease")), 7);
    json_decref(j);
    assert_int_equal(get_status(&st, "k"), 404);

    /* --lease-max 2: a third is refused until one ends. */
    uint64_t a = grant(&st, 60000);
    grant(&st, 60000);
    j = tl_expect(&st, "POST", "/v1/leases", "{\"ttl_ms\":60000}", 503);
    assert_string_equal(tl_error_code(j), "too_many_leases");
    json_decref(j);

    fill_and_check_full(&st, a);
    char path[64];
    snprintf(path, sizeof path, "/v1/leases/%llu", (unsigned long long)a);
    j = tl_expect(&st, "DELETE", path, NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "deleted_keys")), 1000);
    json_decref(j);
    json_decref(tl_expect(&st, "POST", "/v1/leases", "{\"ttl_ms\":60000}", 201));
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- restarts and failovers ---- */

static void a_restart_gives_the_lease_its_whole_ttl_again(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, lease_flags), 0);
    uint64_t id = grant(&st, TTL_MS), full = grant(&st, 60000);
    put(&st, "s", "1", id);
    fill_and_check_full(&st, full);
    assert_int_equal(tl_kill9(st.svc.pid), 0);
    st.svc.pid = 0;
    uint64_t restarted = time_mono_ms();
    assert_int_equal(tl_service_start(&st), 0);
    /* The count of a lease's keys is not stored: read back, it is counted
     * again before a put may add to it. */
    expect_full(&st, full);
    char *keys = lease_keys(&st, id);
    assert_string_equal(keys, "s");
    free(keys);
    uint64_t gone = wait_gone(&st, "s", restarted + TTL_MS + JANITOR_MS + SLACK_MS);
    printf("# gone %llu ms after the restart began\n", (unsigned long long)(gone - restarted));
    assert_true(gone >= restarted + TTL_MS);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static long member_call(tl_svc_group *g, int i, const char *method, const char *path,
                        const char *body, json_t **out)
{
    char url[256];
    tl_resp r;
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g->http[i], path);
    *out = NULL;
    if (tl_http(method, url, body, body ? strlen(body) : 0, body ? "application/json" : NULL,
                30000, &r) != 0) {
        tl_resp_free(&r);
        return 0;
    }
    if (r.len > 0)
        *out = json_loadb(r.body, r.len, 0, NULL);
    long status = r.status;
    tl_resp_free(&r);
    return status;
}

/* Through the members still up: the first answer that is not a 503. */
static long group_call(tl_svc_group *g, const char *method, const char *path, const char *body,
                       json_t **out)
{
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    for (;;) {
        for (int i = 0; i < TL_GROUP_NODES; i++) {
            if (g->pid[i] == 0)
                continue;
            long status = member_call(g, i, method, path, body, out);
            if (status != 0 && status != 503)
                return status;
            json_decref(*out);
            *out = NULL;
        }
        assert_true(time_mono_ms() < deadline);
        time_sleep_ms(100);
    }
}

static void a_new_leader_gives_the_lease_its_whole_ttl_again(void **state)
{
    (void)state;
    tl_svc_group g;
    tl_group_start(&g, "leases", TL_GROUP_NODES, NULL, lease_flags);
    int leader = tl_group_leader(&g, -1, WAIT_MS);
    assert_true(leader >= 0);
    int follower = (leader + 1) % TL_GROUP_NODES;
    /* Else the follower, not yet heard from the new leader, answers 503 not_leader. */
    assert_true(tl_group_knows_leader(&g, follower, leader, WAIT_MS));
    json_t *j = NULL;
    /* Through a follower: passed on to the leader. */
    /* A TTL well above an election's length, so that a new leader that
     * gave less than the whole TTL again would be caught. */
    assert_int_equal(member_call(&g, follower, "POST", "/v1/leases", "{\"ttl_ms\":6000}", &j),
                     201);
    uint64_t id = (uint64_t)json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    char body[96], path[64];
    snprintf(body, sizeof body, "{\"value\":\"v\",\"lease\":%llu}", (unsigned long long)id);
    assert_int_equal(member_call(&g, follower, "PUT", "/v1/kv/g", body, &j), 200);
    json_decref(j);
    snprintf(path, sizeof path, "/v1/leases/%llu/keepalive", (unsigned long long)id);
    assert_int_equal(member_call(&g, follower, "POST", path, NULL, &j), 200);
    json_decref(j);

    uint64_t killed = time_mono_ms();
    printf("# kill -9 of member %d (leader)\n", leader);
    assert_int_equal(tl_kill9(g.pid[leader]), 0);
    g.pid[leader] = 0;
    /* The new leader read the lease back: it is there, with its key. */
    snprintf(path, sizeof path, "/v1/leases/%llu", (unsigned long long)id);
    assert_int_equal(group_call(&g, "GET", path, NULL, &j), 200);
    uint64_t led = time_mono_ms(); /* the new leader had taken over by now */
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "keys"), 0)), "g");
    json_decref(j);
    /* It ends no sooner than its TTL after the kill (the new leader began
     * after it), and within a janitor interval (and the slack) of a TTL
     * after the new leader began. */
    uint64_t gone = 0;
    while (gone == 0) {
        long status = group_call(&g, "GET", "/v1/kv/g", NULL, &j);
        json_decref(j);
        if (status == 404)
            gone = time_mono_ms();
        else
            assert_int_equal(status, 200);
        assert_true(time_mono_ms() < killed + WAIT_MS);
        time_sleep_ms(20);
    }
    printf("# gone %llu ms after the leader's kill, %llu ms after the new leader answered "
           "(TTL 6000 ms)\n", (unsigned long long)(gone - killed),
           (unsigned long long)(gone - led));
    assert_true(gone >= killed + 6000);
    assert_true(gone <= led + 6000 + JANITOR_MS + SLACK_MS);
    assert_int_equal(group_call(&g, "GET", path, NULL, &j), 404);
    json_decref(j);
    tl_group_member_start(&g, leader);
    tl_group_stop(&g);
}

/* ---- the command-line client ---- */

static void the_cli_grants_attaches_and_revokes(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, lease_flags), 0);
    tl_run_result r;
    const char *g[] = {"--endpoint", st.svc.url, "lease", "grant", "60000", NULL};
    assert_int_equal(tl_run("percolator", g, NULL, NULL, 0, 30000, &r), 0);
    assert_int_equal(r.status, 0);
    char id[32];
    snprintf(id, sizeof id, "%llu", strtoull(r.out, NULL, 10));
    tl_run_free(&r);
    const char *p[] = {"--endpoint", st.svc.url, "put", "svc/one", "10.0.0.1", "--lease", id,
                       NULL};
    assert_int_equal(tl_run("percolator", p, NULL, NULL, 0, 30000, &r), 0);
    assert_int_equal(r.status, 0);
    tl_run_free(&r);
    const char *k[] = {"--endpoint", st.svc.url, "lease", "keepalive", id, "--every-ms", "100",
                       "--count", "2", NULL};
    assert_int_equal(tl_run("percolator", k, NULL, NULL, 0, 30000, &r), 0);
    assert_int_equal(r.status, 0);
    tl_run_free(&r);
    const char *l[] = {"--endpoint", st.svc.url, "lease", "get", id, NULL};
    assert_int_equal(tl_run("percolator", l, NULL, NULL, 0, 30000, &r), 0);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "ttl 60000 ms"));
    assert_non_null(strstr(r.out, "1 key(s)\nsvc/one\n"));
    tl_run_free(&r);
    const char *v[] = {"--endpoint", st.svc.url, "lease", "revoke", id, NULL};
    assert_int_equal(tl_run("percolator", v, NULL, NULL, 0, 30000, &r), 0);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "1 key(s) deleted at "));
    tl_run_free(&r);
    assert_int_equal(get_status(&st, "svc%2Fone"), 404);
    /* Gone: keepalive exits 1 (not found). */
    assert_int_equal(tl_run("percolator", k, NULL, NULL, 0, 30000, &r), 0);
    assert_int_equal(r.status, 1);
    tl_run_free(&r);
    assert_int_equal(tl_stack_stop(&st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(a_lease_ends_after_its_ttl_and_not_before),
        TL_TEST(a_revoke_deletes_the_keys_in_one_transaction),
        TL_TEST(no_key_outlives_a_revoke_it_raced),
        TL_TEST(bad_lease_requests_are_refused),
        TL_TEST(a_restart_gives_the_lease_its_whole_ttl_again),
        TL_TEST(a_new_leader_gives_the_lease_its_whole_ttl_again),
        TL_TEST(the_cli_grants_attaches_and_revokes),
    };
    /* PERCOLATOR_TEST_ONLY=<name>: run one test (cmocka's filter). */
    if (getenv("PERCOLATOR_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("PERCOLATOR_TEST_ONLY"));
    return cmocka_run_group_tests_name("service: leases (POST /v1/leases)", tests, NULL, NULL);
}
