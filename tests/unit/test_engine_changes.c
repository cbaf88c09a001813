/*
 * test_engine_changes.c — what a change feed reads from the engine
 * (engine/changes.c, docs/DESIGN.md §10):
 *
 *  - a write batch's changes are its puts and deletes (rollbacks are not),
 *    with commit_ts and start_ts, a short value inline and a long one read
 *    from the data table;
 *  - a scan of the write table between two timestamps gives every change
 *    of the range once, by commit_ts then key, in pages that never split a
 *    commit, and each page says how far it is whole;
 *  - the resolved timestamp stays below every lock and every commit in
 *    flight, and is upto otherwise.
 */
#include "engine_fixture.h"

typedef struct {
    pc_change v[16];
    char keys[16][32];
    char values[16][400];
    size_t n;
} seen;

static int note(void *arg, const pc_change *c)
{
    seen *s = arg;
    assert_true(s->n < 16);
    snprintf(s->keys[s->n], sizeof s->keys[0], "%.*s", (int)c->key.len, (const char *)c->key.data);
    snprintf(s->values[s->n], sizeof s->values[0], "%.*s", (int)c->value.len,
             c->value.data ? (const char *)c->value.data : "");
    s->v[s->n++] = *c;
    return 0;
}

static void a_batch_tells_its_puts_and_deletes(void **state)
{
    fx *f = *state;
    char long_value[300];
    memset(long_value, 'L', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    uint64_t start = fx_ts(f), commit = fx_ts(f), dead = fx_ts(f);
    pc_txn_meta t = fx_meta(start, "a");
    pc_mutation m[] = {PUT("a", "short"), PUT("b", long_value), DEL("c")};
    pc_slice keys[] = {S("a"), S("b"), S("c")};
    pc_txn_meta t2 = fx_meta(dead, "d");
    pc_mutation m2 = PUT("d", "never");
    pc_slice k2 = S("d");

    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 3, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t2, &m2, 1, NULL)), PC_OK);
    pc_buf batch = {0};
    pc_session_propose(f->s, &batch);
    pc_slice every[] = {S("a"), S("b"), S("c"), S("d")};
    assert_int_equal(pc_session_latch(f->s, every, 4), PC_OK); /* one set for both actions */
    assert_int_equal(pc_commit(f->s, keys, 3, start, commit), PC_OK);
    assert_int_equal(pc_rollback(f->s, &k2, 1, dead), PC_OK);
    pc_session_propose(f->s, NULL);

    seen s = {0};
    assert_int_equal(pc_batch_changes(batch.data, batch.len, note, &s), PC_OK);
    assert_int_equal(s.n, 3); /* the rollback is no change */
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(s.v[i].commit_ts, commit);
        assert_int_equal(s.v[i].start_ts, start);
    }
    assert_string_equal(s.keys[0], "a");
    assert_true(s.v[0].has_value);
    assert_string_equal(s.values[0], "short");
    assert_string_equal(s.keys[1], "b");
    assert_false(s.v[1].has_value); /* long: in the data table */
    assert_int_equal(s.v[2].op, PC_OP_DELETE);
    assert_int_equal(pc_batch_changes("junk", 4, note, &s), PC_INVALID);

    assert_int_equal(fx_apply_next(f->s, batch.data, batch.len), PC_OK);
    pc_buf v = {0};
    assert_int_equal(pc_change_value(f->s, S("b"), start, &v), PC_OK);
    assert_int_equal(v.len, strlen(long_value));
    assert_memory_equal(v.data, long_value, v.len);
    pc_buf_free(&v);
    assert_int_equal(pc_change_value(f->s, S("b"), start + 100, &v), PC_NOT_FOUND);
    pc_buf_free(&batch);
}

/* 40 transactions of 3 keys each (one commit_ts for all three), some
 * rolled back, over keys k00..k09 and outside the range (z). */
static uint64_t write_history(fx *f, uint64_t *first)
{
    uint64_t last = 0;
    for (int i = 0; i < 40; i++) {
        char a[8], b[8], v[16];
        snprintf(a, sizeof a, "k%02d", i % 10);
        snprintf(b, sizeof b, "k%02d", (i + 3) % 10);
        snprintf(v, sizeof v, "v%d", i);
        uint64_t start = fx_ts(f), commit = fx_ts(f);
        pc_txn_meta t = fx_meta(start, a);
        pc_mutation m[] = {PUT(a, v), i % 4 == 0 ? DEL(b) : PUT(b, v), PUT("z", v)};
        pc_slice keys[] = {S(a), S(b), S("z")};
        assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 3, NULL)), PC_OK);
        if (i % 7 == 6) {
            assert_int_equal(APPLY(f->s, pc_rollback(f->s, keys, 3, start)), PC_OK);
            continue;
        }
        assert_int_equal(APPLY(f->s, pc_commit(f->s, keys, 3, start, commit)), PC_OK);
        if (*first == 0)
            *first = commit;
        last = commit;
    }
    return last;
}

