/*
 * resolve.h — resolving a lock another transaction left in the way (the
 * paper's BackoffAndMaybeCleanupLock, Figure 6; docs/DESIGN.md §3.5), for
 * readers, writers and the janitor: ask the lock's primary, then roll the
 * key forward or back. Two engine actions, each its own write, since the
 * primary may live in another Raft group (region) than the key.
 */
#ifndef PC_RESOLVE_H
#define PC_RESOLVE_H

#include "engine.h"
#include "metrics.h"
#include "service.h"

/* Resolve lock: the status of its transaction from its primary
 * (pc_check_txn_status, which rolls back a primary whose owner is dead),
 * then, once the primary committed or was rolled back, this key
 * (pc_resolve_lock). PC_OK: the lock is gone (read again), counted in
 * counted (label how: rs_outcome); PC_LOCKED: its owner is alive (st says
 * until when); else what failed. */
pc_rc rs_resolve_met_lock(svc *s, pc_session *ps, const pc_lock_view *lock,
                          metrics_family *counted, pc_txn_status *st);

/* What a resolution that answered PC_OK did: "rolled_forward" or
 * "rolled_back". */
const char *rs_outcome(const pc_txn_status *st);

#endif
