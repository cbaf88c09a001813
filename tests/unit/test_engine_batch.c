/*
 * test_engine_batch.c — write batches (engine/batch.c, DESIGN §4.10):
 *
 *  - the same actions run three ways give the same tables: one at a time
 *    on one engine, each applied as it returns (as a single node runs
 *    them: APPLY), proposed on a second and applied there by the test
 *    (a leader), and only applied on a third (a follower that never ran
 *    an action);
 *  - a batch applied again (a replay) changes nothing, and the applied
 *    index survives a restart, as does the timestamp floor it carried;
 *  - a malformed batch is refused whole: nothing applied;
 *  - GC in a group: pc_gc_begin proposes the safe point (every member
 *    stores it when it applies it), then each pc_gc_next part proposes
 *    its removals (200 keys: two parts); applied on the leader and the
 *    follower the tables equal the single node's GC, the follower's safe point
 *    is the leader's, across a restart and in the leader's image;
 *  - the batches of the whole script joined into one (pc_batch_join, how
 *    a Raft group puts the batches queued together in one entry) and
 *    applied at one index leave the follower's tables as the leader's;
 *  - an image (engine/image.c: a Raft snapshot) of the leader installed on
 *    a store with other rows makes it equal to the leader, at the image's
 *    index, and the batches after it apply on top; an image of a state the
 *    store already passed changes nothing;
 *  - named values (engine/meta.c: the service's region map): set by a
 *    batch at its index, the last set wins, kept across a restart, found
 *    in a batch (pc_batch_meta), carried by an image, and an image
 *    replaces a store's named values with its own.
 */
#include "engine_fixture.h"
#include "engine_replica.h"

#define LONG_LEN 300

typedef struct {
    fx *single, *leader, *follower;
    uint64_t index;          /* the last batch applied */
    pc_buf last;             /* its bytes */
} trio;

static int no_owner_alive(void *arg, const void *owner, size_t len)
{
    (void)arg;
    (void)owner;
    (void)len;
    return 0;
}

static int ts_17(void *arg, uint64_t *ts)
{
    (void)arg;
    *ts = 17;
    return 0;
}

/* One action: what it does, given an engine session. */
typedef pc_rc (*action)(pc_session *s);

static char long_value[LONG_LEN + 1];

static pc_rc prewrite_ab(pc_session *s)
{
    pc_txn_meta t = fx_meta(10, "a");
    pc_mutation m[2] = {PUT("a", "1"), PUT("b", long_value)};
    return pc_prewrite(s, &t, m, 2, NULL);
}

static pc_rc commit_a(pc_session *s)
{
    pc_slice k = S("a");
    return pc_commit(s, &k, 1, 10, 11);
}

static pc_rc commit_b(pc_session *s)
{
    pc_slice k = S("b");
    return pc_commit(s, &k, 1, 10, 11);
}

static pc_rc prewrite_ca(pc_session *s)
{
    pc_txn_meta t = fx_meta(12, "c");
    pc_mutation m[2] = {PUT("c", "3"), DEL("a")};
    return pc_prewrite(s, &t, m, 2, NULL);
}

static pc_rc rollback_ca(pc_session *s)
{
    pc_slice k[2] = {S("a"), S("c")};
    return pc_rollback(s, k, 2, 12);
}

static pc_rc prewrite_d(pc_session *s)
{
    pc_txn_meta t = fx_meta(14, "d");
    pc_mutation m = PUT("d", "4");
    return pc_prewrite(s, &t, &m, 1, NULL);
}

static pc_rc heartbeat_d(pc_session *s)
{
    return pc_heartbeat(s, S("d"), 14, 1000, 5000);
}

/* Its owner is dead: the status check rolls d back now. */
static pc_rc status_d(pc_session *s)
{
    pc_liveness live = {.now_ms = 2000, .owner_alive = no_owner_alive};
    pc_txn_status st;
    pc_rc rc = pc_check_txn_status(s, S("d"), 14, &live, &st);
    return rc == PC_OK && st.state != PC_TXN_ROLLED_BACK ? PC_ERROR : rc;
}

