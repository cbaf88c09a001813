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
 */
#include "internal.h"

typedef struct {
    pc_buf *out;
    uint64_t *applied;
} take_args;

static pc_rc image_table(pc_session *s, WT_CURSOR *c, int table, pc_buf *out)
{
    WT_ITEM k, v;
    int ret;
    while ((ret = c->next(c)) == 0) {
        if ((ret = c->get_key(c, &k)) != 0 || (ret = c->get_value(c, &v)) != 0)
            return pc_wt_error(s, ret, "cursor get");
        pc_rc rc = pc_batch_put(out, table, k.data, k.size, v.data, v.size);
        if (rc != PC_OK)
            return rc;
    }
    return ret == WT_NOTFOUND ? PC_OK : pc_wt_error(s, ret, "cursor next");
}

#define INDEX_LEN 8

/* The rows, the highest timestamp (max_ts) and the safe point, read in
 * s's transaction, after the applied index (already read) in out. */
static pc_rc image_rows(pc_session *s, uint64_t applied, uint64_t max_ts, pc_buf *out)
{
    WT_CURSOR *tables[] = {s->data, s->lock, s->write, s->notify};
    pc_buf batch = {0};
    pc_rc rc = PC_OK;
    for (int t = 0; t < 4 && rc == PC_OK; t++)
        rc = image_table(s, tables[t], t, &batch);
    if (rc == PC_OK)
        rc = pc_batch_raise_ts(&batch, max_ts);
    uint64_t safe_point = 0;
    if (rc == PC_OK)
        rc = pc_read_safe_point(s, &safe_point);
    if (rc == PC_OK && safe_point > 0)
        rc = pc_batch_raise_safe_point(&batch, safe_point);
    if (rc == PC_OK)
        rc = pc_named_image(s, &batch);
    uint8_t index[INDEX_LEN];
    pc_put_be64(index, applied);
    if (rc == PC_OK && (pc_buf_append(out, index, INDEX_LEN) != PC_OK ||
                        pc_buf_append(out, batch.data, batch.len) != PC_OK))
        rc = PC_NOMEM;
    pc_buf_free(&batch);
    return rc;
}

static pc_rc take_body(pc_session *s, void *arg)
{
    take_args *a = arg;
    a->out->len = 0; /* a retried transaction starts over */
    pc_rc rc = pc_read_applied(s, a->applied);
    return rc == PC_OK ? image_rows(s, *a->applied, pc_store_max_ts(s->e), a->out) : rc;
}

/* ---- an image in two steps ---- */

pc_rc pc_image_pin(pc_session *s, uint64_t *applied)
{
    if (s->propose != NULL || s->pinned)
        return PC_INVALID;
    int ret = s->wt->begin_transaction(s->wt, "isolation=snapshot");
    if (ret != 0)
        return pc_wt_error(s, ret, "begin_transaction");
    /* The first read takes the transaction's snapshot: the state after the
     * last batch applied, since the caller applies none meanwhile. */
    pc_rc rc = pc_read_applied(s, &s->pin_applied);
    if (rc != PC_OK) {
        (void)s->wt->rollback_transaction(s->wt, NULL);
        return rc;
    }
    s->pin_max_ts = pc_store_max_ts(s->e); /* raised by applies only, which wait */
    s->pinned = true;
    *applied = s->pin_applied;
    return PC_OK;
}

pc_rc pc_image_fill(pc_session *s, pc_buf *out)
{
    if (!s->pinned)
        return PC_INVALID;
    out->len = 0;
    return image_rows(s, s->pin_applied, s->pin_max_ts, out);
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
    take_args a = {out, applied != NULL ? applied : &ignored};
    return pc_run_txn(s, take_body, &a);
}

pc_rc pc_image_install(pc_session *s, const void *image, size_t len)
{
    if (image == NULL || len < INDEX_LEN)
        return PC_INVALID;
    uint64_t index = pc_get_be64(image);
    /* An image of a store that applied nothing holds nothing to install. */
    if (index == 0)
        return pc_batch_check((const uint8_t *)image + INDEX_LEN, len - INDEX_LEN);
    return pc_apply_ops(s, (const uint8_t *)image + INDEX_LEN, len - INDEX_LEN, index, true);
}

uint64_t pc_image_index(const void *image, size_t len)
{
    return image != NULL && len >= INDEX_LEN ? pc_get_be64(image) : 0;
}
