/*
 * test_service_raft.c — three real percolator-service processes as a Raft
 * group on 127.0.0.1, over one percolator-oracle (docs/DESIGN.md §9):
 *
 *  - the group elects a leader; a write through the leader and one through
 *    a follower (307 to the leader, followed as curl -L does) are readable;
 *    health reports role, leader, term and applied index;
 *  - the leader is killed (kill -9) in the middle of a two-phase commit
 *    (a failpoint holds it after its prewrites): another member leads
 *    within a bounded wait, every acknowledged write is there, writes go on,
 *    a session begun on the old leader answers 410 txn_expired, and the new
 *    leader's janitor resolves the abandoned prewrite locks (owners of
 *    another run are dead at once); the killed member restarts and catches
 *    up (its applied index reaches the leader's);
 *  - a bank workload (4 clients, 200 transfers over 10 accounts, through
 *    any member, following redirects) while the leader is killed twice:
 *    the total is conserved and no acknowledged transfer is lost.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "timeutil.h"

#define NODES 3
#define ACCOUNTS 10
#define CLIENTS 4
#define TRANSFERS 200          /* in all */
#define BIG_TXN_KEYS 70        /* over the one-phase limit: two-phase commit */

typedef struct {
    char *dir;
    tl_oracle oracle;
    int http[NODES], raft[NODES];
    pid_t pid[NODES];
    char peers[256], urls[256];
} group;

static void node_start(group *g, int i)
{
    char listen[32], data[600], log[620], id[16];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", g->http[i]);
    snprintf(data, sizeof data, "%s/n%d", g->dir, i + 1);
    snprintf(log, sizeof log, "%s/n%d.log", g->dir, i + 1);
    snprintf(id, sizeof id, "%d", i + 1);
    const char *args[] = {"--listen", listen, "--data-dir", data, "--oracle", g->oracle.url,
                          "--raft-id", id, "--raft-peers", g->peers, "--raft-urls", g->urls,
                          "--janitor-interval-ms", "200", "--threads", "8", NULL};
    /* Only a two-phase commit stops there: it holds the leader after its
     * prewrites (a test kills it meanwhile). */
    const char *env[] = {"PERCOLATOR_FAILPOINT=after_prewrites=sleep:60000", NULL};
    g->pid[i] = tl_spawn("percolator-service", args, env, log);
    assert_true(g->pid[i] > 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g->http[i]);
    if (tl_wait_health(url, g->pid[i], 20000) != 0) {
        tl_dump_file(log);
        fail_msg("member %d did not start", i + 1);
    }
}

static void group_start(group *g)
{
    memset(g, 0, sizeof(*g));
    g->dir = tl_mkdtemp("service-raft");
    assert_non_null(g->dir);
    char odata[600];
    snprintf(odata, sizeof odata, "%s/oracle", g->dir);
    assert_int_equal(tl_oracle_start(&g->oracle, odata, 0), 0);
    for (int i = 0; i < NODES; i++) {
        g->http[i] = tl_free_port();
        g->raft[i] = tl_free_port();
        snprintf(g->peers + strlen(g->peers), sizeof(g->peers) - strlen(g->peers),
                 "%s%d=127.0.0.1:%d", i ? "," : "", i + 1, g->raft[i]);
        snprintf(g->urls + strlen(g->urls), sizeof(g->urls) - strlen(g->urls),
                 "%s%d=http://127.0.0.1:%d", i ? "," : "", i + 1, g->http[i]);
    }
    for (int i = 0; i < NODES; i++)
        node_start(g, i);
}

static void group_stop(group *g)
{
    for (int i = 0; i < NODES; i++)
        if (g->pid[i] > 0)
            assert_int_equal(tl_stop(g->pid[i], 20000), 0);
    assert_int_equal(tl_oracle_stop(&g->oracle), 0);
    tl_rmtree(g->dir);
    free(g->dir);
}

static void kill_member(group *g, int i)
{
    assert_int_equal(tl_kill9(g->pid[i]), 0);
    g->pid[i] = 0;
}

/* ---- what a member says ---- */

typedef struct {
    bool leader;
    int leader_id;
    json_int_t term, applied;
} member_view;

