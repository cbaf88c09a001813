/*
 * test_replicator_local.c — the local replicator (service/replicator_local.c):
 * a single node's log of one, on a real engine. Engine actions run in
 * propose mode as the service runs them (svc_write_begin/svc_write_end),
 * their batches go through the replicator, and what the tests check is
 * what a writer may rely on once it is answered: its writes are applied
 * (a reader sees them), durable (a reopened engine has them), made in
 * submit order, each answered once, and a batch of another term is
 * refused without being applied.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "engine_fixture.h"
#include "engine_replica.h"
#include "replicator.h"

#define THREADS 4
#define PER_THREAD 60

static void storage_failed(const char *what, pc_rc rc)
{
    fprintf(stderr, "local replicator failed: %s (rc %d)\n", what, (int)rc);
    abort();
}

static _Atomic uint64_t next_ts = 1;

static uint64_t ts(void)
{
    return atomic_fetch_add(&next_ts, 1) + 1;
}

/* One key's one-key transaction, both actions in propose mode, each batch
 * proposed through r and answered before the next action reads. NULL, or
 * what went wrong (the workers cannot use cmocka's asserts). */
static const char *put_through(replicator *r, pc_session *ps, const char *key, const char *value)
{
    uint64_t start = ts(), commit = ts();
    pc_txn_meta t = fx_meta(start, key);
    pc_mutation m = PUT(key, value);
    pc_slice k = S(key);
    for (int step = 0; step < 2; step++) {
        pc_buf batch = {0};
        pc_session_propose(ps, &batch);
        pc_rc rc = step == 0 ? pc_prewrite(ps, &t, &m, 1, NULL) : pc_commit(ps, &k, 1, start, commit);
        pc_latches *held = pc_session_take_latches(ps);
        pc_session_propose(ps, NULL);
        rp_rc answer = RP_UNAVAILABLE;
        if (rc == PC_OK && batch.len > 0)
            answer = r->ops->propose(r, batch.data, batch.len, r->ops->ready_term(r), 1000);
        pc_latches_release(held);
        pc_buf_free(&batch);
        if (rc != PC_OK)
            return step == 0 ? "the prewrite failed" : "the commit failed";
        if (answer != RP_OK)
            return "the replicator refused a batch";
    }
    return NULL;
}

/* NULL, or what is wrong with key's value at a fresh timestamp. */
static const char *read_back(pc_session *ps, const char *key, const char *want)
{
    pc_buf v = {0};
    uint64_t cts = 0;
    pc_conflict c;
    pc_rc rc = pc_get(ps, S(key), ts(), &v, &cts, &c);
    bool same = rc == PC_OK && v.len == strlen(want) && memcmp(v.data, want, v.len) == 0;
    pc_buf_free(&v);
    static char why[64];
    snprintf(why, sizeof why, "the read failed: rc %d", (int)rc);
    return rc != PC_OK ? why : same ? NULL : "the read found another value";
}

static void must_put(replicator *r, pc_session *ps, const char *key, const char *value)
{
    const char *why = put_through(r, ps, key, value);
    if (why != NULL)
        fail_msg("%s: %s", key, why);
}

static void must_read(pc_session *ps, const char *key, const char *want)
{
    const char *why = read_back(ps, key, want);
    if (why != NULL)
        fail_msg("%s: %s", key, why);
}

typedef struct {
    fx *f;
    replicator *r;
    int id;
    const char *failed;   /* NULL, or the first thing that went wrong */
    char key[32];
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    pc_session *ps;
    if (pc_session_open(w->f->e, &ps) != PC_OK) {
        w->failed = "no session";
        return NULL;
    }
    for (int i = 0; i < PER_THREAD && w->failed == NULL; i++) {
        char value[32];
        snprintf(w->key, sizeof w->key, "w%d-%d", w->id, i);
        snprintf(value, sizeof value, "v%d", i);
        w->failed = put_through(w->r, ps, w->key, value);
        /* Answered: applied, so this session's next read has it. */
        if (w->failed == NULL)
            w->failed = read_back(ps, w->key, value);
    }
    pc_session_close(ps);
    return NULL;
}

/* Writers on four threads at once: every answered write is applied and,
 * after the engine is reopened, still there; the applied index counts
 * groups (several batches each under load, one at least). */