static pc_rc one_pc_e(pc_session *s)
{
    pc_txn_meta t = fx_meta(16, "e");
    pc_mutation m = PUT("e", "5");
    uint64_t cts;
    pc_rc rc = pc_one_pc(s, &t, &m, 1, ts_17, NULL, &cts, NULL);
    return rc == PC_OK && cts != 17 ? PC_ERROR : rc;
}

static const action script[] = {prewrite_ab, commit_a, commit_b, prewrite_ca, rollback_ca,
                                prewrite_d, heartbeat_d, status_d, one_pc_e};
#define NSTEPS (sizeof script / sizeof script[0])

/* Run one action three ways: as a single node; proposed on the leader,
 * then its batch applied on the leader and on the follower. The outcomes
 * agree. The proposal's latches are held until the leader applied its
 * batch. */
static void step(trio *t, action a)
{
    pc_rc single = APPLY(t->single->s, a(t->single->s));
    t->last.len = 0;
    pc_session_propose(t->leader->s, &t->last);
    pc_rc proposed = a(t->leader->s);
    pc_latches *held = pc_session_take_latches(t->leader->s);
    pc_session_propose(t->leader->s, NULL);
    assert_non_null(held);
    assert_int_equal(proposed, single);
    assert_int_equal(pc_batch_check(t->last.data, t->last.len), PC_OK);
    t->index++;
    assert_int_equal(pc_apply_batch(t->leader->s, t->last.data, t->last.len, t->index), PC_OK);
    pc_latches_release(held);
    assert_int_equal(pc_apply_batch(t->follower->s, t->last.data, t->last.len, t->index), PC_OK);
}

static void same_tables(fx *a, fx *b)
{
    static const char *const tables[] = {"data", "lock", "write"};
    static char da[256 << 10], db[256 << 10];
    for (size_t i = 0; i < 3; i++) {
        fx_dump(a, tables[i], da, sizeof da);
        fx_dump(b, tables[i], db, sizeof db);
        assert_string_equal(da, db);
    }
}

static int setup(void **state)
{
    trio *t = calloc(1, sizeof *t);
    assert_non_null(t);
    memset(long_value, 'L', LONG_LEN);
    t->single = fx_new();
    t->leader = fx_new();
    t->follower = fx_new();
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    trio *t = *state;
    fx_free(t->single);
    fx_free(t->leader);
    fx_free(t->follower);
    pc_buf_free(&t->last);
    free(t);
    return 0;
}

static void proposed_and_applied_equals_one_at_a_time(void **state)
{
    trio *t = *state;
    for (size_t i = 0; i < NSTEPS; i++) {
        step(t, script[i]);
        same_tables(t->single, t->leader);
        same_tables(t->leader, t->follower);
    }
    /* What the script leaves: a and b committed at 11 (b's value in data),
     * c's and a's second transaction and d rolled back, e committed in
     * one phase at 17. */
    assert_table(t->follower, "lock", "");
    char v[LONG_LEN + 1];
    assert_int_equal(fx_get(t->follower, "a", 20, v, sizeof v), PC_OK);
    assert_string_equal(v, "1");
    assert_int_equal(fx_get(t->follower, "b", 20, v, sizeof v), PC_OK);
    assert_int_equal(strlen(v), LONG_LEN);
    assert_int_equal(fx_get(t->follower, "c", 20, v, sizeof v), PC_NOT_FOUND);
    assert_int_equal(fx_get(t->follower, "d", 20, v, sizeof v), PC_NOT_FOUND);
    assert_int_equal(fx_get(t->follower, "e", 20, v, sizeof v), PC_OK);
    assert_string_equal(v, "5");
    /* The follower ran no action, yet knows the store's highest timestamp. */
    assert_int_equal(pc_store_max_ts(t->follower->e), 17);
}

static void a_replay_changes_nothing_and_the_index_survives(void **state)
{
    trio *t = *state;
    for (size_t i = 0; i < 4; i++)
        step(t, script[i]);
    static char before[8192], after[8192];
    fx_dump(t->follower, "write", before, sizeof before);
    /* Batch 4 again (as after a restart), and batch 2's bytes as 3. */
    assert_int_equal(pc_apply_batch(t->follower->s, t->last.data, t->last.len, 4), PC_OK);
    assert_int_equal(pc_apply_batch(t->follower->s, t->last.data, t->last.len, 3), PC_OK);
    fx_dump(t->follower, "write", after, sizeof after);
    assert_string_equal(before, after);
    uint64_t index;
    assert_int_equal(pc_applied_index(t->follower->s, &index), PC_OK);
    assert_int_equal(index, 4);
    fx_reopen(t->follower);
    assert_int_equal(pc_applied_index(t->follower->s, &index), PC_OK);
    assert_int_equal(index, 4);
    assert_int_equal(pc_store_max_ts(t->follower->e), 12);
    same_tables(t->leader, t->follower);
}

