/*
 * engine_replica.h — the engine as a replicated state machine: an action
 * writes nothing and appends what it would write to its session's batch;
 * the batch is made durable by whoever replicates it (a single node's
 * local log, a Raft group's log) and applied on every member in one order
 * (pc_apply_batch: the only writer of the store); images of the store
 * stand in for the log's compacted prefix. The protocol's own API is
 * engine.h.
 */
#ifndef PC_ENGINE_REPLICA_H
#define PC_ENGINE_REPLICA_H

#include "engine.h"

/* ---- write batches (batch.c, docs/DESIGN.md §4.10) ----
 * In propose mode a session's actions write nothing; every mutation they would make is appended to
 * the batch given (they read the store as it is), and pc_apply_batch then
 * applies the batch — on this node and on others, in one order — in one
 * WiredTiger transaction that also records the batch's index. Concurrent
 * proposals are kept apart by latches (below), and a commit's entries in
 * the table of commits in flight (§4.4) stay with the latches until the
 * caller applied the batch. GC proposes its safe point and its removals
 * in parts (pc_gc_begin, pc_gc_next). */

/* Propose into batch (an empty pc_buf, or one with earlier actions'
 * batches); NULL: propose no more (the default: a writing action is then
 * refused, PC_INVALID), releasing the latches the caller has not taken
 * (below). */
void pc_session_propose(pc_session *s, pc_buf *batch);
/* Whether bytes are a well-formed batch: PC_OK or PC_INVALID. */
pc_rc pc_batch_check(const void *batch, size_t len);
/* Append the operations of batch to into (a batch, or empty): applying
 * into then does what applying the two in turn did, in one transaction.
 * A caller that proposes the batches of independent actions (their
 * latches kept them apart) joins them into one Raft entry. PC_INVALID:
 * batch has no batch header (into unchanged); PC_NOMEM. */
pc_rc pc_batch_join(pc_buf *into, const void *batch, size_t len);
/* Apply a batch as number index (1, 2, ...: the order every node applies
 * in). An index at or below the last one applied is skipped (a replay
 * after a restart). PC_INVALID: not a batch (nothing applied). */
pc_rc pc_apply_batch(pc_session *s, const void *batch, size_t len, uint64_t index);
/* The index of the last batch applied (0: none). */
pc_rc pc_applied_index(pc_session *s, uint64_t *index);
/* A store restored from a backup starts a new group, whose log begins at
 * 1 again: without this every entry up to the old index would be taken
 * for one applied before, and skipped. Its state counts as the state after
 * the new log's first entry (the bootstrap configuration, never a batch),
 * so that its images install (an image at index 0 holds nothing). */
pc_rc pc_applied_new_group(pc_session *s);
/* An image of the store (image.c): the index of the last batch applied,
 * then the data, lock, write and notify tables and the highest timestamp
 * as one batch of PUTs, all from one snapshot, in out (emptied first; a
 * Raft snapshot); *applied (may be NULL) gets the index. Not in propose
 * mode (PC_INVALID). */
pc_rc pc_image_take(pc_session *s, pc_buf *out, uint64_t *applied);
/* The same image in steps, so that taking it holds up no apply (a Raft
 * snapshot taken while batches go on being applied: docs/DESIGN.md
 * §4.10). pc_image_pin, where no batch is applied meanwhile (the applying
 * thread), begins a snapshot transaction on s, a session of its own, and
 * reads the applied index (*applied) and the highest timestamp: the image
 * is of that state. pc_image_fill then reads every row into out (emptied
 * first) on any one thread while other sessions apply; pc_image_unpin ends
 * the transaction (also after a failed fill). PC_INVALID: pinned twice,
 * filled unpinned, or in propose mode. */
pc_rc pc_image_pin(pc_session *s, uint64_t *applied);
pc_rc pc_image_fill(pc_session *s, pc_buf *out);
pc_rc pc_image_unpin(pc_session *s);
/* Replace those tables by an image and record its index as the last
 * applied, in one transaction; skipped when this store already applied
 * that index or beyond (its state is newer). PC_INVALID: not an image. */
pc_rc pc_image_install(pc_session *s, const void *image, size_t len);
/* The index an image was taken at (0: none, or too short to be one). */
uint64_t pc_image_index(const void *image, size_t len);

/* ---- a region's own log (apply.c, image.c; docs/DESIGN.md §6.5 step 3) ----
 * With a Raft group per region, every region's log applies into the
 * node's one store, as TiKV's regions share one RocksDB. A region's
 * batches record its own applied index (a row of the meta table per
 * region, beside the node's log's, region 0's: the calls above), so that
 * each log replays exactly what it is missing; its image is its range of
 * the four tables [start, end) (end.data NULL: to the end), read in one
 * snapshot with its applied index, the highest timestamp and the safe
 * point, and installing one replaces that range only (in parts, the index
 * with the last; skipped when the region applied that index or beyond).
 * Named values are the node's and no region's image holds them. A region
 * is never 0 here. */
