/*
 * conflict.c — the report an action gives back when it cannot go on (the
 * lock it met, or the newer write): self-contained copies, so the report
 * outlives the WiredTiger cursor it was read from.
 */
#include <string.h>

#include "internal.h"

static void copy_slice(pc_slice *dst, char *buf, size_t cap, pc_slice src)
{
    size_t n = src.len < cap ? src.len : cap;
    if (n)
        memcpy(buf, src.data, n);
    dst->data = buf;
    dst->len = n;
}

void pc_lock_copy(pc_conflict *c, const pc_lock_view *l)
{
    c->lock.op = l->op;
    c->lock.start_ts = l->start_ts;
    c->lock.wall_ms = l->wall_ms;
    c->lock.ttl_ms = l->ttl_ms;
    c->commit_ts = 0;
    c->in_flight_ts = 0;
    c->in_flight_mode = 0;
    copy_slice(&c->lock.key, c->key_buf, sizeof(c->key_buf), l->key);
    copy_slice(&c->lock.primary, c->primary_buf, sizeof(c->primary_buf), l->primary);
    copy_slice(&c->lock.owner, c->owner_buf, sizeof(c->owner_buf), l->owner);
}

void pc_conflict_from_lock(pc_conflict *c, pc_slice key, const pc_lock_rec *r)
{
    if (c == NULL)
        return;
    pc_lock_view v = {.op = r->op, .start_ts = r->start_ts, .wall_ms = r->wall_ms,
                      .ttl_ms = r->ttl_ms, .key = key, .primary = r->primary, .owner = r->owner};
    pc_lock_copy(c, &v);
}

void pc_conflict_from_write(pc_conflict *c, pc_slice key, uint64_t commit_ts)
{
    if (c == NULL)
        return;
    memset(&c->lock, 0, sizeof(c->lock));
    c->commit_ts = commit_ts;
    c->in_flight_ts = 0;
    c->in_flight_mode = 0;
    copy_slice(&c->lock.key, c->key_buf, sizeof(c->key_buf), key);
    c->lock.primary.data = c->primary_buf;
    c->lock.owner.data = c->owner_buf;
}
