/*
 * test_service_raft_api.c — what a replicated service (three members on
 * Raft, docs/DESIGN.md §9) answers besides its data, as the OpenAPI spec
 * (api-spec/percolator.yaml) documents it. Every exchange is recorded
 * (tl_http), so `make api-check` holds these answers against the spec:
 *
 *  - a member alone (the two others never start) knows no leader: health
 *    says so (role, leader null, term, applied_index), /v1/ready is 503
 *    not_ready, every other /v1 request is 503 not_leader with
 *    Retry-After and no Location, /metrics carries percolator_raft_*;
 *  - in a whole group, a follower passes every /v1 request on to the
 *    leader and relays its answer (writes, reads, a session begun there,
 *    membership), never a request passed on already; the leader answers
 *    an unknown session 410 txn_expired; a follower's health has what the
 *    README shows; `percolator status` gives each member's id, role, the
 *    same applied index once the group is quiet, LAG 0 for the leader,
 *    and a store size that grows with what is written; once both
 *    followers are killed, a write on the
 *    leader is 503 raft_unavailable (or not_leader, had it stepped down
 *    already) with Retry-After;
 *  - the election timeout and heartbeat flags: a bad pair refused, and a
 *    group given a long timeout elects nobody before it has run out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft_member.h"
#include "readme.h"
#include "svc_group.h"
#include "testlib.h"
#include "timeutil.h"

#define NODES TL_GROUP_NODES

typedef tl_svc_group group;

/* The oracle and the group's addresses; members started: the first n. */
static void group_start(group *g, int n)
{
    tl_group_start(g, "service-raft-api", n, NULL, NULL);
}

static void group_stop(group *g)
{
    tl_group_stop(g);
}

/* method path on member i, not following redirects. The status; the
 * JSON body in *out (NULL if none), headers via r (the caller frees). */
static long call(group *g, int i, const char *method, const char *path, const char *body,
                 int timeout_ms, tl_resp *r, json_t **out)
{
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g->http[i], path);
    int rc = tl_http(method, url, body, body ? strlen(body) : 0,
                     body ? "application/json" : NULL, timeout_ms, r);
    *out = rc == 0 && r->body != NULL ? json_loads(r->body, 0, NULL) : NULL;
    return rc == 0 ? r->status : 0;
}

static const char *error_code(const json_t *j)
{
    return json_string_value(json_object_get(json_object_get(j, "error"), "code"));
}

/* The leader among the live members, once it takes writes (ready), or -1. */
static int find_leader(group *g, int ms)
{
    return tl_group_leader(g, -1, ms);
}

/* 503 with the code, Retry-After and no Location. */
static void expect_503(group *g, int i, const char *method, const char *path,
                       const char *body, const char *code)
{
    tl_resp r;
    json_t *j;
    char v[256];
    long st = call(g, i, method, path, body, 10000, &r, &j);
    if (st != 503 || error_code(j) == NULL || strcmp(error_code(j), code) != 0)
        fail_msg("%s %s: %ld %s, expected 503 %s", method, path, st, r.body ? r.body : "",
                 code);
    assert_non_null(tl_resp_header(&r, "Retry-After", v, sizeof v));
    assert_null(tl_resp_header(&r, "Location", v, sizeof v));
    json_decref(j);
    tl_resp_free(&r);
}

/* ---- a member that knows no leader ---- */

static void a_member_without_a_leader_answers_503_not_leader(void **state)
{
    (void)state;
    group g;
    group_start(&g, 1);
    tl_resp r;
    json_t *j;

    assert_int_equal(call(&g, 0, "GET", "/v1/health", NULL, 2000, &r, &j), 200);
    const char *role = json_string_value(json_object_get(j, "role"));
    assert_non_null(role);
    assert_string_not_equal(role, "leader");
    assert_true(json_is_null(json_object_get(j, "leader")));
    assert_true(json_is_integer(json_object_get(j, "term")));
    assert_true(json_is_integer(json_object_get(j, "applied_index")));
    json_decref(j);
    tl_resp_free(&r);

    expect_503(&g, 0, "GET", "/v1/ready", NULL, "not_ready");
    expect_503(&g, 0, "GET", "/v1/kv/a?encoding=text", NULL, "not_leader");
    expect_503(&g, 0, "PUT", "/v1/kv/a", "{\"value\":\"x\"}", "not_leader");
    expect_503(&g, 0, "GET", "/v1/kv?prefix=a", NULL, "not_leader");
    expect_503(&g, 0, "POST", "/v1/txns", NULL, "not_leader");
    expect_503(&g, 0, "POST", "/v1/txns/no-such-txn/commit", NULL, "not_leader");
    expect_503(&g, 0, "GET", "/v1/locks", NULL, "not_leader");
    expect_503(&g, 0, "GET", "/v1/observers", NULL, "not_leader");
    expect_503(&g, 0, "POST", "/v1/admin/backup", NULL, "not_leader");

    /* Not under /v1: served by any member. */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", g.http[0]);
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(tl_metric(r.body, "percolator_raft_term") >= 0);
    assert_true(tl_metric(r.body, "percolator_raft_applied_index") >= 0);
    tl_resp_free(&r);
    group_stop(&g);
}

