/*
 * test_engine_latch.c — latches (engine/latch.c, latch_session.c; DESIGN
 * §4.10):
 *
 *  - the table: threads taking overlapping sets of keys (some twice in a
 *    set) never hold one key at once and never deadlock; waiters on a slot
 *    are served in the order they came; a set can be released by another
 *    thread than the one that took it;
 *  - the actions: each writing action holds exactly its keys' latches
 *    when it returns; given no batch it is refused, latching and writing
 *    nothing (only the applier writes to the store); an action on keys
 *    its session does not hold is refused; ending propose mode releases
 *    the latches the caller did not take; a proposal on a key whose
 *    latches another proposal holds waits until that one's batch is
 *    applied, and then reads it;
 *  - what goes with them: a key given twice to prewrite or one_pc is
 *    refused, and one_pc proposes no marker in the lock table.
 */
#include "engine_fixture.h"
#include "engine_replica.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#define THREADS 4
#define ROUNDS 3000    /* lock rounds per thread */
#define NKEYS 16
#define WATCHDOG_S 120 /* a deadlock ends the program (SIGALRM) */

static const char *const KEYS[NKEYS] = {"k0", "k1", "k2",  "k3",  "k4",  "k5",  "k6",  "k7",
                                        "k8", "k9", "k10", "k11", "k12", "k13", "k14", "k15"};

/* ---- the table, under contention ---- */

typedef struct {
    pc_latch_table *t;
    atomic_int busy[NKEYS];     /* 1 while some thread holds the key */
    unsigned long count[NKEYS]; /* changed only under the key's latch */
    atomic_ulong overlaps;      /* a key found busy by its latch's holder */
} shared;

typedef struct {
    shared *sh;
    uint64_t rng;
    unsigned long taken[NKEYS]; /* what this thread added to count[] */
} worker;

static uint64_t rnd(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void *contend(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    for (unsigned r = 0; r < ROUNDS; r++) {
        /* 1..4 keys, in any order, a key possibly twice. */
        unsigned n = 1 + (unsigned)(rnd(&w->rng) % 4), k[4];
        bool in[NKEYS] = {false};
        pc_latch_set set;
        pc_latch_set_clear(&set);
        for (unsigned i = 0; i < n; i++) {
            k[i] = (unsigned)(rnd(&w->rng) % NKEYS);
            pc_latch_set_add(&set, KEYS[k[i]], strlen(KEYS[k[i]]));
            in[k[i]] = true;
        }
        if (r % 2 == 0) {
            pc_latch_lock(sh->t, &set);
        } else {
            while (!pc_latch_trylock(sh->t, &set))
                sched_yield();
        }
        for (unsigned i = 0; i < NKEYS; i++)
            if (in[i] && atomic_exchange(&sh->busy[i], 1) != 0)
                atomic_fetch_add(&sh->overlaps, 1);
        for (unsigned i = 0; i < NKEYS; i++) {
            if (in[i]) {
                unsigned long v = sh->count[i];
                if (r % 8 == 0)
                    sched_yield(); /* let another thread try to get in */
                sh->count[i] = v + 1;
                w->taken[i]++;
            }
        }
        for (unsigned i = 0; i < NKEYS; i++)
            if (in[i])
                atomic_store(&sh->busy[i], 0);
        pc_latch_unlock(sh->t, &set);
    }
    return NULL;
}

/* Mutual exclusion per key (a flag and a plain counter per key), and no
 * deadlock (the watchdog), with sets taken waiting and trying. */
static void contending_threads_hold_no_key_at_once(void **state)
{
    (void)state;
    shared *sh = calloc(1, sizeof(*sh));
    worker w[THREADS];
    pthread_t th[THREADS];
    assert_non_null(sh);
    assert_int_equal(pc_latch_table_new(&sh->t), PC_OK);
    for (unsigned i = 0; i < THREADS; i++) {
        w[i] = (worker){.sh = sh, .rng = 1000 + i};
        assert_int_equal(pthread_create(&th[i], NULL, contend, &w[i]), 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(atomic_load(&sh->overlaps), 0);
    unsigned long total = 0;
    for (unsigned k = 0; k < NKEYS; k++) {
        unsigned long want = 0;
        for (unsigned i = 0; i < THREADS; i++)
            want += w[i].taken[k];
        assert_int_equal(sh->count[k], want); /* no lost update */
        total += want;
    }
    assert_true(total >= THREADS * ROUNDS); /* every round took at least one key */
    assert_int_equal(pc_latch_waiting(sh->t), 0);
    pc_latch_table_free(sh->t);
    free(sh);
}

/* ---- fairness, and release from another thread ---- */

typedef struct {
    pc_latch_table *t;
    const pc_latch_set *set;
    atomic_int *order; /* the next place in line */
    int place;         /* where this one got the latch */
    uint64_t waited;   /* what pc_latch_lock said it waited (ns) */
} waiter;

static void *wait_then_note(void *arg)
{
    waiter *w = arg;
    w->waited = pc_latch_lock(w->t, w->set);
    w->place = atomic_fetch_add(w->order, 1);
    pc_latch_unlock(w->t, w->set);
    return NULL;
}

/* Wait until n acquirers wait on the table; fail if they never do (a
 * bound for a broken build, not a measure of speed). */
static void until_waiting(pc_latch_table *t, size_t n)
{
    struct timespec ms = {0, 1000000};
    for (unsigned i = 0; pc_latch_waiting(t) < n; i++) {
        if (i == 30000)
            fail_msg("%zu waiters expected, %zu after 30 s", n, pc_latch_waiting(t));
        nanosleep(&ms, NULL);
    }
}

static void waiters_are_served_in_arrival_order(void **state)
{
    (void)state;
    pc_latch_table *t;
    pc_latch_set set;
    atomic_int order = 0;
    waiter w[3];
    pthread_t th[3];
    assert_int_equal(pc_latch_table_new(&t), PC_OK);
    pc_latch_set_clear(&set);
    pc_latch_set_add(&set, "hot", 3);
    assert_int_equal(pc_latch_lock(t, &set), 0); /* free: no wait to tell of */
    assert_false(pc_latch_trylock(t, &set));
    /* Three waiters, each started once the one before waits. */
    for (size_t i = 0; i < 3; i++) {
        w[i] = (waiter){t, &set, &order, -1, 0};
        assert_int_equal(pthread_create(&th[i], NULL, wait_then_note, &w[i]), 0);
        until_waiting(t, i + 1);
    }
    pc_latch_unlock(t, &set);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].place, (int)i);
        assert_true(w[i].waited > 0); /* each waited: the engine tells latch_waited */
    }
    assert_true(pc_latch_trylock(t, &set));
    pc_latch_unlock(t, &set);
    pc_latch_table_free(t);
}

