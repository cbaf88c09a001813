/*
 * test_raft_net.c — Raft groups over the node network (common/raft_net.h,
 * raft_io_net.h; docs/DESIGN.md §6.5 step 2), in this process: three
 * nodes on 127.0.0.1, .2 and .3, each a net and a loop, and four
 * three-member oracle groups with member m of every group on node m.
 *
 * Every group elects and hands out timestamps with one connection a pair
 * of nodes and direction, whatever the number of groups; a group stopped
 * whole, a leader stopped and started again from its dir, and the other
 * groups go on. A stranger on the network is refused: a hello that claims
 * another host, a record longer than the limit; and a member's records
 * are dropped when they claim a member the group puts on another node,
 * or carry bytes the frame check refuses, or an entry whose
 * configuration names a stranger: the groups go on at the term they had.
 * A hello from a node no group names is refused too, and so are hellos
 * that speak for a member of another node. Groups are made by their
 * members' probes over the net; a member whose data dir was wiped rejoins
 * as a new incarnation, and an operator removes a member and adds it back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "le.h"
#include "log.h"
#include "peer_certs.h"
#include "raft_host.h"
#include "raft_identity.h"
#include "raft_loop.h"
#include "raft_net.h"
#include "raft_inproc.h"
#include "raft_node.h"
#include "raft_wire.h"
#include "testlib.h"
#include "timeutil.h"
#include "tls.h"

#define NODES 3
#define GROUPS 4

typedef struct {
    char *dir;
    raft_loop *loops[NODES];
    raft_net *nets[NODES];
    char addr[NODES][64];
    char peers[256];
    raft_node *nodes[GROUPS][NODES];
    char dirs[GROUPS][NODES][512]; /* a member keeps its dir's name (raft_host.h) */
    uint64_t last_ts[GROUPS];
    bool tls;                      /* the nets run peer TLS: */
    tl_peer_certs certs;
    tls_server *creds[NODES];      /* node i's, from member i+1's certificate */
} fixture;

/* Member m of group g from its dir (an empty one asks the others whether
 * the group exists, raft_identity.h). 0, or -1 with the reason in err. */
static int start_member_as(fixture *f, int g, int m, char *err, size_t errlen)
{
    char *d = f->dirs[g][m];
    snprintf(d, sizeof f->dirs[g][m], "%s/g%d-m%d", f->dir, g, m + 1);
    raft_node_config cfg = {.id = (unsigned)m + 1, .dir = d, .heartbeat_ms = 100,
                            .election_ms = 1000, .loop = f->loops[m], .net = f->nets[m],
                            .net_group = (uint64_t)g + 1,
                            .segment_bytes = 1024 * 1024};
    if (raft_node_parse_peers(f->peers, NULL, &cfg, err, errlen) != 0 ||
        raft_node_start(&cfg, NULL, &f->nodes[g][m], err, errlen) != 0)
        return -1;
    return 0;
}

/* Member m of group g started again from its dir. */
static int start_member(fixture *f, int g, int m)
{
    char err[256];
    if (start_member_as(f, g, m, err, sizeof err) != 0) {
        fprintf(stderr, "group %d member %d: %s\n", g, m + 1, err);
        return -1;
    }
    return 0;
}

static void stop_member(fixture *f, int g, int m)
{
    raft_node_stop(f->nodes[g][m]);
    f->nodes[g][m] = NULL;
}

/* A timestamp from group g's leader, above its last; the leader in *who
 * and its term in *term (either may be NULL). */
static void group_answers(fixture *f, int g, int *who, uint64_t *term)
{
    uint64_t ts = 0;
    if (tl_inproc_timestamp(f->nodes[g], NODES, &ts, who, term) != 0)
        fail_msg("group %d: no leader answered", g);
    assert_true(ts > f->last_ts[g]);
    f->last_ts[g] = ts;
}

static int teardown(void **state);

/* Node i's peer credentials: member i+1's certificate (IP:127.0.0.(i+1)),
 * trusting the CA that signed every member's. */
static tls_server *node_creds(fixture *f, int i)
{
    tls_pem pem;
    char err[256];
    tls_server *t = NULL;
    if (tls_pem_load(f->certs.cert[i], f->certs.key[i], f->certs.ca, &pem, err, sizeof err) == 0) {
        t = tls_server_new(pem.cert, pem.key, pem.client_ca, err, sizeof err);
        tls_pem_free(&pem);
    }
    if (t == NULL)
        fprintf(stderr, "node %d credentials: %s\n", i, err);
    return t;
}

