/*
 * test_oracle_raft.c — three real percolator-oracle processes as a Raft
 * group on 127.0.0.1 (docs/DESIGN.md §7):
 *
 *  - one leader; a follower answers 307 to it (or 503 not_leader while it
 *    knows of none); health reports role, leader, term and the mark, in
 *    the form the README shows;
 *  - 8 clients take timestamps while the leader is killed (kill -9) ten
 *    times and a follower twice, each restarted: every timestamp is unique,
 *    each client's are increasing, and real-time order holds (a request
 *    that began after another one's answer came gets a larger timestamp);
 *    the time from each leader kill to the first timestamp the new leader
 *    serves is printed (median, max);
 *  - the election timeout flags: a bad pair refused, and a group given a
 *    long timeout elects nobody before it has run out.
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
#include <unistd.h>

#include "bank.h"
#include "raft_member.h"
#include "readme.h"
#include "testlib.h"
#include "timeutil.h"

#define NODES 3
#define MAX_NODES 5            /* the membership test's group */
#define CLIENTS 8
#define MAX_TAKES 200000

typedef struct {
    char *dir;
    int n;                   /* members in --raft-peers: NODES, or up to MAX_NODES */
    int http[MAX_NODES], raft[MAX_NODES];
    pid_t pid[MAX_NODES];
    char peers[256], urls[256];
    char token[600];         /* the members' --auth-token-file, "" for none */
    const char *extra[7];    /* more flags for every member, NULL-ended */
    /* A member on an address no other member's flags give (DESIGN 7.3):
     * its own --raft-peers and --raft-urls ("" : the group's). */
    char own_peers[MAX_NODES][320], own_urls[MAX_NODES][320];
} group;

static void node_url(const group *g, int i, char *out, size_t len)
{
    snprintf(out, len, "http://127.0.0.1:%d", g->http[i]);
}

static void node_start(group *g, int i)
{
    char listen[32], data[600], log[620], id[16];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", g->http[i]);
    snprintf(data, sizeof data, "%s/n%d", g->dir, i + 1);
    snprintf(log, sizeof log, "%s/n%d.log", g->dir, i + 1);
    snprintf(id, sizeof id, "%d", i + 1);
    bool own = g->own_peers[i][0] != '\0';
    const char *args[24] = {"--listen", listen, "--data-dir", data, "--raft-id", id,
                            "--raft-peers", own ? g->own_peers[i] : g->peers,
                            "--raft-urls", own ? g->own_urls[i] : g->urls, NULL};
    int n = 10;
    if (own) { /* it joins: the group's first members bootstrapped it */
        args[n++] = "--raft-initial-members";
        args[n++] = "1,2,3";
    }
    if (g->token[0]) {
        args[n++] = "--auth-token-file";
        args[n++] = g->token;
    }
    for (int k = 0; k < 6 && g->extra[k] != NULL; k++)
        args[n++] = g->extra[k];
    g->pid[i] = tl_spawn("percolator-oracle", args, NULL, log);
    assert_true(g->pid[i] > 0);
    char url[64];
    node_url(g, i, url, sizeof url);
    assert_int_equal(tl_wait_health(url, g->pid[i], TL_START_MS), 0);
}

/* A group of n members in --raft-peers (NODES, up to MAX_NODES), the
 * first `started` of them started (when they are a majority, until each
 * is a voter: tl_raft_require_voters); with auth, every member asks for
 * the token in g->dir/token; extra (NULL, or at most 6 flags, NULL-ended)
 * for every member. */
static void group_start_n(group *g, int n, int started, bool auth, const char *const extra[])
{
    memset(g, 0, sizeof(*g));
    g->n = n;
    for (int k = 0; extra != NULL && k < 6 && extra[k] != NULL; k++)
        g->extra[k] = extra[k];
    g->dir = tl_mkdtemp("oracle-raft");
    assert_non_null(g->dir);
    if (auth) {
        snprintf(g->token, sizeof g->token, "%s/token", g->dir);
        assert_int_equal(tl_write_file(g->token, "raft-group-token-0123456789\n", 28), 0);
    }
    for (int i = 0; i < n; i++) {
        g->http[i] = tl_free_port();
        g->raft[i] = tl_free_port();
        /* Each member's raft on a loopback address of its own, so that a
         * partition can cut one member off (iptables, below). */
        snprintf(g->peers + strlen(g->peers), sizeof(g->peers) - strlen(g->peers),
                 "%s%d=127.0.1.%d:%d", i ? "," : "", i + 1, i + 1, g->raft[i]);
        snprintf(g->urls + strlen(g->urls), sizeof(g->urls) - strlen(g->urls),
                 "%s%d=http://127.0.0.1:%d", i ? "," : "", i + 1, g->http[i]);
    }
    for (int i = 0; i < started; i++)
        node_start(g, i);
    if (2 * started > n)
        tl_raft_require_voters(g->dir, "n", g->http, g->pid, started);
}

static void group_start_with(group *g, bool auth, const char *const extra[])
{
    group_start_n(g, NODES, NODES, auth, extra);
}

static void group_start(group *g, bool auth)
{
    group_start_with(g, auth, NULL);
}

static void group_stop(group *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->pid[i] > 0)
            assert_int_equal(tl_stop(g->pid[i], TL_STOP_MS), 0);
    tl_rmtree(g->dir);
    free(g->dir);
}

typedef tl_raft_view member_view;

/* What member i's /v1/health says; false when it did not answer 200. */
static bool member_health(const group *g, int i, member_view *v)
{
    return tl_raft_health(g->http[i], 1000, v);
}

/* The member, other than `skip` (-1: none), that says it is the leader,
 * waiting up to ms; -1 if none. */
static int leader_but(group *g, int skip, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    member_view v;
    do {
        for (int i = 0; i < g->n; i++)
            if (i != skip && g->pid[i] > 0 && member_health(g, i, &v) && v.leader)
                return i;
        time_sleep_ms(50);
    } while (time_mono_ms() < end);
    return -1;
}

static int leader_of(group *g, int ms)
{
    return leader_but(g, -1, ms);
}

