/*
 * test_raft_net_bounds.c — the node network's bounds and its connections
 * (common/raft_net.h), without Raft: nets on 127.0.0.1, .2 and .3 in this
 * process, groups whose deliveries the test records, and raw sockets for
 * a stranger.
 *
 *   - A record longer than a node's send queue still goes (an empty queue
 *     takes one); one longer than a record is refused at the sender.
 *   - A node no joined group names is refused; once a group names it, its
 *     records come in. When the last group naming it leaves, the lanes to
 *     it are given back and its connections closed.
 *   - Keepalives hold a quiet connection open; a silent one is closed; a
 *     second connection from a node replaces the first.
 *   - A reader waits for room among the records being read instead of
 *     closing an honest connection.
 *   - A node of another realm (raft_net_config.realm) is refused, both
 *     ways, though a group names it.
 *   - A delivery runs outside the groups' lock: a join and a leave of
 *     another group go on meanwhile, and a leave of its own group returns
 *     only once it has ended.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "le.h"
#include "log.h"
#include "raft_inproc.h"
#include "raft_net.h"
#include "raft_wire.h"
#include "testlib.h"
#include "timeutil.h"

#define NETS 3
#define WAIT_MS 20000

/* What a group was handed. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned records, bad;  /* bad: bytes that were not the pattern of their length */
    size_t bytes, last_len;
    bool last_ok;
    char last_from[64];
    /* a delivery that blocks: entered, then waits for release */
    bool block, entered, released, returned, waited_out;
    size_t block_above;     /* with block: only records longer than this */
    /* with track: records of 2 bytes or more counted, and those not
     * longer than the one before (a test sends them growing) */
    bool track;
    unsigned tracked, out_of_order;
    size_t prev_len;
} inbox;

typedef struct {
    raft_net *nets[NETS];
    char addr[NETS][64];
    inbox in;
} fixture;

static uint8_t *pattern(size_t len)
{
    uint8_t *p = malloc(len);
    for (size_t i = 0; p != NULL && i < len; i++)
        p[i] = (uint8_t)(i * 7 + 3);
    return p;
}

static void deliver(void *arg, uint64_t from, uint64_t to, const char *from_node,
                    raft_net_lane lane, uint8_t *msg, size_t len)
{
    inbox *in = arg;
    (void)from, (void)to, (void)lane;
    uint8_t *want = pattern(len);
    pthread_mutex_lock(&in->mu);
    in->records++;
    in->bytes += len;
    in->last_len = len;
    in->last_ok = want != NULL && memcmp(want, msg, len) == 0;
    in->bad += !in->last_ok;
    if (in->track && len >= 2) {
        in->tracked++;
        in->out_of_order += len <= in->prev_len;
        in->prev_len = len;
    }
    snprintf(in->last_from, sizeof in->last_from, "%s", from_node);
    pthread_cond_broadcast(&in->cv);
    if (in->block && len > in->block_above) {
        in->entered = true;
        pthread_cond_broadcast(&in->cv);
        uint64_t deadline = time_mono_ms() + 10000;
        while (!in->released && time_mono_ms() < deadline) {
            pthread_mutex_unlock(&in->mu);
            time_sleep_ms(5);
            pthread_mutex_lock(&in->mu);
        }
        in->waited_out = !in->released;
        in->returned = true;
    }
    pthread_mutex_unlock(&in->mu);
    free(want);
    free(msg);
}

/* Wait until in has at least n records (bounded). */
static bool wait_records(inbox *in, unsigned n)
{
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    pthread_mutex_lock(&in->mu);
    while (in->records < n && time_mono_ms() < deadline) {
        pthread_mutex_unlock(&in->mu);
        time_sleep_ms(5);
        pthread_mutex_lock(&in->mu);
    }
    bool ok = in->records >= n;
    pthread_mutex_unlock(&in->mu);
    return ok;
}

/* Under in->mu: wait until a blocking delivery has begun (bounded). */
static bool wait_entered(inbox *in)
{
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    while (!in->entered && time_mono_ms() < deadline) {
        pthread_mutex_unlock(&in->mu);
        time_sleep_ms(5);
        pthread_mutex_lock(&in->mu);
    }
    return in->entered;
}

