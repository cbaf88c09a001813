/*
 * reader.h — snapshot reads for the service (the paper's Get with
 * BackoffAndMaybeCleanupLock): a lock in the way is resolved at once when
 * its owner is dead; a live one is waited on with backoff, up to
 * --lock-wait-ms, after which the read answers PC_LOCKED (409 key_locked).
 */
#ifndef PC_READER_H
#define PC_READER_H

#include "engine.h"
#include "service.h"
#include "sessions.h"
#include "actions.h"

/* Reads of one key run where its region is led (actions.h): here, or by
 * the node leading it. */
pc_rc rd_get(svc *s, pc_session *ps, pc_slice key, uint64_t ts, pc_buf *value,
             uint64_t *commit_ts, pc_conflict *c);
/* The latest durable value (engine pc_get_latest). A lock met is resolved
 * when its transaction's fate is known (resolve.h), else stepped over: its
 * primary has not reached its commit point, so the newest committed value
 * is below it. A newest commit still waiting for its log flush is waited
 * for up to --lock-wait-ms when may_wait, else PC_LOCKED at once (for the
 * event threads: the caller then hands the request to a worker). */
pc_rc rd_get_latest(svc *s, pc_session *ps, pc_slice key, pc_buf *value, uint64_t *commit_ts,
                    pc_conflict *c, bool may_wait);
/* A read of one key run here by its region's leader (region_call.h
 * act_here_fn: what rd_get and rd_get_latest route, and a node serves
 * when another sends it one). */
pc_rc rd_here(svc *s, pc_session *ps, const act_call *a, act_answer *out);
/* The same, run here by the region's leader. */
pc_rc rd_get_here(svc *s, pc_session *ps, pc_slice key, uint64_t ts, pc_buf *value,
                  uint64_t *commit_ts, pc_conflict *c);
pc_rc rd_get_latest_here(svc *s, pc_session *ps, pc_slice key, bool step_over, pc_buf *value,
                         uint64_t *commit_ts, pc_conflict *c, bool may_wait);
/* A scan runs here: every region it covers must be led here (its fence,
 * svc_read_fence_range), else 503. */
pc_rc rd_scan(svc *s, pc_session *ps, pc_slice start, pc_slice end, uint64_t ts, size_t limit,
              pc_items *out, pc_conflict *c);

/* A session's view of a range of user keys: the engine's items at ts with
 * the session's own buffered writes merged over them (own writes win;
 * their commit_ts is 0; own deletes hide keys). */
typedef struct {
    pc_slice key, value;      /* user key */
    uint64_t commit_ts;
} rd_item;

typedef struct {
    pc_items it;              /* the engine's answer */
    const txn *own;           /* NULL: no session */
    size_t wi, wend;          /* own writes in range: own->w[wi..wend) */
    size_t limit;
} rd_view;

/* Scan [start, end) (user keys; end empty: no end) at ts, own (may be
 * NULL) merged over it, enough for limit + 1 items (one more than a page
 * tells that a next page exists), and no more than --max-reply-bytes of
 * keys and values (it.more then says the engine stopped early). Free with
 * rd_view_free. */
pc_rc rd_scan_view(svc *s, pc_session *ps, const char *start, size_t slen, const char *end,
                   size_t elen, uint64_t ts, size_t limit, const txn *own, rd_view *v,
                   pc_conflict *c);
/* Visit the view's items in key order until fn returns false. */
void rd_view_each(const rd_view *v, bool (*fn)(void *arg, const rd_item *it), void *arg);
void rd_view_free(rd_view *v);

/* Resolve a lock met on the way: roll it forward or back when its
 * transaction's fate is known (rs_resolve_met_lock, counted in /metrics as
 * percolator_locks_resolved_total). PC_OK: it is gone; PC_LOCKED: its
 * owner is alive. */
pc_rc rd_resolve(svc *s, pc_session *ps, const pc_lock_view *lock);

/* A lock was met: resolve it if its owner is dead, else wait a little.
 * true: try again; false: give up (deadline passed, or *rc says why). */
bool rd_handle_lock(svc *s, pc_session *ps, const pc_conflict *c, uint64_t deadline_ms,
                    unsigned *attempt, pc_rc *rc);

#endif