/* count timestamps from member i (it must answer 200): the first. */
static json_int_t take_timestamps(group *g, int i, unsigned count)
{
    char url[128];
    tl_resp r;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/timestamps?count=%u", g->http[i], count);
    assert_int_equal(tl_http("POST", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *j = json_loads(r.body, 0, NULL);
    json_int_t first = json_integer_value(json_object_get(j, "first"));
    json_decref(j);
    tl_resp_free(&r);
    return first;
}

static void a_follower_points_at_the_leader(void **state)
{
    (void)state;
    group g;
    group_start(&g, false);
    int l = leader_of(&g, 10000);
    assert_true(l >= 0);
    int f = (l + 1) % NODES;
    char url[128], want[64];
    tl_resp r;
    json_int_t first = take_timestamps(&g, l, 5);
    assert_true(first >= 1);
    /* A follower learns of the leader from its first heartbeat: until
     * then it answers 503 not_leader. */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/timestamps?count=5", g.http[f]);
    for (int tries = 0;; tries++) {
        assert_int_equal(tl_http("POST", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
        if (r.status != 503 || tries == 100)
            break;
        assert_non_null(strstr(r.body, "not_leader"));
        tl_resp_free(&r);
        time_sleep_ms(20);
    }
    assert_int_equal(r.status, 307);
    char loc[160];
    assert_non_null(tl_resp_header(&r, "Location", loc, sizeof loc));
    snprintf(want, sizeof want, "http://127.0.0.1:%d/", g.http[l]);
    assert_true(strncmp(loc, want, strlen(want)) == 0);
    tl_resp_free(&r);
    /* A follower applies the command at the leader's next heartbeat. */
    member_view v = {0};
    for (int tries = 0; tries < 100 && v.hwm < first + 4; tries++) {
        assert_true(member_health(&g, f, &v));
        assert_false(v.leader);
        assert_int_equal(v.leader_id, l + 1);
        if (v.hwm < first + 4)
            time_sleep_ms(20);
    }
    assert_true(v.hwm >= first + 4);
    /* Both logged the leader they know (one line a change). */
    char path[640], line[128];
    snprintf(line, sizeof line, "member %d at 127.0.1.%d:%d leads; this member (%d) is a follower",
             l + 1, l + 1, g.raft[l], f + 1);
    snprintf(path, sizeof path, "%s/n%d.log", g.dir, f + 1);
    char *log = tl_read_file(path, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, line));
    free(log);
    snprintf(line, sizeof line, "this member (%d) leads", l + 1);
    snprintf(path, sizeof path, "%s/n%d.log", g.dir, l + 1);
    log = tl_read_file(path, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, line));
    free(log);
    group_stop(&g);
}

/* ---- clients through failovers ---- */

typedef struct {
    uint64_t start_ns, end_ns, first;
    unsigned count;
    int client;
} take;

typedef struct {
    group *g;
    atomic_int stop;
    pthread_mutex_t mu;
    take *takes;
    size_t n;
    /* The failover clock: requests sent after dead_ns (the old leader
     * reaped) can only be answered by a new leader; the first answer of
     * one sets first_ok_ns. */
    _Atomic uint64_t dead_ns, first_ok_ns;
} run;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* One request to node i, following one redirect; the status (0: none). */
static long ask(run *r, int i, unsigned count, uint64_t *first)
{
    char url[160];
    tl_resp resp;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/timestamps?count=%u", r->g->http[i], count);
    for (int hop = 0; hop < 2; hop++) {
        if (tl_http("POST", url, NULL, 0, NULL, 3000, &resp) != 0) {
            tl_resp_free(&resp);
            return 0;
        }
        long st = resp.status;
        if (st == 307 && tl_resp_header(&resp, "Location", url, sizeof url) != NULL) {
            tl_resp_free(&resp);
            continue;
        }
        if (st == 200) {
            json_t *j = json_loads(resp.body, 0, NULL);
            *first = (uint64_t)json_integer_value(json_object_get(j, "first"));
            json_decref(j);
        }
        tl_resp_free(&resp);
        return st;
    }
    return 307;
}

typedef struct {
    run *r;
    int id;
} client_arg;

static void *client_main(void *arg)
{
    client_arg *c = arg;
    run *r = c->r;
    unsigned seed = (unsigned)c->id * 7919u + 11;
    int node = c->id % NODES;
    while (!atomic_load(&r->stop)) {
        unsigned count = 1 + (unsigned)(rand_r(&seed) % 20);
        uint64_t first = 0, t0 = now_ns();
        long st = ask(r, node, count, &first);
        uint64_t t1 = now_ns();
        if (st != 200) {
            node = (node + 1) % NODES; /* that one is down or has no leader */
            time_sleep_ms(20);
            continue;
        }
        uint64_t dead = atomic_load(&r->dead_ns), none = 0;
        if (dead != 0 && t0 >= dead)
            atomic_compare_exchange_strong(&r->first_ok_ns, &none, t1);
        pthread_mutex_lock(&r->mu);
        if (r->n < MAX_TAKES)
            r->takes[r->n++] = (take){t0, t1, first, count, c->id};
        pthread_mutex_unlock(&r->mu);
    }
    return NULL;
}

static run *run_new(void)
{
    run *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    r->takes = calloc(MAX_TAKES, sizeof(*r->takes));
    assert_non_null(r->takes);
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

static void run_free(run *r)
{
    pthread_mutex_destroy(&r->mu);
    free(r->takes);
    free(r);
}

static void clients_start(run *r, pthread_t th[CLIENTS], client_arg args[CLIENTS])
{
    for (int i = 0; i < CLIENTS; i++) {
        args[i] = (client_arg){r, i};
        assert_int_equal(tl_thread_start(&th[i], client_main, &args[i]), 0);
    }
}

static int by_first(const void *a, const void *b)
{
    const take *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

static int by_end(const void *a, const void *b)
{
    const take *x = *(const take *const *)a, *y = *(const take *const *)b;
    return x->end_ns < y->end_ns ? -1 : x->end_ns > y->end_ns;
}

static int by_start(const void *a, const void *b)
{
    const take *x = *(const take *const *)a, *y = *(const take *const *)b;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Every range unique, each client's increasing, real-time order kept. */
static void check_takes(take *t, size_t n)
{
    take **ends = malloc(n * sizeof(*ends)), **starts = malloc(n * sizeof(*starts));
    assert_non_null(ends);
    assert_non_null(starts);
    for (size_t i = 0; i < n; i++)
        ends[i] = starts[i] = &t[i];
    /* Real time: sweep the requests by start; every answer that came
     * before a request began must be below what that request got. */
    qsort(ends, n, sizeof(*ends), by_end);
    qsort(starts, n, sizeof(*starts), by_start);
    uint64_t max_before = 0;
    size_t e = 0;
    for (size_t i = 0; i < n; i++) {
        while (e < n && ends[e]->end_ns < starts[i]->start_ns) {
            uint64_t last = ends[e]->first + ends[e]->count - 1;
            max_before = last > max_before ? last : max_before;
            e++;
        }
        if (starts[i]->first <= max_before)
            fail_msg("real-time order broken: %llu handed out after %llu was answered",
                     (unsigned long long)starts[i]->first, (unsigned long long)max_before);
    }
    /* Per client, in its own order (start times), increasing. */
    uint64_t last[CLIENTS] = {0};
    for (size_t i = 0; i < n; i++) {
        take *x = starts[i];
        assert_true(x->first > last[x->client]);
        last[x->client] = x->first + x->count - 1;
    }
    free(ends);
    free(starts);
    /* Unique: sorted by first, no range overlaps the next. */
    qsort(t, n, sizeof(*t), by_first);
    for (size_t i = 1; i < n; i++)
        if (t[i].first <= t[i - 1].first + t[i - 1].count - 1)
            fail_msg("timestamp %llu handed out twice", (unsigned long long)t[i].first);
}

static void timestamps_stay_unique_through_failovers(void **state)
{
    (void)state;
    enum { LEADER_KILLS = 10, FOLLOWER_KILLS = 2 };
    group g;
    run *r = run_new();
    group_start(&g, false);
    r->g = &g;
    assert_true(leader_of(&g, 10000) >= 0);
    pthread_t th[CLIENTS];
    client_arg args[CLIENTS];
    clients_start(r, th, args);
    uint64_t failover_ms[LEADER_KILLS];
    for (int k = 0; k < LEADER_KILLS + FOLLOWER_KILLS; k++) {
        time_sleep_ms(400);
        int l = leader_of(&g, 15000);
        assert_true(l >= 0);
        bool kill_leader = k < LEADER_KILLS;
        int victim = kill_leader ? l : (l + 1) % NODES;
        atomic_store(&r->dead_ns, 0);
        atomic_store(&r->first_ok_ns, 0);
        uint64_t t0 = now_ns();
        assert_int_equal(tl_kill9(g.pid[victim]), 0); /* returns once it is reaped */
        g.pid[victim] = 0;
        atomic_store(&r->dead_ns, now_ns());
        if (kill_leader) {
            /* A request sent once the leader is dead is answered by a new
             * one: from the kill to the first such answer. (An answer
             * merely received after the kill may come from the old leader,
             * to a request it took before dying.) */
            uint64_t end = time_mono_ms() + 20000;
            while (atomic_load(&r->first_ok_ns) == 0 && time_mono_ms() < end)
                time_sleep_ms(5);
            assert_true(atomic_load(&r->first_ok_ns) != 0);
            failover_ms[k] = (atomic_load(&r->first_ok_ns) - t0) / 1000000;
        }
        node_start(&g, victim); /* back as a follower, from its own log */
    }
    atomic_store(&r->stop, 1);
    for (int i = 0; i < CLIENTS; i++)
        tl_thread_join(th[i], NULL);
    qsort(failover_ms, LEADER_KILLS, sizeof(failover_ms[0]), cmp_u64);
    print_message("%zu requests over %d leader and %d follower kills; from a leader's kill -9 "
                  "to the first timestamp served by the new leader: median %llu ms, max %llu "
                  "ms\n",
                  r->n, LEADER_KILLS, FOLLOWER_KILLS,
                  (unsigned long long)failover_ms[LEADER_KILLS / 2],
                  (unsigned long long)failover_ms[LEADER_KILLS - 1]);
    assert_true(r->n > 100);
    check_takes(r->takes, r->n);
    group_stop(&g);
    run_free(r);
}

/* Under steady clients the leader answers from its window under its lease
 * (DESIGN 7.4): most requests take no Raft round of their own, and the
 * order checks hold as everywhere else. */
static void a_busy_leader_answers_from_its_window(void **state)
{
    (void)state;
    group g;
    run *r = run_new();
    group_start(&g, false);
    r->g = &g;
    int l = leader_of(&g, 10000);
    assert_true(l >= 0);
    pthread_t th[CLIENTS];
    client_arg args[CLIENTS];
    clients_start(r, th, args);
    time_sleep_ms(3000);
    atomic_store(&r->stop, 1);
    for (int i = 0; i < CLIENTS; i++)
        tl_thread_join(th[i], NULL);
    char url[96];
    tl_resp resp;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", g.http[l]);
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &resp), 0);
    double window = tl_metric(resp.body, "percolator_oracle_raft_window_requests_total");
    double commands = tl_metric(resp.body, "percolator_oracle_raft_commands_total");
    tl_resp_free(&resp);
    print_message("%zu requests; the leader answered %.0f from its window and proposed %.0f "
                  "commands\n", r->n, window, commands);
    assert_true(r->n > 100);
    assert_true(window > 0);
    assert_true(commands < window);
    check_takes(r->takes, r->n);
    group_stop(&g);
    run_free(r);
}

/* `percolator status` on an oracle group with a token: with --token-file
 * a row per member with its id, one leader with LAG 0 and a store size
 * each; without it the public part only, "-" for the rest. */
static void status_of_the_oracles(group *g)
{
    char eps[200], ep[64];
    eps[0] = '\0';
    for (int i = 0; i < NODES; i++) {
        node_url(g, i, ep, sizeof ep);
        snprintf(eps + strlen(eps), sizeof eps - strlen(eps), "%s%s", i ? "," : "", ep);
    }
    for (int with = 0; with < 2; with++) {
        const char *args[] = {"--endpoints", eps, "status", NULL, NULL, NULL};
        if (with) {
            args[3] = "--token-file";
            args[4] = g->token;
        }
        tl_run_result rr;
        assert_int_equal(tl_run("percolator", args, NULL, NULL, 0, TL_REQUEST_MS, &rr), 0);
        if (rr.status != 0)
            fail_msg("percolator status: exit %d\n%s%s", rr.status, rr.out, rr.err);
        int row = -1, leaders = 0;
        char *save = NULL;
        for (char *line = strtok_r(rr.out, "\n", &save); line != NULL;
             line = strtok_r(NULL, "\n", &save), row++) {
            if (row < 0)
                continue; /* the header */
            char e[64], id[16], st[16], role[16], mem[16], term[24], applied[24], lag[24],
                size[16];
            assert_int_equal(sscanf(line, "%63s %15s %15s %15s %15s %23s %23s %23s %15s", e, id,
                                    st, role, mem, term, applied, lag, size),
                             9);
            node_url(g, row, ep, sizeof ep);
            assert_string_equal(e, ep);
            leaders += strcmp(role, "leader") == 0;
            assert_true(strcmp(role, "leader") == 0 || strcmp(role, "follower") == 0);
            if (!with) { /* id, term, applied, lag and size need the token */
                assert_string_equal(id, "-");
                assert_string_equal(applied, "-");
                assert_string_equal(lag, "-");
                assert_string_equal(size, "-");
                continue;
            }
            assert_int_equal(atoi(id), row + 1);
            assert_true(atoll(applied) > 0);
            assert_true(strcmp(size, "-") != 0);
            if (strcmp(role, "leader") == 0)
                assert_string_equal(lag, "0");
            else
                assert_true(strcmp(lag, "-") != 0);
        }
        assert_int_equal(row, NODES);
        assert_int_equal(leaders, 1);
        tl_run_free(&rr);
    }
}

/* The service pointed at a follower: its oracle client follows the 307. */
static void the_service_commits_through_a_follower(void **state)
{
    (void)state;
    group g;
    group_start(&g, true);
    int l = leader_of(&g, 10000);
    assert_true(l >= 0);
    int f = (l + 1) % NODES;
    char listen[32], data[600], log[620], oracle[64], url[96];

    /* With a token set, public health tells the role and where the leader
     * is; the term, indexes and member ids only go with the token. */
    char auth[700], *tok = tl_read_file(g.token, NULL);
    assert_non_null(tok);
    tok[strcspn(tok, "\n")] = '\0';
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
    free(tok);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/health", g.http[f]);
    /* The follower names the leader once it heard from it (its next tick
     * after the election), and has measured its data dir (once a second):
     * wait for both, bounded. */
    uint64_t until = time_mono_ms() + 15000;
    for (bool ready = false; !ready && time_mono_ms() < until;) {
        tl_resp h;
        if (tl_http_with("GET", url, NULL, 0, NULL, auth, TL_REQUEST_MS, &h) == 0 &&
            h.status == 200) {
            json_t *j = json_loads(h.body, 0, NULL);
            ready = json_string_value(json_object_get(json_object_get(j, "leader"), "url")) &&
                    json_integer_value(json_object_get(j, "store_bytes")) > 0;
            json_decref(j);
        }
        tl_resp_free(&h);
        if (!ready)
            time_sleep_ms(50);
    }
    for (int with = 0; with < 2; with++) {
        tl_resp h;
        assert_int_equal(tl_http_with("GET", url, NULL, 0, NULL, with ? auth : NULL, TL_REQUEST_MS, &h), 0);
        assert_int_equal(h.status, 200);
        json_t *j = json_loads(h.body, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(j, "role")), "follower");
        json_t *leader = json_object_get(j, "leader");
        assert_non_null(json_string_value(json_object_get(leader, "url")));
        assert_int_equal(json_object_get(leader, "id") != NULL, with);
        assert_int_equal(json_object_get(j, "term") != NULL, with);
        assert_int_equal(json_object_get(j, "hwm") != NULL, with);
        assert_int_equal(json_object_get(j, "applied_index") != NULL, with);
        assert_int_equal(json_integer_value(json_object_get(j, "id")), with ? f + 1 : 0);
        /* Its data dir's size: the raft log at least (preallocated). */
        assert_int_equal(json_integer_value(json_object_get(j, "store_bytes")) > 0, with);
        if (with) { /* the README shows a member's health, as it is */
            json_t *doc = tl_readme_example("127.0.0.1:8091/v1/health");
            char why[300];
            assert_non_null(doc);
            if (!tl_json_same_shape(doc, j, why, sizeof why))
                fail_msg("README's example of a member's /v1/health: %s (the answer: %s)", why,
                         h.body);
            json_decref(doc);
        }
        json_decref(j);
        tl_resp_free(&h);
    }
    status_of_the_oracles(&g);
    int port = tl_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(data, sizeof data, "%s/service", g.dir);
    snprintf(log, sizeof log, "%s/service.log", g.dir);
    node_url(&g, f, oracle, sizeof oracle);
    /* The token must go with the request to the leader, whose URL only the
     * follower's redirect names. */
    const char *args[] = {"--listen", listen, "--data-dir", data, "--oracle", oracle,
                          "--oracle-token-file", g.token, NULL};
    pid_t svc = tl_spawn("percolator-service", args, NULL, log);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    assert_int_equal(tl_wait_health(url, svc, TL_START_MS), 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/kv/k", port);
    tl_resp r;
    assert_int_equal(tl_http("PUT", url, "{\"value\":\"1\"}", 13, "application/json", TL_REQUEST_MS, &r),
                     0);
    if (r.status != 200)
        tl_dump_file(log);
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
    assert_int_equal(tl_stop(svc, TL_STOP_MS), 0);
    group_stop(&g);
}

/* ---- a partition: the leader's raft port cut off (iptables on loopback) ---- */

/* Member i's raft address (each on a loopback address of its own). */
static int cut(group *g, int i, bool on)
{
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.1.%d", i + 1);
    return tl_raft_cut(addr, g->raft[i], on);
}

/* The leader's raft port cut off under clients on every member: the others
 * elect a leader; the one cut off answers from its window at most until
 * its lease ends, before that, then nothing; real-time order holds across
 * both sides; healed, every member agrees on the leader and the mark. */
static void a_cut_off_leader_hands_out_nothing_and_the_group_heals(void **state)
{
    (void)state;
    group g;
    run *r = run_new();
    if (!tl_raft_can_cut())
        fail_msg("this test needs iptables and root (make test installs it as root)");
    group_start(&g, false);
    r->g = &g;
    int l = leader_of(&g, 10000);
    assert_true(l >= 0);
    pthread_t th[CLIENTS];
    client_arg args[CLIENTS];
    clients_start(r, th, args);
    time_sleep_ms(500);
    assert_int_equal(cut(&g, l, true), 0);
    uint64_t t0 = time_mono_ms();
    /* The others elect a leader of their own. */
    int nl = leader_but(&g, l, 20000);
    uint64_t elected_ms = time_mono_ms() - t0;
    assert_true(nl >= 0);
    /* Its lease ran out before another could be elected (DESIGN 7.4): from
     * now on the leader cut off answers nothing (it cannot commit). */
    uint64_t old_first = 0;
    long old_st = ask(r, l, 1, &old_first);
    if (old_st == 200)
        fail_msg("the leader cut off handed out %llu after another was elected",
                 (unsigned long long)old_first);
    time_sleep_ms(2000); /* clients go on against both sides */
    assert_int_equal(cut(&g, l, false), 0);
    /* Healed: every member agrees on the leader and on the mark. */
    bool agreed = false;
    member_view v[NODES];
    uint64_t t1 = time_mono_ms();
    while (!agreed && time_mono_ms() < t1 + 20000) {
        agreed = true;
        for (int i = 0; i < NODES; i++)
            agreed = member_health(&g, i, &v[i]) && agreed && v[i].leader_id > 0 &&
                     v[i].leader_id == v[0].leader_id;
        if (agreed) {
            /* Stop the clients, then the marks must meet. */
            atomic_store(&r->stop, 1);
        }
        time_sleep_ms(50);
    }
    if (!agreed) {
        for (int i = 0; i < NODES; i++) {
            char url[96];
            tl_resp resp;
            snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/health", g.http[i]);
            if (tl_http("GET", url, NULL, 0, NULL, 1000, &resp) == 0)
                print_error("member %d: %ld %s\n", i + 1, resp.status, resp.body);
            tl_resp_free(&resp);
        }
        fail_msg("the members did not agree on a leader within 20 s of healing");
    }
    atomic_store(&r->stop, 1);
    for (int i = 0; i < CLIENTS; i++)
        tl_thread_join(th[i], NULL);
    /* The member cut off catches up from the log, or by an image when the
     * leader compacted past it; libraft 0.15 retries an image whose answer
     * it missed only after 30 s (issue #23: catch-up that finishes), so
     * the marks may take that long to meet. */
    bool same = false;
    uint64_t t2 = time_mono_ms();
    for (int tries = 0; tries < 900 && !same; tries++) {
        same = true;
        for (int i = 0; i < NODES; i++)
            same = member_health(&g, i, &v[i]) && same && v[i].hwm == v[0].hwm;
        if (!same)
            time_sleep_ms(50);
    }
    print_message("the marks met %llu ms after the clients stopped\n",
                  (unsigned long long)(time_mono_ms() - t2));
    for (int i = 0; i < NODES && !same; i++)
        print_error("member %d: leader %d, term %lld, applied %lld, mark %lld\n", i + 1,
                    v[i].leader_id, (long long)v[i].term, (long long)v[i].applied,
                    (long long)v[i].hwm);
    json_int_t hwm[1] = {v[0].hwm};
    print_message("member %d cut off: another elected in %llu ms; %zu requests; healed, every "
                  "member's mark %lld\n",
                  l + 1, (unsigned long long)elected_ms, r->n, (long long)hwm[0]);
    assert_true(same);
    assert_true(r->n > 10);
    check_takes(r->takes, r->n);
    /* Every range handed out is below the mark all members agree on. */
    for (size_t i = 0; i < r->n; i++)
        assert_true(r->takes[i].first + r->takes[i].count - 1 <= (uint64_t)hwm[0]);
    group_stop(&g);
    run_free(r);
}

/* ---- the service over the group: the bank while the leader dies ---- */

#define ACCOUNTS 10

typedef struct {
    tl_stack *st;
    atomic_int stop, committed, unavailable, refused;
    int id;
} banker;

static void *banker_main(void *arg)
{
    banker *b = arg;
    unsigned seed = (unsigned)b->id * 31u + 7;
    while (!atomic_load(&b->stop)) {
        char a[16], c[16];
        int from = rand_r(&seed) % ACCOUNTS, to = (from + 1 + rand_r(&seed) % (ACCOUNTS - 1)) % ACCOUNTS;
        snprintf(a, sizeof a, "acct%d", from);
        snprintf(c, sizeof c, "acct%d", to);
        tl_transfer r = tl_bank_transfer(b->st, b->id % 2 == 0, a, c, rand_r(&seed) % 20, NULL);
        if (r.committing && r.status == 200)
            atomic_fetch_add(&b->committed, 1);
        else if (r.status == 503)
            atomic_fetch_add(&b->unavailable, 1);
        else
            atomic_fetch_add(&b->refused, 1);
        if (r.status == 503)
            time_sleep_ms(50);
    }
    return NULL;
}

static void the_bank_commits_while_the_oracle_leader_dies(void **state)
{
    (void)state;
    enum { KILLS = 3, BANKERS = 4 };
    group g;
    group_start(&g, false);
    assert_true(leader_of(&g, 10000) >= 0); /* 503 until one is elected */
    tl_stack st;
    memset(&st, 0, sizeof st);
    int port = tl_free_port();
    char listen[32], oracles[256] = "";
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(st.svc.data, sizeof st.svc.data, "%s/service", g.dir);
    snprintf(st.svc.log, sizeof st.svc.log, "%s/service.log", g.dir);
    snprintf(st.svc.url, sizeof st.svc.url, "http://127.0.0.1:%d", port);
    for (int i = 0; i < NODES; i++)
        snprintf(oracles + strlen(oracles), sizeof oracles - strlen(oracles),
                 "%shttp://127.0.0.1:%d", i ? "," : "", g.http[i]);
    const char *args[] = {"--listen", listen, "--data-dir", st.svc.data, "--oracle", oracles,
                          NULL};
    st.svc.pid = tl_spawn("percolator-service", args, NULL, st.svc.log);
    assert_int_equal(tl_wait_health(st.svc.url, st.svc.pid, TL_START_MS), 0);
    char body[1024] = "{\"writes\":[";
    for (int i = 0; i < ACCOUNTS; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body),
                 "%s{\"key\":\"acct%d\",\"value\":\"100\"}", i ? "," : "", i);
    strcat(body, "]}");
    json_decref(tl_must(&st, "POST", "/v1/txn", body, 200));

    banker b[BANKERS];
    pthread_t th[BANKERS];
    for (int i = 0; i < BANKERS; i++) {
        b[i] = (banker){.st = &st, .id = i};
        assert_int_equal(tl_thread_start(&th[i], banker_main, &b[i]), 0);
    }
    uint64_t resumed_ms[KILLS];
    for (int k = 0; k < KILLS; k++) {
        time_sleep_ms(1000);
        int l = leader_of(&g, 15000);
        assert_true(l >= 0);
        int before = 0;
        for (int i = 0; i < BANKERS; i++)
            before += atomic_load(&b[i].committed);
        uint64_t t0 = time_mono_ms();
        assert_int_equal(tl_kill9(g.pid[l]), 0);
        g.pid[l] = 0;
        node_start(&g, l);
        /* Commits go on once a new leader is elected (bounded wait). */
        int now = before;
        while (now <= before + BANKERS && time_mono_ms() < t0 + 20000) {
            time_sleep_ms(20);
            now = 0;
            for (int i = 0; i < BANKERS; i++)
                now += atomic_load(&b[i].committed);
        }
        if (now <= before + BANKERS) {
            tl_dump_file(st.svc.log);
            fail_msg("no commits within 20 s of the oracle leader's kill");
        }
        resumed_ms[k] = time_mono_ms() - t0;
    }
    time_sleep_ms(3000);
    int committed = 0, unavailable = 0, refused = 0;
    for (int i = 0; i < BANKERS; i++) {
        atomic_store(&b[i].stop, 1);
        tl_thread_join(th[i], NULL);
        committed += atomic_load(&b[i].committed);
        unavailable += atomic_load(&b[i].unavailable);
        refused += atomic_load(&b[i].refused);
    }
    /* The total is conserved, in one snapshot. */
    json_t *j = tl_must(&st, "GET", "/v1/kv?prefix=acct", NULL, 200);
    long total = 0;
    json_t *items = json_object_get(j, "items");
    for (size_t i = 0; i < json_array_size(items); i++)
        total += tl_bank_balance(json_array_get(items, i));
    json_decref(j);
    print_message("%d oracle leader kills under the bank: %d transfers committed, %d answered 503 "
                  "(failover windows), %d refused (conflicts); total %ld; commits went on "
                  "%llu, %llu, %llu ms after each kill\n",
                  KILLS, committed, unavailable, refused, total,
                  (unsigned long long)resumed_ms[0], (unsigned long long)resumed_ms[1],
                  (unsigned long long)resumed_ms[2]);
    assert_int_equal(total, ACCOUNTS * 100);
    assert_int_equal(tl_stop(st.svc.pid, TL_STOP_MS), 0);
    group_stop(&g);
}

/* ---- the election timeout flags ---- */

/* --raft-election-timeout-ms and --raft-heartbeat-ms: a timeout shorter
 * than five heartbeats is refused (exit 2, naming both); a group given 5 s
 * runs on it: after its leader's kill -9 nobody leads (nor stands) for 3.5 s,
 * where the default 1 s elects within about 2 s; then one does and hands
 * out timestamps above every earlier one. */
static void the_election_timeout_is_the_flags(void **state)
{
    (void)state;
    tl_raft_refuses_short_timeout("percolator-oracle");
    group g;
    const char *slow[] = {"--raft-election-timeout-ms", "5000", "--raft-heartbeat-ms", "500",
                          NULL};
    group_start_with(&g, false, slow);
    int l = leader_of(&g, 40000);
    assert_true(l >= 0);
    json_int_t before = take_timestamps(&g, l, 1);
    int64_t hwm = 0;
    uint64_t t0 = tl_raft_kill_leader_expect_quiet(g.pid, g.http, NODES, l, 3500, &hwm);
    /* Health's mark is refreshed by the loop after it answered: it may
     * lag the timestamp just taken. */
    if (hwm < before)
        hwm = before;
    /* Each round of the survivors' timers runs 5-10 s, and a split vote
     * (both time out together, more likely on a loaded machine) costs a
     * round: a minute allows several. */
    int l2 = leader_but(&g, l, 60000);
    assert_true(l2 >= 0);
    print_message("election timeout 5000 ms: a new leader %llu ms after the kill\n",
                  (unsigned long long)(time_mono_ms() - t0));
    assert_true(take_timestamps(&g, l2, 1) > hwm);
    group_stop(&g);
}

/* --min-timestamp on a group: whichever member leads raises the group's
 * mark to it before handing anything out, also a new leader after a kill
 * (the way out for a group whose state is gone, docs/DESIGN.md §7.2). */
static void a_group_starts_above_min_timestamp(void **state)
{
    (void)state;
    const char *floor[] = {"--min-timestamp", "5000000", NULL};
    group g;
    group_start_with(&g, false, floor);
    int l = leader_of(&g, 30000);
    assert_true(l >= 0);
    json_int_t first = take_timestamps(&g, l, 3);
    assert_true(first > 5000000);
    tl_raft_kill_leader_expect_quiet(g.pid, g.http, NODES, l, 0, NULL);
    int l2 = leader_but(&g, l, 30000);
    assert_true(l2 >= 0);
    assert_true(take_timestamps(&g, l2, 1) > first + 2);
    print_message("--min-timestamp 5000000: first timestamp %lld\n", (long long)first);
    group_stop(&g);
}

/* ---- membership by an operator (common/raft_admin.h) ---- */

/* method path (body) on member i, following redirects (tl_raft_call). */
static long admin(group *g, int i, const char *method, const char *path, const char *body,
                  json_t **out)
{
    return tl_raft_call(g->http[i], method, path, body, 15000, out);
}

/* method path (body) at the leader, asked again for up to 15 s while it
 * answers 503 (it knows no leader yet: a new leader's view is refreshed on
 * its next tick) or 409 (another change still committing): what an
 * operator's retry does. The last status; its reason printed each time. */
static long admin_at_leader(group *g, const char *method, const char *path, const char *body)
{
    long st;
    json_t *j = NULL;
    uint64_t until = time_mono_ms() + 15000;
    while ((st = admin(g, leader_of(g, 10000), method, path, body, &j)) != 200 &&
           (st == 409 || st == 503) && time_mono_ms() < until) {
        char *txt = json_dumps(j, 0);
        print_message("%s %s: %ld %s; again\n", method, path, st, txt ? txt : "");
        free(txt);
        json_decref(j);
        j = NULL;
        time_sleep_ms(300);
    }
    if (st != 200) {
        char *txt = j ? json_dumps(j, 0) : NULL;
        print_message("%s %s: %ld %s\n", method, path, st, txt ? txt : "");
        free(txt);
    }
    json_decref(j);
    return st;
}

/* How many members GET /v1/members lists, and how many of them are
 * voters; -1 when it does not answer 200. */
static int members_listed(group *g, int i, int *voters)
{
    json_t *j = NULL;
    long st;
    /* 503 while the member knows no leader yet (a new leader's view is
     * refreshed on its next tick): ask again, for a while. */
    uint64_t end = time_mono_ms() + 10000;
    while ((st = admin(g, i, "GET", "/v1/members", NULL, &j)) == 503 && time_mono_ms() < end) {
        json_decref(j);
        time_sleep_ms(100);
    }
    if (st != 200) {
        json_decref(j);
        return -1;
    }
    json_t *list = json_object_get(j, "members"), *m;
    size_t k;
    *voters = 0;
    json_array_foreach(list, k, m)
        *voters += strcmp(json_string_value(json_object_get(m, "role")), "voter") == 0;
    int n = (int)json_array_size(list);
    json_decref(j);
    return n;
}

/* Whether the list at member i says member id answers (its leader's
 * view), once it says so within ms: what is said then, -1 when the list
 * does not answer or leaves id out. The view is made again as time
 * passes too, not only when the log moves (raft_host.c refresh_view): a
 * follower that dies while nothing is written shows as not answering. */
static int member_answers_within(group *g, int i, int id, bool want, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    int said = -1;
    do {
        json_t *j = NULL;
        if (admin(g, i, "GET", "/v1/members", NULL, &j) == 200) {
            json_t *m;
            size_t k;
            json_array_foreach(json_object_get(j, "members"), k, m)
                if (json_integer_value(json_object_get(m, "id")) == id)
                    said = json_is_true(json_object_get(m, "answers"));
        }
        json_decref(j);
        if (said == (int)want)
            return said;
        time_sleep_ms(100);
    } while (time_mono_ms() < end);
    return said;
}

static void members_are_listed_moved_removed_and_added(void **state)
{
    (void)state;
    group g;
    group_start(&g, false);
    int l = leader_of(&g, 10000);
    assert_true(l >= 0);
    int f = (l + 1) % NODES, x = (l + 2) % NODES, voters = 0;
    for (int i = 0; i < NODES; i++)
        assert_true(tl_raft_membership_is(g.http[i], "voter", 20000));
    /* Listed from a follower (redirected), as the leader sees them. */
    assert_int_equal(members_listed(&g, f, &voters), 3);
    assert_int_equal(voters, 3);
    for (int i = 0; i < NODES; i++)
        assert_int_equal(member_answers_within(&g, l, i + 1, true, 10000), 1);
    /* The CLI says the same, from any member. */
    {
        char ep[64];
        snprintf(ep, sizeof ep, "http://127.0.0.1:%d", g.http[f]);
        const char *args[] = {"--endpoint", ep, "member", "list", NULL};
        tl_run_result rr;
        assert_int_equal(tl_run("percolator", args, NULL, NULL, 0, TL_REQUEST_MS, &rr), 0);
        assert_int_equal(rr.status, 0);
        assert_non_null(strstr(rr.out, "voter"));
        tl_run_free(&rr);
    }
    /* The lead moves where it is sent, and timestamps go on above. */
    json_int_t before = take_timestamps(&g, l, 10);
    char body[32];
    snprintf(body, sizeof body, "{\"id\":%d}", f + 1);
    assert_int_equal(admin(&g, l, "POST", "/v1/leader", body, NULL), 200);
    int nl = leader_of(&g, 10000);
    member_view v;
    for (int t = 0; t < 100 && nl != f; t++) {
        time_sleep_ms(100);
        nl = member_health(&g, f, &v) && v.leader ? f : nl;
    }
    assert_int_equal(nl, f);
    assert_true(take_timestamps(&g, f, 1) > before + 9);
    /* x dies: removing the other follower would leave 2 voters of which
     * one answers, so it is refused; removing x is not. */
    int other = l; /* the old leader, now a follower */
    assert_int_equal(tl_kill9(g.pid[x]), 0);
    g.pid[x] = 0;
    time_sleep_ms(3500); /* past two election timeouts: x no longer answers */
    /* Nothing was written since: the list says so all the same. */
    assert_int_equal(member_answers_within(&g, f, x + 1, false, 10000), 0);
    assert_int_equal(member_answers_within(&g, f, other + 1, true, 10000), 1);
    json_t *j;
    char path[64];
    snprintf(path, sizeof path, "/v1/members/%d", other + 1);
    assert_int_equal(admin(&g, f, "DELETE", path, NULL, &j), 409);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                        "membership_refused");
    json_decref(j);
    assert_int_equal(members_listed(&g, f, &voters), 3);
    snprintf(path, sizeof path, "/v1/members/%d", x + 1);
    assert_int_equal(admin(&g, f, "DELETE", path, NULL, NULL), 200);
    assert_int_equal(members_listed(&g, f, &voters), 2);
    take_timestamps(&g, f, 1); /* two voters, both up: it commits */
    /* x back on its own data dir: it has state, so nobody adds it back
     * unasked; the operator does, and it becomes a voter once caught up. */
    node_start(&g, x);
    time_sleep_ms(2000);
    assert_int_equal(members_listed(&g, f, &voters), 2);
    snprintf(body, sizeof body, "{\"id\":%d}", x + 1);
    assert_int_equal(admin_at_leader(&g, "POST", "/v1/members", body), 200);
    uint64_t end = time_mono_ms() + 20000;
    while ((members_listed(&g, f, &voters) != 3 || voters != 3) && time_mono_ms() < end)
        time_sleep_ms(100);
    assert_int_equal(voters, 3);
    /* What is refused, and why (the promotion listed as done may still be
     * committing on the leader: "another membership change is in
     * progress" until it is). */
    const char *why = "";
    for (int i = 0; i < 50; i++) {
        assert_int_equal(admin(&g, f, "POST", "/v1/members", "{\"id\":9}", &j), 409);
        why = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        if (why == NULL || strstr(why, "in progress") == NULL || i == 49)
            break;
        json_decref(j);
        j = NULL;
        time_sleep_ms(200);
    }
    if (why == NULL || strstr(why, "not one of --raft-peers") == NULL)
        fail_msg("adding member 9: %s", why != NULL ? why : "(no message)");
    json_decref(j);
    assert_int_equal(admin(&g, f, "POST", "/v1/members", body, NULL), 409); /* in already */
    snprintf(path, sizeof path, "/v1/members/%d", f + 1);
    assert_int_equal(admin(&g, f, "DELETE", path, NULL, NULL), 409); /* the leader */
    assert_int_equal(admin(&g, f, "DELETE", "/v1/members/abc", NULL, NULL), 400);
    assert_int_equal(admin(&g, f, "POST", "/v1/leader", "{\"id\":0}", NULL), 400);
    group_stop(&g);
    /* A single oracle has no group. */
    tl_oracle_env *e = tl_oracle_env_new("oracle-alone");
    assert_non_null(e);
    assert_int_equal(tl_oracle_start(&e->o, e->data, 0), 0);
    tl_resp r;
    char url[128];
    snprintf(url, sizeof url, "%s/v1/members", e->o.url);
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(r.body, "not_in_a_group"));
    tl_resp_free(&r);
    snprintf(url, sizeof url, "%s/v1/ready", e->o.url); /* alone, ready once it serves */
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
    tl_oracle_env_free(e);
}

