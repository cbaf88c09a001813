/*
 * test_engine_ts_floor.c — the store's highest timestamp (engine.h,
 * pc_store_max_ts; docs/DESIGN.md §4.8): raised by every kind of write
 * (a lock, a commit, a one-phase commit, a rollback record), kept across a
 * restart and a crash (it commits with the writes it covers), per session
 * slot so that sessions never conflict on it, and found by a scan in a
 * store written before it was kept.
 */
#include "engine_fixture.h"

#include <sys/wait.h>

static void it_follows_every_kind_of_write(void **state)
{
    fx *f = *state;
    assert_int_equal(pc_store_max_ts(f->e), 0);

    pc_txn_meta t = fx_meta(10, "a");
    pc_mutation m = PUT("a", "1");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(pc_store_max_ts(f->e), 10); /* a lock */
    pc_slice a = S("a");
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &a, 1, 10, 12)), PC_OK);
    assert_int_equal(pc_store_max_ts(f->e), 12); /* a write record */

    pc_slice b = S("b");
    assert_int_equal(APPLY(f->s, pc_rollback(f->s, &b, 1, 20)), PC_OK);
    assert_int_equal(pc_store_max_ts(f->e), 20); /* a rollback record */

    f->ts = 29;
    uint64_t cts = 0;
    pc_txn_meta blind = fx_meta(0, "c");
    pc_mutation mc = PUT("c", "3");
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &blind, &mc, 1, fx_ts_fn, f, &cts, NULL)), PC_OK);
    assert_int_equal(cts, 30);
    assert_int_equal(pc_store_max_ts(f->e), 30); /* a one-phase commit */

    /* An older write does not lower it. */
    fx_put_committed(f, "d", "4", 5, 6);
    assert_int_equal(pc_store_max_ts(f->e), 30);

    fx_reopen(f);
    assert_int_equal(pc_store_max_ts(f->e), 30);
}

static void sessions_keep_rows_of_their_own(void **state)
{
    fx *f = *state;
    pc_session *other;
    assert_int_equal(pc_session_open(f->e, &other), PC_OK);
    fx_put_committed(f, "a", "1", 40, 41);
    pc_txn_meta t = fx_meta(50, "b");
    pc_mutation m = PUT("b", "2");
    pc_slice b = S("b");
    assert_int_equal(APPLY(other, pc_prewrite(other, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(APPLY(other, pc_commit(other, &b, 1, 50, 51)), PC_OK);
    /* The first session writes again below the other's maximum: its own
     * row moves, the store's maximum does not. */
    fx_put_committed(f, "c", "3", 44, 45);
    pc_session_close(other);
    assert_int_equal(pc_store_max_ts(f->e), 51);
    fx_reopen(f);
    assert_int_equal(pc_store_max_ts(f->e), 51);
}

/* A child commits and dies with _exit (no close, no checkpoint): recovery
 * from the log brings the maximum back with the write. */
static void it_survives_a_crash(void **state)
{
    fx *f = *state;
    fx_close_engine(f);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pc_engine_config cfg = {.dir = f->dir, .sync = 1, .cache_size = "64MB"};
        pc_engine *e;
        pc_session *s;
        if (pc_engine_open(&cfg, &e) != PC_OK || pc_session_open(e, &s) != PC_OK)
            _exit(2);
        uint64_t cts;
        pc_txn_meta blind = fx_meta(0, "k");
        pc_mutation m = PUT("k", "v");
        if (APPLY(s, pc_one_pc(s, &blind, &m, 1, fx_ts_fn, &(fx){.ts = 76}, &cts, NULL)) != PC_OK)
            _exit(3);
        _exit(cts == 77 ? 0 : 4);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    fx_open_dir(f);
    assert_int_equal(pc_store_max_ts(f->e), 77);
}

/* A store from before the rows: none in meta. The maximum is found by a
 * scan of the write and lock tables. */
static void an_older_store_is_scanned(void **state)
{
    fx *f = *state;
    fx_put_committed(f, "a", "1", 60, 61);
    pc_txn_meta t = fx_meta(70, "b");
    pc_mutation m = PUT("b", "2");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK); /* a lock only */
    /* Remove the rows, as an older engine would have left the store. */
    WT_SESSION *ws = f->s->wt;
    WT_CURSOR *c;
    assert_int_equal(ws->open_cursor(ws, "table:meta", NULL, NULL, &c), 0);
    int ret, removed = 0;
    while ((ret = c->next(c)) == 0) {
        WT_ITEM k;
        assert_int_equal(c->get_key(c, &k), 0);
        if (k.size >= 7 && memcmp(k.data, "ts_max/", 7) == 0) {
            assert_int_equal(c->remove(c), 0);
            removed++;
        }
    }
    assert_int_equal(ret, WT_NOTFOUND);
    assert_int_equal(c->close(c), 0);
    assert_true(removed >= 1);
    fx_reopen(f);
    assert_int_equal(pc_store_max_ts(f->e), 70);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(it_follows_every_kind_of_write, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(sessions_keep_rows_of_their_own, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(it_survives_a_crash, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(an_older_store_is_scanned, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("engine: the store's highest timestamp", tests, NULL, NULL);
}