static unsigned records(inbox *in)
{
    pthread_mutex_lock(&in->mu);
    unsigned k = in->records;
    pthread_mutex_unlock(&in->mu);
    return k;
}

/* A record of len pattern bytes from net i to group g at net j, on lane. */
static int send_on(fixture *f, int i, int j, uint64_t g, raft_net_lane lane, size_t len)
{
    uint8_t *p = pattern(len);
    return p == NULL ? -1 : raft_net_send(f->nets[i], g, 1, 2, f->addr[j], lane, p, len);
}

static int send_pattern(fixture *f, int i, int j, uint64_t g, size_t len)
{
    return send_on(f, i, j, g, RAFT_NET_MESSAGES, len);
}

/* Send from net i to group g at net j until it has one more record (a
 * connection being refused or replaced loses what it carried). */
static bool send_until_received(fixture *f, int i, int j, uint64_t g, size_t len)
{
    unsigned had = records(&f->in);
    for (int tries = 0; tries < 400; tries++) {
        (void)send_pattern(f, i, j, g, len);
        for (int k = 0; k < 10; k++) {
            if (records(&f->in) > had)
                return true;
            time_sleep_ms(5);
        }
    }
    return false;
}

static int teardown(void **state);

/* Nets 0 to 2 with base's settings, net 2 of realm `realm_2`. */
static int start_nets_realms(void **state, const raft_net_config *base, uint64_t realm_2)
{
    fixture *f = calloc(1, sizeof *f);
    char err[256];
    if (f == NULL)
        return -1;
    *state = f;
    pthread_mutex_init(&f->in.mu, NULL);
    pthread_cond_init(&f->in.cv, NULL);
    log_set_level(getenv("TEST_LOG_INFO") ? LOG_INFO : LOG_ERROR);
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < NETS; i++) {
        int port, fd = tl_listen_loopback(i, &port);
        if (fd < 0)
            return teardown(state), -1;
        snprintf(f->addr[i], sizeof f->addr[i], "127.0.0.%d:%d", i + 1, port);
        raft_net_config cfg = *base;
        cfg.address = f->addr[i];
        cfg.listen_fd = fd;
        cfg.realm = i == 2 ? realm_2 : base->realm;
        int rc = raft_net_start(&cfg, &f->nets[i], err, sizeof err);
        close(fd);
        if (rc != 0) {
            fprintf(stderr, "net %d: %s\n", i, err);
            return teardown(state), -1;
        }
    }
    return 0;
}

static int start_nets(void **state, const raft_net_config *base)
{
    return start_nets_realms(state, base, base->realm);
}

/* Small bounds, so that a test reaches them with little data. */
static int setup(void **state)
{
    return start_nets(state, &(raft_net_config){.max_queue_bytes = 1024,
                                                 .max_record_bytes = 1 << 20,
                                                 .max_image_bytes = 4 << 20,
                                                 .max_reading_bytes = 64 * 1024,
                                                 .idle_ms = 1500,
                                                 .hello_ms = 60000});
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < NETS; i++)
        raft_net_stop(f->nets[i]); /* groups left first: the stop frees those that did not */
    pthread_cond_destroy(&f->in.cv);
    pthread_mutex_destroy(&f->in.mu);
    free(f);
    return 0;
}

/* Net 1 hosts group 7, with members on nets 0 and 2 too. */
static void join_group_7(fixture *f)
{
    const char *nodes[] = {f->addr[0], f->addr[1], f->addr[2]};
    assert_int_equal(raft_net_join(f->nets[1], 7, nodes, 3, deliver, &f->in), 0);
}

