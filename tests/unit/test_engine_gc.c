/*
 * MVCC garbage collection: below the safe point only the newest put of each
 * key survives (a newest delete goes with everything under it), above it
 * everything stays, and every snapshot at or above the safe point reads
 * exactly what it read before.
 */
#include "engine_admin.h"
#include "engine_fixture.h"

static void commit_one(fx *f, const char *key, const char *value, uint64_t start, uint64_t commit)
{
    pc_txn_meta t = fx_meta(start, key);
    pc_mutation m = value ? PUT(key, value) : DEL(key);
    pc_slice k = S(key);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &k, 1, start, commit)), PC_OK);
}

typedef struct {
    const char *lo, *hi; /* every key of a part in [lo, hi) (hi NULL: no end) */
    int keys, outside;
} part_keys;

/* What a part's batch carries before its first removal. */
typedef struct {
    uint64_t raised;     /* the safe point raised ahead of the removals (0: none) */
    int removals, bare;  /* removals; those with no safe point ahead of them */
} part_ops;

static int note_op(void *arg, const pc_batch_op *o)
{
    part_ops *p = arg;
    if (o->op == PC_BATCH_RAISE_SAFE_POINT)
        p->raised = o->ts;
    if (o->op == PC_BATCH_DEL) {
        p->removals++;
        p->bare += p->raised == 0;
    }
    return 0;
}

static int key_in_part(void *arg, const void *key, size_t len)
{
    part_keys *p = arg;
    p->keys++;
    if (pc_key_cmp(key, len, p->lo, strlen(p->lo)) < 0 ||
        (p->hi != NULL && pc_key_cmp(key, len, p->hi, strlen(p->hi)) >= 0))
        p->outside++;
    return 0;
}

/* A part is one batch, and a batch one region's (DESIGN §6.2): given the
 * region's end as its limit, a part stops there, and the next starts at
 * it. With regions ["", c) [c, e) [e, ...) and a limit set from each
 * part's position as the janitor sets it, every part's keys are in one
 * region, and the walk removes what a walk without limits removes. Each
 * part that removes carries the safe point ahead of its removals. */
static void a_walk_stops_at_the_limit_it_is_given(void **state)
{
    fx *f = *state;
    const char *keys[] = {"a", "b", "c", "d", "e", "f"};
    for (int i = 0; i < 6; i++) {
        commit_one(f, keys[i], "old", 9, 10);
        commit_one(f, keys[i], "new", 19, 20);
    }
    const char *cut[] = {"", "c", "e", NULL};
    pc_gc_stats st = {0};
    pc_gc_walk *walk = NULL;
    uint64_t applied = 0;
    bool done = false;
    assert_int_equal(APPLY(f->s, pc_gc_begin(f->s, 25, &applied, &walk)), PC_OK);
    assert_non_null(walk);
    int parts = 0, regions_seen[3] = {0};
    while (!done) {
        /* The region of the position: the last cut at or below it. */
        pc_slice at = pc_gc_walk_position(walk);
        int r = 0;
        while (cut[r + 1] != NULL && pc_key_cmp(at.data, at.len, cut[r + 1], 1) >= 0)
            r++;
        pc_gc_walk_limit(walk, cut[r + 1], cut[r + 1] ? 1 : 0);
        fx_propose(f->s);
        pc_rc rc = pc_gc_next(f->s, walk, &st, &done);
        part_keys p = {cut[r], cut[r + 1], 0, 0};
        part_ops ops = {0, 0, 0};
        if (fx_batch.len > 0) {
            assert_int_equal(pc_batch_keys(fx_batch.data, fx_batch.len, key_in_part, &p), PC_OK);
            assert_int_equal(pc_batch_each(fx_batch.data, fx_batch.len, note_op, &ops), PC_OK);
            /* Each region's part carries the safe point ahead of its
             * removals: in a log of the region's own, none is applied
             * before the reads below it are refused (DESIGN §6.5 step 6). */
            assert_true(ops.removals > 0);
            assert_int_equal(ops.bare, 0);
            assert_int_equal(ops.raised, 25);
        }
        assert_int_equal(fx_apply(f->s, rc), PC_OK);
        assert_int_equal(p.outside, 0);
        regions_seen[r] += p.keys > 0;
        assert_true(++parts < 10);
    }
    pc_gc_end(walk);
    assert_int_equal(regions_seen[0], 1);
    assert_int_equal(regions_seen[1], 1);
    assert_int_equal(regions_seen[2], 1);
    assert_int_equal(st.keys, 6);
    assert_int_equal(st.versions_removed, 6);
    assert_table(f, "write", "a@20 put start=19 short=new\nb@20 put start=19 short=new\n"
                             "c@20 put start=19 short=new\nd@20 put start=19 short=new\n"
                             "e@20 put start=19 short=new\nf@20 put start=19 short=new\n");

    /* No limit: one part walks every key (fewer than a part's 128). */
    walk = NULL;
    assert_int_equal(APPLY(f->s, pc_gc_begin(f->s, 26, &applied, &walk)), PC_OK);
    pc_gc_walk_limit(walk, "c", 1);
    pc_gc_walk_limit(walk, NULL, 0);
    memset(&st, 0, sizeof st);
    assert_int_equal(APPLY(f->s, pc_gc_next(f->s, walk, &st, &done)), PC_OK);
    assert_true(done);
    assert_int_equal(st.keys, 6);
    pc_gc_end(walk);
}