/* A region's batch: PC_INVALID (nothing written, its index as it was)
 * when it is not one, or it puts or deletes a row outside [start, end),
 * or sets a named value: checked in one pass before it applies. */
pc_rc pc_apply_region_batch(pc_session *s, uint64_t region, pc_slice start, pc_slice end,
                            const void *batch, size_t len, uint64_t index);
pc_rc pc_region_applied_index(pc_session *s, uint64_t region, uint64_t *index);
pc_rc pc_region_image_take(pc_session *s, uint64_t region, pc_slice start, pc_slice end,
                           pc_buf *out, uint64_t *applied);
/* In steps, as pc_image_pin, pc_image_fill and pc_image_unpin (region 0:
 * pc_image_pin's). */
pc_rc pc_region_image_pin(pc_session *s, uint64_t region, uint64_t *applied);
pc_rc pc_region_image_fill(pc_session *s, pc_slice start, pc_slice end, pc_buf *out);
/* PC_INVALID: not an image, or it holds a row outside [start, end), or
 * anything but rows, the highest timestamp and the safe point (nothing
 * changed). */
pc_rc pc_region_image_install(pc_session *s, uint64_t region, pc_slice start, pc_slice end,
                              const void *image, size_t len);

/* A new region's replica on a node that missed its split (region_fill.c,
 * docs/DESIGN.md §6.5 step k), from image: another node's image of the
 * region taken before its own log applied anything (applied index 0),
 * holding the region's row and rows of its range only. Installed where
 * no row of this node has the id or meets the range (a hole), the row
 * last. *id: the image's region (0: none read). PC_INVALID with *why: not
 * such an image, or no hole here. */
pc_rc pc_region_fill(pc_session *s, const void *image, size_t len, uint64_t *id,
                     const char **why);

/* ---- region rows (region_rows.c, split.c; docs/DESIGN.md §6.5 step 6) ----
 * A region's range and epoch as the store knows them (TiKV's region
 * state): a row per region, set by a SET_REGION of the region's own log,
 * so every replica changes it at the same index, and carried by the
 * region's image. A region's batch sets rows inside its range only: its
 * own row, or a split's (the rows of its parts, covering its range, its
 * own at an epoch above the stored one: split.c); the node's one log
 * (region 0) sets none, nor does a whole store's image hold one; an
 * image sets its own region's row, and its install replaces the range
 * that row names, not the range the replica had: a replica that missed a
 * split, installing the parent's later image, then keeps its hands off
 * the new region's rows on this node and takes the narrower range. A
 * region's image is of the range its row names in the image's snapshot
 * (the range the caller gives only when it has none), so an image taken
 * while a split applies is one range and the row that names it. */
typedef struct {
    uint64_t id;     /* 1, 2, ...; never 0 */
    uint64_t epoch;  /* >= 1: raised by each change of its range */
    pc_slice start;  /* the first key in it (empty: the smallest key) */
    pc_slice end;    /* the first key past it; data NULL: to the end */
} pc_region_row;
/* Whether r is a region: an id and an epoch, keys of at most PC_KEY_MAX
 * bytes, an end (if any) above its start. */
bool pc_region_row_ok(const pc_region_row *r);
/* Append "region r->id is r" to batch. PC_INVALID: r is not a region. */
pc_rc pc_batch_set_region(pc_buf *batch, const pc_region_row *r);
/* Region id's row, its keys pointing into mem (emptied first; the
 * caller's to free): PC_NOT_FOUND when none was set. */
pc_rc pc_region_row_get(pc_session *s, uint64_t id, pc_region_row *out, pc_buf *mem);
/* The split of a region in its own log (split.c; TiKV's BatchSplit): into
 * batch (appended to; as it was on failure), the rows of region cut
 * before each of keys[0..n) (increasing, each inside the region's range
 * and above its start), the left part keeping the id, part i + 1 taking
 * ids[i] (new: no row holds it), every part the stored epoch plus one.
 * Read from the store as it is now (on the leader, which proposes it);
 * applied as a batch of region's log, it sets every part's row on each
 * replica at the same index, or (another change of the region's row came
 * first: its epoch) on none. PC_INVALID: no row for region, a key outside
 * or out of order, an id taken, 0 or repeated, more than
 * PC_SPLIT_MAX_KEYS keys, or s proposing. */