static void test_a_record_longer_than_the_queue_goes_alone(void **state)
{
    fixture *f = *state;
    join_group_7(f);
    /* 256 KiB into a queue of 1 KiB: the empty queue takes it */
    assert_int_equal(send_pattern(f, 0, 1, 7, 256 * 1024), 0);
    assert_true(wait_records(&f->in, 1));
    pthread_mutex_lock(&f->in.mu);
    assert_int_equal(f->in.last_len, 256 * 1024);
    assert_true(f->in.last_ok);
    assert_string_equal(f->in.last_from, f->addr[0]);
    pthread_mutex_unlock(&f->in.mu);

    /* longer than a record: refused where it is sent, never on the wire */
    raft_net_stats st;
    assert_int_equal(send_pattern(f, 0, 1, 7, (1 << 20) + 1), -1);
    raft_net_get_stats(f->nets[0], &st);
    assert_int_equal(st.dropped_too_big, 1);
    /* the writer counts what it sent once its send returned: maybe after
     * the record was read */
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    while (st.sent < 1 && time_mono_ms() < deadline) {
        time_sleep_ms(5);
        raft_net_get_stats(f->nets[0], &st);
    }
    assert_true(st.sent >= 1);
    assert_int_equal(raft_net_max_message(f->nets[0], RAFT_NET_MESSAGES), 1 << 20);
    raft_net_leave(f->nets[1], 7);
}

/* An image goes on a lane of its own: up to its own limit, and while
 * one is held at the far end (its delivery blocked, as a reader stuck
 * in a slow transfer), the messages of every group go on. */
static void test_images_go_apart_from_messages(void **state)
{
    fixture *f = *state;
    join_group_7(f);
    assert_true(send_until_received(f, 0, 1, 7, 100));
    f->in.block = true;
    f->in.block_above = 1 << 20;
    /* 3 MiB: past a message's 1 MiB, within an image's 4 MiB */
    assert_int_equal(send_on(f, 0, 1, 7, RAFT_NET_IMAGES, 3 << 20), 0);
    pthread_mutex_lock(&f->in.mu);
    assert_true(wait_entered(&f->in));
    assert_int_equal(f->in.last_len, 3 << 20);
    assert_true(f->in.last_ok);
    unsigned had = f->in.records;
    pthread_mutex_unlock(&f->in.mu);
    /* the image's reader is held; messages come in on their own lane */
    for (int k = 0; k < 3; k++)
        assert_int_equal(send_pattern(f, 0, 1, 7, 100), 0);
    assert_true(wait_records(&f->in, had + 3));
    /* one longer than an image: refused where it is sent */
    raft_net_stats st;
    raft_net_get_stats(f->nets[0], &st);
    assert_int_equal(st.dropped_too_big, 0);
    assert_int_equal(send_on(f, 0, 1, 7, RAFT_NET_IMAGES, (4 << 20) + 1), -1);
    raft_net_get_stats(f->nets[0], &st);
    assert_int_equal(st.dropped_too_big, 1);
    raft_net_get_stats(f->nets[1], &st);
    assert_int_equal(st.connections, 2); /* net 0's two lanes */
    pthread_mutex_lock(&f->in.mu);
    f->in.released = true;
    pthread_mutex_unlock(&f->in.mu);
    raft_net_leave(f->nets[1], 7);
    pthread_mutex_lock(&f->in.mu);
    assert_false(f->in.waited_out);
    pthread_mutex_unlock(&f->in.mu);
}

static void test_only_nodes_a_group_names_are_read(void **state)
{
    fixture *f = *state;
    const char *only0[] = {f->addr[0], f->addr[1]};
    assert_int_equal(raft_net_join(f->nets[1], 7, only0, 2, deliver, &f->in), 0);
    /* net 2 is no group's here: its connection is refused, nothing is read */
    for (int k = 0; k < 5; k++) {
        (void)send_pattern(f, 2, 1, 7, 100);
        time_sleep_ms(100);
    }
    raft_net_stats st;
    raft_net_get_stats(f->nets[1], &st);
    assert_true(st.refused >= 1);
    assert_int_equal(records(&f->in), 0);
    /* once a group names it, its records come in */
    const char *with2[] = {f->addr[1], f->addr[2]};
    assert_int_equal(raft_net_join(f->nets[1], 8, with2, 2, deliver, &f->in), 0);
    assert_true(send_until_received(f, 2, 1, 7, 100));
    pthread_mutex_lock(&f->in.mu);
    assert_string_equal(f->in.last_from, f->addr[2]);
    pthread_mutex_unlock(&f->in.mu);
    raft_net_leave(f->nets[1], 7);
    raft_net_leave(f->nets[1], 8);
}

