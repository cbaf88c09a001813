/*
 * gc.c — MVCC garbage collection below a safe point (TiKV's gc action).
 *
 * A snapshot at ts >= safe_point sees, for each key, the newest put or
 * delete at or below ts. Versions above the safe point must all stay; at
 * or below it only the newest put/delete matters, and only if it is a put.
 * So per key, walking newest first:
 *   above safe_point                   keep
 *   at/below: rollback record          drop (its transaction is long over)
 *   at/below: first put                keep
 *   at/below: first delete             drop (nothing older stays for it to hide)
 *   at/below: anything older           drop, with its data row
 * The caller picks safe_point below every snapshot still in use; it is
 * lowered below every pinned read and stored before anything goes
 * (snapshots.c). Work goes
 * in batches of keys, one short transaction each, so GC never holds a big
 * transaction open against the foreground.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define GC_KEYS_PER_TXN 128

struct pc_gc_walk {
    uint64_t safe_point;
    uint8_t resume[PC_KEY_MAX]; /* first key of the next batch */
    size_t resume_len;
    bool started, done;
    uint8_t limit[PC_KEY_MAX];  /* the part stops before this key (a region's end) */
    size_t limit_len;
    bool limited;
    uint64_t batch_versions;    /* write records seen by this batch */
    /* What a batch did, applied only once its transaction committed: a
     * batch retried after WT_ROLLBACK must start where it started. */
    pc_gc_stats batch;
    uint8_t next[PC_KEY_MAX];
    size_t next_len;
    bool next_done;
    pc_buf doomed;              /* [u32 len][vkey] write rows, [u32 len][vkey] data rows */
};
typedef struct pc_gc_walk gc_args;

static pc_rc doom(gc_args *a, uint8_t tag, const void *vk, size_t len)
{
    uint8_t hdr[5] = {tag, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                      (uint8_t)len};
    if (pc_buf_append(&a->doomed, hdr, 5) != PC_OK || pc_buf_append(&a->doomed, vk, len) != PC_OK)
        return PC_NOMEM;
    return PC_OK;
}

/* Decide the fate of every version of the key under the cursor. */
static pc_rc gc_key(pc_session *s, gc_args *a, const uint8_t *ukey, size_t ulen)
{
    uint8_t ek[PC_EKEY_MAX];
    size_t eklen = pc_ekey(ek, ukey, ulen);
    bool kept_visible = false;
    WT_ITEM k, v;
    pc_write_rec w;
    pc_rc rc = PC_OK;
    int ret;

    while (rc == PC_OK) {
        if ((ret = s->write->get_key(s->write, &k)) != 0)
            return pc_wt_error(s, ret, "get_key");
        if (k.size != eklen + 8 || memcmp(k.data, ek, eklen) != 0)
            break;
        uint64_t inv = 0;
        for (size_t i = eklen; i < k.size; i++)
            inv = (inv << 8) | ((const uint8_t *)k.data)[i];
        uint64_t ts = ~inv;
        if ((ret = s->write->get_value(s->write, &v)) != 0)
            return pc_wt_error(s, ret, "get_value");
        if (pc_write_decode(v.data, v.size, &w) != PC_OK)
            return PC_ERROR;
        a->batch_versions++;
        if (ts <= a->safe_point) {
            bool drop = w.type == PC_W_ROLLBACK || kept_visible || w.type == PC_W_DELETE;
            if (w.type != PC_W_ROLLBACK)
                kept_visible = true;
            if (drop) {
                if ((rc = doom(a, 'w', k.data, k.size)) != PC_OK)
                    return rc;
                if (w.type == PC_W_PUT && !w.has_value) {
                    uint8_t dk[PC_VKEY_MAX];
                    size_t dklen = pc_vkey(dk, ukey, ulen, w.start_ts);
                    if ((rc = doom(a, 'd', dk, dklen)) != PC_OK)
                        return rc;
                }
            }
        }
        ret = s->write->next(s->write);
        rc = ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    }
    return rc == PC_NOT_FOUND ? PC_OK : rc;
}

