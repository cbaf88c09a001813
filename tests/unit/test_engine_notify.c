/*
 * The notify column: every way a write commits under an observed prefix
 * marks the key dirty (commit, one-phase commit, roll-forward of an
 * abandoned lock), a rollback does not; the scan reads only the notify
 * table, wraps around from a random position, and a clear keeps a key
 * that a newer write dirtied again.
 */
#include "engine_fixture.h"

static void commit_one(fx *f, const char *key, uint64_t start, uint64_t commit)
{
    pc_txn_meta t = fx_meta(start, key);
    pc_mutation m = PUT(key, "v");
    pc_slice k = S(key);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &k, 1, start, commit)), PC_OK);
}

static size_t dirty(fx *f, const char *from, pc_items *it)
{
    assert_int_equal(pc_notify_scan(f->s, S("o/"), S("o0"), S(from), 100, it), PC_OK);
    return it->n;
}

static void every_commit_path_marks_observed_keys(void **state)
{
    fx *f = *state;
    pc_slice prefix = S("o/");
    pc_items it = {0};
    uint64_t cts;
    assert_int_equal(pc_notify_set_prefixes(f->e, &prefix, 1), PC_OK);

    commit_one(f, "o/a", 10, 11);  /* two-phase */
    commit_one(f, "x/a", 12, 13);  /* not observed */
    pc_txn_meta t = fx_meta(20, "o/b");
    pc_mutation m = PUT("o/b", "v");
    f->ts = 20;
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &t, &m, 1, fx_ts_fn, f, &cts, NULL)), PC_OK);
    /* An abandoned transaction rolled forward by a cleaner. */
    pc_txn_meta t2 = fx_meta(30, "o/c");
    pc_mutation m2[2] = {PUT("o/c", "v"), PUT("o/d", "v")};
    pc_slice c = S("o/c"), d = S("o/d");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t2, m2, 2, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &c, 1, 30, 31)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_resolve_lock(f->s, d, 30, 31)), PC_OK);
    /* A rolled-back one is no change. */
    pc_txn_meta t3 = fx_meta(40, "o/e");
    pc_mutation m3 = PUT("o/e", "v");
    pc_slice e = S("o/e");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t3, &m3, 1, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_rollback(f->s, &e, 1, 40)), PC_OK);

    assert_int_equal(dirty(f, "", &it), 4);
    const char *want[] = {"o/a", "o/b", "o/c", "o/d"};
    uint64_t ts[] = {11, cts, 31, 31};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(it.items[i].key.len, 3);
        assert_memory_equal(it.items[i].key.data, want[i], 3);
        assert_int_equal(it.items[i].commit_ts, ts[i]);
    }
    /* From the middle: wraps around, each entry once. */
    assert_int_equal(dirty(f, "o/c", &it), 4);
    assert_memory_equal(it.items[0].key.data, "o/c", 3);
    assert_memory_equal(it.items[3].key.data, "o/b", 3);
    pc_items_free(&it);
}

static void a_clear_keeps_keys_dirtied_again(void **state)
{
    fx *f = *state;
    pc_slice prefix = S("o/"), k = S("o/k");
    pc_items it = {0};
    assert_int_equal(pc_notify_set_prefixes(f->e, &prefix, 1), PC_OK);
    commit_one(f, "o/k", 10, 11);
    commit_one(f, "o/k", 12, 13);
    /* Acknowledged up to 11 only: 13 keeps it dirty. */
    assert_int_equal(APPLY(f->s, pc_notify_clear(f->s, k, 11)), PC_OK);
    assert_int_equal(dirty(f, "", &it), 1);
    assert_int_equal(it.items[0].commit_ts, 13);
    assert_int_equal(APPLY(f->s, pc_notify_clear(f->s, k, 13)), PC_OK);
    assert_int_equal(dirty(f, "", &it), 0);
    /* Nothing observed: nothing marked. */
    assert_int_equal(pc_notify_set_prefixes(f->e, NULL, 0), PC_OK);
    commit_one(f, "o/k", 14, 15);
    assert_int_equal(dirty(f, "", &it), 0);
    pc_items_free(&it);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_commit_path_marks_observed_keys, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_clear_keeps_keys_dirtied_again, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("engine: notify", tests, NULL, NULL);
}