static raft_net_stats stats_of(fixture *f, int i)
{
    raft_net_stats st;
    raft_net_get_stats(f->nets[i], &st);
    return st;
}

/* When the last group naming a node leaves, its lanes are given back and
 * its connections closed; a group that names it again makes them anew. */
static void test_a_node_no_group_names_is_let_go(void **state)
{
    fixture *f = *state;
    const char *both[] = {f->addr[0], f->addr[1]};
    assert_int_equal(raft_net_join(f->nets[0], 9, both, 2, deliver, &f->in), 0);
    assert_int_equal(raft_net_join(f->nets[1], 9, both, 2, deliver, &f->in), 0);
    assert_true(send_until_received(f, 0, 1, 9, 100));
    assert_true(send_until_received(f, 1, 0, 9, 100));
    assert_true(stats_of(f, 1).lanes >= 1);
    assert_true(stats_of(f, 1).connections >= 2); /* its writer, and net 0's it reads */

    /* while another group names net 0, a leave keeps what is net 0's */
    assert_int_equal(raft_net_join(f->nets[1], 10, both, 2, deliver, &f->in), 0);
    uint64_t lanes = stats_of(f, 1).lanes, accepted = stats_of(f, 1).accepted;
    raft_net_leave(f->nets[1], 9);
    assert_int_equal(stats_of(f, 1).lanes, lanes);
    assert_true(send_until_received(f, 0, 1, 10, 100));
    assert_int_equal(stats_of(f, 1).accepted, accepted); /* the same connection */

    raft_net_leave(f->nets[1], 10);
    assert_int_equal(stats_of(f, 1).lanes, 0);
    for (int i = 0; i < 500 && stats_of(f, 1).connections > 0; i++)
        time_sleep_ms(10);
    assert_int_equal(stats_of(f, 1).connections, 0);

    assert_int_equal(raft_net_join(f->nets[1], 9, both, 2, deliver, &f->in), 0);
    assert_true(send_until_received(f, 1, 0, 9, 100));
    assert_true(send_until_received(f, 0, 1, 9, 100));
    assert_true(stats_of(f, 1).lanes >= 1);
    raft_net_leave(f->nets[1], 9);
    raft_net_leave(f->nets[0], 9);
}

/* A raw connection to net `to` from 127.0.0.(1+host), claiming `claim`
 * (NULL: no hello at all), on lane. */
static int dial_lane(fixture *f, int to, int host, const char *claim, raft_net_lane lane)
{
    struct sockaddr_in self = {.sin_family = AF_INET,
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)host)};
    struct sockaddr_in dst = {.sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)to)};
    dst.sin_port = htons((uint16_t)atoi(strrchr(f->addr[to], ':') + 1));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    rw_buf hello = {0};
    if (claim != NULL)
        rw_enc_net_hello(&hello, lane, 0, claim);
    if (fd < 0 || hello.failed || bind(fd, (struct sockaddr *)&self, sizeof self) != 0 ||
        connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0 ||
        (claim != NULL &&
         send(fd, hello.data, hello.len, MSG_NOSIGNAL) != (ssize_t)hello.len)) {
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    rw_buf_free(&hello);
    return fd;
}

/* A record's header for group 7, from raft id 3 (a member on net 2) to
 * raft id 2, announcing len bytes, as a stranger sends it. 0 or -1. */
static int send_header(int fd, uint64_t len)
{
    uint8_t h[32];
    le_put64(h, 7);
    le_put64(h + 8, 3);
    le_put64(h + 16, 2);
    le_put64(h + 24, len);
    return send(fd, h, sizeof h, MSG_NOSIGNAL) == (ssize_t)sizeof h ? 0 : -1;
}