#define PC_SPLIT_MAX_KEYS 16
pc_rc pc_region_split(pc_session *s, uint64_t region, const pc_slice *keys, const uint64_t *ids,
                      size_t n, pc_buf *batch);
/* Each row a batch sets, in its order, to fn (its keys point into the
 * batch); fn returns non-zero to stop. PC_INVALID: not a batch. */
pc_rc pc_batch_region_rows(const void *batch, size_t len,
                           int (*fn)(void *arg, const pc_region_row *r), void *arg);
/* A store's first rows, written at once, outside any log (every replica
 * of a new cluster seeds the same ones, from the same configuration, as
 * TiKV bootstraps its first region): in one transaction, PC_INVALID (none
 * written) when the store holds a region row already, or one is not a
 * region. */
pc_rc pc_region_rows_seed(pc_session *s, const pc_region_row *rows, size_t n);
/* The seed's digest (rows[0..n) as seeded, in order; never 0): kept
 * with them, so that what a store was made with can be told apart from
 * what the flags would make now (service/region_logs.c). */
pc_rc pc_region_rows_digest(const pc_region_row *rows, size_t n, uint64_t *digest);
/* The digest pc_region_rows_seed kept: PC_NOT_FOUND on a store never
 * seeded. */
pc_rc pc_region_seed_digest(pc_session *s, uint64_t *digest);
/* Every row in id order, read in one snapshot, then to fn (its keys
 * valid during the call); fn returns non-zero to stop. */
pc_rc pc_region_rows_each(pc_session *s, int (*fn)(void *arg, const pc_region_row *r), void *arg);

/* ---- named values (meta.c, docs/DESIGN.md §6.2) ----
 * A value the service keeps with the replicated state under a name (the
 * region map): set by a batch, so every member sets it at the same index
 * as it applies that batch; carried by images; the engine gives it no
 * meaning. Names are 1..PC_META_NAME_MAX bytes. */
#define PC_META_NAME_MAX 64
/* Append "set name to v" to batch. PC_INVALID: a bad name. */
pc_rc pc_batch_set_meta(pc_buf *batch, const char *name, const void *v, size_t vlen);
/* The value last set under name, into out (emptied first): PC_NOT_FOUND
 * when none was. */
pc_rc pc_meta_get(pc_session *s, const char *name, pc_buf *out);
/* Whether a batch sets name: PC_OK with *value pointing into the batch
 * (the last value it sets), PC_NOT_FOUND, PC_INVALID (not a batch). */
pc_rc pc_batch_meta(const void *batch, size_t len, const char *name, pc_slice *value);

/* Latches (latch.c, docs/DESIGN.md §4.10). In propose mode every action
 * that may write (prewrite, commit, rollback, check_txn_status, resolve,
 * heartbeat, one_pc, notify_clear) first latches its keys, waiting for
 * them if another proposal holds them, and the session keeps the latches
 * after the action returns: the caller takes them (pc_session_take_latches)
 * before it ends propose mode, and releases them once the batch is applied
 * on this node, or the proposal failed, so the next action on those keys
 * reads a store that has this one's writes. Ending propose mode
 * (pc_session_propose(s, NULL)) releases the latches not taken: right for
 * a caller that keeps its proposals apart itself (one at a time, each
 * applied before the next begins). A session holds one set at a time: an
 * action on keys the set does not cover is refused (PC_INVALID) until it
 * is taken or released; several actions that share one batch latch all
 * their keys first (pc_session_latch). A session closed with latches
 * releases them. A one-phase commit and a commit point (pc_one_pc,
 * pc_commit_primary) leave their keys in the table of commits in flight,
 * marked committed, and the latches release them too: until then
 * snapshot reads at or above the commit wait for it, since the store does
 * not have it yet. */
typedef struct pc_latches pc_latches;
/* Latch keys for the actions to come: wait for
 * them, or (try) PC_LOCKED at once if another holds one, taking none.
 * Try also adds to a set the session holds (it never waits, so it cannot
 * wait in a cycle): a caller that gathers the actions of one batch takes
 * each one's keys in turn and puts off those it cannot have. */
pc_rc pc_session_latch(pc_session *s, const pc_slice *keys, size_t n);
pc_rc pc_session_try_latch(pc_session *s, const pc_slice *keys, size_t n);
/* The session's latches, now the caller's (NULL: none held); released,
 * from any thread, by pc_latches_release (NULL: nothing). */
pc_latches *pc_session_take_latches(pc_session *s);
void pc_latches_release(pc_latches *l);
/* Both at once: release the session's latches. */
void pc_session_release_latches(pc_session *s);

#endif
