/*
 * test_engine_region_rows.c — a region's range and epoch as rows of the
 * store, and splits in a region's own log (engine_replica.h,
 * region_rows.c, region_codec.c, split.c; DESIGN §6.5 step 6 (d), (e)):
 *
 *  - a region's own batch sets its row, which reads back and survives a
 *    restart; the rows are listed in id order;
 *  - a batch that sets another region's row, or its own wider than its
 *    range, is refused whole (nothing written, the index as it was); a
 *    row that is not a region is never encoded, and a batch holding one
 *    does not decode;
 *  - a region's image carries its row, taken at once or pinned, and the
 *    install sets it; it is of the row's range, whatever range its taker
 *    gives;
 *  - a replica that missed a split (its range still the parent's wider
 *    one) installing the parent's later image replaces only the range the
 *    image's row names: the rows past it (the new region's on this node)
 *    stay, and the row is the image's; an image whose row is another
 *    region's, or wider than the replica's range, is refused; one the
 *    replica passed already is skipped before any check (a restart after
 *    a split: the range is narrower than that image's);
 *  - a split in the parent's log (pc_region_split) cuts the region into
 *    parts on every replica at one index, and a second split proposed
 *    from the same state applies on none; splits the leader must not
 *    make are refused, and so is a batch whose rows do not cut the
 *    region's range exactly, or whose own row starts above its range;
 *  - a node that missed a split fills the hole from a peer's image of each
 *    new region taken before its own log applied anything (step k): the
 *    row and the rows the node never applied, its stale rows there gone;
 *    refused again, beside a row that meets the range, from an image
 *    whose log ran, or from one that is not one region's; a fill larger
 *    than one part sets the row with its last;
 *  - a new store is seeded with its first rows once: never over rows;
 *  - the node's one log sets no row and a whole store's image holds none;
 *    a split's new region's row does not depend on what the node held;
 *    a row with bytes past its end does not decode.
 */
#include "engine_admin.h"
#include "engine_fixture.h"
#include "engine_replica.h"

static const pc_slice NONE = {NULL, 0};
static pc_region_row row(uint64_t id, uint64_t epoch, const char *start, const char *end)
{
    return (pc_region_row){id, epoch, S(start), end != NULL ? S(end) : NONE};
}

/* A batch into b (emptied first): a one-phase put of key (value: the key
 * and "v") at start, proposed on w, if key is not NULL; then with set,
 * "region set->id is *set". */
static void region_batch(fx *w, const char *key, uint64_t start, const pc_region_row *set,
                         pc_buf *b)
{
    b->len = 0;
    if (key != NULL) {
        pc_session_propose(w->s, b);
        assert_int_equal(fx_write_key(w->s, key, start, false), PC_OK);
        pc_latches *held = pc_session_take_latches(w->s);
        pc_session_propose(w->s, NULL);
        pc_latches_release(held);
    }
    if (set != NULL)
        assert_int_equal(pc_batch_set_region(b, set), PC_OK);
}

static pc_rc apply_as(fx *f, const pc_region_row *range, const pc_buf *b, uint64_t index)
{
    return pc_apply_region_batch(f->s, range->id, range->start, range->end, b->data, b->len,
                                 index);
}

static void row_is(fx *f, uint64_t id, uint64_t epoch, const char *start, const char *end)
{
    pc_buf mem = {0};
    pc_region_row r;
    assert_int_equal(pc_region_row_get(f->s, id, &r, &mem), PC_OK);
    assert_int_equal(r.id, id);
    assert_int_equal(r.epoch, epoch);
    assert_int_equal(r.start.len, strlen(start));
    assert_memory_equal(r.start.data, start, r.start.len);
    if (end == NULL) {
        assert_null(r.end.data);
    } else {
        assert_int_equal(r.end.len, strlen(end));
        assert_memory_equal(r.end.data, end, r.end.len);
    }
    pc_buf_free(&mem);
}

static uint64_t applied(fx *f, uint64_t region)
{
    uint64_t index = 99;
    assert_int_equal(pc_region_applied_index(f->s, region, &index), PC_OK);
    return index;
}

typedef struct {
    uint64_t ids[8];
    size_t n;
} listed;

static int list_one(void *arg, const pc_region_row *r)
{
    listed *l = arg;
    assert_true(l->n < 8);
    l->ids[l->n++] = r->id;
    return 0;
}

