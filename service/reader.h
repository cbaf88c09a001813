/*
 * reader.h — snapshot reads for the service (seed 003 Get with
 * BackoffAndMaybeCleanupLock): a lock in the way is resolved at once when
 * its owner is dead; a live one is waited on with backoff, up to
 * --lock-wait-ms, after which the read answers PC_LOCKED (409 key_locked).
 */
#ifndef PC_READER_H
#define PC_READER_H

#include "engine.h"
#include "service.h"

pc_rc rd_get(svc *s, pc_session *ps, pc_slice key, uint64_t ts, pc_buf *value,
             uint64_t *commit_ts, pc_conflict *c);
/* The latest durable value (engine pc_get_latest). A newest commit still
 * waiting for its log flush is waited for up to --lock-wait-ms when
 * may_wait, else PC_LOCKED at once (for the event threads: the caller then
 * hands the request to a worker). */
pc_rc rd_get_latest(svc *s, pc_session *ps, pc_slice key, pc_buf *value, uint64_t *commit_ts,
                    pc_conflict *c, bool may_wait);
pc_rc rd_scan(svc *s, pc_session *ps, pc_slice start, pc_slice end, uint64_t ts, size_t limit,
              pc_items *out, pc_conflict *c);

/* Resolve a lock met on the way: roll it forward or back when its
 * transaction's fate is known (counted in /metrics). PC_OK: it is gone;
 * PC_LOCKED: its owner is alive. */
pc_rc rd_resolve(svc *s, pc_session *ps, const pc_lock_view *lock);

/* A lock was met: resolve it if its owner is dead, else wait a little.
 * true: try again; false: give up (deadline passed, or *rc says why). */
bool rd_handle_lock(svc *s, pc_session *ps, const pc_conflict *c, uint64_t deadline_ms,
                    unsigned *attempt, pc_rc *rc);

#endif
