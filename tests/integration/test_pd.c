/*
 * test_pd.c — the placement driver on three real percolator-oracle
 * processes as a Raft group (oracle/routes_pd.c, docs/DESIGN.md §6.3):
 *
 *  1. five nodes register (a known address keeps its id); a keyspace is
 *     split 1,300 times, each split's two regions reported by a random
 *     node with an id the driver handed out, and now and then an older
 *     version of a region re-reported (it must be left out, never taken
 *     over the newer one). Meanwhile the leader is killed (kill -9) and
 *     restarted, and a follower is killed and restarted 1,200 commands
 *     later, past the point where the leader's log was cut to an image.
 *     At the end every member, made leader in turn, answers exactly the
 *     regions the splits made, with each key in its region; again after
 *     all three restart (their own images and logs); ids were never
 *     handed out twice;
 *  2. the API's errors: a follower sends a request to the leader (307,
 *     same path and query); bad bodies, unknown nodes, malformed regions
 *     and queries are 400/404/409/413 with a JSON error; a single oracle
 *     has no placement driver (409);
 *  3. three service members over the group report to it
 *     (service/pd_report.c): each registers, the leader's report carries
 *     every region with the three as replicas, a split shows with its new
 *     epoch (`percolator pd regions` and `pd nodes` show the same), and
 *     after the service leader is killed the new leader is the regions'
 *     leader at the driver.
 *
 * PD_TEST_SEED=<n> replays test 1 with another seed (printed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "raft_member.h"
#include "svc_group.h"
#include "testlib.h"
#include "timeutil.h"

#define SPLITS 1300
#define KEYSPACE 1000000
#define MAX_REGIONS (SPLITS + 1)

/* A region as the test made it: keys "k%07d" from lo (0: "") to hi
 * (KEYSPACE: the end). */
typedef struct {
    json_int_t id, version;
    int lo, hi;
} model_region;

typedef struct {
    model_region r[MAX_REGIONS];
    size_t n;
} model;

static void key_of(int i, char out[16])
{
    if (i == 0)
        out[0] = '\0';
    else
        snprintf(out, 16, "k%07d", i);
}

static void b64_of(int i, char out[32])
{
    char k[16];
    key_of(i, k);
    b64_encode(k, strlen(k), out);
}

/* A call to the group, at whichever member leads (retried through an
 * election, bounded): the status, *out the body. */
static long call(tl_svc_group *g, const char *method, const char *path, const char *body,
                 json_t **out)
{
    static int l = -1; /* the leader last answered by; asked again when it fails */
    uint64_t end = time_mono_ms() + 30000;
    long st = 0;
    for (;;) {
        if (l < 0 || g->opid[l] == 0)
            l = tl_group_oracle_leader(g, -1, 10000);
        if (l >= 0) {
            st = tl_raft_call(g->ohttp[l], method, path, body, TL_REQUEST_MS, out);
            if (st != 0 && st != 503 && st != 307)
                return st;
            json_decref(*out);
            *out = NULL;
            l = -1;
        }
        if (time_mono_ms() > end)
            fail_msg("%s %s: no answer but %ld in 30 s", method, path, st);
        time_sleep_ms(100);
    }
}

static json_int_t take_ids(tl_svc_group *g, int count)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/pd/ids?count=%d", count);
    json_t *j = NULL;
    assert_int_equal(call(g, "POST", path, NULL, &j), 200);
    json_int_t first = json_integer_value(json_object_get(j, "first"));
    assert_true(first > 0);
    json_decref(j);
    return first;
}

/* The report of regions rs (n of them) from node: 200's body. */
static json_t *heartbeat(tl_svc_group *g, int node, const model_region *rs, size_t n)
{
    json_t *regions = json_array();
    for (size_t i = 0; i < n; i++) {
        char s[32], e[32];
        b64_of(rs[i].lo, s);
        b64_of(rs[i].hi == KEYSPACE ? 0 : rs[i].hi, e);
        json_array_append_new(regions,
                              json_pack("{s:I,s:s,s:o,s:I,s:i,s:[iii],s:i,s:i}", "id", rs[i].id,
                                        "start", s, "end",
                                        rs[i].hi == KEYSPACE ? json_null() : json_string(e),
                                        "version", rs[i].version, "conf_ver", 1, "replicas", 1,
                                        2, 3, "bytes", 1000, "keys", 10));
    }
    json_t *body = json_pack("{s:i,s:o}", "node", node, "regions", regions);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    json_t *out = NULL;
    assert_int_equal(call(g, "POST", "/v1/pd/heartbeat", text, &out), 200);
    free(text);
    return out;
}

