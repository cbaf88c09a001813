/*
 * Durable before visible (docs/DESIGN.md §4.4): a commit point whose batch
 * is not yet durable and applied, latches released, is a commit in
 * flight, and no read tells anyone about it. pc_commit_primary hands the
 * primary's entry to its latches; here that state is made by hand with
 * the in-memory table (memlock.c) around an applied commit, so every rule
 * can be checked while it lasts.
 */
#include "engine_fixture.h"
#include "internal.h"

static void a_commit_point_in_flight_is_invisible(void **state)
{
    fx *f = *state;
    char v[32];
    pc_buf lv = {0};
    uint64_t cts;
    pc_conflict c, held;
    pc_txn_status st;
    pc_liveness live = {.now_ms = pc_now_ms()};
    fx_put_committed(f, "a", "a0", 2, 3);
    fx_put_committed(f, "b", "b0", 4, 5);

    /* Transaction 10 writes a (primary) and b; its commit point is
     * applied at 11 and still held as in flight. */
    pc_txn_meta t = fx_meta(10, "a");
    pc_mutation m[2] = {PUT("a", "a1"), PUT("b", "b1")};
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 2, NULL)), PC_OK);
    assert_int_equal(pc_memlock_hold_commit(f->e->memlocks, S("a"), 11), PC_OK);
    pc_slice a = S("a");
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &a, 1, 10, 11)), PC_OK);

    /* The primary: snapshots at or above 11 and the latest read wait. */
    assert_int_equal(fx_get(f, "a", 11, v, sizeof(v)), PC_LOCKED);
    assert_int_equal(fx_get(f, "a", 10, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "a0");
    pc_buf sv = {0};
    assert_int_equal(pc_get(f->s, S("a"), 11, &sv, &cts, &held), PC_LOCKED);
    pc_buf_free(&sv);
    assert_int_equal(held.lock.start_ts, 0);
    assert_int_equal(pc_wait_in_flight(f->s, &held, 0), PC_LOCKED);
    /* The latest read answers the newest durable value, below it. */
    assert_int_equal(fx_get_latest(f->s, S("a"), &live, &lv, &cts, &c), PC_OK);
    assert_memory_equal(lv.data, "a0", 2);
    assert_int_equal(cts, 3);
    /* The secondary: nobody rolls it forward from the commit point yet.
     * Its status reads "locked"; a latest read steps over its lock. */
    assert_int_equal(APPLY(f->s, pc_check_txn_status(f->s, S("a"), 10, &live, &st)), PC_OK);
    assert_int_equal(st.state, PC_TXN_LOCKED);
    assert_int_equal(fx_get_latest(f->s, S("b"), &live, &lv, &cts, &c), PC_OK);
    assert_memory_equal(lv.data, "b0", 2);
    assert_int_equal(fx_get(f, "b", 12, v, sizeof(v)), PC_LOCKED);
    assert_table(f, "lock", "b@10 primary=a put short=b1\n");

    /* Let go: everything shows, the secondary rolls forward. */
    pc_memlock_release_key(f->e->memlocks, S("a"), 11);
    assert_int_equal(pc_wait_in_flight(f->s, &held, 0), PC_OK);
    assert_int_equal(fx_get(f, "a", 11, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "a1");
    assert_int_equal(fx_get_latest(f->s, S("b"), &live, &lv, &cts, &c), PC_OK);
    assert_memory_equal(lv.data, "b1", 2);
    assert_int_equal(cts, 11);
    assert_table(f, "lock", "");
    pc_buf_free(&lv);
}

/* pc_commit_primary lets go of the key once it returns (durable), and
 * holds nothing after a failed commit. */
static void commit_primary_releases_what_it_holds(void **state)
{
    fx *f = *state;
    char v[32];
    pc_txn_meta t = fx_meta(10, "a");
    pc_mutation m = PUT("a", "a1");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit_primary(f->s, S("a"), 10, 11)), PC_OK);
    assert_int_equal(fx_get(f, "a", 11, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "a1");
    /* No lock of 20: nothing committed, nothing held. */
    assert_int_equal(APPLY(f->s, pc_commit_primary(f->s, S("a"), 20, 21)), PC_LOCK_MISSING);
    assert_int_equal(fx_get(f, "a", 25, v, sizeof(v)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit_primary(f->s, S("a"), 20, 20)), PC_INVALID);
}

/* A scan waits for a commit in flight in its range, at or below its ts. */
static void a_scan_waits_for_commits_in_flight_in_its_range(void **state)
{
    fx *f = *state;
    pc_items it = {0};
    pc_conflict c;
    fx_put_committed(f, "a", "1", 2, 3);
    fx_put_committed(f, "m", "1", 4, 5);
    assert_int_equal(pc_memlock_hold_commit(f->e->memlocks, S("m"), 5), PC_OK);
    assert_int_equal(pc_scan(f->s, S("a"), S("z"), 9, 10, &it, &c), PC_LOCKED);
    assert_int_equal(c.lock.key.len, 1);
    assert_memory_equal(c.lock.key.data, "m", 1);
    assert_int_equal(pc_scan(f->s, S("a"), S("m"), 9, 10, &it, &c), PC_OK); /* m not in it */
    assert_int_equal(it.n, 1);
    pc_items_free(&it);
    assert_int_equal(pc_scan(f->s, S("a"), S("z"), 4, 10, &it, &c), PC_OK); /* below 5 */
    pc_items_free(&it);
    pc_memlock_release_key(f->e->memlocks, S("m"), 5);
    assert_int_equal(pc_scan(f->s, S("a"), S("z"), 9, 10, &it, &c), PC_OK);
    assert_int_equal(it.n, 2);
    pc_items_free(&it);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_commit_point_in_flight_is_invisible, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(commit_primary_releases_what_it_holds, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(a_scan_waits_for_commits_in_flight_in_its_range,
                                        fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("engine: commits in flight", tests, NULL, NULL);
}
