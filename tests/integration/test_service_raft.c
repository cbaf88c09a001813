/*
 * test_service_raft.c — three real percolator-service processes as a Raft
 * group on 127.0.0.1, over one percolator-oracle or three as a group of
 * their own (docs/DESIGN.md §9):
 *
 *  - the group elects a leader; a write through the leader and one through
 *    a follower (which passes it on to the leader) are readable;
 *    health reports role, leader, term and applied index;
 *  - the leader is killed (kill -9) in the middle of a two-phase commit
 *    (a failpoint holds it after its prewrites): another member leads
 *    within a bounded wait, every acknowledged write is there, writes go on,
 *    a session begun on the old leader answers 410 txn_expired, and the new
 *    leader's janitor resolves the abandoned prewrite locks (owners of
 *    another run are dead at once); the killed member restarts and catches
 *    up (its applied index reaches the leader's);
 *  - with every commit two-phase, over three oracles as a Raft group, a
 *    bank workload (4 clients, 10 accounts, any member, following redirects) and 3 clients of the snapshot-
 *    isolation checker (tests/lib/si_check.h) run while the leader is
 *    killed 10 times and a follower 3 times: the total is conserved, no
 *    acknowledged transfer is lost, every snapshot read is exactly the
 *    newest committed version below its start_ts (0 anomalies), no lock
 *    outlives a lease and the janitor; each failover's time (kill -9 to the
 *    next committed write) printed, median and max;
 *  - the same bank and checker with --region-logs: each of five regions a
 *    Raft group of its own over one node network per member, their
 *    leaders gathered on region 1's, through 4 leader kills: the same
 *    checks, and every member lists the five regions;
 *  - 8 clients writing keys of their own through the leader, each write
 *    with a condition (a worker's action): their proposals are in flight
 *    together (the leader's percolator_raft_proposals_in_flight_max is at
 *    least 2: actions latch their keys, no write gate), and every write is
 *    there;
 *  - blind writes of 8 clients that arrive together (a failpoint holds the
 *    committer 100 ms before each round) share one round and one Raft
 *    entry: the leader proposed at most a quarter as many entries as there
 *    were writes, and every write is there;
 *  - GC runs in the group (--gc-retention-ms 1000): the leader removes
 *    old versions through Raft, also while snapshot-isolation clients
 *    commit two-phase transactions on the keys it collects (0 anomalies:
 *    GC takes no latches); after the leader is killed, the new leader has
 *    its safe point (a read below it: 400) and the newest value;
 *  - every member killed at once (kill -9) after acknowledged one- and
 *    two-phase commits, and restarted: every write is there (WiredTiger's
 *    log is not flushed per commit in a group; the Raft log is replayed);
 *  - a follower that lost its data dir (store and raft log) while the
 *    leader compacted its log past it catches up by installing a snapshot
 *    (an image of the store), and its store, read alone as a single node,
 *    holds what the group holds;
 *  - a leader cut off by iptables (its raft port) acknowledges nothing
 *    more, the others elect a leader and go on, and after healing it
 *    follows and catches up;
 *  - five members in --raft-peers, three bootstrapping, under the bank
 *    (every commit two-phase): members 4 and 5 join and are promoted (3
 *    to 5 voters), the lead moves to one of them, both are removed (3
 *    again); a follower, then the leader, is killed for good and a new
 *    member on an empty dir takes its place (the dead one removed): the
 *    total is conserved in one snapshot, every acknowledged transfer is
 *    there, no lock is left; each step's time printed;
 *  - a dead leader replaced by a new machine on an address no member's
 *    flags give (member 4, raft on 127.0.2.4), under the bank: added with
 *    `percolator member add 4 HOST:PORT URL` through a follower, the dead
 *    one removed, the lead on member 4; a first member passes writes on to
 *    it at the URL in the configuration (X-Percolator-Leader, health), and
 *    the other, restarted with its old flags, follows it and catches up.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "raft_member.h"
#include "si_check.h"
#include "svc_group.h"
#include "testlib.h"
#include "timeutil.h"

#define NODES TL_GROUP_NODES
#define ACCOUNTS 10
#define CLIENTS 4
#define MAX_TRANSFERS 2000     /* per bank client, at most */
#define SI_CLIENTS 3
#define LEADER_KILLS 10
#define REGION_LOGS_KILLS 4
#define BIG_TXN_KEYS 70        /* over the one-phase limit: two-phase commit */

typedef tl_svc_group group;

/* One request's bound where an answer is expected: far past what a
 * loaded machine takes (a CPU hog beside `make test`, a sanitizer build);
 * it only decides how long a broken group takes to fail. */
#define REQ_MS 30000

static void node_start(group *g, int i)
{
    tl_group_member_start(g, i);
}

/* Members with a fast janitor; hold_2pc: the after_prewrites failpoint
 * holds a two-phase commit after its prewrites (test 1 kills the leader
 * meanwhile). */
/* n members in --raft-peers, the first `started` started, over oracles
 * percolator-oracle processes: 1, or 3 as a Raft group. */
static void group_start_n(group *g, int n, int started, const char *env,
                          const char *const extra[], int oracles)
{
    const char *flags[20] = {"--janitor-interval-ms", "200", "--threads", "8", NULL};
    for (int k = 0, f = 4; extra != NULL && extra[k] != NULL; k++) {
        assert_true(f < 19);
        flags[f++] = extra[k];
    }
    tl_group_start_n(g, "service-raft", n, started, env, flags, oracles);
}

static void group_start_over(group *g, const char *env, const char *const extra[], int oracles)
{
    group_start_n(g, NODES, NODES, env, extra, oracles);
}

static void group_start_env(group *g, const char *env, const char *const extra[])
{
    group_start_over(g, env, extra, 1);
}

static void group_start(group *g, bool hold_2pc, const char *const extra[])
{
    group_start_env(g, hold_2pc ? "PERCOLATOR_FAILPOINT=after_prewrites=sleep:60000" : NULL,
                    extra);
}

static void group_stop(group *g)
{
    tl_group_stop(g);
}

static void kill_member(group *g, int i)
{
    assert_int_equal(tl_kill9(g->pid[i]), 0);
    g->pid[i] = 0;
}

/* ---- what a member says ---- */

typedef tl_raft_view member_view;

static bool member_health(const group *g, int i, member_view *v)
{
    return tl_raft_health(g->http[i], REQ_MS, v);
}

static int leader_but(group *g, int skip, int ms)
{
    return tl_group_leader(g, skip, ms);
}

/* ---- requests through any member ---- */

/* method path on member i, following redirects (up to 3, as curl -L
 * does for 307: same method and body). The status (0: no answer); *out
 * (may be NULL) the JSON body. */