/* A walk another node began (pc_gc_walk_at: a region led here while the
 * node that raised the safe point leads region 1): refused until this
 * store holds a safe point at or above the one asked for, kept below a
 * read this node pinned before it applied that safe point (as a follower
 * of region 1 applies it, whatever its pins), and it starts at the key
 * given: only [c, e) goes when the limit is e. */
static void a_walk_at_a_key_waits_for_the_agreed_safe_point(void **state)
{
    fx *f = *state;
    const char *keys[] = {"a", "b", "c", "d", "e", "f"};
    for (int i = 0; i < 6; i++) {
        commit_one(f, keys[i], "old", 9, 10);
        commit_one(f, keys[i], "new", 19, 20);
    }
    pc_gc_walk *walk = NULL;
    assert_int_equal(pc_gc_walk_at(f->s, 25, S("c"), &walk), PC_UNAVAILABLE);
    assert_null(walk);
    /* The leader's raise of the safe point to 25, as region 1's log
     * carries it: proposed here, kept, not applied. */
    uint64_t applied = 0;
    fx_propose(f->s);
    assert_int_equal(pc_gc_begin(f->s, 25, &applied, &walk), PC_OK);
    assert_int_equal(applied, 25);
    pc_gc_end(walk);
    walk = NULL;
    pc_latches_release(pc_session_take_latches(f->s));
    pc_session_propose(f->s, NULL);
    pc_buf raise = fx_batch;
    fx_batch = (pc_buf){0};
    /* This node: a read at 15 pinned, then the raise applied. */
    fx_reopen(f);
    assert_int_equal(pc_snapshot_pin(f->e, 15), PC_OK);
    assert_int_equal(fx_apply_next(f->s, raise.data, raise.len), PC_OK);
    pc_buf_free(&raise);
    assert_int_equal(pc_gc_walk_at(f->s, 26, S("c"), &walk), PC_UNAVAILABLE);
    assert_int_equal(pc_gc_walk_at(f->s, 0, S("c"), &walk), PC_INVALID);

    /* The walk stays below the read at 15: nothing goes (each key's
     * newest version at or below 14 is the one at 10). */
    pc_gc_stats st = {0};
    bool done = false;
    assert_int_equal(pc_gc_walk_at(f->s, 25, S("c"), &walk), PC_OK);
    pc_gc_walk_limit(walk, "e", 1);
    assert_int_equal(APPLY(f->s, pc_gc_next(f->s, walk, &st, &done)), PC_OK);
    assert_int_equal(st.keys, 2);
    assert_int_equal(st.versions_removed, 0);
    pc_gc_end(walk);
    pc_snapshot_unpin(f->e, 15);

    /* Unpinned: [c, e) loses its old versions, the rest keeps them, and
     * the walk stops at e. */
    memset(&st, 0, sizeof st);
    assert_int_equal(pc_gc_walk_at(f->s, 25, S("c"), &walk), PC_OK);
    pc_gc_walk_limit(walk, "e", 1);
    assert_int_equal(APPLY(f->s, pc_gc_next(f->s, walk, &st, &done)), PC_OK);
    assert_false(done);
    pc_slice at = pc_gc_walk_position(walk);
    assert_int_equal(pc_key_cmp(at.data, at.len, "e", 1), 0);
    assert_int_equal(st.versions_removed, 2);
    pc_gc_end(walk);
    assert_table(f, "write", "a@20 put start=19 short=new\na@10 put start=9 short=old\n"
                             "b@20 put start=19 short=new\nb@10 put start=9 short=old\n"
                             "c@20 put start=19 short=new\nd@20 put start=19 short=new\n"
                             "e@20 put start=19 short=new\ne@10 put start=9 short=old\n"
                             "f@20 put start=19 short=new\nf@10 put start=9 short=old\n");
}

