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
#include "raft_inproc.h"
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
    int fds[GROUPS][MEMBERS];   /* each member's listening socket, kept for its restarts
                                 * (a member listens on a duplicate): no port to rebind */
    uint64_t last_ts[GROUPS];   /* the last timestamp each group handed out */
} fixture;

/* Member m of group g on loop m, from its dir (new or not). */
static int start_member(fixture *f, int g, int m)
{
    char *d = f->dirs[g][m], err[256];
    snprintf(d, sizeof f->dirs[g][m], "%s/g%d-m%d", f->dir, g, m + 1);
    raft_node_config cfg = {.id = (unsigned)m + 1, .dir = d, .listen_fd = f->fds[g][m],
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

/* A timestamp from group g's leader (tl_inproc_timestamp), above every
 * one it handed out before (checked); its term in *term (or NULL). */
static void group_answers(fixture *f, int g, int *who, uint64_t *term)
{
    uint64_t ts = 0;
    if (tl_inproc_timestamp(f->nodes[g], MEMBERS, &ts, who, term) != 0)
        fail_msg("group %d: no leader answered", g);
    assert_true(ts > f->last_ts[g]);
    f->last_ts[g] = ts;
}

static int teardown(void **state);

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char err[256];
    if (f == NULL)
        return -1;
    memset(f->fds, -1, sizeof f->fds);
    *state = f;
    if ((f->dir = tl_mkdtemp("raft-loop")) == NULL)
        return teardown(state), -1;
    log_set_level(getenv("TEST_LOG_INFO") ? LOG_INFO : LOG_WARN);
    signal(SIGPIPE, SIG_IGN); /* as the programs do: a closed peer is an error, not an exit */
    for (int i = 0; i < LOOPS; i++)
        if (raft_loop_start(&f->loops[i], err, sizeof err) != 0) {
            fprintf(stderr, "loop %d: %s\n", i, err);
            return teardown(state), -1;
        }
    for (int g = 0; g < GROUPS; g++) {
        for (int m = 0; m < MEMBERS; m++) {
            if ((f->fds[g][m] = tl_listen_loopback(0, &f->ports[g][m])) < 0)
                return teardown(state), -1;
            size_t at = strlen(f->peers[g]);
            snprintf(f->peers[g] + at, sizeof f->peers[g] - at, "%s%d=127.0.0.1:%d",
                     m ? "," : "", m + 1, f->ports[g][m]);
        }
        for (int m = 0; m < MEMBERS; m++)
            if (start_member(f, g, m) != 0)
                return teardown(state), -1;
    }
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
    for (int g = 0; g < GROUPS; g++)
        for (int m = 0; m < MEMBERS; m++)
            if (f->fds[g][m] >= 0)
                close(f->fds[g][m]);
    if (f->dir != NULL)
        tl_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void test_groups_on_shared_loops_outlive_each_other(void **state)
{
    fixture *f = *state;
    for (int g = 0; g < GROUPS; g++)
        group_answers(f, g, NULL, NULL);

    /* Group 0 stops whole; the others, on the same three loops, go on. */
    for (int m = 0; m < MEMBERS; m++)
        stop_member(f, 0, m);
    for (int g = 1; g < GROUPS; g++)
        group_answers(f, g, NULL, NULL);

    /* Group 1's leader stops: the other two elect one of them (a new
     * term), on loops that still run groups 2 and 3. */
    uint64_t term = 0, next = 0;
    int leader = -1; /* the member that answered, not one found after the fact */
    group_answers(f, 1, &leader, &term);
    stop_member(f, 1, leader);
    group_answers(f, 1, NULL, &next);
    assert_true(next > term);
    for (int g = 2; g < GROUPS; g++)
        group_answers(f, g, NULL, NULL);

    /* It comes back from its dir on its loop, and the group answers with
     * all three (the two others stopped and started in turn). */
    assert_int_equal(start_member(f, 1, leader), 0);
    group_answers(f, 1, NULL, NULL);
    for (int m = 0; m < MEMBERS; m++)
        if (m != leader) {
            stop_member(f, 1, m);
            group_answers(f, 1, NULL, NULL);
            assert_int_equal(start_member(f, 1, m), 0);
            group_answers(f, 1, NULL, NULL);
        }
    for (int g = 2; g < GROUPS; g++)
        group_answers(f, g, NULL, NULL);
}

/* ---- the loop alone ---- */

#define POSTERS 4
#define POSTS 2000

typedef struct {
    raft_loop *l;
    _Atomic int next[POSTERS];  /* the next job each poster expects to run */
    atomic_int out_of_order, off_thread, ran, post_failed;
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
    for (int i = 0; i < POSTS; i++) { /* no cmocka assert off the test's thread */
        order_job *j = malloc(sizeof *j);
        if (j != NULL)
            *j = (order_job){p->c, p->poster, i};
        if (j == NULL || raft_loop_post(p->c->l, run_job, j) != 0) {
            free(j);
            atomic_fetch_add(&p->c->post_failed, 1);
            return NULL;
        }
    }
    return NULL;
}

typedef struct {
    raft_loop *l;
    atomic_int a_runs, b_runs;
    bool removed;
    _Atomic bool added;
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

static void add_ticks(void *arg) /* on the loop: no cmocka assert */
{
    tick_check *t = arg;
    t->added = raft_loop_tick_add(t->l, tick_a, t) == 0 &&
               raft_loop_tick_add(t->l, tick_b, &t->b_runs) == 0;
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

    /* On the heap: a failed assertion leaves the loop running on them */
    order_check *c = calloc(1, sizeof *c);
    tick_check *t = calloc(1, sizeof *t);
    assert_non_null(c);
    assert_non_null(t);
    c->l = t->l = l;
    pthread_t th[POSTERS];
    poster_arg args[POSTERS];
    for (int i = 0; i < POSTERS; i++) {
        args[i] = (poster_arg){c, i};
        assert_int_equal(pthread_create(&th[i], NULL, poster_main, &args[i]), 0);
    }
    for (int i = 0; i < POSTERS; i++)
        pthread_join(th[i], NULL);

    assert_int_equal(raft_loop_post(l, add_ticks, t), 0);
    uint64_t deadline = time_mono_ms() + WAIT_MS;
    while (atomic_load(&t->a_runs) < 5 && time_mono_ms() < deadline)
        time_sleep_ms(10);
    assert_int_equal(raft_loop_post(l, remove_a, t), 0);
    raft_loop_stop(l); /* runs what was posted, then ends */

    assert_int_equal(atomic_load(&c->post_failed), 0);
    assert_int_equal(atomic_load(&c->ran), POSTERS * POSTS);
    assert_int_equal(atomic_load(&c->out_of_order), 0);
    assert_int_equal(atomic_load(&c->off_thread), 0);
    assert_true(atomic_load(&t->added));
    assert_true(atomic_load(&t->a_runs) >= 5);
    assert_int_equal(atomic_load(&t->b_runs), 0); /* removed by A in the first pass */
    free(c);
    free(t);
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