static void a_malformed_batch_is_refused_whole(void **state)
{
    trio *t = *state;
    step(t, script[0]); /* a real batch: prewrite of a and b */
    pc_buf bad = {0};
    assert_int_equal(pc_buf_append(&bad, t->last.data, t->last.len), PC_OK);
    uint64_t index;
    /* Cut short by one byte, at every length. */
    for (size_t n = 0; n < t->last.len; n++)
        assert_int_equal(pc_apply_batch(t->follower->s, bad.data, n, 2), PC_INVALID);
    /* Another magic; a table that is not a data table (meta: 4). */
    bad.data[0] = 'X';
    assert_int_equal(pc_apply_batch(t->follower->s, bad.data, bad.len, 2), PC_INVALID);
    bad.len = 0;
    assert_int_equal(pc_batch_del(&bad, 4, "k", 1), PC_OK);
    assert_int_equal(pc_batch_check(bad.data, bad.len), PC_INVALID);
    assert_int_equal(pc_apply_batch(t->follower->s, bad.data, bad.len, 2), PC_INVALID);
    /* Index 0 is not an index. */
    assert_int_equal(pc_apply_batch(t->follower->s, t->last.data, t->last.len, 0), PC_INVALID);
    assert_int_equal(pc_applied_index(t->follower->s, &index), PC_OK);
    assert_int_equal(index, 1);
    same_tables(t->leader, t->follower);
    pc_buf_free(&bad);
}

static void joined_batches_apply_as_the_sequence(void **state)
{
    trio *t = *state;
    pc_buf joined = {0};
    uint32_t ops = 0;
    for (size_t i = 0; i < NSTEPS; i++) {
        t->last.len = 0;
        pc_session_propose(t->leader->s, &t->last);
        assert_int_equal(script[i](t->leader->s),
                         APPLY(t->single->s, script[i](t->single->s)));
        pc_latches *held = pc_session_take_latches(t->leader->s);
        pc_session_propose(t->leader->s, NULL);
        assert_int_equal(pc_apply_batch(t->leader->s, t->last.data, t->last.len, i + 1), PC_OK);
        pc_latches_release(held);
        ops += (uint32_t)t->last.data[4] << 24 | (uint32_t)t->last.data[5] << 16 |
               (uint32_t)t->last.data[6] << 8 | t->last.data[7];
        assert_int_equal(pc_batch_join(&joined, t->last.data, t->last.len), PC_OK);
    }
    assert_int_equal(pc_batch_check(joined.data, joined.len), PC_OK);
    assert_int_equal((uint32_t)joined.data[4] << 24 | (uint32_t)joined.data[5] << 16 |
                         (uint32_t)joined.data[6] << 8 | joined.data[7], ops);
    /* Not a batch: refused, nothing appended. */
    size_t len = joined.len;
    assert_int_equal(pc_batch_join(&joined, "nope", 4), PC_INVALID);
    assert_int_equal(joined.len, len);
    assert_int_equal(pc_apply_batch(t->follower->s, joined.data, joined.len, 1), PC_OK);
    same_tables(t->single, t->leader);
    same_tables(t->leader, t->follower);
    assert_int_equal(pc_store_max_ts(t->follower->e), 17);
    pc_buf_free(&joined);
}

static void install(fx *f, const pc_buf *img)
{
    assert_int_equal(pc_image_install(f->s, img->data, img->len), PC_OK);
}

/* ---- GC proposed in parts ---- */

#define GC_KEYS 200
static char gc_key[16];
static uint64_t gc_start;
static const char *gc_value;

static int ts_after_start(void *arg, uint64_t *ts)
{
    (void)arg;
    *ts = gc_start + 1;
    return 0;
}