static int dial_as(fixture *f, int to, int host, const char *claim)
{
    return dial_lane(f, to, host, claim, RAFT_NET_MESSAGES);
}

static void test_keepalives_hold_a_quiet_connection_and_a_newer_one_replaces_it(void **state)
{
    fixture *f = *state;
    join_group_7(f);
    assert_true(send_until_received(f, 0, 1, 7, 100));
    raft_net_stats before, after;
    raft_net_get_stats(f->nets[1], &before);
    /* quiet for over twice the idle limit: keepalives hold it open */
    time_sleep_ms(4000);
    raft_net_get_stats(f->nets[1], &after);
    assert_int_equal(after.accepted, before.accepted);
    assert_int_equal(after.connections, before.connections);
    assert_int_equal(after.replaced, 0);

    /* As net 0, from its host: the newer connection replaces net 0's,
     * then, silent, is closed after the idle limit. */
    int fd = dial_as(f, 1, 0, f->addr[0]);
    assert_true(fd >= 0);
    assert_true(tl_closed_by_server(fd, 10000));
    close(fd);
    raft_net_get_stats(f->nets[1], &after);
    assert_int_equal(after.replaced, 1);
    /* net 0 dials again and its records come in (on a new connection:
     * the one replaced is closed, not left working) */
    assert_true(send_until_received(f, 0, 1, 7, 100));
    raft_net_get_stats(f->nets[1], &after);
    assert_true(after.accepted >= before.accepted + 2);
    raft_net_leave(f->nets[1], 7);
}

static void test_a_reader_waits_for_room_instead_of_closing(void **state)
{
    fixture *f = *state;
    join_group_7(f);
    assert_true(send_until_received(f, 0, 1, 7, 100));
    raft_net_stats before, after;
    raft_net_get_stats(f->nets[1], &before);

    /* As net 2, a record of 60 KiB of the 64 KiB being read, half sent. */
    int fd = dial_as(f, 1, 2, f->addr[2]);
    assert_true(fd >= 0);
    size_t big = 60 * 1024;
    uint8_t *body = pattern(big);
    assert_non_null(body);
    assert_int_equal(send_header(fd, big), 0);
    assert_int_equal(send(fd, body, big / 2, MSG_NOSIGNAL), (ssize_t)(big / 2));
    time_sleep_ms(100);

    /* Net 0's record of 32 KiB does not fit: its reader waits, and the
     * record comes in once the stranger's is read. */
    unsigned had = records(&f->in);
    pthread_mutex_lock(&f->in.mu);
    size_t bytes = f->in.bytes;
    pthread_mutex_unlock(&f->in.mu);
    assert_int_equal(send_pattern(f, 0, 1, 7, 32 * 1024), 0);
    time_sleep_ms(300);
    assert_int_equal(records(&f->in), had);
    assert_int_equal(send(fd, body + big / 2, big - big / 2, MSG_NOSIGNAL),
                     (ssize_t)(big - big / 2));
    assert_true(wait_records(&f->in, had + 2));
    pthread_mutex_lock(&f->in.mu);
    assert_int_equal(f->in.bytes - bytes, big + 32 * 1024); /* both, whole */
    assert_int_equal(f->in.bad, 0);
    pthread_mutex_unlock(&f->in.mu);
    raft_net_get_stats(f->nets[1], &after);
    assert_int_equal(after.refused, before.refused);
    free(body);
    close(fd);
    raft_net_leave(f->nets[1], 7);
}

/* Connections without a hello hold a thread and a slot each until the
 * hello's time: one address gets eight, the next is closed at once, and
 * the nodes' connections go on. */
static void test_a_stranger_holds_a_few_slots_only(void **state)
{
    fixture *f = *state;
    join_group_7(f);
    int fds[9];
    for (int k = 0; k < 9; k++)
        fds[k] = dial_as(f, 1, 4, NULL); /* from 127.0.0.5; the hello is never sent */
    for (int k = 0; k < 9; k++)
        assert_true(fds[k] >= 0);
    /* the hello's time is a minute here: only the bound closes the ninth */
    assert_true(tl_closed_by_server(fds[8], 20000));
    raft_net_stats st;
    raft_net_get_stats(f->nets[1], &st);
    assert_true(st.refused >= 1);
    assert_true(send_until_received(f, 0, 1, 7, 100));
    assert_false(tl_closed_by_server(fds[0], 100));
    for (int k = 0; k < 9; k++)
        close(fds[k]);
    raft_net_leave(f->nets[1], 7);
}