static void *release_latches(void *arg)
{
    pc_latches_release(arg);
    return NULL;
}

static void a_session_latches_can_be_released_by_another_thread(void **state)
{
    fx *f = *state;
    pc_session *other;
    pthread_t th;
    pc_slice ab[2] = {S("a"), S("b")}, b = S("b");
    assert_int_equal(pc_session_open(f->e, &other), PC_OK);
    assert_int_equal(pc_session_latch(f->s, ab, 2), PC_OK);
    assert_int_equal(pc_session_try_latch(other, &b, 1), PC_LOCKED);
    pc_latches *held = pc_session_take_latches(f->s);
    assert_non_null(held);
    assert_null(pc_session_take_latches(f->s));
    assert_int_equal(pthread_create(&th, NULL, release_latches, held), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(pc_session_try_latch(other, &b, 1), PC_OK);
    /* A session closed with latches gives them back. */
    pc_session_close(other);
    assert_int_equal(pc_session_try_latch(f->s, ab, 2), PC_OK);
    pc_session_release_latches(f->s);
}

/* ---- which keys the actions latch ---- */

static int no_owner_alive(void *arg, const void *owner, size_t len)
{
    (void)arg;
    (void)owner;
    (void)len;
    return 0;
}

static int ts_fixed(void *arg, uint64_t *ts)
{
    *ts = *(const uint64_t *)arg;
    return 0;
}

static int ts_range(void *arg, size_t count, uint64_t *first)
{
    (void)count;
    *first = *(const uint64_t *)arg;
    return 0;
}

/* Each case runs one action on s; keys: the keys it must latch. */
typedef struct {
    const char *name;
    pc_rc (*run)(pc_session *s);
    const char *keys[2];
} latch_case;

static pc_rc do_prewrite(pc_session *s)
{
    pc_txn_meta t = fx_meta(100, "p1");
    pc_mutation m[2] = {PUT("p1", "v"), PUT("p2", "v")};
    return pc_prewrite(s, &t, m, 2, NULL);
}

static pc_rc do_commit(pc_session *s)
{
    pc_slice k = S("c1");
    return pc_commit(s, &k, 1, 10, 11);
}

static pc_rc do_commit_primary(pc_session *s)
{
    return pc_commit_primary(s, S("c1"), 10, 11);
}

static pc_rc do_rollback(pc_session *s)
{
    pc_slice k[2] = {S("r1"), S("r2")};
    return pc_rollback(s, k, 2, 20);
}

static pc_rc do_status(pc_session *s)
{
    pc_liveness live = {.now_ms = pc_now_ms(), .owner_alive = no_owner_alive};
    pc_txn_status st;
    return pc_check_txn_status(s, S("c1"), 10, &live, &st);
}

static pc_rc do_heartbeat(pc_session *s)
{
    return pc_heartbeat(s, S("c1"), 10, pc_now_ms(), 5000);
}

static pc_rc do_one_pc(pc_session *s)
{
    static const uint64_t cts = 31;
    pc_txn_meta t = fx_meta(30, "o1");
    pc_mutation m[2] = {PUT("o1", "v"), DEL("o2")};
    uint64_t got;
    return pc_one_pc(s, &t, m, 2, ts_fixed, (void *)&cts, &got, NULL);
}

static pc_rc do_one_pc_blind(pc_session *s)
{
    static const uint64_t first = 40;
    pc_mutation m1 = PUT("b1", "v"), m2 = PUT("b2", "v");
    pc_blind_write w1 = {.m = &m1, .n = 1}, w2 = {.m = &m2, .n = 1};
    pc_blind_write *w[2] = {&w1, &w2};
    pc_one_pc_blind(s, w, 2, ts_range, (void *)&first);
    pc_one_pc_blind_durable(s, w, 2);
    return w1.rc != PC_OK ? w1.rc : w2.rc;
}

static pc_rc do_notify_clear(pc_session *s)
{
    return pc_notify_clear(s, S("n1"), 50);
}

/* A reader met the lock of txn 60 on s2; its primary (check_txn_status,
 * another action, with a latch of its own) said rolled back. */
static pc_rc do_resolve_lock(pc_session *s)
{
    return pc_resolve_lock(s, S("s2"), 60, 0);
}

static const latch_case CASES[] = {
    {"prewrite", do_prewrite, {"p1", "p2"}},
    {"commit", do_commit, {"c1", NULL}},
    {"commit_primary", do_commit_primary, {"c1", NULL}},
    {"rollback", do_rollback, {"r1", "r2"}},
    {"check_txn_status", do_status, {"c1", NULL}},
    {"heartbeat", do_heartbeat, {"c1", NULL}},
    {"one_pc", do_one_pc, {"o1", "o2"}},
    {"one_pc_blind", do_one_pc_blind, {"b1", "b2"}},
    {"notify_clear", do_notify_clear, {"n1", NULL}},
    {"resolve_lock", do_resolve_lock, {"s2", NULL}},
};

/* A key whose slot none of the case's keys share. */
static pc_slice other_key(const latch_case *c)
{
    static const char *const spare[] = {"zz0", "zz1", "zz2", "zz3"};
    pc_latch_set theirs, mine;
    pc_latch_set_clear(&theirs);
    for (size_t k = 0; k < 2 && c->keys[k]; k++)
        pc_latch_set_add(&theirs, c->keys[k], strlen(c->keys[k]));
    for (size_t i = 0; i < 4; i++) {
        pc_latch_set_clear(&mine);
        pc_latch_set_add(&mine, spare[i], strlen(spare[i]));
        if (!pc_latch_set_covers(&theirs, &mine))
            return S(spare[i]);
    }
    fail_msg("no spare key");
    return S("");
}

static void each_action_latches_its_keys_and_needs_a_batch(void **state)
{
    fx *f = *state;
    static char before[4096], after[4096];
    pc_session *other;
    pc_buf batch = {0};
    fx_put_committed(f, "c1", "v", 10, 11); /* for the actions on txn 10 */
    assert_int_equal(pc_session_open(f->e, &other), PC_OK);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const latch_case *c = &CASES[i];
        print_message("%s\n", c->name);
        batch.len = 0;
        pc_session_propose(f->s, &batch);
        pc_rc rc = c->run(f->s);
        pc_latches *held = pc_session_take_latches(f->s);
        pc_session_propose(f->s, NULL);
        assert_true(rc != PC_INVALID && rc != PC_ERROR);
        assert_non_null(held);
        for (size_t k = 0; k < 2 && c->keys[k]; k++) {
            pc_slice key = S(c->keys[k]);
            assert_int_equal(pc_session_try_latch(other, &key, 1), PC_LOCKED);
        }
        pc_slice free_key = other_key(c);
        assert_int_equal(pc_session_try_latch(other, &free_key, 1), PC_OK);
        pc_session_release_latches(other);
        pc_latches_release(held);
        /* Given no batch, the action is refused before it reads: it
         * latches nothing and writes nothing (only the applier writes). */
        fx_dump(f, "lock", before, sizeof before);
        assert_int_equal(c->run(f->s), PC_INVALID);
        assert_null(pc_session_take_latches(f->s));
        fx_dump(f, "lock", after, sizeof after);
        assert_string_equal(before, after);
    }
    pc_session_close(other);
    pc_buf_free(&batch);
}