static void a_regions_batch_sets_its_own_row(void **state)
{
    (void)state;
    fx *w = fx_new(), *f = fx_new();
    pc_buf b = {0}, mem = {0};
    pc_region_row whole = row(1, 1, "", NULL), left = row(1, 1, "", "m"),
                  right = row(2, 1, "m", NULL), r;
    assert_int_equal(pc_region_row_get(f->s, 1, &r, &mem), PC_NOT_FOUND);

    region_batch(w, "a", 10, &whole, &b);
    assert_int_equal(apply_as(f, &whole, &b, 1), PC_OK);
    row_is(f, 1, 1, "", NULL);
    fx_value_is(f, "a", "av");

    /* Another region's row, or its own wider than its range: refused
     * whole, the put with it too. */
    region_batch(w, "b", 20, &right, &b);
    assert_int_equal(apply_as(f, &left, &b, 2), PC_INVALID);
    region_batch(w, "b", 20, &whole, &b);
    assert_int_equal(apply_as(f, &left, &b, 2), PC_INVALID);
    pc_region_row two = row(2, 1, "m", NULL);
    region_batch(w, "b", 20, &two, &b); /* inside, but only another's */
    assert_int_equal(apply_as(f, &whole, &b, 2), PC_INVALID);
    fx_value_is(f, "b", NULL);
    assert_int_equal(applied(f, 1), 1);
    row_is(f, 1, 1, "", NULL);

    /* Narrowed inside its range (what a split does to the left part) at
     * the next epoch; region 2's own batch sets its row. */
    pc_region_row narrowed = row(1, 2, "", "m"), r2 = row(2, 2, "m", NULL);
    region_batch(w, "b", 20, &narrowed, &b);
    assert_int_equal(apply_as(f, &whole, &b, 2), PC_OK);
    region_batch(w, NULL, 0, &r2, &b);
    assert_int_equal(apply_as(f, &r2, &b, 1), PC_OK);
    fx_reopen(f);
    row_is(f, 1, 2, "", "m");
    row_is(f, 2, 2, "m", NULL);
    listed l = {{0}, 0};
    assert_int_equal(pc_region_rows_each(f->s, list_one, &l), PC_OK);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.ids[0], 1);
    assert_int_equal(l.ids[1], 2);

    /* What is not a region never goes into a batch. */
    pc_region_row bad[] = {row(0, 1, "", NULL), row(3, 0, "", NULL), row(3, 1, "m", "m"),
                           row(3, 1, "m", "a")};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(pc_region_row_ok(&bad[i]));
        assert_int_equal(pc_batch_set_region(&b, &bad[i]), PC_INVALID);
    }
    /* A batch whose row is changed into one that is not does not decode:
     * the end flag, then the epoch made 0. */
    pc_region_row third = row(1, 3, "", "c");
    region_batch(w, NULL, 0, &third, &b);
    size_t flag = b.len - 1 - 4 - 1; /* the flag, the end's length, "c" */
    assert_int_equal(b.data[flag], 1);
    b.data[flag] = 2;
    assert_int_equal(apply_as(f, &whole, &b, 3), PC_INVALID);
    b.data[flag] = 1;
    size_t epoch = 8 + 1 + 8 + 4; /* the header, the op, the id, the value's length */
    assert_int_equal(b.data[epoch + 7], 3);
    b.data[epoch + 7] = 0;
    assert_int_equal(apply_as(f, &whole, &b, 3), PC_INVALID);
    b.data[epoch + 7] = 3;
    assert_int_equal(apply_as(f, &whole, &b, 3), PC_OK); /* as it was: it decodes */
    row_is(f, 1, 3, "", "c");

    pc_buf_free(&b);
    pc_buf_free(&mem);
    fx_free(w);
    fx_free(f);
}

static void an_image_carries_its_regions_row(void **state)
{
    (void)state;
    fx *leader = fx_new(), *f = fx_new(), *g = fx_new();
    pc_buf b = {0}, img = {0}, pinned = {0};
    pc_region_row whole = row(1, 1, "", NULL), narrowed = row(1, 2, "", "m");
    region_batch(leader, "a", 10, &whole, &b);
    assert_int_equal(apply_as(leader, &whole, &b, 1), PC_OK);
    region_batch(leader, "b", 20, &narrowed, &b);
    assert_int_equal(apply_as(leader, &whole, &b, 2), PC_OK);

    uint64_t at = 0;
    assert_int_equal(pc_region_image_take(leader->s, 1, S(""), S("m"), &img, &at), PC_OK);
    assert_int_equal(at, 2);
    assert_int_equal(pc_region_image_install(f->s, 1, S(""), NONE, img.data, img.len), PC_OK);
    row_is(f, 1, 2, "", "m");
    fx_value_is(f, "b", "bv");

    /* pinned, the same */
    pc_session *pin = NULL;
    assert_int_equal(pc_session_open(leader->e, &pin), PC_OK);
    assert_int_equal(pc_region_image_pin(pin, 1, &at), PC_OK);
    assert_int_equal(pc_region_image_fill(pin, S(""), S("m"), &pinned), PC_OK);
    assert_int_equal(pc_image_unpin(pin), PC_OK);
    pc_session_close(pin);
    assert_int_equal(pinned.len, img.len);
    assert_memory_equal(pinned.data, img.data, img.len);
    assert_int_equal(pc_region_image_install(g->s, 1, S(""), NONE, pinned.data, pinned.len),
                     PC_OK);
    row_is(g, 1, 2, "", "m");

    pc_buf_free(&b);
    pc_buf_free(&img);
    pc_buf_free(&pinned);
    fx_free(leader);
    fx_free(f);
    fx_free(g);
}

