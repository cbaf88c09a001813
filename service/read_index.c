/*
 * read_index.c — see read_index.h.
 */
#include "read_index.h"

#include "engine_replica.h"
#include "timeutil.h"

#define POLL_MS 1 /* a follower's store is read this often while it waits */

pc_rc read_index_here(svc *s, pc_session *ps, pc_slice key, act_read_index *out)
{
    pc_rc rc = svc_read_fence(s, key);
    if (rc != PC_OK)
        return rc;
    /* The region as it is after the barrier (a split it applied): the
     * caller checks it asked about the same one. */
    region *r = s->regions != NULL ? router_find(s->regions, key.data, key.len) : NULL;
    if (r == NULL || r->raft == NULL)
        return PC_UNAVAILABLE; /* no log of its own: nothing to name */
    out->floor = pc_in_flight_floor(s->engine);
    out->region = r->id;
    /* The store's own count, not the Raft library's (a barrier answered
     * by a lease may not have passed the loop that refreshes that one). */
    return pc_region_applied_index(ps, r->id, &out->index);
}

pc_rc read_index_wait(pc_session *ps, const region *r, uint64_t index, unsigned wait_ms)
{
    uint64_t until = time_mono_ms() + wait_ms, mine = 0;
    for (;;) {
        pc_rc rc = pc_region_applied_index(ps, r->id, &mine);
        if (rc != PC_OK || mine >= index)
            return rc;
        if (time_mono_ms() >= until)
            return PC_UNAVAILABLE;
        time_sleep_ms(POLL_MS);
    }
}
