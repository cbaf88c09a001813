/*
 * apply.c — applying write batches (batch.c) in order, each in one
 * WiredTiger transaction that also records its index, so that a node
 * replays exactly what it is missing (docs/DESIGN.md §4.10). Each log
 * that applies into the store keeps its own index: the node's one log
 * (region 0), and a region's own (§6.5 step 3), a row per region.
 */
#include <string.h>

#include "engine_replica.h"
#include "internal.h"

static const char APPLIED_KEY[] = "raft_applied";
#define APPLIED_KEY_MAX (sizeof APPLIED_KEY + 8)

/* The meta row of region's applied index: "raft_applied" for the node's
 * one log (region 0, as before regions had logs), else "raft_applied/"
 * and the region's id, big-endian. Its length. */
static size_t applied_key(uint8_t *key, uint64_t region)
{
    size_t n = sizeof APPLIED_KEY - 1;
    memcpy(key, APPLIED_KEY, n);
    if (region == 0)
        return n;
    key[n++] = '/';
    pc_put_be64(key + n, region);
    return n + 8;
}

typedef struct {
    const uint8_t *from, *to; /* the operations applied in this transaction */
    uint64_t region;          /* whose log: its index is read and recorded */
    uint64_t index;
    bool last;      /* records the index (an image's last part, or a whole batch) */
    bool image;     /* its rows replace the store's (an image's part) */
    bool skipped;
    uint64_t safe_point; /* raised to this (0: not) */
    const pc_region_row *fill; /* a new region's replica filled in (pc_install_fill): no
                                * index read or recorded, this row set with the last part */
} apply_args;

/* An image is installed in parts of about this many bytes of rows, each
 * its own transaction (pc_apply_ops). */
#define IMAGE_PART_BYTES ((size_t)8 << 20)
/* Rows removed per transaction when an image empties the tables. */
#define EMPTY_PART_ROWS 20000

pc_rc pc_read_region_applied(pc_session *s, uint64_t region, uint64_t *index)
{
    WT_ITEM v;
    uint8_t key[APPLIED_KEY_MAX];
    pc_rc rc = pc_cursor_get(s, s->meta, key, applied_key(key, region), &v);
    if (rc == PC_NOT_FOUND) {
        *index = 0;
        return PC_OK;
    }
    if (rc == PC_OK && v.size != 8)
        return PC_ERROR;
    if (rc == PC_OK)
        *index = pc_get_be64(v.data);
    return rc;
}

pc_rc pc_read_applied(pc_session *s, uint64_t *index)
{
    return pc_read_region_applied(s, 0, index);
}

typedef struct {
    const pc_key_range *range; /* NULL: every row */
    bool left;                 /* out: rows remain */
} empty_args;

/* Table t's cursor on its first row (of the range, with one), or
 * PC_NOT_FOUND. */
static pc_rc first_row(pc_session *s, WT_CURSOR *c, int t, const pc_key_range *r)
{
    if (r != NULL)
        return pc_range_seek(s, c, t, r);
    int ret = c->next(c);
    return ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
}

/* Whether the row c is on is still one to remove. */
static pc_rc row_in(pc_session *s, WT_CURSOR *c, int t, const pc_key_range *r, bool *in)
{
    WT_ITEM k;
    int ret;
    *in = true;
    if (r == NULL)
        return PC_OK;
    if ((ret = c->get_key(c, &k)) != 0)
        return pc_wt_error(s, ret, "get_key");
    *in = pc_range_has(r, t, k.data, k.size); /* sorted: the first out is past the end */
    return PC_OK;
}

/* Remove up to EMPTY_PART_ROWS rows of the replicated tables (of the
 * range, with one), in the transaction; a->left: whether rows remain. */
static pc_rc empty_part(pc_session *s, void *arg)
{
    empty_args *a = arg;
    WT_CURSOR *tables[] = {s->data, s->lock, s->write, s->notify};
    int n = 0;
    a->left = false;
    for (int t = 0; t < 4; t++) {
        pc_rc rc = first_row(s, tables[t], t, a->range);
        while (rc == PC_OK && n < EMPTY_PART_ROWS) {
            bool in;
            int ret;
            if ((rc = row_in(s, tables[t], t, a->range, &in)) != PC_OK || !in)
                break;
            if ((ret = tables[t]->remove(tables[t])) != 0)
                return pc_wt_error(s, ret, "cursor remove");
            n++;
            ret = tables[t]->next(tables[t]);
            rc = ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
        }
        if (rc != PC_OK && rc != PC_NOT_FOUND)
            return rc;
        if (n == EMPTY_PART_ROWS) {
            a->left = true;
            return PC_OK;
        }
    }
    return PC_OK;
}

/* The GC safe point only rises: stored in the transaction, shown to
 * readers once it committed (pc_apply_ops). Before the proposal's first
 * removal, DESIGN §9. */