static void a_replica_that_missed_a_split_takes_the_images_range(void **state)
{
    (void)state;
    fx *leader = fx_new(), *behind = fx_new();
    pc_buf b = {0}, img = {0}, wide = {0}, other = {0};
    pc_region_row whole = row(1, 1, "", NULL), narrowed = row(1, 2, "", "m"),
                  r2 = row(2, 2, "m", NULL);
    /* Region 1's log: its row over everything, a, p; the split narrowing
     * it to ["", "m"); b. The replica behind applied the first three. */
    region_batch(leader, "a", 10, &whole, &b);
    assert_int_equal(apply_as(leader, &whole, &b, 1), PC_OK);
    assert_int_equal(apply_as(behind, &whole, &b, 1), PC_OK);
    region_batch(leader, "p", 20, NULL, &b);
    assert_int_equal(apply_as(leader, &whole, &b, 2), PC_OK);
    assert_int_equal(apply_as(behind, &whole, &b, 2), PC_OK);
    assert_int_equal(pc_region_image_take(leader->s, 1, S(""), NONE, &wide, NULL), PC_OK);
    region_batch(leader, NULL, 0, &narrowed, &b);
    assert_int_equal(apply_as(leader, &whole, &b, 3), PC_OK);
    region_batch(leader, "b", 30, NULL, &b);
    assert_int_equal(apply_as(leader, &narrowed, &b, 4), PC_OK);
    /* Region 2's replica on the node behind, made meanwhile, wrote q. */
    region_batch(behind, "q", 40, &r2, &b);
    assert_int_equal(apply_as(behind, &r2, &b, 1), PC_OK);

    uint64_t at = 0;
    assert_int_equal(pc_region_image_take(leader->s, 1, S(""), S("m"), &img, &at), PC_OK);
    assert_int_equal(at, 4);
    /* Taken by a caller that still thinks the range wider: the same image
     * (of the row's range: p is not in it). */
    pc_buf stale = {0};
    assert_int_equal(pc_region_image_take(leader->s, 1, S(""), NONE, &stale, NULL), PC_OK);
    assert_int_equal(stale.len, img.len);
    assert_memory_equal(stale.data, img.data, img.len);
    pc_buf_free(&stale);

    /* Refused by a replica that has not passed them, nothing changed:
     * region 2's image as region 1's; an image wider than the replica's
     * range (the image before the split, to a replica narrowed). */
    fx *fresh = fx_new();
    assert_int_equal(pc_region_image_take(behind->s, 2, S("m"), NONE, &other, NULL), PC_OK);
    assert_int_equal(pc_region_image_install(fresh->s, 1, S(""), NONE, other.data, other.len),
                     PC_INVALID);
    assert_int_equal(pc_region_image_install(fresh->s, 1, S(""), S("m"), wide.data, wide.len),
                     PC_INVALID);
    assert_int_equal(applied(fresh, 1), 0);
    fx_free(fresh);
    /* One it passed (libraft hands its last image back at a restart, after
     * a split narrowed the range): skipped, whatever its range. */
    assert_int_equal(pc_region_image_install(behind->s, 1, S(""), S("m"), wide.data, wide.len),
                     PC_OK);
    assert_int_equal(applied(behind, 1), 2);
    fx_value_is(behind, "p", "pv");

    /* Installed with the replica's own (wider) range: only ["", "m") is
     * the image's; q (region 2's) and p (the parent's old row past the
     * split, now no region's here) stay. */
    assert_int_equal(pc_region_image_install(behind->s, 1, S(""), NONE, img.data, img.len),
                     PC_OK);
    row_is(behind, 1, 2, "", "m");
    row_is(behind, 2, 2, "m", NULL);
    assert_int_equal(applied(behind, 1), 4);
    assert_int_equal(applied(behind, 2), 1);
    fx_value_is(behind, "a", "av");
    fx_value_is(behind, "b", "bv");
    fx_value_is(behind, "q", "qv");
    fx_value_is(behind, "p", "pv");

    pc_buf_free(&b);
    pc_buf_free(&img);
    pc_buf_free(&wide);
    pc_buf_free(&other);
    fx_free(leader);
    fx_free(behind);
}

/* A copy of batch bytes into b (emptied first). */
static void odd_image(pc_buf *b, const void *batch, size_t len)
{
    b->len = 0;
    assert_int_equal(pc_buf_append(b, batch, len), PC_OK);
}

/* An image of batch at applied index 0 into image (emptied first). */
static void with_index_0(pc_buf *image, const pc_buf *batch)
{
    static const char zero[8];
    image->len = 0;
    assert_int_equal(pc_buf_append(image, zero, 8), PC_OK);
    assert_int_equal(pc_buf_append(image, batch->data, batch->len), PC_OK);
}

