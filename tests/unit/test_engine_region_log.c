/*
 * test_engine_region_log.c — regions' own logs applying into one store
 * (engine_replica.h, DESIGN §6.5 step 3):
 *
 *  - two regions' logs, ["", "m") and ["m", ...), proposed on a leader
 *    and applied there interleaved, applied on a follower one whole log
 *    after the other: the same tables; each region's index is its own
 *    (the node's log's untouched), a replay of either is skipped, and
 *    the indexes survive a restart;
 *  - a region's image (its range of the four tables, with its index)
 *    installed on a store with rows in both ranges replaces that range
 *    only: the range then equals the leader's, the other region's rows
 *    and index are as they were; cut short, or of the other range, it is
 *    refused and nothing changes; one below the region's index is
 *    skipped; the region's next batches apply on top;
 *  - a pinned region image is of its moment, while its region's batches
 *    go on being applied;
 *  - a region's batch that writes a key outside its range, or sets a
 *    named value, is refused: nothing written, the region's index stays.
 */
#include "engine_admin.h"
#include "engine_fixture.h"
#include "engine_replica.h"

#define MAX_BATCHES 16

/* A region's log: its batches in order, batch i at index i + 1. */
typedef struct {
    pc_buf b[MAX_BATCHES];
    size_t n;
} rlog;

typedef struct {
    fx *leader;
    rlog logs[3];   /* by region; region 0 unused */
} cluster;

static const pc_slice NONE = {NULL, 0};
/* Batch b applied on f as number index of region r's log: region 1 is
 * ["", "m"), region 2 ["m", ...). */
static pc_rc apply_in(fx *f, uint64_t r, const pc_buf *b, uint64_t index)
{
    pc_slice m = S("m");
    return pc_apply_region_batch(f->s, r, r == 1 ? S("") : m, r == 1 ? m : NONE, b->data, b->len,
                                 index);
}

/* key written on the leader as region r's next batch: proposed, applied
 * there at the region's next index, and kept in its log. */
static void propose(cluster *c, uint64_t r, const char *key, uint64_t start, bool lock_only)
{
    rlog *g = &c->logs[r];
    pc_buf *b = &g->b[g->n];
    assert_true(g->n < MAX_BATCHES);
    pc_session_propose(c->leader->s, b);
    assert_int_equal(fx_write_key(c->leader->s, key, start, lock_only), PC_OK);
    pc_latches *held = pc_session_take_latches(c->leader->s);
    pc_session_propose(c->leader->s, NULL);
    g->n++;
    assert_int_equal(apply_in(c->leader, r, b, g->n), PC_OK);
    pc_latches_release(held);
}

/* Region r's log, batches from..n-1, applied on f. */
static void replay(cluster *c, fx *f, uint64_t r, size_t from)
{
    rlog *g = &c->logs[r];
    for (size_t i = from; i < g->n; i++)
        assert_int_equal(apply_in(f, r, &g->b[i], i + 1), PC_OK);
}

static void observe_n(fx *f)
{
    pc_slice prefix = S("n");
    assert_int_equal(pc_notify_set_prefixes(f->e, &prefix, 1), PC_OK);
}

static void same_tables(fx *a, fx *b)
{
    static const char *const tables[] = {"data", "lock", "write"};
    static char da[64 << 10], db[64 << 10];
    for (size_t i = 0; i < 3; i++) {
        fx_dump(a, tables[i], da, sizeof da);
        fx_dump(b, tables[i], db, sizeof db);
        assert_string_equal(da, db);
    }
}

static uint64_t applied(fx *f, uint64_t r)
{
    uint64_t index = 99;
    if (r == 0)
        assert_int_equal(pc_applied_index(f->s, &index), PC_OK);
    else
        assert_int_equal(pc_region_applied_index(f->s, r, &index), PC_OK);
    return index;
}

static int setup(void **state)
{
    cluster *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->leader = fx_new();
    observe_n(c->leader);
    /* region 1: a, b, c and d's lock; region 2: m, n1 (observed), x and
     * y's lock; interleaved */
    propose(c, 1, "a", 10, false);
    propose(c, 2, "m", 11, false);
    propose(c, 1, "b", 20, false);
    propose(c, 2, "n1", 21, false);
    propose(c, 2, "x", 31, false);
    propose(c, 1, "c", 30, false);
    propose(c, 1, "d", 40, true);
    propose(c, 2, "y", 41, true);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    cluster *c = *state;
    for (int r = 0; r < 3; r++)
        for (size_t i = 0; i < c->logs[r].n; i++)
            pc_buf_free(&c->logs[r].b[i]);
    fx_free(c->leader);
    free(c);
    return 0;
}