/* Member i's map (it must lead) is exactly m, and each probed key is in
 * the region m says. */
static void check_map(tl_svc_group *g, int i, const model *m)
{
    json_t *j = NULL;
    long st = 0;
    /* A new leader answers 503 until its term's first entry is applied
     * (seconds under ASan on a loaded machine). */
    for (int t = 0; t < 300; t++) {
        st = tl_raft_call(g->ohttp[i], "GET", "/v1/pd/regions?limit=10000", NULL, TL_REQUEST_MS,
                          &j);
        if (st != 503)
            break;
        json_decref(j);
        j = NULL;
        time_sleep_ms(100);
    }
    assert_int_equal(st, 200);
    json_t *list = json_object_get(j, "regions");
    assert_int_equal(json_array_size(list), m->n);
    assert_int_equal(json_integer_value(json_object_get(j, "total")), (json_int_t)m->n);
    for (size_t k = 0; k < m->n; k++) {
        json_t *o = json_array_get(list, k);
        const model_region *w = &m->r[k];
        char s[32], e[32];
        b64_of(w->lo, s);
        b64_of(w->hi, e);
        assert_int_equal(json_integer_value(json_object_get(o, "id")), w->id);
        assert_int_equal(json_integer_value(json_object_get(o, "version")), w->version);
        assert_string_equal(json_string_value(json_object_get(o, "start")), s);
        if (w->hi == KEYSPACE)
            assert_true(json_is_null(json_object_get(o, "end")));
        else
            assert_string_equal(json_string_value(json_object_get(o, "end")), e);
    }
    json_decref(j);
    for (int probe = 0; probe < 20; probe++) {
        size_t k = (size_t)rand() % m->n;
        int key = m->r[k].lo + rand() % (m->r[k].hi - m->r[k].lo);
        char b[32], path[96];
        b64_of(key, b);
        snprintf(path, sizeof path, "/v1/pd/regions?key=%s", b);
        for (char *p = path + strlen("/v1/pd/regions?key="); *p; p++)
            if (*p == '+' || *p == '/' || *p == '=') { /* percent-encode base64's own */
                memmove(p + 3, p + 1, strlen(p + 1) + 1);
                char hex[4];
                snprintf(hex, sizeof hex, "%%%02X", (unsigned char)*p);
                memcpy(p, hex, 3);
                p += 2;
            }
        assert_int_equal(tl_raft_call(g->ohttp[i], "GET", path, NULL, TL_REQUEST_MS, &j), 200);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "region"), "id")),
                         m->r[k].id);
        json_decref(j);
    }
}

static int by_lo(const void *a, const void *b)
{
    return ((const model_region *)a)->lo - ((const model_region *)b)->lo;
}

/* Make member i the leader (POST /v1/leader at the leader), bounded. */
static void lead_with(tl_svc_group *g, int i)
{
    char body[32];
    snprintf(body, sizeof body, "{\"id\":%d}", i + 1);
    for (int t = 0; t < 100; t++) {
        if (tl_group_oracle_leader(g, -1, 10000) == i) {
            tl_raft_view v;
            if (tl_raft_health(g->ohttp[i], 1000, &v) && v.leader)
                return;
        }
        json_t *j = NULL;
        call(g, "POST", "/v1/leader", body, &j);
        json_decref(j);
        time_sleep_ms(200);
    }
    fail_msg("member %d did not take the lead", i + 1);
}