static bool member_health(const group *g, int i, member_view *v)
{
    char url[96];
    tl_resp r;
    bool ok = false;
    *v = (member_view){.applied = -1};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/health", g->http[i]);
    if (tl_http("GET", url, NULL, 0, NULL, 2000, &r) == 0 && r.status == 200) {
        json_t *j = json_loads(r.body, 0, NULL);
        const char *role = json_string_value(json_object_get(j, "role"));
        assert_non_null(role);
        v->leader = strcmp(role, "leader") == 0;
        v->leader_id = (int)json_integer_value(json_object_get(json_object_get(j, "leader"), "id"));
        v->term = json_integer_value(json_object_get(j, "term"));
        v->applied = json_integer_value(json_object_get(j, "applied_index"));
        json_decref(j);
        ok = true;
    }
    tl_resp_free(&r);
    return ok;
}

/* The member other than skip (-1: none) that leads, and whose writes go
 * through (its first barrier is applied), waiting up to ms; -1 if none. */
static int leader_but(group *g, int skip, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    member_view v;
    do {
        for (int i = 0; i < NODES; i++) {
            if (i == skip || g->pid[i] <= 0 || !member_health(g, i, &v) || !v.leader)
                continue;
            char url[128];
            tl_resp r;
            snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/ready", g->http[i]);
            bool ready = tl_http("GET", url, NULL, 0, NULL, 3000, &r) == 0 && r.status == 200;
            tl_resp_free(&r);
            if (ready)
                return i;
        }
        time_sleep_ms(50);
    } while (time_mono_ms() < end);
    return -1;
}

/* ---- requests through any member ---- */

/* method path on member i, following redirects (up to 3, as curl -L
 * does for 307: same method and body). The status (0: no answer); *out
 * (may be NULL) the JSON body. */
static long call_on(group *g, int i, const char *method, const char *path, const char *body,
                    int timeout_ms, json_t **out)
{
    char url[512];
    tl_resp r;
    long st = 0;
    if (out != NULL)
        *out = NULL;
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g->http[i], path);
    for (int hop = 0; hop < 4; hop++) {
        if (tl_http(method, url, body, body ? strlen(body) : 0, body ? "application/json" : NULL,
                    timeout_ms, &r) != 0) {
            tl_resp_free(&r);
            return 0;
        }
        st = r.status;
        if (st == 307 && tl_resp_header(&r, "Location", url, sizeof url) != NULL) {
            tl_resp_free(&r);
            continue;
        }
        break;
    }
    if (out != NULL && r.body != NULL)
        *out = json_loads(r.body, 0, NULL);
    tl_resp_free(&r);
    return st;
}

/* A request any live member may take: tried on each in turn until one
 * gives an answer other than 503 / no answer, for up to ms. Only for
 * requests that may be repeated (reads, writes whose retry is harmless). */
static long call_any(group *g, const char *method, const char *path, const char *body, int ms,
                     json_t **out)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    long st = 0;
    for (int k = 0;; k++) {
        int i = k % NODES;
        if (g->pid[i] > 0) {
            st = call_on(g, i, method, path, body, 5000, out);
            if (st != 0 && st != 503)
                return st;
            if (out != NULL) {
                json_decref(*out);
                *out = NULL;
            }
        }
        if (time_mono_ms() >= end)
            return st;
        time_sleep_ms(50);
    }
}

static void must_read(group *g, const char *key, const char *want)
{
    char path[128];
    json_t *j;
    snprintf(path, sizeof path, "/v1/kv/%s", key);
    assert_int_equal(call_any(g, "GET", path, NULL, 15000, &j), 200);
    assert_string_equal(json_string_value(json_object_get(j, "value")), want);
    json_decref(j);
}

static void put(group *g, const char *key, const char *value)
{
    char path[128], body[128];
    snprintf(path, sizeof path, "/v1/kv/%s", key);
    snprintf(body, sizeof body, "{\"value\":\"%s\"}", value);
    assert_int_equal(call_any(g, "PUT", path, body, 15000, NULL), 200);
}

/* ---- one leader, redirects, a failover ---- */

