/*
 * latch_session.c — the latches a session holds in propose mode
 * (docs/DESIGN.md §4.10; the table itself: latch.c).
 *
 * A proposal writes nothing, so WiredTiger's write-write conflicts no
 * longer keep two actions on one key apart: both would read "no lock" and
 * both produce a batch. So in propose mode every writing action takes the
 * latches of its keys before its first read, and the session keeps them
 * until the caller has applied the batch (or failed to propose it): the
 * next action on those keys then reads a store that holds this one's
 * writes. A writing action without a batch is refused here, before it
 * reads: only the applier writes to the store (apply.c).
 *
 * A session holds one set at a time. An action whose keys the set covers
 * takes nothing more (several actions that share one batch latch all their
 * keys first, pc_session_latch; each finds them held); one that needs
 * other slots is refused: taking more while holding some could wait in a
 * cycle. Keys found by a scan are latched after the scan, and read again.
 *
 * A one-phase commit and a two-phase commit point also hand their entries
 * in the table of commits in flight (memlock.c) over to the latches: the
 * batch is not applied when the action returns, so those entries, which
 * keep readers from a store that lacks the commit, go with the latches.
 */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

struct pc_latches {
    pc_latch_table *t;
    pc_latch_set set;
    pc_memlocks *mem;   /* non-NULL: commits in flight handed over to these latches */
};

/* Add want's slots that the session does not hold yet to its set, if
 * none is taken by another (else nothing changes: PC_LOCKED). */
static pc_rc try_add(pc_latches *g, const pc_latch_set *want)
{
    pc_latch_set more = *want;
    for (size_t w = 0; w < sizeof(more.bits) / sizeof(more.bits[0]); w++)
        more.bits[w] &= ~g->set.bits[w];
    if (pc_latch_set_empty(&more))
        return PC_OK;
    if (!pc_latch_trylock(g->t, &more))
        return PC_LOCKED;
    for (size_t w = 0; w < sizeof(more.bits) / sizeof(more.bits[0]); w++)
        g->set.bits[w] |= more.bits[w];
    return PC_OK;
}

/* Take want for s: waiting for it, or not at all (PC_LOCKED). */
static pc_rc take(pc_session *s, const pc_latch_set *want, bool wait)
{
    if (pc_latch_set_empty(want))
        return PC_OK;
    if (s->latches != NULL) {
        if (pc_latch_set_covers(&s->latches->set, want))
            return PC_OK;
        if (!wait)
            return try_add(s->latches, want);
        pc_log(s->e, PC_LOG_ERROR,
               "an action needs latches its session does not hold: latch all its keys at "
               "once, or release the earlier ones (DESIGN §4.10)");
        return PC_INVALID;
    }
    pc_latches *g = malloc(sizeof(*g));
    if (g == NULL)
        return PC_NOMEM;
    g->t = s->e->latches;
    g->set = *want;
    g->mem = NULL;
    if (wait) {
        uint64_t waited = pc_latch_lock(g->t, &g->set);
        if (waited != 0 && s->e->latch_waited != NULL)
            s->e->latch_waited(s->e->latch_arg, waited);
    } else if (!pc_latch_trylock(g->t, &g->set)) {
        free(g);
        return PC_LOCKED;
    }
    s->latches = g;
    return PC_OK;
}

/* Every action that may write latches first: the one place that refuses
 * an action given no batch to propose into (engine_replica.h). */
static pc_rc need_batch(pc_session *s)
{
    if (s->propose != NULL)
        return PC_OK;
    pc_log(s->e, PC_LOG_ERROR,
           "a writing action runs in propose mode only (pc_session_propose): refused");
    return PC_INVALID;
}

pc_rc pc_latch_take(pc_session *s, const pc_latch_set *want)
{
    pc_rc rc = need_batch(s);
    return rc != PC_OK ? rc : take(s, want, true);
}

pc_rc pc_latch_keys(pc_session *s, const pc_slice *keys, size_t n)
{
    pc_latch_set want;
    pc_rc rc = need_batch(s);
    if (rc != PC_OK)
        return rc;
    pc_latch_set_clear(&want);
    for (size_t i = 0; i < n; i++)
        pc_latch_set_add(&want, keys[i].data, keys[i].len);
    return take(s, &want, true);
}

pc_rc pc_latch_mutations(pc_session *s, const pc_mutation *m, size_t n)
{
    pc_latch_set want;
    pc_rc rc = need_batch(s);
    if (rc != PC_OK)
        return rc;
    pc_latch_set_clear(&want);
    for (size_t i = 0; i < n; i++)
        pc_latch_set_add(&want, m[i].key.data, m[i].key.len);
    return take(s, &want, true);
}

static pc_rc latch_given(pc_session *s, const pc_slice *keys, size_t n, bool wait)
{
    pc_latch_set want;
    if (keys == NULL && n > 0)
        return PC_INVALID;
    pc_latch_set_clear(&want);
    for (size_t i = 0; i < n; i++) {
        if (keys[i].data == NULL && keys[i].len > 0)
            return PC_INVALID;
        pc_latch_set_add(&want, keys[i].data, keys[i].len);
    }
    return take(s, &want, wait);
}

pc_rc pc_session_latch(pc_session *s, const pc_slice *keys, size_t n)
{
    return latch_given(s, keys, n, true);
}

pc_rc pc_session_try_latch(pc_session *s, const pc_slice *keys, size_t n)
{
    return latch_given(s, keys, n, false);
}

void pc_latch_keep_memlocks(pc_session *s, const pc_mutation *m, size_t n, uint64_t tag)
{
    /* The action latched its keys before it wrote (need_batch above). */
    s->latches->mem = s->e->memlocks;
    pc_memlock_hand_over(s->e->memlocks, m, n, tag, s->latches);
}

pc_latches *pc_session_take_latches(pc_session *s)
{
    pc_latches *g = s->latches;
    s->latches = NULL;
    return g;
}

void pc_latches_release(pc_latches *g)
{
    if (g == NULL)
        return;
    /* The commits in flight first: whoever gets a latch next finds its
     * keys free in the table of commits in flight too. */
    if (g->mem != NULL)
        pc_memlock_release_owner(g->mem, g);
    pc_latch_unlock(g->t, &g->set);
    free(g);
}

void pc_session_release_latches(pc_session *s)
{
    pc_latches_release(pc_session_take_latches(s));
}
