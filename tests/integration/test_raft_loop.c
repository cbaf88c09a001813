/*
 * test_raft_loop.c — Raft groups sharing loops (common/raft_loop.h,
 * docs/DESIGN.md §6.5 step 1), in this process: real libraft members
 * (oracle members, oracle/raft_node.h) with their logs in temporary dirs,
 * talking over loopback. Three loops stand for three nodes: member m of
 * every group runs on loop m. One group stopped whole, or one member of a
 * group stopped and started again on its loop, leaves the other groups on
 * the same loops handing out timestamps in order.
 *
 * And the loop itself: jobs posted from several threads run on the loop's
 * thread in each poster's order; a tick removed during a pass by another
 * tick of the pass does not run.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "raft_loop.h"
#include "raft_node.h"
#include "testlib.h"
#include "timeutil.h"

#define LOOPS 3
#define GROUPS 4
#define MEMBERS 3
#define WAIT_MS 60000

typedef struct {
    char *dir;
    raft_loop *loops[LOOPS];
    raft_node *nodes[GROUPS][MEMBERS];
    int ports[GROUPS][MEMBERS];
    char peers[GROUPS][256];
    char dirs[GROUPS][MEMBERS][512]; /* a member keeps its dir's name (raft_host.h) */
    uint64_t last_ts[GROUPS];   /* the last timestamp each group handed out */
} fixture;

/* A socket bound to 127.0.0.1 on a free port, listening; SO_REUSEADDR as
 * the programs' (common/listen_socket.c), or the connections it accepted,
 * in TIME_WAIT, would keep a member started again off its port. */
static int bind_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* Member m of group g on loop m, from its dir (new or not); listen_fd
 * bound already, or 0 to bind its --raft-peers port again. */