/* Wait up to ms until the leader lists `want` members, every one a voter,
 * member `must` (0: any) among them and member `gone` (0: none) not. */
static bool group_is(group *g, int want, int must, int gone, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    do {
        int l = leader_of(g, 5000);
        json_t *j;
        if (l >= 0 && admin(g, l, "GET", "/v1/members", NULL, &j) == 200) {
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
            bool ok = (int)json_array_size(list) == want && voters == want && has_must && !has_gone;
            json_decref(j);
            if (ok)
                return true;
        } else if (l >= 0) {
            json_decref(j);
        }
        time_sleep_ms(200);
    } while (time_mono_ms() < end);
    return false;
}

/* Five members in --raft-peers, the first three bootstrap
 * (--raft-initial-members): under clients taking timestamps, members 4 and
 * 5 start and the leader adds and promotes them (3 to 5); they are removed
 * (back to 3); then a member dies for good and a new machine (member 4 on
 * its own address, an empty dir) takes its place, and the same with the
 * leader (member 5). No timestamp is handed out twice, real-time order
 * holds throughout. */
static void a_group_grows_shrinks_and_replaces_members_under_load(void **state)
{
    (void)state;
    group g;
    const char *extra[] = {"--raft-initial-members", "1,2,3", NULL};
    run *r = run_new();
    group_start_n(&g, MAX_NODES, NODES, false, extra);
    r->g = &g;
    assert_true(group_is(&g, 3, 0, 4, 20000));
    pthread_t th[CLIENTS];
    client_arg args[CLIENTS];
    clients_start(r, th, args);
    /* 3 to 5: members 4 and 5 start; the leader adds them. */
    uint64_t t0 = time_mono_ms();
    node_start(&g, 3);
    node_start(&g, 4);
    assert_true(group_is(&g, 5, 5, 0, 30000));
    uint64_t grown = time_mono_ms() - t0;
    /* 5 to 3: removed by the operator, then stopped. */
    int l;
    for (int m = 5; m >= 4; m--) {
        char path[32];
        snprintf(path, sizeof path, "/v1/members/%d", m);
        l = leader_of(&g, 10000);
        if (l == m - 1) /* a member about to go leads: hand the lead on first */
            assert_int_equal(admin_at_leader(&g, "POST", "/v1/leader", "{\"id\":1}"), 200);
        assert_int_equal(admin_at_leader(&g, "DELETE", path, NULL), 200);
        assert_int_equal(tl_stop(g.pid[m - 1], TL_STOP_MS), 0);
        g.pid[m - 1] = 0;
    }
    assert_true(group_is(&g, 3, 0, 4, 10000));
    /* A follower dies for good; a new machine, member 4 on its own address
     * with an empty dir, joins; the dead one is removed. */
    for (int round = 0; round < 2; round++) {
        l = leader_of(&g, 15000);
        assert_true(l >= 0);
        int dead = -1, fresh = round == 0 ? 3 : 4;
        for (int i = 0; i < MAX_NODES && dead < 0; i++)
            if (g.pid[i] > 0 && (round == 0 ? i != l : i == l))
                dead = i; /* round 0: a follower; round 1: the leader */
        assert_true(dead >= 0);
        assert_int_equal(tl_kill9(g.pid[dead]), 0);
        g.pid[dead] = 0;
        char data[640];
        snprintf(data, sizeof data, "%s/n%d", g.dir, fresh + 1);
        tl_rmtree(data);
        node_start(&g, fresh);
        assert_true(leader_of(&g, 15000) >= 0);
        /* Four in the configuration, one dead: a quorum of three answers. */
        uint64_t end = time_mono_ms() + 30000;
        while (!group_is(&g, 4, fresh + 1, 0, 1000) && time_mono_ms() < end)
            ;
        char path[32];
        snprintf(path, sizeof path, "/v1/members/%d", dead + 1);
        assert_int_equal(admin_at_leader(&g, "DELETE", path, NULL), 200);
        assert_true(group_is(&g, 3, fresh + 1, dead + 1, 20000));
        print_message("round %d: member %d (%s) died; member %d took its place\n", round,
                      dead + 1, round == 0 ? "a follower" : "the leader", fresh + 1);
    }
    time_sleep_ms(500);
    atomic_store(&r->stop, 1);
    for (int i = 0; i < CLIENTS; i++)
        tl_thread_join(th[i], NULL);
    print_message("%zu requests; grown from 3 to 5 voters in %llu ms\n", r->n,
                  (unsigned long long)grown);
    assert_true(r->n > 100);
    check_takes(r->takes, r->n);
    group_stop(&g);
    run_free(r);
}