static void each_regions_log_applies_into_one_store(void **state)
{
    cluster *c = *state;
    fx *f = fx_new();
    observe_n(f);
    replay(c, f, 2, 0); /* one region's whole log, then the other's */
    replay(c, f, 1, 0);
    same_tables(c->leader, f);
    assert_int_equal(applied(f, 1), 4);
    assert_int_equal(applied(f, 2), 4);
    assert_int_equal(applied(f, 0), 0);
    fx_value_is(f, "n1", "n1v");

    /* A replay of either log is skipped; the indexes are the regions'. */
    replay(c, f, 1, 1);
    replay(c, f, 2, 0);
    same_tables(c->leader, f);
    fx_reopen(f);
    assert_int_equal(applied(f, 1), 4);
    assert_int_equal(applied(f, 2), 4);
    assert_int_equal(applied(f, 0), 0);

    /* Region 1's next batch applies after a restart; region 2 does not
     * take it as its own fifth (its index stays). */
    propose(c, 1, "e", 50, false);
    replay(c, f, 1, 4);
    same_tables(c->leader, f);
    assert_int_equal(applied(f, 1), 5);
    assert_int_equal(applied(f, 2), 4);
    fx_free(f);
}

static void a_regions_image_replaces_its_range_only(void **state)
{
    cluster *c = *state;
    fx *s = fx_new(), *behind = fx_new();
    observe_n(s);
    observe_n(behind);
    /* rows of both ranges the image must remove or keep: in region 1's,
     * up to its end's edge, a lock and an observed key's notify row */
    pc_slice prefixes[2] = {S("n"), S("b")};
    assert_int_equal(pc_notify_set_prefixes(s->e, prefixes, 2), PC_OK);
    fx_put_committed(s, "b", "old", 3, 4);
    fx_put_committed(s, "l\xff", "edge", 9, 10);
    pc_txn_meta t = fx_meta(11, "c-lock");
    pc_mutation m = PUT("c-lock", "locked");
    assert_int_equal(APPLY(s->s, pc_prewrite(s->s, &t, &m, 1, NULL)), PC_OK);
    fx_put_committed(s, "n9", "stale", 5, 6);
    fx_put_committed(s, "zz", "stale", 7, 8);
    pc_table_counts before, after;
    assert_int_equal(pc_count_rows(s->s, &before), PC_OK);
    assert_int_equal(before.lock, 1);
    assert_int_equal(before.notify, 2); /* b's and n9's */
    uint64_t own = applied(s, 0);
    replay(c, behind, 2, 0); /* then region 2 goes on without it */
    propose(c, 2, "p", 60, false);

    pc_buf img = {0}, r1 = {0}, early = {0}, mine = {0};
    uint64_t at = 0;
    assert_int_equal(pc_region_image_take(c->leader->s, 2, S("m"), NONE, &img, &at), PC_OK);
    assert_int_equal(at, 5);
    assert_int_equal(pc_region_image_take(c->leader->s, 1, S(""), S("m"), &r1, &at), PC_OK);
    assert_int_equal(at, 4);
    assert_int_equal(pc_region_image_take(behind->s, 2, S("m"), NONE, &early, &at), PC_OK);
    assert_int_equal(at, 4);

    /* Cut short anywhere, or region 1's image given as region 2's: refused,
     * nothing changed. */
    for (size_t n = 0; n < img.len; n += 5)
        assert_int_equal(pc_region_image_install(s->s, 2, S("m"), NONE, img.data, n),
                         PC_INVALID);
    assert_int_equal(pc_region_image_install(s->s, 2, S("m"), NONE, r1.data, r1.len),
                     PC_INVALID);
    fx_value_is(s, "zz", "stale");
    assert_int_equal(applied(s, 2), 0);

    assert_int_equal(pc_region_image_install(s->s, 2, S("m"), NONE, img.data, img.len), PC_OK);
    /* region 2's range is the leader's: the same image again */
    assert_int_equal(pc_region_image_take(s->s, 2, S("m"), NONE, &mine, &at), PC_OK);
    assert_int_equal(at, 5);
    assert_int_equal(mine.len, img.len);
    assert_memory_equal(mine.data, img.data, img.len);
    fx_value_is(s, "zz", NULL);
    fx_value_is(s, "n9", NULL);
    fx_value_is(s, "p", "pv");
    /* region 1's rows, its lock and notify row, and the node's index as
     * they were; region 2's are the leader's (y's lock, n1's notify row) */
    fx_value_is(s, "b", "old");
    fx_value_is(s, "l\xff", "edge");
    fx_value_is(s, "a", NULL);
    char v[16];
    assert_int_equal(fx_get(s, "c-lock", 1000, v, sizeof v), PC_LOCKED);
    assert_int_equal(pc_count_rows(s->s, &after), PC_OK);
    assert_int_equal(after.lock, 2);
    assert_int_equal(after.notify, 2);
    assert_int_equal(applied(s, 0), own);
    assert_int_equal(applied(s, 1), 0);

    /* An image below what the region applied is skipped; its next batches
     * apply on top, across a restart. */
    assert_int_equal(pc_region_image_install(s->s, 2, S("m"), NONE, early.data, early.len),
                     PC_OK);
    fx_value_is(s, "p", "pv");
    fx_reopen(s);
    propose(c, 2, "q", 70, false);
    replay(c, s, 2, 5);
    fx_value_is(s, "q", "qv");
    assert_int_equal(applied(s, 2), 6);
    mine.len = img.len = 0;
    assert_int_equal(pc_region_image_take(s->s, 2, S("m"), NONE, &mine, &at), PC_OK);
    assert_int_equal(pc_region_image_take(c->leader->s, 2, S("m"), NONE, &img, &at), PC_OK);
    assert_int_equal(mine.len, img.len);
    assert_memory_equal(mine.data, img.data, img.len);

    /* Region 1's image over a store holding region 2's first key: the
     * range ends before it. */
    fx *u = fx_new();
    fx_put_committed(u, "m", "kept", 3, 4);
    fx_put_committed(u, "a", "old", 5, 6);
    assert_int_equal(pc_region_image_install(u->s, 1, S(""), S("m"), r1.data, r1.len), PC_OK);
    fx_value_is(u, "m", "kept");
    fx_value_is(u, "a", "av");
    fx_free(u);

    pc_buf_free(&img);
    pc_buf_free(&r1);
    pc_buf_free(&early);
    pc_buf_free(&mine);
    fx_free(behind);
    fx_free(s);
}

