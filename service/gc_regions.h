/*
 * gc_regions.h — garbage collection over every region with a log of its
 * own (--region-logs), from region 1's leader, which keeps the sessions
 * and the GC clock (janitor.c collect_garbage): each region's part is run
 * where the region is led (actions.h ACT_OLDEST_LOCK and ACT_GC, sent as
 * region calls when another node leads it; DESIGN §6.6).
 */
#ifndef PC_GC_REGIONS_H
#define PC_GC_REGIONS_H

#include "service.h"

/* The oldest lock's start_ts in every region (UINT64_MAX: none). */
pc_rc gc_regions_oldest_lock(svc *s, pc_session *ps, uint64_t *oldest);

/* Remove what no snapshot at or above safe_point sees, in every region,
 * once the safe point is stored (pc_gc_begin, region 1's log); the
 * counts added to *st. */
pc_rc gc_regions_collect(svc *s, pc_session *ps, uint64_t safe_point, pc_gc_stats *st);

#endif