/* A hello sent a byte at a time is cut at the hello's time in all, not
 * kept open by each byte (the slots are few). */
static void test_a_trickled_hello_is_cut(void **state)
{
    fixture *f = *state;
    join_group_7(f);
    int fd = dial_as(f, 1, 4, NULL);
    assert_true(fd >= 0);
    char claim[61];
    memset(claim, '1', 60);
    claim[60] = '\0';
    rw_buf hello = {0};
    rw_enc_net_hello(&hello, RAFT_NET_MESSAGES, 0, claim); /* 76 bytes */
    assert_false(hello.failed);
    bool closed = false;
    int k = 0;
    for (; k < (int)hello.len && !closed; k++) { /* a byte every 300 ms: 23 s in all */
        closed = send(fd, hello.data + k, 1, MSG_NOSIGNAL) != 1 || tl_closed_by_server(fd, 300);
    }
    assert_true(closed);
    assert_true(k < (int)hello.len / 2); /* the hello's time is 1.5 s here */
    rw_buf_free(&hello);
    close(fd);
    raft_net_leave(f->nets[1], 7);
}

/* Net 1 in group 7 with a record from net 0 in, then dialed as net 2 and
 * sent the header of a body of len bytes (a body then trickled). */
static int dial_as_2_with_header(fixture *f, uint64_t len)
{
    join_group_7(f);
    assert_true(send_until_received(f, 0, 1, 7, 100));
    int fd = dial_as(f, 1, 2, f->addr[2]);
    assert_true(fd >= 0);
    assert_int_equal(send_header(fd, len), 0);
    return fd;
}

/* A record's body sent a byte at a time is cut once the slowest rate a
 * node may send at is past: the room it took among the records being
 * read comes back, and another node's record, which waited for it, comes
 * in. */
static void test_a_trickled_record_is_cut(void **state)
{
    fixture *f = *state;
    int fd = dial_as_2_with_header(f, 60 * 1024); /* of the 64 KiB being read */
    time_sleep_ms(100);
    unsigned had = records(&f->in);
    assert_int_equal(send_pattern(f, 0, 1, 7, 32 * 1024), 0);
    bool in = false;
    for (int k = 0; k < 60 && !in; k++) { /* a byte every 300 ms, 18 s at most */
        (void)send(fd, "x", 1, MSG_NOSIGNAL);
        time_sleep_ms(300);
        in = records(&f->in) > had;
    }
    assert_true(in);
    assert_true(tl_closed_by_server(fd, 10000));
    close(fd);
    raft_net_leave(f->nets[1], 7);
}

/* A body short enough to be read ahead with its header (DESIGN §6.5
 * step 5) comes by its deadline too: trickled a byte at a time, each
 * within the idle limit, the connection is cut at about that limit. */
static void test_a_trickled_short_record_is_cut(void **state)
{
    fixture *f = *state;
    int fd = dial_as_2_with_header(f, 8 * 1024); /* below the 16 KiB read ahead */
    bool cut = false;
    for (int k = 0; k < 20 && !cut; k++) /* a byte every 300 ms: 6 s, four times the limit */
        cut = send(fd, "x", 1, MSG_NOSIGNAL) != 1 || tl_closed_by_server(fd, 300);
    assert_true(cut);
    close(fd);
    raft_net_leave(f->nets[1], 7);
}

/* Many records queued at once (here while the writer dials) go out in
 * runs, many to a system call (DESIGN §6.5 step 5), past the 64 records
 * a run holds and the socket's buffer, so runs are cut and sent in
 * parts: every record arrives, whole, in the order sent, and the sender
 * counts each one. */