static void answered_writes_are_applied_and_durable(void **state)
{
    fx *f = *state;
    replicator *r = replicator_local_start(f->e, storage_failed, NULL, NULL);
    assert_non_null(r);
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.f = f, .r = r, .id = i};
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        if (w[i].failed != NULL)
            fail_msg("%s: %s", w[i].key, w[i].failed);
    }
    rp_status st;
    r->ops->status(r, &st);
    uint64_t batches = THREADS * PER_THREAD * 2;
    assert_true(st.applied_index >= 1 && st.applied_index <= batches);
    assert_int_equal(st.ready_term, REPLICATOR_LOCAL_TERM);
    uint64_t applied = st.applied_index;
    replicator_local_stop(r);

    fx_reopen(f);
    uint64_t index = 0;
    assert_int_equal(pc_applied_index(f->s, &index), PC_OK);
    assert_int_equal(index, applied);
    for (int i = 0; i < THREADS; i++)
        for (int j = 0; j < PER_THREAD; j++) {
            char key[32], value[32];
            snprintf(key, sizeof key, "w%d-%d", i, j);
            snprintf(value, sizeof value, "v%d", j);
            must_read(f->s, key, value);
        }
    /* A restarted replicator goes on from the stored index. */
    r = replicator_local_start(f->e, storage_failed, NULL, NULL);
    assert_non_null(r);
    r->ops->status(r, &st);
    assert_int_equal(st.applied_index, applied);
    must_put(r, f->s, "after", "restart");
    r->ops->status(r, &st);
    assert_int_equal(st.applied_index, applied + 2);
    replicator_local_stop(r);
}

/* Submitted batches: each answered once, RP_OK, in submit order; a stop
 * applies and answers what is still queued. */
typedef struct {
    pthread_mutex_t mu;
    int next, out_of_order, answered;
} order;

typedef struct {
    order *o;
    int n;
} ticket;

static void answered(void *arg, rp_rc rc)
{
    ticket *t = arg;
    pthread_mutex_lock(&t->o->mu);
    if (rc != RP_OK || t->n != t->o->next)
        t->o->out_of_order++;
    t->o->next = t->n + 1;
    t->o->answered++;
    pthread_mutex_unlock(&t->o->mu);
}

static void submitted_batches_are_answered_in_order(void **state)
{
    fx *f = *state;
    replicator *r = replicator_local_start(f->e, storage_failed, NULL, NULL);
    assert_non_null(r);
    enum { N = 300 };
    static ticket tickets[N];
    order o = {.mu = PTHREAD_MUTEX_INITIALIZER};
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof key, "s%03d", i);
        pc_buf batch = {0};
        pc_txn_meta t = fx_meta(ts(), key);
        pc_mutation m = PUT(key, "v");
        pc_session_propose(f->s, &batch);
        assert_int_equal(pc_prewrite(f->s, &t, &m, 1, NULL), PC_OK);
        pc_session_propose(f->s, NULL); /* keys apart: nothing to hold */
        tickets[i] = (ticket){&o, i};
        assert_int_equal(r->ops->submit(r, batch.data, batch.len, REPLICATOR_LOCAL_TERM,
                                        answered, &tickets[i]),
                         RP_OK);
        pc_buf_free(&batch);
    }
    replicator_local_stop(r); /* at once: applies and answers the queue first */
    assert_int_equal(o.answered, N);
    assert_int_equal(o.out_of_order, 0);
    /* Every prewrite was applied: each key is locked. */
    for (int i = 0; i < N; i += 37) {
        char key[32];
        snprintf(key, sizeof key, "s%03d", i);
        pc_buf v = {0};
        pc_conflict c;
        uint64_t cts;
        assert_int_equal(pc_get(f->s, S(key), ts(), &v, &cts, &c), PC_LOCKED);
        pc_buf_free(&v);
    }
}

/* A batch computed in another term (RP_TERM_NONE: the service was not a
 * ready leader when the action began) is refused and never applied, and
 * its callback never runs. */
static void a_batch_of_another_term_is_refused(void **state)
{
    fx *f = *state;
    replicator *r = replicator_local_start(f->e, storage_failed, NULL, NULL);
    assert_non_null(r);
    pc_buf batch = {0};
    pc_txn_meta t = fx_meta(ts(), "refused");
    pc_mutation m = PUT("refused", "v");
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_prewrite(f->s, &t, &m, 1, NULL), PC_OK);
    pc_session_propose(f->s, NULL);
    order o = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ticket tk = {&o, 0};
    assert_int_equal(r->ops->propose(r, batch.data, batch.len, RP_TERM_NONE, 1000),
                     RP_NOT_LEADER);
    assert_int_equal(r->ops->submit(r, batch.data, batch.len, 2, answered, &tk), RP_NOT_LEADER);
    pc_buf_free(&batch);
    rp_status st;
    r->ops->status(r, &st);
    assert_int_equal(st.applied_index, 0);
    replicator_local_stop(r);
    assert_int_equal(o.answered, 0);
    pc_buf v = {0};
    pc_conflict c;
    uint64_t cts;
    assert_int_equal(pc_get(f->s, S("refused"), ts(), &v, &cts, &c), PC_NOT_FOUND);
    pc_buf_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(answered_writes_are_applied_and_durable, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(submitted_batches_are_answered_in_order, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(a_batch_of_another_term_is_refused, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests_name("local replicator", tests, NULL, NULL);
}