static long call_on(group *g, int i, const char *method, const char *path, const char *body,
                    int timeout_ms, json_t **out)
{
    return tl_raft_call(g->http[i], method, path, body, timeout_ms, out);
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
        int i = k % g->n;
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
    char path[128], body[1200];
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

static void failover_keeps_every_acknowledged_write(void **state)
{
    (void)state;
    group g;
    group_start(&g, true, NULL);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    int f = (l + 1) % NODES;
    member_view v;
    assert_true(tl_group_knows_leader(&g, f, l, 10000)); /* else it answers 503 not_leader */
    assert_true(member_health(&g, f, &v));
    assert_false(v.leader);

    /* A write through the leader, one through a follower (passed on to
     * the leader, no redirect). */
    assert_int_equal(call_on(&g, l, "PUT", "/v1/kv/via-leader", "{\"value\":\"L\"}", REQ_MS, NULL),
                     200);
    char url[128], loc[256];
    tl_resp r;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/kv/via-follower", g.http[f]);
    assert_int_equal(tl_http("PUT", url, "{\"value\":\"F\"}", 13, "application/json", REQ_MS, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_null(tl_resp_header(&r, "Location", loc, sizeof loc));
    tl_resp_free(&r);
    must_read(&g, "via-leader", "L");
    must_read(&g, "via-follower", "F");

    /* A session with a buffered write, on this leader. */
    char sid[128], path[256];
    begin_session(&g, sid, sizeof sid);
    snprintf(path, sizeof path, "/v1/txns/%s/keys/in-session", sid);
    assert_int_equal(call_on(&g, l, "PUT", path, "{\"value\":\"S\"}", REQ_MS, NULL), 204);

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
    assert_int_equal(call_on(&g, l, "POST", path, body, REQ_MS, NULL), 200);
    snprintf(path, sizeof path, "/v1/txns/%s/commit", big);
    assert_int_equal(call_on(&g, l, "POST", path, NULL, 1500, NULL), 0); /* held there */
    /* Its prewrites all land (a loaded machine may take a while). */
    long held = 0;
    for (uint64_t t0 = time_mono_ms(); time_mono_ms() - t0 < 60000; time_sleep_ms(100))
        if ((held = tl_group_locks(&g, l)) >= BIG_TXN_KEYS)
            break;
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
    assert_int_equal(call_on(&g, l2, "POST", path, NULL, REQ_MS, &j), 410);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                        "txn_expired");
    json_decref(j);

    /* Its prewrite locks belong to a dead owner: the new leader's janitor
     * rolls them back. */
    uint64_t end = time_mono_ms() + 20000;
    long left;
    while ((left = tl_group_locks(&g, l2)) != 0 && time_mono_ms() < end)
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

/* ---- the bank and the SI checker through kills ---- */

typedef struct {
    group *g;
    int client;
    atomic_bool *stop;
    int acked[MAX_TRANSFERS];
    atomic_int nacked;      /* read by the test while the client runs */
    int tried;
} bank_client;

/* One transfer: read both accounts (any member), then a compare-and-set
 * write of both and of the transfer's marker through member `via` or the
 * next living one after it; 200: acknowledged. The bank's
 * clients spread their writes over the members, as clients behind a
 * balancer do: a member cut off from the rest knows no leader and refuses
 * what it is sent, and the others go on. */
static long transfer(group *g, int from, int to, const char *marker, int via)
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
    for (int k = 0; k < g->n; k++) {
        int i = (via + k) % g->n;
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
    for (int t = 0; t < MAX_TRANSFERS && !atomic_load(c->stop); t++) {
        int from = (int)(rand_r(&seed) % ACCOUNTS), to = (int)(rand_r(&seed) % (ACCOUNTS - 1));
        to += to >= from;
        char marker[64];
        snprintf(marker, sizeof marker, "mark-%d-%d", c->client, t);
        c->tried++;
        if (transfer(c->g, from, to, marker, c->client + t) == 200) {
            c->acked[atomic_load(&c->nacked)] = t;
            atomic_fetch_add(&c->nacked, 1);
        }
    }
    return NULL;
}

/* ACCOUNTS accounts of 100 each. */
static void bank_open(group *g)
{
    for (int a = 0; a < ACCOUNTS; a++) {
        char key[32];
        snprintf(key, sizeof key, "acct-%d", a);
        put(g, key, "100");
    }
}

/* CLIENTS bank clients on the group until *stop. */
static void bank_start(group *g, bank_client *bank, pthread_t *t, atomic_bool *stop)
{
    for (int c = 0; c < CLIENTS; c++) {
        bank[c] = (bank_client){.g = g, .client = c, .stop = stop};
        assert_int_equal(tl_thread_start(&t[c], bank_main, &bank[c]), 0);
    }
}

/* Transfers acknowledged so far, every client's. */
static int bank_acked(bank_client *bank)
{
    int n = 0;
    for (int c = 0; c < CLIENTS; c++)
        n += atomic_load(&bank[c].nacked);
    return n;
}

/* Wait up to ms until a transfer is acknowledged after `since` were (the
 * group takes writes again); false if none is. */
static bool bank_goes_on(bank_client *bank, int since, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    while (bank_acked(bank) <= since && time_mono_ms() < end)
        time_sleep_ms(50);
    return bank_acked(bank) > since;
}

/* bank_goes_on, and when it does not: every member's view of its regions
 * (each one's leader and term) and the members' logs, to tell why. */
static bool bank_goes_on_or_tell(group *g, bank_client *bank, int since, int ms)
{
    if (bank_goes_on(bank, since, ms))
        return true;
    for (int i = 0; i < g->n; i++) {
        json_t *j = NULL;
        long st = g->pid[i] > 0
                      ? call_on(g, i, "GET", "/v1/regions?local=true", NULL, 5000, &j)
                      : 0;
        char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
        printf("# stalled: member %d regions %ld %s\n", i + 1, st, text != NULL ? text : "");
        free(text);
        json_decref(j);
    }
    tl_group_dump_logs(g);
    return false;
}

/* keys (a JSON array, taken) read in one read-only transaction (one
 * snapshot) through any member: its reads, for the caller to free. */
static json_t *read_all(group *g, json_t *keys)
{
    json_t *req = json_pack("{s:o}", "reads", keys);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    json_t *j = NULL;
    assert_int_equal(call_any(g, "POST", "/v1/txn", body, 20000, &j), 200);
    free(body);
    json_t *reads = json_incref(json_object_get(j, "reads"));
    json_decref(j);
    return reads;
}

/* The total of the accounts, read in one snapshot. */
static long bank_total(group *g)
{
    json_t *keys = json_array(), *reads, *r;
    for (int a = 0; a < ACCOUNTS; a++)
        json_array_append_new(keys, json_sprintf("acct-%d", a));
    reads = read_all(g, keys);
    assert_int_equal(json_array_size(reads), ACCOUNTS);
    long total = 0;
    size_t i;
    json_array_foreach(reads, i, r) {
        assert_true(json_is_true(json_object_get(r, "found")));
        total += strtol(json_string_value(json_object_get(r, "value")), NULL, 10);
    }
    json_decref(reads);
    return total;
}

#define MARKS_AT_ONCE 200 /* markers read in one transaction */

/* Join the clients (*stop set); the money is conserved (one snapshot's
 * total) and every acknowledged transfer's marker is there. Printed;
 * how many were acknowledged. */
static int bank_check(group *g, bank_client *bank, pthread_t *t)
{
    int acked = 0, tried = 0;
    for (int c = 0; c < CLIENTS; c++)
        tl_thread_join(t[c], NULL);
    long total = bank_total(g);
    for (int c = 0; c < CLIENTS; c++) {
        tried += bank[c].tried;
        int n = atomic_load(&bank[c].nacked);
        for (int from = 0; from < n; from += MARKS_AT_ONCE) {
            int upto = from + MARKS_AT_ONCE < n ? from + MARKS_AT_ONCE : n;
            json_t *keys = json_array(), *reads, *r;
            for (int k = from; k < upto; k++)
                json_array_append_new(keys, json_sprintf("mark-%d-%d", c, bank[c].acked[k]));
            reads = read_all(g, keys);
            assert_int_equal(json_array_size(reads), upto - from);
            size_t i;
            json_array_foreach(reads, i, r)
                if (!json_is_true(json_object_get(r, "found")))
                    fail_msg("acknowledged transfer %d of client %d is lost",
                             bank[c].acked[from + (int)i], c);
            json_decref(reads);
        }
        acked += n;
    }
    printf("# bank: %d of %d transfers acknowledged, all there, total %ld (in one snapshot)\n",
           acked, tried, total);
    assert_int_equal(total, ACCOUNTS * 100);
    assert_true(acked > 0);
    return acked;
}

/* No lock outlives its owner: within a lease (10 s) and janitor rounds
 * the leader lists none. */
static void no_lock_left(group *g)
{
    int l = leader_but(g, -1, 15000);
    assert_true(l >= 0);
    uint64_t end = time_mono_ms() + 20000;
    long left;
    while ((left = tl_group_locks(g, l)) != 0 && time_mono_ms() < end)
        time_sleep_ms(200);
    printf("# locks left: %ld\n", left);
    assert_int_equal(left, 0);
}

/* The SI clients' calls: to one member, following its redirect; a member
 * that does not answer sends the client's next call to the next member
 * (the call itself is not retried: it may have been done). */
typedef struct {
    group *g;
    int member;
    unsigned id;
    atomic_bool *stop;
    si_history *h;
    unsigned committed;
} si_client;

static long si_call(void *ctx, const char *method, const char *path, const char *body,
                    json_t **out)
{
    si_client *c = ctx;
    for (int k = 0; k < c->g->n && c->g->pid[c->member] <= 0; k++)
        c->member = (c->member + 1) % c->g->n;
    long st = call_on(c->g, c->member, method, path, body, 8000, out);
    if (st == 0 || st == 503)
        c->member = (c->member + 1) % c->g->n;
    return st;
}

static void *si_main(void *arg)
{
    si_client *c = arg;
    /* Rounds of 20 transactions until told to stop (bounded: 200 rounds). */
    for (unsigned round = 0; round < 200 && !atomic_load(c->stop); round++)
        c->committed += si_run_client(c->h, si_call, c, c->id * 1000 + round, 20, 6,
                                      c->id * 31 + round, 0);
    return NULL;
}

/* SI_CLIENTS checker clients on the group, one per member to begin
 * with, until *stop: their shared history. */
static si_history *si_clients_start(group *g, si_client *si, pthread_t *t, atomic_bool *stop)
{
    si_history *h = si_new(SI_CLIENTS * 200 * 20);
    assert_non_null(h);
    for (int c = 0; c < SI_CLIENTS; c++) {
        si[c] = (si_client){.g = g, .member = c % NODES, .id = (unsigned)c + 1, .stop = stop,
                            .h = h};
        assert_int_equal(tl_thread_start(&t[c], si_main, &si[c]), 0);
    }
    return h;
}

/* Join them (*stop set): how many transactions they saw committed. */
static unsigned si_clients_join(si_client *si, pthread_t *t)
{
    unsigned committed = 0;
    for (int c = 0; c < SI_CLIENTS; c++) {
        tl_thread_join(t[c], NULL);
        committed += si[c].committed;
    }
    return committed;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Kill member i (the leader when leader, else a follower); for a leader,
 * the time from the kill to the first write committed through the group.
 * Then it comes back. */
static uint64_t kill_and_restart(group *g, int i, bool leader)
{
    kill_member(g, i);
    uint64_t t0 = time_mono_ms(), took = 0;
    if (leader) {
        assert_int_equal(call_any(g, "PUT", "/v1/kv/failover-probe", "{\"value\":\"p\"}", 30000,
                                  NULL),
                         200);
        took = time_mono_ms() - t0;
    }
    node_start(g, i);
    return took;
}

/* A gauge of member i's /metrics (-1: not there). */
static double metric_on(group *g, int i, const char *name)
{
    char url[96], pat[128];
    tl_resp r;
    double v = -1;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", g->http[i]);
    snprintf(pat, sizeof pat, "\n%s ", name);
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, REQ_MS, &r), 0);
    const char *p = r.body != NULL ? strstr(r.body, pat) : NULL;
    if (p != NULL)
        v = strtod(p + strlen(pat), NULL);
    tl_resp_free(&r);
    return v;
}

/* Splits made through the kills (a command in the log: DESIGN §6.2), one
 * after each of the first leader kills. */
static const char *const kill_splits[] = {"acct-2", "si1", "acct-7", "si4", "si8", "si2"};
#define KILL_SPLITS (int)(sizeof kill_splits / sizeof kill_splits[0])

/* Split at key through whichever member answers: 200, or 409 when a try
 * whose answer was lost in a kill had made it already. */
static void split_at(group *g, const char *key)
{
    char body[64];
    snprintf(body, sizeof body, "{\"key\":\"%s\"}", key);
    long st = call_any(g, "POST", "/v1/regions/split", body, 30000, NULL);
    if (st != 200 && st != 409)
        fail_msg("split at %s: %ld", key, st);
}

/* Member i's own region map (GET /v1/regions?local=true) as
 * "id:epoch:start|...", into out; false when it did not answer. */
static bool map_of(group *g, int i, char *out, size_t cap)
{
    json_t *j = NULL, *r;
    size_t k;
    out[0] = '\0';
    if (call_on(g, i, "GET", "/v1/regions?local=true", NULL, REQ_MS, &j) != 200) {
        json_decref(j);
        return false;
    }
    json_array_foreach(json_object_get(j, "regions"), k, r) {
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%lld:%lld:%s|",
                 (long long)json_integer_value(json_object_get(r, "id")),
                 (long long)json_integer_value(json_object_get(r, "epoch")),
                 json_string_value(json_object_get(r, "start")));
    }
    json_decref(j);
    return true;
}

/* Every member's own map, once they all hold the same (within 30 s: each
 * catches up with the log), into want ("id:epoch:start|..."); its
 * regions. */
static int same_map_everywhere(group *g, char *want, size_t cap)
{
    char got[2048];
    uint64_t end = time_mono_ms() + 30000;
    bool same = false;
    while (!same && time_mono_ms() < end) {
        same = map_of(g, 0, want, cap);
        for (int i = 1; same && i < g->n; i++)
            same = map_of(g, i, got, sizeof got) && strcmp(got, want) == 0;
        if (!same)
            time_sleep_ms(200);
    }
    printf("# every member's region map: %s\n", want);
    if (!same)
        tl_group_dump_logs(g); /* why a member did not answer or differs */
    assert_true(same);
    int n = 0;
    for (const char *p = want; (p = strchr(p, '|')) != NULL; p++)
        n++;
    return n;
}

/* Every member holds the same map, with every split in it: the splits
 * were applied from the log at the same index on each, kills and
 * restarts between them. */
static void every_member_has_the_splits(group *g, int regions)
{
    char want[2048];
    assert_int_equal(same_map_everywhere(g, want, sizeof want), regions);
    for (int k = 0; k < KILL_SPLITS; k++) {
        char start[32];
        snprintf(start, sizeof start, ":%s|", kill_splits[k]);
        assert_non_null(strstr(want, start));
    }
}

/* The checker's verdict on h (freed): every snapshot read exact, no
 * refused commit seen, no lost update; as many committed as the clients
 * saw. Printed. */
static void si_verdict(si_history *h, unsigned si_committed)
{
    si_report r = si_check(h);
    printf("# snapshot isolation: %u transactions, %u committed, %u refused, %u unknown (%u "
           "seen committed), %u reads checked, %u anomalies\n",
           r.txns, r.committed, r.aborted, r.unknown, r.inferred, r.reads, r.anomalies);
    assert_int_equal(r.anomalies, 0);
    assert_int_equal(r.committed, si_committed);
    assert_true(r.committed > 0);
    si_free(h);
}

/* The mixed load most kill tests run: the bank's CLIENTS (accounts opened
 * first) and the SI checker's SI_CLIENTS, until load_stop. One at a time
 * (the bank's clients are static: too big for a test's stack). */
typedef struct {
    atomic_bool stop;
    bank_client *bank;
    si_client si[SI_CLIENTS];
    pthread_t bt[CLIENTS], st[SI_CLIENTS];
    si_history *h;
} mixed_load;

static void load_start(group *g, mixed_load *w)
{
    static bank_client bank[CLIENTS];
    bank_open(g);
    atomic_init(&w->stop, false);
    w->bank = bank;
    bank_start(g, w->bank, w->bt, &w->stop);
    w->h = si_clients_start(g, w->si, w->st, &w->stop);
}

/* Stop the clients: how many transactions the SI clients saw committed. */
static unsigned load_stop(mixed_load *w)
{
    atomic_store(&w->stop, true);
    return si_clients_join(w->si, w->st);
}

/* After load_stop: money conserved, every acknowledged transfer there
 * (bank_check), no anomaly in the history (freed), no lock left. */
static void load_check(group *g, mixed_load *w, unsigned si_committed)
{
    bank_check(g, w->bank, w->bt);
    si_verdict(w->h, si_committed);
    w->h = NULL;
    no_lock_left(g);
}

static void bank_and_snapshot_isolation_through_kills(void **state)
{
    (void)state;
    group g;
    /* Every commit two-phase: prewrites, commit points and the janitor's
     * resolutions go through Raft across the kills; the timestamps come
     * from three oracles as a Raft group of their own. The keyspace is cut
     * into five regions (acct-0..4 | acct-5..9 | si0..2 and si10.. |
     * si3..5 | si6..9), so that many transactions span two: each batch is
     * one region's (DESIGN §6.2); six more splits come through the kills,
     * and every member ends with the same eleven regions. */
    const char *extra[] = {"--one-pc", "off", "--region-split-keys", "acct-5,si,si3,si6", NULL};
    group_start_over(&g, NULL, extra, 3);
    assert_true(leader_but(&g, -1, 15000) >= 0);
    static mixed_load w;
    load_start(&g, &w);
    /* LEADER_KILLS kills of the leader, and a follower after every third. */
    uint64_t took[LEADER_KILLS];
    int follower_kills = 0;
    for (int k = 0; k < LEADER_KILLS; k++) {
        time_sleep_ms(700);
        int l = leader_but(&g, -1, 30000);
        assert_true(l >= 0);
        took[k] = kill_and_restart(&g, l, true);
        if (k < KILL_SPLITS)
            split_at(&g, kill_splits[k]);
        if (k % 3 == 2) {
            time_sleep_ms(500);
            int lf = leader_but(&g, -1, 30000);
            assert_true(lf >= 0);
            kill_and_restart(&g, (lf + 1) % NODES, false);
            follower_kills++;
        }
    }
    time_sleep_ms(1000);
    unsigned si_committed = load_stop(&w);
    qsort(took, LEADER_KILLS, sizeof(took[0]), cmp_u64);
    printf("# %d leader kills, %d follower kills: from a leader's kill -9 to the next write "
           "committed through the group: median %llu ms, max %llu ms\n",
           LEADER_KILLS, follower_kills, (unsigned long long)took[LEADER_KILLS / 2],
           (unsigned long long)took[LEADER_KILLS - 1]);

    double cross = 0;
    for (int i = 0; i < NODES; i++)
        cross += metric_on(&g, i, "percolator_commits_cross_region_total");
    printf("# %.0f commits across regions since each member's last start\n", cross);

    /* Money is conserved; every acknowledged transfer is there. */
    load_check(&g, &w, si_committed);
    every_member_has_the_splits(&g, 5 + KILL_SPLITS);
    group_stop(&g);
}

/* Within 30 s every region on member i names one leader of its own
 * group (--region-logs: each region's "leader"), the same for all: the
 * leaders are gathered on region 1's. That leader's id. */
static unsigned leaders_gathered(group *g, int i)
{
    uint64_t end = time_mono_ms() + 30000;
    unsigned leader = 0;
    for (bool same = false; !same && time_mono_ms() < end;) {
        json_t *j = NULL, *r;
        size_t k, n = 0;
        same = call_on(g, i, "GET", "/v1/regions?local=true", NULL, 5000, &j) == 200;
        json_t *list = json_object_get(j, "regions");
        leader = (unsigned)json_integer_value(json_object_get(json_array_get(list, 0), "leader"));
        json_array_foreach(list, k, r) {
            json_t *l = json_object_get(r, "leader");
            same = same && json_is_integer(l) && json_integer_value(l) == leader &&
                   json_integer_value(json_object_get(r, "term")) > 0;
            n++;
        }
        same = same && leader != 0 && n > 1;
        json_decref(j);
        if (!same)
            time_sleep_ms(200);
    }
    printf("# member %d: every region's group led by member %u\n", i + 1, leader);
    return leader;
}

/* With --region-logs (DESIGN §6.5 step 6 g, h): each of the five
 * regions is a Raft group of its own over one node network per member,
 * their leaders gathered on region 1's; the bank and the SI checker
 * through leader kills, every commit two-phase, so that transfers between
 * acct-4 and acct-5 prewrite and commit in two regions' logs. After each
 * kill a split (POST /v1/regions/split: a batch of the region's own log,
 * the new region's group made by every member that applied it, its id
 * from the placement driver, the three oracles), so the kills also land
 * just after splits; every member ends with the same nine regions, each
 * led with the rest. */
static void region_logs_keep_the_bank_and_snapshot_isolation_through_kills(void **state)
{
    (void)state;
    group g;
    /* GC through it all (gc_regions.h: each region's oldest lock and
     * parts where it is led, here every region's leader). */
    const char *extra[] = {"--one-pc", "off", "--region-logs", "--region-split-keys",
                           "acct-5,si,si3,si6", "--gc-retention-ms", "1000", NULL};
    group_start_over(&g, NULL, extra, 3);
    assert_true(leader_but(&g, -1, 30000) >= 0);
    static mixed_load w;
    load_start(&g, &w);
    for (int k = 0; k < REGION_LOGS_KILLS; k++) {
        time_sleep_ms(1500);
        int l = leader_but(&g, -1, 30000);
        assert_true(l >= 0);
        int acked = bank_acked(w.bank);
        kill_and_restart(&g, l, true);
        split_at(&g, kill_splits[k]);
        assert_true(bank_goes_on(w.bank, acked, 60000));
    }
    time_sleep_ms(1000);
    unsigned si_committed = load_stop(&w);
    double cross = 0;
    for (int i = 0; i < NODES; i++)
        cross += metric_on(&g, i, "percolator_commits_cross_region_total");
    printf("# region logs: %d leader kills, %.0f commits across regions since each member's "
           "last start\n", REGION_LOGS_KILLS, cross);
    load_check(&g, &w, si_committed);
    /* The bank's older versions go, region by region (a pass every half
     * retention on region 1's leader; bounded wait). */
    int lg = leader_but(&g, -1, 30000);
    assert_true(lg >= 0);
    uint64_t gc_end = time_mono_ms() + 30000;
    double removed;
    while ((removed = metric_on(&g, lg, "percolator_gc_versions_removed_total")) < 1 &&
           time_mono_ms() < gc_end)
        time_sleep_ms(300);
    printf("# gc: %.0f versions removed by member %d since its last start\n", removed, lg + 1);
    assert_true(removed >= 1);
    char map[2048];
    assert_int_equal(same_map_everywhere(&g, map, sizeof map), 5 + REGION_LOGS_KILLS);
    for (int i = 0; i < NODES; i++)
        assert_int_not_equal(leaders_gathered(&g, i), 0);
    /* a change of members would be every region's: refused for now */
    int l = leader_but(&g, -1, 30000);
    assert_true(l >= 0);
    assert_int_equal(call_on(&g, l, "POST", "/v1/members", "{\"id\":3}", 5000, NULL), 409);
    /* A store of a log per region never runs as one log; --region-logs
     * is for a member only. Each refused at start. */
    int f = (l + 1) % NODES;
    kill_member(&g, f);
    char listen[32], data[600], id[16];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", g.http[f]);
    snprintf(data, sizeof data, "%s/n%d", g.dir, f + 1);
    snprintf(id, sizeof id, "%d", f + 1);
    const char *one_log[] = {"--listen", listen, "--data-dir", data, "--oracle", g.oracle_urls,
                             "--raft-id", id, "--raft-peers", g.peers, "--raft-urls", g.urls,
                             NULL};
    const char *alone[] = {"--listen", listen, "--data-dir", data, "--oracle", g.oracle_urls,
                           "--region-logs", NULL};
    const char *other_keys[] = {"--listen", listen, "--data-dir", data, "--oracle",
                                g.oracle_urls, "--raft-id", id, "--raft-peers", g.peers,
                                "--raft-urls", g.urls, "--region-logs", "--region-split-keys",
                                "acct-3", NULL};
    tl_run_result out;
    assert_int_equal(tl_run("percolator-service", one_log, NULL, NULL, 0, 30000, &out), 0);
    if (out.status != 1 || strstr(out.err, "--region-logs") == NULL)
        fail_msg("a store of region logs run as one log: exit %d, %s", out.status, out.err);
    tl_run_free(&out);
    assert_int_equal(tl_run("percolator-service", alone, NULL, NULL, 0, 30000, &out), 0);
    if (out.status != 2 || strstr(out.err, "--region-logs") == NULL)
        fail_msg("--region-logs alone: exit %d, %s", out.status, out.err);
    tl_run_free(&out);
    /* other split keys than the store was made with */
    assert_int_equal(tl_run("percolator-service", other_keys, NULL, NULL, 0, 30000, &out), 0);
    if (out.status != 1 || strstr(out.err, "--region-split-keys differs") == NULL)
        fail_msg("a store of region logs with other split keys: exit %d, %s", out.status,
                 out.err);
    tl_run_free(&out);
    /* A new store first started with other split keys: its node network
     * and its peers' are of different realms (the seeds' digests), so
     * they never exchange a record, and it says why. Run for 8 s. */
    char fresh[640];
    snprintf(fresh, sizeof fresh, "%s/n%d-other-keys", g.dir, f + 1);
    other_keys[3] = fresh;
    assert_int_equal(tl_run("percolator-service", other_keys, NULL, NULL, 0, 8000, &out), 0);
    if (out.status != -1 || strstr(out.err, "is of another cluster") == NULL)
        fail_msg("a new store with other split keys: exit %d, %s", out.status, out.err);
    tl_run_free(&out);
    /* A new store whose raft dir holds one log's state (a one-log member
     * that never applied an entry): refused too. */
    char leftover[700];
    snprintf(fresh, sizeof fresh, "%s/n%d-one-log", g.dir, f + 1);
    snprintf(leftover, sizeof leftover, "%s/raft", fresh);
    assert_int_equal(mkdir(fresh, 0700), 0);
    assert_int_equal(mkdir(leftover, 0700), 0);
    snprintf(leftover, sizeof leftover, "%s/raft/metadata1", fresh);
    FILE *meta = fopen(leftover, "w");
    assert_non_null(meta);
    fclose(meta);
    assert_int_equal(tl_run("percolator-service", other_keys, NULL, NULL, 0, 30000, &out), 0);
    if (out.status != 1 || strstr(out.err, "Raft state of one log") == NULL)
        fail_msg("a raft dir of one log under --region-logs: exit %d, %s", out.status, out.err);
    tl_run_free(&out);
    node_start(&g, f); /* with its flags, it goes on */
    group_stop(&g);
}

/* Within 30 s, leader l's GET /v1/members (region 1's group, with
 * --region-logs) says member i does not answer, or lags more than a
 * split allows (256 entries: a member cut off one way still sends, but
 * takes nothing). */
static bool not_caught_up(group *g, int l, int i)
{
    bool behind = false;
    for (uint64_t end = time_mono_ms() + 30000; !behind && time_mono_ms() < end;) {
        json_t *j = NULL, *m;
        size_t k;
        if (call_on(g, l, "GET", "/v1/members", NULL, REQ_MS, &j) == 200)
            json_array_foreach(json_object_get(j, "members"), k, m) {
                if (json_integer_value(json_object_get(m, "id")) == i + 1)
                    behind = json_is_false(json_object_get(m, "answers")) ||
                             json_integer_value(json_object_get(m, "lag")) > 256;
            }
        json_decref(j);
        if (!behind)
            time_sleep_ms(100);
    }
    return behind;
}

/* With --region-logs, every member that applies a split dies (the
 * failpoint before_region_group: SIGKILL after the split is applied and
 * before the new region's group is started). Restarted without it, each
 * finds the new region's row and starts its group (§7.3's probes make it
 * once all three answer), and the new region serves: a key written
 * before the split is read through the new region's group, and one
 * written after it too, on every member's map alike. */
static void region_logs_members_killed_between_a_split_and_its_new_group(void **state)
{
    (void)state;
    group g;
    const char *extra[] = {"--region-logs", "--region-split-keys", "m", NULL};
    group_start_over(&g, "PERCOLATOR_FAILPOINT=before_region_group", extra, 3);
    int l = leader_but(&g, -1, 30000);
    assert_true(l >= 0);
    assert_int_equal(call_any(&g, "PUT", "/v1/kv/t-before", "{\"value\":\"b\"}", 30000, NULL),
                     200);
    /* The split goes to region 2's leader, region 1's once gathered (a 503
     * before: asked again); whoever applies it dies, the leader perhaps
     * before it answers. */
    for (uint64_t end = time_mono_ms() + 30000; time_mono_ms() < end;) {
        l = leader_but(&g, -1, 10000);
        if (l < 0 || call_on(&g, l, "POST", "/v1/regions/split", "{\"key\":\"s\"}", 10000,
                             NULL) != 503)
            break;
        time_sleep_ms(300);
    }
    /* Each dies once it applies the split: some only after the others
     * came back (they had no quorum before). A member that died is
     * restarted without the failpoint; the watch ends 20 s after the last
     * death, or when all died. */
    int died = 0;
    g.env = NULL;
    for (uint64_t quiet = time_mono_ms() + 30000; died < NODES && time_mono_ms() < quiet;) {
        for (int i = 0; i < NODES; i++) {
            if (g.pid[i] == 0 || tl_wait_exit(g.pid[i], 100) != 128 + 9)
                continue;
            g.pid[i] = 0;
            died++;
            quiet = time_mono_ms() + 20000;
            node_start(&g, i);
        }
    }
    printf("# %d member(s) died between the split and its new group\n", died);
    assert_true(died >= 1);
    char map[512];
    assert_int_equal(same_map_everywhere(&g, map, sizeof map), 3);
    for (int i = 0; i < NODES; i++)
        assert_int_not_equal(leaders_gathered(&g, i), 0);
    assert_int_equal(call_any(&g, "PUT", "/v1/kv/t-after", "{\"value\":\"a\"}", 30000, NULL),
                     200);
    must_read(&g, "t-before", "b");
    must_read(&g, "t-after", "a");

    /* With a member down, a split waits (503 split_unavailable, nothing
     * proposed): its new group could not be made without it. Back, the
     * split goes through. Region 1's (split at "c"): its group's view of
     * the members is the one GET /v1/members shows. */
    int l2 = leader_but(&g, -1, 30000);
    assert_true(l2 >= 0);
    int down = (l2 + 1) % NODES;
    kill_member(&g, down);
    assert_true(not_caught_up(&g, l2, down));
    json_t *refusal = NULL;
    assert_int_equal(call_on(&g, l2, "POST", "/v1/regions/split", "{\"key\":\"c\"}", 10000,
                             &refusal),
                     503);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(refusal, "error"), "code")),
        "split_unavailable");
    json_decref(refusal);
    assert_true(map_of(&g, l2, map, sizeof map));
    assert_null(strstr(map, ":c|")); /* nothing proposed */
    node_start(&g, down);
    assert_int_equal(call_any(&g, "POST", "/v1/regions/split", "{\"key\":\"c\"}", 30000, NULL),
                     200);
    assert_int_equal(same_map_everywhere(&g, map, sizeof map), 4);
    group_stop(&g);
}