static pc_rc gc_batch(pc_session *s, void *arg)
{
    gc_args *a = arg;
    uint8_t vk[PC_VKEY_MAX], ukey[PC_KEY_MAX];
    size_t ulen, keys = 0, off;
    uint64_t ts;
    WT_ITEM k;
    pc_rc rc;
    int ret;

    a->doomed.len = 0;
    a->batch_versions = 0;
    if (a->started) {
        size_t eklen = pc_ekey(vk, a->resume, a->resume_len);
        rc = pc_cursor_seek_ge(s, s->write, vk, eklen);
    } else {
        rc = (ret = s->write->next(s->write)) == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    }
    while (rc == PC_OK) {
        if ((ret = s->write->get_key(s->write, &k)) != 0)
            return pc_wt_error(s, ret, "get_key");
        if (pc_vkey_decode(k.data, k.size, ukey, &ulen, &ts) != 0)
            return PC_ERROR;
        if (keys == GC_KEYS_PER_TXN ||
            (a->limited && pc_key_cmp(ukey, ulen, a->limit, a->limit_len) >= 0))
            break;
        keys++;
        if ((rc = gc_key(s, a, ukey, ulen)) != PC_OK)
            return rc;
        /* gc_key stopped on the next key, or at the end. */
        size_t vklen = pc_vkey(vk, ukey, ulen, 0);
        rc = pc_cursor_seek_ge(s, s->write, vk, vklen);
    }
    if (rc != PC_OK && rc != PC_NOT_FOUND)
        return rc;
    bool done = rc == PC_NOT_FOUND;

    /* A part that removes anything carries the safe point its removals
     * rest on, ahead of them: in whatever log it goes (a region's own,
     * whose replicas may apply it before another log raised the node's
     * safe point), no version goes before the reads below it are refused
     * (DESIGN §6.5, step 6). In the node's one log it repeats what the
     * log holds already (applied as a max: nothing changes). */
    if (a->doomed.len > 0 && (rc = pc_batch_raise_safe_point(s->propose, a->safe_point)) != PC_OK)
        return rc;

    /* Remove what was doomed, now that the walk is over. */
    uint64_t versions = 0, data = 0;
    for (off = 0; off < a->doomed.len;) {
        const uint8_t *p = (const uint8_t *)a->doomed.data + off;
        size_t len = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
        WT_CURSOR *c = p[0] == 'w' ? s->write : s->data;
        if ((rc = pc_cursor_del(s, c, p + 5, len)) != PC_OK)
            return rc;
        if (p[0] == 'w')
            versions++;
        else
            data++;
        off += 5 + len;
    }
    a->batch = (pc_gc_stats){keys, a->batch_versions, versions, data};
    a->next_done = done;
    if (!done) {
        memcpy(a->next, ukey, ulen);
        a->next_len = ulen;
    }
    return PC_OK;
}

pc_rc pc_gc_begin(pc_session *s, uint64_t safe_point, uint64_t *applied, pc_gc_walk **walk)
{
    uint64_t raised = 0;
    *walk = NULL;
    if (applied != NULL)
        *applied = 0;
    pc_rc rc = pc_safe_point_raise(s, safe_point, &raised);
    if (rc != PC_OK || raised == 0)
        return rc;
    if (applied != NULL)
        *applied = raised;
    gc_args *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return PC_NOMEM;
    a->safe_point = raised;
    *walk = a;
    return PC_OK;
}

pc_rc pc_gc_walk_at(pc_session *s, uint64_t safe_point, pc_slice from, pc_gc_walk **walk)
{
    uint64_t usable = 0;
    *walk = NULL;
    if (safe_point == 0 || from.len > PC_KEY_MAX)
        return PC_INVALID;
    pc_rc rc = pc_safe_point_agreed(s, safe_point, &usable);
    if (rc != PC_OK)
        return rc;
    if (usable == 0)
        return PC_UNAVAILABLE; /* not applied here yet, or a read pinned at the bottom */
    gc_args *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return PC_NOMEM;
    a->safe_point = usable;
    if (from.len > 0) {
        memcpy(a->resume, from.data, from.len);
        a->resume_len = from.len;
        a->started = true; /* the first part seeks to from */
    }
    *walk = a;
    return PC_OK;
}

pc_rc pc_gc_next(pc_session *s, pc_gc_walk *a, pc_gc_stats *st, bool *done)
{
    if (s->propose == NULL)
        return PC_INVALID; /* its removals are proposed (engine_replica.h) */
    pc_rc rc = a->done ? PC_OK : pc_run_txn(s, gc_batch, a);
    if (rc == PC_OK && !a->done) {
        /* The part was proposed: count it and move on. */
        st->keys += a->batch.keys;
        st->versions += a->batch.versions;
        st->versions_removed += a->batch.versions_removed;
        st->data_removed += a->batch.data_removed;
        a->done = a->next_done;
        memcpy(a->resume, a->next, a->next_len);
        a->resume_len = a->next_len;
        a->started = true;
    }
    *done = a->done;
    return rc;
}

pc_slice pc_gc_walk_position(const pc_gc_walk *a)
{
    return (pc_slice){a->resume, a->started ? a->resume_len : 0};
}

void pc_gc_walk_limit(pc_gc_walk *a, const void *end, size_t len)
{
    a->limited = end != NULL && len <= sizeof(a->limit);
    a->limit_len = a->limited ? len : 0;
    if (a->limited)
        memcpy(a->limit, end, len);
}

void pc_gc_end(pc_gc_walk *a)
{
    if (a == NULL)
        return;
    pc_buf_free(&a->doomed);
    free(a);
}
