/*
 * test_raft_peer_security.c — strangers on a Raft group's peer ports
 * (issue 24; docs/DESIGN.md §7.2). Three real percolator-oracle processes
 * as a group; the attacker speaks libraft 0.15's wire format itself
 * (tests/lib/raft_wire.h), only to the members' raft ports on 127.0.0.x:
 *
 *  - plain TCP on loopback: a handshake and then one 64-byte AppendEntries
 *    frame whose header claims 50,000,000 entries, sent to every member:
 *    no member dies, the group keeps its leader and hands out larger
 *    timestamps (libraft alone reads past its buffer on that frame);
 *  - mutual TLS (--peer-cert-file, --peer-key-file,
 *    --peer-trusted-ca-file; each member's raft address on its own
 *    127.0.0.N, its certificate for that IP): against every member,
 *    (i) plain TCP carrying a forged TimeoutNow, a RequestVote that
 *    disrupts the leader 1000 terms ahead, or the 50M-entry frame is
 *    closed; (ii) TLS with a certificate from an untrusted CA, or with
 *    none, fails its handshake; (iii) TLS with a member's valid
 *    certificate but a handshake claiming another member's id is closed
 *    without effect. Afterwards the leader and term are the ones before,
 *    all three live, timestamps still increase, and each member's
 *    percolator_raft_peer_refused_total (when exposed) counted refusals.
 *
 * Bounded: every connection, send and wait has a timeout; a handful of
 * connections per member.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_certs.h"
#include "raft_member.h"
#include "raft_wire.h"
#include "testlib.h"
#include "timeutil.h"

#define NODES 3
#define HUGE_COUNT 50000000ull /* entries the forged header claims */
#define IO_MS 3000             /* one connect or send */
#define CLOSE_MS 6000          /* a member closes a refused connection within (its
                                * handshake limit is 5 s) */

typedef struct {
    char *dir;
    bool tls;
    int http[NODES], raft[NODES];
    char host[NODES][16];       /* each member's raft host */
    char addr[NODES][32];       /* host:port */
    pid_t pid[NODES];
    char log[NODES][600];
    char peers[256], urls[256];
    tl_peer_certs certs;
} group;

/* ---- the group ---- */

static void member_start(group *g, int i)
{
    char listen[32], data[600], id[16];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", g->http[i]);
    snprintf(data, sizeof data, "%s/n%d", g->dir, i + 1);
    snprintf(g->log[i], sizeof g->log[i], "%s/n%d.log", g->dir, i + 1);
    snprintf(id, sizeof id, "%d", i + 1);
    /* A 2 s election timeout: a loaded machine (sanitizers) deposes no
     * leader by itself while the test checks that nobody else did. */
    const char *args[24] = {"--listen", listen, "--data-dir", data, "--raft-id", id,
                            "--raft-peers", g->peers, "--raft-urls", g->urls,
                            "--raft-election-timeout-ms", "2000", NULL};
    if (g->tls) {
        const char *tls[] = {"--peer-cert-file", g->certs.cert[i], "--peer-key-file",
                             g->certs.key[i], "--peer-trusted-ca-file", g->certs.ca, NULL};
        memcpy(args + 12, tls, sizeof tls);
    }
    g->pid[i] = tl_spawn("percolator-oracle", args, NULL, g->log[i]);
    assert_true(g->pid[i] > 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g->http[i]);
    if (tl_wait_health(url, g->pid[i], 15000) != 0) {
        tl_stop(g->pid[i], 2000);
        g->pid[i] = 0;
        tl_dump_file(g->log[i]);
        fail_msg("member %d did not start (with peer TLS: %s)", i + 1, g->tls ? "yes" : "no");
    }
}

/* Three members; with tls, raft on 127.0.0.N with the certificates of
 * peer_certs, else all on 127.0.0.1. */
