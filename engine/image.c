/*
 * image.c — the whole replicated state of a store as one write batch: a
 * PUT for every row of the data, lock, write and notify tables and the
 * store's highest timestamp (RAISE_TS), taken in one WiredTiger snapshot
 * together with the index of the last batch applied. Raft snapshots are
 * images (docs/DESIGN.md §4.10): a member that lags behind the leader's
 * compacted log, or lost its disk, installs one, which replaces its tables
 * (apply.c, in parts; the index goes in with the last) and records the
 * image's index, so the
 * batches after it apply on top.
 *
 * Not in an image as rows: the meta table's (the applied index is the
 * image's; the GC safe point goes in as RAISE_SAFE_POINT, each named
 * value as SET_META: meta.c).
 *
 * Bytes: the applied index (u64, big-endian), then the batch.
 *
 * A region's image (docs/DESIGN.md §6.5 step 3: a Raft group per region,
 * every region's log applying into the node's one store) is the same for
 * its range of keys only, with its own log's applied index and its region
 * row if it has one (SET_REGION: its range and epoch, region_rows.c), and
 * no named values (they are the node's); installing one replaces the
 * range its row names (the replica's own range, without one) only.
 */
#include "engine_replica.h"
#include "internal.h"

typedef struct {
    pc_buf *out;
    uint64_t region;
    const pc_key_range *range;
    uint64_t *applied;
} take_args;

/* Every row of table t (of range, with one) into out. */
static pc_rc image_table(pc_session *s, WT_CURSOR *c, int t, const pc_key_range *range,
                         pc_buf *out)
{
    WT_ITEM k, v;
    int ret = 0;
    pc_rc rc = range != NULL ? pc_range_seek(s, c, t, range) : PC_OK;
    if (range == NULL && (ret = c->next(c)) != 0)
        rc = pc_wt_error(s, ret, "cursor next");
    while (rc == PC_OK) {
        if ((ret = c->get_key(c, &k)) != 0 || (ret = c->get_value(c, &v)) != 0)
            return pc_wt_error(s, ret, "cursor get");
        if (range != NULL && !pc_range_has(range, t, k.data, k.size))
            break; /* sorted: past the range's end */
        if ((rc = pc_batch_put(out, t, k.data, k.size, v.data, v.size)) != PC_OK)
            return rc;
        ret = c->next(c);
        rc = ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    }
    if (rc != PC_OK && rc != PC_NOT_FOUND)
        return rc;
    ret = c->reset(c);
    return ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor reset");
}

#define INDEX_LEN 8

/* A region's image is of the range its row names, in the same snapshot
 * (the caller's range only without a row): an image is then always one
 * range and the row that says so, whatever range the caller had in mind
 * while a split changed it. The row goes first into batch; *range then
 * points at its keys, in mem. */
static pc_rc image_region_row(pc_session *s, uint64_t region, pc_key_range *range, pc_buf *mem,
                              pc_buf *batch)
{
    pc_region_row r;
    pc_rc rc = pc_region_row_read(s, region, &r, mem);
    if (rc == PC_NOT_FOUND)
        return PC_OK;
    if (rc == PC_OK)
        rc = pc_batch_set_region(batch, &r);
    if (rc == PC_OK)
        *range = (pc_key_range){r.start, r.end};
    return rc;
}

/* The rows (of range, with one: a region's, region's row first), the
 * highest timestamp (max_ts), the safe point and the whole store's named
 * values, read in s's transaction, after the applied index (already
 * read) in out. */
static pc_rc image_rows(pc_session *s, uint64_t region, const pc_key_range *range,
                        uint64_t applied, uint64_t max_ts, pc_buf *out)
{
    WT_CURSOR *tables[] = {s->data, s->lock, s->write, s->notify};
    pc_buf batch = {0}, mem = {0};
    pc_key_range own = range != NULL ? *range : (pc_key_range){{NULL, 0}, {NULL, 0}};
    pc_rc rc = range != NULL ? image_region_row(s, region, &own, &mem, &batch) : PC_OK;
    if (range != NULL)
        range = &own;
    for (int t = 0; t < 4 && rc == PC_OK; t++)
        rc = image_table(s, tables[t], t, range, &batch);
    if (rc == PC_OK)
        rc = pc_batch_raise_ts(&batch, max_ts);
    uint64_t safe_point = 0;
    if (rc == PC_OK)
        rc = pc_read_safe_point(s, &safe_point);
    if (rc == PC_OK && safe_point > 0)
        rc = pc_batch_raise_safe_point(&batch, safe_point);
    if (rc == PC_OK && range == NULL)
        rc = pc_named_image(s, &batch);
    uint8_t index[INDEX_LEN];
    pc_put_be64(index, applied);
    if (rc == PC_OK && (pc_buf_append(out, index, INDEX_LEN) != PC_OK ||
                        pc_buf_append(out, batch.data, batch.len) != PC_OK))
        rc = PC_NOMEM;
    pc_buf_free(&batch);
    pc_buf_free(&mem);
    return rc;
}