static void begin_session(group *g, char *id, size_t len)
{
    json_t *j;
    assert_int_equal(call_any(g, "POST", "/v1/txns", NULL, 15000, &j), 201);
    snprintf(id, len, "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
}

/* Locks listed by member i (following a redirect); -1 if no answer. */
static long locks_on(group *g, int i)
{
    json_t *j;
    if (call_on(g, i, "GET", "/v1/locks?limit=1000", NULL, 5000, &j) != 200) {
        json_decref(j);
        return -1;
    }
    long n = (long)json_array_size(json_object_get(j, "locks"));
    json_decref(j);
    return n;
}

static void failover_keeps_every_acknowledged_write(void **state)
{
    (void)state;
    group g;
    group_start(&g);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    int f = (l + 1) % NODES;
    member_view v;
    assert_true(member_health(&g, f, &v));
    assert_false(v.leader);

    /* A write through the leader, one through a follower: 307 first. */
    assert_int_equal(call_on(&g, l, "PUT", "/v1/kv/via-leader", "{\"value\":\"L\"}", 5000, NULL),
                     200);
    char url[128], loc[256], want[64];
    tl_resp r;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/kv/via-follower", g.http[f]);
    assert_int_equal(tl_http("PUT", url, "{\"value\":\"F\"}", 13, "application/json", 5000, &r),
                     0);
    assert_int_equal(r.status, 307);
    assert_non_null(tl_resp_header(&r, "Location", loc, sizeof loc));
    snprintf(want, sizeof want, "http://127.0.0.1:%d/v1/kv/via-follower", g.http[l]);
    assert_string_equal(loc, want);
    tl_resp_free(&r);
    assert_int_equal(call_on(&g, f, "PUT", "/v1/kv/via-follower", "{\"value\":\"F\"}", 5000, NULL),
                     200);
    must_read(&g, "via-leader", "L");
    must_read(&g, "via-follower", "F");

    /* A session with a buffered write, on this leader. */
    char sid[128], path[256];
    begin_session(&g, sid, sizeof sid);
    snprintf(path, sizeof path, "/v1/txns/%s/keys/in-session", sid);
    assert_int_equal(call_on(&g, l, "PUT", path, "{\"value\":\"S\"}", 5000, NULL), 204);

    /* A two-phase commit that stops after its prewrites (the failpoint). */
    char big[128];
    begin_session(&g, big, sizeof big);
    char body[8192];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"writes\":[");
    for (int k = 0; k < BIG_TXN_KEYS; k++)
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"key\":\"big-%02d\",\"value\":\"b\"}",
                              k ? "," : "", k);
    snprintf(body + n, sizeof body - n, "]}");
    snprintf(path, sizeof path, "/v1/txns/%s/batch", big);
    assert_int_equal(call_on(&g, l, "POST", path, body, 5000, NULL), 200);
    snprintf(path, sizeof path, "/v1/txns/%s/commit", big);
    assert_int_equal(call_on(&g, l, "POST", path, NULL, 1500, NULL), 0); /* held there */
    long held = locks_on(&g, l);
    assert_int_equal(held, BIG_TXN_KEYS);

    /* Kill the leader; another leads within a bounded wait. */
    member_view before;
    assert_true(member_health(&g, l, &before));
    kill_member(&g, l);
    int l2 = leader_but(&g, l, 20000);
    assert_true(l2 >= 0);
    assert_true(member_health(&g, l2, &v));
    assert_true(v.term > before.term);
    must_read(&g, "via-leader", "L");
    must_read(&g, "via-follower", "F");
    put(&g, "after-failover", "A");
    must_read(&g, "after-failover", "A");

    /* The old leader's session is gone. */
    json_t *j;
    snprintf(path, sizeof path, "/v1/txns/%s/commit", sid);
    assert_int_equal(call_on(&g, l2, "POST", path, NULL, 5000, &j), 410);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                        "txn_expired");
    json_decref(j);

    /* Its prewrite locks belong to a dead owner: the new leader's janitor
     * rolls them back. */
    uint64_t end = time_mono_ms() + 20000;
    long left;
    while ((left = locks_on(&g, l2)) != 0 && time_mono_ms() < end)
        time_sleep_ms(100);
    assert_int_equal(left, 0);
    assert_int_equal(call_any(&g, "GET", "/v1/kv/big-00", NULL, 10000, NULL), 404);

    /* The killed member comes back and catches up. */
    node_start(&g, l);
    member_view lead, back;
    end = time_mono_ms() + 20000;
    do {
        time_sleep_ms(100);
        assert_true(member_health(&g, l2, &lead));
        assert_true(member_health(&g, l, &back));
    } while (back.applied < lead.applied && time_mono_ms() < end);
    printf("# the restarted member applied %lld, the leader %lld\n", (long long)back.applied,
           (long long)lead.applied);
    assert_true(back.applied >= lead.applied);
    assert_false(back.leader);
    group_stop(&g);
}

/* ---- the bank through two leader kills ---- */

typedef struct {
    group *g;
    int client;
    atomic_int *done;
    int acked[TRANSFERS];
    int nacked;
} bank_client;

/* One transfer: read both accounts, then a compare-and-set write of both
 * and of the transfer's marker. 200: acknowledged. */