static void group_start(group *g, bool tls)
{
    g->tls = tls;
    assert_non_null(g->dir = tl_mkdtemp("raft-peer-sec"));
    if (tls)
        assert_int_equal(tl_peer_certs_make(&g->certs, g->dir), 0);
    for (int i = 0; i < NODES; i++) {
        g->http[i] = tl_free_port();
        g->raft[i] = tl_free_port();
        int host = tls ? i + 1 : 1;
        snprintf(g->host[i], sizeof g->host[i], "127.0.0.%d", host);
        snprintf(g->addr[i], sizeof g->addr[i], "127.0.0.%d:%d", host, g->raft[i]);
        snprintf(g->peers + strlen(g->peers), sizeof(g->peers) - strlen(g->peers),
                 "%s%d=127.0.0.%d:%d", i ? "," : "", i + 1, host, g->raft[i]);
        snprintf(g->urls + strlen(g->urls), sizeof(g->urls) - strlen(g->urls),
                 "%s%d=http://127.0.0.1:%d", i ? "," : "", i + 1, g->http[i]);
    }
    for (int i = 0; i < NODES; i++)
        member_start(g, i);
}

static int setup(void **state)
{
    group *g = calloc(1, sizeof *g);
    *state = g;
    return g ? 0 : -1;
}

/* Stops only the members this test started (and still alive). */
static int teardown(void **state)
{
    group *g = *state;
    for (int i = 0; i < NODES; i++)
        if (g->pid[i] > 0 && tl_stop(g->pid[i], 15000) != 0)
            tl_dump_file(g->log[i]);
    if (g->dir) {
        tl_rmtree(g->dir);
        free(g->dir);
    }
    free(g);
    return 0;
}

/* Whether member i still runs; a dead one is reaped, reported, forgotten. */
static bool alive(group *g, int i)
{
    int st;
    if (g->pid[i] <= 0)
        return false;
    if (waitpid(g->pid[i], &st, WNOHANG) == 0)
        return true;
    printf("# member %d (pid %d) died: %s %d\n", i + 1, (int)g->pid[i],
           WIFSIGNALED(st) ? "signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st)
                                                                       : WEXITSTATUS(st));
    fflush(stdout);
    tl_dump_file(g->log[i]);
    g->pid[i] = 0;
    return false;
}

/* The member that leads, once every live member names it, within ms; its
 * view in *lv. -1 if none. */
static int agreed_leader(group *g, int ms, tl_raft_view *lv)
{
    uint64_t end = time_mono_ms() + (uint64_t)ms;
    do {
        int leader = -1, agree = 0, live = 0;
        bool ok[NODES] = {false};
        tl_raft_view v[NODES];
        for (int i = 0; i < NODES; i++) {
            ok[i] = g->pid[i] > 0 && tl_raft_health(g->http[i], 1000, &v[i]);
            live += ok[i];
            if (ok[i] && v[i].leader)
                leader = i;
        }
        for (int i = 0; leader >= 0 && i < NODES; i++)
            agree += ok[i] && v[i].leader_id == leader + 1 && v[i].term == v[leader].term;
        if (leader >= 0 && agree == live) {
            *lv = v[leader];
            return leader;
        }
        time_sleep_ms(100);
    } while (time_mono_ms() < end);
    return -1;
}

/* One timestamp from the leader (retried while it is being elected). */
static uint64_t timestamp(group *g)
{
    uint64_t end = time_mono_ms() + 15000;
    do {
        tl_raft_view v;
        int l = agreed_leader(g, 5000, &v);
        tl_oracle o = {.port = l >= 0 ? g->http[l] : 0};
        uint64_t first;
        snprintf(o.url, sizeof o.url, "http://127.0.0.1:%d", o.port);
        if (l >= 0 && tl_oracle_next(&o, 1, &first) == 0)
            return first;
        time_sleep_ms(200);
    } while (time_mono_ms() < end);
    fail_msg("no timestamp within 15 s");
    return 0;
}

/* ---- attacks ---- */

/* The 64-byte AppendEntries frame: a header claiming 50M entries. */
static void enc_huge_append(rw_buf *b, uint64_t term)
{
    rw_append_entries m = {.term = term, .claimed_entries = HUGE_COUNT};
    rw_enc_append_entries(b, &m);
}

/* Connect to member i (tls NULL: plain), claim id/address, send what b
 * holds. Whether the member closed the connection within CLOSE_MS (a
 * failed connect, TLS handshake or send counts as closed). */
static bool attack(group *g, int i, const rw_tls *tls, int claim, rw_buf *b)
{
    rw_conn c;
    if (rw_connect(&c, g->host[i], g->raft[i], tls, IO_MS) != 0) {
        printf("# member %d: %s\n", i + 1, c.err);
        rw_buf_free(b);
        return true;
    }
    bool closed = rw_send_handshake(&c, (uint64_t)claim, g->addr[claim - 1], IO_MS) != 0 ||
                  rw_send_buf(&c, b, IO_MS) != 0 || rw_closed_by_peer(&c, CLOSE_MS);
    rw_buf_free(b);
    rw_close(&c);
    return closed;
}