static void gc_keeps_the_newest_visible_version(void **state)
{
    fx *f = *state;
    pc_gc_stats st;
    pc_slice r = S("r");
    commit_one(f, "a", "a1", 9, 10);
    commit_one(f, "a", "a2", 19, 20);
    commit_one(f, "a", "a3", 29, 30);
    commit_one(f, "a", "a4", 39, 40);
    commit_one(f, "d", "d1", 9, 10);
    commit_one(f, "d", NULL, 19, 20);
    commit_one(f, "d", "d3", 29, 30);
    commit_one(f, "e", "e1", 9, 10);
    commit_one(f, "e", NULL, 19, 20);
    assert_int_equal(APPLY(f->s, pc_rollback(f->s, &r, 1, 5)), PC_OK);  /* below the safe point */
    assert_int_equal(APPLY(f->s, pc_rollback(f->s, &r, 1, 35)), PC_OK); /* above it */

    /* Given no batch to propose into, GC is refused and raises nothing. */
    uint64_t applied;
    pc_gc_walk *walk = NULL;
    assert_int_equal(pc_gc_begin(f->s, 25, &applied, &walk), PC_INVALID);
    assert_null(walk);
    assert_int_equal(pc_gc_safe_point(f->e), 0);
    assert_int_equal(fx_gc(f->s, 25, &st, &applied), PC_OK);
    assert_int_equal(applied, 25);
    assert_int_equal(pc_gc_safe_point(f->e), 25);
    assert_table(f, "write", "a@40 put start=39 short=a4\na@30 put start=29 short=a3\n"
                             "a@20 put start=19 short=a2\n"
                             "d@30 put start=29 short=d3\n"
                             "r@35 rollback start=35\n");
    assert_int_equal(st.versions_removed, 6);
    assert_int_equal(st.keys, 4);
    /* The same safe point again: not raised, nothing done; a little
     * higher finds nothing more to remove. */
    assert_int_equal(fx_gc(f->s, 25, &st, &applied), PC_OK);
    assert_int_equal(applied, 0);
    assert_int_equal(fx_gc(f->s, 26, &st, &applied), PC_OK);
    assert_int_equal(applied, 26);
    assert_int_equal(st.versions_removed, 0);
}

/* The safe point is stored before anything is removed and read back at
 * open: after a restart, snapshots below it are still refused (they could
 * miss versions GC removed). A clean reopen here; the service's crash
 * tests do it with kill -9. */
static void the_safe_point_survives_a_restart(void **state)
{
    fx *f = *state;
    commit_one(f, "k", "old", 9, 10);
    commit_one(f, "k", "new", 19, 20);
    assert_int_equal(pc_snapshot_pin(f->e, 12), PC_OK);
    pc_snapshot_unpin(f->e, 12);
    uint64_t applied;
    assert_int_equal(fx_gc(f->s, 25, NULL, &applied), PC_OK);
    assert_int_equal(applied, 25);
    assert_int_equal(pc_snapshot_pin(f->e, 12), PC_INVALID);

    fx_reopen(f);
    assert_int_equal(pc_gc_safe_point(f->e), 25);
    assert_int_equal(pc_snapshot_pin(f->e, 12), PC_INVALID);
    assert_int_equal(pc_snapshot_pin(f->e, 25), PC_OK);
    pc_snapshot_unpin(f->e, 25);
    /* It never goes down. */
    assert_int_equal(fx_gc(f->s, 20, NULL, &applied), PC_OK);
    assert_int_equal(applied, 0);
    assert_int_equal(pc_gc_safe_point(f->e), 25);
}

/* A read pinned at ts keeps GC below it: the versions it reads stay, and
 * the safe point stops just under it. Once unpinned, GC goes on. */
static void a_pinned_read_holds_gc_back(void **state)
{
    fx *f = *state;
    char out[32];
    commit_one(f, "k", "v1", 9, 10);
    commit_one(f, "k", "v2", 19, 20);
    commit_one(f, "k", "v3", 29, 30);
    assert_int_equal(pc_snapshot_pin(f->e, 15), PC_OK);
    assert_int_equal(pc_snapshot_pin(f->e, 15), PC_OK); /* two readers at 15 */
    uint64_t applied;
    assert_int_equal(fx_gc(f->s, 35, NULL, &applied), PC_OK);
    assert_int_equal(applied, 14);
    assert_int_equal(fx_get(f, "k", 15, out, sizeof(out)), PC_OK);
    assert_string_equal(out, "v1");
    pc_snapshot_unpin(f->e, 15);
    assert_int_equal(fx_gc(f->s, 35, NULL, &applied), PC_OK);
    assert_int_equal(applied, 0); /* the other reader is still there: stays at 14 */
    assert_int_equal(pc_gc_safe_point(f->e), 14);
    pc_snapshot_unpin(f->e, 15);
    assert_int_equal(fx_gc(f->s, 35, NULL, &applied), PC_OK);
    assert_int_equal(applied, 35);
    assert_int_equal(pc_snapshot_pin(f->e, 15), PC_INVALID);
    assert_int_equal(fx_get(f, "k", 35, out, sizeof(out)), PC_OK);
    assert_string_equal(out, "v3");
}

