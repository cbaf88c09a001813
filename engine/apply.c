/*
 * apply.c — applying write batches (batch.c) in order, each in one
 * WiredTiger transaction that also records its index, so that a node
 * replays exactly what it is missing (docs/DESIGN.md §4.10).
 */
#include "internal.h"

static const char APPLIED_KEY[] = "raft_applied";

typedef struct {
    const uint8_t *batch;
    size_t len;
    uint64_t index;
    bool replace;   /* an image (image.c): the tables are emptied first */
    bool skipped;
    uint64_t safe_point; /* raised to this (0: not) */
} apply_args;

pc_rc pc_read_applied(pc_session *s, uint64_t *index)
{
    WT_ITEM v;
    pc_rc rc = pc_cursor_get(s, s->meta, APPLIED_KEY, sizeof(APPLIED_KEY) - 1, &v);
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

/* Remove every row of a table, in the transaction. */
static pc_rc empty_table(pc_session *s, WT_CURSOR *c)
{
    int ret;
    while ((ret = c->next(c)) == 0)
        if ((ret = c->remove(c)) != 0)
            return pc_wt_error(s, ret, "cursor remove");
    return ret == WT_NOTFOUND ? PC_OK : pc_wt_error(s, ret, "cursor next");
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

static pc_rc apply_body(pc_session *s, void *arg)
{
    apply_args *a = arg;
    WT_CURSOR *tables[] = {s->data, s->lock, s->write, s->notify};
    uint64_t applied;
    pc_rc rc = pc_read_applied(s, &applied);
    if (rc != PC_OK)
        return rc;
    /* A batch applied before (a replay after a restart) changes nothing;
     * nor does an image of a state this store already passed. */
    a->skipped = a->index <= applied;
    a->safe_point = 0; /* a retried transaction starts over */
    if (a->skipped)
        return PC_OK;
    for (int t = 0; a->replace && t < 4 && rc == PC_OK; t++)
        rc = empty_table(s, tables[t]);
    const uint8_t *p = a->batch + PC_BATCH_HEADER, *end = a->batch + a->len;
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
        else
            pc_note_ts(s, o.ts); /* pc_run_txn keeps the floor with the writes */
    }
    uint8_t v[8];
    pc_put_be64(v, a->index);
    return rc == PC_OK ? pc_cursor_put(s, s->meta, APPLIED_KEY, sizeof(APPLIED_KEY) - 1, v, 8)
                       : rc;
}

pc_rc pc_apply_ops(pc_session *s, const void *batch, size_t len, uint64_t index, bool replace)
{
    if (index == 0 || pc_batch_check(batch, len) != PC_OK)
        return PC_INVALID;
    apply_args a = {batch, len, index, replace, false, 0};
    /* The applier writes: whatever the session was proposing, not now. */
    pc_buf *proposing = s->propose;
    s->propose = NULL;
    pc_rc rc = pc_run_txn(s, apply_body, &a);
    s->propose = proposing;
    if (rc == PC_OK && a.safe_point != 0)
        pc_safe_point_note(s->e, a.safe_point);
    return rc;
}

pc_rc pc_apply_batch(pc_session *s, const void *batch, size_t len, uint64_t index)
{
    return pc_apply_ops(s, batch, len, index, false);
}

static pc_rc applied_body(pc_session *s, void *arg)
{
    return pc_read_applied(s, arg);
}

static pc_rc new_group_body(pc_session *s, void *arg)
{
    (void)arg;
    uint8_t v[8];
    pc_put_be64(v, 1);
    return pc_cursor_put(s, s->meta, APPLIED_KEY, sizeof(APPLIED_KEY) - 1, v, 8);
}

pc_rc pc_applied_new_group(pc_session *s)
{
    return pc_run_txn(s, new_group_body, NULL);
}

pc_rc pc_applied_index(pc_session *s, uint64_t *index)
{
    return pc_run_txn(s, applied_body, index);
}