static void an_action_outside_the_sessions_latches_is_refused(void **state)
{
    fx *f = *state;
    pc_buf batch = {0};
    pc_txn_meta t = fx_meta(5, "a");
    pc_mutation a = PUT("a", "1"), b = PUT("b", "2");
    pc_slice ab[2] = {S("a"), S("b")};
    assert_true(fx_latch_apart("a", "b"));
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_prewrite(f->s, &t, &a, 1, NULL), PC_OK);
    size_t len = batch.len;
    /* b after a, with a's latches held: taking b now could wait in a cycle. */
    assert_int_equal(pc_prewrite(f->s, &t, &b, 1, NULL), PC_INVALID);
    assert_int_equal(batch.len, len);
    pc_session_release_latches(f->s);
    /* Both latched first: both prewrites join one batch. */
    batch.len = 0;
    assert_int_equal(pc_session_latch(f->s, ab, 2), PC_OK);
    assert_int_equal(pc_prewrite(f->s, &t, &a, 1, NULL), PC_OK);
    assert_int_equal(pc_prewrite(f->s, &t, &b, 1, NULL), PC_OK);
    pc_session_propose(f->s, NULL);
    assert_int_equal(fx_apply_next(f->s, batch.data, batch.len), PC_OK);
    assert_table(f, "lock", "a@5 primary=a put short=1\nb@5 primary=a put short=2\n");
    pc_buf_free(&batch);
}

