/*
 * actions.c — see actions.h.
 */
#include <string.h>

#include "actions.h"
#include "gc_parts.h"
#include "read_index.h"
#include "region_call.h"
#include "sessions.h"
#include "timeutil.h"

/* Whose locks are alive, for a status check another node sent: the owner
 * of the lock it met as that node's sessions said, when they are its
 * own; else a lock of this run's sessions as they say; one of the first
 * sender's sessions alive while its TTL runs (that node alone knows them,
 * and keeps a long commit's primary fresh with heartbeats); one of any
 * other run dead, as on one node (sessions.h: an earlier leader's
 * sessions ended with its lead). */
typedef struct {
    svc *s;
    const char *run;
    const act_call *a;
} live_arg;

static int owner_alive_for(void *arg, const void *owner, size_t len)
{
    const live_arg *x = arg;
    const pc_slice *met = &x->a->meta.owner;
    /* The sender judged this owner with its own sessions: its word. */
    if (x->a->owner_verdict != ACT_OWNER_UNKNOWN && met->len == len &&
        memcmp(met->data, owner, len) == 0)
        return x->a->owner_verdict == ACT_OWNER_ALIVE;
    size_t rl = strlen(x->run);
    if (rl > 0 && len > rl && ((const char *)owner)[rl] == '-' && memcmp(owner, x->run, rl) == 0)
        return 1;
    return sessions_owner_alive(x->s->sessions, owner, len, time_wall_ms());
}

/* Begin, the engine's action, end: the batch proposed to its region's log
 * in the term it began in (svc_write_begin). */
#define WRITE(s, ps, key, call) (svc_write_begin(s, ps, key), svc_write_end(s, ps, (call), NULL))

pc_rc act_here(svc *s, pc_session *ps, const act_call *a, act_answer *out)
{
    const pc_txn_meta *t = &a->meta;
    pc_slice key = act_key(a);
    switch (a->kind) {
    case ACT_PREWRITE:
        return WRITE(s, ps, key, pc_prewrite(ps, t, a->m, a->n, out->c));
    case ACT_COMMIT_PRIMARY:
        return WRITE(s, ps, key, pc_commit_primary(ps, key, t->start_ts, a->ts));
    case ACT_COMMIT:
        return WRITE(s, ps, key, pc_commit(ps, a->keys, a->n, t->start_ts, a->ts));
    case ACT_ROLLBACK:
        return WRITE(s, ps, key, pc_rollback(ps, a->keys, a->n, t->start_ts));
    case ACT_HEARTBEAT:
        return WRITE(s, ps, key, pc_heartbeat(ps, key, t->start_ts, t->wall_ms, t->ttl_ms));
    case ACT_CHECK_TXN_STATUS: {
        pc_liveness live = svc_liveness(s);
        live_arg arg = {s, region_call_for_run(), a};
        if (arg.run != NULL && strcmp(arg.run, s->run_id) != 0) {
            live.owner_alive = owner_alive_for;
            live.arg = &arg;
        }
        return WRITE(s, ps, key, pc_check_txn_status(ps, key, t->start_ts, &live, out->st));
    }
    case ACT_RESOLVE_LOCK:
        return WRITE(s, ps, key, pc_resolve_lock(ps, key, t->start_ts, a->ts));
    case ACT_NOTIFY_CLEAR:
        return WRITE(s, ps, key, pc_notify_clear(ps, key, a->ts));
    case ACT_OLDEST_LOCK: /* a fenced read, and a walk of writes: their own begin and end */
        return gc_oldest_lock_here(s, ps, key, out->commit_ts, out->next, out->last);
    case ACT_GC:
        return gc_part_here(s, ps, key, a->ts, out->gc, out->next, out->last);
    case ACT_READ_INDEX:
        return read_index_here(s, ps, key, out->ri);
    case ACT_GET: /* reads: reader.c rd_here */
    case ACT_GET_LATEST:
    case ACT_SCAN:
    case ACT_COUNT:
        break;
    }
    return PC_INVALID;
}

pc_rc act_run(svc *s, pc_session *ps, const act_call *a, act_answer *out)
{
    return region_call_route(s, ps, a, out, act_here);
}

pc_rc act_prewrite(svc *s, pc_session *ps, const pc_txn_meta *t, const pc_mutation *m,
                   size_t n, pc_conflict *c)
{
    act_call a = {.kind = ACT_PREWRITE, .meta = *t, .m = m, .n = n};
    return act_run(s, ps, &a, &(act_answer){.c = c});
}

pc_rc act_commit_primary(svc *s, pc_session *ps, pc_slice primary, uint64_t start_ts,
                         uint64_t commit_ts)
{
    act_call a = {.kind = ACT_COMMIT_PRIMARY, .meta.start_ts = start_ts, .keys = &primary,
                  .n = 1, .ts = commit_ts};
    return act_run(s, ps, &a, &(act_answer){0});
}

pc_rc act_commit(svc *s, pc_session *ps, const pc_slice *keys, size_t n, uint64_t start_ts,
                 uint64_t commit_ts)
{
    act_call a = {.kind = ACT_COMMIT, .meta.start_ts = start_ts, .keys = keys, .n = n,
                  .ts = commit_ts};
    return act_run(s, ps, &a, &(act_answer){0});
}

pc_rc act_rollback(svc *s, pc_session *ps, const pc_slice *keys, size_t n, uint64_t start_ts)
{
    act_call a = {.kind = ACT_ROLLBACK, .meta.start_ts = start_ts, .keys = keys, .n = n};
    return act_run(s, ps, &a, &(act_answer){0});
}

pc_rc act_heartbeat(svc *s, pc_session *ps, pc_slice primary, uint64_t start_ts,
                    uint64_t wall_ms, uint64_t ttl_ms)
{
    act_call a = {.kind = ACT_HEARTBEAT,
                  .meta = {.start_ts = start_ts, .primary = primary, .wall_ms = wall_ms,
                           .ttl_ms = ttl_ms}};
    return act_run(s, ps, &a, &(act_answer){0});
}

pc_rc act_check_txn_status(svc *s, pc_session *ps, pc_slice primary, uint64_t start_ts,
                           pc_slice owner, pc_txn_status *st)
{
    act_call a = {.kind = ACT_CHECK_TXN_STATUS,
                  .meta = {.start_ts = start_ts, .primary = primary, .owner = owner}};
    return act_run(s, ps, &a, &(act_answer){.st = st});
}

pc_rc act_resolve_lock(svc *s, pc_session *ps, pc_slice key, uint64_t start_ts,
                       uint64_t commit_ts)
{
    act_call a = {.kind = ACT_RESOLVE_LOCK, .meta.start_ts = start_ts, .keys = &key, .n = 1,
                  .ts = commit_ts};
    return act_run(s, ps, &a, &(act_answer){0});
}

pc_rc act_notify_clear(svc *s, pc_session *ps, pc_slice key, uint64_t upto_ts)
{
    act_call a = {.kind = ACT_NOTIFY_CLEAR, .keys = &key, .n = 1, .ts = upto_ts};
    return act_run(s, ps, &a, &(act_answer){0});
}