/* Step k: a node that missed a split of region 1 at m and s (it caught
 * up with region 1 by an image taken after it) has a hole from m on,
 * where regions 2 ([m, s)) and 3 ([s, ...)) are; a peer's image of each,
 * taken before its own log applied anything, fills its part of the hole:
 * the row and the rows the node never applied (q), its stale rows and
 * lock there gone (z, zl), the rest of the hole left alone. Refused:
 * again (the node has the row now), into a hole where a row meets the
 * range (and not beside rows that end at its start and begin at its
 * end), an image of a region whose log applied entries, of two rows, of
 * none, of a row outside its range. */
static void a_node_that_missed_a_split_fills_the_hole_from_a_peers_image(void **state)
{
    (void)state;
    fx *leader = fx_new(), *behind = fx_new();
    pc_buf b = {0}, img1 = {0}, img2 = {0}, img3 = {0};
    pc_region_row whole = row(1, 1, "", NULL);
    region_batch(leader, "a", 10, &whole, &b);
    assert_int_equal(apply_as(leader, &whole, &b, 1), PC_OK);
    assert_int_equal(apply_as(behind, &whole, &b, 1), PC_OK);
    region_batch(leader, "q", 20, NULL, &b); /* behind never applies it */
    assert_int_equal(apply_as(leader, &whole, &b, 2), PC_OK);
    /* behind's own index 2 (as a store of before its lag): z and a lock
     * on zl, which no replica of the new regions holds */
    region_batch(behind, "z", 20, NULL, &b);
    pc_session_propose(behind->s, &b);
    assert_int_equal(fx_write_key(behind->s, "zl", 22, true), PC_OK);
    pc_latches_release(pc_session_take_latches(behind->s));
    pc_session_propose(behind->s, NULL);
    assert_int_equal(apply_as(behind, &whole, &b, 2), PC_OK);
    fx_value_is(behind, "z", "zv");
    assert_int_equal(fx_get(behind, "zl", 1000, NULL, 0), PC_LOCKED);
    pc_slice keys[] = {S("m"), S("s")};
    uint64_t ids[] = {2, 3};
    b.len = 0; /* pc_region_split appends */
    assert_int_equal(pc_region_split(leader->s, 1, keys, ids, 2, &b), PC_OK);
    assert_int_equal(apply_as(leader, &whole, &b, 3), PC_OK);
    pc_region_row left = row(1, 2, "", "m");
    region_batch(leader, "b", 30, NULL, &b);
    assert_int_equal(apply_as(leader, &left, &b, 4), PC_OK);

    /* behind catches up with region 1 by its image: a hole from m on */
    assert_int_equal(pc_region_image_take(leader->s, 1, S(""), NONE, &img1, NULL), PC_OK);
    assert_int_equal(pc_region_image_install(behind->s, 1, S(""), NONE, img1.data, img1.len),
                     PC_OK);
    pc_region_row none;
    pc_buf mem = {0};
    assert_int_equal(pc_region_row_get(behind->s, 2, &none, &mem), PC_NOT_FOUND);
    uint64_t id = 0;
    const char *why = NULL;
    /* region 1's image is no fill: its log applied entries, and it has it */
    assert_int_equal(pc_region_fill(behind->s, img1.data, img1.len, &id, &why), PC_INVALID);
    assert_int_equal(id, 1);
    assert_non_null(why);

    uint64_t at = 99;
    assert_int_equal(pc_region_image_take(leader->s, 2, S("m"), S("s"), &img2, &at), PC_OK);
    assert_int_equal(at, 0);
    assert_int_equal(pc_region_fill(behind->s, img2.data, img2.len, &id, &why), PC_OK);
    assert_int_equal(id, 2);
    row_is(behind, 2, 2, "m", "s");
    row_is(behind, 1, 2, "", "m");
    fx_value_is(behind, "q", "qv");
    fx_value_is(behind, "b", "bv");
    fx_value_is(behind, "z", "zv"); /* region 3's part of the hole: untouched */
    assert_int_equal(applied(behind, 2), 0);
    assert_int_equal(pc_region_fill(behind->s, img2.data, img2.len, &id, &why), PC_INVALID);
    assert_string_equal(why, "this node has a row of that region already");
    assert_int_equal(pc_region_image_take(leader->s, 3, S("s"), NONE, &img3, &at), PC_OK);
    assert_int_equal(pc_region_fill(behind->s, img3.data, img3.len, &id, &why), PC_OK);
    row_is(behind, 3, 2, "s", NULL);
    fx_value_is(behind, "z", NULL); /* the hole emptied first */
    assert_int_equal(fx_get(behind, "zl", 1000, NULL, 0), PC_NOT_FOUND);

    /* a hole on another node that a row meets: nothing written */
    fx *other = fx_new();
    pc_region_row seeded = row(1, 1, "", "n");
    assert_int_equal(pc_region_rows_seed(other->s, &seeded, 1), PC_OK);
    assert_int_equal(pc_region_fill(other->s, img2.data, img2.len, &id, &why), PC_INVALID);
    assert_string_equal(why, "the region's range meets a region of this node");
    assert_int_equal(pc_region_row_get(other->s, 2, &none, &mem), PC_NOT_FOUND);
    fx_free(other);
    /* one whose rows end where the range starts and begin where it ends */
    fx *beside = fx_new();
    pc_region_row around[] = {row(1, 1, "", "m"), row(3, 1, "s", NULL)};
    assert_int_equal(pc_region_rows_seed(beside->s, around, 2), PC_OK);
    assert_int_equal(pc_region_fill(beside->s, img2.data, img2.len, &id, &why), PC_OK);
    row_is(beside, 2, 2, "m", "s");
    fx_value_is(beside, "q", "qv");
    fx_free(beside);
    /* not images of one region's rows: two rows; none; a row outside */
    pc_buf odd = {0};
    pc_region_row extra = row(5, 1, "x", NULL);
    odd_image(&odd, img2.data + 8, img2.len - 8);
    assert_int_equal(pc_batch_set_region(&odd, &extra), PC_OK);
    pc_buf image = {0};
    with_index_0(&image, &odd);
    assert_int_equal(pc_region_fill(behind->s, image.data, image.len, &id, &why), PC_INVALID);
    assert_string_equal(why, "not an image of one region with its row");
    region_batch(leader, "c", 35, NULL, &odd);
    with_index_0(&image, &odd);
    assert_int_equal(pc_region_fill(behind->s, image.data, image.len, &id, &why), PC_INVALID);
    assert_string_equal(why, "not an image of one region with its row");
    pc_region_row r9 = row(9, 1, "x", NULL);
    region_batch(leader, "c", 36, &r9, &odd); /* c is not in [x, ...) */
    with_index_0(&image, &odd);
    fx *empty9 = fx_new();
    assert_int_equal(pc_region_fill(empty9->s, image.data, image.len, &id, &why), PC_INVALID);
    assert_string_equal(why, "the image holds rows outside its region's range");
    assert_int_equal(pc_region_row_get(empty9->s, 9, &none, &mem), PC_NOT_FOUND);
    fx_free(empty9);
    pc_buf_free(&odd);
    pc_buf_free(&image);

    /* region 2's log applied a batch: its image is no longer the split's */
    region_batch(leader, "r", 40, NULL, &b);
    pc_region_row r2 = row(2, 2, "m", "s");
    assert_int_equal(apply_as(leader, &r2, &b, 1), PC_OK);
    assert_int_equal(pc_region_image_take(leader->s, 2, S("m"), S("s"), &img2, &at), PC_OK);
    assert_int_equal(at, 1);
    fx *empty = fx_new();
    assert_int_equal(pc_region_fill(empty->s, img2.data, img2.len, &id, &why), PC_INVALID);
    assert_string_equal(why, "the region's own log applied entries where the image was taken");
    /* not an image */
    assert_int_equal(pc_region_fill(empty->s, img2.data, 4, &id, &why), PC_INVALID);
    fx_free(empty);

    pc_buf_free(&mem);
    pc_buf_free(&b);
    pc_buf_free(&img1);
    pc_buf_free(&img2);
    pc_buf_free(&img3);
    fx_free(leader);
    fx_free(behind);
}