static int start_member(fixture *f, int g, int m, int listen_fd)
{
    char *d = f->dirs[g][m], err[256];
    snprintf(d, sizeof f->dirs[g][m], "%s/g%d-m%d", f->dir, g, m + 1);
    raft_node_config cfg = {.id = (unsigned)m + 1, .dir = d, .listen_fd = listen_fd,
                            .heartbeat_ms = 100, .election_ms = 1000, .loop = f->loops[m],
                            .segment_bytes = 1024 * 1024};
    if (raft_node_parse_peers(f->peers[g], NULL, &cfg, err, sizeof err) != 0 ||
        raft_node_start(&cfg, NULL, &f->nodes[g][m], err, sizeof err) != 0) {
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

/* A timestamp from group g's leader within WAIT_MS, above every one it
 * handed out before (checked); which member answered in *who. */
static void group_answers(fixture *f, int g, int *who)
{
    uint64_t deadline = time_mono_ms() + WAIT_MS, ts = 0;
    while (ts == 0 && time_mono_ms() < deadline) {
        for (int m = 0; m < MEMBERS && ts == 0; m++) {
            raft_node_status st;
            if (f->nodes[g][m] == NULL)
                continue;
            raft_node_get_status(f->nodes[g][m], &st);
            if (st.ready_term != 0 && raft_node_timestamps(f->nodes[g][m], 1, 2000, &ts) == RN_OK) {
                if (who != NULL)
                    *who = m;
            } else {
                ts = 0;
            }
        }
        if (ts == 0)
            time_sleep_ms(20);
    }
    if (ts == 0)
        fail_msg("group %d: no leader answered within %d ms", g, WAIT_MS);
    assert_true(ts > f->last_ts[g]);
    f->last_ts[g] = ts;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char err[256];
    if (f == NULL || (f->dir = tl_mkdtemp("raft-loop")) == NULL)
        return -1;
    log_set_level(getenv("TEST_LOG_INFO") ? LOG_INFO : LOG_WARN);
    signal(SIGPIPE, SIG_IGN); /* as the programs do: a closed peer is an error, not an exit */
    for (int i = 0; i < LOOPS; i++)
        if (raft_loop_start(&f->loops[i], err, sizeof err) != 0) {
            fprintf(stderr, "loop %d: %s\n", i, err);
            return -1;
        }
    for (int g = 0; g < GROUPS; g++) {
        int fds[MEMBERS];
        for (int m = 0; m < MEMBERS; m++) {
            if ((fds[m] = bind_loopback(&f->ports[g][m])) < 0)
                return -1;
            size_t at = strlen(f->peers[g]);
            snprintf(f->peers[g] + at, sizeof f->peers[g] - at, "%s%d=127.0.0.1:%d",
                     m ? "," : "", m + 1, f->ports[g][m]);
        }
        for (int m = 0; m < MEMBERS; m++) {
            int rc = start_member(f, g, m, fds[m]);
            close(fds[m]); /* the member listens on a duplicate of its own */
            if (rc != 0)
                return -1;
        }
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int g = 0; g < GROUPS; g++)
        for (int m = 0; m < MEMBERS; m++)
            if (f->nodes[g][m] != NULL)
                stop_member(f, g, m);
    for (int i = 0; i < LOOPS; i++)
        raft_loop_stop(f->loops[i]);
    tl_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void test_groups_on_shared_loops_outlive_each_other(void **state)
{
    fixture *f = *state;
    for (int g = 0; g < GROUPS; g++)
        group_answers(f, g, NULL);

    /* Group 0 stops whole; the others, on the same three loops, go on. */
    for (int m = 0; m < MEMBERS; m++)
        stop_member(f, 0, m);
    for (int g = 1; g < GROUPS; g++)
        group_answers(f, g, NULL);

    /* Group 1's leader stops: the other two elect one of them, on loops
     * that still run groups 2 and 3. */
    int leader = -1;
    group_answers(f, 1, &leader);
    stop_member(f, 1, leader);
    int next = -1;
    group_answers(f, 1, &next);
    assert_int_not_equal(next, leader);
    for (int g = 2; g < GROUPS; g++)
        group_answers(f, g, NULL);

    /* It comes back from its dir on its loop, binding its port again, and
     * the group answers with all three (the two others stopped in turn). */
    assert_int_equal(start_member(f, 1, leader, 0), 0);
    group_answers(f, 1, NULL);
    for (int m = 0; m < MEMBERS; m++)
        if (m != leader) {
            stop_member(f, 1, m);
            group_answers(f, 1, NULL);
            assert_int_equal(start_member(f, 1, m, 0), 0);
            group_answers(f, 1, NULL);
        }
    for (int g = 2; g < GROUPS; g++)
        group_answers(f, g, NULL);
}

/* ---- the loop alone ---- */

#define POSTERS 4
#define POSTS 2000

typedef struct {
    raft_loop *l;
    _Atomic int next[POSTERS];  /* the next job each poster expects to run */
    atomic_int out_of_order, off_thread, ran;
} order_check;

typedef struct {
    order_check *c;
    int poster, seq;
} order_job;

static void run_job(void *arg)
{
    order_job *j = arg;
    order_check *c = j->c;
    if (!raft_loop_on_thread(c->l))
        atomic_fetch_add(&c->off_thread, 1);
    if (atomic_load(&c->next[j->poster]) != j->seq)
        atomic_fetch_add(&c->out_of_order, 1);
    atomic_store(&c->next[j->poster], j->seq + 1);
    atomic_fetch_add(&c->ran, 1);
    free(j);
}

typedef struct {
    order_check *c;
    int poster;
} poster_arg;

static void *poster_main(void *arg)
{
    poster_arg *p = arg;
    for (int i = 0; i < POSTS; i++) {
        order_job *j = malloc(sizeof *j);
        assert_non_null(j);
        *j = (order_job){p->c, p->poster, i};
        assert_int_equal(raft_loop_post(p->c->l, run_job, j), 0);
    }
    return NULL;
}

typedef struct {
    raft_loop *l;
    atomic_int a_runs, b_runs;
    bool removed;
} tick_check;

/* B is registered under its counter's address, A under t. */
static void tick_b(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void tick_a(void *arg)
{
    tick_check *t = arg;
    atomic_fetch_add(&t->a_runs, 1);
    if (!t->removed) {
        raft_loop_tick_remove(t->l, &t->b_runs);
        t->removed = true;
    }
}

static void add_ticks(void *arg)
{
    tick_check *t = arg;
    assert_int_equal(raft_loop_tick_add(t->l, tick_a, t), 0);
    assert_int_equal(raft_loop_tick_add(t->l, tick_b, &t->b_runs), 0);
}

static void remove_a(void *arg)
{
    tick_check *t = arg;
    raft_loop_tick_remove(t->l, t);
}

static void test_posts_run_in_order_on_the_loop_and_ticks_can_leave(void **state)
{
    (void)state;
    raft_loop *l;
    char err[256];
    assert_int_equal(raft_loop_start(&l, err, sizeof err), 0);
    assert_false(raft_loop_on_thread(l));

    order_check c = {.l = l};
    pthread_t th[POSTERS];
    poster_arg args[POSTERS];
    for (int i = 0; i < POSTERS; i++) {
        args[i] = (poster_arg){&c, i};
        assert_int_equal(pthread_create(&th[i], NULL, poster_main, &args[i]), 0);
    }
    for (int i = 0; i < POSTERS; i++)
        pthread_join(th[i], NULL);

    tick_check t = {.l = l};
    assert_int_equal(raft_loop_post(l, add_ticks, &t), 0);
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    while (atomic_load(&t.a_runs) < 5 && time_mono_ms() < deadline)
        time_sleep_ms(10);
    assert_int_equal(raft_loop_post(l, remove_a, &t), 0);
    raft_loop_stop(l); /* runs what was posted, then ends */

    assert_int_equal(atomic_load(&c.ran), POSTERS * POSTS);
    assert_int_equal(atomic_load(&c.out_of_order), 0);
    assert_int_equal(atomic_load(&c.off_thread), 0);
    assert_true(atomic_load(&t.a_runs) >= 5);
    assert_int_equal(atomic_load(&t.b_runs), 0); /* removed by A in the first pass */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_posts_run_in_order_on_the_loop_and_ticks_can_leave),
        cmocka_unit_test_setup_teardown(test_groups_on_shared_loops_outlive_each_other, setup,
                                        teardown),
    };
    if (getenv("PERCOLATOR_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("PERCOLATOR_TEST_ONLY"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