static void test_many_records_go_in_runs_whole_and_in_order(void **state)
{
    fixture *f = *state;
    enum { N = 600 };
    join_group_7(f);
    pthread_mutex_lock(&f->in.mu);
    f->in.track = true;
    pthread_mutex_unlock(&f->in.mu);
    for (size_t i = 0; i < N; i++) /* 2 bytes to 17 KiB, 5 MiB in all */
        assert_int_equal(send_pattern(f, 0, 1, 7, 2 + i * 29), 0);
    assert_true(wait_records(&f->in, N));
    pthread_mutex_lock(&f->in.mu);
    assert_int_equal(f->in.tracked, N);
    assert_int_equal(f->in.out_of_order, 0);
    assert_int_equal(f->in.bad, 0);
    pthread_mutex_unlock(&f->in.mu);
    raft_net_stats st;
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    raft_net_get_stats(f->nets[0], &st);
    while (st.sent < N && time_mono_ms() < deadline) { /* counted once its send returned */
        time_sleep_ms(5);
        raft_net_get_stats(f->nets[0], &st);
    }
    assert_int_equal(st.sent, N);
    raft_net_leave(f->nets[1], 7);
}

/* An image being read (here trickled by a stranger as net 2) holds the
 * images lane's room only: a message from net 0 comes in meanwhile. */
static void test_an_image_being_read_holds_up_no_message(void **state)
{
    fixture *f = *state;
    join_group_7(f);
    assert_true(send_until_received(f, 0, 1, 7, 100));
    int fd = dial_lane(f, 1, 2, f->addr[2], RAFT_NET_IMAGES);
    assert_true(fd >= 0);
    assert_int_equal(send_header(fd, 2 << 20), 0); /* past the 64 KiB being read */
    assert_int_equal(send(fd, "xxxx", 4, MSG_NOSIGNAL), 4);
    time_sleep_ms(200);
    unsigned had = records(&f->in);
    assert_int_equal(send_pattern(f, 0, 1, 7, 100), 0);
    assert_true(wait_records(&f->in, had + 1));
    /* the image is still being read (its deadline is the idle limit,
     * 20 s here, and more): the message did not wait for it */
    assert_false(tl_closed_by_server(fd, 1));
    close(fd);
    raft_net_leave(f->nets[1], 7);
}

static int setup_long_idle(void **state)
{
    return start_nets(state, &(raft_net_config){.max_reading_bytes = 64 * 1024,
                                                 .max_image_bytes = 4 << 20,
                                                 .idle_ms = 20000});
}

static int setup_big_queue(void **state)
{
    return start_nets(state, &(raft_net_config){.max_queue_bytes = 64 << 20,
                                                 .max_record_bytes = 1 << 20,
                                                 .max_reading_bytes = 64 << 20,
                                                 .idle_ms = 5000});
}

static int setup_short_hello(void **state)
{
    return start_nets(state, &(raft_net_config){.idle_ms = 1500, .hello_ms = 1500});
}

/* Nets 0 and 1 of realm 11, net 2 of realm 12. */
static int setup_two_realms(void **state)
{
    return start_nets_realms(state, &(raft_net_config){.idle_ms = 1500, .realm = 11}, 12);
}

/* Nodes of another realm (the service: another region seed) never
 * exchange a record, either way, though a group names them; a node of
 * the same realm does. */