static long transfer(group *g, int from, int to, const char *marker)
{
    char body[1024];
    json_t *j;
    snprintf(body, sizeof body, "{\"reads\":[\"acct-%d\",\"acct-%d\"]}", from, to);
    long st = call_any(g, "POST", "/v1/txn", body, 20000, &j);
    if (st != 200) {
        json_decref(j);
        return st;
    }
    json_t *reads = json_object_get(j, "reads");
    json_t *ra = json_array_get(reads, 0), *rb = json_array_get(reads, 1);
    long fa = strtol(json_string_value(json_object_get(ra, "value")), NULL, 10);
    long tb = strtol(json_string_value(json_object_get(rb, "value")), NULL, 10);
    long long ca = json_integer_value(json_object_get(ra, "commit_ts"));
    long long cb = json_integer_value(json_object_get(rb, "commit_ts"));
    json_decref(j);
    long amount = fa < 7 ? fa : 7;
    snprintf(body, sizeof body,
             "{\"conditions\":[{\"key\":\"acct-%d\",\"commit_ts\":%lld},{\"key\":\"acct-%d\","
             "\"commit_ts\":%lld}],\"writes\":[{\"key\":\"acct-%d\",\"value\":\"%ld\"},"
             "{\"key\":\"acct-%d\",\"value\":\"%ld\"},{\"key\":\"%s\",\"value\":\"x\"}]}",
             from, ca, to, cb, from, fa - amount, to, tb + amount, marker);
    /* Not retried: a 503 or a lost answer may have committed. */
    for (int i = 0; i < NODES; i++) {
        if (g->pid[i] <= 0)
            continue;
        return call_on(g, i, "POST", "/v1/txn", body, 10000, NULL);
    }
    return 0;
}

static void *bank_main(void *arg)
{
    bank_client *c = arg;
    unsigned seed = (unsigned)c->client * 7919u + 1;
    for (int t = 0; t < TRANSFERS / CLIENTS; t++) {
        int from = (int)(rand_r(&seed) % ACCOUNTS), to = (int)(rand_r(&seed) % (ACCOUNTS - 1));
        to += to >= from;
        char marker[64];
        snprintf(marker, sizeof marker, "mark-%d-%d", c->client, t);
        if (transfer(c->g, from, to, marker) == 200)
            c->acked[c->nacked++] = t;
    }
    atomic_fetch_add(c->done, 1);
    return NULL;
}

static void bank_conserves_through_two_leader_kills(void **state)
{
    (void)state;
    group g;
    group_start(&g);
    assert_true(leader_but(&g, -1, 15000) >= 0);
    for (int a = 0; a < ACCOUNTS; a++) {
        char key[32];
        snprintf(key, sizeof key, "acct-%d", a);
        put(&g, key, "100");
    }
    atomic_int done = 0;
    bank_client cl[CLIENTS];
    pthread_t th[CLIENTS];
    for (int c = 0; c < CLIENTS; c++) {
        cl[c] = (bank_client){.g = &g, .client = c, .done = &done};
        assert_int_equal(pthread_create(&th[c], NULL, bank_main, &cl[c]), 0);
    }
    /* Two kills of the leader while the clients run; each member comes
     * back before the next. */
    for (int kill = 0; kill < 2; kill++) {
        time_sleep_ms(1500);
        int l = leader_but(&g, -1, 20000);
        assert_true(l >= 0);
        kill_member(&g, l);
        assert_true(leader_but(&g, l, 20000) >= 0);
        node_start(&g, l);
    }
    for (int c = 0; c < CLIENTS; c++)
        pthread_join(th[c], NULL);
    assert_int_equal(atomic_load(&done), CLIENTS);

    long total = 0;
    for (int a = 0; a < ACCOUNTS; a++) {
        char path[64];
        json_t *j;
        snprintf(path, sizeof path, "/v1/kv/acct-%d", a);
        assert_int_equal(call_any(&g, "GET", path, NULL, 15000, &j), 200);
        total += strtol(json_string_value(json_object_get(j, "value")), NULL, 10);
        json_decref(j);
    }
    int acked = 0;
    for (int c = 0; c < CLIENTS; c++) {
        for (int k = 0; k < cl[c].nacked; k++) {
            char path[64];
            snprintf(path, sizeof path, "/v1/kv/mark-%d-%d", c, cl[c].acked[k]);
            assert_int_equal(call_any(&g, "GET", path, NULL, 15000, NULL), 200);
            acked++;
        }
    }
    printf("# bank: %d of %d transfers acknowledged, total %ld\n", acked, TRANSFERS, total);
    assert_int_equal(total, ACCOUNTS * 100);
    assert_true(acked > 0);
    group_stop(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(failover_keeps_every_acknowledged_write),
        cmocka_unit_test(bank_conserves_through_two_leader_kills),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