/* Member i (index >= NODES) on an address of its own: 127.0.1.(i+1) and
 * fresh ports, flags listing the three first members and the ones added
 * before it; no other member's flags name it. */
static void new_machine(group *g, int i)
{
    g->http[i] = tl_free_port();
    g->raft[i] = tl_free_port();
    g->n = i + 1;
    snprintf(g->own_peers[i], sizeof g->own_peers[i], "%s", g->peers);
    snprintf(g->own_urls[i], sizeof g->own_urls[i], "%s", g->urls);
    for (int k = NODES; k <= i; k++) {
        size_t lp = strlen(g->own_peers[i]), lu = strlen(g->own_urls[i]);
        snprintf(g->own_peers[i] + lp, sizeof g->own_peers[i] - lp, ",%d=127.0.1.%d:%d", k + 1,
                 k + 1, g->raft[k]);
        snprintf(g->own_urls[i] + lu, sizeof g->own_urls[i] - lu, ",%d=http://127.0.0.1:%d",
                 k + 1, g->http[k]);
    }
    node_start(g, i);
}

/* The operator's add of member i at its own address and URL: over HTTP,
 * or with the CLI (`percolator member add ID HOST:PORT URL`, through
 * member `via`, which may not lead) as an operator would. 200 or the
 * status; the CLI's exit status 0 counts as 200. */
