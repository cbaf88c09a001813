/*
 * failpoint.h — crash points for tests (DESIGN §1.4). The environment
 * variable PERCOLATOR_FAILPOINT names one point of the commit:
 *
 *   PERCOLATOR_FAILPOINT=after_prewrite_primary      die there
 *   PERCOLATOR_FAILPOINT=after_prewrites=sleep:3000  stall there 3 s
 *   PERCOLATOR_FAILPOINT=local_sync=error            fail there (points
 *                                                    asked with failpoint_fails)
 *
 * Besides the commit's: before_region_group (region_logs.c), between a
 * split applied and its new region's group started.
 *
 * Dying flushes the log first, so the state at that point is what the
 * disk holds, then SIGKILLs the process: no cleanup runs, as in a crash.
 * Sleeping imitates a stuck coordinator that still counts as alive.
 */
#ifndef PC_FAILPOINT_H
#define PC_FAILPOINT_H

#include <stdbool.h>

#include "engine.h"

/* Read PERCOLATOR_FAILPOINT (once, at start-up). */
void failpoint_init(void);
/* Act if `name` is the configured point. */
void failpoint(pc_session *ps, const char *name);
/* true if `name` is the configured point with "=error": the caller fails
 * there as if the operation had failed. */
bool failpoint_fails(const char *name);

#endif