/* Whether member m of group g is a voter of the group within 60 s (what
 * it is then in *st). */
static bool votes_within_a_minute(fixture *f, int g, int m, raft_node_status *st)
{
    for (int i = 0; i < 600; i++) {
        raft_node_get_status(f->nodes[g][m], st);
        if (strcmp(st->membership, "voter") == 0)
            return true;
        time_sleep_ms(100);
    }
    return false;
}

/* Until member m of group g is a voter of the group (60 s at most). */
static void wait_voter(fixture *f, int g, int m)
{
    raft_node_status st;
    if (!votes_within_a_minute(f, g, m, &st))
        fail_msg("group %d member %d is still %s", g, m + 1, st.membership);
}

static int setup_with(void **state, bool tls)
{
    fixture *f = calloc(1, sizeof *f);
    char err[256];
    if (f == NULL)
        return -1;
    *state = f;
    f->tls = tls;
    if ((f->dir = tl_mkdtemp("raft-net")) == NULL)
        return teardown(state), -1;
    if (tls && tl_peer_certs_make(&f->certs, NULL) != 0)
        return teardown(state), -1;
    for (int i = 0; tls && i < NODES; i++)
        if ((f->creds[i] = node_creds(f, i)) == NULL)
            return teardown(state), -1;
    log_set_level(getenv("TEST_LOG_INFO") ? LOG_INFO : LOG_WARN);
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < NODES; i++) {
        if (tl_inproc_node_start(i, f->creds[i], &f->nets[i], &f->loops[i], f->addr[i],
                                 sizeof f->addr[i]) != 0)
            return teardown(state), -1;
        size_t at = strlen(f->peers);
        snprintf(f->peers + at, sizeof f->peers - at, "%s%d=%s", i ? "," : "", i + 1,
                 f->addr[i]);
    }
    for (int g = 0; g < GROUPS; g++)
        for (int m = 0; m < NODES; m++)
            if (start_member_as(f, g, m, err, sizeof err) != 0) {
                fprintf(stderr, "group %d member %d: %s\n", g, m + 1, err);
                return teardown(state), -1;
            }
    /* Every group whole before a test stops any member: a member that asked
     * before the others were up may have found its group elected since and
     * joined as a new incarnation (raft_identity.h). Until the leader has
     * promoted it only two of the group's voters run (the third is the old
     * incarnation, or was removed): one of them stopped leaves the other
     * no majority, and the group no leader for good (DESIGN §6.5). */
    for (int g = 0; g < GROUPS; g++)
        for (int m = 0; m < NODES; m++) {
            raft_node_status st;
            if (!votes_within_a_minute(f, g, m, &st)) {
                fprintf(stderr, "group %d member %d is still %s\n", g, m + 1, st.membership);
                return teardown(state), -1;
            }
        }
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, false);
}

static int setup_tls(void **state)
{
    return setup_with(state, true);
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int g = 0; g < GROUPS; g++)
        for (int m = 0; m < NODES; m++)
            if (f->nodes[g][m] != NULL)
                stop_member(f, g, m);
    for (int i = 0; i < NODES; i++) {
        raft_loop_stop(f->loops[i]);
        raft_net_stop(f->nets[i]);
        tls_server_free(f->creds[i]);
    }
    if (f->tls)
        tl_peer_certs_remove(&f->certs);
    if (f->dir != NULL)
        tl_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void test_groups_share_one_connection_per_pair_of_nodes(void **state)
{
    fixture *f = *state;
    for (int g = 0; g < GROUPS; g++)
        group_answers(f, g, NULL, NULL);
    /* Each node: at most one connection to each other node and one from
     * it a lane (messages, images), for all four groups (their members
     * would hold 4 x 4 each way). */
    for (int i = 0; i < NODES; i++) {
        raft_net_stats st;
        raft_net_get_stats(f->nets[i], &st);
        assert_true(st.connections <= 2 * 2 * (NODES - 1));
        assert_true(st.sent > 0 && st.received > 0);
    }

    /* Group 0 stops whole; the others go on over the same connections. */
    for (int m = 0; m < NODES; m++)
        stop_member(f, 0, m);
    for (int g = 1; g < GROUPS; g++)
        group_answers(f, g, NULL, NULL);

    /* Group 1's leader stops; the other two elect (a new term); it comes
     * back from its dir on its node and the group answers with every
     * member cycled. */
    int leader = -1;
    uint64_t term = 0, next = 0;
    group_answers(f, 1, &leader, &term);
    stop_member(f, 1, leader);
    group_answers(f, 1, NULL, &next);
    assert_true(next > term);
    assert_int_equal(start_member(f, 1, leader), 0);
    for (int m = 0; m < NODES; m++)
        if (m != leader) {
            stop_member(f, 1, m);
            group_answers(f, 1, NULL, NULL);
            assert_int_equal(start_member(f, 1, m), 0);
            group_answers(f, 1, NULL, NULL);
        }
    for (int g = 2; g < GROUPS; g++)
        group_answers(f, g, NULL, NULL);
}