static long add_new_machine(group *g, int i, int via)
{
    char id[16], addr[48], url[48], ep[48];
    snprintf(id, sizeof id, "%d", i + 1);
    snprintf(addr, sizeof addr, "127.0.1.%d:%d", i + 1, g->raft[i]);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g->http[i]);
    if (via < 0) {
        char body[160];
        snprintf(body, sizeof body, "{\"id\":%s,\"address\":\"%s\",\"url\":\"%s\"}", id,
                 addr, url);
        return admin_at_leader(g, "POST", "/v1/members", body);
    }
    node_url(g, via, ep, sizeof ep);
    const char *args[] = {"--endpoint", ep, "--retries", "5", "member", "add", id, addr, url,
                          NULL};
    tl_run_result rr;
    assert_int_equal(tl_run("percolator", args, NULL, NULL, 0, TL_REQUEST_MS, &rr), 0);
    int st = rr.status;
    if (st != 0)
        print_message("percolator member add: exit %d: %s%s\n", st, rr.out, rr.err);
    else
        assert_non_null(strstr(rr.out, "added as a spare"));
    tl_run_free(&rr);
    return st == 0 ? 200 : st;
}

/* A dead machine replaced by one on an address no member's flags give,
 * with no member restarted (issue #23; etcd's "member add --peer-urls"):
 * under clients taking timestamps a follower dies for good, member 4
 * starts on 127.0.1.4 and the operator adds it with its address and URL;
 * then the same with the leader (member 5). The configuration in the log
 * carries the new addresses and URLs: a follower sends clients to a
 * leader that is one of the new members, and a first member restarted
 * with its old flags (which name neither) finds them in its log and
 * serves again. No timestamp is handed out twice. */
