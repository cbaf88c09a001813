/*
 * split.c — a region split in its own log (TiKV's BatchSplit;
 * docs/DESIGN.md §6.5 step 6 (e)): one batch of the parent region's log
 * that sets the rows of the parts it is cut into (region_rows.c). The
 * left part keeps the parent's id, every part takes the next epoch, and
 * every replica of the parent applies the cut at the same index of that
 * log, so none of them takes a write of a moved key after it (a write
 * proposed before the split and applied after it is outside the parent's
 * new range, and refused on every replica alike).
 *
 * The rules a region's batch keeps when it sets rows, checked before it
 * applies (pc_region_rows_check):
 *   - one row: the region's own, inside its range;
 *   - more: a split: the rows cover the region's range exactly, in order,
 *     without a gap or an overlap, the first the region's own, the ids
 *     distinct;
 * and in the transaction (pc_region_rows_rise): a batch (not an image)
 * raises the region's own row's epoch above the stored one, so a second
 * split proposed from the same state (two leaders' proposals, or one sent
 * again) applies on no replica. The new parts' rows are written as they
 * are: whether a node holds a row of a new id is not state of the
 * parent's log (a node that missed an earlier split has none), so a check
 * of it could pass on one replica and fail on another; new ids are
 * unique by where they come from (the placement driver, or the leader's
 * map).
 */
#include <string.h>

#include "engine_replica.h"
#include "internal.h"

#define SPLIT_MAX_ROWS (PC_SPLIT_MAX_KEYS + 1)

typedef struct {
    pc_region_row rows[SPLIT_MAX_ROWS];
    size_t n;
    bool bad; /* more rows than a split makes, or one that does not decode */
} rows_seen;

static int see_row(void *arg, const pc_batch_op *o)
{
    rows_seen *r = arg;
    if (o->op != PC_BATCH_SET_REGION)
        return 0;
    if (r->n == SPLIT_MAX_ROWS ||
        !pc_region_row_decode(pc_get_be64(o->key), o->val, o->vlen, &r->rows[r->n])) {
        r->bad = true;
        return 1;
    }
    r->n++;
    return 0;
}

static bool same_key(pc_slice a, pc_slice b)
{
    return pc_key_cmp(a.data, a.len, b.data, b.len) == 0;
}

/* Whether a row's end is the next one's start (or the range's end). */
static bool ends_at(const pc_region_row *r, pc_slice end)
{
    if (r->end.data == NULL || end.data == NULL)
        return r->end.data == NULL && end.data == NULL;
    return same_key(r->end, end);
}

bool pc_region_rows_check(const void *batch, size_t len, uint64_t region,
                          const pc_key_range *range)
{
    rows_seen r = {.n = 0, .bad = false};
    if (pc_batch_each(batch, len, see_row, &r) != PC_OK || r.bad)
        return false;
    if (r.n == 0)
        return true;
    /* In the order they cover the range: a split appends them so, and any
     * other order is refused rather than sorted. */
    if (r.rows[0].id != region || !same_key(r.rows[0].start, range->start))
        return false;
    if (r.n == 1)
        return true; /* its own row, inside its range (apply.c checked) */
    for (size_t i = 0; i < r.n; i++) {
        pc_slice next = i + 1 < r.n ? r.rows[i + 1].start : range->end;
        if (!ends_at(&r.rows[i], next))
            return false;
        for (size_t j = 0; j < i; j++)
            if (r.rows[j].id == r.rows[i].id)
                return false;
    }
    return true;
}

pc_rc pc_region_rows_rise(pc_session *s, const pc_region_row *r)
{
    pc_buf mem = {0};
    pc_region_row stored;
    pc_rc rc = pc_region_row_read(s, r->id, &stored, &mem);
    if (rc == PC_OK && r->epoch <= stored.epoch)
        rc = PC_INVALID;
    pc_buf_free(&mem);
    return rc == PC_NOT_FOUND ? PC_OK : rc;
}

typedef struct {
    uint64_t region;
    const pc_slice *keys;
    size_t n;
    const uint64_t *ids;
    pc_buf *batch;
    pc_batch_mark mark; /* where the batch was: a retried read starts over */
} split_args;

/* Whether every id is new here: no row holds it (the leader's check of
 * what it proposes; the apply does not repeat it). */
static pc_rc ids_free(pc_session *s, const uint64_t *ids, size_t n)
{
    pc_buf mem = {0};
    pc_rc rc = PC_OK;
    for (size_t i = 0; i < n && rc == PC_OK; i++) {
        pc_region_row r;
        rc = pc_region_row_read(s, ids[i], &r, &mem);
        rc = rc == PC_NOT_FOUND ? PC_OK : rc == PC_OK ? PC_INVALID : rc;
    }
    pc_buf_free(&mem);
    return rc;
}

static pc_rc split_body(pc_session *s, void *arg)
{
    split_args *a = arg;
    pc_buf mem = {0};
    pc_region_row parent;
    pc_batch_rewind(a->batch, a->mark);
    pc_rc rc = pc_region_row_read(s, a->region, &parent, &mem);
    if (rc == PC_NOT_FOUND)
        rc = PC_INVALID; /* a region the store does not know */
    if (rc == PC_OK)
        rc = ids_free(s, a->ids, a->n);
    /* Each key inside the parent and above the one before it: every part
     * holds a key. */
    for (size_t i = 0; i < a->n && rc == PC_OK; i++) {
        pc_slice lo = i == 0 ? parent.start : a->keys[i - 1];
        if (pc_key_cmp(a->keys[i].data, a->keys[i].len, lo.data, lo.len) <= 0 ||
            (parent.end.data != NULL &&
             pc_key_cmp(a->keys[i].data, a->keys[i].len, parent.end.data, parent.end.len) >= 0))
            rc = PC_INVALID;
    }
    for (size_t i = 0; i <= a->n && rc == PC_OK; i++) {
        pc_region_row part = {
            i == 0 ? a->region : a->ids[i - 1],
            parent.epoch + 1,
            i == 0 ? parent.start : a->keys[i - 1],
            i == a->n ? parent.end : a->keys[i],
        };
        rc = pc_batch_set_region(a->batch, &part);
    }
    pc_buf_free(&mem);
    return rc;
}

pc_rc pc_region_split(pc_session *s, uint64_t region, const pc_slice *keys, const uint64_t *ids,
                      size_t n, pc_buf *batch)
{
    if (region == 0 || n == 0 || n > PC_SPLIT_MAX_KEYS || keys == NULL || ids == NULL ||
        batch == NULL || s->propose != NULL)
        return PC_INVALID;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == 0 || ids[i] == region || keys[i].len > PC_KEY_MAX ||
            (keys[i].data == NULL && keys[i].len > 0))
            return PC_INVALID;
        for (size_t j = 0; j < i; j++)
            if (ids[j] == ids[i])
                return PC_INVALID;
    }
    split_args a = {region, keys, n, ids, batch, pc_batch_mark_of(batch)};
    pc_rc rc = pc_run_txn(s, split_body, &a);
    if (rc != PC_OK)
        pc_batch_rewind(batch, a.mark);
    return rc;
}