/* The raft id in member m of group g's member file. */
static uint64_t raft_id_of(fixture *f, int g, int m)
{
    raft_member_identity id;
    char err[256];
    assert_int_equal(raft_member_load(f->dirs[g][m], &id, err, sizeof err), 1);
    return id.raft_id;
}

/* A member whose data dir was wiped does not bootstrap its group again
 * (it would vote without the entries it acknowledged, DESIGN §7.3): its
 * probes over the net find the group, it joins as a new incarnation, and
 * the leader, on its hellos, replaces the old one and promotes it once
 * caught up. It then counts in a quorum: with another member stopped, the
 * group answers through it. */
static void test_a_wiped_member_rejoins_as_a_new_incarnation(void **state)
{
    fixture *f = *state;
    int leader = -1;
    group_answers(f, 2, &leader, NULL);
    int wiped = (leader + 1) % NODES, other = (leader + 2) % NODES;
    assert_int_equal(raft_id_of(f, 2, wiped), (uint64_t)wiped + 1); /* incarnation 0 */
    stop_member(f, 2, wiped);
    group_answers(f, 2, NULL, NULL);
    tl_rmtree(f->dirs[2][wiped]);
    assert_int_equal(start_member(f, 2, wiped), 0);
    wait_voter(f, 2, wiped);
    uint64_t again = raft_id_of(f, 2, wiped);
    assert_int_equal(raft_member_of(again), wiped + 1);
    assert_true(again >> 32 != 0); /* a new incarnation */
    stop_member(f, 2, other);
    group_answers(f, 2, NULL, NULL);
    assert_int_equal(start_member(f, 2, other), 0);
    group_answers(f, 2, NULL, NULL);
}

/* An operator's membership changes run over the net: a member removed
 * (it keeps its data, and is heard from by its Raft messages or, once it
 * knows it was removed, its hellos), added back as a spare, then
 * promoted; an add at an address no peer has is refused (a member is on
 * its node). */
static void test_membership_changes_over_the_net(void **state)
{
    fixture *f = *state;
    int leader = -1;
    char err[256];
    group_answers(f, 3, &leader, NULL);
    raft_host *h = raft_node_host(f->nodes[3][leader]);
    int m = (leader + 1) % NODES;
    assert_int_equal(raft_host_change(h, RAFT_HOST_REMOVE, (unsigned)m + 1, NULL, 10000, err,
                                      sizeof err), RAFT_HOST_DONE);
    group_answers(f, 3, NULL, NULL);
    raft_host_result r = raft_host_change(h, RAFT_HOST_ADD, (unsigned)m + 1, NULL, 10000, err,
                                          sizeof err);
    if (r != RAFT_HOST_DONE)
        fail_msg("add: %d %s", r, err);
    wait_voter(f, 3, m);
    /* it counts: the third member stopped, the group answers through it */
    int third = (leader + 2) % NODES;
    stop_member(f, 3, third);
    group_answers(f, 3, NULL, NULL);
    assert_int_equal(start_member(f, 3, third), 0);

    group_answers(f, 3, &leader, NULL);
    h = raft_node_host(f->nodes[3][leader]);
    raft_peer elsewhere = {.id = 7};
    snprintf(elsewhere.raft, sizeof elsewhere.raft, "127.0.0.1:1");
    r = raft_host_change(h, RAFT_HOST_ADD, 7, &elsewhere, 10000, err, sizeof err);
    if (r != RAFT_HOST_REFUSED)
        fail_msg("add elsewhere: %d %s", r, err);
    if (strstr(err, "not one of --raft-peers") == NULL)
        fail_msg("add elsewhere: %s", err);
    group_answers(f, 3, NULL, NULL);
}