static void the_map_follows_reports_through_kills_and_images(void **state)
{
    (void)state;
    const char *env = getenv("PD_TEST_SEED");
    unsigned seed = env != NULL ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time_mono_ns();
    printf("PD_TEST_SEED=%u\n", seed);
    srand(seed);
    tl_svc_group g;
    tl_group_start_n(&g, "pd", TL_GROUP_NODES, 0, NULL, NULL, TL_GROUP_NODES);
    /* Five nodes; a node that registers again keeps its id. */
    json_int_t node_ids[5];
    for (int i = 0; i < 5; i++) {
        char body[96];
        snprintf(body, sizeof body, "{\"address\":\"http://127.0.0.1:%d\"}", 9100 + i);
        json_t *j = NULL;
        assert_int_equal(call(&g, "POST", "/v1/pd/nodes", body, &j), 200);
        node_ids[i] = json_integer_value(json_object_get(j, "id"));
        json_decref(j);
        assert_true(i == 0 || node_ids[i] > node_ids[i - 1]);
    }
    json_t *j = NULL;
    assert_int_equal(call(&g, "POST", "/v1/pd/nodes", "{\"address\":\"http://127.0.0.1:9102\"}",
                          &j),
                     200);
    assert_int_equal(json_integer_value(json_object_get(j, "id")), node_ids[2]);
    json_decref(j);

    model *m = calloc(1, sizeof *m);
    model_region *old = calloc(2 * SPLITS + 1, sizeof *old); /* every version replaced */
    size_t nold = 0, stale_sent = 0, stale_seen = 0, commands = 0;
    json_int_t last_id = take_ids(&g, 1);
    m->r[0] = (model_region){.id = last_id, .version = 1, .lo = 0, .hi = KEYSPACE};
    m->n = 1;
    json_t *hb = heartbeat(&g, (int)node_ids[0], m->r, 1);
    assert_int_equal(json_integer_value(json_object_get(hb, "taken")), 1);
    json_decref(hb);
    int killed_leader = -1, killed_follower = -1;
    uint64_t started = time_mono_ms();
    for (int s = 0; s < SPLITS; s++) {
        if (s == 300) { /* the leader dies; a new one takes over */
            killed_leader = tl_group_oracle_leader(&g, -1, 10000);
            assert_true(killed_leader >= 0);
            assert_int_equal(tl_kill9(g.opid[killed_leader]), 0);
            g.opid[killed_leader] = 0;
        }
        if (s == 500)
            tl_group_oracle_start(&g, killed_leader);
        if (s == 600) { /* a follower dies, and comes back 700 splits (some 1,700
                         * commands) later: past the leader's image */
            int l = tl_group_oracle_leader(&g, -1, 10000);
            killed_follower = (l + 1) % TL_GROUP_NODES;
            assert_int_equal(tl_kill9(g.opid[killed_follower]), 0);
            g.opid[killed_follower] = 0;
        }
        if (s == 1300 - 1)
            tl_group_oracle_start(&g, killed_follower);
        size_t k = (size_t)rand() % m->n;
        model_region p = m->r[k];
        if (p.hi - p.lo < 2)
            continue;
        int at = p.lo + 1 + rand() % (p.hi - p.lo - 1);
        json_int_t id = take_ids(&g, 1);
        assert_true(id > last_id); /* never handed out twice, through the kills */
        last_id = id;
        old[nold++] = p;
        model_region two[2] = {{.id = p.id, .version = p.version + 1, .lo = p.lo, .hi = at},
                               {.id = id, .version = p.version + 1, .lo = at, .hi = p.hi}};
        m->r[k] = two[0];
        m->r[m->n++] = two[1];
        hb = heartbeat(&g, (int)node_ids[rand() % 5], two, 2);
        json_decref(hb);
        commands += 2;
        if (rand() % 5 == 0 && nold > 0) { /* an older version, late */
            model_region late = old[(size_t)rand() % nold];
            hb = heartbeat(&g, (int)node_ids[rand() % 5], &late, 1);
            stale_sent++;
            stale_seen += json_integer_value(json_object_get(hb, "stale")) == 1;
            assert_int_equal(json_integer_value(json_object_get(hb, "taken")), 0);
            json_decref(hb);
            commands++;
        }
    }
    printf("%zu splits, %zu stale reports (%zu answered stale), %zu commands in %.1f s\n",
           m->n - 1, stale_sent, stale_seen, commands,
           (double)(time_mono_ms() - started) / 1000.0);
    assert_true(stale_sent > 0);
    assert_int_equal(stale_seen, stale_sent);
    qsort(m->r, m->n, sizeof m->r[0], by_lo);
    /* Every member's own map, each made leader in turn. */
    for (int i = 0; i < TL_GROUP_NODES; i++) {
        lead_with(&g, i);
        check_map(&g, i, m);
        tl_raft_view v;
        assert_true(tl_raft_health(g.ohttp[i], 1000, &v));
    }
    /* The nodes, and the leader's hints: each region's leader is a node. */
    assert_int_equal(call(&g, "GET", "/v1/pd/nodes", NULL, &j), 200);
    assert_int_equal(json_array_size(json_object_get(j, "nodes")), 5);
    json_decref(j);
    /* All three restart: their images and logs give the same map. */
    for (int i = 0; i < TL_GROUP_NODES; i++) {
        assert_int_equal(tl_stop(g.opid[i], TL_STOP_MS), 0);
        g.opid[i] = 0;
    }
    for (int i = 0; i < TL_GROUP_NODES; i++)
        tl_group_oracle_start(&g, i);
    int l = tl_group_oracle_leader(&g, -1, 20000);
    assert_true(l >= 0);
    lead_with(&g, l);
    check_map(&g, l, m);
    assert_true(take_ids(&g, 1) > last_id);
    /* Each member's gauge counts the regions as it applied them. */
    for (int i = 0; i < TL_GROUP_NODES; i++) {
        char url[96], want[96];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", g.ohttp[i]);
        snprintf(want, sizeof want, "\npercolator_pd_regions %zu\n", m->n);
        bool seen = false;
        for (int t = 0; t < 100 && !seen; t++) {
            tl_resp r;
            assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
            seen = r.status == 200 && r.body != NULL && strstr(r.body, want) != NULL;
            tl_resp_free(&r);
            if (!seen)
                time_sleep_ms(100);
        }
        if (!seen)
            fail_msg("member %d's percolator_pd_regions is not %zu", i + 1, m->n);
    }
    free(old);
    free(m);
    tl_group_stop(&g);
}