static pc_rc raise_safe_point(pc_session *s, apply_args *a, uint64_t value)
{
    uint64_t stored;
    pc_rc rc = pc_read_safe_point(s, &stored);
    if (rc != PC_OK || value <= stored)
        return rc;
    if ((rc = pc_store_safe_point(s, value)) == PC_OK)
        a->safe_point = value;
    return rc;
}

/* A region row, in a region's own log only (the node's one log has
 * none: its images carry none, so a replica that caught up by one would
 * differ). A batch's own row raises its epoch (split.c: a second split
 * from the same state is refused whole, on every replica alike); a new
 * region's row a split sets is written as it is (whether this node holds
 * a row of that id is no state of this log); an image's is the row as it
 * was where the image was taken. */
static pc_rc set_region(pc_session *s, const apply_args *a, const pc_batch_op *o)
{
    pc_region_row r;
    if (a->region == 0 || !pc_region_row_decode(pc_get_be64(o->key), o->val, o->vlen, &r))
        return PC_INVALID; /* rolled back: nothing written, alike everywhere */
    pc_rc rc = a->image || r.id != a->region ? PC_OK : pc_region_rows_rise(s, &r);
    return rc == PC_OK ? pc_region_row_put(s, &r) : rc;
}

static pc_rc apply_body(pc_session *s, void *arg)
{
    apply_args *a = arg;
    WT_CURSOR *tables[] = {s->data, s->lock, s->write, s->notify};
    uint64_t applied;
    pc_rc rc = pc_read_region_applied(s, a->region, &applied);
    if (rc != PC_OK)
        return rc;
    /* A batch applied before (a replay after a restart) changes nothing;
     * nor does an image of a state this store already passed. */
    a->skipped = a->fill == NULL && a->index <= applied;
    a->safe_point = 0; /* a retried transaction starts over */
    if (a->skipped)
        return PC_OK;
    const uint8_t *p = a->from, *end = a->to;
    pc_batch_op o;
    while (rc == PC_OK && p < end) {
        if (!pc_batch_next(&p, end, &o))
            return PC_INVALID; /* checked before: cannot happen */
        if (o.op == PC_BATCH_PUT)
            rc = pc_cursor_put(s, tables[o.table], o.key, o.klen, o.val, o.vlen);
        else if (o.op == PC_BATCH_DEL)
            rc = pc_cursor_del(s, tables[o.table], o.key, o.klen);
        else if (o.op == PC_BATCH_RAISE_SAFE_POINT)
            rc = raise_safe_point(s, a, o.ts);
        else if (o.op == PC_BATCH_SET_META)
            rc = pc_named_put(s, o.key, o.klen, o.val, o.vlen);
        else if (o.op == PC_BATCH_SET_REGION)
            rc = a->fill != NULL ? PC_OK : set_region(s, a, &o); /* a fill's: last */
        else
            pc_note_ts(s, o.ts); /* pc_run_txn keeps the floor with the writes */
    }
    uint8_t v[8], key[APPLIED_KEY_MAX];
    pc_put_be64(v, a->index);
    if (rc != PC_OK || !a->last)
        return rc;
    if (a->fill != NULL)
        return pc_region_row_put(s, a->fill);
    return pc_cursor_put(s, s->meta, key, applied_key(key, a->region), v, 8);
}

static pc_rc empty_named(pc_session *s, void *arg)
{
    (void)arg;
    return pc_named_empty(s);
}

typedef struct {
    uint64_t region, *index;
} applied_args;

static pc_rc applied_body(pc_session *s, void *arg)
{
    applied_args *a = arg;
    return pc_read_region_applied(s, a->region, a->index);
}

/* An image replaces the tables (image.c). One WiredTiger transaction
 * holding a whole store's rows outgrew the cache (it cannot evict what is
 * not committed): a member catching up took two minutes to install an
 * image of 180 MB (issue #23). So the tables are emptied, then the rows
 * written, in transactions of their own, and the applied index goes in
 * with the last part. Until then the store says the old index: a crash
 * halfway leaves a store that the image is installed into again at
 * restart (libraft keeps the image it received, and restores it when the
 * member starts), and meanwhile only a follower installs an image, which
 * reads nothing from its store for a client (DESIGN §4.10). */
