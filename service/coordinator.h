/*
 * coordinator.h — Percolator's client-side commit (seed 003 Figure 6
 * Commit), run by the service on behalf of a session: prewrite the primary,
 * then the secondaries, take the commit timestamp, commit the primary (the
 * commit point, made durable before anyone is told), then the secondaries.
 * Small transactions may instead commit in one phase (seed 001 §4.2.5).
 */
#ifndef PC_COORDINATOR_H
#define PC_COORDINATOR_H

#include "engine.h"
#include "service.h"

/* Commit the mutations (engine keys, sorted, distinct) of the transaction
 * start_ts owned by `owner`. Returns PC_OK with *commit_ts, or:
 *   PC_WRITE_CONFLICT / PC_LOCKED   c names the key; nothing was committed
 *   PC_TS_UNAVAILABLE               the oracle is down; nothing was committed
 *                                   (prewrite locks stay until a retry or
 *                                   until the owner's session ends)
 *   PC_ROLLED_BACK                  a cleaner rolled the transaction back
 *   PC_ERROR                        storage failure; when *commit_ts is
 *                                   not 0 the commit point was passed (the
 *                                   transaction committed) but the log could
 *                                   not be synced
 * On any failure the locks it took are rolled back. */
pc_rc coord_commit(svc *s, pc_session *ps, const char *owner, uint64_t start_ts,
                   const pc_mutation *m, size_t n, uint64_t *commit_ts, pc_conflict *c);

/* A blind write (no reads, no conditions) of at most 64 keys in one
 * phase with a single timestamp (engine one_pc with start_ts 0). Same
 * answers as coord_commit; PC_INVALID when it is too big for one phase
 * (use coord_commit then). */
pc_rc coord_blind_write(svc *s, pc_session *ps, const pc_mutation *m, size_t n,
                        uint64_t *commit_ts, pc_conflict *c);

#endif