/* The region of the placement driver's map that starts at start (base64),
 * and its leader's address into leader (""; none): its version, 0 when no
 * region starts there. */
static json_int_t pd_region_at(tl_svc_group *g, const char *start, char *leader, size_t len,
                               size_t *nreplicas, size_t *total)
{
    json_t *j = NULL;
    json_int_t version = 0;
    leader[0] = '\0';
    *nreplicas = 0;
    *total = 0;
    if (call(g, "GET", "/v1/pd/regions", NULL, &j) != 200) {
        json_decref(j);
        return 0;
    }
    json_t *list = json_object_get(j, "regions");
    *total = json_array_size(list);
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *o = json_array_get(list, i);
        if (strcmp(json_string_value(json_object_get(o, "start")), start) != 0)
            continue;
        version = json_integer_value(json_object_get(o, "version"));
        const char *a = json_string_value(json_object_get(json_object_get(o, "leader"), "address"));
        snprintf(leader, len, "%s", a != NULL ? a : "");
        *nreplicas = json_array_size(json_object_get(o, "replicas"));
    }
    json_decref(j);
    return version;
}

/* Wait (bounded) until the driver's map has a region at start of at
 * least version led by want_leader, with 3 replicas, among want_total
 * regions. */
static void wait_pd_region(tl_svc_group *g, const char *start, json_int_t version,
                           const char *want_leader, size_t want_total)
{
    char leader[256] = "";
    size_t nrep = 0, total = 0;
    json_int_t v = 0;
    for (int t = 0; t < 300; t++) {
        v = pd_region_at(g, start, leader, sizeof leader, &nrep, &total);
        if (v >= version && strcmp(leader, want_leader) == 0 && nrep == 3 && total == want_total)
            return;
        time_sleep_ms(100);
    }
    fail_msg("the driver's region at '%s': version %lld (want %lld), leader '%s' (want '%s'), "
             "%zu replicas, %zu regions (want %zu)",
             start, (long long)v, (long long)version, leader, want_leader, nrep, total,
             want_total);
}

/* Three service members over the oracle group report to its driver
 * (service/pd_report.c): every member registers (its --raft-urls entry),
 * the leader reports every region with the members as replicas; a split
 * takes its new region's id from the driver and shows up with its new
 * epoch, and after the leader is killed the new leader is the regions'
 * leader at the driver. */