static void a_new_machine_on_a_new_address_takes_a_dead_ones_place(void **state)
{
    (void)state;
    group g;
    run *r = run_new();
    group_start(&g, false);
    r->g = &g;
    assert_true(group_is(&g, 3, 0, 0, 20000));
    pthread_t th[CLIENTS];
    client_arg args[CLIENTS];
    clients_start(r, th, args);
    /* A bad address is refused before anything changes. */
    json_t *j = NULL;
    int l = leader_of(&g, 10000);
    assert_true(l >= 0);
    assert_int_equal(admin(&g, l, "POST", "/v1/members",
                           "{\"id\":4,\"address\":\"127.0.1.4\"}", &j), 400);
    json_decref(j);
    int survivor = -1;
    for (int round = 0; round < 2; round++) {
        int fresh = NODES + round, dead = -1;
        l = leader_of(&g, 15000);
        assert_true(l >= 0);
        for (int i = 0; i < g.n && dead < 0; i++)
            if (g.pid[i] > 0 && (round == 0 ? i != l : i == l))
                dead = i; /* round 0: a follower; round 1: the leader (member 4 may lead) */
        assert_true(dead >= 0);
        uint64_t t0 = time_mono_ms();
        assert_int_equal(tl_kill9(g.pid[dead]), 0);
        g.pid[dead] = 0;
        new_machine(&g, fresh);
        assert_true(leader_but(&g, dead, 20000) >= 0);
        int via = -1; /* round 0 over HTTP; round 1 with the CLI through a live member */
        for (int i = 0; round == 1 && i < g.n && via < 0; i++)
            if (g.pid[i] > 0 && i != fresh)
                via = i;
        assert_int_equal(add_new_machine(&g, fresh, via), 200);
        assert_true(tl_raft_membership_is(g.http[fresh], "voter", 30000));
        char path[32];
        snprintf(path, sizeof path, "/v1/members/%d", dead + 1);
        assert_int_equal(admin_at_leader(&g, "DELETE", path, NULL), 200);
        assert_true(group_is(&g, 3, fresh + 1, dead + 1, 20000));
        print_message("round %d: member %d (%s) died; member %d on 127.0.1.%d took its place in "
                      "%llu ms\n", round, dead + 1, round == 0 ? "a follower" : "the leader",
                      fresh + 1, fresh + 1, (unsigned long long)(time_mono_ms() - t0));
    }
    for (int i = 0; i < NODES; i++)
        if (g.pid[i] > 0)
            survivor = i;
    assert_true(survivor >= 0);
    /* The list names the new members with their URLs. */
    l = leader_of(&g, 10000);
    assert_true(l >= 0);
    assert_int_equal(admin(&g, l, "GET", "/v1/members", NULL, &j), 200);
    char *txt = json_dumps(j, 0);
    json_decref(j);
    char want[64];
    snprintf(want, sizeof want, "\"url\": \"http://127.0.0.1:%d\"", g.http[NODES + 1]);
    if (txt == NULL || strstr(txt, want) == NULL)
        fail_msg("GET /v1/members does not give member 5's URL: %s", txt ? txt : "?");
    free(txt);
    /* The lead on a new member: the first member left sends clients there
     * (the URL from the configuration, not from its flags). */
    char body[32];
    snprintf(body, sizeof body, "{\"id\":%d}", NODES + 2);
    assert_int_equal(admin_at_leader(&g, "POST", "/v1/leader", body), 200);
    member_view v = {0};
    uint64_t until = time_mono_ms() + 10000; /* the old leader may say so a tick longer */
    while (!(member_health(&g, NODES + 1, &v) && v.leader) && time_mono_ms() < until)
        time_sleep_ms(50);
    assert_true(v.leader);
    /* The first member left restarts with its old flags, which name
     * neither new member: its log does, and it serves again. */
    assert_int_equal(tl_stop(g.pid[survivor], TL_STOP_MS), 0);
    g.pid[survivor] = 0;
    node_start(&g, survivor);
    assert_true(tl_raft_membership_is(g.http[survivor], "voter", 20000));
    uint64_t first = 0;
    long st = 0;
    uint64_t end = time_mono_ms() + 20000;
    while ((st = ask(r, survivor, 1, &first)) != 200 && time_mono_ms() < end)
        time_sleep_ms(100);
    assert_int_equal(st, 200);
    atomic_store(&r->stop, 1);
    for (int i = 0; i < CLIENTS; i++)
        tl_thread_join(th[i], NULL);
    print_message("%zu requests\n", r->n);
    assert_true(r->n > 100);
    check_takes(r->takes, r->n);
    group_stop(&g);
    run_free(r);
}