typedef struct {
    int parts;   /* parts committed before the last */
    int had_row; /* of them, with region 2's row already there */
} parts_seen;

static void part_done(void *arg, pc_session *s)
{
    parts_seen *p = arg;
    pc_region_row r;
    pc_buf mem = {0};
    p->parts++;
    p->had_row += pc_region_row_get(s, 2, &r, &mem) == PC_OK;
    pc_buf_free(&mem);
}

/* A fill larger than one part (engine/apply.c installs images in parts
 * of 8 MiB, each its own transaction) sets the row with its last part
 * only: a crash between parts leaves a hole, not a region half there. */
static void a_fill_sets_the_row_with_its_last_part(void **state)
{
    (void)state;
    fx *leader = fx_new(), *behind = fx_new();
    parts_seen seen = {0, 0};
    fx_close_engine(behind); /* reopened telling of each part */
    pc_engine_config cfg = {.dir = behind->dir, .sync = 1, .cache_size = "64MB",
                            .image_part_done = part_done, .image_arg = &seen};
    assert_int_equal(pc_engine_open(&cfg, &behind->e), PC_OK);
    assert_int_equal(pc_session_open(behind->e, &behind->s), PC_OK);
    pc_region_row whole = row(1, 1, "", NULL), hole_before = row(1, 2, "", "m");
    assert_int_equal(pc_region_rows_seed(behind->s, &hole_before, 1), PC_OK);
    enum { BIG = 256 << 10, KEYS = 40 }; /* 10 MiB */
    char *big = malloc(BIG + 1);
    assert_non_null(big);
    memset(big, 'x', BIG);
    big[BIG] = '\0';
    pc_buf b = {0}, img = {0};
    for (int k = 0; k < KEYS; k++) {
        char key[16];
        snprintf(key, sizeof key, "n%02d", k);
        pc_txn_meta t = fx_meta(100 + 2 * (uint64_t)k, key);
        pc_mutation mu = PUT(key, big);
        uint64_t cts;
        b.len = 0;
        if (k == 0)
            assert_int_equal(pc_batch_set_region(&b, &whole), PC_OK);
        pc_session_propose(leader->s, &b);
        fx_commit_at = 101 + 2 * (uint64_t)k;
        assert_int_equal(pc_one_pc(leader->s, &t, &mu, 1, fx_commit_ts, NULL, &cts, NULL),
                         PC_OK);
        pc_latches_release(pc_session_take_latches(leader->s));
        pc_session_propose(leader->s, NULL);
        assert_int_equal(apply_as(leader, &whole, &b, (uint64_t)k + 1), PC_OK);
    }
    pc_slice m = S("m");
    uint64_t two = 2;
    b.len = 0;
    assert_int_equal(pc_region_split(leader->s, 1, &m, &two, 1, &b), PC_OK);
    assert_int_equal(apply_as(leader, &whole, &b, KEYS + 1), PC_OK);
    assert_int_equal(pc_region_image_take(leader->s, 2, S("m"), NONE, &img, NULL), PC_OK);
    assert_true(img.len > (size_t)KEYS * BIG);

    uint64_t id = 0;
    const char *why = NULL;
    assert_int_equal(pc_region_fill(behind->s, img.data, img.len, &id, &why), PC_OK);
    printf("# a fill of %zu bytes: %d part(s) before the last\n", img.len, seen.parts);
    assert_true(seen.parts >= 1);
    assert_int_equal(seen.had_row, 0);
    row_is(behind, 2, 2, "m", NULL);
    char v[16];
    assert_int_equal(fx_get(behind, "n39", 1000, v, sizeof v), PC_OK);
    assert_int_equal(v[0], 'x');
    free(big);
    pc_buf_free(&b);
    pc_buf_free(&img);
    fx_free(leader);
    fx_free(behind);
}