/* Member i leads every region within a few leader kills (leaders are
 * gathered on region 1's): kill whoever leads, restart it once another
 * leads, until i does. Whether it does. */
/* Member i (0-based) leads region 1, and with it (gathered) every
 * region: the lead is handed to it (POST /v1/leader); a hand-off refused
 * (the member still catching up) is asked again, for up to a minute. */
static bool lead_with(group *g, int i)
{
    uint64_t end = time_mono_ms() + 60000;
    while (time_mono_ms() < end) {
        int l = leader_but(g, -1, 30000);
        if (l < 0)
            return false;
        if (l == i)
            return leaders_gathered(g, i) == (unsigned)i + 1;
        char body[32];
        snprintf(body, sizeof body, "{\"id\":%d}", i + 1);
        long st = call_on(g, l, "POST", "/v1/leader", body, 15000, NULL);
        printf("# region 1's lead from member %d to member %d: %ld\n", l + 1, i + 1, st);
        time_sleep_ms(500);
    }
    return false;
}

/* Step k (DESIGN §6.5): a member that missed a split makes the new
 * region's replica from a peer's image. The member is killed and region
 * 1 split at "g" while its leader still counts it as answering (two
 * election timeouts), so the split commits on the other two only; 120
 * writes to region 1 then compact its log past the split (an image every
 * 32 entries). Back, the member catches up by region 1's image, which
 * narrows region 1 and lacks the new region's row: a hole. It asks a
 * peer, installs the new region's image as the split left it, and the
 * three make the new region's group. Then the member leads, and the keys
 * written before the split (two of them while it was down) read back
 * from its own store. */
static void region_logs_a_member_that_missed_a_split_makes_its_replica(void **state)
{
    (void)state;
    group g;
    const char *extra[] = {"--region-logs", "--region-split-keys", "m", "--raft-snapshot-entries",
                           "32", NULL};
    group_start_over(&g, NULL, extra, 3);
    int l = leader_but(&g, -1, 30000);
    assert_true(l >= 0);
    char key[32], value[32];
    for (int k = 0; k < 10; k++) {
        snprintf(key, sizeof key, "h-%d", k);
        snprintf(value, sizeof value, "before-%d", k);
        put(&g, key, value);
    }
    int m = (l + 1) % NODES;
    long st = 0;
    char late[32] = "";
    for (int attempt = 0; attempt < 5 && st != 200; attempt++) {
        kill_member(&g, m);
        /* what the member never has but by the fill: h-0 rewritten, h-late */
        snprintf(late, sizeof late, "late-%d", attempt);
        put(&g, "h-0", late);
        put(&g, "h-late", late);
        st = call_on(&g, l, "POST", "/v1/regions/split", "{\"key\":\"g\"}", 10000, NULL);
        printf("# member %d killed, a split at g answered %ld\n", m + 1, st);
        if (st != 200) { /* 503: it was seen down already; back, and again */
            node_start(&g, m);
            time_sleep_ms(3000);
        }
    }
    assert_int_equal(st, 200);
    for (int k = 0; k < 120; k++) {
        snprintf(key, sizeof key, "a-%d", k);
        put(&g, key, "x");
    }
    node_start(&g, m);
    char map[512];
    assert_int_equal(same_map_everywhere(&g, map, sizeof map), 3);
    for (int i = 0; i < NODES; i++)
        assert_int_not_equal(leaders_gathered(&g, i), 0);
    double fills = metric_on(&g, m, "percolator_region_fills_total");
    printf("# member %d made %.0f replica(s) from a peer's image\n", m + 1, fills);
    assert_true(fills >= 1); /* not by the split's entry: the log was compacted past it */
    put(&g, "h-after", "after");

    /* Its replica is the others': read from its own store as leader
     * (h-0 and h-late as written while it was down, not as it had them). */
    assert_true(lead_with(&g, m));
    for (int k = 0; k < 12; k++) {
        json_t *j = NULL;
        snprintf(key, sizeof key, "/v1/kv/h-%d", k);
        snprintf(value, sizeof value, "before-%d", k);
        const char *want = k == 0 ? late : value;
        if (k == 10) {
            snprintf(key, sizeof key, "/v1/kv/h-late");
            want = late;
        } else if (k == 11) {
            snprintf(key, sizeof key, "/v1/kv/h-after");
            want = "after";
        }
        assert_int_equal(call_on(&g, m, "GET", key, NULL, 15000, &j), 200);
        assert_string_equal(json_string_value(json_object_get(j, "value")), want);
        json_decref(j);
    }
    group_stop(&g);
}

/* ---- actions on other keys in flight together ---- */

#define WRITERS 8
#define WRITES_EACH 30

typedef struct {
    group *g;
    int leader, id, acked, writes;
    bool blind;   /* else "if_commit_ts": 0 (must not exist): a worker's action */
} writer;

static void *writer_main(void *arg)
{
    writer *w = arg;
    for (int k = 0; k < w->writes; k++) {
        char path[64], body[64];
        snprintf(path, sizeof path, "/v1/kv/w%d-%d", w->id, k);
        snprintf(body, sizeof body, w->blind ? "{\"value\":\"%d\"}"
                                             : "{\"value\":\"%d\",\"if_commit_ts\":0}", k);
        w->acked += call_on(w->g, w->leader, "PUT", path, body, 10000, NULL) == 200;
    }
    return NULL;
}

/* WRITERS clients, each writing n keys of its own through member l. */
static void run_writers(group *g, int l, int n, bool blind)
{
    writer w[WRITERS];
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){.g = g, .leader = l, .id = i, .writes = n, .blind = blind};
        assert_int_equal(tl_thread_start(&t[i], writer_main, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        tl_thread_join(t[i], NULL);
        assert_int_equal(w[i].acked, n);
    }
}

static void writers_wrote(group *g, int n)
{
    for (int i = 0; i < WRITERS; i++)
        for (int k = 0; k < n; k += 7) {
            char key[32], want[16];
            snprintf(key, sizeof key, "w%d-%d", i, k);
            snprintf(want, sizeof want, "%d", k);
            must_read(g, key, want);
        }
}

/* Clients writing keys of their own through the leader: their actions
 * latch different keys, so they are proposed while others are in flight
 * (a write gate, one action between its read and its apply, never has
 * more than one). Every write is acknowledged and read back. */
static void writes_on_other_keys_are_in_flight_together(void **state)
{
    (void)state;
    group g;
    group_start(&g, false, NULL);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    run_writers(&g, l, WRITES_EACH, false);
    double most = metric_on(&g, l, "percolator_raft_proposals_in_flight_max");
    printf("# %d clients x %d writes: at most %g proposals in flight at once\n", WRITERS,
           WRITES_EACH, most);
    assert_true(most >= 2);
    writers_wrote(&g, WRITES_EACH);
    group_stop(&g);
}

#define BLIND_WRITES_EACH 10

/* Blind writes go to the committer (write_batch.h), whose round is one
 * Raft entry. The failpoint holds it 100 ms before each round, so the
 * clients' next writes, sent as soon as the last round answered them, all
 * wait in one round: about BLIND_WRITES_EACH entries for WRITERS times as
 * many writes (a quarter of the writes is the bound asserted, so that a
 * client slow to send splits a round without failing the test). */
static void blind_writes_arriving_together_share_one_entry(void **state)
{
    (void)state;
    group g;
    group_start_env(&g, "PERCOLATOR_FAILPOINT=write_batch_round=sleep:100", NULL);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    double batches0 = metric_on(&g, l, "percolator_raft_proposals_total");
    double entries0 = metric_on(&g, l, "percolator_raft_entries_total");
    run_writers(&g, l, BLIND_WRITES_EACH, true);
    double batches = metric_on(&g, l, "percolator_raft_proposals_total") - batches0;
    double entries = metric_on(&g, l, "percolator_raft_entries_total") - entries0;
    double rounds = metric_on(&g, l, "percolator_write_batch_size_count");
    printf("# %d clients x %d blind writes: %g rounds, %g batches proposed in %g raft "
           "entries\n", WRITERS, BLIND_WRITES_EACH, rounds, batches, entries);
    assert_true(entries >= 1 && entries <= batches);
    assert_true(batches <= WRITERS * BLIND_WRITES_EACH / 4);
    writers_wrote(&g, BLIND_WRITES_EACH);
    group_stop(&g);
}

/* ---- GC in a group ---- */

#define GC_VERSIONS 5
#define GC_TRAFFIC_MS 4000

/* Member i's GC safe point as its refusal of a read below it names it:
 * the read of `key` at ts answers 200 with the value (*safe_out left), or
 * 400 "ts T is below the garbage-collection safe point S" (*safe_out = S). */
static long read_at(group *g, int i, const char *key, double ts, char *value, size_t cap,
                    double *safe_out)
{
    char path[128];
    json_t *j = NULL;
    snprintf(path, sizeof path, "/v1/kv/%s?ts=%.0f", key, ts);
    long st = call_on(g, i, "GET", path, NULL, REQ_MS, &j);
    if (st == 200) {
        snprintf(value, cap, "%s", json_string_value(json_object_get(j, "value")));
    } else if (st == 400) {
        const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        const char *p = m != NULL ? strstr(m, "safe point ") : NULL;
        assert_non_null(p);
        *safe_out = strtod(p + strlen("safe point "), NULL);
    }
    json_decref(j);
    return st;
}

/* The leader's janitor collects garbage through Raft (DESIGN §9): the
 * safe point is proposed and applied by every member before the removals
 * are, so a new leader refuses reads below it and never misses a version
 * above it. GC takes no latches (§9 item 6: it removes only versions at
 * or below the safe point, every action in flight writes above it): the
 * snapshot-isolation clients commit two-phase transactions on a few keys
 * while it removes their older versions, and every read they made must
 * still be exactly the newest version below its snapshot. */
static void gc_runs_in_the_group(void **state)
{
    (void)state;
    group g;
    const char *extra[] = {"--gc-retention-ms", "1000", "--one-pc", "off", NULL};
    group_start(&g, false, extra);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    char v[16];
    for (int k = 1; k <= GC_VERSIONS; k++) {
        snprintf(v, sizeof v, "v%d", k);
        put(&g, "gc-key", v);
    }
    /* Two samples of the clock a retention apart, then a GC below the
     * older one. A pass may come while the safe point still lies between
     * the versions (the puts are slow under ASan) and remove only some;
     * the janitor raises it again every interval, so wait (bounded) until
     * every version but the newest is gone. */
    uint64_t end = time_mono_ms() + 30000;
    double removed = 0;
    while ((removed = metric_on(&g, l, "percolator_gc_versions_removed_total")) <
               GC_VERSIONS - 1 &&
           time_mono_ms() < end)
        time_sleep_ms(200);
    double safe = metric_on(&g, l, "percolator_gc_safe_point");
    printf("# gc in the group: %g versions removed, safe point %.0f\n", removed, safe);
    assert_true(removed >= GC_VERSIONS - 1);
    assert_true(safe > 1);

    /* GC alongside two-phase commits on the same few keys. */
    atomic_bool stop = false;
    si_client si[SI_CLIENTS];
    pthread_t st[SI_CLIENTS];
    si_history *h = si_clients_start(&g, si, st, &stop);
    time_sleep_ms(GC_TRAFFIC_MS);
    double during = metric_on(&g, l, "percolator_gc_versions_removed_total") - removed;
    atomic_store(&stop, true);
    unsigned si_committed = si_clients_join(si, st);
    si_report rep = si_check(h);
    printf("# gc alongside transactions: %g versions removed while %u transactions committed; "
           "%u reads checked, %u anomalies\n",
           during, rep.committed, rep.reads, rep.anomalies);
    assert_int_equal(rep.anomalies, 0);
    assert_int_equal(rep.committed, si_committed);
    assert_true(rep.committed > 0);
    si_free(h);
    /* Their shadowed versions go too, in a pass or two (bounded wait). */
    end = time_mono_ms() + 30000;
    double more = 0;
    while ((more = metric_on(&g, l, "percolator_gc_versions_removed_total") - removed) < 1 &&
           time_mono_ms() < end)
        time_sleep_ms(200);
    assert_true(more >= 1);
    safe = metric_on(&g, l, "percolator_gc_safe_point");

    /* The new leader refuses reads below the safe point it applied (at
     * least the one the old leader's metric showed: a pass may have raised
     * it since), and reads at it. */
    kill_member(&g, l);
    int l2 = leader_but(&g, l, 20000);
    assert_true(l2 >= 0);
    char value[32];
    double stored = 0;
    assert_int_equal(read_at(&g, l2, "gc-key", safe - 1, value, sizeof value, &stored), 400);
    assert_true(stored >= safe);
    long code = read_at(&g, l2, "gc-key", safe, value, sizeof value, &stored);
    if (code == 400)
        code = read_at(&g, l2, "gc-key", stored, value, sizeof value, &stored);
    assert_int_equal(code, 200);
    assert_string_equal(value, "v5");
    must_read(&g, "gc-key", "v5");
    group_stop(&g);
}