/* ---- a whole group: redirects, sessions, a lost quorum ---- */

/* One row of `percolator status`'s table (cli/status.c): the columns
 * ENDPOINT ID STATUS ROLE MEMBERSHIP TERM APPLIED LAG STORE SIZE LEADER,
 * the size two words ("216 MiB"). */
typedef struct {
    char endpoint[128], id[16], status[16], role[16], membership[16], term[24], applied[24],
        lag[24], size[40], leader[128];
} status_row;

/* `percolator --endpoints eps status` (it must exit 0): its rows. */
static int cli_status_rows(const char *eps, status_row *rows, int max)
{
    const char *args[] = {"--endpoints", eps, "status", NULL};
    tl_run_result cr;
    assert_int_equal(tl_run("percolator", args, NULL, NULL, 0, TL_REQUEST_MS, &cr), 0);
    if (cr.status != 0)
        fail_msg("percolator status: exit %d\n%s%s", cr.status, cr.out, cr.err);
    int n = -1;
    char *save = NULL;
    for (char *line = strtok_r(cr.out, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (n < 0) { /* the header */
            assert_true(strncmp(line, "ENDPOINT", 8) == 0);
            assert_non_null(strstr(line, " STORE SIZE "));
            n = 0;
            continue;
        }
        assert_true(n < max);
        status_row *r = &rows[n++];
        char num[16], unit[8];
        if (sscanf(line, "%127s %15s %15s %15s %15s %23s %23s %23s %15s %7s %127s", r->endpoint,
                   r->id, r->status, r->role, r->membership, r->term, r->applied, r->lag, num,
                   unit, r->leader) != 11)
            fail_msg("percolator status: a row that is not eleven words: %s", line);
        snprintf(r->size, sizeof r->size, "%s %s", num, unit);
    }
    tl_run_free(&cr);
    return n;
}

/* Member i's store_bytes, from its health (the group runs without a token). */
static json_int_t store_bytes(group *g, int i)
{
    tl_resp r;
    json_t *j;
    assert_int_equal(call(g, i, "GET", "/v1/health", NULL, TL_REQUEST_MS, &r, &j), 200);
    json_t *b = json_object_get(j, "store_bytes");
    assert_true(json_is_integer(b));
    json_int_t v = json_integer_value(b);
    json_decref(j);
    tl_resp_free(&r);
    return v;
}

/* Wait up to ms until every row of `percolator status` shows the same
 * APPLIED and LAG 0 (a follower applies an entry at the leader's next
 * heartbeat); rows holds the last table. */
static bool status_settles(const char *eps, status_row *rows, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    for (;;) {
        assert_int_equal(cli_status_rows(eps, rows, NODES), NODES);
        bool same = true;
        for (int i = 0; i < NODES; i++)
            same &= strcmp(rows[i].applied, rows[0].applied) == 0 &&
                    strcmp(rows[i].lag, "0") == 0;
        if (same || time_mono_ms() > end)
            return same;
        time_sleep_ms(200);
    }
}

/* `percolator status` on the whole group (l leads, at leader_url): a row
 * per member with its id, one leader with LAG 0, the followers naming it,
 * every member at the same applied index once quiet, a store size; the
 * sizes grow with 12 MiB written (a new Raft segment, WiredTiger's pages),
 * in health's store_bytes as in the table; --json adds each row's lag. */
static void status_shows_the_group(group *g, int l, const char *all, const char *leader_url)
{
    status_row rows[NODES];
    assert_true(status_settles(all, rows, 20000));
    for (int i = 0; i < NODES; i++) {
        char id[16], ep[64];
        snprintf(id, sizeof id, "%d", i + 1);
        snprintf(ep, sizeof ep, "http://127.0.0.1:%d", g->http[i]);
        assert_string_equal(rows[i].endpoint, ep);
        assert_string_equal(rows[i].id, id);
        assert_string_equal(rows[i].status, "ok");
        assert_string_equal(rows[i].membership, "voter");
        assert_string_equal(rows[i].role, i == l ? "leader" : "follower");
        assert_string_equal(rows[i].term, rows[l].term);
        assert_true(atoll(rows[i].applied) > 0);
        assert_non_null(strstr(rows[i].size, "iB")); /* KiB, MiB...: more than 1 KiB */
        if (i != l)
            assert_string_equal(rows[i].leader, leader_url);
    }

    json_int_t before[NODES];
    for (int i = 0; i < NODES; i++)
        assert_true((before[i] = store_bytes(g, i)) > 0);
    /* Through the CLI at the leader: its puts are not relayed by a
     * follower (counted below), nor recorded as exchanges (12 MiB). */
    size_t len = 512 * 1024;
    char *value = malloc(len);
    assert_non_null(value);
    memset(value, 'v', len);
    for (int k = 0; k < 24; k++) {
        char key[32];
        snprintf(key, sizeof key, "big-%d", k);
        const char *args[] = {"--endpoints", leader_url, "put", key, "-", NULL};
        tl_run_result cr;
        assert_int_equal(tl_run("percolator", args, NULL, value, len, TL_REQUEST_MS, &cr), 0);
        if (cr.status != 0)
            fail_msg("put %s: exit %d %s", key, cr.status, cr.err);
        tl_run_free(&cr);
    }
    free(value);
    /* The size is walked once a second: within a few of them, larger. */
    uint64_t end = time_mono_ms() + 20000;
    for (int i = 0; i < NODES; i++) {
        json_int_t now;
        while ((now = store_bytes(g, i)) <= before[i] && time_mono_ms() < end)
            time_sleep_ms(200);
        printf("# member %d: store_bytes %lld before 12 MiB of writes, %lld after\n", i + 1,
               (long long)before[i], (long long)now);
        assert_true(now > before[i]);
    }
    assert_true(status_settles(all, rows, 20000));

    const char *json_args[] = {"--endpoints", all, "--json", "status", NULL};
    tl_run_result cr;
    assert_int_equal(tl_run("percolator", json_args, NULL, NULL, 0, TL_REQUEST_MS, &cr), 0);
    assert_int_equal(cr.status, 0);
    json_t *list = json_loads(cr.out, 0, NULL);
    assert_int_equal(json_array_size(list), NODES);
    for (int i = 0; i < NODES; i++) {
        json_t *m = json_array_get(list, (size_t)i);
        assert_int_equal(json_integer_value(json_object_get(m, "id")), i + 1);
        assert_true(json_integer_value(json_object_get(m, "store_bytes")) > before[i]);
        assert_true(json_is_integer(json_object_get(m, "lag")));
        assert_non_null(json_string_value(json_object_get(m, "endpoint")));
    }
    json_decref(list);
    tl_run_free(&cr);
}

static void a_group_forwards_and_refuses_as_documented(void **state)
{
    (void)state;
    group g;
    group_start(&g, NODES);
    int l = find_leader(&g, 20000);
    assert_true(l >= 0);
    int f = (l + 1) % NODES;
    tl_resp r;
    json_t *j;
    char loc[512], url[512];
    assert_true(tl_group_knows_leader(&g, f, l, 10000)); /* else it answers 503 not_leader */

    /* A follower passes every /v1 request on to the leader and relays the
     * answer: a write through it, read back at the leader; a miss, with
     * its path escapes and query intact. */
    assert_int_equal(call(&g, f, "PUT", "/v1/kv/a%2Fb", "{\"value\":\"via-f\"}", TL_REQUEST_MS, &r, &j),
                     200);
    assert_true(json_integer_value(json_object_get(j, "commit_ts")) > 0);
    json_decref(j);
    tl_resp_free(&r);
    assert_int_equal(call(&g, l, "GET", "/v1/kv/a%2Fb?encoding=text", NULL, TL_REQUEST_MS, &r, &j), 200);
    assert_string_equal(json_string_value(json_object_get(j, "value")), "via-f");
    json_decref(j);
    tl_resp_free(&r);
    assert_int_equal(call(&g, f, "GET", "/v1/kv/a%2Fb?encoding=text", NULL, TL_REQUEST_MS, &r, &j), 200);
    assert_string_equal(json_string_value(json_object_get(j, "value")), "via-f");
    assert_null(tl_resp_header(&r, "Location", loc, sizeof loc));
    /* The relayed answer names the leader it came from. */
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g.http[l]);
    assert_non_null(tl_resp_header(&r, "X-Percolator-Leader", loc, sizeof loc));
    assert_string_equal(loc, url);
    json_decref(j);
    tl_resp_free(&r);
    /* The CLI given the follower first learns the leader from it. */
    char eps[600];
    snprintf(eps, sizeof eps, "http://127.0.0.1:%d,%s", g.http[f], url);
    const char *get_args[] = {"--endpoints", eps, "--verbose", "get", "a/b", NULL};
    tl_run_result cr;
    assert_int_equal(tl_run("percolator", get_args, NULL, NULL, 0, TL_REQUEST_MS, &cr), 0);
    assert_int_equal(cr.status, 0);
    assert_string_equal(cr.out, "via-f\n");
    if (strstr(cr.err, "asked directly from now on") == NULL)
        fail_msg("the CLI did not take the leader from the answer: %s", cr.err);
    tl_run_free(&cr);
    /* `percolator status`: the table, and its store sizes growing with
     * writes; an endpoint that does not answer makes it exit 4. */
    char all[700], one_dead[760];
    snprintf(all, sizeof all, "http://127.0.0.1:%d,http://127.0.0.1:%d,http://127.0.0.1:%d",
             g.http[0], g.http[1], g.http[2]);
    status_shows_the_group(&g, l, all, url);
    snprintf(one_dead, sizeof one_dead, "%s,http://127.0.0.1:%d", all, tl_free_port());
    const char *st_args[] = {"--endpoints", one_dead, "status", NULL};
    assert_int_equal(tl_run("percolator", st_args, NULL, NULL, 0, TL_REQUEST_MS, &cr), 0);
    assert_int_equal(cr.status, 4);
    assert_non_null(strstr(cr.out, "unreachable"));
    tl_run_free(&cr);
    assert_int_equal(call(&g, f, "GET", "/v1/kv/nope?encoding=text", NULL, TL_REQUEST_MS, &r, &j), 404);
    assert_string_equal(error_code(j), "not_found");
    json_decref(j);
    tl_resp_free(&r);

    /* A session begun through the follower keeps working through it. */
    assert_int_equal(call(&g, f, "POST", "/v1/txns", NULL, TL_REQUEST_MS, &r, &j), 201);
    const char *id = json_string_value(json_object_get(j, "id"));
    assert_non_null(id);
    char path[256];
    snprintf(path, sizeof path, "/v1/txns/%s/keys/s1", id);
    json_t *txn = j;
    tl_resp_free(&r);
    assert_int_equal(call(&g, f, "PUT", path, "{\"value\":\"in-session\"}", TL_REQUEST_MS, &r, &j), 204);
    json_decref(j);
    tl_resp_free(&r);
    snprintf(path, sizeof path, "/v1/txns/%s/commit", id);
    assert_int_equal(call(&g, f, "POST", path, NULL, TL_REQUEST_MS, &r, &j), 200);
    json_decref(j);
    tl_resp_free(&r);
    json_decref(txn);
    assert_int_equal(call(&g, l, "GET", "/v1/kv/s1?encoding=text", NULL, TL_REQUEST_MS, &r, &j), 200);
    assert_string_equal(json_string_value(json_object_get(j, "value")), "in-session");
    json_decref(j);
    tl_resp_free(&r);

    /* A request already passed on once is never passed on again. */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/kv/a", g.http[f]);
    assert_int_equal(tl_http_with("GET", url, NULL, 0, NULL, "X-Percolator-Forwarded-By: member 9",
                                  TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "not_leader"));
    assert_non_null(tl_resp_header(&r, "Retry-After", loc, sizeof loc));
    tl_resp_free(&r);

    /* Health and readiness are the follower's own. */
    assert_int_equal(call(&g, f, "GET", "/v1/ready", NULL, TL_REQUEST_MS, &r, &j), 200);
    json_decref(j);
    tl_resp_free(&r);
    assert_int_equal(call(&g, f, "GET", "/v1/health", NULL, TL_REQUEST_MS, &r, &j), 200);
    assert_string_equal(json_string_value(json_object_get(j, "role")), "follower");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "leader"), "id")),
                     l + 1);
    /* The README shows a member's health as it is. */
    json_t *doc = tl_readme_example("127.0.0.1:8081/v1/health");
    char why[300];
    assert_non_null(doc);
    if (!tl_json_same_shape(doc, j, why, sizeof why))
        fail_msg("README's example of a member's /v1/health: %s (the answer: %s)", why, r.body);
    json_decref(doc);
    json_decref(j);
    tl_resp_free(&r);

    /* Membership through the follower too: the leader's list, every
     * member a voter; a change it cannot make is the leader's 409
     * (common/raft_admin.h), relayed. */
    assert_int_equal(call(&g, f, "GET", "/v1/members", NULL, TL_REQUEST_MS, &r, &j), 200);
    assert_int_equal(json_array_size(json_object_get(j, "members")), NODES);
    assert_int_equal(json_integer_value(json_object_get(j, "leader")), l + 1);
    json_decref(j);
    tl_resp_free(&r);
    assert_int_equal(call(&g, f, "POST", "/v1/members", "{\"id\":1}", TL_REQUEST_MS, &r, &j), 409);
    assert_string_equal(error_code(j), "membership_refused");
    json_decref(j);
    tl_resp_free(&r);

    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", g.http[f]);
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    /* The follower counts what it relayed: the nine requests above. */
    assert_int_equal(tl_metric(r.body, "percolator_forwarded_requests_total{outcome=\"relayed\"}"), 9);
    tl_resp_free(&r);
    /* ... and the leader got them marked as passed on (the mark that keeps
     * a member that lost the lead from passing one on again). */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", g.http[l]);
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_true(tl_metric(r.body, "percolator_forwarded_requests_received_total") >= 9);
    tl_resp_free(&r);

    /* The leader: a session it did not begin is gone (410, not 404). */
    assert_int_equal(call(&g, l, "POST", "/v1/txns/no-such-txn/commit", NULL, TL_REQUEST_MS, &r, &j),
                     410);
    assert_string_equal(error_code(j), "txn_expired");
    json_decref(j);
    tl_resp_free(&r);
    assert_int_equal(call(&g, l, "PUT", "/v1/kv/k", "{\"value\":\"1\"}", TL_REQUEST_MS, &r, &j), 200);
    json_decref(j);
    tl_resp_free(&r);

    /* Both followers gone: the leader cannot commit a write. */
    for (int i = 0; i < NODES; i++) {
        if (i != l) {
            assert_int_equal(tl_kill9(g.pid[i]), 0);
            g.pid[i] = 0;
        }
    }
    long st = call(&g, l, "PUT", "/v1/kv/k", "{\"value\":\"2\"}", 15000, &r, &j);
    const char *code = error_code(j);
    printf("# the leader without a quorum answered %ld %s\n", st, code ? code : "-");
    assert_int_equal(st, 503);
    assert_non_null(code);
    assert_true(strcmp(code, "raft_unavailable") == 0 || strcmp(code, "not_leader") == 0);
    assert_non_null(tl_resp_header(&r, "Retry-After", loc, sizeof loc));
    json_decref(j);
    tl_resp_free(&r);
    group_stop(&g);
}

