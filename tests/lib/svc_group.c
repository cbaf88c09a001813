/*
 * svc_group.c — see svc_group.h.
 */
#include "svc_group.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft_member.h"
#include "timeutil.h"

/* Start member i; 0, or -1 with *busy when its ports were taken
 * meanwhile (a free port is only free when it is picked). */
static int member_try_start(tl_svc_group *g, int i, bool *busy)
{
    char listen[32], data[600], log[620], id[16], url[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", g->http[i]);
    snprintf(data, sizeof data, "%s/n%d", g->dir, i + 1);
    snprintf(log, sizeof log, "%s/n%d.log", g->dir, i + 1);
    snprintf(id, sizeof id, "%d", i + 1);
    bool own = g->own_peers[i][0] != '\0';
    const char *args[40] = {"--listen", listen, "--data-dir", data, "--oracle", g->oracle_urls,
                            "--raft-id", id, "--raft-peers", own ? g->own_peers[i] : g->peers,
                            "--raft-urls", own ? g->own_urls[i] : g->urls, NULL};
    int n = 12;
    bool entries_given = false;
    for (int k = 0; k < 19 && g->extra[k] != NULL; k++) {
        entries_given |= strncmp(g->extra[k], "--raft-snapshot-entries", 23) == 0; /* also =N */
        args[n++] = g->extra[k];
    }
#ifdef __SANITIZE_ADDRESS__
    /* libraft 0.15 loads its log at start with one realloc per batch read
     * (uv_segment.c extendEntries). glibc grows a large block in place;
     * AddressSanitizer's allocator moves it every time, so a start costs
     * the square of the entries kept: 17 s for the default's ~18,000 on an
     * idle machine, past TL_START_MS on a loaded one. Under ASan the
     * members keep a quarter of that (images taken four times as often). */
    if (!entries_given) {
        args[n++] = "--raft-snapshot-entries";
        args[n++] = "2048";
    }
#else
    (void)entries_given;
#endif
    if (own && g->initial[0] != '\0') { /* it joins: the group's first members bootstrapped it */
        args[n++] = "--raft-initial-members";
        args[n++] = g->initial;
    }
    const char *env[] = {g->env, NULL};
    *busy = false;
    g->pid[i] = tl_spawn("percolator-service", args, env, log);
    assert_true(g->pid[i] > 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g->http[i]);
    if (tl_wait_health(url, g->pid[i], TL_START_MS) == 0)
        return 0;
    tl_stop(g->pid[i], 5000); /* it may have exited already */
    g->pid[i] = 0;
    char *text = tl_read_file(log, NULL);
    *busy = text != NULL && strstr(text, "in use") != NULL;
    if (!*busy)
        tl_dump_file(log);
    free(text);
    return -1;
}

void tl_group_member_start(tl_svc_group *g, int i)
{
    bool busy;
    if (member_try_start(g, i, &busy) != 0)
        fail_msg("member %d did not start%s", i + 1, busy ? " (its port was taken)" : "");
}

/* A new machine's raft address: 127.0.2.(i+1), a loopback address of its
 * own (the --raft-peers members are all on 127.0.0.1). */
static void new_address(const tl_svc_group *g, int i, char *out, size_t len)
{
    snprintf(out, len, "127.0.2.%d:%d", i + 1, g->raft[i]);
}

void tl_group_raft_address(const tl_svc_group *g, int i, char *out, size_t len)
{
    if (g->own_peers[i][0] != '\0')
        new_address(g, i, out, len);
    else
        snprintf(out, len, "127.0.0.1:%d", g->raft[i]);
}

/* g->initial: the --raft-peers members (those before the first new
 * machine), unless the group's flags say which bootstrapped it. */
static void initial_members(tl_svc_group *g)
{
    g->initial[0] = '\0';
    for (int k = 0; g->extra[k] != NULL; k++)
        if (strcmp(g->extra[k], "--raft-initial-members") == 0)
            return;
    for (int k = 0; k < g->n && g->own_peers[k][0] == '\0'; k++)
        snprintf(g->initial + strlen(g->initial), sizeof g->initial - strlen(g->initial),
                 "%s%d", k ? "," : "", k + 1);
}

/* New machine i's own flags: the group's, the new machines before it,
 * itself. */
static void own_flags(tl_svc_group *g, int i)
{
    char p[sizeof g->own_peers[i]], u[sizeof g->own_urls[i]];
    snprintf(p, sizeof p, "%s", g->peers);
    snprintf(u, sizeof u, "%s", g->urls);
    for (int k = 0; k <= i; k++) {
        if (k < i && g->own_peers[k][0] == '\0')
            continue; /* a --raft-peers member: in g->peers already */
        char addr[48];
        new_address(g, k, addr, sizeof addr);
        snprintf(p + strlen(p), sizeof p - strlen(p), ",%d=%s", k + 1, addr);
        snprintf(u + strlen(u), sizeof u - strlen(u), ",%d=http://127.0.0.1:%d", k + 1,
                 g->http[k]);
    }
    memcpy(g->own_peers[i], p, sizeof p);
    memcpy(g->own_urls[i], u, sizeof u);
}

void tl_group_new_machine(tl_svc_group *g, int i)
{
    assert_true(i == g->n && i < TL_GROUP_MAX);
    initial_members(g);
    g->n = i + 1;
    /* As at the group's start, a port picked free may be taken before the
     * member binds it: fresh ports and an empty dir, up to 3 times. */
    for (int attempt = 0;; attempt++) {
        bool busy;
        char data[600];
        g->http[i] = tl_free_port();
        g->raft[i] = tl_free_port();
        own_flags(g, i);
        if (member_try_start(g, i, &busy) == 0)
            return;
        if (!busy || attempt == 2)
            fail_msg("new machine %d did not start%s", i + 1,
                     busy ? " (its port was taken)" : "");
        snprintf(data, sizeof data, "%s/n%d", g->dir, i + 1);
        tl_rmtree(data);
    }
}

/* Every member's ports, picked afresh. */
static void pick_ports(tl_svc_group *g)
{
    g->peers[0] = g->urls[0] = '\0';
    for (int i = 0; i < g->n; i++) {
        g->http[i] = tl_free_port();
        g->raft[i] = tl_free_port();
        snprintf(g->peers + strlen(g->peers), sizeof(g->peers) - strlen(g->peers),
                 "%s%d=127.0.0.1:%d", i ? "," : "", i + 1, g->raft[i]);
        snprintf(g->urls + strlen(g->urls), sizeof(g->urls) - strlen(g->urls),
                 "%s%d=http://127.0.0.1:%d", i ? "," : "", i + 1, g->http[i]);
    }
}

void tl_group_oracle_start(tl_svc_group *g, int i)
{
    char listen[32], data[600], log[620], id[16], url[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", g->ohttp[i]);
    snprintf(data, sizeof data, "%s/oracle%d", g->dir, i + 1);
    snprintf(log, sizeof log, "%s/oracle%d.log", g->dir, i + 1);
    snprintf(id, sizeof id, "%d", i + 1);
    const char *args[] = {"--listen", listen, "--data-dir", data, "--raft-id", id,
                          "--raft-peers", g->opeers, "--raft-urls", g->ourls, NULL};
    g->opid[i] = tl_spawn("percolator-oracle", args, NULL, log);
    assert_true(g->opid[i] > 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g->ohttp[i]);
    if (tl_wait_health(url, g->opid[i], TL_START_MS) != 0) {
        tl_dump_file(log);
        fail_msg("oracle member %d did not start", i + 1);
    }
}

int tl_group_oracle_leader(tl_svc_group *g, int skip, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    for (;;) {
        tl_raft_view v;
        for (int i = 0; i < TL_GROUP_NODES; i++)
            if (i != skip && g->opid[i] > 0 && tl_raft_health(g->ohttp[i], 1000, &v) && v.leader)
                return i;
        if (time_mono_ms() >= end)
            return -1;
        time_sleep_ms(100);
    }
}

/* Three percolator-oracle processes as a Raft group; returns once one of
 * them leads (bounded). */
static void oracle_group_start(tl_svc_group *g)
{
    g->opeers[0] = g->ourls[0] = g->oracle_urls[0] = '\0';
    for (int i = 0; i < TL_GROUP_NODES; i++) {
        g->ohttp[i] = tl_free_port();
        int raft = tl_free_port();
        snprintf(g->opeers + strlen(g->opeers), sizeof(g->opeers) - strlen(g->opeers),
                 "%s%d=127.0.0.1:%d", i ? "," : "", i + 1, raft);
        snprintf(g->ourls + strlen(g->ourls), sizeof(g->ourls) - strlen(g->ourls),
                 "%s%d=http://127.0.0.1:%d", i ? "," : "", i + 1, g->ohttp[i]);
        snprintf(g->oracle_urls + strlen(g->oracle_urls),
                 sizeof(g->oracle_urls) - strlen(g->oracle_urls), "%shttp://127.0.0.1:%d",
                 i ? "," : "", g->ohttp[i]);
    }
    for (int i = 0; i < TL_GROUP_NODES; i++)
        tl_group_oracle_start(g, i);
    if (tl_group_oracle_leader(g, -1, 20000) < 0)
        fail_msg("the oracle group elected no leader in 20 s");
    tl_raft_require_voters(g->dir, "oracle", g->ohttp, g->opid, TL_GROUP_NODES);
}

void tl_group_start(tl_svc_group *g, const char *tag, int started, const char *env,
                    const char *const extra[])
{
    tl_group_start_with(g, tag, started, env, extra, 1);
}

void tl_group_start_with(tl_svc_group *g, const char *tag, int started, const char *env,
                         const char *const extra[], int oracles)
{
    tl_group_start_n(g, tag, TL_GROUP_NODES, started, env, extra, oracles);
}

void tl_group_start_n(tl_svc_group *g, const char *tag, int n, int started, const char *env,
                      const char *const extra[], int oracles)
{
    memset(g, 0, sizeof(*g));
    assert_true(n >= 1 && n <= TL_GROUP_MAX && started <= n);
    g->n = n;
    g->env = env;
    g->noracles = oracles == TL_GROUP_NODES ? TL_GROUP_NODES : 1;
    for (int k = 0; extra != NULL && extra[k] != NULL; k++) {
        assert_true(k < 19); /* a flag dropped would change the test unseen */
        g->extra[k] = extra[k];
    }
    g->dir = tl_mkdtemp(tag);
    assert_non_null(g->dir);
    if (g->noracles == 1) {
        char odata[600];
        snprintf(odata, sizeof odata, "%s/oracle", g->dir);
        assert_int_equal(tl_oracle_start(&g->oracle, odata, 0), 0);
        snprintf(g->oracle_urls, sizeof g->oracle_urls, "%s", g->oracle.url);
    } else {
        oracle_group_start(g);
    }
    /* A port picked free can be taken before its member binds it (an
     * outbound connection's ephemeral port, another test): then the group
     * starts again on other ports and fresh dirs, up to 3 times. */
    for (int attempt = 0;; attempt++) {
        pick_ports(g);
        int i = 0;
        bool busy = false;
        while (i < started && member_try_start(g, i, &busy) == 0)
            i++;
        if (i == started) {
            if (2 * started > n) /* a majority of --raft-peers: they bootstrap (no
                                    test names fewer initial members then) */
                tl_raft_require_voters(g->dir, "n", g->http, g->pid, started);
            return;
        }
        for (int k = 0; k < i; k++) {
            tl_stop(g->pid[k], TL_STOP_MS);
            g->pid[k] = 0;
        }
        if (!busy || attempt == 2)
            fail_msg("member %d did not start%s", i + 1, busy ? " (its port was taken)" : "");
        for (int k = 0; k < g->n; k++) {
            char data[600];
            snprintf(data, sizeof data, "%s/n%d", g->dir, k + 1);
            tl_rmtree(data);
        }
    }
}

void tl_group_stop(tl_svc_group *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->pid[i] > 0)
            assert_int_equal(tl_stop(g->pid[i], TL_STOP_MS), 0);
    if (g->noracles == 1)
        assert_int_equal(tl_oracle_stop(&g->oracle), 0);
    for (int i = 0; i < TL_GROUP_NODES; i++)
        if (g->opid[i] > 0)
            assert_int_equal(tl_stop(g->opid[i], TL_STOP_MS), 0);
    tl_rmtree(g->dir);
    free(g->dir);
    g->dir = NULL;
}

int tl_group_leader(tl_svc_group *g, int skip, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    tl_raft_view v;
    do {
        for (int i = 0; i < g->n; i++) {
            if (i == skip || g->pid[i] <= 0 || !tl_raft_health(g->http[i], 2000, &v) ||
                !v.leader)
                continue;
            char url[128];
            tl_resp r = {0};
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

void tl_group_dump_logs(const tl_svc_group *g)
{
    char log[620];
    for (int i = 0; i < g->n; i++) {
        snprintf(log, sizeof log, "%s/n%d.log", g->dir, i + 1);
        tl_dump_tail(log, 6000);
    }
    if (g->noracles == 1)
        tl_dump_tail(g->oracle.log, 3000);
    else
        for (int i = 0; i < g->noracles; i++) {
            snprintf(log, sizeof log, "%s/oracle%d.log", g->dir, i + 1);
            tl_dump_tail(log, 3000);
        }
}

bool tl_group_knows_leader(tl_svc_group *g, int i, int leader, int ms)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    tl_raft_view v;
    do {
        if (tl_raft_health(g->http[i], 2000, &v) && v.leader_id == leader + 1)
            return true;
        time_sleep_ms(50);
    } while (time_mono_ms() < end);
    return false;
}

long tl_group_locks(tl_svc_group *g, int i)
{
    json_t *j = NULL;
    long n = -1;
    if (tl_raft_call(g->http[i], "GET", "/v1/locks?limit=1000", NULL, 10000, &j) == 200)
        n = (long)json_array_size(json_object_get(j, "locks"));
    json_decref(j);
    return n;
}
