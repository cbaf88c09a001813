/*
 * test_engine_propose_in_flight.c — commits in flight in propose mode
 * (docs/DESIGN.md §4.4, §4.10, §9). A proposal is in the store only once
 * its batch is applied, which is after the action returned; several
 * proposals are in flight at once, in any order of their timestamps. So a
 * one-phase commit (blind or not) and a two-phase commit point keep their
 * keys in the table of commits in flight until the caller applied the
 * batch and released the latches, and a snapshot read above the commit
 * waits for it rather than read a store that lacks it:
 *
 *  - one_pc, a blind write and a commit point proposed: a snapshot above
 *    the commit answers "in flight" before the apply, and after it until
 *    the latches are released; then it reads the commit. A snapshot below
 *    it is not held. (Released at the end of the action instead, the read
 *    before the apply finds nothing and answers PC_NOT_FOUND.)
 *  - a latest read in propose mode is a pure read: it proposes and
 *    latches nothing, and hands the lock it met to the caller, which
 *    resolves it in two proposals, each latching only its own key (the
 *    primary's status, then the key: they may be in different Raft
 *    groups), and reads again once both are applied.
 */
#include "engine_fixture.h"
#include "engine_replica.h"
#include "internal.h"

static int fixed_ts(void *arg, uint64_t *ts)
{
    *ts = *(const uint64_t *)arg;
    return 0;
}

static int nobody_alive(void *arg, const void *owner, size_t len)
{
    (void)arg;
    (void)owner;
    (void)len;
    return 0;
}

/* A snapshot read of key at ts on another session: its rc, and for
 * PC_LOCKED whether it is a commit in flight (start 0). */
static pc_rc read_at(pc_session *r, const char *key, uint64_t ts, bool *in_flight)
{
    pc_buf v = {0};
    uint64_t cts;
    pc_conflict c;
    pc_rc rc = pc_get(r, S(key), ts, &v, &cts, &c);
    *in_flight = rc == PC_LOCKED && c.lock.start_ts == 0;
    pc_buf_free(&v);
    return rc;
}

/* The proposal made on f->s is applied (the next index) with its latches still
 * held: the read at ts on r still waits; once they are released it finds
 * the commit. */
static void apply_then_release(fx *f, pc_session *r, pc_buf *batch, const char *key,
                               uint64_t ts)
{
    bool in_flight = false;
    pc_latches *held = pc_session_take_latches(f->s);
    assert_non_null(held);
    pc_session_propose(f->s, NULL);
    assert_int_equal(read_at(r, key, ts, &in_flight), PC_LOCKED);
    assert_true(in_flight);
    assert_int_equal(fx_apply_next(f->s, batch->data, batch->len), PC_OK);
    assert_int_equal(read_at(r, key, ts, &in_flight), PC_LOCKED);
    assert_true(in_flight);
    pc_latches_release(held);
    assert_int_equal(read_at(r, key, ts, &in_flight), PC_OK);
}

static void a_proposed_one_pc_is_in_flight_until_its_latches_go(void **state)
{
    fx *f = *state;
    pc_session *r;
    pc_buf batch = {0};
    pc_txn_meta t = fx_meta(5, "a");
    pc_mutation m[2] = {PUT("a", "1"), PUT("b", "2")};
    static const uint64_t six = 6;
    uint64_t cts = 0;
    bool in_flight;
    assert_int_equal(pc_session_open(f->e, &r), PC_OK);
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_one_pc(f->s, &t, m, 2, fixed_ts, (void *)&six, &cts, NULL), PC_OK);
    assert_int_equal(cts, 6);
    /* Below the commit nothing waits: it cannot be seen there. */
    assert_int_equal(read_at(r, "b", 5, &in_flight), PC_NOT_FOUND);
    apply_then_release(f, r, &batch, "b", 10);
    char v[8];
    assert_int_equal(fx_get(f, "a", 10, v, sizeof v), PC_OK);
    assert_string_equal(v, "1");
    pc_session_close(r);
    pc_buf_free(&batch);
}

static void a_proposed_blind_write_is_in_flight_until_its_latches_go(void **state)
{
    fx *f = *state;
    pc_session *r;
    pc_buf batch = {0};
    pc_txn_meta t = {.start_ts = 0, .primary = S("a")};
    pc_mutation m = PUT("a", "1");
    static const uint64_t seven = 7;
    uint64_t cts = 0;
    assert_int_equal(pc_session_open(f->e, &r), PC_OK);
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_one_pc(f->s, &t, &m, 1, fixed_ts, (void *)&seven, &cts, NULL), PC_OK);
    apply_then_release(f, r, &batch, "a", 7);
    pc_session_close(r);
    pc_buf_free(&batch);
}