/* ---- the whole group killed ---- */

#define GROUP_KILL_WRITES 60

/* In a group, WiredTiger's own log is not flushed for a commit (the Raft
 * log, fsync'd by libraft on a quorum, is the write-ahead log: DESIGN §9).
 * Every member killed at once with kill -9 and restarted: each store
 * replays what it misses after its raft_applied index from the Raft log
 * (or installs its last snapshot), and every acknowledged write is there. */
static void the_whole_group_killed_keeps_acknowledged_writes(void **state)
{
    (void)state;
    group g;
    group_start(&g, false, NULL);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    for (int k = 0; k < GROUP_KILL_WRITES; k++) {
        char path[64], body[64];
        snprintf(path, sizeof path, "/v1/kv/gk-%d", k);
        snprintf(body, sizeof body, "{\"value\":\"%d\"}", k);
        assert_int_equal(call_on(&g, l, "PUT", path, body, 10000, NULL), 200);
    }
    /* And a two-phase commit (over the one-phase limit of keys). */
    char sid[128], path[256], body[8192];
    begin_session(&g, sid, sizeof sid);
    size_t n = (size_t)snprintf(body, sizeof body, "{\"writes\":[");
    for (int k = 0; k < BIG_TXN_KEYS; k++)
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"key\":\"gk2-%02d\",\"value\":\"t\"}",
                              k ? "," : "", k);
    snprintf(body + n, sizeof body - n, "]}");
    snprintf(path, sizeof path, "/v1/txns/%s/batch", sid);
    assert_int_equal(call_on(&g, l, "POST", path, body, 10000, NULL), 200);
    snprintf(path, sizeof path, "/v1/txns/%s/commit", sid);
    assert_int_equal(call_on(&g, l, "POST", path, NULL, 10000, NULL), 200);

    for (int i = 0; i < NODES; i++)
        kill_member(&g, i);
    for (int i = 0; i < NODES; i++)
        node_start(&g, i);
    assert_true(leader_but(&g, -1, 30000) >= 0);
    for (int k = 0; k < GROUP_KILL_WRITES; k++) {
        char key[32], want[16];
        snprintf(key, sizeof key, "gk-%d", k);
        snprintf(want, sizeof want, "%d", k);
        must_read(&g, key, want);
    }
    for (int k = 0; k < BIG_TXN_KEYS; k++) {
        char key[32];
        snprintf(key, sizeof key, "gk2-%02d", k);
        must_read(&g, key, "t");
    }
    group_stop(&g);
}

/* ---- a member that lost its data ---- */

/* Member i's store alone, as a single node on its data dir: what it holds
 * for keys wipe-0..n-1 must be what the group holds. */
static void same_as_group(group *g, int i, int n)
{
    char dir[600], listen[32], log[640], url[64];
    int port = tl_free_port();
    snprintf(dir, sizeof dir, "%s/n%d", g->dir, i + 1);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(log, sizeof log, "%s/alone.log", g->dir);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    const char *args[] = {"--listen", listen, "--data-dir", dir, "--oracle", g->oracle_urls, NULL};
    pid_t pid = tl_spawn("percolator-service", args, NULL, log);
    assert_true(pid > 0);
    assert_int_equal(tl_wait_health(url, pid, TL_START_MS), 0);
    for (int k = 0; k < n; k++) {
        char path[64], full[160];
        json_t *j = NULL;
        snprintf(path, sizeof path, "/v1/kv/wipe-%d", k);
        assert_int_equal(call_any(g, "GET", path, NULL, 15000, &j), 200);
        const char *want = json_string_value(json_object_get(j, "value"));
        tl_resp r;
        snprintf(full, sizeof full, "%s%s", url, path);
        assert_int_equal(tl_http("GET", full, NULL, 0, NULL, REQ_MS, &r), 0);
        assert_int_equal(r.status, 200);
        json_t *mine = json_loads(r.body, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(mine, "value")), want);
        json_decref(mine);
        json_decref(j);
        tl_resp_free(&r);
    }
    assert_int_equal(tl_stop(pid, TL_STOP_MS), 0);
}

/* Wait (30 s at most) until member w has applied all the leader has;
 * lead and back: the last views of the leader and of w. */
static void wait_caught_up(group *g, int w, member_view *lead, member_view *back)
{
    uint64_t end = time_mono_ms() + 30000;
    do {
        time_sleep_ms(100);
        int l = leader_but(g, -1, 15000);
        assert_true(l >= 0 && member_health(g, l, lead));
        assert_true(member_health(g, w, back));
    } while (back->applied < lead->applied && time_mono_ms() < end);
}

/* Member i's metric (a sample name as tl_metric takes it); -1 if none. */
static double member_metric(group *g, int i, const char *sample)
{
    char url[96];
    tl_resp r;
    double v = -1;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", g->http[i]);
    if (tl_http("GET", url, NULL, 0, NULL, REQ_MS, &r) == 0 && r.status == 200)
        v = tl_metric(r.body, sample);
    tl_resp_free(&r);
    return v;
}

static void a_wiped_member_catches_up_by_snapshot(void **state)
{
    (void)state;
    group g;
    const char *extra[] = {"--raft-snapshot-entries", "32", NULL};
    group_start(&g, false, extra);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    split_at(&g, "wipe-5"); /* an entry long compacted when the member is back */
    char key[32], value[32];
    for (int k = 0; k < 40; k++) {
        snprintf(key, sizeof key, "wipe-%d", k);
        snprintf(value, sizeof value, "v1-%d", k);
        put(&g, key, value);
    }
    /* A follower stops and loses its data dir (store and raft log). */
    int w = (l + 1) % NODES;
    assert_int_equal(tl_stop(g.pid[w], TL_STOP_MS), 0);
    g.pid[w] = 0;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/n%d", g.dir, w + 1);
    assert_int_equal(tl_rmtree(dir), 0);
    for (int k = 0; k < 120; k++) { /* past several snapshots: the log it needs is gone */
        snprintf(key, sizeof key, "wipe-%d", k);
        snprintf(value, sizeof value, "v2-%d", k);
        put(&g, key, value);
    }
    node_start(&g, w);
    member_view lead, back;
    wait_caught_up(&g, w, &lead, &back);
    double installs = member_metric(&g, w, "percolator_raft_snapshot_installs_total");
    printf("# wiped member: applied %lld (leader %lld), %g snapshot(s) installed\n",
           (long long)back.applied, (long long)lead.applied, installs);
    assert_true(back.applied >= lead.applied);
    assert_true(installs >= 1);
    /* The region map came with the image (splits.c svc_applied_lost). */
    char map[256];
    assert_true(map_of(&g, w, map, sizeof map));
    printf("# the wiped member's region map: %s\n", map);
    assert_string_equal(map, "1:2:|2:2:wipe-5|");
    /* Its store, read alone, holds what the group holds. */
    assert_int_equal(tl_stop(g.pid[w], TL_STOP_MS), 0);
    g.pid[w] = 0;
    same_as_group(&g, w, 120);
    /* Started again with its disk, it keeps its store: the snapshot
     * libraft restores at every start is older than what the store has
     * applied, and nothing is installed. */
    node_start(&g, w);
    wait_caught_up(&g, w, &lead, &back);
    assert_true(member_metric(&g, w, "percolator_raft_snapshot_installs_total") == 0);
    assert_true(map_of(&g, w, map, sizeof map)); /* from its store */
    assert_string_equal(map, "1:2:|2:2:wipe-5|");
    char log[620];
    snprintf(log, sizeof log, "%s/n%d.log", g.dir, w + 1);
    char *text = tl_read_file(log, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "is older than the store"));
    free(text);
    group_stop(&g);
}

/* Each member's images, as its log names them ("an image of ... at
 * index N"): at most max, in the order taken. */
static size_t images_of(group *g, int i, uint64_t *at, size_t max)
{
    char log[620];
    snprintf(log, sizeof log, "%s/n%d.log", g->dir, i + 1);
    char *text = tl_read_file(log, NULL);
    assert_non_null(text);
    size_t n = 0;
    for (const char *p = text; n < max && (p = strstr(p, "an image of ")) != NULL; p++) {
        const char *idx = strstr(p, " at index ");
        const char *eol = strchr(p, '\n');
        if (idx != NULL && (eol == NULL || idx < eol))
            at[n++] = strtoull(idx + 10, NULL, 10);
    }
    free(text);
    return n;
}

/* Members that applied the same entries would take their images at the
 * same index, all at once (a whole store read, compressed and written
 * three times over on machines that may share CPUs and disks). Staggered
 * (common/raft_host.c stagger), member i aims at indexes i/3 of a period
 * past the others': with a period of 60 entries, images of two members
 * are never within 5 entries of each other. */
static void images_are_taken_one_member_at_a_time(void **state)
{
    (void)state;
    group g;
    const char *extra[] = {"--raft-snapshot-entries", "60", NULL};
    group_start(&g, false, extra);
    assert_true(leader_but(&g, -1, 15000) >= 0);
    char key[32];
    for (int k = 0; k < 400; k++) { /* one after another: an entry each */
        snprintf(key, sizeof key, "img-%d", k);
        put(&g, key, "v");
    }
    /* The followers apply the last entries a moment later. */
    time_sleep_ms(1000);
    uint64_t at[NODES][64];
    size_t n[NODES];
    for (int i = 0; i < NODES; i++) {
        n[i] = images_of(&g, i, at[i], 64);
        printf("# member %d: %zu images at", i + 1, n[i]);
        for (size_t k = 0; k < n[i]; k++)
            printf(" %llu", (unsigned long long)at[i][k]);
        printf("\n");
        assert_true(n[i] >= 3);
    }
    for (int a = 0; a < NODES; a++)
        for (int b = a + 1; b < NODES; b++)
            for (size_t x = 0; x < n[a]; x++)
                for (size_t y = 0; y < n[b]; y++) {
                    uint64_t d = at[a][x] > at[b][y] ? at[a][x] - at[b][y] : at[b][y] - at[a][x];
                    if (d < 5)
                        fail_msg("members %d and %d took images at %llu and %llu", a + 1, b + 1,
                                 (unsigned long long)at[a][x], (unsigned long long)at[b][y]);
                }
    group_stop(&g);
}

/* An image installs in parts, and the store's applied index goes in with
 * the last (docs/DESIGN.md 4.10): a member that dies between two parts
 * (failpoint image_part: its log flushed, then SIGKILL) holds some of the
 * image's rows under its old index. Started again, libraft restores the
 * image it kept, which is installed whole; the member catches up, and its
 * store, read alone, holds what the group holds. */
static void a_crash_between_image_parts_heals(void **state)
{
    (void)state;
    group g;
    const char *extra[] = {"--raft-snapshot-entries", "32", NULL};
    group_start(&g, false, extra);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    /* 600 values of 20 KB: an image of more than one part (8 MB). */
    enum { KEYS = 600, VALUE = 20000 };
    char *body = malloc(VALUE + 64);
    assert_non_null(body);
    for (int k = 0; k < KEYS; k++) {
        int n = snprintf(body, 64, "{\"value\":\"wipe-%d-", k);
        memset(body + n, 'x', VALUE);
        strcpy(body + n + VALUE, "\"}");
        char path[64];
        snprintf(path, sizeof path, "/v1/kv/wipe-%d", k);
        assert_int_equal(call_any(&g, "PUT", path, body, 15000, NULL), 200);
    }
    free(body);
    int w = (l + 1) % NODES;
    assert_int_equal(tl_stop(g.pid[w], TL_STOP_MS), 0);
    g.pid[w] = 0;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/n%d", g.dir, w + 1);
    assert_int_equal(tl_rmtree(dir), 0);
    g.env = "PERCOLATOR_FAILPOINT=image_part";
    node_start(&g, w);
    g.env = NULL;
    int status = tl_wait_exit(g.pid[w], 60000);
    g.pid[w] = 0;
    char path[640];
    snprintf(path, sizeof path, "%s/n%d.log", g.dir, w + 1);
    char *log = tl_read_file(path, NULL);
    assert_non_null(log);
    bool crashed = strstr(log, "failpoint image_part: crashing now") != NULL;
    free(log);
    printf("# member %d died between two parts of the image (status %d)\n", w + 1, status);
    assert_true(crashed);
    assert_int_equal(status, 128 + SIGKILL);

    node_start(&g, w);
    assert_true(tl_raft_membership_is(g.http[w], "voter", 60000));
    member_view lead, back;
    wait_caught_up(&g, w, &lead, &back);
    double trimmed = member_metric(&g, w, "percolator_raft_appends_trimmed_total");
    printf("# started again: applied %lld (the leader %lld); %g AppendEntries made to start "
           "after its image\n", (long long)back.applied, (long long)lead.applied, trimmed);
    assert_true(back.applied >= lead.applied);
    assert_int_equal(tl_stop(g.pid[w], TL_STOP_MS), 0);
    g.pid[w] = 0;
    same_as_group(&g, w, KEYS);
    group_stop(&g);
}

/* The sequence that lost acknowledged writes before member identities
 * (docs/DESIGN.md 7.3): follower f cut off while the leader l acknowledges
 * 20 writes (committed by l and w); w loses its data dir and l dies. Back
 * on an empty dir, w must not vote (and is not ready): f, which misses
 * those writes, may not lead. Once l is back every write is there, and w
 * is caught up, promoted and ready (printed: how soon). Three times, with
 * other members in the roles. */
static void a_wiped_member_never_votes_before_it_is_caught_up(void **state)
{
    (void)state;
    if (!tl_raft_can_cut())
        fail_msg("this test needs iptables and root (make test installs it as root)");
    group g;
    group_start(&g, false, NULL);
    for (int round = 0; round < 3; round++) {
        int l = leader_but(&g, -1, 15000);
        assert_true(l >= 0);
        /* The wiped member changes from round to round (the leader may not). */
        int w = (l + 1 + round % 2) % NODES, f = 0 + 1 + 2 - l - w; /* the third of three */
        assert_true(tl_raft_membership_is(g.http[w], "voter", 20000));
        assert_true(tl_raft_membership_is(g.http[f], "voter", 20000));
        /* f heard l before it is cut (else it knows nothing past its
         * bootstrap entry, and w rightly waits for l instead of joining). */
        assert_true(tl_raft_follows(g.http[f], l + 1, 20000));
        char key[32], value[32];
        assert_int_equal(tl_raft_cut("127.0.0.1", g.raft[f], true), 0);
        for (int k = 0; k < 20; k++) {
            snprintf(key, sizeof key, "acked-%d-%d", round, k);
            put(&g, key, key); /* each answered 200 */
        }
        char dir[600];
        snprintf(dir, sizeof dir, "%s/n%d", g.dir, w + 1);
        assert_int_equal(tl_kill9(g.pid[w]), 0);
        assert_int_equal(tl_rmtree(dir), 0);
        assert_int_equal(tl_kill9(g.pid[l]), 0);
        g.pid[w] = g.pid[l] = 0;
        assert_int_equal(tl_raft_cut("127.0.0.1", g.raft[f], false), 0);
        node_start(&g, w);
        assert_true(tl_raft_membership_is(g.http[w], "joining", 10000));
        char why[256];
        assert_int_equal(tl_raft_ready(g.http[w], why, sizeof why), 503); /* not a voter */
        assert_non_null(strstr(why, "not a voter"));
        member_view v;
        uint64_t end = time_mono_ms() + 4000;
        while (time_mono_ms() < end) {
            if (member_health(&g, f, &v) && v.leader)
                fail_msg("round %d: member %d, which misses 20 acknowledged writes, leads with "
                         "the wiped member's vote", round, f + 1);
            time_sleep_ms(100);
        }
        uint64_t back = time_mono_ms();
        node_start(&g, l);
        assert_true(leader_but(&g, -1, 20000) >= 0);
        for (int k = 0; k < 20; k++) {
            snprintf(key, sizeof key, "acked-%d-%d", round, k);
            snprintf(value, sizeof value, "%s", key);
            must_read(&g, key, value);
        }
        assert_true(tl_raft_membership_is(g.http[w], "voter", 20000));
        long ready;
        while ((ready = tl_raft_ready(g.http[w], why, sizeof why)) != 200 &&
               time_mono_ms() - back < 20000)
            time_sleep_ms(100);
        assert_int_equal(ready, 200);
        printf("# round %d: 20 of 20 acknowledged writes kept; member %d a voter again and "
               "ready %llu ms after the old leader's restart\n", round, w + 1,
               (unsigned long long)(time_mono_ms() - back));
    }
    group_stop(&g);
}