/* A batch of the rows given, in that order (no write). */
static void rows_batch(pc_buf *b, const pc_region_row *rows, size_t n)
{
    b->len = 0;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(pc_batch_set_region(b, &rows[i]), PC_OK);
}

static void a_split_in_the_parents_log_cuts_it_on_every_replica(void **state)
{
    (void)state;
    fx *leader = fx_new(), *f = fx_new();
    pc_buf b = {0}, first = {0}, second = {0};
    pc_region_row whole = row(1, 1, "", NULL), left = row(1, 2, "", "m");
    region_batch(leader, "a", 10, &whole, &b);
    assert_int_equal(apply_as(leader, &whole, &b, 1), PC_OK);
    assert_int_equal(apply_as(f, &whole, &b, 1), PC_OK);
    region_batch(leader, "p", 20, NULL, &b);
    assert_int_equal(apply_as(leader, &whole, &b, 2), PC_OK);
    assert_int_equal(apply_as(f, &whole, &b, 2), PC_OK);

    /* Two splits proposed from the same state: the first cuts the region
     * on both replicas at index 3, the second applies on neither. */
    pc_slice m = S("m"), k = S("k");
    uint64_t two = 2, three = 3;
    assert_int_equal(pc_region_split(leader->s, 1, &m, &two, 1, &first), PC_OK);
    assert_int_equal(pc_region_split(f->s, 1, &k, &three, 1, &second), PC_OK);
    assert_int_equal(apply_as(leader, &whole, &first, 3), PC_OK);
    assert_int_equal(apply_as(f, &whole, &first, 3), PC_OK);
    fx *both[] = {leader, f};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(apply_as(both[i], &whole, &second, 4), PC_INVALID);
        row_is(both[i], 1, 2, "", "m");
        row_is(both[i], 2, 2, "m", NULL);
        assert_int_equal(applied(both[i], 1), 3);
        pc_region_row gone;
        pc_buf mem = {0};
        assert_int_equal(pc_region_row_get(both[i]->s, 3, &gone, &mem), PC_NOT_FOUND);
        pc_buf_free(&mem);
    }
    /* A write cut for the range before the split is outside it now. */
    region_batch(leader, "q", 30, NULL, &b);
    assert_int_equal(apply_as(f, &left, &b, 4), PC_INVALID);

    /* Splits the leader refuses to make: no row, a key not inside or not
     * above the one before, an id taken, 0, the region's or repeated, no
     * key, too many. The batch is as it was. */
    pc_slice inside2[] = {S("p"), S("s")}, backwards[] = {S("s"), S("p")};
    uint64_t ids[] = {3, 4}, same[] = {3, 3}, taken[] = {1, 4}, zero[] = {0, 4},
             own[] = {2, 4};
    pc_slice many[PC_SPLIT_MAX_KEYS + 1];
    uint64_t many_ids[PC_SPLIT_MAX_KEYS + 1];
    for (size_t i = 0; i <= PC_SPLIT_MAX_KEYS; i++)
        many[i] = S("p"), many_ids[i] = 10 + i;
    b.len = 0;
    assert_int_equal(pc_region_split(f->s, 9, &m, &three, 1, &b), PC_INVALID);
    assert_int_equal(pc_region_split(f->s, 2, &m, &three, 1, &b), PC_INVALID);
    assert_int_equal(pc_region_split(f->s, 1, &m, &three, 1, &b), PC_INVALID);
    assert_int_equal(pc_region_split(f->s, 2, backwards, ids, 2, &b), PC_INVALID);
    assert_int_equal(pc_region_split(f->s, 2, inside2, same, 2, &b), PC_INVALID);
    assert_int_equal(pc_region_split(f->s, 2, inside2, taken, 2, &b), PC_INVALID);
    assert_int_equal(pc_region_split(f->s, 2, inside2, zero, 2, &b), PC_INVALID);
    assert_int_equal(pc_region_split(f->s, 2, inside2, own, 2, &b), PC_INVALID);
    assert_int_equal(pc_region_split(f->s, 2, inside2, ids, 0, &b), PC_INVALID);
    assert_int_equal(pc_region_split(f->s, 2, many, many_ids, PC_SPLIT_MAX_KEYS + 1, &b),
                     PC_INVALID);
    assert_int_equal(b.len, 0);

    /* Rows that do not cut region 2's range ["m", ...) exactly: out of
     * order, a gap, an overlap, an id twice, short of its end; refused. */
    pc_region_row r2 = row(2, 2, "m", NULL);
    pc_region_row bad[][2] = {
        {row(3, 3, "s", NULL), row(2, 3, "m", "s")},
        {row(2, 3, "m", "p"), row(3, 3, "s", NULL)},
        {row(2, 3, "m", "s"), row(3, 3, "p", NULL)},
        {row(2, 3, "m", "s"), row(2, 3, "s", NULL)},
        {row(2, 3, "m", "s"), row(3, 3, "s", "z")},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rows_batch(&b, bad[i], 2);
        assert_int_equal(apply_as(f, &r2, &b, 1), PC_INVALID);
    }
    /* A row of the region's own that starts above its range's start (the
     * keys below it in no region): refused. */
    pc_region_row above = row(2, 3, "n", NULL);
    rows_batch(&b, &above, 1);
    assert_int_equal(apply_as(f, &r2, &b, 1), PC_INVALID);
    /* A batch split of region 2 in its own log: three parts. */
    b.len = 0;
    assert_int_equal(pc_region_split(f->s, 2, inside2, ids, 2, &b), PC_OK);
    assert_int_equal(apply_as(f, &r2, &b, 1), PC_OK);
    fx_reopen(f);
    row_is(f, 2, 3, "m", "p");
    row_is(f, 3, 3, "p", "s");
    row_is(f, 4, 3, "s", NULL);
    row_is(f, 1, 2, "", "m");
    fx_value_is(f, "p", "pv"); /* the rows stay where they are: region 3's now */

    pc_buf_free(&b);
    pc_buf_free(&first);
    pc_buf_free(&second);
    fx_free(leader);
    fx_free(f);
}