static void a_proposed_commit_point_is_in_flight_until_its_latches_go(void **state)
{
    fx *f = *state;
    pc_session *r;
    pc_buf batch = {0};
    pc_txn_meta t = fx_meta(5, "a");
    pc_mutation m = PUT("a", "1");
    assert_int_equal(pc_session_open(f->e, &r), PC_OK);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_commit_primary(f->s, S("a"), 5, 6), PC_OK);
    /* The lock is still in the store (a reader meets it and resolves it,
     * under the latches); the commit point is held as in flight until
     * its batch is applied and the latches go. */
    assert_true(pc_memlock_blocked(f->e->memlocks, S("a"), NULL, true, 6, PC_MEMLOCK_COMMITTED,
                                   NULL));
    pc_latches *held = pc_session_take_latches(f->s);
    pc_session_propose(f->s, NULL);
    assert_int_equal(fx_apply_next(f->s, batch.data, batch.len), PC_OK);
    assert_true(pc_memlock_blocked(f->e->memlocks, S("a"), NULL, true, 6, PC_MEMLOCK_COMMITTED,
                                   NULL));
    pc_latches_release(held);
    assert_false(pc_memlock_blocked(f->e->memlocks, S("a"), NULL, true, 6, PC_MEMLOCK_COMMITTED,
                                    NULL));
    bool in_flight;
    assert_int_equal(read_at(r, "a", 6, &in_flight), PC_OK);
    pc_session_close(r);
    pc_buf_free(&batch);
}

/* How many write records a batch puts. */
static unsigned write_puts(const pc_buf *batch)
{
    const uint8_t *p = (const uint8_t *)batch->data + PC_BATCH_HEADER,
                  *end = (const uint8_t *)batch->data + batch->len;
    pc_batch_op o;
    unsigned n = 0;
    while (p < end) {
        assert_true(pc_batch_next(&p, end, &o));
        n += o.op == PC_BATCH_PUT && o.table == 2;
    }
    return n;
}

/* Whether a latch of key is held by another session. */
static bool latched(fx *f, const char *key)
{
    pc_session *other;
    pc_slice k = S(key);
    assert_int_equal(pc_session_open(f->e, &other), PC_OK);
    pc_rc rc = pc_session_try_latch(other, &k, 1);
    pc_session_close(other);
    return rc == PC_LOCKED;
}

/* Transaction 10 wrote p (primary) and k and committed p at 11; k's lock
 * is left. A latest read of k proposes nothing; the roll-forward is two
 * proposals, the primary's status and then k's resolution. */
static void a_proposed_latest_read_proposes_nothing_and_resolution_is_two_proposals(
    void **state)
{
    fx *f = *state;
    pc_buf batch = {0}, v = {0};
    pc_txn_meta t = fx_meta(10, "p");
    pc_mutation m[2] = {PUT("k", "new"), PUT("p", "x")};
    pc_slice p = S("p");
    pc_liveness live = {.now_ms = pc_now_ms(), .owner_alive = nobody_alive};
    pc_txn_status st;
    pc_conflict c;
    uint64_t cts = 0;
    assert_true(fx_latch_apart("p", "k"));
    fx_put_committed(f, "k", "old", 2, 3);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 2, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &p, 1, 10, 11)), PC_OK);

    /* The read: the lock, and nothing proposed or latched. */
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_get_latest(f->s, S("k"), false, &v, &cts, &c), PC_LOCKED);
    assert_int_equal(c.lock.start_ts, 10);
    assert_null(pc_session_take_latches(f->s));
    pc_session_propose(f->s, NULL);
    assert_int_equal(batch.len, 0);

    /* The primary's status: committed, nothing to write; p latched alone. */
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_check_txn_status(f->s, c.lock.primary, c.lock.start_ts, &live, &st),
                     PC_OK);
    assert_int_equal(st.state, PC_TXN_COMMITTED);
    assert_int_equal(st.commit_ts, 11);
    pc_latches *held = pc_session_take_latches(f->s);
    pc_session_propose(f->s, NULL);
    assert_non_null(held);
    assert_true(latched(f, "p"));
    assert_false(latched(f, "k"));
    assert_int_equal(batch.len, 0);
    pc_latches_release(held);

    /* k's roll-forward: its own proposal, k latched alone until applied. */
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_resolve_lock(f->s, c.lock.key, c.lock.start_ts, st.commit_ts), PC_OK);
    held = pc_session_take_latches(f->s);
    pc_session_propose(f->s, NULL);
    assert_non_null(held);
    assert_true(latched(f, "k"));
    assert_false(latched(f, "p"));
    assert_int_equal(write_puts(&batch), 1);
    /* Not applied yet: the store still has the lock. */
    assert_int_equal(pc_get_latest(f->s, S("k"), false, &v, &cts, &c), PC_LOCKED);
    assert_int_equal(fx_apply_next(f->s, batch.data, batch.len), PC_OK);
    pc_latches_release(held);

    batch.len = 0;
    pc_session_propose(f->s, &batch);
    assert_int_equal(pc_get_latest(f->s, S("k"), false, &v, &cts, &c), PC_OK);
    pc_session_propose(f->s, NULL);
    assert_int_equal(batch.len, 0);
    assert_int_equal(cts, 11);
    assert_memory_equal(v.data, "new", 3);
    assert_table(f, "lock", "");
    pc_buf_free(&v);
    pc_buf_free(&batch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_proposed_one_pc_is_in_flight_until_its_latches_go,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_proposed_blind_write_is_in_flight_until_its_latches_go,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_proposed_commit_point_is_in_flight_until_its_latches_go,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(
            a_proposed_latest_read_proposes_nothing_and_resolution_is_two_proposals, fx_setup,
            fx_teardown),
    };
    return cmocka_run_group_tests_name("engine: commits in flight in propose mode", tests, NULL,
                                       NULL);
}
