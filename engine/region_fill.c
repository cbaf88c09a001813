/*
 * region_fill.c — a new region's replica on a node that missed the split
 * that made it (docs/DESIGN.md §6.5 step k).
 *
 * A node misses a split when it catches up with the parent's log by an
 * image taken after the split: the image narrows the parent's row, and
 * the new region's row, which only the split's entry set, never comes.
 * The node then has a hole: keys no row of its covers, whose rows in its
 * tables are from before its lag. On a node that applied the split, the
 * new region's range changes only by its own log (the parent's skips the
 * moved keys from the split on), and each batch of that log records its
 * index in the transaction that writes its rows: so while the region's
 * applied index is 0 its range holds what the parent held at the split's
 * index, whether its group was made yet or not. An image taken there
 * with applied index 0 is then the state every replica of the new region
 * starts its log from, and installed here it makes this node's replica
 * the same; the group then brings it the log from index 1 (or an image
 * of a later state). With three members the group cannot even have been
 * made without this node (its members make it together: DESIGN §7.3);
 * with more, a majority can make it without one, and once its log has
 * applied a batch no node can give the state at 0 any more: that node's
 * hole then waits for restore and replacement (DESIGN §6.5 step j).
 *
 * The install replaces the range the image's row names, which must lie in
 * a hole (no row here has the id or meets the range: a node never fills
 * a region it has, or one beside a row it holds), in parts as any image
 * (apply.c). The row goes in with the last part, so a crash halfway
 * leaves the hole a hole, filled again from the start next time.
 */
#include <string.h>

#include "engine_replica.h"
#include "internal.h"

#define INDEX_LEN 8

typedef struct {
    pc_region_row row; /* out: the image's row */
    int rows;          /* out: how many it sets */
} fill_row_args;

static int fill_row_of(void *arg, const pc_batch_op *o)
{
    fill_row_args *a = arg;
    if (o->op != PC_BATCH_SET_REGION)
        return 0;
    if (a->rows++ > 0 || !pc_region_row_decode(pc_get_be64(o->key), o->val, o->vlen, &a->row))
        return -1;
    return 0;
}

typedef struct {
    const pc_region_row *fill;
    const char *why; /* out: NULL, or why the range is no hole here */
} hole_args;

static bool meets(const pc_region_row *a, const pc_region_row *b)
{
    bool a_before_b_ends = b->end.data == NULL ||
                           pc_key_cmp(a->start.data, a->start.len, b->end.data, b->end.len) < 0;
    bool b_before_a_ends = a->end.data == NULL ||
                           pc_key_cmp(b->start.data, b->start.len, a->end.data, a->end.len) < 0;
    return a_before_b_ends && b_before_a_ends;
}

static int no_row_there(void *arg, const pc_region_row *r)
{
    hole_args *a = arg;
    if (r->id == a->fill->id)
        a->why = "this node has a row of that region already";
    else if (meets(r, a->fill))
        a->why = "the region's range meets a region of this node";
    return a->why != NULL;
}

pc_rc pc_region_fill(pc_session *s, const void *image, size_t len, uint64_t *id,
                     const char **why)
{
    *why = NULL;
    *id = 0;
    if (image == NULL || len < INDEX_LEN) {
        *why = "not an image";
        return PC_INVALID;
    }
    const uint8_t *batch = (const uint8_t *)image + INDEX_LEN;
    size_t blen = len - INDEX_LEN;
    fill_row_args a = {{0, 0, {NULL, 0}, {NULL, 0}}, 0};
    if (pc_batch_check(batch, blen) != PC_OK ||
        pc_batch_each(batch, blen, fill_row_of, &a) != PC_OK || a.rows != 1) {
        *why = "not an image of one region with its row";
        return PC_INVALID;
    }
    *id = a.row.id;
    /* Only the state the split left: every replica's log starts there. */
    if (pc_get_be64(image) != 0) {
        *why = "the region's own log applied entries where the image was taken";
        return PC_INVALID;
    }
    pc_key_range range = {a.row.start, a.row.end};
    if (pc_batch_each(batch, blen, pc_image_op_ok, &range) != PC_OK) {
        *why = "the image holds rows outside its region's range";
        return PC_INVALID;
    }
    /* The rows change only by the regions' logs, which narrow them, and
     * by fills, which one thread makes: a hole now stays one. */
    hole_args h = {&a.row, NULL};
    pc_rc rc = pc_region_rows_each(s, no_row_there, &h);
    if (rc != PC_OK)
        return rc;
    if (h.why != NULL) {
        *why = h.why;
        return PC_INVALID;
    }
    return pc_install_fill(s, &a.row, batch, blen);
}