/* A batch of one SET_REGION whose value is the row's bytes and then
 * more: it does not decode (one encoding per row). */
static void trailing_bytes_do_not_decode(void)
{
    pc_buf b = {0};
    pc_region_row r = row(1, 1, "", NULL);
    assert_int_equal(pc_batch_set_region(&b, &r), PC_OK);
    size_t vlen_at = 8 + 1 + 8; /* the header, the op, the id */
    assert_int_equal(b.data[vlen_at + 3], 8 + 4 + 0 + 1);
    b.data[vlen_at + 3]++;
    assert_int_equal(pc_buf_append(&b, "x", 1), PC_OK);
    assert_int_equal(pc_batch_check(b.data, b.len), PC_INVALID);
    pc_buf_free(&b);
}

/* The node's one log (region 0) sets no region row, and a whole store's
 * image holds none: refused, nothing written. */
static void the_one_log_sets_no_region_row(void **state)
{
    (void)state;
    fx *w = fx_new(), *f = fx_new();
    pc_buf b = {0}, img = {0};
    pc_region_row r = row(1, 1, "", NULL);
    region_batch(w, "a", 10, &r, &b);
    uint64_t index = 99;
    assert_int_equal(pc_apply_batch(f->s, b.data, b.len, 1), PC_INVALID);
    assert_int_equal(pc_applied_index(f->s, &index), PC_OK);
    assert_int_equal(index, 0);
    fx_value_is(f, "a", NULL);
    uint8_t at[8] = {0, 0, 0, 0, 0, 0, 0, 5};
    assert_int_equal(pc_buf_append(&img, at, 8), PC_OK);
    assert_int_equal(pc_buf_append(&img, b.data, b.len), PC_OK);
    assert_int_equal(pc_image_install(f->s, img.data, img.len), PC_INVALID);
    assert_int_equal(pc_applied_index(f->s, &index), PC_OK);
    assert_int_equal(index, 0);
    trailing_bytes_do_not_decode();
    pc_buf_free(&b);
    pc_buf_free(&img);
    fx_free(w);
    fx_free(f);
}