/* Writers that keep member `to` busy (through redirects) until stopped,
 * or for 180 s at most: PUTs of CATCHUP_VALUE_BYTES (default 4) over
 * CATCHUP_KEYS keys (default 5000), to grow the store for a longer run by
 * hand (see a_wiped_follower_under_writes_is_back_within_seconds). */
typedef struct {
    group *g;
    int to, id;
    atomic_bool *stop;
    _Atomic unsigned ok;
    const char *body;
    unsigned keys;
} load_writer;

static unsigned env_or(const char *name, unsigned dflt, unsigned max)
{
    const char *v = getenv(name);
    unsigned long n = v != NULL ? strtoul(v, NULL, 10) : 0;
    return n > 0 && n <= max ? (unsigned)n : dflt;
}

static void *load_main(void *arg)
{
    load_writer *w = arg;
    uint64_t end = time_mono_ms() + 180000;
    for (unsigned n = 0; !atomic_load(w->stop) && time_mono_ms() < end; n++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/kv/load-%d-%u", w->id, n % w->keys);
        if (call_on(w->g, w->to, "PUT", path, w->body, 5000, NULL) == 200)
            w->ok++;
    }
    return NULL;
}

/* A PUT body {"value":"xxx…"} of n value bytes (caller frees). */
static char *load_body(unsigned n)
{
    char *b = malloc(n + 16);
    assert_non_null(b);
    memcpy(b, "{\"value\":\"", 10);
    memset(b + 10, 'x', n);
    memcpy(b + 10 + n, "\"}", 3);
    return b;
}

/* The catch-up of issue #23 at the default snapshot settings: under
 * sustained writes a follower loses its data dir and comes back; it must
 * be a voter again within seconds (printed), and a second failure after
 * that (the other follower) costs nothing: the leader and the member back
 * carry the writes. */
static void a_wiped_follower_under_writes_is_back_within_seconds(void **state)
{
    (void)state;
    group g;
    group_start(&g, false, NULL);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    int w = (l + 1) % NODES, f = (l + 2) % NODES;
    atomic_bool stop = false;
    load_writer lw[CLIENTS];
    pthread_t th[CLIENTS];
    char *body = load_body(env_or("CATCHUP_VALUE_BYTES", 4, 60000));
    unsigned keys = env_or("CATCHUP_KEYS", 5000, 10000000);
    for (int i = 0; i < CLIENTS; i++) {
        lw[i] = (load_writer){.g = &g, .to = l, .id = i, .stop = &stop, .body = body,
                              .keys = keys};
        assert_int_equal(tl_thread_start(&th[i], load_main, &lw[i]), 0);
    }
    time_sleep_ms(env_or("CATCHUP_LOAD_MS", 3000, 150000));
    char dir[600];
    snprintf(dir, sizeof dir, "%s/n%d", g.dir, w + 1);
    assert_int_equal(tl_kill9(g.pid[w]), 0);
    g.pid[w] = 0;
    assert_int_equal(tl_rmtree(dir), 0);
    time_sleep_ms(3000); /* the leader goes on with f */
    uint64_t t0 = time_mono_ms();
    node_start(&g, w);
    bool back = tl_raft_membership_is(g.http[w], "voter", 60000);
    uint64_t took = time_mono_ms() - t0;
    member_view lead = {0}, mine = {0};
    assert_true(member_health(&g, l, &lead));
    assert_true(member_health(&g, w, &mine));
    double installs = member_metric(&g, w, "percolator_raft_snapshot_installs_total");
    printf("# wiped follower under writes: a voter again %llu ms after its restart (applied "
           "%lld, leader %lld; %g image(s) installed)\n", (unsigned long long)took,
           (long long)mine.applied, (long long)lead.applied, installs);
    assert_true(back);
    /* Now the other follower dies: the leader and the member back are a
     * quorum, and writes go on. */
    unsigned before = 0, after = 0;
    assert_int_equal(tl_kill9(g.pid[f]), 0);
    g.pid[f] = 0;
    /* Counted from a moment after the kill: writes in flight then may
     * have been committed with f already. */
    time_sleep_ms(300);
    for (int i = 0; i < CLIENTS; i++)
        before += atomic_load(&lw[i].ok);
    /* Writes acknowledged after the kill (waited for, not a fixed 3 s
     * that a loaded machine can spend on a few slow ones). */
    uint64_t t1 = time_mono_ms();
    do {
        time_sleep_ms(100);
        after = 0;
        for (int i = 0; i < CLIENTS; i++)
            after += atomic_load(&lw[i].ok);
    } while (after <= before && time_mono_ms() - t1 < 60000);
    uint64_t waited = time_mono_ms() - t1;
    put(&g, "after-second-failure", "x");
    atomic_store(&stop, true);
    for (int i = 0; i < CLIENTS; i++)
        tl_thread_join(th[i], NULL);
    free(body);
    printf("# then the other follower killed: a write acknowledged %llu ms later\n",
           (unsigned long long)waited);
    assert_true(after > before);
    /* One write's time, not an outage until the member back catches up
     * (10 s is far above a write on a loaded machine, far below the
     * outage issue #23 found). */
    assert_true(waited < 10000);
    must_read(&g, "after-second-failure", "x");
    group_stop(&g);
}

/* Readiness follows a member's lag (issue #23, docs/DESIGN.md 7.3): a
 * follower restarted with every apply 5 ms late (failpoint
 * raft_apply=sleep:5) and --raft-ready-lag 300, stopped while the group
 * commits 4,000 entries, falls behind: its health shows more than 300
 * entries of lag and /v1/ready answers 503 "catching up" while the leader
 * and the other follower go on; started again without the failpoint it
 * catches up and is ready again, its lag back under the bound. (With the
 * default 1,024 the lag seen was 1,025-1,626: it hears how far the group
 * is only from the messages queued to it while it stood still.) */
static void a_member_far_behind_is_not_ready(void **state)
{
    (void)state;
    group g;
    setenv("PERCOLATOR_RAFT_READY_LAG", "300", 1); /* every member's --raft-ready-lag */
    group_start(&g, false, NULL);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    int slow = (l + 1) % NODES;
    kill_member(&g, slow);
    g.env = "PERCOLATOR_FAILPOINT=raft_apply=sleep:5";
    node_start(&g, slow);
    g.env = NULL;
    unsetenv("PERCOLATOR_RAFT_READY_LAG"); /* started: later members get the default */
    char why[256] = "";
    uint64_t up = time_mono_ms();
    while (tl_raft_ready(g.http[slow], why, sizeof why) != 200 && time_mono_ms() - up < 30000)
        time_sleep_ms(100); /* it hears from the leader first */
    assert_int_equal(tl_raft_ready(g.http[slow], why, sizeof why), 200);

    /* One writer: each write its own entry (concurrent ones would be
     * joined into fewer, larger entries, and the lag counts entries). */
    atomic_bool stop = false;
    load_writer lw[1];
    pthread_t th[1];
    char *body = load_body(4);
    lw[0] = (load_writer){.g = &g, .to = l, .id = 0, .stop = &stop, .body = body, .keys = 5000};
    assert_int_equal(tl_thread_start(&th[0], load_main, &lw[0]), 0);
    /* It is stopped while the group commits 4,000 entries (bounded: 150 s
     * of writes), then goes on: the first message from its leader says
     * how far the group is, and its applies, 5 ms each, leave it behind
     * for seconds. (A member busy applying hears nothing meanwhile, so its
     * lag is only as fresh as its last message: a slower apply would keep
     * it from hearing how far behind it is.) */
    member_view v = {0}, lead = {0};
    assert_true(member_health(&g, slow, &v));
    assert_int_equal(kill(g.pid[slow], SIGSTOP), 0);
    uint64_t t0 = time_mono_ms();
    do {
        time_sleep_ms(200);
        assert_true(member_health(&g, l, &lead));
    } while (lead.applied < v.applied + 4000 && time_mono_ms() - t0 < 150000);
    assert_int_equal(kill(g.pid[slow], SIGCONT), 0);
    long ready = 200;
    uint64_t t1 = time_mono_ms();
    while (time_mono_ms() - t1 < 30000) {
        if (member_health(&g, slow, &v) && v.lag > 300 &&
            (ready = tl_raft_ready(g.http[slow], why, sizeof why)) == 503)
            break;
        time_sleep_ms(20);
    }
    atomic_store(&stop, true);
    tl_thread_join(th[0], NULL);
    unsigned acked = lw[0].ok;
    free(body);
    printf("# a member applying 5 ms late, stopped a while: lag %lld entries (applied %lld), /v1/ready %ld "
           "(\"%s\") after %llu ms of writes (%u acknowledged)\n", (long long)v.lag,
           (long long)v.applied, ready, why, (unsigned long long)(time_mono_ms() - t0), acked);
    assert_true(v.lag > 300);
    assert_int_equal(ready, 503);
    assert_non_null(strstr(why, "catching up"));

    /* Back at full speed: caught up and ready again. */
    kill_member(&g, slow);
    node_start(&g, slow);
    t1 = time_mono_ms();
    while ((ready = tl_raft_ready(g.http[slow], why, sizeof why)) != 200 &&
           time_mono_ms() - t1 < 60000)
        time_sleep_ms(100);
    assert_true(member_health(&g, slow, &v));
    assert_true(member_health(&g, l, &lead));
    printf("# restarted without the failpoint: ready %llu ms later, lag %lld (applied %lld, "
           "the leader %lld)\n", (unsigned long long)(time_mono_ms() - t1), (long long)v.lag,
           (long long)v.applied, (long long)lead.applied);
    assert_int_equal(ready, 200);
    assert_true(v.lag >= 0 && v.lag <= 1024);
    group_stop(&g);
}

/* ---- a group made again from one backup (docs/DESIGN.md 7.3) ---- */

/* A group of three with 30 keys written, and --backup-dir in <dir>/backups. */
static void restore_group_start(group *g, char *bdir, size_t cap)
{
    tl_group_start(g, "service-raft-restore", 0, NULL, NULL);
    snprintf(bdir, cap, "%s/backups", g->dir);
    g->extra[0] = "--backup-dir";
    g->extra[1] = bdir;
    for (int i = 2; i < 7; i++)
        g->extra[i] = NULL;
    for (int i = 0; i < NODES; i++)
        node_start(g, i);
    assert_true(leader_but(g, -1, 15000) >= 0);
    char key[32], value[32];
    for (int k = 0; k < 30; k++) {
        snprintf(key, sizeof key, "restore-%d", k);
        snprintf(value, sizeof value, "v-%d", k);
        put(g, key, value);
    }
}

/* Every member wiped, then the group made again from `backup` (a backup
 * directory): member 1 restored from it, alone at first
 * (--raft-initial-members 1), members 2 and 3 on empty dirs join it and
 * install its image. Every key of restore_group_start is there, on each
 * member: after member 1 dies, the other two serve them; "after-backup"
 * (written after the backup) is not. */
static void remake_group_from(group *g, const char *backup)
{
    char key[32], value[32];
    /* The disaster: every member and its data gone. */
    for (int i = 0; i < NODES; i++) {
        char dir[600];
        assert_int_equal(tl_kill9(g->pid[i]), 0);
        g->pid[i] = 0;
        snprintf(dir, sizeof dir, "%s/n%d", g->dir, i + 1);
        assert_int_equal(tl_rmtree(dir), 0);
    }
    /* Member 1 from the backup, a group of one; the others join it. */
    const char *one[] = {"--raft-initial-members", "1", "--restore-from", backup, NULL};
    for (int i = 0; i < 7; i++)
        g->extra[i] = i < 4 ? one[i] : NULL;
    node_start(g, 0);
    g->extra[2] = NULL;
    node_start(g, 1);
    node_start(g, 2);
    for (int i = 0; i < NODES; i++)
        assert_true(tl_raft_membership_is(g->http[i], "voter", 30000));
    for (int k = 0; k < 30; k++) {
        snprintf(key, sizeof key, "restore-%d", k);
        snprintf(value, sizeof value, "v-%d", k);
        must_read(g, key, value);
    }
    json_t *j = NULL;
    assert_int_equal(call_any(g, "GET", "/v1/kv/after-backup", NULL, 15000, &j), 404);
    json_decref(j);
    put(g, "after-restore", "y");
    /* Members 2 and 3 hold it all: member 1 dies, they go on. */
    assert_int_equal(tl_kill9(g->pid[0]), 0);
    g->pid[0] = 0;
    assert_true(leader_but(g, 0, 20000) >= 0);
    for (int k = 0; k < 30; k += 7) {
        snprintf(key, sizeof key, "restore-%d", k);
        snprintf(value, sizeof value, "v-%d", k);
        must_read(g, key, value);
    }
    must_read(g, "after-restore", "y");
}

/* From a backup taken on the leader into its --backup-dir. */
static void a_group_is_restored_from_one_backup(void **state)
{
    (void)state;
    group g;
    char bdir[600];
    restore_group_start(&g, bdir, sizeof bdir);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    json_t *b;
    assert_int_equal(call_on(&g, l, "POST", "/v1/admin/backup", NULL, 30000, &b), 201);
    char backup[700];
    snprintf(backup, sizeof backup, "%s", json_string_value(json_object_get(b, "path")));
    json_decref(b);
    put(&g, "after-backup", "x"); /* not in the backup */
    remake_group_from(&g, backup);
    group_stop(&g);
}

/* From an archive the CLI saved (`percolator --endpoints <a follower
 * first> backup save FILE`: the follower sends it to the leader) and
 * restored (`backup restore FILE --dir DIR`) into three new members. */
static void a_group_is_restored_from_one_saved_archive(void **state)
{
    (void)state;
    group g;
    char bdir[600];
    restore_group_start(&g, bdir, sizeof bdir);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    int f = (l + 1) % NODES;
    assert_true(tl_group_knows_leader(&g, f, l, 10000));
    char endpoints[128], file[700], dir[700];
    snprintf(endpoints, sizeof endpoints, "http://127.0.0.1:%d,http://127.0.0.1:%d",
             g.http[f], g.http[l]);
    snprintf(file, sizeof file, "%s/group.tar", g.dir);
    snprintf(dir, sizeof dir, "%s/from-archive", g.dir);
    const char *save[] = {"--endpoints", endpoints, "--verbose", "backup", "save", file, NULL};
    tl_run_result r;
    assert_int_equal(tl_run("percolator", save, NULL, NULL, 0, 120000, &r), 0);
    if (r.status != 0)
        fail_msg("backup save: exit %d: %s", r.status, r.err);
    /* The follower sent the CLI on to the leader for it. */
    char leader_url[64];
    snprintf(leader_url, sizeof leader_url, "answered by http://127.0.0.1:%d/", g.http[l]);
    if (strstr(r.err, leader_url) == NULL)
        fail_msg("not answered by the leader: %s", r.err);
    tl_run_free(&r);
    put(&g, "after-backup", "x"); /* not in the archive */
    const char *restore[] = {"backup", "restore", file, "--dir", dir, NULL};
    assert_int_equal(tl_run("percolator", restore, NULL, NULL, 0, 120000, &r), 0);
    assert_int_equal(r.status, 0);
    tl_run_free(&r);
    remake_group_from(&g, dir);
    group_stop(&g);
}

/* ---- any member serves: writes through a follower across leader kills ---- */

#define FW_ROUNDS 3
#define FW_ELECTION_MS 2000
#define FW_MAX_WRITES 4000

typedef struct {
    int port;                   /* the member written through */
    int round;
    atomic_bool stop;
    int n;                      /* writes made */
    long status[FW_MAX_WRITES];
    bool retry_after[FW_MAX_WRITES];
    uint64_t ms[FW_MAX_WRITES]; /* how long each waited */
    uint64_t at[FW_MAX_WRITES]; /* when each was answered */
} fw_writer;

/* One write every 50 ms through one member, each a fresh key, until
 * told to stop; no retries: each answer is recorded as it came. */