/* Member `id`'s role in the leader's list ("voter", "spare", ...; "" when
 * the list names it not or no leader answers), into role. */
static void role_at_leader(group *g, int id, char *role, size_t len)
{
    role[0] = '\0';
    int l = leader_of(g, 5000);
    json_t *j = NULL, *m;
    size_t k;
    if (l >= 0 && admin(g, l, "GET", "/v1/members", NULL, &j) == 200)
        json_array_foreach(json_object_get(j, "members"), k, m)
            if (json_integer_value(json_object_get(m, "id")) == id)
                snprintf(role, len, "%s", json_string_value(json_object_get(m, "role")));
    json_decref(j);
}

/* A spare whose promotion failed is promoted once it answers again. The
 * new member is frozen (SIGSTOP) just after its hello, and added: it
 * becomes a spare (only voters commit that), but the leader's promotion
 * gets no answer and libraft gives it up after a 5 s catch-up round. The
 * leader tries a promotion again only on a recent hello, and once thawed
 * the spare is a voter within seconds. (A hello comes with each new
 * connection, and this spare opens one to answer the leader; the hello a
 * spare says once a second, raft_host.c prober_main, is for one whose
 * connections stay open through a failed promotion, as after a catch-up
 * too slow under load, which this test does not make: it passes without
 * that hello too.) */
