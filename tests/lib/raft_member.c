/*
 * raft_member.c — see raft_member.h.
 */
#include "raft_member.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "timeutil.h"

bool tl_raft_health(int port, int timeout_ms, tl_raft_view *v)
{
    char url[96];
    tl_resp r = {0};
    bool ok = false;
    *v = (tl_raft_view){.applied = -1, .hwm = -1, .lag = -1};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/health", port);
    if (tl_http("GET", url, NULL, 0, NULL, timeout_ms, &r) == 0 && r.status == 200) {
        json_t *j = json_loads(r.body, 0, NULL);
        const char *role = json_string_value(json_object_get(j, "role"));
        json_t *applied = json_object_get(j, "applied_index"), *hwm = json_object_get(j, "hwm");
        json_t *lag = json_object_get(j, "lag");
        v->leader = role != NULL && strcmp(role, "leader") == 0;
        v->leader_id = (int)json_integer_value(json_object_get(json_object_get(j, "leader"), "id"));
        v->term = json_integer_value(json_object_get(j, "term"));
        if (json_is_integer(applied))
            v->applied = json_integer_value(applied);
        if (json_is_integer(hwm))
            v->hwm = json_integer_value(hwm);
        if (json_is_integer(lag))
            v->lag = json_integer_value(lag);
        const char *m = json_string_value(json_object_get(j, "membership"));
        snprintf(v->membership, sizeof v->membership, "%s", m != NULL ? m : "");
        json_decref(j);
        ok = role != NULL;
    }
    tl_resp_free(&r);
    return ok;
}

void tl_raft_require_voters(const char *dir, const char *log_prefix, const int ports[],
                           const pid_t pids[], int count)
{
    uint64_t end = time_mono_ms() + TL_START_MS;
    for (int i = 0; i < count; i++) {
        uint64_t now = time_mono_ms();
        if (pids[i] <= 0 ||
            tl_raft_membership_is(ports[i], "voter", now < end ? (int)(end - now) : 0))
            continue;
        for (int k = 0; k < count; k++) {
            char log[640];
            snprintf(log, sizeof log, "%s/%s%d.log", dir, log_prefix, k + 1);
            tl_dump_tail(log, 6000);
        }
        fail_msg("member %d is not a voter %d ms after the group started", i + 1, TL_START_MS);
    }
}

long tl_raft_ready(int port, char *why, size_t len)
{
    char url[96];
    tl_resp r = {0};
    long status = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/ready", port);
    if (why != NULL && len > 0)
        why[0] = '\0';
    if (tl_http("GET", url, NULL, 0, NULL, 10000, &r) == 0) {
        status = r.status;
        json_t *j = r.body != NULL ? json_loads(r.body, 0, NULL) : NULL;
        const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        if (why != NULL && len > 0 && m != NULL)
            snprintf(why, len, "%s", m);
        json_decref(j);
    }
    tl_resp_free(&r);
    return status;
}

long tl_raft_call(int port, const char *method, const char *path, const char *body,
                  int timeout_ms, json_t **out)
{
    char url[512];
    tl_resp r;
    long st = 0;
    if (out != NULL)
        *out = NULL;
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
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

bool tl_raft_membership_is(int port, const char *want, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    tl_raft_view v = {0};
    do {
        if (tl_raft_health(port, 1000, &v) && strcmp(v.membership, want) == 0)
            return true;
        time_sleep_ms(100);
    } while (time_mono_ms() < end);
    printf("# member on port %d: membership \"%s\", not \"%s\", after %d ms\n", port,
           v.membership, want, ms);
    return false;
}

bool tl_raft_follows(int port, int leader_id, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    tl_raft_view v = {0};
    do {
        if (tl_raft_health(port, 1000, &v) && v.leader_id == leader_id)
            return true;
        time_sleep_ms(100);
    } while (time_mono_ms() < end);
    printf("# member on port %d: follows member %d, not %d, after %d ms\n", port, v.leader_id,
           leader_id, ms);
    return false;
}

bool tl_raft_quiet_for(const int ports[], int n, int64_t term, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    do {
        for (int i = 0; i < n; i++) {
            tl_raft_view v;
            if (tl_raft_health(ports[i], 1000, &v) && time_mono_ms() <= end &&
                (v.leader || v.term > term)) {
                printf("# member on port %d: %s in term %lld\n", ports[i],
                       v.leader ? "leads" : "a candidate", (long long)v.term);
                return false;
            }
        }
        time_sleep_ms(100);
    } while (time_mono_ms() < end);
    return true;
}

void tl_raft_refuses_short_timeout(const char *prog)
{
    const char *bad[] = {"--raft-election-timeout-ms", "300", "--raft-heartbeat-ms", "100", NULL};
    tl_run_result run;
    assert_int_equal(tl_run(prog, bad, NULL, NULL, 0, 10000, &run), 0);
    assert_int_equal(run.status, 2);
    assert_non_null(strstr(run.err, "--raft-election-timeout-ms (300) must be at least 5 times "
                                    "--raft-heartbeat-ms (100)"));
    tl_run_free(&run);
}

uint64_t tl_raft_kill_leader_expect_quiet(pid_t pids[], const int http[], int n, int leader,
                                          int quiet_ms, int64_t *hwm_out)
{
    tl_raft_view v;
    assert_true(tl_raft_health(http[leader], 1000, &v));
    assert_true(v.leader);
    if (hwm_out != NULL)
        *hwm_out = v.hwm;
    int others[8], m = 0;
    for (int i = 0; i < n && m < 8; i++)
        if (i != leader && pids[i] > 0)
            others[m++] = http[i];
    uint64_t t0 = time_mono_ms();
    assert_int_equal(tl_kill9(pids[leader]), 0);
    pids[leader] = 0;
    assert_true(tl_raft_quiet_for(others, m, v.term, quiet_ms));
    return t0;
}

/* The rules this process added and has not deleted yet. */
#define MAX_CUTS 8
static struct {
    char addr[64];
    int port;
} cuts[MAX_CUTS];
static int ncuts;

static int rule(const char *op, const char *addr, int port)
{
    char cmd[320];
    snprintf(cmd, sizeof cmd,
             "iptables -w 10 %s INPUT -p tcp -d %s --dport %d -m comment --comment "
             "percolator-test-%d -j DROP",
             op, addr, port, (int)getpid());
    return system(cmd);
}

static void heal_all(void)
{
    for (int i = 0; i < ncuts; i++)
        rule("-D", cuts[i].addr, cuts[i].port);
    ncuts = 0;
}

int tl_raft_cut(const char *addr, int port, bool on)
{
    static bool registered;
    if (!registered) {
        atexit(heal_all); /* whatever happens to the test, the rules go */
        registered = true;
    }
    if (on) {
        if (ncuts == MAX_CUTS)
            return -1;
        int rc = rule("-I", addr, port);
        if (rc == 0) {
            snprintf(cuts[ncuts].addr, sizeof cuts[ncuts].addr, "%s", addr);
            cuts[ncuts++].port = port;
        }
        return rc;
    }
    for (int i = 0; i < ncuts; i++) {
        if (cuts[i].port == port && strcmp(cuts[i].addr, addr) == 0) {
            cuts[i] = cuts[--ncuts];
            return rule("-D", addr, port);
        }
    }
    return -1;
}

bool tl_raft_can_cut(void)
{
    return system("iptables -w 10 -L INPUT -n >/dev/null 2>&1") == 0;
}