static void *fw_main(void *arg)
{
    fw_writer *w = arg;
    while (!atomic_load(&w->stop) && w->n < FW_MAX_WRITES) {
        char url[160], hv[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/kv/fw-%d-%d", w->port, w->round, w->n);
        tl_resp r;
        uint64_t t0 = time_mono_ms();
        tl_http("PUT", url, "{\"value\":\"v\"}", 13, "application/json", 15000, &r);
        uint64_t t1 = time_mono_ms();
        w->status[w->n] = r.status;
        w->retry_after[w->n] = tl_resp_header(&r, "Retry-After", hv, sizeof hv) != NULL;
        w->ms[w->n] = t1 - t0;
        w->at[w->n] = t1;
        w->n++;
        tl_resp_free(&r);
        time_sleep_ms(50);
    }
    return NULL;
}

/* A client writes through a follower every 50 ms while the leader is
 * killed (kill -9), three times: the follower passes the writes on, so
 * every answer is 200, or 503 with Retry-After while no leader answers;
 * none waits longer than the election timeout plus one second; writes
 * are acknowledged again after each failover, and every acknowledged one
 * is readable at the end. */
static void writes_through_a_follower_survive_leader_kills(void **state)
{
    (void)state;
    group g;
    char et[16];
    snprintf(et, sizeof et, "%d", FW_ELECTION_MS);
    const char *flags[] = {"--raft-election-timeout-ms", et, NULL};
    group_start(&g, false, flags);
    static fw_writer w[FW_ROUNDS];
    int total_ok = 0, total_503 = 0;
    uint64_t worst = 0;
    for (int round = 0; round < FW_ROUNDS; round++) {
        int l = leader_but(&g, -1, 30000);
        assert_true(l >= 0);
        int f = (l + 1) % NODES;
        assert_true(tl_group_knows_leader(&g, f, l, 10000));
        memset(&w[round], 0, sizeof w[round]);
        w[round].port = g.http[f];
        w[round].round = round;
        pthread_t t;
        assert_int_equal(tl_thread_start(&t, fw_main, &w[round]), 0);
        time_sleep_ms(500);
        uint64_t killed = time_mono_ms();
        kill_member(&g, l);
        /* Until a write is acknowledged after the kill, then one second. */
        uint64_t end = killed + 30000;
        bool back = false;
        while (!back && time_mono_ms() < end) {
            time_sleep_ms(50);
            for (int k = 0; k < w[round].n && !back; k++)
                back = w[round].at[k] > killed + 100 && w[round].status[k] == 200;
        }
        time_sleep_ms(1000);
        atomic_store(&w[round].stop, true);
        tl_thread_join(t, NULL);
        assert_true(back);
        int ok = 0, unavailable = 0;
        uint64_t first_after = 0;
        for (int k = 0; k < w[round].n; k++) {
            long st = w[round].status[k];
            if (st != 200 && !(st == 503 && w[round].retry_after[k]))
                fail_msg("round %d write %d through member %d: %ld (Retry-After %s)", round, k,
                         f + 1, st, w[round].retry_after[k] ? "given" : "missing");
            if (w[round].ms[k] > FW_ELECTION_MS + 1000)
                fail_msg("round %d write %d waited %llu ms", round, k,
                         (unsigned long long)w[round].ms[k]);
            worst = w[round].ms[k] > worst ? w[round].ms[k] : worst;
            ok += st == 200;
            unavailable += st == 503;
            if (st == 200 && first_after == 0 && w[round].at[k] > killed + 100)
                first_after = w[round].at[k];
        }
        printf("# round %d: leader %d killed; %d writes through member %d: %d x 200, %d x 503; "
               "acknowledged again %llu ms after the kill\n", round, l + 1, w[round].n, f + 1, ok,
               unavailable, (unsigned long long)(first_after - killed));
        total_ok += ok;
        total_503 += unavailable;
        node_start(&g, l); /* back for the next round */
    }
    printf("# %d rounds: %d acknowledged, %d x 503 with Retry-After, longest wait %llu ms "
           "(bound %d)\n", FW_ROUNDS, total_ok, total_503, (unsigned long long)worst,
           FW_ELECTION_MS + 1000);
    /* Every acknowledged write is there. */
    for (int round = 0; round < FW_ROUNDS; round++)
        for (int k = 0; k < w[round].n; k++)
            if (w[round].status[k] == 200) {
                char key[64];
                snprintf(key, sizeof key, "fw-%d-%d", round, k);
                must_read(&g, key, "v");
            }
    group_stop(&g);
}

/* ---- the CLI given every member, through leader kills ---- */

#define CLI_KILLS 5
#define CLI_MAX_PUTS 3000

typedef struct {
    char endpoints[256];
    atomic_bool stop;
    int n;
    int status[CLI_MAX_PUTS];
    uint64_t at[CLI_MAX_PUTS];
} cli_writer;

/* `percolator --endpoints A,B,C --retries 10 put cli-N v-N`, one after
 * another, each exit status recorded. */
static void *cli_main(void *arg)
{
    cli_writer *w = arg;
    while (!atomic_load(&w->stop) && w->n < CLI_MAX_PUTS) {
        char key[32], value[32];
        snprintf(key, sizeof key, "cli-%d", w->n);
        snprintf(value, sizeof value, "v-%d", w->n);
        const char *args[] = {"--endpoints", w->endpoints, "--retries", "10", "--timeout-ms",
                              "5000", "put", key, value, NULL};
        tl_run_result r;
        int rc = tl_run("percolator", args, NULL, NULL, 0, 60000, &r);
        w->status[w->n] = rc == 0 ? r.status : -2;
        w->at[w->n] = time_mono_ms();
        w->n++;
        tl_run_free(&r);
    }
    return NULL;
}

/* The CLI given all three members puts key after key while the leader is
 * killed five times (each restarted before the next kill): it fails over
 * by itself; every put ends 0 (acknowledged), or 4 or 7 (said
 * unavailable, or unknown), none otherwise; puts are acknowledged after
 * every kill; and every acknowledged one is readable at the end, through
 * the CLI too. */
static void the_cli_fails_over_across_leader_kills(void **state)
{
    (void)state;
    group g;
    group_start(&g, false, NULL);
    static cli_writer w;
    memset(&w, 0, sizeof w);
    snprintf(w.endpoints, sizeof w.endpoints,
             "http://127.0.0.1:%d,http://127.0.0.1:%d,http://127.0.0.1:%d", g.http[0], g.http[1],
             g.http[2]);
    assert_true(leader_but(&g, -1, 30000) >= 0);
    pthread_t t;
    assert_int_equal(tl_thread_start(&t, cli_main, &w), 0);
    for (int k = 0; k < CLI_KILLS; k++) {
        int l = leader_but(&g, -1, 30000);
        assert_true(l >= 0);
        time_sleep_ms(700);
        uint64_t killed = time_mono_ms();
        kill_member(&g, l);
        /* A put acknowledged after the kill, within 30 s. */
        bool back = false;
        for (uint64_t end = killed + 30000; !back && time_mono_ms() < end;) {
            time_sleep_ms(50);
            for (int i = 0; i < w.n && !back; i++)
                back = w.status[i] == 0 && w.at[i] > killed + 50;
        }
        assert_true(back);
        node_start(&g, l);
    }
    time_sleep_ms(500);
    atomic_store(&w.stop, true);
    tl_thread_join(t, NULL);
    int ok = 0, unavailable = 0, unknown = 0;
    for (int i = 0; i < w.n; i++) {
        if (w.status[i] != 0 && w.status[i] != 4 && w.status[i] != 7)
            fail_msg("put cli-%d: exit %d", i, w.status[i]);
        ok += w.status[i] == 0;
        unavailable += w.status[i] == 4;
        unknown += w.status[i] == 7;
    }
    printf("# %d leader kills: %d CLI puts, %d acknowledged (exit 0), %d unavailable (4), %d "
           "unknown (7)\n", CLI_KILLS, w.n, ok, unavailable, unknown);
    int last = -1;
    for (int i = 0; i < w.n; i++) {
        if (w.status[i] != 0)
            continue;
        char key[32], value[32];
        snprintf(key, sizeof key, "cli-%d", i);
        snprintf(value, sizeof value, "v-%d", i);
        must_read(&g, key, value);
        last = i;
    }
    assert_true(last >= 0);
    char key[32], want[40];
    snprintf(key, sizeof key, "cli-%d", last);
    snprintf(want, sizeof want, "v-%d\n", last);
    const char *args[] = {"--endpoints", w.endpoints, "--retries", "10", "get", key, NULL};
    tl_run_result r;
    assert_int_equal(tl_run("percolator", args, NULL, NULL, 0, 60000, &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, want);
    tl_run_free(&r);
    group_stop(&g);
}

/* ---- a partition: the leader's raft port cut off (iptables on loopback) ---- */

static void a_cut_off_leader_acknowledges_nothing(void **state)
{
    (void)state;
    if (!tl_raft_can_cut())
        fail_msg("this test needs iptables and root (make test installs it as root)");
    group g;
    group_start(&g, false, NULL);
    int l = leader_but(&g, -1, 15000);
    assert_true(l >= 0);
    put(&g, "before-cut", "b");
    member_view before;
    assert_true(member_health(&g, l, &before));

    /* SI clients across the cut: whatever any leader acknowledged must fit
     * one history (no split brain). */
    atomic_bool stop = false;
    si_client si[SI_CLIENTS];
    pthread_t st[SI_CLIENTS];
    si_history *h = si_clients_start(&g, si, st, &stop);
    time_sleep_ms(500);
    assert_int_equal(tl_raft_cut("127.0.0.1", g.raft[l], true), 0);
    uint64_t t0 = time_mono_ms();

    /* Straight to the cut-off leader (no redirect followed): never 200. */
    char url[128];
    tl_resp r = {0};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/kv/to-the-cut-leader", g.http[l]);
    long status = tl_http("PUT", url, "{\"value\":\"x\"}", 13, "application/json", 10000, &r) == 0
                      ? r.status
                      : 0; /* no answer in 10 s: not acknowledged either */
    assert_int_not_equal(status, 200);
    tl_resp_free(&r);

    /* The others elect a leader and take writes. */
    int l2 = leader_but(&g, l, 20000);
    assert_true(l2 >= 0);
    uint64_t elected = time_mono_ms() - t0;
    put(&g, "during-cut", "d");
    time_sleep_ms(1500);

    /* Heal: the old leader follows and catches up. */
    assert_int_equal(tl_raft_cut("127.0.0.1", g.raft[l], false), 0);
    atomic_store(&stop, true);
    unsigned si_committed = si_clients_join(si, st);
    member_view lead, back;
    uint64_t end = time_mono_ms() + 20000;
    do {
        time_sleep_ms(100);
        int cur = leader_but(&g, -1, 15000);
        assert_true(cur >= 0 && member_health(&g, cur, &lead));
        assert_true(member_health(&g, l, &back));
    } while ((back.leader || back.applied < lead.applied) && time_mono_ms() < end);
    /* Its entry may still be committed by the majority (they received it
     * before the cut was noticed; a new leader commits what it holds): an
     * unknown outcome, which is what 503 raft_unavailable says. Either
     * way the cut-off leader acknowledged nothing. */
    json_t *j = NULL;
    long after = call_any(&g, "GET", "/v1/kv/to-the-cut-leader", NULL, 10000, &j);
    assert_true(after == 404 || after == 200);
    if (after == 200)
        assert_string_equal(json_string_value(json_object_get(j, "value")), "x");
    json_decref(j);
    must_read(&g, "before-cut", "b");
    must_read(&g, "during-cut", "d");
    si_report rep = si_check(h);
    printf("# cut-off leader answered %ld (its write %s); another elected %llu ms after the "
           "cut; healed: applied %lld = %lld; SI: %u committed, %u unknown, %u reads, %u "
           "anomalies\n",
           status, after == 200 ? "committed later by the majority" : "never committed",
           (unsigned long long)elected, (long long)back.applied,
           (long long)lead.applied, rep.committed, rep.unknown, rep.reads, rep.anomalies);
    assert_true(back.applied >= lead.applied);
    assert_int_equal(rep.anomalies, 0);
    assert_int_equal(rep.committed, si_committed);
    si_free(h);
    group_stop(&g);
}

/* With --region-logs, the leader of every region cut off (its raft
 * address: the node network all its groups share) under the bank and the
 * SI checker: the other two elect a leader for each region and gather
 * them; a split waits meanwhile (the cut member is not caught up: 503
 * split_unavailable); healed, the old leader catches up in every region,
 * the split goes through, and the money, the acknowledged transfers, the
 * history and the maps hold. */
static void region_logs_keep_the_bank_through_a_cut_off_leader(void **state)
{
    (void)state;
    if (!tl_raft_can_cut())
        fail_msg("this test needs iptables and root (make test installs it as root)");
    group g;
    const char *extra[] = {"--one-pc", "off", "--region-logs", "--region-split-keys",
                           "acct-5,si", NULL};
    group_start_over(&g, NULL, extra, 3);
    int l = leader_but(&g, -1, 30000);
    assert_true(l >= 0);
    static mixed_load w;
    load_start(&g, &w);
    time_sleep_ms(1500);
    l = leader_but(&g, -1, 30000);
    assert_true(l >= 0);
    int acked = bank_acked(w.bank);
    printf("# cutting member %d's raft address off\n", l + 1);
    assert_int_equal(tl_raft_cut("127.0.0.1", g.raft[l], true), 0);
    int l2 = leader_but(&g, l, 30000);
    assert_true(l2 >= 0);
    assert_true(bank_goes_on_or_tell(&g, w.bank, acked, 60000)); /* the other two */
    l2 = leader_but(&g, l, 30000);
    assert_true(l2 >= 0 && not_caught_up(&g, l2, l));
    json_t *refusal = NULL;
    long split = call_on(&g, l2, "POST", "/v1/regions/split", "{\"key\":\"acct-2\"}", 10000,
                         &refusal);
    const char *code =
        json_string_value(json_object_get(json_object_get(refusal, "error"), "code"));
    printf("# during the cut a split answered %ld %s\n", split, code != NULL ? code : "");
    assert_int_equal(split, 503);
    assert_true(code != NULL && strcmp(code, "split_unavailable") == 0);
    json_decref(refusal);
    assert_int_equal(tl_raft_cut("127.0.0.1", g.raft[l], false), 0);
    split_at(&g, "acct-2");
    acked = bank_acked(w.bank);
    assert_true(bank_goes_on_or_tell(&g, w.bank, acked, 60000));
    unsigned si_committed = load_stop(&w);
    load_check(&g, &w, si_committed);
    char map[512];
    assert_int_equal(same_map_everywhere(&g, map, sizeof map), 4);
    for (int i = 0; i < NODES; i++)
        assert_int_not_equal(leaders_gathered(&g, i), 0);
    group_stop(&g);
}

/* ---- actions sent where each region is led (DESIGN §6.6) ---- */

/* The leader of each region in member i's own map, in key order (region
 * 1, holding the empty key, first); how many regions (0: no answer). */
static size_t region_leaders(group *g, int i, unsigned *out, size_t max)
{
    json_t *j = NULL, *r;
    size_t k, n = 0;
    if (call_on(g, i, "GET", "/v1/regions?local=true", NULL, 5000, &j) != 200) {
        json_decref(j);
        return 0;
    }
    json_array_foreach(json_object_get(j, "regions"), k, r) {
        if (n < max)
            out[n++] = (unsigned)json_integer_value(json_object_get(r, "leader"));
    }
    json_decref(j);
    return n;
}

/* Wait until region 1's leader leads some region but not every one, and
 * another member leads the rest: with --region-leaders-gather off nothing
 * moves them together, so region 1's lead is handed to the member leading
 * the most others (POST /v1/leader hands region 1's). The member leading
 * a region region 1's leader does not (0-based), or -1. */
static int leaders_spread(group *g, size_t *region)
{
    uint64_t end = time_mono_ms() + 60000;
    while (time_mono_ms() < end) {
        unsigned lead[16];
        int l = leader_but(g, -1, 10000);
        size_t n = l >= 0 ? region_leaders(g, l, lead, 16) : 0;
        bool all_known = n > 1;
        for (size_t k = 0; k < n; k++)
            all_known = all_known && lead[k] != 0;
        if (!all_known) {
            time_sleep_ms(200);
            continue;
        }
        for (size_t k = 1; k < n; k++)
            if (lead[k] != lead[0]) {
                printf("# region 1 led by member %u, region %zu of %zu (in key order) by "
                       "member %u\n",
                       lead[0], k + 1, n, lead[k]);
                if (region != NULL)
                    *region = k;
                return (int)lead[k] - 1;
            }
        /* Every region led by one member: region 1's lead goes elsewhere. */
        int to = (l + 1) % g->n;
        while (g->pid[to] <= 0)
            to = (to + 1) % g->n;
        char body[32];
        snprintf(body, sizeof body, "{\"id\":%d}", to + 1);
        long st = call_on(g, l, "POST", "/v1/leader", body, 15000, NULL);
        printf("# every region led by member %u: region 1's lead to member %d: %ld\n", lead[0],
               to + 1, st);
        time_sleep_ms(500);
    }
    return -1;
}

/* The sum of every series of a labelled counter on member i (each series
 * printed). */
static double counter_sum(group *g, int i, const char *name)
{
    char url[96], pat[128];
    tl_resp r;
    double v = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", g->http[i]);
    snprintf(pat, sizeof pat, "\n%s{", name);
    if (tl_http("GET", url, NULL, 0, NULL, REQ_MS, &r) != 0)
        return -1;
    for (const char *p = r.body; p != NULL && (p = strstr(p, pat)) != NULL; p++) {
        const char *sp = strchr(p + 1, ' ');
        if (sp != NULL)
            v += strtod(sp + 1, NULL);
        if (sp != NULL)
            printf("#   %.*s\n", (int)(strchr(sp, '\n') != NULL ? strchr(sp, '\n') - p - 1 : 60), p + 1);
    }
    tl_resp_free(&r);
    return v;
}

/* Every key through GET /v1/kv, in pages of 50 (each cut at region
 * bounds, each part read where its region is led; nothing writes
 * meanwhile): how many, the accounts' total, and whether the keys came
 * in increasing order. */
static int scan_everything(group *g, long *accounts, bool *ordered)
{
    char path[256], after[128] = "", prev[128] = "";
    int n = 0;
    *accounts = 0;
    *ordered = true;
    for (int page = 0; page < 400; page++) {
        json_t *j = NULL;
        if (page == 0)
            snprintf(path, sizeof path, "/v1/kv?limit=50");
        else
            snprintf(path, sizeof path, "/v1/kv?limit=50&after=%s", after);
        assert_int_equal(call_any(g, "GET", path, NULL, REQ_MS, &j), 200);
        json_t *items = json_object_get(j, "items"), *it, *next = json_object_get(j, "next");
        size_t i;
        json_array_foreach(items, i, it) {
            const char *k = json_string_value(json_object_get(it, "key"));
            if (k == NULL)
                continue;
            *ordered = *ordered && strcmp(prev, k) < 0;
            snprintf(prev, sizeof prev, "%s", k);
            if (strncmp(k, "acct-", 5) == 0 && strchr(k + 5, '-') == NULL)
                *accounts += strtol(json_string_value(json_object_get(it, "value")), NULL, 10);
            n++;
        }
        bool last = next == NULL || json_is_null(next);
        if (!last)
            snprintf(after, sizeof after, "%s", json_string_value(next));
        json_decref(j);
        if (last)
            return n;
    }
    fail_msg("the scan did not end within 400 pages");
    return n;
}

/* With --region-leaders-gather off, each region's group keeps the leader
 * it elected, and region 1's leader (where every request is served: the
 * sessions and the two-phase commits) sends each region's actions to the
 * member leading it (POST /v1/region-calls): prewrites, commits,
 * rollbacks, status checks and resolutions, and reads. The bank and the
 * snapshot-isolation checker run with every commit two-phase (a transfer
 * between acct-4 and acct-5 spans two regions), region 1's lead handed
 * away from the member leading another region, then that member killed
 * (its regions re-elected elsewhere, the calls sent to their new leaders)
 * and restarted, and the leaders spread again: the money is conserved,
 * every acknowledged transfer is there, no anomaly, no lock left (the
 * janitor's resolutions sent too), and the members counted calls sent
 * and served; then an observer registered on region 1's leader claims a
 * write to a region another member leads. One-phase commits stay on, so
 * a write of a region led elsewhere takes two phases, sent there (a blind
 * PUT is not given to the local committer). Without the calls the bank
 * stops once a region is led away from region 1's leader. A scan of every
 * key, in pages cut at region bounds and read where each region is led,
 * finds the accounts' total. */
static void region_logs_act_where_each_region_is_led(void **state)
{
    (void)state;
    group g;
    /* The members' shared secret for region calls (--peer-token-file). */
    char token[64];
    snprintf(token, sizeof token, "/tmp/pc-peer-token-%d", (int)getpid());
    assert_int_equal(tl_write_file(token, "peer-secret-0123456789\n", 23), 0);
    const char *extra[] = {"--region-logs", "--region-split-keys", "acct-5,si",
                           "--region-leaders-gather", "off", "--peer-token-file", token,
                           "--gc-retention-ms", "1000", NULL};
    group_start_over(&g, NULL, extra, 1);
    assert_true(leader_but(&g, -1, 30000) >= 0);
    int other = leaders_spread(&g, NULL);
    assert_true(other >= 0);
    static mixed_load w;
    load_start(&g, &w);
    int acked = bank_acked(w.bank);
    assert_true(bank_goes_on_or_tell(&g, w.bank, acked, 30000));
    time_sleep_ms(2000);
    other = leaders_spread(&g, NULL);
    assert_true(other >= 0);
    printf("# killing member %d, which leads a region region 1's leader does not\n", other + 1);
    acked = bank_acked(w.bank);
    kill_member(&g, other);
    assert_true(bank_goes_on_or_tell(&g, w.bank, acked, 60000));
    node_start(&g, other);
    assert_true(leaders_spread(&g, NULL) >= 0);
    acked = bank_acked(w.bank);
    assert_true(bank_goes_on_or_tell(&g, w.bank, acked, 60000));
    time_sleep_ms(2000);
    unsigned si_committed = load_stop(&w);
    load_check(&g, &w, si_committed);
    /* Scans cross the regions, led here or not: every account once, the
     * total the bank's, keys in order. */
    assert_true(leaders_spread(&g, NULL) >= 0);
    long accounts = 0;
    bool ordered = false;
    int keys = scan_everything(&g, &accounts, &ordered);
    printf("# a scan of every key: %d keys, the accounts' total %ld, %s\n", keys, accounts,
           ordered ? "in order" : "OUT OF ORDER");
    assert_int_equal(accounts, ACCOUNTS * 100);
    assert_true(ordered && keys > ACCOUNTS);
    /* An observer registered now (in region 1, where its row lives) sees a
     * write to a region led elsewhere: that member's commit marks it, its
     * registrations read again when the call's digest of the sender's
     * differed (observers.h observers_match). */
    size_t k = 0;
    assert_true(leaders_spread(&g, &k) >= 0);
    const char *prefix = k == 1 ? "acct-9" : "si-obs", *key = k == 1 ? "acct-9-obs" : "si-obs-1";
    char path[96], body[96];
    snprintf(body, sizeof body, "{\"prefix\":\"%s\"}", prefix);
    assert_int_equal(call_any(&g, "PUT", "/v1/observers/routed", body, REQ_MS, NULL), 201);
    put(&g, key, "seen");
    json_t *claim = NULL;
    snprintf(path, sizeof path, "/v1/observers/routed/claim?wait_ms=10000");
    assert_int_equal(call_any(&g, "POST", path, NULL, REQ_MS, &claim), 200);
    const char *got = json_string_value(json_object_get(claim, "key"));
    printf("# observer on %s claimed %s\n", prefix, got != NULL ? got : "(none)");
    assert_true(got != NULL && strcmp(got, key) == 0);
    json_decref(claim);
    double sent = 0, served = 0;
    for (int i = 0; i < g.n; i++) {
        double a = counter_sum(&g, i, "percolator_region_calls_sent_total");
        double b = counter_sum(&g, i, "percolator_region_calls_served_total");
        printf("# member %d: %.0f region calls sent, %.0f served\n", i + 1, a, b);
        sent += a > 0 ? a : 0;
        served += b > 0 ? b : 0;
    }
    assert_true(sent > 0);
    assert_true(served > 0);
    /* GC (--gc-retention-ms 1000), through the load above, in every region
     * where it is led (gc_regions.h): region 1's leader asked another
     * member for a region's oldest lock and had it run GC parts there
     * (calls sent and answered ok), and counts what was removed. Bounded
     * wait: a pass every half retention. */
    int l1 = leader_but(&g, -1, 30000);
    assert_true(l1 >= 0);
    uint64_t end = time_mono_ms() + 30000;
    double removed = 0, parts = 0, oldest = 0;
    for (;;) {
        removed = metric_on(&g, l1, "percolator_gc_versions_removed_total");
        parts = metric_on(&g, l1, "percolator_region_calls_sent_total"
                                  "{action=\"gc\",result=\"ok\"}");
        oldest = metric_on(&g, l1, "percolator_region_calls_sent_total"
                                   "{action=\"oldest_lock\",result=\"ok\"}");
        if ((removed >= 1 && parts >= 1 && oldest >= 1) || time_mono_ms() >= end)
            break;
        time_sleep_ms(300);
    }
    printf("# gc: %.0f versions removed; sent to members leading other regions: %.0f gc and "
           "%.0f oldest_lock calls answered ok\n",
           removed, parts, oldest);
    assert_true(removed >= 1 && parts >= 1 && oldest >= 1);
    group_stop(&g);
    unlink(token);
}

/* ---- members grown, shrunk and replaced under the bank (issue #23) ---- */

/* Wait up to ms until the leader lists `want` members, every one a voter,
 * member `must` (0: any) among them and member `gone` (0: none) not. */
static bool group_is(group *g, int want, int must, int gone, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    do {
        int l = leader_but(g, -1, 5000);
        json_t *j = NULL;
        if (l >= 0 && call_on(g, l, "GET", "/v1/members", NULL, 5000, &j) == 200) {
            json_t *list = json_object_get(j, "members"), *m;
            size_t k;
            int voters = 0;
            bool has_must = must == 0, has_gone = false;
            json_array_foreach(list, k, m) {
                int id = (int)json_integer_value(json_object_get(m, "id"));
                voters += strcmp(json_string_value(json_object_get(m, "role")), "voter") == 0;
                has_must = has_must || id == must;
                has_gone = has_gone || id == gone;
            }
            bool ok = (int)json_array_size(list) == want && voters == want && has_must &&
                      !has_gone;
            json_decref(j);
            if (ok)
                return true;
        } else {
            json_decref(j);
        }
        time_sleep_ms(200);
    } while (time_mono_ms() < end);
    return false;
}

/* method path (body) at the leader, asked again for up to 20 s while it
 * answers 503 (no leader known yet), 409 (another change still
 * committing, or a member not yet heard from) or nothing: what an
 * operator's retry does. The last status; each refusal's reason printed. */
static long admin_at_leader(group *g, const char *method, const char *path, const char *body)
{
    long st = 0;
    uint64_t until = time_mono_ms() + 20000;
    for (;;) {
        json_t *j = NULL;
        int l = leader_but(g, -1, 10000);
        st = l >= 0 ? call_on(g, l, method, path, body, 15000, &j) : 0;
        if (st != 200) {
            char *txt = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
            printf("# %s %s at member %d: %ld %s\n", method, path, l + 1, st, txt ? txt : "");
            free(txt);
        }
        json_decref(j);
        if ((st != 0 && st != 409 && st != 503) || time_mono_ms() >= until)
            return st;
        time_sleep_ms(300);
    }
}

/* Member m (1-based) out of the group: the lead handed to another live
 * member first if m leads, then DELETE /v1/members/m. */
static void remove_member(group *g, int m)
{
    char path[32], body[32];
    int l = leader_but(g, -1, 15000);
    assert_true(l >= 0);
    if (l == m - 1) {
        int to = -1;
        for (int i = 0; i < g->n && to < 0; i++)
            if (i != l && g->pid[i] > 0)
                to = i;
        snprintf(body, sizeof body, "{\"id\":%d}", to + 1);
        assert_int_equal(admin_at_leader(g, "POST", "/v1/leader", body), 200);
    }
    snprintf(path, sizeof path, "/v1/members/%d", m);
    assert_int_equal(admin_at_leader(g, "DELETE", path, NULL), 200);
}

/* Wait up to ms until member i is the ready leader: the one that handed
 * the lead over answers 200 once it no longer leads, but its health and
 * readiness may say it does until its loop's next turn refreshes them. */
static bool leads(group *g, int i, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    do {
        if (leader_but(g, -1, 1000) == i)
            return true;
        time_sleep_ms(50);
    } while (time_mono_ms() < end);
    return false;
}

/* Five members in --raft-peers, the first three bootstrap
 * (--raft-initial-members), every commit two-phase. Under the bank:
 * members 4 and 5 start and the leader adds and promotes them (3 to 5);
 * the lead moves to member 5; they are removed (member 5 hands the lead
 * away first) and stopped (back to 3); a follower is killed for good,
 * a new member (member 4 on its own address, an empty data dir) joins and
 * the dead one is removed; then the same with the leader (member 5 in its
 * place). The money is conserved, every acknowledged transfer is there,
 * the bank goes on after each step, no lock is left; the times printed. */
static void members_are_replaced_and_grown_under_the_bank(void **state)
{
    (void)state;
    group g;
    const char *extra[] = {"--one-pc", "off", "--raft-initial-members", "1,2,3", NULL};
    group_start_n(&g, TL_GROUP_MAX, NODES, NULL, extra, 1);
    assert_true(group_is(&g, 3, 0, 4, 30000));
    bank_open(&g);
    atomic_bool stop = false;
    static bank_client bank[CLIENTS];
    pthread_t bt[CLIENTS];
    bank_start(&g, bank, bt, &stop);
    assert_true(bank_goes_on(bank, 0, 30000));

    /* 3 to 5: members 4 and 5 start on empty dirs; the leader adds them. */
    uint64_t t0 = time_mono_ms();
    node_start(&g, 3);
    node_start(&g, 4);
    assert_true(group_is(&g, 5, 5, 0, 30000));
    uint64_t grown = time_mono_ms() - t0;
    assert_true(bank_goes_on(bank, bank_acked(bank), 30000));

    /* The lead moves to a new member (so that its removal below hands the
     * lead away first). */
    assert_int_equal(admin_at_leader(&g, "POST", "/v1/leader", "{\"id\":5}"), 200);
    assert_true(leads(&g, 4, 15000));

    /* 5 to 3: removed by the operator, then stopped. */
    t0 = time_mono_ms();
    for (int m = 5; m >= 4; m--) {
        remove_member(&g, m);
        assert_int_equal(tl_stop(g.pid[m - 1], TL_STOP_MS), 0);
        g.pid[m - 1] = 0;
    }
    assert_true(group_is(&g, 3, 0, 4, 20000));
    uint64_t shrunk = time_mono_ms() - t0;
    assert_true(bank_goes_on(bank, bank_acked(bank), 30000));

    /* A follower dies for good, then the leader: each time a new machine
     * (a member not in the group, on its own address, an empty dir) joins,
     * and the dead one is removed. */
    uint64_t replaced[2], voter_after[2];
    for (int round = 0; round < 2; round++) {
        int l = leader_but(&g, -1, 15000);
        assert_true(l >= 0);
        int dead = -1, fresh = round == 0 ? 3 : 4;
        for (int i = 0; i < g.n && dead < 0; i++)
            if (g.pid[i] > 0 && (round == 0 ? i != l : i == l))
                dead = i;
        assert_true(dead >= 0);
        t0 = time_mono_ms();
        kill_member(&g, dead);
        char data[640];
        snprintf(data, sizeof data, "%s/n%d", g.dir, fresh + 1);
        assert_int_equal(tl_rmtree(data), 0);
        uint64_t t1 = time_mono_ms();
        node_start(&g, fresh);
        /* Four in the configuration, one dead: a quorum of three answers. */
        assert_true(group_is(&g, 4, fresh + 1, 0, 30000));
        voter_after[round] = time_mono_ms() - t1;
        char path[32];
        snprintf(path, sizeof path, "/v1/members/%d", dead + 1);
        assert_int_equal(admin_at_leader(&g, "DELETE", path, NULL), 200);
        assert_true(group_is(&g, 3, fresh + 1, dead + 1, 20000));
        replaced[round] = time_mono_ms() - t0;
        assert_true(bank_goes_on(bank, bank_acked(bank), 30000));
        printf("# round %d: member %d (%s) killed; member %d a voter %llu ms after its start; "
               "replaced %llu ms after the kill\n", round, dead + 1,
               round == 0 ? "a follower" : "the leader", fresh + 1,
               (unsigned long long)voter_after[round], (unsigned long long)replaced[round]);
    }
    atomic_store(&stop, true);
    printf("# grown from 3 to 5 voters in %llu ms, shrunk to 3 in %llu ms; a follower replaced "
           "in %llu ms, the leader in %llu ms\n", (unsigned long long)grown,
           (unsigned long long)shrunk, (unsigned long long)replaced[0],
           (unsigned long long)replaced[1]);
    bank_check(&g, bank, bt);
    no_lock_left(&g);
    group_stop(&g);
}

/* ---- a new machine on a new address (DESIGN 7.3) ---- */

#define NEW_MACHINE NODES /* its index: member 4 */

/* key on member i itself, no redirect followed (a follower passes the
 * request on): PUT value, or GET when value is NULL (the value read into
 * got). The status (0: no answer); via: the leader a follower passed the
 * request to (X-Percolator-Leader; "" when the member served it). */
static long kv_on(group *g, int i, const char *key, const char *value, char *got, size_t glen,
                  char *via, size_t vlen)
{
    char url[160], body[160];
    tl_resp r;
    long st = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/kv/%s", g->http[i], key);
    snprintf(body, sizeof body, "{\"value\":\"%s\"}", value != NULL ? value : "");
    via[0] = '\0';
    if (got != NULL)
        got[0] = '\0';
    if (tl_http(value != NULL ? "PUT" : "GET", url, value != NULL ? body : NULL,
                value != NULL ? strlen(body) : 0, value != NULL ? "application/json" : NULL,
                REQ_MS, &r) == 0) {
        st = r.status;
        tl_resp_header(&r, "X-Percolator-Leader", via, vlen);
        if (got != NULL && st == 200) {
            json_t *j = json_loads(r.body, 0, NULL);
            const char *v = json_string_value(json_object_get(j, "value"));
            snprintf(got, glen, "%s", v != NULL ? v : "");
            json_decref(j);
        }
    }
    tl_resp_free(&r);
    return st;
}

/* Wait up to ms until member i's /v1/health gives want as its leader's
 * URL; false (what it gave printed) if it does not. */
static bool names_leader_url(group *g, int i, const char *want, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    char url[128] = "";
    do {
        json_t *j = NULL;
        url[0] = '\0';
        if (call_on(g, i, "GET", "/v1/health", NULL, 5000, &j) == 200) {
            json_t *l = json_object_get(j, "leader");
            const char *u = json_string_value(json_object_get(l, "url"));
            snprintf(url, sizeof url, "%s", u != NULL ? u : "");
        }
        json_decref(j);
        if (strcmp(url, want) == 0)
            return true;
        time_sleep_ms(50);
    } while (time_mono_ms() < end);
    printf("# member %d names %s as its leader's URL, not %s\n", i + 1, url[0] ? url : "none",
           want);
    return false;
}

/* `percolator member add ID HOST:PORT URL` of new machine i through member
 * via (a follower passes it on), as an operator would: the exit status (0:
 * added as a spare); the output printed otherwise. */
static int cli_member_add(group *g, int i, int via)
{
    char id[16], addr[48], url[48], ep[48];
    snprintf(id, sizeof id, "%d", i + 1);
    tl_group_raft_address(g, i, addr, sizeof addr);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g->http[i]);
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", g->http[via]);
    const char *args[] = {"--endpoint", ep, "--retries", "5", "member", "add", id, addr, url,
                          NULL};
    tl_run_result rr;
    assert_int_equal(tl_run("percolator", args, NULL, NULL, 0, 4 * REQ_MS, &rr), 0);
    int st = rr.status;
    if (st != 0)
        printf("# percolator member add %s %s %s: exit %d: %s%s\n", id, addr, url, st, rr.out,
               rr.err);
    else
        assert_non_null(strstr(rr.out, "added as a spare"));
    tl_run_free(&rr);
    return st;
}

/* The leader's list (asked through member via) gives member i's raft
 * address and URL as the operator's add did. */
static void listed_with_address(group *g, int via, int i, const char *addr, const char *url)
{
    json_t *j = NULL, *m;
    size_t k;
    bool found = false;
    assert_int_equal(call_on(g, via, "GET", "/v1/members", NULL, REQ_MS, &j), 200);
    json_array_foreach(json_object_get(j, "members"), k, m) {
        if (json_integer_value(json_object_get(m, "id")) != i + 1)
            continue;
        found = true;
        assert_string_equal(json_string_value(json_object_get(m, "address")), addr);
        assert_string_equal(json_string_value(json_object_get(m, "url")), url);
    }
    json_decref(j);
    assert_true(found);
}

/* Wait up to ms until member i has applied index `want`; false if not. */
static bool applied_to(group *g, int i, int64_t want, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    member_view v = {0};
    do {
        if (member_health(g, i, &v) && v.applied >= want)
            return true;
        time_sleep_ms(100);
    } while (time_mono_ms() < end);
    printf("# member %d applied %lld, not %lld\n", i + 1, (long long)v.applied, (long long)want);
    return false;
}

/* A dead machine replaced by one on an address no member's flags give,
 * with no member restarted (DESIGN 7.3; etcd's member add --peer-urls), in
 * the service group under the bank (every commit two-phase): the leader
 * is killed for good; member 4, a new machine (raft on 127.0.2.4, an HTTP
 * port no --raft-urls gives), starts with its own flags and is added with
 * `percolator member add 4 HOST:PORT URL` through a follower; the dead one
 * is removed and the lead moves to member 4. A first member, a follower
 * now, passes writes on to member 4 at the URL in the configuration; the
 * other, restarted with its old flags (which name no member 4), follows
 * member 4, catches up and serves reads through it. The money is
 * conserved, every acknowledged transfer is there, no lock is left; each
 * step's time printed. */
static void a_new_machine_on_a_new_address_takes_the_dead_leaders_place(void **state)
{
    (void)state;
    group g;
    const char *extra[] = {"--one-pc", "off", NULL};
    group_start_n(&g, NODES, NODES, NULL, extra, 1);
    assert_true(group_is(&g, 3, 0, 0, 30000));
    bank_open(&g);
    atomic_bool stop = false;
    static bank_client bank[CLIENTS];
    pthread_t bt[CLIENTS];
    bank_start(&g, bank, bt, &stop);
    assert_true(bank_goes_on(bank, 0, 30000));

    /* The leader dies for good; the two left elect one and go on. */
    int dead = leader_but(&g, -1, 15000);
    assert_true(dead >= 0);
    uint64_t t0 = time_mono_ms();
    kill_member(&g, dead);
    int l = leader_but(&g, dead, 20000);
    assert_true(l >= 0);
    assert_true(bank_goes_on(bank, bank_acked(bank), 30000));
    uint64_t again = time_mono_ms() - t0;
    int f = 3 - dead - l; /* the first member that follows */

    /* Member 4 on its own address: no first member's flags name it. */
    uint64_t t1 = time_mono_ms();
    tl_group_new_machine(&g, NEW_MACHINE);
    char addr[48], url4[48], via[128], got[64];
    tl_group_raft_address(&g, NEW_MACHINE, addr, sizeof addr);
    snprintf(url4, sizeof url4, "http://127.0.0.1:%d", g.http[NEW_MACHINE]);
    assert_non_null(strstr(addr, "127.0.2.4:"));
    assert_null(strstr(g.peers, "4="));
    assert_null(strstr(g.urls, "4="));
    assert_true(tl_raft_membership_is(g.http[NEW_MACHINE], "joining", 20000));
    uint64_t joining = time_mono_ms() - t1;
    uint64_t t2 = time_mono_ms();
    assert_int_equal(cli_member_add(&g, NEW_MACHINE, f), 0);
    assert_true(tl_raft_membership_is(g.http[NEW_MACHINE], "voter", 30000));
    uint64_t voter = time_mono_ms() - t2;
    char path[32];
    snprintf(path, sizeof path, "/v1/members/%d", dead + 1);
    assert_int_equal(admin_at_leader(&g, "DELETE", path, NULL), 200);
    assert_true(group_is(&g, 3, NEW_MACHINE + 1, dead + 1, 20000));
    uint64_t replaced = time_mono_ms() - t0;
    listed_with_address(&g, f, NEW_MACHINE, addr, url4);
    assert_true(bank_goes_on(bank, bank_acked(bank), 30000));

    /* The lead on member 4: the first member that follows passes writes on
     * to it at the URL from the configuration, not from its flags. */
    uint64_t t3 = time_mono_ms();
    assert_int_equal(admin_at_leader(&g, "POST", "/v1/leader", "{\"id\":4}"), 200);
    assert_true(leads(&g, NEW_MACHINE, 15000));
    uint64_t moved = time_mono_ms() - t3;
    assert_true(names_leader_url(&g, f, url4, 10000));
    uint64_t t4 = time_mono_ms();
    for (int k = 0; k < 10; k++) {
        char key[32], value[16];
        snprintf(key, sizeof key, "new-address-%d", k);
        snprintf(value, sizeof value, "v%d", k);
        assert_int_equal(kv_on(&g, f, key, value, NULL, 0, via, sizeof via), 200);
        assert_string_equal(via, url4);
    }
    uint64_t writes = time_mono_ms() - t4;
    assert_true(bank_goes_on(bank, bank_acked(bank), 30000));

    /* The other first member restarts with its old flags, which name no
     * member 4: its log does. It misses a write meanwhile, then follows
     * member 4, catches up and serves reads through it. */
    int r = l;
    uint64_t t5 = time_mono_ms();
    assert_int_equal(tl_stop(g.pid[r], TL_STOP_MS), 0);
    g.pid[r] = 0;
    assert_int_equal(kv_on(&g, f, "while-down", "missed", NULL, 0, via, sizeof via), 200);
    member_view lv;
    assert_true(member_health(&g, NEW_MACHINE, &lv));
    node_start(&g, r);
    assert_true(tl_raft_membership_is(g.http[r], "voter", 30000));
    assert_true(tl_group_knows_leader(&g, r, NEW_MACHINE, 20000));
    assert_true(names_leader_url(&g, r, url4, 10000));
    assert_true(applied_to(&g, r, lv.applied, 20000));
    assert_int_equal(kv_on(&g, r, "while-down", NULL, got, sizeof got, via, sizeof via), 200);
    assert_string_equal(got, "missed");
    assert_string_equal(via, url4);
    assert_int_equal(kv_on(&g, r, "new-address-9", NULL, got, sizeof got, via, sizeof via), 200);
    assert_string_equal(got, "v9");
    uint64_t back = time_mono_ms() - t5;
    assert_true(group_is(&g, 3, r + 1, dead + 1, 20000));
    assert_true(bank_goes_on(bank, bank_acked(bank), 30000));

    atomic_store(&stop, true);
    printf("# member %d (the leader) killed: writes again in %llu ms; member 4 on %s joining "
           "%llu ms after its start, a voter %llu ms after the CLI's add through member %d; "
           "replaced %llu ms after the kill\n", dead + 1, (unsigned long long)again, addr,
           (unsigned long long)joining, (unsigned long long)voter, f + 1,
           (unsigned long long)replaced);
    printf("# the lead on member 4 in %llu ms; 10 writes through member %d passed on to %s in "
           "%llu ms; member %d restarted with its old flags, following member 4 and caught up "
           "in %llu ms\n", (unsigned long long)moved, f + 1, url4, (unsigned long long)writes,
           r + 1, (unsigned long long)back);
    bank_check(&g, bank, bt);
    no_lock_left(&g);
    group_stop(&g);
}

/* ---- regions split by size in a group ---- */

#define GROW_KEYS 200

/* The driver's map (the oracle group's GET /v1/pd/regions) has each of
 * member i's regions with the leader hint of that region's own group's
 * term (--region-logs: every region reported with its own term), within
 * 30 s. */
static void driver_has_each_regions_term(group *g, int i)
{
    uint64_t end = time_mono_ms() + 30000;
    bool same = false;
    size_t n = 0;
    while (!same && time_mono_ms() < end) {
        json_t *mine = NULL, *pd = NULL, *r, *p;
        size_t k, q;
        same = call_on(g, i, "GET", "/v1/regions?local=true", NULL, REQ_MS, &mine) == 200 &&
               tl_raft_call(g->ohttp[0], "GET", "/v1/pd/regions?limit=10000", NULL, REQ_MS,
                            &pd) == 200;
        n = json_array_size(json_object_get(mine, "regions"));
        json_array_foreach(json_object_get(mine, "regions"), k, r) {
            bool found = false;
            json_array_foreach(json_object_get(pd, "regions"), q, p) {
                if (json_integer_value(json_object_get(p, "id")) !=
                    json_integer_value(json_object_get(r, "id")))
                    continue;
                json_t *term = json_object_get(json_object_get(p, "leader"), "term");
                found = json_is_integer(term) &&
                        json_integer_value(term) == json_integer_value(json_object_get(r, "term"));
            }
            same = same && found;
        }
        json_decref(mine);
        json_decref(pd);
        if (!same)
            time_sleep_ms(300);
    }
    printf("# the driver's map: each of %zu regions with its own group's term\n", n);
    assert_true(same);
}

/* Values of 1 KiB over --region-max-bytes 32768, a leader kill halfway:
 * the leader (the first, then the next) splits regions as they grow,
 * every member ends with the same map, and every value reads back. With
 * region_logs, each split is one of the region's own log and makes a
 * group (the ids from the placement driver: three oracles). */
static void split_by_size_through_a_leader_kill(bool region_logs)
{
    group g;
    const char *extra[] = {"--region-max-bytes", "32768", "--janitor-interval-ms", "100",
                           "--pd-heartbeat-ms", "300", region_logs ? "--region-logs" : NULL,
                           NULL};
    group_start_over(&g, NULL, extra, region_logs ? 3 : 1);
    assert_true(leader_but(&g, -1, 15000) >= 0);
    char value[1030], key[32];
    memset(value, 'v', 1024);
    value[1024] = '\0';
    for (int k = 0; k < GROW_KEYS; k++) {
        if (k == GROW_KEYS / 2) {
            int l = leader_but(&g, -1, 30000);
            assert_true(l >= 0);
            kill_and_restart(&g, l, true);
        }
        snprintf(key, sizeof key, "grow-%03d", k);
        put(&g, key, value);
    }
    /* The splits settle within a few janitor rounds of the last write. */
    char map[2048];
    int n = 0;
    for (int round = 0; round < 50; round++) {
        int was = n;
        n = same_map_everywhere(&g, map, sizeof map);
        if (n >= 4 && n == was)
            break;
        time_sleep_ms(300);
    }
    double splits = 0;
    for (int i = 0; i < NODES; i++)
        splits += metric_on(&g, i, "percolator_region_auto_splits_total");
    printf("# %d regions of 200 KiB over 32 KiB regions, %.0f split since each member's last "
           "start\n", n, splits);
    assert_true(n >= 4);
    for (int k = 0; k < GROW_KEYS; k += 7) {
        snprintf(key, sizeof key, "grow-%03d", k);
        must_read(&g, key, value);
    }
    if (region_logs) {
        int l = -1;
        for (int i = 0; i < NODES; i++)
            l = (int)leaders_gathered(&g, i) - 1;
        assert_true(l >= 0);
        driver_has_each_regions_term(&g, l);
        /* each region's group has its own series, the leader's at 1 */
        int led = 0;
        for (const char *p = map; *p != '\0'; p = strchr(p, '|') + 1) {
            char name[96];
            snprintf(name, sizeof name, "percolator_raft_leader{region=\"%d\"}", atoi(p));
            assert_true(metric_on(&g, l, name) == 1);
            led++;
        }
        printf("# member %d's percolator_raft_leader is 1 for each of its %d regions\n", l + 1,
               led);
        assert_int_equal(led, n);
    }
    group_stop(&g);
}

static void regions_split_by_size_through_a_leader_kill(void **state)
{
    (void)state;
    split_by_size_through_a_leader_kill(false);
}

static void region_logs_split_by_size_through_a_leader_kill(void **state)
{
    (void)state;
    split_by_size_through_a_leader_kill(true);
}

int main(void)
{
    /* PERCOLATOR_TEST_ONLY=<name>: run one test (cmocka's filter). */
    if (getenv("PERCOLATOR_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("PERCOLATOR_TEST_ONLY"));
    const struct CMUnitTest tests[] = {
        TL_TEST(failover_keeps_every_acknowledged_write),
        TL_TEST(bank_and_snapshot_isolation_through_kills),
        TL_TEST(regions_split_by_size_through_a_leader_kill),
        TL_TEST(region_logs_keep_the_bank_and_snapshot_isolation_through_kills),
        TL_TEST(region_logs_members_killed_between_a_split_and_its_new_group),
        TL_TEST(region_logs_split_by_size_through_a_leader_kill),
        TL_TEST(region_logs_a_member_that_missed_a_split_makes_its_replica),
        TL_TEST(region_logs_keep_the_bank_through_a_cut_off_leader),
        TL_TEST(region_logs_act_where_each_region_is_led),
        TL_TEST(writes_on_other_keys_are_in_flight_together),
        TL_TEST(blind_writes_arriving_together_share_one_entry),
        TL_TEST(gc_runs_in_the_group),
        TL_TEST(the_whole_group_killed_keeps_acknowledged_writes),
        TL_TEST(a_wiped_member_catches_up_by_snapshot),
        TL_TEST(a_crash_between_image_parts_heals),
        TL_TEST(images_are_taken_one_member_at_a_time),
        TL_TEST(a_wiped_member_never_votes_before_it_is_caught_up),
        TL_TEST(a_wiped_follower_under_writes_is_back_within_seconds),
        TL_TEST(a_member_far_behind_is_not_ready),
        TL_TEST(a_group_is_restored_from_one_backup),
        TL_TEST(a_group_is_restored_from_one_saved_archive),
        TL_TEST(a_cut_off_leader_acknowledges_nothing),
        TL_TEST(writes_through_a_follower_survive_leader_kills),
        TL_TEST(the_cli_fails_over_across_leader_kills),
        TL_TEST(members_are_replaced_and_grown_under_the_bank),
        TL_TEST(a_new_machine_on_a_new_address_takes_the_dead_leaders_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