static void service_nodes_report_their_regions(void **state)
{
    (void)state;
    const char *extra[] = {"--pd-heartbeat-ms", "500", NULL};
    tl_svc_group g;
    tl_group_start_with(&g, "pd-svc", TL_GROUP_NODES, NULL, extra, TL_GROUP_NODES);
    int l = tl_group_leader(&g, -1, 30000); /* as the other group tests: ASan on a busy CI */
    assert_true(l >= 0);
    char url[64], path[64] = "/v1/regions/split";
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g.http[l]);
    json_t *j = NULL;
    /* Ids handed out elsewhere first: the split's new region must take
     * the driver's next id (a local id would be 2). */
    assert_int_equal(call(&g, "POST", "/v1/pd/ids?count=50", NULL, &j), 200);
    json_int_t above = json_integer_value(json_object_get(j, "first")) + 50;
    json_decref(j);
    assert_int_equal(tl_raft_call(g.http[l], "POST", path, "{\"key\":\"m\"}", TL_REQUEST_MS,
                                  &j),
                     200);
    json_t *regs = json_object_get(j, "regions");
    assert_int_equal(json_array_size(regs), 2);
    json_int_t right = json_integer_value(json_object_get(json_array_get(regs, 1), "id"));
    assert_string_equal(json_string_value(json_object_get(json_array_get(regs, 1), "start")), "m");
    assert_true(right >= above);
    json_decref(j);
    /* "um": the user key m as the service keeps it ("u" before user keys). */
    wait_pd_region(&g, "dW0=", 2, url, 2);
    wait_pd_region(&g, "", 2, url, 2);
    assert_int_equal(call(&g, "GET", "/v1/pd/regions?key=dW0%3D", NULL, &j), 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "region"), "id")),
                     right);
    json_decref(j);
    assert_int_equal(call(&g, "GET", "/v1/pd/nodes", NULL, &j), 200);
    json_t *nodes = json_object_get(j, "nodes");
    assert_int_equal(json_array_size(nodes), TL_GROUP_NODES);
    for (int i = 0; i < TL_GROUP_NODES; i++) {
        char want[64];
        snprintf(want, sizeof want, "http://127.0.0.1:%d", g.http[i]);
        bool listed = false;
        for (size_t k = 0; k < json_array_size(nodes); k++)
            listed |= strcmp(json_string_value(json_object_get(json_array_get(nodes, k),
                                                               "address")),
                             want) == 0;
        assert_true(listed);
    }
    json_decref(j);
    /* The client shows the same (`percolator pd`), from a follower of the
     * oracle group (its 307 followed). */
    int ol = tl_group_oracle_leader(&g, -1, 10000);
    assert_true(ol >= 0);
    char ep[160];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d,http://127.0.0.1:%d",
             g.ohttp[(ol + 1) % TL_GROUP_NODES], g.ohttp[ol]);
    const char *regions_args[] = {"--endpoints", ep, "pd", "regions", NULL};
    tl_run_result out;
    assert_int_equal(tl_run("percolator", regions_args, NULL, NULL, 0, 30000, &out), 0);
    assert_int_equal(out.status, 0);
    assert_non_null(strstr(out.out, "(2 regions in the map)"));
    assert_non_null(strstr(out.out, url)); /* the leader column */
    assert_non_null(strstr(out.out, "um ")); /* a bound shown as text */
    tl_run_free(&out);
    const char *nodes_args[] = {"--endpoints", ep, "pd", "nodes", NULL};
    assert_int_equal(tl_run("percolator", nodes_args, NULL, NULL, 0, 30000, &out), 0);
    assert_int_equal(out.status, 0);
    for (int i = 0; i < TL_GROUP_NODES; i++) {
        char want[64];
        snprintf(want, sizeof want, "http://127.0.0.1:%d ", g.http[i]);
        assert_non_null(strstr(out.out, want));
    }
    tl_run_free(&out);
    /* The leader dies: the next one is the regions' leader at the driver.
     * First every member votes: one that started late, when the others
     * had made the group, joins as a new incarnation and votes once it is
     * caught up (DESIGN §7.3); killed before that, the leader would leave
     * one voter of two. */
    for (int i = 0; i < TL_GROUP_NODES; i++)
        assert_true(tl_raft_membership_is(g.http[i], "voter", 30000));
    assert_int_equal(tl_kill9(g.pid[l]), 0);
    g.pid[l] = 0;
    int nl = tl_group_leader(&g, l, 30000);
    assert_true(nl >= 0 && nl != l);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g.http[nl]);
    wait_pd_region(&g, "dW0=", 2, url, 2);
    /* Without the driver no split is made: an id of its own could clash
     * with another group's. The map stays as it was. */
    for (int i = 0; i < TL_GROUP_NODES; i++) {
        assert_int_equal(tl_kill9(g.opid[i]), 0);
        g.opid[i] = 0;
    }
    assert_int_equal(tl_raft_call(g.http[nl], "POST", path, "{\"key\":\"t\"}", TL_REQUEST_MS,
                                  &j),
                     503);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                        "pd_unavailable");
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    assert_non_null(strstr(msg, "no member of the oracle group answered"));
    json_decref(j);
    assert_int_equal(tl_raft_call(g.http[nl], "GET", "/v1/regions", NULL, TL_REQUEST_MS, &j), 200);
    assert_int_equal(json_array_size(json_object_get(j, "regions")), 2);
    json_decref(j);
    tl_group_stop(&g);
}

