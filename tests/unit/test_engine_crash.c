/*
 * Crash points, simulated by abandoning a transaction part-way through its
 * commit (its coordinator "died": its owner is reported dead), then
 * reopening the store. Before the commit point (the primary's commit) the
 * transaction must be rolled back, after it rolled forward — on every key
 * or none — whether a reader meets the locks first or a sweep of the lock
 * table (what the janitor does) resolves them.
 */
#include "engine_fixture.h"

enum { AFTER_PRIMARY_PREWRITE, AFTER_ALL_PREWRITES, AFTER_PRIMARY_COMMIT, AFTER_HALF_SECONDARIES };
#define NKEYS 5 /* k0 is the primary, k1..k4 secondaries */

static int dead_owner(void *arg, const void *owner, size_t len)
{
    (void)arg;
    return !(len == 4 && memcmp(owner, "gone", 4) == 0);
}

static void abandon_at(fx *f, int point)
{
    char names[NKEYS][16];
    pc_mutation m[NKEYS];
    pc_slice keys[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(names[i], sizeof(names[i]), "k%d", i);
        m[i] = PUT(names[i], "new");
        keys[i] = S(names[i]);
    }
    /* Before: every key holds "old". */
    pc_txn_meta t0 = fx_meta(2, "k0");
    pc_mutation old[NKEYS];
    for (int i = 0; i < NKEYS; i++)
        old[i] = PUT(names[i], "old");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t0, old, NKEYS, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, keys, NKEYS, 2, 3)), PC_OK);

    pc_txn_meta t = fx_meta(10, "k0");
    t.owner = S("gone");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m[0], 1, NULL)), PC_OK);
    if (point == AFTER_PRIMARY_PREWRITE)
        return;
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m[1], NKEYS - 1, NULL)), PC_OK);
    if (point == AFTER_ALL_PREWRITES)
        return;
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &keys[0], 1, 10, 11)), PC_OK);
    if (point == AFTER_PRIMARY_COMMIT)
        return;
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &keys[1], (NKEYS - 1) / 2, 10, 11)), PC_OK);
}

/* Read every key at ts 20 as a reader would: resolve a met lock, read again. */
static void read_all(fx *f, const char *expect)
{
    pc_liveness live = {.now_ms = pc_now_ms(), .owner_alive = dead_owner};
    for (int i = 0; i < NKEYS; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", i);
        pc_buf v = {0};
        uint64_t cts;
        pc_conflict c;
        pc_txn_status st;
        pc_rc rc = pc_get(f->s, S(key), 20, &v, &cts, &c);
        if (rc == PC_LOCKED) {
            assert_int_equal(fx_resolve_met_lock(f->s, &c.lock, &live, &st), PC_OK);
            rc = pc_get(f->s, S(key), 20, &v, &cts, &c);
        }
        assert_int_equal(rc, PC_OK);
        assert_int_equal(v.len, strlen(expect));
        assert_memory_equal(v.data, expect, v.len);
        pc_buf_free(&v);
    }
}

/* What the janitor does: take the first lock, ask its primary, resolve the
 * key, until no lock is left. */
static int take_lock(void *arg, const pc_lock_view *l)
{
    pc_lock_copy(arg, l);
    return 1;
}

static void sweep(fx *f)
{
    pc_liveness live = {.now_ms = pc_now_ms(), .owner_alive = dead_owner};
    for (int round = 0; round <= NKEYS; round++) {
        pc_conflict c = {0};
        pc_txn_status st;
        assert_int_equal(pc_lock_scan(f->s, S(""), 1, take_lock, &c), PC_OK);
        if (c.lock.key.len == 0)
            return;
        assert_int_equal(fx_resolve_met_lock(f->s, &c.lock, &live, &st), PC_OK);
        assert_int_not_equal(st.state, PC_TXN_LOCKED);
    }
    fail_msg("locks remain after sweeping");
}

static void check(int point, bool by_reader)
{
    fx *f = fx_new();
    abandon_at(f, point);
    fx_reopen(f); /* the locks outlive the process that wrote them */
    const char *expect = point >= AFTER_PRIMARY_COMMIT ? "new" : "old";
    if (by_reader) {
        read_all(f, expect);
    } else {
        sweep(f);
        assert_table(f, "lock", "");
        read_all(f, expect);
    }
    assert_table(f, "lock", "");
    /* Rolled back: a rollback record on the primary stops a late commit. */
    if (point < AFTER_PRIMARY_COMMIT) {
        pc_slice k0 = S("k0");
        assert_int_equal(APPLY(f->s, pc_commit(f->s, &k0, 1, 10, 11)), PC_ROLLED_BACK);
    }
    fx_free(f);
}

static void after_primary_prewrite_rolls_back(void **s) { (void)s; check(AFTER_PRIMARY_PREWRITE, true); check(AFTER_PRIMARY_PREWRITE, false); }
static void after_all_prewrites_rolls_back(void **s) { (void)s; check(AFTER_ALL_PREWRITES, true); check(AFTER_ALL_PREWRITES, false); }
static void after_primary_commit_rolls_forward(void **s) { (void)s; check(AFTER_PRIMARY_COMMIT, true); check(AFTER_PRIMARY_COMMIT, false); }
static void after_half_the_secondaries_rolls_forward(void **s) { (void)s; check(AFTER_HALF_SECONDARIES, true); check(AFTER_HALF_SECONDARIES, false); }

/* A live owner's lock is not touched: the reader is told to wait. */
static void a_live_owner_is_waited_for(void **state)
{
    (void)state;
    fx *f = fx_new();
    abandon_at(f, AFTER_ALL_PREWRITES);
    pc_liveness live = {.now_ms = pc_now_ms()}; /* everyone alive, TTL 60 s */
    pc_buf v = {0};
    uint64_t cts;
    pc_conflict c;
    pc_txn_status st;
    assert_int_equal(pc_get(f->s, S("k3"), 20, &v, &cts, &c), PC_LOCKED);
    assert_int_equal(fx_resolve_met_lock(f->s, &c.lock, &live, &st), PC_LOCKED);
    assert_int_equal(st.state, PC_TXN_LOCKED);
    assert_int_equal(pc_get(f->s, S("k3"), 20, &v, &cts, &c), PC_LOCKED);
    pc_buf_free(&v);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(after_primary_prewrite_rolls_back),
        cmocka_unit_test(after_all_prewrites_rolls_back),
        cmocka_unit_test(after_primary_commit_rolls_forward),
        cmocka_unit_test(after_half_the_secondaries_rolls_forward),
        cmocka_unit_test(a_live_owner_is_waited_for),
    };
    return cmocka_run_group_tests_name("engine: abandoned transactions", tests, NULL, NULL);
}