static void a_spare_whose_promotion_failed_is_promoted_once_back(void **state)
{
    (void)state;
    group g;
    group_start(&g, false);
    assert_true(group_is(&g, 3, 0, 0, 20000));
    int fresh = NODES;
    new_machine(&g, fresh);
    assert_true(tl_raft_membership_is(g.http[fresh], "joining", 10000));
    time_sleep_ms(1200); /* a hello of its prober since */
    assert_int_equal(kill(g.pid[fresh], SIGSTOP), 0);
    assert_int_equal(add_new_machine(&g, fresh, -1), 200);
    char role[16];
    role_at_leader(&g, fresh + 1, role, sizeof role);
    assert_string_equal(role, "spare");
    time_sleep_ms(7000); /* the 5 s catch-up round given up, and a retry's 1 s */
    role_at_leader(&g, fresh + 1, role, sizeof role);
    assert_string_equal(role, "spare");
    uint64_t t0 = time_mono_ms();
    assert_int_equal(kill(g.pid[fresh], SIGCONT), 0);
    assert_true(group_is(&g, 4, fresh + 1, 0, 30000));
    print_message("member %d: a voter %llu ms after it was thawed\n", fresh + 1,
                  (unsigned long long)(time_mono_ms() - t0));
    assert_true(tl_raft_membership_is(g.http[fresh], "voter", 10000));
    group_stop(&g);
}

/* ---- a member that lost its data (docs/DESIGN.md 7.3) ---- */

/* The sequence that lost acknowledged timestamps before member
 * identities: follower f is cut off while the leader l hands out
 * timestamps (committed by l and w); then w loses its data dir and l dies.
 * Back on an empty dir, w must not vote: f, which missed those
 * timestamps, may not lead. Once l is back, the group goes on above them,
 * and w is caught up, promoted and ready (printed: how soon). Three times,
 * with other members in the roles. */
static void a_wiped_member_never_votes_before_it_is_caught_up(void **state)
{
    (void)state;
    if (!tl_raft_can_cut())
        fail_msg("this test needs iptables and root (make test installs it as root)");
    group g;
    group_start(&g, false);
    for (int round = 0; round < 3; round++) {
        int l = leader_of(&g, 15000);
        assert_true(l >= 0);
        /* The wiped member changes from round to round (the leader may not). */
        int w = (l + 1 + round % 2) % NODES, f = 0 + 1 + 2 - l - w; /* the third of three */
        assert_true(tl_raft_membership_is(g.http[w], "voter", 20000));
        assert_true(tl_raft_membership_is(g.http[f], "voter", 20000));
        /* f heard l before it is cut (else it knows nothing past its
         * bootstrap entry, and w rightly waits for l instead of joining). */
        assert_true(tl_raft_follows(g.http[f], l + 1, 20000));
        take_timestamps(&g, l, 10);
        assert_int_equal(cut(&g, f, true), 0);
        json_int_t last = 0;
        for (int k = 0; k < 20; k++)
            last = take_timestamps(&g, l, 1000) + 999; /* each acknowledged */
        char data[640];
        snprintf(data, sizeof data, "%s/n%d", g.dir, w + 1);
        assert_int_equal(tl_kill9(g.pid[w]), 0);
        assert_int_equal(tl_rmtree(data), 0);
        assert_int_equal(tl_kill9(g.pid[l]), 0);
        g.pid[w] = g.pid[l] = 0;
        assert_int_equal(cut(&g, f, false), 0);
        node_start(&g, w);
        /* w asked f, learned the group exists, and joins it without a vote;
         * it is not ready meanwhile. */
        assert_true(tl_raft_membership_is(g.http[w], "joining", 10000));
        assert_int_equal(tl_raft_call(g.http[w], "GET", "/v1/ready", NULL, 5000, NULL), 503);
        member_view v;
        uint64_t end = time_mono_ms() + 4000;
        while (time_mono_ms() < end) {
            if (member_health(&g, f, &v) && v.leader)
                fail_msg("round %d: member %d, which missed %lld timestamps, leads with the "
                         "wiped member's vote", round, f + 1, (long long)last);
            time_sleep_ms(100);
        }
        uint64_t back = time_mono_ms();
        node_start(&g, l);
        int nl = leader_of(&g, 20000);
        assert_true(nl >= 0);
        json_int_t next = take_timestamps(&g, nl, 1);
        assert_true(next > last);
        /* The leader replaced w's old raft id by its new one. */
        assert_true(tl_raft_membership_is(g.http[w], "voter", 20000));
        long ready;
        while ((ready = tl_raft_ready(g.http[w], NULL, 0)) != 200 && time_mono_ms() - back < 20000)
            time_sleep_ms(100);
        printf("# round %d: last acknowledged %lld, next %lld (leader %d); member %d a voter "
               "again and ready %llu ms after the old leader's restart\n", round,
               (long long)last, (long long)next, nl + 1, w + 1,
               (unsigned long long)(time_mono_ms() - back));
        assert_int_equal(ready, 200);
    }
    group_stop(&g);
}

int main(void)
{
    /* PERCOLATOR_TEST_ONLY=<name>: run one test (cmocka's filter). */
    if (getenv("PERCOLATOR_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("PERCOLATOR_TEST_ONLY"));
    if (getenv("CMOCKA_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("CMOCKA_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        TL_TEST(a_follower_points_at_the_leader),
        TL_TEST(timestamps_stay_unique_through_failovers),
        TL_TEST(a_busy_leader_answers_from_its_window),
        TL_TEST(a_cut_off_leader_hands_out_nothing_and_the_group_heals),
        TL_TEST(a_wiped_member_never_votes_before_it_is_caught_up),
        TL_TEST(members_are_listed_moved_removed_and_added),
        TL_TEST(a_group_grows_shrinks_and_replaces_members_under_load),
        TL_TEST(a_new_machine_on_a_new_address_takes_a_dead_ones_place),
        TL_TEST(a_spare_whose_promotion_failed_is_promoted_once_back),
        TL_TEST(the_service_commits_through_a_follower),
        TL_TEST(the_bank_commits_while_the_oracle_leader_dies),
        TL_TEST(the_election_timeout_is_the_flags),
        TL_TEST(a_group_starts_above_min_timestamp),
    };
    return cmocka_run_group_tests_name("oracle: a three-node Raft group", tests, NULL, NULL);
}