static pc_rc take_body(pc_session *s, void *arg)
{
    take_args *a = arg;
    a->out->len = 0; /* a retried transaction starts over */
    pc_rc rc = pc_read_region_applied(s, a->region, a->applied);
    return rc == PC_OK ? image_rows(s, a->region, a->range, *a->applied,
                                    pc_store_max_ts(s->e), a->out)
                       : rc;
}

/* ---- an image in two steps ---- */

pc_rc pc_image_pin(pc_session *s, uint64_t *applied)
{
    return pc_region_image_pin(s, 0, applied);
}

pc_rc pc_region_image_pin(pc_session *s, uint64_t region, uint64_t *applied)
{
    if (s->propose != NULL || s->pinned)
        return PC_INVALID;
    int ret = s->wt->begin_transaction(s->wt, "isolation=snapshot");
    if (ret != 0)
        return pc_wt_error(s, ret, "begin_transaction");
    /* The first read takes the transaction's snapshot: the state after the
     * last batch applied, since the caller applies none meanwhile. */
    pc_rc rc = pc_read_region_applied(s, region, &s->pin_applied);
    if (rc != PC_OK) {
        (void)s->wt->rollback_transaction(s->wt, NULL);
        return rc;
    }
    s->pin_max_ts = pc_store_max_ts(s->e); /* raised by applies only, which wait */
    s->pin_region = region;
    s->pinned = true;
    *applied = s->pin_applied;
    return PC_OK;
}

pc_rc pc_image_fill(pc_session *s, pc_buf *out)
{
    if (!s->pinned)
        return PC_INVALID;
    out->len = 0;
    return image_rows(s, 0, NULL, s->pin_applied, s->pin_max_ts, out);
}

pc_rc pc_region_image_fill(pc_session *s, pc_slice start, pc_slice end, pc_buf *out)
{
    pc_key_range r = {start, end};
    if (!s->pinned || out == NULL || !pc_range_ok(&r))
        return PC_INVALID;
    out->len = 0;
    return image_rows(s, s->pin_region, &r, s->pin_applied, s->pin_max_ts, out);
}

pc_rc pc_image_unpin(pc_session *s)
{
    if (!s->pinned)
        return PC_OK;
    s->pinned = false;
    int ret = s->wt->rollback_transaction(s->wt, NULL); /* it only read */
    pc_rc rc = ret != 0 ? pc_wt_error(s, ret, "rollback_transaction") : PC_OK;
    WT_CURSOR *all[] = {s->data, s->lock, s->write, s->notify, s->meta};
    for (size_t i = 0; i < sizeof all / sizeof all[0] && rc == PC_OK; i++)
        if ((ret = all[i]->reset(all[i])) != 0)
            rc = pc_wt_error(s, ret, "cursor reset");
    return rc;
}

pc_rc pc_image_take(pc_session *s, pc_buf *out, uint64_t *applied)
{
    uint64_t ignored;
    if (out == NULL || s->propose != NULL)
        return PC_INVALID;
    take_args a = {out, 0, NULL, applied != NULL ? applied : &ignored};
    return pc_run_txn(s, take_body, &a);
}

pc_rc pc_region_image_take(pc_session *s, uint64_t region, pc_slice start, pc_slice end,
                           pc_buf *out, uint64_t *applied)
{
    uint64_t ignored;
    pc_key_range r = {start, end};
    if (out == NULL || s->propose != NULL || region == 0 || !pc_range_ok(&r))
        return PC_INVALID;
    take_args a = {out, region, &r, applied != NULL ? applied : &ignored};
    return pc_run_txn(s, take_body, &a);
}

