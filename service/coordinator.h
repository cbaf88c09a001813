/*
 * coordinator.h — Percolator's client-side commit (the paper's Figure 6
 * Commit), run by the service on behalf of a session: prewrite the primary,
 * then the secondaries, take the commit timestamp, commit the primary (the
 * commit point, made durable before anyone is told), then the secondaries.
 * Small transactions may instead commit in one phase (TiKV; DESIGN §3.4).
 */
#ifndef PC_COORDINATOR_H
#define PC_COORDINATOR_H

#include "engine.h"
#include "service.h"
#include "sessions.h"

/* Commit the mutations m (engine keys, sorted, distinct; m[0] is the
 * primary) of session t, which is the locks' owner. Returns PC_OK with
 * *commit_ts once the commit is durable, or:
 *   PC_WRITE_CONFLICT / PC_LOCKED   c names the key; nothing was committed,
 *                                   the locks it took are rolled back
 *   PC_TS_UNAVAILABLE               the oracle is down; nothing was committed.
 *                                   If t->commit_pending is now set, the
 *                                   prewrite locks stay (docs/DESIGN.md
 *                                   §3.3): the caller must keep m exactly as
 *                                   it is until a retry commits or rolls back
 *   PC_ROLLED_BACK                  a cleaner rolled the transaction back
 *   PC_ERROR                        storage failure, nothing committed
 * When t->commit_pending is set on entry, an earlier attempt left its
 * locks: the commit goes in two phases, whatever its size, so that it
 * finishes what that attempt began. A failed log flush stops the process
 * (svc_storage_failed): no answer is better than a wrong one. */
pc_rc coord_commit(svc *s, pc_session *ps, txn *t, const pc_mutation *m, size_t n,
                   uint64_t *commit_ts, pc_conflict *c);

/* Commit m as a transaction of the service's own (a one-shot write, an
 * observer registration) that began at start_ts: an internal session owns
 * its locks while it runs and is forgotten when it ends; a commit that
 * could not finish leaves no locks behind. Answers as coord_commit. */
pc_rc coord_commit_internal(svc *s, pc_session *ps, uint64_t start_ts, const pc_mutation *m,
                            size_t n, uint64_t *commit_ts, pc_conflict *c);

/* Undo what a pending commit (t->commit_pending) left: roll back every
 * lock of m, then clear the flag. */
void coord_rollback(svc *s, pc_session *ps, txn *t, const pc_mutation *m, size_t n);

/* A blind write (no reads, no conditions) of at most 64 keys in one
 * phase with a single timestamp (engine one_pc with start_ts 0). Same
 * answers as coord_commit; PC_INVALID when it is too big for one phase
 * (use coord_commit then). */
pc_rc coord_blind_write(svc *s, pc_session *ps, const pc_mutation *m, size_t n,
                        uint64_t *commit_ts, pc_conflict *c);

/* A session's buffered writes as engine mutations ("u" + key, ks_user),
 * in key order; an observer's session carries its acknowledgment first
 * ('a' < 'u'). The keys live in *keys_out; the caller frees both. NULL:
 * out of memory. */
pc_mutation *coord_mutations(const txn *t, char **keys_out, size_t *n);

#endif