/* A try adds to the set a session holds (never waiting, it cannot wait
 * in a cycle): the write committer gathers a round's writes so, putting
 * off one whose key another holds; a failed try leaves the set as it was. */
static void a_try_adds_to_the_held_set_or_takes_nothing(void **state)
{
    fx *f = *state;
    pc_session *other;
    pc_slice ka = S("a"), kb = S("b"), kc = S("c"), bc[2] = {S("b"), S("c")};
    assert_int_equal(pc_session_open(f->e, &other), PC_OK);
    assert_int_equal(pc_session_try_latch(other, &kc, 1), PC_OK);
    assert_int_equal(pc_session_try_latch(f->s, &ka, 1), PC_OK);
    assert_int_equal(pc_session_try_latch(f->s, &kb, 1), PC_OK); /* added */
    assert_int_equal(pc_session_try_latch(f->s, bc, 2), PC_LOCKED); /* c is other's */
    pc_session_release_latches(other);
    /* a and b are held by f->s, and only they: c is free. */
    assert_int_equal(pc_session_try_latch(other, &ka, 1), PC_LOCKED);
    assert_int_equal(pc_session_try_latch(other, &kb, 1), PC_LOCKED);
    assert_int_equal(pc_session_try_latch(other, &kc, 1), PC_OK);
    pc_session_release_latches(other);
    pc_latches_release(pc_session_take_latches(f->s));
    assert_int_equal(pc_session_try_latch(other, bc, 2), PC_OK);
    assert_int_equal(pc_session_try_latch(other, &ka, 1), PC_OK);
    pc_session_close(other);
}

/* A caller that keeps its proposals apart itself (one at a time, each
 * applied before the next) takes nothing: ending propose mode releases. */
static void ending_propose_mode_releases_latches_not_taken(void **state)
{
    fx *f = *state;
    pc_session *other;
    pc_buf batch = {0};
    pc_txn_meta t = fx_meta(5, "a");
    pc_mutation a = PUT("a", "1");
    pc_slice ka = S("a");
    assert_int_equal(pc_session_open(f->e, &other), PC_OK);
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_prewrite(f->s, &t, &a, 1, NULL), PC_OK);
    assert_int_equal(pc_session_try_latch(other, &ka, 1), PC_LOCKED);
    pc_session_propose(f->s, NULL);
    assert_null(pc_session_take_latches(f->s));
    assert_int_equal(pc_session_try_latch(other, &ka, 1), PC_OK);
    pc_session_close(other);
    pc_buf_free(&batch);
}

/* ---- a proposal waits for one in flight ---- */

typedef struct {
    pc_engine *e;
    atomic_int done;
    pc_rc rc;
    size_t batch_len;
} second_proposal;