/* ---- a stranger on the network ---- */

/* A connection to node `to` from 127.0.0.(1+from_host), with the hello
 * claiming address `claim`. The fd, or -1. */
static int dial_as(fixture *f, int to, int from_host, const char *claim)
{
    struct sockaddr_in self = {.sin_family = AF_INET,
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)from_host)};
    struct sockaddr_in dst = {.sin_family = AF_INET};
    const char *colon = strrchr(f->addr[to], ':');
    char host[32];
    snprintf(host, sizeof host, "%.*s", (int)(colon - f->addr[to]), f->addr[to]);
    dst.sin_port = htons((uint16_t)atoi(colon + 1));
    inet_pton(AF_INET, host, &dst.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    rw_buf hello = {0};
    rw_enc_net_hello(&hello, RAFT_NET_MESSAGES, 0, claim);
    if (fd < 0 || hello.failed || bind(fd, (struct sockaddr *)&self, sizeof self) != 0 ||
        connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0 ||
        send(fd, hello.data, hello.len, MSG_NOSIGNAL) != (ssize_t)hello.len) {
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    rw_buf_free(&hello);
    return fd;
}

/* One record of group g from raft id `from` to raft id `to`. */
static int send_record(int fd, uint64_t g, uint64_t from, uint64_t to, const rw_buf *msg)
{
    uint8_t h[32];
    le_put64(h, g);
    le_put64(h + 8, from);
    le_put64(h + 16, to);
    le_put64(h + 24, msg->len);
    return send(fd, h, sizeof h, MSG_NOSIGNAL) == (ssize_t)sizeof h &&
                   send(fd, msg->data, msg->len, MSG_NOSIGNAL) == (ssize_t)msg->len
               ? 0
               : -1;
}

/* A hello over the net (raft_io_net.h's control record, to raft id 0)
 * of group g, from raft id `from`, its body saying raft id `claim` of the
 * group `cluster`, with no state: what a new incarnation says. */
static int send_hello(int fd, uint64_t g, uint64_t from, uint64_t claim, uint64_t cluster)
{
    uint64_t w[6] = {1, cluster, claim, 0, 0, 42};
    uint8_t body[48];
    for (int i = 0; i < 6; i++)
        le_put64(body + 8 * i, w[i]);
    return send_record(fd, g, from, 0, &(rw_buf){.data = body, .len = sizeof body});
}

/* A stranger on node 2's host, as node 2 (whose own members are stopped:
 * its net keeps no connection to node 1 then, which would replace the
 * stranger's), sends records for group 77 to the member deciding on node
 * 1 until told to stop: answers as member 2 to probes it was never asked,
 * with nonces it guesses, and Raft messages for member 1. */
typedef struct {
    fixture *f;
    atomic_bool stop;
    unsigned sent;
} stranger;

static void *stranger_main(void *arg)
{
    stranger *st = arg;
    int fd = dial_as(st->f, 0, 1, st->f->addr[1]);
    rw_buf b = {0};
    for (uint64_t k = 1; fd >= 0 && !atomic_load(&st->stop); k++) {
        uint64_t w[6] = {2, 0x1234, 2, 1, 5, k}; /* an answer: a group exists, with state */
        uint8_t body[48];
        for (int i = 0; i < 6; i++)
            le_put64(body + 8 * i, w[i]);
        rw_enc_request_vote(&b, 7, 2, 10, 7, 0);
        if (send_record(fd, 77, 2, 0, &(rw_buf){.data = body, .len = sizeof body}) != 0 ||
            send_record(fd, 77, 2, 1, &b) != 0)
            break;
        rw_buf_free(&b);
        st->sent++;
        if (k % 64 == 0)
            time_sleep_ms(1);
    }
    rw_buf_free(&b);
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* A member of a group no other node runs yet, with an empty dir, asks and
 * waits (it may not bootstrap alone): answers it did not ask for (a nonce
 * it never sent) tell it nothing, and Raft messages before its libraft
 * runs are dropped. Stopped while it waits (with records still coming
 * in), it leaves the net before libraft ever ran: started again at once on
 * the same net, it joins the group's place there. */
static void test_a_member_alone_waits_for_its_group(void **state)
{
    fixture *f = *state;
    char dir[600], err[256];
    snprintf(dir, sizeof dir, "%s/alone", f->dir);
    raft_node_config cfg = {.id = 1, .dir = dir, .loop = f->loops[0], .net = f->nets[0],
                            .net_group = 77, .segment_bytes = 1024 * 1024};
    raft_node *n = NULL;
    for (int g = 0; g < GROUPS; g++)
        stop_member(f, g, 1);
    assert_int_equal(raft_node_parse_peers(f->peers, NULL, &cfg, err, sizeof err), 0);
    assert_int_equal(raft_node_start(&cfg, NULL, &n, err, sizeof err), 0);
    stranger st = {.f = f};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stranger_main, &st), 0);
    time_sleep_ms(2500); /* two rounds of probes, nobody it asked answers */
    raft_node_status ns;
    raft_node_get_status(n, &ns);
    assert_string_equal(ns.membership, "waiting");
    raft_member_identity id;
    assert_int_equal(raft_member_load(dir, &id, err, sizeof err), 0); /* no group made */
    raft_node_stop(n); /* while the stranger's records come in */
    atomic_store(&st.stop, true);
    pthread_join(t, NULL);
    assert_true(st.sent > 10);
    assert_int_equal(raft_node_start(&cfg, NULL, &n, err, sizeof err), 0);
    raft_node_stop(n);
    group_answers(f, 0, NULL, NULL); /* the node's other groups go on */
}

