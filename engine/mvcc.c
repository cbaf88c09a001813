/*
 * mvcc.c — the lookups every action is built from: the lock on a key, the
 * record a transaction left in the write column, the value visible at a
 * timestamp, and whether a lock's owner is gone. All run inside the
 * caller's WiredTiger transaction, and none writes.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

pc_rc pc_lock_load(pc_session *s, pc_slice key, pc_lock_rec *r)
{
    WT_ITEM v;
    pc_rc rc = pc_cursor_get(s, s->lock, key.data, key.len, &v);

    if (rc != PC_OK)
        return rc;
    if (pc_lock_decode(v.data, v.size, r) != PC_OK) {
        pc_log(s->e, PC_LOG_ERROR, "corrupt lock record (%zu bytes)", v.size);
        return PC_ERROR;
    }
    return PC_OK;
}

bool pc_on_key(WT_CURSOR *c, const uint8_t *ek, size_t eklen, uint64_t *ts)
{
    WT_ITEM k;
    const uint8_t *p;

    if (c->get_key(c, &k) != 0 || k.size != eklen + 8 || memcmp(k.data, ek, eklen) != 0)
        return false;
    p = (const uint8_t *)k.data + eklen;
    uint64_t inv = 0;
    for (int i = 0; i < 8; i++)
        inv = (inv << 8) | p[i];
    *ts = ~inv;
    return true;
}

pc_rc pc_cursor_write_rec(pc_session *s, WT_CURSOR *c, pc_write_rec *r)
{
    WT_ITEM v;
    int ret = c->get_value(c, &v);

    if (ret != 0)
        return pc_wt_error(s, ret, "get_value");
    if (pc_write_decode(v.data, v.size, r) != PC_OK) {
        pc_log(s->e, PC_LOG_ERROR, "corrupt write record (%zu bytes)", v.size);
        return PC_ERROR;
    }
    return PC_OK;
}

pc_rc pc_find_txn_write(pc_session *s, pc_slice key, uint64_t start_ts, pc_write_rec *r,
                        uint64_t *commit_ts)
{
    uint8_t ek[PC_VKEY_MAX];
    size_t eklen = pc_ekey(ek, key.data, key.len);
    uint64_t ts;
    pc_rc rc;
    int ret;

    /* Newest first; a transaction's record is at commit_ts >= start_ts
     * (a rollback record sits at start_ts itself). */
    if ((rc = pc_cursor_seek_ge(s, s->write, ek, eklen)) != PC_OK)
        return rc;
    while (pc_on_key(s->write, ek, eklen, &ts) && ts >= start_ts) {
        if ((rc = pc_cursor_write_rec(s, s->write, r)) != PC_OK)
            return rc;
        if (r->start_ts == start_ts) {
            *commit_ts = ts;
            return PC_OK;
        }
        if ((ret = s->write->next(s->write)) != 0)
            return pc_wt_error(s, ret, "cursor next");
    }
    return PC_NOT_FOUND;
}

pc_rc pc_read_at(pc_session *s, pc_slice key, uint64_t ts, pc_buf *value, uint64_t *commit_ts)
{
    uint8_t vk[PC_VKEY_MAX];
    size_t vklen = pc_vkey(vk, key.data, key.len, ts);
    size_t eklen = pc_vkey_prefix_len(vklen);
    pc_write_rec r;
    uint64_t cts;
    pc_rc rc;
    int ret;

    /* (key, ts) is where the newest version at or below ts starts. */
    *commit_ts = 0;
    if ((rc = pc_cursor_seek_ge(s, s->write, vk, vklen)) != PC_OK)
        return rc;
    while (pc_on_key(s->write, vk, eklen, &cts)) {
        if ((rc = pc_cursor_write_rec(s, s->write, &r)) != PC_OK)
            return rc;
        if (r.type == PC_W_DELETE) {
            *commit_ts = cts;
            return PC_NOT_FOUND;
        }
        if (r.type == PC_W_PUT) {
            *commit_ts = cts;
            if (r.has_value)
                return pc_buf_append(value, r.value.data, r.value.len);
            /* A long value: the write record points at data (key, start_ts). */
            WT_ITEM v;
            size_t dklen = pc_vkey(vk, key.data, key.len, r.start_ts);
            if ((rc = pc_cursor_get(s, s->data, vk, dklen, &v)) != PC_OK) {
                if (rc == PC_NOT_FOUND)
                    pc_log(s->e, PC_LOG_ERROR, "write record without its data");
                return PC_ERROR;
            }
            return pc_buf_append(value, v.data, v.size);
        }
        /* A rollback record is not a version: look further down. */
        if ((ret = s->write->next(s->write)) != 0)
            return pc_wt_error(s, ret, "cursor next");
    }
    return PC_NOT_FOUND;
}

bool pc_lock_dead(const pc_lock_rec *r, const pc_liveness *live)
{
    if (live == NULL)
        return false;
    if (live->owner_alive != NULL && !live->owner_alive(live->arg, r->owner.data, r->owner.len))
        return true;
    return live->now_ms >= r->wall_ms + r->ttl_ms;
}