static void *propose_second(void *arg)
{
    second_proposal *p = arg;
    pc_session *s;
    pc_buf batch = {0};
    pc_conflict c;
    pc_txn_meta t = fx_meta(20, "a");
    pc_mutation m = PUT("a", "second");
    if (pc_session_open(p->e, &s) != PC_OK) {
        p->rc = PC_ERROR;
        atomic_store(&p->done, 1);
        return NULL;
    }
    pc_session_propose(s, &batch);
    p->rc = pc_prewrite(s, &t, &m, 1, &c);
    pc_session_propose(s, NULL);
    p->batch_len = batch.len;
    atomic_store(&p->done, 1);
    pc_session_close(s); /* gives its latches back */
    pc_buf_free(&batch);
    return NULL;
}

/* The first prewrite of a is proposed and not yet applied; a second one
 * waits on a's latch, and once the first batch is applied and its latches
 * released, it reads the first one's lock: PC_LOCKED, nothing proposed.
 * Without latches it would read "no lock" and propose a second lock. */
static void a_proposal_waits_until_the_one_in_flight_is_applied(void **state)
{
    fx *f = *state;
    pc_buf first = {0};
    pc_txn_meta t = fx_meta(10, "a");
    pc_mutation m = PUT("a", "first");
    second_proposal p = {.e = f->e};
    pthread_t th;
    pc_session_propose(f->s, &first);
    assert_int_equal(pc_prewrite(f->s, &t, &m, 1, NULL), PC_OK);
    pc_latches *held = pc_session_take_latches(f->s);
    pc_session_propose(f->s, NULL);
    assert_int_equal(pthread_create(&th, NULL, propose_second, &p), 0);
    until_waiting(f->e->latches, 1);
    assert_int_equal(atomic_load(&p.done), 0);
    assert_int_equal(fx_apply_next(f->s, first.data, first.len), PC_OK);
    pc_latches_release(held);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(p.rc, PC_LOCKED);
    assert_int_equal(p.batch_len, 0);
    assert_table(f, "lock", "a@10 primary=a put short=first\n");
    pc_buf_free(&first);
}

/* ---- what goes with latches ---- */

static void a_key_given_twice_is_refused(void **state)
{
    fx *f = *state;
    pc_txn_meta t = fx_meta(5, "a");
    pc_mutation twice[3] = {PUT("b", "1"), PUT("a", "2"), DEL("b")};
    pc_mutation distinct[3] = {PUT("c", "1"), PUT("a", "2"), DEL("b")}; /* not sorted */
    uint64_t cts;
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, twice, 3, NULL)), PC_INVALID);
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &t, twice, 3, fx_ts_fn, f, &cts, NULL)), PC_INVALID);
    pc_mutation adjacent[2] = {PUT("a", "1"), PUT("a", "2")};
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, adjacent, 2, NULL)), PC_INVALID);
    assert_table(f, "lock", "");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, distinct, 3, NULL)), PC_OK);
}

static void one_pc_proposes_no_marker_in_the_lock_table(void **state)
{
    fx *f = *state;
    pc_buf batch = {0};
    pc_txn_meta t = fx_meta(5, "a");
    pc_mutation m[2] = {PUT("a", "1"), PUT("b", "2")};
    static const uint64_t six = 6;
    uint64_t cts;
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_one_pc(f->s, &t, m, 2, ts_fixed, (void *)&six, &cts, NULL), PC_OK);
    pc_session_propose(f->s, NULL);
    pc_session_release_latches(f->s);
    const uint8_t *p = (const uint8_t *)batch.data + PC_BATCH_HEADER,
                  *end = (const uint8_t *)batch.data + batch.len;
    pc_batch_op o;
    unsigned writes = 0;
    while (p < end) {
        assert_true(pc_batch_next(&p, end, &o));
        assert_false(o.op != PC_BATCH_RAISE_TS && o.table == 1); /* the lock table */
        writes += o.op == PC_BATCH_PUT && o.table == 2;
    }
    assert_int_equal(writes, 2);
    pc_buf_free(&batch);
}

int main(void)
{
    alarm(WATCHDOG_S);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(contending_threads_hold_no_key_at_once),
        cmocka_unit_test(waiters_are_served_in_arrival_order),
        cmocka_unit_test_setup_teardown(a_session_latches_can_be_released_by_another_thread,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(each_action_latches_its_keys_and_needs_a_batch,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(an_action_outside_the_sessions_latches_is_refused,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_try_adds_to_the_held_set_or_takes_nothing, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(ending_propose_mode_releases_latches_not_taken, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(a_proposal_waits_until_the_one_in_flight_is_applied,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_key_given_twice_is_refused, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(one_pc_proposes_no_marker_in_the_lock_table, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests_name("engine: latches", tests, NULL, NULL);
}