static void a_pinned_region_image_is_of_its_moment(void **state)
{
    cluster *c = *state;
    pc_session *pin = NULL;
    uint64_t at = 0;
    pc_buf img = {0};
    assert_int_equal(pc_session_open(c->leader->e, &pin), PC_OK);
    assert_int_equal(pc_region_image_pin(pin, 2, &at), PC_OK);
    assert_int_equal(at, 4);
    propose(c, 2, "p", 60, false); /* applied while the image is pinned */
    propose(c, 1, "e", 50, false);
    assert_int_equal(pc_region_image_fill(pin, S("m"), NONE, &img), PC_OK);
    assert_int_equal(pc_image_unpin(pin), PC_OK);
    pc_session_close(pin);

    fx *f = fx_new();
    assert_int_equal(pc_region_image_install(f->s, 2, S("m"), NONE, img.data, img.len), PC_OK);
    assert_int_equal(applied(f, 2), 4);
    fx_value_is(f, "x", "xv");
    fx_value_is(f, "p", NULL);
    fx_value_is(f, "a", NULL);
    replay(c, f, 2, 4);
    fx_value_is(f, "p", "pv");
    pc_buf_free(&img);
    fx_free(f);
}

static void a_batch_outside_its_region_is_refused(void **state)
{
    cluster *c = *state;
    fx *f = fx_new();
    pc_buf named = {0}, both = {0};
    /* region 1's first batch (a) as region 2's; one that sets only a
     * named value; region 2's first (m) with a named value too */
    assert_int_equal(apply_in(f, 2, &c->logs[1].b[0], 1), PC_INVALID);
    assert_int_equal(pc_batch_set_meta(&named, "forged", "x", 1), PC_OK);
    assert_int_equal(apply_in(f, 2, &named, 1), PC_INVALID);
    assert_int_equal(pc_buf_append(&both, c->logs[2].b[0].data, c->logs[2].b[0].len), PC_OK);
    assert_int_equal(pc_batch_set_meta(&both, "forged", "x", 1), PC_OK);
    assert_int_equal(apply_in(f, 2, &both, 1), PC_INVALID);
    assert_int_equal(applied(f, 2), 0);
    assert_int_equal(applied(f, 1), 0);
    fx_value_is(f, "a", NULL);
    fx_value_is(f, "m", NULL);
    pc_buf meta = {0};
    assert_int_equal(pc_meta_get(f->s, "forged", &meta), PC_NOT_FOUND);
    /* the region's own batch applies at that index after all */
    assert_int_equal(apply_in(f, 2, &c->logs[2].b[0], 1), PC_OK);
    assert_int_equal(applied(f, 2), 1);
    fx_value_is(f, "m", "mv");
    pc_buf_free(&meta);
    pc_buf_free(&named);
    pc_buf_free(&both);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(each_regions_log_applies_into_one_store, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_regions_image_replaces_its_range_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_pinned_region_image_is_of_its_moment, setup, teardown),
        cmocka_unit_test_setup_teardown(a_batch_outside_its_region_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