/* --raft-election-timeout-ms and --raft-heartbeat-ms: a timeout shorter
 * than five heartbeats is refused (exit 2, naming both); a group given 5 s
 * runs on it: after its leader's kill -9 nobody leads (nor stands) for 3.5 s,
 * where the default 1 s elects within about 2 s; then one does, and takes
 * writes. */
static void the_election_timeout_is_the_flags(void **state)
{
    (void)state;
    tl_raft_refuses_short_timeout("percolator-service");
    group g;
    const char *slow[] = {"--raft-election-timeout-ms", "5000", "--raft-heartbeat-ms", "500",
                          NULL};
    tl_group_start(&g, "service-raft-timeout", NODES, NULL, slow);
    int l = find_leader(&g, 40000);
    assert_true(l >= 0);
    uint64_t t0 = tl_raft_kill_leader_expect_quiet(g.pid, g.http, NODES, l, 3500, NULL);
    int l2 = tl_group_leader(&g, l, 30000);
    assert_true(l2 >= 0);
    printf("# election timeout 5000 ms: a new leader %llu ms after the kill\n",
           (unsigned long long)(time_mono_ms() - t0));
    tl_resp r;
    json_t *j;
    assert_int_equal(call(&g, l2, "PUT", "/v1/kv/k", "{\"value\":\"after\"}", 10000, &r, &j),
                     200);
    json_decref(j);
    tl_resp_free(&r);
    group_stop(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(a_member_without_a_leader_answers_503_not_leader),
        TL_TEST(a_group_forwards_and_refuses_as_documented),
        TL_TEST(the_election_timeout_is_the_flags),
    };
    /* PERCOLATOR_TEST_ONLY=<name>: run one test (cmocka's filter). */
    if (getenv("PERCOLATOR_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("PERCOLATOR_TEST_ONLY"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