static pc_rc put_gc_key(pc_session *s)
{
    pc_txn_meta t = fx_meta(gc_start, gc_key);
    pc_mutation m = gc_value != NULL ? PUT(gc_key, gc_value) : DEL(gc_key);
    uint64_t cts;
    return pc_one_pc(s, &t, &m, 1, ts_after_start, NULL, &cts, NULL);
}

/* The leader's proposal in t->last (if any) applied on leader and follower. */
static void apply_last(trio *t)
{
    if (t->last.len == 0)
        return;
    t->index++;
    assert_int_equal(pc_apply_batch(t->leader->s, t->last.data, t->last.len, t->index), PC_OK);
    assert_int_equal(pc_apply_batch(t->follower->s, t->last.data, t->last.len, t->index), PC_OK);
}

static void gc_proposed_in_parts_equals_a_single_nodes(void **state)
{
    trio *t = *state;
    /* Three versions of every key, at 10, 20 and 30 (a long value, with
     * its data row, in the middle; every 5th key deleted at 20). */
    for (int k = 0; k < GC_KEYS; k++) {
        for (int v = 1; v <= 3; v++) {
            snprintf(gc_key, sizeof gc_key, "g%03d", k);
            gc_start = 10 * (uint64_t)v - 1;
            gc_value = v == 2 ? (k % 5 == 0 ? NULL : long_value) : "x";
            step(t, put_gc_key);
        }
    }
    pc_gc_stats single = {0}, group = {0};
    uint64_t applied = 0;
    assert_int_equal(fx_gc(t->single->s, 25, &single, &applied), PC_OK);
    assert_int_equal(applied, 25);
    assert_true(single.versions_removed > 0);

    /* The safe point first, applied before anything is removed. */
    pc_gc_walk *walk = NULL;
    t->last.len = 0;
    pc_session_propose(t->leader->s, &t->last);
    assert_int_equal(pc_gc_begin(t->leader->s, 25, &applied, &walk), PC_OK);
    pc_session_propose(t->leader->s, NULL);
    assert_int_equal(applied, 25);
    assert_non_null(walk);
    assert_int_equal(pc_gc_safe_point(t->follower->e), 0);
    apply_last(t);
    assert_int_equal(pc_gc_safe_point(t->follower->e), 25);
    assert_int_equal(pc_snapshot_pin(t->follower->e, 24), PC_INVALID); /* below it */
    assert_int_equal(pc_snapshot_pin(t->follower->e, 25), PC_OK);
    pc_snapshot_unpin(t->follower->e, 25);

    size_t parts = 0;
    bool done = false;
    while (!done) {
        t->last.len = 0;
        pc_session_propose(t->leader->s, &t->last);
        assert_int_equal(pc_gc_next(t->leader->s, walk, &group, &done), PC_OK);
        pc_session_propose(t->leader->s, NULL);
        apply_last(t);
        parts++;
        assert_true(parts < 10);
    }
    pc_gc_end(walk);
    assert_true(parts >= 2);
    assert_int_equal(group.versions_removed, single.versions_removed);
    assert_int_equal(group.data_removed, single.data_removed);
    same_tables(t->single, t->leader);
    same_tables(t->leader, t->follower);
    char v[LONG_LEN + 1];
    assert_int_equal(fx_get(t->follower, "g001", 25, v, sizeof v), PC_OK);
    assert_int_equal(strlen(v), LONG_LEN);

    /* The follower's safe point survives a restart; an image carries it. */
    fx_reopen(t->follower);
    assert_int_equal(pc_gc_safe_point(t->follower->e), 25);
    pc_buf img = {0};
    uint64_t at;
    assert_int_equal(pc_image_take(t->leader->s, &img, &at), PC_OK);
    fx *c = fx_new();
    install(c, &img);
    assert_int_equal(pc_gc_safe_point(c->e), 25);
    same_tables(t->leader, c);
    pc_buf_free(&img);
    fx_free(c);
}