static void test_a_node_of_another_realm_is_refused(void **state)
{
    fixture *f = *state;
    join_group_7(f);
    const char *nodes[] = {f->addr[0], f->addr[1], f->addr[2]};
    assert_int_equal(raft_net_join(f->nets[2], 7, nodes, 3, deliver, &f->in), 0);
    for (int k = 0; k < 5; k++) {
        (void)send_pattern(f, 2, 1, 7, 100); /* 12 to 11 */
        (void)send_pattern(f, 1, 2, 7, 100); /* 11 to 12 */
        time_sleep_ms(100);
    }
    assert_true(stats_of(f, 1).other_realm >= 1);
    assert_true(stats_of(f, 2).other_realm >= 1);
    assert_int_equal(stats_of(f, 1).received + stats_of(f, 2).received, 0);
    assert_int_equal(records(&f->in), 0);
    assert_true(send_until_received(f, 0, 1, 7, 100)); /* 11 to 11 */
    assert_int_equal(stats_of(f, 0).other_realm, 0);
    /* A hello of the first version (no realm) from net 0's host: refused
     * as another release's, and said so. */
    uint8_t v1[8 + 64] = {'p', 'c', 'R', 'N', 1, 0, (uint8_t)strlen(f->addr[0]), 0};
    memcpy(v1 + 8, f->addr[0], strlen(f->addr[0]));
    int fd = dial_as(f, 1, 0, NULL);
    assert_true(fd >= 0);
    assert_int_equal(send(fd, v1, 8 + strlen(f->addr[0]), MSG_NOSIGNAL),
                     (ssize_t)(8 + strlen(f->addr[0])));
    assert_true(tl_closed_by_server(fd, 5000));
    close(fd);
    assert_int_equal(stats_of(f, 1).other_version, 1);
    raft_net_leave(f->nets[2], 7);
    raft_net_leave(f->nets[1], 7);
}

typedef struct {
    fixture *f;
    atomic_bool done;
    bool delivery_had_returned;
} leaver;

static void *leave_7(void *arg)
{
    leaver *l = arg;
    raft_net_leave(l->f->nets[1], 7);
    pthread_mutex_lock(&l->f->in.mu);
    l->delivery_had_returned = l->f->in.returned;
    pthread_mutex_unlock(&l->f->in.mu);
    atomic_store(&l->done, true);
    return NULL;
}

static void test_a_delivery_holds_its_group_only(void **state)
{
    fixture *f = *state;
    join_group_7(f);
    f->in.block = true;
    assert_int_equal(send_pattern(f, 0, 1, 7, 100), 0);
    pthread_mutex_lock(&f->in.mu);
    assert_true(wait_entered(&f->in));
    pthread_mutex_unlock(&f->in.mu);

    /* While group 7's delivery runs, group 9 joins and leaves (under the
     * groups' lock, the delivery would hold them until it gave up). */
    const char *nodes[] = {f->addr[0]};
    assert_int_equal(raft_net_join(f->nets[1], 9, nodes, 1, deliver, &f->in), 0);
    raft_net_leave(f->nets[1], 9);
    pthread_mutex_lock(&f->in.mu);
    assert_false(f->in.returned); /* they did not wait for it to give up */
    pthread_mutex_unlock(&f->in.mu);

    /* A leave of group 7 waits for its delivery. */
    leaver l = {.f = f};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, leave_7, &l), 0);
    time_sleep_ms(200);
    assert_false(atomic_load(&l.done));
    pthread_mutex_lock(&f->in.mu);
    f->in.released = true;
    pthread_mutex_unlock(&f->in.mu);
    pthread_join(t, NULL);
    assert_true(l.delivery_had_returned);
    pthread_mutex_lock(&f->in.mu);
    assert_false(f->in.waited_out);
    pthread_mutex_unlock(&f->in.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_record_longer_than_the_queue_goes_alone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_images_go_apart_from_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_node_no_group_names_is_let_go, setup, teardown),
        cmocka_unit_test_setup_teardown(test_only_nodes_a_group_names_are_read, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_keepalives_hold_a_quiet_connection_and_a_newer_one_replaces_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_reader_waits_for_room_instead_of_closing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_delivery_holds_its_group_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_stranger_holds_a_few_slots_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_trickled_hello_is_cut, setup_short_hello,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_trickled_record_is_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_node_of_another_realm_is_refused,
                                        setup_two_realms, teardown),
        cmocka_unit_test_setup_teardown(test_a_trickled_short_record_is_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_records_go_in_runs_whole_and_in_order,
                                        setup_big_queue, teardown),
        cmocka_unit_test_setup_teardown(test_an_image_being_read_holds_up_no_message,
                                        setup_long_idle, teardown),
    };
    if (getenv("PERCOLATOR_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("PERCOLATOR_TEST_ONLY"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
