/*
 * gc_parts.h — what garbage collection asks of each region, run on the
 * node that leads it (actions.h ACT_OLDEST_LOCK and ACT_GC; DESIGN §6.6):
 * the oldest lock in the region, and a few parts of its collection below
 * a safe point the collector began (janitor.c on region 1's leader; the
 * walk over every region: gc_regions.h).
 *
 * Each answers where the next call starts (*next: the region's end, or
 * the key the next part starts at) and whether nothing is left past it
 * (*last), so that the caller walks every key once, whatever the map it
 * holds: a region split since is answered for by its part here.
 */
#ifndef PC_GC_PARTS_H
#define PC_GC_PARTS_H

#include "service.h"

/* The oldest lock in the region holding from, at or past from: its
 * start_ts in *oldest (0: none). Fenced first, as a read of the range. */
pc_rc gc_oldest_lock_here(svc *s, pc_session *ps, pc_slice from, uint64_t *oldest, pc_buf *next,
                          bool *last);

/* Up to GC_PARTS_PER_CALL parts of the collection below safe_point from
 * key from, within from's region, each proposed to its log; the counts
 * added to *st. PC_UNAVAILABLE until this node has applied a safe point
 * at or above safe_point (pc_gc_walk_at). */
pc_rc gc_part_here(svc *s, pc_session *ps, pc_slice from, uint64_t safe_point, pc_gc_stats *st,
                   pc_buf *next, bool *last);

#endif