static void an_image_replaces_a_store_and_batches_follow_it(void **state)
{
    trio *t = *state;
    fx *c = fx_new(), *behind = fx_new();
    fx_put_committed(c, "zz", "stale", 3, 4); /* rows the image must remove */
    for (size_t i = 0; i < 6; i++) { /* up to d's prewrite: a lock in the image */
        step(t, script[i]);
        if (i < 3) /* a member that falls behind after batch 3 */
            assert_int_equal(pc_apply_batch(behind->s, t->last.data, t->last.len, t->index),
                             PC_OK);
    }
    pc_buf img = {0}, empty = {0}, early = {0};
    uint64_t at = 0, index = 0;
    assert_int_equal(pc_image_take(t->leader->s, &img, &at), PC_OK);
    assert_int_equal(at, t->index);
    assert_int_equal(pc_image_take(behind->s, &early, &index), PC_OK);
    assert_int_equal(index, 3);

    /* Cut short anywhere: refused, nothing changed. */
    for (size_t n = 0; n < img.len; n += 7)
        assert_int_equal(pc_image_install(c->s, img.data, n), PC_INVALID);
    char v[LONG_LEN + 1];
    assert_int_equal(fx_get(c, "zz", 20, v, sizeof v), PC_OK);

    install(c, &img);
    same_tables(t->leader, c);
    assert_int_equal(fx_get(c, "zz", 20, v, sizeof v), PC_NOT_FOUND);
    assert_int_equal(pc_applied_index(c->s, &index), PC_OK);
    assert_int_equal(index, at);
    assert_int_equal(pc_store_max_ts(c->e), pc_store_max_ts(t->leader->e));

    /* An image below what it applied is skipped (batch 3's state, while
     * it holds 6's); so is an empty store's image. */
    install(c, &early);
    same_tables(t->leader, c);
    fx *blank = fx_new();
    assert_int_equal(pc_image_take(blank->s, &empty, &index), PC_OK);
    assert_int_equal(index, 0);
    install(c, &empty);
    same_tables(t->leader, c);

    /* The rest of the script, its batches applied on top of the image;
     * and the image survives a restart. */
    fx_reopen(c);
    for (size_t i = 6; i < NSTEPS; i++) {
        step(t, script[i]);
        assert_int_equal(pc_apply_batch(c->s, t->last.data, t->last.len, t->index), PC_OK);
        same_tables(t->leader, c);
    }
    assert_int_equal(fx_get(c, "e", 20, v, sizeof v), PC_OK);
    assert_string_equal(v, "5");
    assert_int_equal(pc_store_max_ts(c->e), 17);

    /* A member left behind at batch 3 installs the newest image: it jumps
     * to the leader's state and index. */
    img.len = 0;
    assert_int_equal(pc_image_take(t->leader->s, &img, &at), PC_OK);
    assert_int_equal(at, NSTEPS);
    install(behind, &img);
    same_tables(t->leader, behind);
    assert_int_equal(pc_applied_index(behind->s, &index), PC_OK);
    assert_int_equal(index, NSTEPS);
    pc_buf_free(&img);
    pc_buf_free(&empty);
    pc_buf_free(&early);
    fx_free(blank);
    fx_free(behind);
    fx_free(c);
}

/* ---- an image larger than the cache ---- */

#define BIG_VALUE 600
#define BIG_BATCH 1000

/* n one-phase puts of keys prefix%06d (BIG_VALUE bytes each), proposed on f
 * in batches of BIG_BATCH and applied on f at its next indexes. */
static void fill(fx *f, const char *prefix, int n, uint64_t *index)
{
    static char value[BIG_VALUE + 1];
    memset(value, 'v', BIG_VALUE);
    pc_buf batch = {0};
    for (int done = 0; done < n;) {
        batch.len = 0;
        pc_session_propose(f->s, &batch);
        /* Each action's latches go at once: nothing else writes here, and
         * keys whose latches share a slot would wait for each other. */
        for (int k = 0; k < BIG_BATCH && done < n; k++, done++) {
            char key[32];
            snprintf(key, sizeof key, "%s%06d", prefix, done);
            pc_txn_meta t = fx_meta(10, key);
            pc_mutation m = PUT(key, value);
            uint64_t cts;
            assert_int_equal(pc_one_pc(f->s, &t, &m, 1, ts_17, NULL, &cts, NULL), PC_OK);
            pc_latches_release(pc_session_take_latches(f->s));
        }
        pc_session_propose(f->s, NULL);
        assert_int_equal(pc_apply_batch(f->s, batch.data, batch.len, ++*index), PC_OK);
    }
    pc_buf_free(&batch);
}