/* A split's new region's row is written as the split says on every
 * replica, whether or not the node held a row of that id (no state of
 * the parent's log): the split applies alike on both. */
static void a_splits_new_row_does_not_depend_on_the_node(void **state)
{
    (void)state;
    fx *a = fx_new(), *b2 = fx_new();
    pc_buf b = {0}, split = {0};
    pc_region_row whole = row(1, 1, "", NULL), stray = row(2, 7, "x", NULL);
    region_batch(a, NULL, 0, &whole, &b);
    assert_int_equal(apply_as(a, &whole, &b, 1), PC_OK);
    assert_int_equal(apply_as(b2, &whole, &b, 1), PC_OK);
    rows_batch(&b, &stray, 1); /* node b2 holds a row of id 2 (another log's) */
    assert_int_equal(apply_as(b2, &stray, &b, 1), PC_OK);
    pc_slice m = S("m");
    uint64_t two = 2;
    assert_int_equal(pc_region_split(a->s, 1, &m, &two, 1, &split), PC_OK);
    assert_int_equal(apply_as(a, &whole, &split, 2), PC_OK);
    assert_int_equal(apply_as(b2, &whole, &split, 2), PC_OK);
    row_is(a, 1, 2, "", "m");
    row_is(b2, 1, 2, "", "m");
    row_is(a, 2, 2, "m", NULL);
    row_is(b2, 2, 2, "m", NULL);
    pc_buf_free(&b);
    pc_buf_free(&split);
    fx_free(a);
    fx_free(b2);
}

static void a_new_store_is_seeded_once(void **state)
{
    (void)state;
    fx *f = fx_new();
    pc_region_row first[] = {row(1, 1, "", "m"), row(2, 1, "m", NULL)},
                  again[] = {row(1, 1, "", NULL)}, bad[] = {row(3, 0, "", NULL)},
                  other[] = {row(1, 1, "", "n"), row(2, 1, "n", NULL)};
    uint64_t kept = 0, want = 0, differs = 0, whole = 0;
    assert_int_equal(pc_region_seed_digest(f->s, &kept), PC_NOT_FOUND);
    assert_int_equal(pc_region_rows_seed(f->s, bad, 1), PC_INVALID);
    assert_int_equal(pc_region_rows_seed(f->s, first, 2), PC_OK);
    /* the seed's digest is kept: what the store was made with */
    assert_int_equal(pc_region_rows_digest(first, 2, &want), PC_OK);
    assert_int_equal(pc_region_rows_digest(other, 2, &differs), PC_OK);
    assert_int_equal(pc_region_rows_digest(again, 1, &whole), PC_OK);
    assert_int_equal(pc_region_seed_digest(f->s, &kept), PC_OK);
    assert_int_equal(kept, want);
    assert_int_not_equal(kept, differs);
    assert_int_not_equal(kept, whole);
    /* a store with rows is seeded no more: they are its logs' now */
    assert_int_equal(pc_region_rows_seed(f->s, again, 1), PC_INVALID);
    fx_reopen(f);
    row_is(f, 1, 1, "", "m");
    row_is(f, 2, 1, "m", NULL);
    listed l = {{0}, 0};
    assert_int_equal(pc_region_rows_each(f->s, list_one, &l), PC_OK);
    assert_int_equal(l.n, 2);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_regions_batch_sets_its_own_row),
        cmocka_unit_test(an_image_carries_its_regions_row),
        cmocka_unit_test(a_replica_that_missed_a_split_takes_the_images_range),
        cmocka_unit_test(a_split_in_the_parents_log_cuts_it_on_every_replica),
        cmocka_unit_test(a_node_that_missed_a_split_fills_the_hole_from_a_peers_image),
        cmocka_unit_test(a_fill_sets_the_row_with_its_last_part),
        cmocka_unit_test(a_new_store_is_seeded_once),
        cmocka_unit_test(the_one_log_sets_no_region_row),
        cmocka_unit_test(a_splits_new_row_does_not_depend_on_the_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