static void test_a_stranger_and_lying_records_are_refused(void **state)
{
    fixture *f = *state;
    uint64_t terms[GROUPS];
    int leaders[GROUPS];
    /* Node 2 runs no member while the stranger speaks as it: a node keeps
     * one connection to another, and its own would replace the
     * stranger's (raft_net.h) before the records below are read. The
     * groups go on with members 1 and 3, once they are made (a group
     * is bootstrapped only when all three answer: raft_identity.h). */
    for (int g = 0; g < GROUPS; g++)
        group_answers(f, g, NULL, NULL);
    for (int g = 0; g < GROUPS; g++)
        stop_member(f, g, 1);
    for (int g = 0; g < GROUPS; g++)
        group_answers(f, g, &leaders[g], &terms[g]);

    /* A hello claiming a host it does not connect from: closed. */
    int fd = dial_as(f, 0, 1, f->addr[2]);
    assert_true(fd >= 0);
    assert_true(tl_closed_by_server(fd, 10000));
    close(fd);

    /* A hello from a node no group here names: closed. */
    fd = dial_as(f, 0, 4, "127.0.0.5:7000");
    assert_true(fd >= 0);
    assert_true(tl_closed_by_server(fd, 10000));
    close(fd);

    /* From node 2's host, as node 2 (plain TCP on loopback cannot tell a
     * process on the same host from the node: TLS is the next part). */
    fd = dial_as(f, 0, 1, f->addr[1]);
    assert_true(fd >= 0);
    rw_buf b = {0};
    for (int g = 0; g < GROUPS; g++) {
        uint64_t to = 1; /* member 1, incarnation 0 */
        /* claims member 3, whom the group puts on node 3: dropped */
        rw_enc_request_vote(&b, terms[g] + 1000, 3, 1000000, terms[g] + 1000,
                            RW_VOTE_DISRUPT_LEADER);
        assert_int_equal(send_record(fd, (uint64_t)g + 1, 3, to, &b), 0);
        rw_buf_free(&b);
        /* as member 2 (its own node), bytes the frame check refuses: an
         * entry of 5 bytes */
        rw_entry e = {terms[g], RW_ENTRY_COMMAND, "abcde", 5};
        rw_enc_append_entries(&b, &(rw_append_entries){.term = terms[g], .prev_index = 1,
                                                       .prev_term = 1, .commit = 1,
                                                       .entries = &e, .n_entries = 1});
        assert_int_equal(send_record(fd, (uint64_t)g + 1, 2, to, &b), 0);
        rw_buf_free(&b);
        /* as member 2, a configuration entry naming a stranger's address */
        rw_server sv[2] = {{1, f->addr[0], 1}, {9, "127.0.0.9:9", 1}};
        rw_install_snapshot is = {.term = terms[g] + 1000, .last_index = 1000000,
                                  .last_term = terms[g] + 1000, .conf_index = 1,
                                  .servers = sv, .n_servers = 2, .data = "12345678", .len = 8};
        rw_enc_install_snapshot(&b, &is);
        assert_int_equal(send_record(fd, (uint64_t)g + 1, 2, to, &b), 0);
        rw_buf_free(&b);
        /* for a group no node hosts */
        rw_enc_timeout_now(&b, terms[g] + 1000, 5, 5);
        assert_int_equal(send_record(fd, 999, 2, to, &b), 0);
        rw_buf_free(&b);
    }
    /* To each group's leader (member 1 or 3), hellos saying its other
     * voter came back without its data: a leader would replace it, and
     * with member 2 stopped the group would lose its quorum. As that
     * member (which the group puts on its own node), and as member 2
     * with a body that speaks for it. Both dropped. */
    int fd3 = dial_as(f, 2, 1, f->addr[1]);
    assert_true(fd3 >= 0);
    for (int g = 0; g < GROUPS; g++) {
        raft_member_identity id;
        char err[256];
        assert_int_equal(raft_member_load(f->dirs[g][0], &id, err, sizeof err), 1);
        int victim = NODES - 1 - leaders[g]; /* 0 or 2: the other voter */
        uint64_t again = (uint64_t)5 << 32 | (uint64_t)(victim + 1);
        int to = leaders[g] == 0 ? fd : fd3;
        assert_int_equal(send_hello(to, (uint64_t)g + 1, again, again, id.cluster), 0);
        assert_int_equal(send_hello(to, (uint64_t)g + 1, 2, again, id.cluster), 0);
    }
    /* A record longer than the limit: the connection is closed. */
    uint8_t h[32] = {0};
    le_put64(h, 1);
    le_put64(h + 24, (uint64_t)1 << 40);
    assert_int_equal(send(fd, h, sizeof h, MSG_NOSIGNAL), (ssize_t)sizeof h);
    assert_true(tl_closed_by_server(fd, 10000));
    close(fd);

    time_sleep_ms(1500); /* a leader's tick would have acted on the hellos */
    close(fd3);
    for (int g = 0; g < GROUPS; g++) { /* the leader's configuration: as it was */
        raft_host_view v;
        raft_host_view_get(raft_node_host(f->nodes[g][leaders[g]]), &v);
        assert_int_equal(v.n, NODES);
        for (size_t i = 0; i < v.n; i++) {
            assert_int_equal(v.members[i].raft_id, v.members[i].member);
            assert_string_equal(v.members[i].role, "voter");
        }
    }
    raft_net_stats st;
    raft_net_get_stats(f->nets[0], &st);
    assert_true(st.refused >= 3);
    assert_true(st.dropped_unknown >= GROUPS);
    /* No group took any of it: each answers, short of the forged terms
     * (an election of its own on a loaded machine may add one or two). */
    for (int g = 0; g < GROUPS; g++) {
        uint64_t term = 0;
        group_answers(f, g, NULL, &term);
        assert_true(term >= terms[g] && term < terms[g] + 1000);
    }
}