/* An image of about 70 MB (rows and their write records) installed into a
 * store with 64 MB of cache that holds 40,000 other rows (issue #23: one
 * transaction for a whole image outgrew the cache). It is installed in
 * parts (engine/apply.c), and the store is the image's: the same rows,
 * none of its own left, the image's index, byte for byte the same image. */
static void an_image_larger_than_the_cache_is_installed(void **state)
{
    (void)state;
    fx *src = fx_new(), *dst = fx_new();
    uint64_t si = 0, di = 0;
    fill(src, "img", 60000, &si);
    fill(dst, "own", 40000, &di);
    assert_true(di < si);
    pc_buf img = {0}, again = {0};
    uint64_t at = 0, index = 0;
    assert_int_equal(pc_image_take(src->s, &img, &at), PC_OK);
    assert_int_equal(at, si);
    printf("# an image of %zu bytes at index %llu into a store at index %llu\n", img.len,
           (unsigned long long)at, (unsigned long long)di);
    assert_true(img.len > (size_t)32 << 20);
    install(dst, &img);
    assert_int_equal(pc_applied_index(dst->s, &index), PC_OK);
    assert_int_equal(index, si);
    char v[BIG_VALUE + 1];
    assert_int_equal(fx_get(dst, "own000000", 20, v, sizeof v), PC_NOT_FOUND);
    assert_int_equal(fx_get(dst, "own039999", 20, v, sizeof v), PC_NOT_FOUND);
    assert_int_equal(fx_get(dst, "img059999", 20, v, sizeof v), PC_OK);
    assert_int_equal(pc_image_take(dst->s, &again, &index), PC_OK);
    assert_int_equal(again.len, img.len);
    assert_memory_equal(again.data, img.data, img.len);
    pc_buf_free(&img);
    pc_buf_free(&again);
    fx_free(src);
    fx_free(dst);
}

/* An image pinned at a moment is of that moment, however many batches
 * are applied on other sessions before it is read (a Raft snapshot taken
 * off the applying thread: docs/DESIGN.md §4.10): the same bytes as an
 * image of a member that stopped there. */
static void a_pinned_image_is_of_its_moment(void **state)
{
    trio *t = *state;
    for (size_t i = 0; i < 6; i++)
        step(t, script[i]);
    pc_session *pin = NULL;
    assert_int_equal(pc_session_open(t->leader->e, &pin), PC_OK);
    uint64_t at = 0, index = 0;
    assert_int_equal(pc_image_fill(pin, &t->last), PC_INVALID); /* not pinned */
    assert_int_equal(pc_image_pin(pin, &at), PC_OK);
    assert_int_equal(at, 6);
    assert_int_equal(pc_image_pin(pin, &at), PC_INVALID); /* pinned already */
    pc_buf want = {0}, img = {0};
    assert_int_equal(pc_image_take(t->follower->s, &want, &index), PC_OK);
    assert_int_equal(index, 6);
    for (size_t i = 6; i < NSTEPS; i++) /* the leader's store moves on */
        step(t, script[i]);
    assert_int_equal(pc_image_fill(pin, &img), PC_OK);
    assert_int_equal(img.len, want.len);
    assert_memory_equal(img.data, want.data, want.len);
    assert_int_equal(pc_image_unpin(pin), PC_OK);
    assert_int_equal(pc_image_unpin(pin), PC_OK); /* once is enough */
    /* Pinned again: now the newest state. */
    assert_int_equal(pc_image_pin(pin, &at), PC_OK);
    assert_int_equal(at, NSTEPS);
    assert_int_equal(pc_image_fill(pin, &img), PC_OK);
    assert_int_equal(pc_image_unpin(pin), PC_OK);
    want.len = 0;
    assert_int_equal(pc_image_take(t->leader->s, &want, &index), PC_OK);
    assert_int_equal(img.len, want.len);
    assert_memory_equal(img.data, want.data, want.len);
    pc_session_close(pin);
    pc_buf_free(&img);
    pc_buf_free(&want);
}

/* ---- named values ---- */

static void meta_is(fx *f, const char *name, const char *want)
{
    pc_buf v = {0};
    pc_rc rc = pc_meta_get(f->s, name, &v);
    if (want == NULL) {
        assert_int_equal(rc, PC_NOT_FOUND);
    } else {
        assert_int_equal(rc, PC_OK);
        assert_int_equal(v.len, strlen(want));
        assert_memory_equal(v.data, want, v.len);
    }
    pc_buf_free(&v);
}

