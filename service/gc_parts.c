/*
 * gc_parts.c — see gc_parts.h.
 */
#include <string.h>

#include "gc_parts.h"
#include "timeutil.h"

#define GC_PARTS_PER_CALL 16  /* 2,048 keys at most (128 a part)... */
#define GC_CALL_MS 2000       /* ...and no longer than this: a call ends well within its
                               * time-out (region_call.c) */
#define LOCKS_SCANNED 1000000 /* the janitor's bound on one pass over the locks */

/* The end of the region holding key (into end, *unbounded when none);
 * false: no region holds it (a hole: nothing here vouches for it). */
static bool region_end(svc *s, pc_slice key, unsigned char *end, size_t *len, bool *unbounded)
{
    region *r = s->regions != NULL ? router_find(s->regions, key.data, key.len) : NULL;
    if (r == NULL || r->end.len > PC_KEY_MAX)
        return false;
    *unbounded = r->unbounded;
    *len = r->unbounded ? 0 : r->end.len;
    if (*len > 0)
        memcpy(end, r->end.data, *len);
    return true;
}

typedef struct {
    pc_slice end;   /* the region's (data NULL: none) */
    uint64_t oldest;
    size_t seen;
} oldest_arg;

static int note_oldest(void *arg, const pc_lock_view *l)
{
    oldest_arg *x = arg;
    if (x->end.data != NULL && pc_key_cmp(l->key.data, l->key.len, x->end.data, x->end.len) >= 0)
        return 1; /* past the region */
    x->seen++;
    if (x->oldest == 0 || l->start_ts < x->oldest)
        x->oldest = l->start_ts;
    return 0;
}

pc_rc gc_oldest_lock_here(svc *s, pc_session *ps, pc_slice from, uint64_t *oldest, pc_buf *next,
                          bool *last)
{
    unsigned char end[PC_KEY_MAX];
    size_t len;
    bool unbounded;
    /* Every lock this region's log committed is applied here first (a
     * lagging store could miss an old lock, and GC would take its
     * primary's record: janitor.c collect_garbage); the region's end is
     * read after the fence (a split it applied narrows it), and a change
     * of the map meanwhile sends the round back (as a scan: reader.c). */
    pc_rc rc = svc_read_fence(s, from);
    uint64_t epoch = svc_read_epoch(s, from);
    if (rc != PC_OK)
        return rc;
    if (!region_end(s, from, end, &len, &unbounded))
        return PC_UNAVAILABLE;
    oldest_arg x = {unbounded ? (pc_slice){NULL, 0} : (pc_slice){end, len}, 0, 0};
    if ((rc = pc_lock_scan_from(ps, from, LOCKS_SCANNED, note_oldest, &x)) != PC_OK)
        return rc;
    if (x.seen >= LOCKS_SCANNED || svc_read_epoch(s, from) != epoch)
        return PC_UNAVAILABLE; /* not every lock seen: no GC this round */
    *oldest = x.oldest;
    *last = unbounded;
    next->len = 0;
    return pc_buf_append(next, end, len);
}

pc_rc gc_part_here(svc *s, pc_session *ps, pc_slice from, uint64_t safe_point, pc_gc_stats *st,
                   pc_buf *next, bool *last)
{
    unsigned char end[PC_KEY_MAX];
    size_t len;
    bool unbounded, done = false, past = false;
    if (!region_end(s, from, end, &len, &unbounded))
        return PC_UNAVAILABLE;
    pc_gc_walk *walk = NULL;
    pc_rc rc = pc_gc_walk_at(ps, safe_point, from, &walk);
    /* Each part is one batch, so one region's (DESIGN §6.2): it stops at
     * the region's end, and the call with it. */
    if (rc == PC_OK)
        pc_gc_walk_limit(walk, unbounded ? NULL : end, len);
    uint64_t until = time_mono_ms() + GC_CALL_MS;
    for (int part = 0; rc == PC_OK && !done && !past && part < GC_PARTS_PER_CALL; part++) {
        pc_slice at = pc_gc_walk_position(walk);
        svc_write_begin(s, ps, part == 0 ? from : at);
        rc = svc_write_end(s, ps, pc_gc_next(ps, walk, st, &done), NULL);
        at = pc_gc_walk_position(walk);
        past = !unbounded && pc_key_cmp(at.data, at.len, end, len) >= 0;
        if (time_mono_ms() >= until)
            break;
    }
    if (rc == PC_OK) {
        /* Past this region (or past the last key this store holds, which
         * as a follower of the next regions may lag): the next call starts
         * at the region's end, where that region's leader walks its own. */
        pc_slice at = pc_gc_walk_position(walk);
        bool region_done = done || past;
        *last = region_done && unbounded;
        next->len = 0;
        rc = region_done && !unbounded ? pc_buf_append(next, end, len)
                                       : pc_buf_append(next, at.data, at.len);
    }
    pc_gc_end(walk);
    return rc;
}
