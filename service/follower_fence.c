/*
 * follower_fence.c — see follower_fence.h.
 */
#include <stdlib.h>

#include "actions.h"
#include "follower_fence.h"
#include "read_index.h"
#include "timeutil.h"

#define CALL_MS 2000       /* one read index, sent: a leader that takes longer is not one */
#define APPLY_WAIT_MS 1000 /* this store further behind than this: no feed this round */
#define BUDGET_MS 3000     /* the whole fence: the hub's thread has watchers to serve */

/* One region led elsewhere: its read index, then this store's wait. */
static pc_rc fence_one(svc *s, pc_session *ps, const region *r, follower_fence *f)
{
    if (r->start.len > PC_KEY_MAX)
        return PC_INVALID;
    pc_slice key = {r->start.len > 0 ? r->start.data : (const void *)"", r->start.len};
    act_read_index ri = {0};
    act_call a = {.kind = ACT_READ_INDEX, .keys = &key, .n = 1, .timeout_ms = CALL_MS};
    pc_rc rc = act_run(s, ps, &a, &(act_answer){.ri = &ri});
    if (rc != PC_OK)
        return rc;
    if (ri.region != r->id)
        return PC_UNAVAILABLE; /* its map differs from this node's (a split): next round */
    if ((rc = read_index_wait(ps, r, ri.index, APPLY_WAIT_MS)) != PC_OK)
        return rc;
    if (ri.floor < f->floor)
        f->floor = ri.floor;
    f->ids[f->n++] = r->id;
    return PC_OK;
}

pc_rc follower_fence_begin(svc *s, pc_session *ps, follower_fence *f)
{
    region **all = NULL;
    size_t n = s->regions != NULL ? router_list(s->regions, &all) : 0;
    f->n = 0;
    f->floor = UINT64_MAX;
    f->ids = calloc(n > 0 ? n : 1, sizeof *f->ids);
    pc_rc rc = f->ids == NULL || (s->regions != NULL && all == NULL) ? PC_NOMEM : PC_OK;
    uint64_t until = time_mono_ms() + BUDGET_MS;
    for (size_t i = 0; rc == PC_OK && i < n; i++) {
        if (svc_region_ready_term(all[i]) != RP_TERM_NONE)
            continue; /* led here: svc_read_fence_all_but fences it */
        rc = time_mono_ms() < until ? fence_one(s, ps, all[i], f) : PC_UNAVAILABLE;
    }
    free(all);
    return rc;
}

bool follower_fence_vouches(void *arg, const region *r)
{
    const follower_fence *f = arg;
    for (size_t i = 0; i < f->n; i++)
        if (f->ids[i] == r->id)
            return true;
    return false;
}

void follower_fence_free(follower_fence *f)
{
    free(f->ids);
    f->ids = NULL;
    f->n = 0;
}