static void named_values_go_with_batches_and_images(void **state)
{
    trio *t = *state;
    pc_buf b = {0}, img = {0};
    char longest[PC_META_NAME_MAX + 2];
    memset(longest, 'n', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    assert_int_equal(pc_batch_set_meta(&b, "", "v", 1), PC_INVALID);
    assert_int_equal(pc_batch_set_meta(&b, longest, "v", 1), PC_INVALID);
    longest[PC_META_NAME_MAX] = '\0'; /* the longest name there may be */
    assert_int_equal(pc_batch_set_meta(&b, longest, "L", 1), PC_OK);
    assert_int_equal(pc_batch_set_meta(&b, "regions", "one", 3), PC_OK);
    assert_int_equal(pc_batch_set_meta(&b, "regions", "two", 3), PC_OK);
    assert_int_equal(pc_batch_set_meta(&b, "empty", NULL, 0), PC_OK);
    pc_slice v;
    assert_int_equal(pc_batch_meta(b.data, b.len, "regions", &v), PC_OK);
    assert_int_equal(v.len, 3);
    assert_memory_equal(v.data, "two", 3); /* the last one set */
    assert_int_equal(pc_batch_meta(b.data, b.len, "region", &v), PC_NOT_FOUND);
    assert_int_equal(pc_batch_meta(b.data, b.len - 1, "regions", &v), PC_INVALID);
    /* Cut short anywhere: not a batch. */
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(pc_batch_check(b.data, n), PC_INVALID);

    meta_is(t->follower, "regions", NULL);
    assert_int_equal(pc_apply_batch(t->follower->s, b.data, b.len, 1), PC_OK);
    meta_is(t->follower, "regions", "two");
    meta_is(t->follower, longest, "L");
    meta_is(t->follower, "empty", "");
    /* A replay is skipped: a later value stays. */
    b.len = 0;
    assert_int_equal(pc_batch_set_meta(&b, "regions", "three", 5), PC_OK);
    assert_int_equal(pc_apply_batch(t->follower->s, b.data, b.len, 2), PC_OK);
    b.len = 0;
    assert_int_equal(pc_batch_set_meta(&b, "regions", "one", 3), PC_OK);
    assert_int_equal(pc_apply_batch(t->follower->s, b.data, b.len, 2), PC_OK);
    fx_reopen(t->follower);
    meta_is(t->follower, "regions", "three");

    /* The image carries them; installed, it replaces the store's own. */
    fx *c = fx_new();
    b.len = 0;
    assert_int_equal(pc_batch_set_meta(&b, "stale", "x", 1), PC_OK);
    assert_int_equal(pc_batch_set_meta(&b, "regions", "old", 3), PC_OK);
    assert_int_equal(pc_apply_batch(c->s, b.data, b.len, 1), PC_OK);
    uint64_t at = 0;
    assert_int_equal(pc_image_take(t->follower->s, &img, &at), PC_OK);
    assert_int_equal(at, 2);
    install(c, &img);
    meta_is(c, "regions", "three");
    meta_is(c, longest, "L");
    meta_is(c, "empty", "");
    meta_is(c, "stale", NULL);
    /* The values are not rows of the replicated tables. */
    same_tables(t->follower, c);
    pc_buf_free(&b);
    pc_buf_free(&img);
    fx_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(proposed_and_applied_equals_one_at_a_time, setup, teardown),
        cmocka_unit_test_setup_teardown(a_replay_changes_nothing_and_the_index_survives, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_malformed_batch_is_refused_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(joined_batches_apply_as_the_sequence, setup, teardown),
        cmocka_unit_test_setup_teardown(gc_proposed_in_parts_equals_a_single_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(a_pinned_image_is_of_its_moment, setup, teardown),
        cmocka_unit_test_setup_teardown(an_image_replaces_a_store_and_batches_follow_it, setup,
                                        teardown),
        cmocka_unit_test(an_image_larger_than_the_cache_is_installed),
        cmocka_unit_test_setup_teardown(named_values_go_with_batches_and_images, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