static void a_scan_pages_by_whole_commits(void **state)
{
    fx *f = *state;
    uint64_t first = 0, last = write_history(f, &first);
    /* Everything at once: 35 commits of 2 keys in [k, l). */
    pc_changes all;
    assert_int_equal(pc_changes_scan(f->s, S("k"), S("l"), 0, last, 1000, &all), PC_OK);
    assert_int_equal(all.n, 70);
    assert_int_equal(all.upto, last);
    for (size_t i = 1; i < all.n; i++) {
        const pc_change *p = &all.v[i - 1], *c = &all.v[i];
        assert_true(p->commit_ts < c->commit_ts ||
                    (p->commit_ts == c->commit_ts &&
                     pc_key_cmp(p->key.data, p->key.len, c->key.data, c->key.len) < 0));
        assert_true(c->key.len == 3 && ((const char *)c->key.data)[0] == 'k');
    }
    /* In pages of about 3: the same changes, one after the other, never a
     * commit cut in two. */
    size_t got = 0, pages = 0;
    uint64_t after = 0;
    while (after < last) {
        pc_changes page;
        assert_int_equal(pc_changes_scan(f->s, S("k"), S("l"), after, last, 3, &page), PC_OK);
        assert_true(page.upto > after);
        assert_true(page.n >= 2 || page.upto == last);
        for (size_t i = 0; i < page.n; i++, got++) {
            assert_int_equal(page.v[i].commit_ts, all.v[got].commit_ts);
            assert_int_equal(page.v[i].key.len, all.v[got].key.len);
            assert_memory_equal(page.v[i].key.data, all.v[got].key.data, page.v[i].key.len);
            assert_true(page.v[i].commit_ts > after && page.v[i].commit_ts <= page.upto);
        }
        /* Whole: the next change is above upto. */
        assert_true(got == all.n || all.v[got].commit_ts > page.upto);
        after = page.upto;
        pages++;
        pc_changes_free(&page);
    }
    assert_int_equal(got, all.n);
    assert_true(pages >= 15); /* pages of 2 commits (4 changes): the limit never cuts one */
    /* A range of one key; a window of timestamps. */
    pc_changes one;
    assert_int_equal(pc_changes_scan(f->s, S("z"), (pc_slice){0}, first, last, 1000, &one),
                     PC_OK);
    assert_int_equal(one.n, 34); /* 35 commits, the first excluded (after = first) */
    pc_changes_free(&one);
    pc_changes_free(&all);
    assert_int_equal(pc_changes_scan(f->s, S("k"), S("l"), 5, 5, 10, &one), PC_OK);
    assert_int_equal(one.n, 0);
    pc_changes_free(&one);
    assert_int_equal(pc_changes_scan(f->s, S("k"), S("l"), 0, 5, 0, &one), PC_INVALID);
}

static void the_resolved_ts_stays_below_what_is_in_flight(void **state)
{
    fx *f = *state;
    uint64_t r;
    f->ts = 100;
    assert_int_equal(pc_resolved_ts(f->s, 500, &r), PC_OK);
    assert_int_equal(r, 500); /* nothing in flight */

    /* A lock at 120: its transaction commits above 120. */
    pc_txn_meta t = fx_meta(120, "x");
    pc_mutation m = PUT("x", "1");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(pc_resolved_ts(f->s, 500, &r), PC_OK);
    assert_int_equal(r, 119);
    assert_int_equal(pc_resolved_ts(f->s, 90, &r), PC_OK);
    assert_int_equal(r, 90);

    /* A blind write holding its key before it asks for a timestamp: its
     * commit lands above the store's highest timestamp (120, the lock). */
    pc_mutation b = PUT("y", "2");
    size_t busy;
    assert_int_equal(pc_memlock_acquire(f->e->memlocks, &b, 1, 0, &busy), PC_OK);
    assert_int_equal(pc_resolved_ts(f->s, 500, &r), PC_OK);
    assert_int_equal(r, 119);
    pc_slice x = S("x");
    assert_int_equal(APPLY(f->s, pc_rollback(f->s, &x, 1, 120)), PC_OK);
    assert_int_equal(pc_resolved_ts(f->s, 500, &r), PC_OK);
    assert_int_equal(pc_store_max_ts(f->e), 120);
    assert_int_equal(r, 120); /* the blind write's floor: the highest timestamp then */
    /* Committed at 300, not yet applied or durable: lands at 300. */
    pc_memlock_committed(f->e->memlocks, &b, 1, 0, 300);
    assert_int_equal(pc_resolved_ts(f->s, 500, &r), PC_OK);
    assert_int_equal(r, 299);
    pc_memlock_release(f->e->memlocks, &b, 1, 0);
    assert_int_equal(pc_resolved_ts(f->s, 500, &r), PC_OK);
    assert_int_equal(r, 500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_batch_tells_its_puts_and_deletes, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(a_scan_pages_by_whole_commits, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(the_resolved_ts_stays_below_what_is_in_flight,
                                        fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("engine: changes for a change feed", tests, NULL, NULL);
}