/* A metric of the program on port, as its /metrics shows it now. */
static double port_metric(int port, const char *name)
{
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    return tl_metric_at(base, name);
}

/* A heartbeat of one region the map does not take: 200, stale. */
static void expect_none_taken(int port, const char *body)
{
    json_t *j = NULL;
    assert_int_equal(tl_raft_call(port, "POST", "/v1/pd/heartbeat", body, TL_REQUEST_MS, &j), 200);
    assert_int_equal(json_integer_value(json_object_get(j, "taken")), 0);
    assert_int_equal(json_integer_value(json_object_get(j, "stale")), 1);
    json_decref(j);
}

/* The status of a call to member i, and the error code in *code. */
static long ask(int port, const char *method, const char *path, const char *body,
                char *code, size_t len)
{
    json_t *j = NULL;
    long st = tl_raft_call(port, method, path, body, TL_REQUEST_MS, &j);
    const char *c = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    snprintf(code, len, "%s", c != NULL ? c : "");
    json_decref(j);
    return st;
}

static void the_api_refuses_bad_input_and_points_at_the_leader(void **state)
{
    (void)state;
    tl_svc_group g;
    tl_group_start_n(&g, "pd-api", TL_GROUP_NODES, 0, NULL, NULL, TL_GROUP_NODES);
    int l = tl_group_oracle_leader(&g, -1, 20000);
    assert_true(l >= 0);
    int f = (l + 1) % TL_GROUP_NODES;
    char url[160], loc[256];
    tl_resp r;
    /* A follower sends the request to the leader, path and query kept. */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/pd/regions?key=AA%%3D%%3D", g.ohttp[f]);
    for (int t = 0; t < 50; t++) { /* until it has heard from the leader */
        assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
        if (r.status == 307)
            break;
        tl_resp_free(&r);
        time_sleep_ms(100);
    }
    assert_int_equal(r.status, 307);
    assert_non_null(tl_resp_header(&r, "Location", loc, sizeof loc));
    char want[160];
    snprintf(want, sizeof want, "http://127.0.0.1:%d/v1/pd/regions?key=AA%%3D%%3D",
             g.ohttp[l]);
    assert_string_equal(loc, want);
    tl_resp_free(&r);
    int p = g.ohttp[l];
    char code[64];
    assert_int_equal(ask(p, "POST", "/v1/pd/nodes", "{\"address\":\"http://n1\"}", code,
                         sizeof code),
                     200);
    struct {
        const char *method, *path, *body;
        long status;
        const char *code;
    } cases[] = {
        {"POST", "/v1/pd/nodes", "{}", 400, "bad_request"},
        {"POST", "/v1/pd/nodes", "{\"address\":7}", 400, "bad_request"},
        {"POST", "/v1/pd/nodes", "{\"address\":\"\"}", 400, "bad_request"},
        {"POST", "/v1/pd/nodes", "{\"address\":\"has space\"}", 400, "bad_request"},
        {"POST", "/v1/pd/nodes", "not json", 400, "bad_request"},
        {"POST", "/v1/pd/heartbeat", "{\"node\":99,\"regions\":[]}", 404, "unknown_node"},
        {"POST", "/v1/pd/heartbeat", "{\"regions\":[]}", 400, "bad_request"},
        {"POST", "/v1/pd/heartbeat", "{\"node\":1,\"regions\":{}}", 400, "bad_request"},
        {"POST", "/v1/pd/heartbeat",
         "{\"node\":1,\"regions\":[{\"id\":1,\"start\":\"%%%\",\"version\":1,\"conf_ver\":1}]}",
         400, "bad_request"},
        {"POST", "/v1/pd/heartbeat",
         "{\"node\":1,\"regions\":[{\"id\":1,\"start\":\"bg==\",\"end\":\"bQ==\",\"version\":1,"
         "\"conf_ver\":1}]}",
         400, "bad_request"},
        {"POST", "/v1/pd/heartbeat",
         "{\"node\":1,\"regions\":[{\"id\":0,\"start\":\"\",\"version\":1,\"conf_ver\":1}]}", 400,
         "bad_request"},
        {"POST", "/v1/pd/heartbeat",
         "{\"node\":1,\"regions\":[{\"id\":1,\"start\":\"\",\"version\":1,\"conf_ver\":1,"
         "\"replicas\":[1,2,3,4,5,6,7,8]}]}",
         400, "bad_request"},
        {"POST", "/v1/pd/heartbeat",
         "{\"node\":1,\"regions\":[{\"id\":1,\"start\":\"\",\"version\":-1,\"conf_ver\":1}]}",
         400, "bad_request"},
        {"POST", "/v1/pd/ids?count=0", NULL, 400, "bad_request"},
        {"POST", "/v1/pd/ids?count=abc", NULL, 400, "bad_request"},
        {"POST", "/v1/pd/ids?count=100001", NULL, 400, "bad_request"},
        {"GET", "/v1/pd/regions?limit=0", NULL, 400, "bad_request"},
        {"GET", "/v1/pd/regions?limit=10001", NULL, 400, "bad_request"},
        {"GET", "/v1/pd/regions?key=AA%3D%3D&from=AA%3D%3D", NULL, 400, "bad_request"},
        {"GET", "/v1/pd/regions?key=!", NULL, 400, "bad_request"},
        {"GET", "/v1/pd/regions?key=AA%3D%3D", NULL, 404, "no_region"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long st = ask(p, cases[i].method, cases[i].path, cases[i].body, code, sizeof code);
        if (st != cases[i].status || strcmp(code, cases[i].code) != 0)
            fail_msg("case %zu (%s %s): %ld %s, want %ld %s", i, cases[i].method, cases[i].path,
                     st, code, cases[i].status, cases[i].code);
    }
    /* A body past the limit (1 MiB) is refused before it is read whole. */
    size_t big = (1u << 20) + 100;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[big] = '\0';
    huge[0] = '{';
    huge[big - 1] = '}';
    assert_int_equal(ask(p, "POST", "/v1/pd/heartbeat", huge, code, sizeof code), 413);
    free(huge);
    /* A good heartbeat still goes through after all that. */
    assert_int_equal(ask(p, "POST", "/v1/pd/heartbeat",
                         "{\"node\":1,\"regions\":[{\"id\":7,\"start\":\"\",\"version\":1,"
                         "\"conf_ver\":1,\"replicas\":[1]}]}",
                         code, sizeof code),
                     200);
    json_t *j = NULL;
    assert_int_equal(tl_raft_call(p, "GET", "/v1/pd/regions?key=AA%3D%3D", NULL, TL_REQUEST_MS,
                                  &j),
                     200);
    json_t *reg = json_object_get(j, "region");
    assert_int_equal(json_integer_value(json_object_get(reg, "id")), 7);
    json_decref(j);
    /* Other replicas at the same epoch: one the map would not take, so it
     * is stale at once, with no round (the epoch must move first). */
    expect_none_taken(p, "{\"node\":1,\"regions\":[{\"id\":7,\"start\":\"\",\"version\":1,"
                         "\"conf_ver\":1,\"replicas\":[1,2]}]}");
    /* A new id inside region 7's range at no newer version: the leader's
     * dry run finds the map would take none of it, so no round is spent
     * (the counter moves) and nothing changes. */
    double unproposed = port_metric(p, "percolator_pd_reports_unproposed_total");
    assert_true(unproposed >= 0);
    expect_none_taken(p, "{\"node\":1,\"regions\":[{\"id\":8,\"start\":\"AA==\","
                         "\"version\":1,\"conf_ver\":1,\"replicas\":[1]}]}");
    assert_true(port_metric(p, "percolator_pd_reports_unproposed_total") == unproposed + 1);
    assert_int_equal(tl_raft_call(p, "GET", "/v1/pd/regions?key=AA%3D%3D", NULL, TL_REQUEST_MS,
                                  &j),
                     200);
    reg = json_object_get(j, "region");
    assert_string_equal(json_string_value(json_object_get(json_object_get(reg, "leader"),
                                                          "address")),
                        "http://n1");
    json_decref(j);
    /* The leader hint follows the highest term: a deposed leader's late
     * report (a lower term) does not undo its successor's. */
    assert_int_equal(tl_raft_call(p, "POST", "/v1/pd/nodes", "{\"address\":\"http://n2\"}",
                                  TL_REQUEST_MS, &j),
                     200);
    /* Its id is past region 7's: the counter passed the ids the map took. */
    int n2 = (int)json_integer_value(json_object_get(j, "id"));
    assert_true(n2 > 7);
    json_decref(j);
    const char *beat = "{\"node\":%d,\"regions\":[{\"id\":7,\"start\":\"\",\"version\":1,"
                       "\"conf_ver\":1,\"replicas\":[1],\"term\":%d}]}";
    const struct {
        int node, term;
        const char *leader;
    } beats[] = {{2, 5, "http://n2"}, {1, 4, "http://n2"}, {1, 6, "http://n1"}, {2, 6, "http://n2"}};
    for (size_t i = 0; i < sizeof beats / sizeof beats[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, beat, beats[i].node == 2 ? n2 : 1, beats[i].term);
        assert_int_equal(ask(p, "POST", "/v1/pd/heartbeat", body, code, sizeof code), 200);
        /* A '+' of base64 left unescaped in the query (read as a space) still works. */
        assert_int_equal(tl_raft_call(p, "GET", "/v1/pd/regions?key=+A%3D%3D", NULL,
                                      TL_REQUEST_MS, &j),
                         200);
        json_t *ld = json_object_get(json_object_get(j, "region"), "leader");
        assert_string_equal(json_string_value(json_object_get(ld, "address")), beats[i].leader);
        assert_int_equal(json_integer_value(json_object_get(ld, "term")),
                         beats[i].term == 4 ? 5 : beats[i].term);
        json_decref(j);
    }
    tl_group_stop(&g);
    /* A single oracle has no placement driver. */
    tl_oracle_env *e = tl_oracle_env_new("pd-alone");
    assert_non_null(e);
    assert_int_equal(tl_oracle_start(&e->o, e->data, 0), 0);
    snprintf(url, sizeof url, "%s/v1/pd/regions", e->o.url);
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(r.body, "not_in_a_group"));
    tl_resp_free(&r);
    tl_oracle_env_free(e);
}