static pc_rc install_in_parts(pc_session *s, apply_args *a, const uint8_t *from,
                              const uint8_t *end, const pc_key_range *range)
{
    uint64_t applied = 0;
    applied_args q = {a->region, &applied};
    pc_rc rc = a->fill == NULL ? pc_run_txn(s, applied_body, &q) : PC_OK;
    if (rc != PC_OK || (a->fill == NULL && a->index <= applied)) {
        a->skipped = rc == PC_OK;
        return rc;
    }
    empty_args e = {range, true};
    while (e.left && rc == PC_OK)
        rc = pc_run_txn(s, empty_part, &e);
    if (rc == PC_OK && range == NULL) /* the image holds every named value there is */
        rc = pc_run_txn(s, empty_named, NULL);
    uint64_t safe_point = 0;
    while (rc == PC_OK) {
        const uint8_t *p = from;
        pc_batch_op o;
        while (p < end && (size_t)(p - from) < IMAGE_PART_BYTES)
            if (!pc_batch_next(&p, end, &o))
                return PC_INVALID; /* checked before: cannot happen */
        a->from = from;
        a->to = p;
        a->last = p == end;
        if ((rc = pc_run_txn(s, apply_body, a)) == PC_OK && a->safe_point > safe_point)
            safe_point = a->safe_point;
        if (a->last || rc != PC_OK)
            break;
        if (s->e->image_part_done != NULL)
            s->e->image_part_done(s->e->image_arg, s);
        from = p;
    }
    a->safe_point = safe_point;
    return rc;
}

pc_rc pc_apply_ops(pc_session *s, uint64_t region, const void *batch, size_t len, uint64_t index,
                   bool replace, const pc_key_range *range)
{
    if (index == 0 || pc_batch_check(batch, len) != PC_OK)
        return PC_INVALID;
    const uint8_t *from = (const uint8_t *)batch + PC_BATCH_HEADER,
                  *end = (const uint8_t *)batch + len;
    apply_args a = {from, end, region, index, true, replace, false, 0, NULL};
    /* The applier writes: whatever the session was proposing, not now. */
    pc_buf *proposing = s->propose;
    s->propose = NULL;
    pc_rc rc = replace ? install_in_parts(s, &a, from, end, range)
                       : pc_run_txn(s, apply_body, &a);
    s->propose = proposing;
    if (rc == PC_OK && a.safe_point != 0)
        pc_safe_point_note(s->e, a.safe_point);
    return rc;
}

pc_rc pc_install_fill(pc_session *s, const pc_region_row *row, const void *batch, size_t len)
{
    pc_key_range range = {row->start, row->end};
    if (pc_batch_check(batch, len) != PC_OK)
        return PC_INVALID;
    const uint8_t *from = (const uint8_t *)batch + PC_BATCH_HEADER,
                  *end = (const uint8_t *)batch + len;
    apply_args a = {from, end, row->id, 0, true, true, false, 0, row};
    pc_buf *proposing = s->propose;
    s->propose = NULL;
    pc_rc rc = install_in_parts(s, &a, from, end, &range);
    s->propose = proposing;
    if (rc == PC_OK && a.safe_point != 0)
        pc_safe_point_note(s->e, a.safe_point);
    return rc;
}

pc_rc pc_apply_batch(pc_session *s, const void *batch, size_t len, uint64_t index)
{
    return pc_apply_ops(s, 0, batch, len, index, false, NULL);
}

/* fn of pc_batch_each: a region's batch puts and deletes rows of its
 * range only, sets region rows inside its range only (a range only
 * narrows; which rows: split.c), and no named value (those are the
 * node's, and no region's image carries them: a replica that caught up
 * by one would miss it). One pass checks all. */
static int region_op_ok(void *arg, const pc_batch_op *o)
{
    const pc_key_range *r = arg;
    if (o->op == PC_BATCH_SET_META)
        return -1;
    if (o->op == PC_BATCH_SET_REGION)
        return pc_region_op_inside(o, 0, r) ? 0 : -1;
    if (o->op != PC_BATCH_PUT && o->op != PC_BATCH_DEL)
        return 0; /* a timestamp or the safe point: no row */
    return pc_range_has(r, o->table, o->key, o->klen) ? 0 : -1;
}

pc_rc pc_apply_region_batch(pc_session *s, uint64_t region, pc_slice start, pc_slice end,
                            const void *batch, size_t len, uint64_t index)
{
    pc_key_range r = {start, end};
    if (region == 0 || !pc_range_ok(&r) || pc_batch_each(batch, len, region_op_ok, &r) != PC_OK ||
        !pc_region_rows_check(batch, len, region, &r))
        return PC_INVALID; /* before the transaction: nothing written, the index stays */
    return pc_apply_ops(s, region, batch, len, index, false, NULL);
}


static pc_rc new_group_body(pc_session *s, void *arg)
{
    (void)arg;
    uint8_t v[8], key[APPLIED_KEY_MAX];
    pc_put_be64(v, 1);
    return pc_cursor_put(s, s->meta, key, applied_key(key, 0), v, 8);
}

pc_rc pc_applied_new_group(pc_session *s)
{
    return pc_run_txn(s, new_group_body, NULL);
}

pc_rc pc_region_applied_index(pc_session *s, uint64_t region, uint64_t *index)
{
    if (region == 0)
        return PC_INVALID;
    applied_args a = {region, index};
    return pc_run_txn(s, applied_body, &a);
}

pc_rc pc_applied_index(pc_session *s, uint64_t *index)
{
    applied_args a = {0, index};
    return pc_run_txn(s, applied_body, &a);
}

