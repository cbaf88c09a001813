/*
 * ts_floor.c — the highest timestamp the store holds (engine.h,
 * pc_store_max_ts; docs/DESIGN.md §4.8).
 *
 * The service must refuse an oracle whose timestamps are at or below what
 * the store already holds (an oracle that lost its state starts again at
 * 1: every write to an existing key would then conflict forever, and
 * reads would disagree). So the store keeps that maximum durably, in the
 * same WiredTiger transaction as the writes it covers: every action that
 * writes a timestamp notes it (pc_note_ts), and pc_run_txn (store.c) then
 * updates the meta row "ts_max/<slot>" of the calling session before it
 * commits.
 * The row commits, and becomes durable, with the writes: no crash can
 * leave a write without it. Each session has a slot of its own, so
 * concurrent actions never update the same row (which would make them
 * conflict, WT_ROLLBACK); at open the maximum of all rows is taken. Only a
 * session's new maximum is written: the row of a slot never goes down.
 *
 * A store written before these rows existed has none: its maximum is then
 * found at open by a scan of the write and lock tables. This file: that
 * load at open; the rows are written by store.c.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define ROW_PREFIX PC_TS_ROW_PREFIX

uint64_t pc_store_max_ts(pc_engine *e)
{
    return atomic_load(&e->ts_max);
}

/* ---- at open ---- */

typedef struct {
    uint64_t max;
    bool found;      /* some ts_max row exists */
} load_args;

static pc_rc rows_body(pc_session *s, void *arg)
{
    load_args *a = arg;
    WT_CURSOR *c = s->meta;
    size_t plen = sizeof(ROW_PREFIX) - 1;
    pc_rc rc = pc_cursor_seek_ge(s, c, ROW_PREFIX, plen);
    while (rc == PC_OK) {
        WT_ITEM k, v;
        int ret;
        if ((ret = c->get_key(c, &k)) != 0 || (ret = c->get_value(c, &v)) != 0)
            return pc_wt_error(s, ret, "ts_max row");
        if (k.size < plen || memcmp(k.data, ROW_PREFIX, plen) != 0)
            break;
        if (v.size != 8)
            return PC_ERROR;
        a->found = true;
        uint64_t ts = pc_get_be64(v.data);
        if (ts > a->max)
            a->max = ts;
        if ((ret = c->next(c)) != 0)
            rc = pc_wt_error(s, ret, "cursor next");
    }
    return rc == PC_NOT_FOUND ? PC_OK : rc;
}

/* The store's maximum the slow way: every write record's timestamp and
 * every lock's start (a data row's start_ts has a lock or a record). */
static pc_rc scan_body(pc_session *s, void *arg)
{
    load_args *a = arg;
    uint8_t ukey[PC_KEY_MAX];
    int ret;

    while ((ret = s->write->next(s->write)) == 0) {
        WT_ITEM k;
        size_t ulen;
        uint64_t ts;
        if ((ret = s->write->get_key(s->write, &k)) != 0)
            return pc_wt_error(s, ret, "write key");
        if (pc_vkey_decode(k.data, k.size, ukey, &ulen, &ts) == 0 && ts > a->max)
            a->max = ts;
    }
    if (ret != WT_NOTFOUND)
        return pc_wt_error(s, ret, "write scan");
    while ((ret = s->lock->next(s->lock)) == 0) {
        WT_ITEM v;
        pc_lock_rec r;
        if ((ret = s->lock->get_value(s->lock, &v)) != 0)
            return pc_wt_error(s, ret, "lock value");
        if (pc_lock_decode(v.data, v.size, &r) == PC_OK && r.start_ts > a->max)
            a->max = r.start_ts;
    }
    if (ret != WT_NOTFOUND)
        return pc_wt_error(s, ret, "lock scan");
    return PC_OK;
}

pc_rc pc_ts_floor_load(pc_session *s)
{
    load_args a = {0};
    pc_rc rc = pc_run_txn(s, rows_body, &a);
    if (rc == PC_OK && !a.found)
        rc = pc_run_txn(s, scan_body, &a);
    if (rc == PC_OK)
        pc_ts_max_raise(s->e, a.max);
    return rc;
}