/* A single service (no group of its own) over the oracle group registers
 * at the URL --advertise-url gives and reports its region from it; the
 * flag is refused when malformed, and in a group (a member is known by its
 * --raft-urls entry). */
static void a_single_node_reports_its_advertised_url(void **state)
{
    (void)state;
    tl_svc_group g;
    tl_group_start_n(&g, "pd-adv", TL_GROUP_NODES, 0, NULL, NULL, TL_GROUP_NODES);
    char listen[64], data[512], log[512], base[80];
    int port = tl_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(base, sizeof base, "http://%s", listen);
    snprintf(data, sizeof data, "%s/single", g.dir);
    snprintf(log, sizeof log, "%s/single.log", g.dir);
    const char *bad[][2] = {{"ftp://svc.example", NULL},
                            {"http://has space", NULL},
                            {"http://svc.example:8080", "--raft-id"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"--listen", listen, "--data-dir", data, "--oracle", g.oracle_urls,
                              "--advertise-url", bad[i][0], bad[i][1], bad[i][1] ? "1" : NULL,
                              NULL};
        tl_run_result out;
        assert_int_equal(tl_run("percolator-service", args, NULL, NULL, 0, 30000, &out), 0);
        if (out.status != 2 || strstr(out.err, "--advertise-url") == NULL)
            fail_msg("--advertise-url %s %s: exit %d, %s", bad[i][0], bad[i][1] ? bad[i][1] : "",
                     out.status, out.err);
        tl_run_free(&out);
    }
    const char *args[] = {"--listen", listen, "--data-dir", data, "--oracle", g.oracle_urls,
                          "--advertise-url", "http://svc.example:8080", "--pd-heartbeat-ms", "200",
                          NULL};
    pid_t pid = tl_spawn("percolator-service", args, NULL, log);
    assert_true(pid > 0);
    assert_int_equal(tl_wait_health(base, pid, 30000), 0);
    bool seen = false;
    for (int t = 0; t < 300 && !seen; t++) {
        json_t *j = NULL;
        if (call(&g, "GET", "/v1/pd/regions?key=AA%3D%3D", NULL, &j) == 200) {
            json_t *ld = json_object_get(json_object_get(j, "region"), "leader");
            const char *a = json_string_value(json_object_get(ld, "address"));
            seen = a != NULL && strcmp(a, "http://svc.example:8080") == 0;
        }
        json_decref(j);
        if (!seen)
            time_sleep_ms(100);
    }
    assert_true(seen);
    assert_int_equal(tl_stop(pid, 30000), 0);
    tl_group_stop(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_map_follows_reports_through_kills_and_images),
        cmocka_unit_test(the_api_refuses_bad_input_and_points_at_the_leader),
        cmocka_unit_test(service_nodes_report_their_regions),
        cmocka_unit_test(a_single_node_reports_its_advertised_url),
    };
    if (getenv("PERCOLATOR_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("PERCOLATOR_TEST_ONLY"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