/* Every member's view agrees with the leader l seen before: the same
 * leader id and term. */
static void same_leader_and_term(group *g, int l, int64_t term)
{
    for (int i = 0; i < NODES; i++) {
        tl_raft_view v;
        assert_true(tl_raft_health(g->http[i], 2000, &v));
        if (v.leader_id != l + 1 || v.term != term)
            fail_msg("member %d: leader %d in term %lld, before: leader %d in term %lld", i + 1,
                     v.leader_id, (long long)v.term, l + 1, (long long)term);
    }
}

/* (a) A 64-byte AppendEntries claiming 50M entries to every member of a
 * plain loopback group: nobody dies, the group goes on. */
static void plain_loopback_group_drops_a_huge_entry_count(void **state)
{
    group *g = *state;
    group_start(g, false);
    tl_raft_view lv;
    int l = agreed_leader(g, 15000, &lv);
    assert_true(l >= 0);
    uint64_t before = timestamp(g);
    for (int i = 0; i < NODES; i++) {
        rw_buf b = {0};
        enc_huge_append(&b, (uint64_t)lv.term);
        assert_int_equal(b.len, 64);
        attack(g, i, NULL, (i + 1) % NODES + 1, &b);
    }
    time_sleep_ms(1000);
    int dead = 0;
    for (int i = 0; i < NODES; i++)
        dead += !alive(g, i);
    if (dead > 0)
        fail_msg("%d of %d members died of a 64-byte AppendEntries claiming %llu entries", dead,
                 NODES, HUGE_COUNT);
    assert_true(agreed_leader(g, 10000, &lv) >= 0);
    uint64_t after = timestamp(g);
    print_message("timestamps %llu before the frames, %llu after\n", (unsigned long long)before,
                  (unsigned long long)after);
    assert_true(after > before);
}

/* Sum of every percolator_raft_peer_refused_total sample (any labels) of
 * member i; -1 when it exposes none. */
static double refused_total(group *g, int i)
{
    static const char name[] = "percolator_raft_peer_refused_total";
    char url[96];
    tl_resp r;
    double sum = -1;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", g->http[i]);
    if (tl_http("GET", url, NULL, 0, NULL, 5000, &r) == 0 && r.status == 200) {
        for (const char *line = r.body; line != NULL && *line; line = strchr(line, '\n')) {
            line += *line == '\n';
            const char *end = strchr(line, '\n'), *sp;
            size_t len = end ? (size_t)(end - line) : strlen(line);
            if (strncmp(line, name, sizeof name - 1) != 0 ||
                (line[sizeof name - 1] != '{' && line[sizeof name - 1] != ' '))
                continue;
            for (sp = line + len; sp > line && sp[-1] != ' '; sp--)
                ;
            sum = (sum < 0 ? 0 : sum) + strtod(sp, NULL);
        }
    }
    tl_resp_free(&r);
    return sum;
}

/* (i) plain TCP to a TLS member, each forged message on its own
 * connection, claiming the leader: closed. */
static void plain_frames_are_closed(group *g, int i, int l, const tl_raft_view *v)
{
    rw_buf b = {0};
    rw_enc_timeout_now(&b, (uint64_t)v->term, (uint64_t)v->applied, (uint64_t)v->term);
    assert_true(attack(g, i, NULL, l + 1, &b));
    rw_enc_request_vote(&b, (uint64_t)v->term + 1000, (uint64_t)l + 1, 1u << 30,
                        (uint64_t)v->term + 1000, RW_VOTE_DISRUPT_LEADER);
    assert_true(attack(g, i, NULL, l + 1, &b));
    enc_huge_append(&b, (uint64_t)v->term);
    assert_true(attack(g, i, NULL, l + 1, &b));
}

/* (ii) TLS with a certificate of the untrusted CA, or with none: the
 * handshake fails (our side or, TLS 1.3, the member's verdict after it). */