/* Many keys, many versions, long and short values, a pending lock: every
 * read at or above the safe point is unchanged; rows below it are gone. */
static void snapshots_at_or_above_the_safe_point_are_unchanged(void **state)
{
    fx *f = *state;
    enum { KEYS = 300, ROUNDS = 6 };
    char key[16], val[600];
    uint64_t ts = 100;
    srand(7);
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < KEYS; k++) {
            snprintf(key, sizeof(key), "key%04d", k);
            /* "round/key-" padded to a short (10) or a long (500) value */
            size_t len = (size_t)(rand() % 2 ? 10 : 500);
            size_t n = (size_t)snprintf(val, sizeof(val), "%d/%d-", r, k);
            memset(val + n, 'a' + r, len - n);
            val[len] = '\0';
            if (rand() % 7 == 0)
                commit_one(f, key, NULL, ts, ts + 1);
            else
                commit_one(f, key, val, ts, ts + 1);
            ts += 2;
        }
    }
    /* A transaction in flight keeps its lock and data through GC. */
    pc_txn_meta t = fx_meta(ts, "key0001");
    pc_mutation m = PUT("key0001", val);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);

    uint64_t safe = 100 + 2 * KEYS * (ROUNDS - 2); /* two rounds stay above */
    uint64_t probes[] = {safe, safe + 1, safe + 333, ts - 1};
    enum { NP = sizeof(probes) / sizeof(probes[0]) };
    pc_items before[NP];
    pc_conflict c;
    for (int i = 0; i < NP; i++) {
        memset(&before[i], 0, sizeof(before[i]));
        assert_int_equal(pc_scan(f->s, S(""), S(""), probes[i], 100000, &before[i], &c), PC_OK);
    }
    pc_table_counts n0, n1;
    assert_int_equal(pc_count_rows(f->s, &n0), PC_OK);
    assert_int_equal(n0.write, (uint64_t)KEYS * ROUNDS);

    pc_gc_stats st;
    assert_int_equal(fx_gc(f->s, safe, &st, NULL), PC_OK);
    assert_int_equal(pc_count_rows(f->s, &n1), PC_OK);
    assert_int_equal(n1.write, n0.write - st.versions_removed);
    assert_int_equal(n1.data, n0.data - st.data_removed);
    /* Two rounds above, at most one version at or below per key. */
    assert_true(n1.write <= (uint64_t)KEYS * 3);
    assert_true(st.versions_removed >= (uint64_t)KEYS * (ROUNDS - 3));
    assert_int_equal(n1.lock, 1);

    for (int i = 0; i < NP; i++) {
        pc_items after = {0};
        assert_int_equal(pc_scan(f->s, S(""), S(""), probes[i], 100000, &after, &c), PC_OK);
        assert_int_equal(after.n, before[i].n);
        for (size_t j = 0; j < after.n; j++) {
            assert_int_equal(after.items[j].key.len, before[i].items[j].key.len);
            assert_memory_equal(after.items[j].key.data, before[i].items[j].key.data,
                                after.items[j].key.len);
            assert_int_equal(after.items[j].value.len, before[i].items[j].value.len);
            assert_memory_equal(after.items[j].value.data, before[i].items[j].value.data,
                                after.items[j].value.len);
            assert_int_equal(after.items[j].commit_ts, before[i].items[j].commit_ts);
        }
        pc_items_free(&after);
        pc_items_free(&before[i]);
    }
    /* The pending transaction still commits. */
    pc_slice k1 = S("key0001");
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &k1, 1, ts, ts + 1)), PC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(gc_keeps_the_newest_visible_version, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(snapshots_at_or_above_the_safe_point_are_unchanged,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(the_safe_point_survives_a_restart, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_pinned_read_holds_gc_back, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(a_walk_stops_at_the_limit_it_is_given, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(a_walk_at_a_key_waits_for_the_agreed_safe_point,
                                        fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("engine: garbage collection", tests, NULL, NULL);
}
