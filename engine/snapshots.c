/*
 * snapshots.c — which snapshots can still be read: the GC safe point and
 * the reads pinned above it (TiKV's GC safe point, docs/DESIGN.md §4.6).
 *
 * GC drops versions that no snapshot at or above the safe point needs, so
 * a read below it could silently miss a value. Three rules keep reads
 * honest:
 *  - the safe point is stored in the meta table and flushed to disk before
 *    GC removes anything below it, and loaded at open: a restart (clean
 *    or kill -9) never forgets it;
 *  - a read at ts pins ts for as long as it runs, and the check "ts is not
 *    below the safe point" is made under the same mutex that raising the
 *    safe point takes: GC never passes a pinned read, and a read never
 *    starts below a safe point that was raised;
 *  - it only goes up.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char SAFE_POINT_KEY[] = "gc_safe_point";

typedef struct {
    uint64_t value;
} meta_args;

static pc_rc load_body(pc_session *s, void *arg)
{
    meta_args *a = arg;
    WT_ITEM v;
    pc_rc rc = pc_cursor_get(s, s->meta, SAFE_POINT_KEY, sizeof(SAFE_POINT_KEY) - 1, &v);
    if (rc == PC_NOT_FOUND) {
        a->value = 0;
        return PC_OK;
    }
    if (rc != PC_OK)
        return rc;
    if (v.size != 8)
        return PC_ERROR;
    a->value = pc_get_be64(v.data);
    return PC_OK;
}

pc_rc pc_read_safe_point(pc_session *s, uint64_t *value)
{
    meta_args a = {0};
    pc_rc rc = load_body(s, &a);
    *value = a.value;
    return rc;
}

pc_rc pc_store_safe_point(pc_session *s, uint64_t value)
{
    uint8_t v[8];
    pc_put_be64(v, value);
    return pc_cursor_put(s, s->meta, SAFE_POINT_KEY, sizeof(SAFE_POINT_KEY) - 1, v, 8);
}

void pc_safe_point_note(pc_engine *e, uint64_t value)
{
    pthread_mutex_lock(&e->snap_mu);
    if (value > atomic_load(&e->safe_point))
        atomic_store(&e->safe_point, value);
    pthread_mutex_unlock(&e->snap_mu);
}

pc_rc pc_snapshots_load(pc_session *s)
{
    meta_args a = {0};
    pc_rc rc = pc_run_txn(s, load_body, &a);
    if (rc == PC_OK)
        atomic_store(&s->e->safe_point, a.value);
    return rc;
}

/* A walk another node began (pc_gc_walk_at) goes no further than the
 * safe point this store holds, that is, one its group agreed to and this
 * node applied, and stays below this node's own pinned reads; reads below
 * what it uses are refused from then on. */
pc_rc pc_safe_point_agreed(pc_session *s, uint64_t want, uint64_t *usable)
{
    pc_engine *e = s->e;
    meta_args stored = {0};
    *usable = 0;
    pc_rc rc = pc_run_txn(s, load_body, &stored);
    if (rc != PC_OK || stored.value < want)
        return rc;
    pthread_mutex_lock(&e->snap_mu);
    for (size_t i = 0; i < e->npins; i++)
        if (e->pins[i] <= want)
            want = e->pins[i] - 1;
    /* The apply that stored it notes it in memory only after its commit:
     * no read may start below it once a walk uses it. */
    if (want > atomic_load(&e->safe_point))
        atomic_store(&e->safe_point, want);
    pthread_mutex_unlock(&e->snap_mu);
    *usable = want;
    return PC_OK;
}

uint64_t pc_gc_safe_point(pc_engine *e)
{
    return atomic_load(&e->safe_point);
}

pc_rc pc_snapshot_pin(pc_engine *e, uint64_t ts)
{
    pc_rc rc = PC_OK;
    pthread_mutex_lock(&e->snap_mu);
    if (ts == 0 || ts < atomic_load(&e->safe_point)) {
        rc = PC_INVALID;
    } else if (e->npins == e->cappins) {
        size_t cap = e->cappins ? e->cappins * 2 : 64;
        uint64_t *v = realloc(e->pins, cap * sizeof(*v));
        if (v == NULL)
            rc = PC_NOMEM;
        else {
            e->pins = v;
            e->cappins = cap;
        }
    }
    if (rc == PC_OK)
        e->pins[e->npins++] = ts;
    pthread_mutex_unlock(&e->snap_mu);
    return rc;
}

void pc_snapshot_unpin(pc_engine *e, uint64_t ts)
{
    pthread_mutex_lock(&e->snap_mu);
    for (size_t i = 0; i < e->npins; i++) {
        if (e->pins[i] == ts) {
            e->pins[i] = e->pins[--e->npins];
            break;
        }
    }
    pthread_mutex_unlock(&e->snap_mu);
}

/* Whether to raise is decided against the stored safe point, not the one
 * in memory, which a proposal that was lost may have raised: a leader's
 * batch must follow from the replicated state and its pins alone (a lost
 * proposal is proposed again). Memory goes up at once, under the lock the
 * pins take, so no read starts below it; then the stored value goes into
 * the batch (every member stores it when it applies the batch, and the
 * caller applies it before it proposes a removal). */
pc_rc pc_safe_point_raise(pc_session *s, uint64_t want, uint64_t *applied)
{
    pc_engine *e = s->e;
    meta_args stored = {0};
    *applied = 0;
    if (s->propose == NULL)
        return PC_INVALID; /* only a proposal raises it (engine_replica.h) */
    pc_rc rc = pc_run_txn(s, load_body, &stored);
    if (rc != PC_OK)
        return rc;
    pthread_mutex_lock(&e->snap_mu);
    for (size_t i = 0; i < e->npins; i++)
        if (e->pins[i] <= want)
            want = e->pins[i] - 1;
    bool raise = want > stored.value;
    if (raise && want > atomic_load(&e->safe_point))
        atomic_store(&e->safe_point, want); /* from now on reads below it are refused */
    pthread_mutex_unlock(&e->snap_mu);
    if (!raise)
        return PC_OK;
    rc = pc_batch_raise_safe_point(s->propose, want);
    if (rc == PC_OK)
        *applied = want;
    return rc;
}