/* ---- peer TLS ---- */

/* A TLS connection to node `to` with the given certificate, its hello
 * claiming `claim`: whether the node closes it within 10 s. */
static bool tls_hello_closed(fixture *f, int to, const char *cert, const char *key,
                             const char *claim)
{
    rw_conn c;
    rw_tls tls = {.cert_file = cert, .key_file = key, .ca_file = f->certs.ca, .confirm_ms = 500};
    char host[32];
    const char *colon = strrchr(f->addr[to], ':');
    snprintf(host, sizeof host, "%.*s", (int)(colon - f->addr[to]), f->addr[to]);
    if (rw_connect(&c, host, atoi(colon + 1), &tls, 10000) != 0)
        return true; /* refused in the handshake */
    rw_buf hello = {0};
    rw_enc_net_hello(&hello, RAFT_NET_MESSAGES, 0, claim);
    bool closed = hello.failed || rw_send_buf(&c, &hello, 5000) != 0 ||
                  rw_closed_by_peer(&c, 3000);
    rw_buf_free(&hello);
    rw_close(&c);
    return closed;
}

static void drop_record(void *arg, uint64_t from, uint64_t to, const char *from_node,
                        raft_net_lane lane, uint8_t *msg, size_t len)
{
    (void)arg, (void)from, (void)to, (void)from_node, (void)lane, (void)len;
    free(msg);
}

