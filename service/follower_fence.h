/*
 * follower_fence.h — the change feed's fence of the regions another node
 * leads (--region-logs with --region-leaders-gather off, or while a lead
 * moves): for each, its leader's read index (read_index.h, sent as a
 * region call, actions.h ACT_READ_INDEX), then a wait until this node's
 * store has applied the region's log that far. Afterwards this node's
 * copy of those regions holds everything committed there before the
 * fence began, and floor bounds what their leaders still have in flight;
 * svc_read_fence_all_but then fences the regions led here and takes the
 * others as vouched for (DESIGN §10 rule 10).
 */
#ifndef PC_FOLLOWER_FENCE_H
#define PC_FOLLOWER_FENCE_H

#include "service.h"

typedef struct {
    uint64_t *ids;  /* the regions fenced by their read index */
    size_t n;
    uint64_t floor; /* the lowest floor of their leaders' commits in flight
                     * (UINT64_MAX: none): the resolved timestamp stays at
                     * or below it */
} follower_fence;

/* Fence every region this node does not lead now. PC_OK, or the first
 * refusal (no leader; a region split meanwhile; its index not applied
 * here within a second; past the fence's time budget). Free it with
 * follower_fence_free, whatever it returned. */
pc_rc follower_fence_begin(svc *s, pc_session *ps, follower_fence *f);
/* svc_read_fence_all_but's vouched: r was fenced by its read index. */
bool follower_fence_vouches(void *f, const region *r);
void follower_fence_free(follower_fence *f);

#endif