static void strangers_fail_tls(group *g, int i)
{
    rw_tls stranger = {.cert_file = g->certs.stranger_cert, .key_file = g->certs.stranger_key,
                       .confirm_ms = 1500};
    rw_tls anonymous = {.confirm_ms = 1500};
    const rw_tls *tries[] = {&stranger, &anonymous};
    for (int k = 0; k < 2; k++) {
        rw_conn c;
        if (rw_connect(&c, g->host[i], g->raft[i], tries[k], IO_MS) == 0) {
            rw_close(&c);
            fail_msg("member %d completed a TLS handshake with %s", i + 1,
                     k ? "no client certificate" : "the untrusted CA's certificate");
        }
        printf("# member %d, %s: %s\n", i + 1, k ? "no certificate" : "untrusted CA", c.err);
    }
}

/* (iii) member `thief`'s valid certificate, a handshake claiming member
 * `claim`: TLS passes (the certificate is good), then the member closes
 * the connection before acting on the forged frames. */
static void a_wrong_claim_is_closed(group *g, int i, int thief, int claim,
                                    const tl_raft_view *v)
{
    rw_tls tls = {.cert_file = g->certs.cert[thief - 1], .key_file = g->certs.key[thief - 1],
                  .ca_file = g->certs.ca};
    rw_conn c;
    if (rw_connect(&c, g->host[i], g->raft[i], &tls, IO_MS) != 0)
        fail_msg("member %d refused member %d's valid certificate: %s", i + 1, thief, c.err);
    rw_buf b = {0};
    rw_enc_handshake(&b, (uint64_t)claim, g->addr[claim - 1]);
    rw_enc_timeout_now(&b, (uint64_t)v->term, (uint64_t)v->applied, (uint64_t)v->term);
    rw_enc_request_vote(&b, (uint64_t)v->term + 1000, (uint64_t)claim, 1u << 30,
                        (uint64_t)v->term + 1000, RW_VOTE_DISRUPT_LEADER);
    bool closed = rw_send_buf(&c, &b, IO_MS) != 0 || rw_closed_by_peer(&c, CLOSE_MS);
    rw_buf_free(&b);
    rw_close(&c);
    if (!closed)
        fail_msg("member %d kept a connection with member %d's certificate claiming id %d",
                 i + 1, thief, claim);
}

/* (c) A TLS group refuses plain peers, strangers' certificates and a
 * member's certificate under another id; it goes on as before. */
static void tls_group_refuses_unauthenticated_peers(void **state)
{
    group *g = *state;
    group_start(g, true);
    tl_raft_view lv;
    int l = agreed_leader(g, 15000, &lv);
    assert_true(l >= 0);
    uint64_t before = timestamp(g);
    assert_true(agreed_leader(g, 5000, &lv) == l);
    /* Claims: member 2's certificate as member 1, and (when member 1 does
     * not lead) a follower's certificate as the leader. */
    int thief[2] = {2, 1}, claim[2] = {1, l + 1}, nclaims = l == 0 ? 1 : 2;
    for (int i = 0; i < NODES; i++) {
        tl_raft_view v;
        assert_true(tl_raft_health(g->http[i], 2000, &v));
        plain_frames_are_closed(g, i, l, &v);
        strangers_fail_tls(g, i);
        for (int k = 0; k < nclaims; k++)
            a_wrong_claim_is_closed(g, i, thief[k], claim[k], &v);
    }
    int dead = 0;
    for (int i = 0; i < NODES; i++)
        dead += !alive(g, i);
    if (dead > 0)
        fail_msg("%d of %d members died", dead, NODES);
    same_leader_and_term(g, l, lv.term);
    uint64_t after = timestamp(g);
    assert_true(after > before);
    for (int i = 0; i < NODES; i++) {
        double refused = refused_total(g, i);
        if (refused < 0) {
            printf("# member %d exposes no percolator_raft_peer_refused_total\n", i + 1);
            continue;
        }
        printf("# member %d: %.0f peer connections refused\n", i + 1, refused);
        assert_true(refused > 0);
    }
    same_leader_and_term(g, l, lv.term);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* a member that hung up on a send */
    if (getenv("CMOCKA_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("CMOCKA_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(plain_loopback_group_drops_a_huge_entry_count, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(tls_group_refuses_unauthenticated_peers, setup, teardown),
    };
    return cmocka_run_group_tests_name("raft peers: strangers on the peer ports", tests, NULL,
                                       NULL);
}