/* The nets run mutual TLS: the groups elect and answer over it, and a
 * node is who its certificate names, wherever it connects from, and
 * whoever answers at its address. */
static void test_nodes_speak_tls_and_are_their_certificates(void **state)
{
    fixture *f = *state;
    for (int g = 0; g < GROUPS; g++)
        group_answers(f, g, NULL, NULL);
    raft_net_stats st;
    raft_net_get_stats(f->nets[0], &st);
    assert_true(st.sent > 0 && st.received > 0);
    uint64_t refused = st.refused;

    /* Plain TCP with a hello, to a node that runs TLS: closed. */
    int fd = dial_as(f, 0, 1, f->addr[1]);
    assert_true(fd >= 0);
    assert_true(tl_closed_by_server(fd, 10000));
    close(fd);
    /* A certificate of a CA nobody trusts, for 127.0.0.1: refused. */
    assert_true(tls_hello_closed(f, 0, f->certs.stranger_cert, f->certs.stranger_key,
                                 f->addr[1]));
    /* Node 3's own certificate, claiming to be node 2: refused at its
     * hello, not named node 2 (which would replace node 2's connection). */
    assert_true(tls_hello_closed(f, 0, f->certs.cert[2], f->certs.key[2], f->addr[1]));
    raft_net_get_stats(f->nets[0], &st);
    assert_true(st.refused >= refused + 3);
    assert_int_equal(st.replaced, 0);
    /* Node 2's certificate from 127.0.0.1 (not its host): the certificate,
     * not the source address, says who it is. The hello passes, and the
     * connection replaces node 2's (which node 2, dialling again, takes
     * back: so it is closed too, later). */
    uint64_t replaced = st.replaced;
    (void)tls_hello_closed(f, 0, f->certs.cert[1], f->certs.key[1], f->addr[1]);
    raft_net_get_stats(f->nets[0], &st);
    assert_true(st.replaced > replaced);

    /* An impostor on node 2's host (a new port), with node 3's
     * certificate, hosting a group node 1 sends to: node 1's dial checks
     * the certificate against the host it dialled and sends nothing. */
    char err[256], at[64];
    int port, lfd = tl_listen_loopback(1, &port);
    assert_true(lfd >= 0);
    snprintf(at, sizeof at, "127.0.0.2:%d", port);
    raft_net *impostor = NULL;
    assert_int_equal(raft_net_start(&(raft_net_config){.address = at, .listen_fd = lfd,
                                                       .tls = f->creds[2]},
                                    &impostor, err, sizeof err), 0);
    close(lfd);
    const char *nodes[] = {f->addr[0]};
    assert_int_equal(raft_net_join(impostor, 99, nodes, 1, drop_record, NULL), 0);
    for (int k = 0; k < 10; k++) {
        uint8_t *m = malloc(8);
        assert_non_null(m);
        memcpy(m, "12345678", 8);
        (void)raft_net_send(f->nets[0], 99, 1, 2, at, RAFT_NET_MESSAGES, m, 8);
        time_sleep_ms(100);
    }
    raft_net_stats imp;
    raft_net_get_stats(impostor, &imp);
    assert_int_equal(imp.received, 0);
    assert_true(imp.accepted >= 1); /* it was dialled, and told nothing */
    raft_net_leave(impostor, 99);
    raft_net_stop(impostor);
    for (int g = 0; g < GROUPS; g++)
        group_answers(f, g, NULL, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_groups_share_one_connection_per_pair_of_nodes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_wiped_member_rejoins_as_a_new_incarnation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_member_alone_waits_for_its_group, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_membership_changes_over_the_net, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_stranger_and_lying_records_are_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_nodes_speak_tls_and_are_their_certificates,
                                        setup_tls, teardown),
    };
    if (getenv("PERCOLATOR_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("PERCOLATOR_TEST_ONLY"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