/* A whole store's image holds no region row: those are regions' logs'
 * (a store of one log has none). */
static int no_region_row(void *arg, const pc_batch_op *o)
{
    (void)arg;
    return o->op == PC_BATCH_SET_REGION ? -1 : 0;
}

pc_rc pc_image_install(pc_session *s, const void *image, size_t len)
{
    if (image == NULL || len < INDEX_LEN ||
        pc_batch_each((const uint8_t *)image + INDEX_LEN, len - INDEX_LEN, no_region_row,
                      NULL) != PC_OK)
        return PC_INVALID;
    uint64_t index = pc_get_be64(image);
    /* An image of a store that applied nothing holds nothing to install. */
    if (index == 0)
        return pc_batch_check((const uint8_t *)image + INDEX_LEN, len - INDEX_LEN);
    return pc_apply_ops(s, 0, (const uint8_t *)image + INDEX_LEN, len - INDEX_LEN, index, true,
                        NULL);
}

/* The range a region's image replaces: the one its row names, inside
 * the replica's own (a range only narrows: a split the replica missed),
 * or without a row the replica's own. An image holds one row at most,
 * its region's: -1 for any other SET_REGION. */
typedef struct {
    pc_region_check own;   /* the region and the replica's range */
    pc_key_range named;    /* out: the image's row's range */
    uint64_t epoch;        /* out: the image's row's epoch; 0: it has none */
} image_row_args;

static int image_row_of(void *arg, const pc_batch_op *o)
{
    image_row_args *a = arg;
    pc_region_row r;
    if (o->op != PC_BATCH_SET_REGION)
        return 0;
    if (a->epoch != 0 || !pc_region_op_inside(o, a->own.region, a->own.range) ||
        !pc_region_row_decode(pc_get_be64(o->key), o->val, o->vlen, &r))
        return -1;
    a->named = (pc_key_range){r.start, r.end};
    a->epoch = r.epoch;
    return 0;
}

/* A region's image holds rows of the range it replaces, the highest
 * timestamp, the safe point and its row, nothing else: checked whole
 * before anything of the range is removed, so that an image of another
 * range, or one that would write beside it, changes nothing. */
int pc_image_op_ok(void *arg, const pc_batch_op *o)
{
    const pc_key_range *r = arg;
    if (o->op == PC_BATCH_RAISE_TS || o->op == PC_BATCH_RAISE_SAFE_POINT ||
        o->op == PC_BATCH_SET_REGION)
        return 0; /* the row: image_row_of */
    return o->op == PC_BATCH_PUT && pc_range_has(r, o->table, o->key, o->klen) ? 0 : -1;
}

pc_rc pc_region_image_install(pc_session *s, uint64_t region, pc_slice start, pc_slice end,
                              const void *image, size_t len)
{
    pc_key_range r = {start, end};
    if (image == NULL || len < INDEX_LEN || region == 0 || !pc_range_ok(&r))
        return PC_INVALID;
    const uint8_t *batch = (const uint8_t *)image + INDEX_LEN;
    uint64_t index = pc_get_be64(image), applied = 0;
    /* An image of a state this store passed already (libraft hands its
     * last one back at every start) is skipped before it is checked
     * against the range, which is the range now: a split applied since
     * narrowed it, and the older image would not fit. */
    pc_rc rc = pc_region_applied_index(s, region, &applied);
    if (rc != PC_OK)
        return rc;
    if (index != 0 && index <= applied)
        return pc_batch_check(batch, len - INDEX_LEN);
    image_row_args a = {{region, &r}, {{NULL, 0}, {NULL, 0}}, 0};
    if (pc_batch_each(batch, len - INDEX_LEN, image_row_of, &a) != PC_OK)
        return PC_INVALID;
    const pc_key_range *replace = a.epoch != 0 ? &a.named : &r;
    if (pc_batch_each(batch, len - INDEX_LEN, pc_image_op_ok, (void *)replace) != PC_OK)
        return PC_INVALID;
    if (index == 0) /* an image of a region that applied nothing */
        return PC_OK;
    return pc_apply_ops(s, region, batch, len - INDEX_LEN, index, true, replace);
}

uint64_t pc_image_index(const void *image, size_t len)
{
    return image != NULL && len >= INDEX_LEN ? pc_get_be64(image) : 0;
}
