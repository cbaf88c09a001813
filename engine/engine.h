/*
 * engine.h — the Percolator transaction protocol on WiredTiger.
 *
 * The protocol's API: what the service's transaction code calls. Two
 * headers beside it hold the rest: engine_replica.h, how a replicated
 * store proposes, latches and applies batches and takes and installs
 * images (the Raft group's state machine), and engine_admin.h, backups,
 * restores and row counts for operators. The engine keeps Percolator's
 * columns in WiredTiger tables:
 *
 *   data   (key, start_ts)  -> value            long values of prewritten/committed txns
 *   lock   key              -> lock record      at most one lock per key
 *   write  (key, commit_ts) -> write record     put / delete / rollback, short values inline
 *   notify key              -> commit_ts        dirty hint for observers (not Percolator state)
 *
 * Each protocol action (prewrite, commit, rollback, check_txn_status,
 * resolve_lock, heartbeat, one_pc, get, scan, lock_scan, gc) runs as one
 * WiredTiger snapshot transaction — the counterpart of Bigtable's row
 * transaction in the paper — and is retried by the engine on WT_ROLLBACK.
 * The engine knows nothing of HTTP, sessions or the oracle: timestamps, wall
 * time and owner liveness come from the caller.
 *
 * Threads: a pc_session belongs to one thread at a time; open one per worker.
 * Everything else is thread-safe.
 */
#ifndef PC_ENGINE_H
#define PC_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PC_KEY_MAX 4104           /* longest key accepted (service keys are <= 4097) */
#define PC_OWNER_MAX 64           /* longest lock owner id */
#define PC_SHORT_VALUE_MAX 255    /* values up to this size live in lock/write records */
#define PC_TS_MAX UINT64_MAX      /* read timestamp meaning "the latest" */

/* One way to fail: every engine call returns one of these. */
typedef enum {
    PC_OK = 0,
    PC_NOT_FOUND,        /* no committed value visible at the read timestamp */
    PC_WRITE_CONFLICT,   /* prewrite: a write committed at or after start_ts */
    PC_LOCKED,           /* a lock of another transaction is in the way */
    PC_ROLLED_BACK,      /* the transaction has a rollback record: too late */
    PC_COMMITTED,        /* rollback asked of a transaction that committed */
    PC_LOCK_MISSING,     /* commit/heartbeat found neither the lock nor a record */
    PC_TS_UNAVAILABLE,   /* one_pc: the commit timestamp could not be had */
    PC_INVALID,          /* bad argument (empty or oversized key, zero timestamp) */
    PC_NOMEM,
    PC_ERROR,            /* storage failure; details were logged */
    PC_SYNC_FAILED,      /* committed in memory, but the log flush failed: the
                            commit stays invisible, and the process must stop
                            (recovery then decides from the log what survived) */
    PC_PANIC,            /* the store failed for good (WiredTiger panicked, or a
                            write to disk failed): only a restart recovers; the
                            engine has called its on_fatal hook already */
    /* The replicator's refusals (never returned by the engine itself: the
     * service's write path, DESIGN §6.1, when a batch was not made
     * durable). Nothing of the batch was applied here. */
    PC_NOT_LEADER,       /* not proposed: another member leads, or none is known */
    PC_UNAVAILABLE,      /* leadership or quorum lost while it waited, or stopping:
                            the batch may or may not commit later */
    PC_RETRY             /* internal: the WiredTiger transaction hit WT_ROLLBACK;
                            the engine runs it again and never returns this */
} pc_rc;

const char *pc_rc_name(pc_rc rc);

typedef struct pc_engine pc_engine;
typedef struct pc_session pc_session;

/* A storage failure the process cannot go on from (docs/DESIGN.md §4.7):
 * WiredTiger panicked (every later call of the connection fails with
 * WT_PANIC until the process restarts and recovers from the log), or a
 * write to disk failed (ENOSPC, EDQUOT, EIO). Called on whichever thread
 * saw it, WiredTiger's own threads included; it should end the process at
 * once. If it returns, the failing call returns PC_PANIC. */
typedef void (*pc_fatal_fn)(void *arg, const char *what);

/* The engine's messages: WiredTiger's own (its errors, and its
 * informational messages) and the engine's ("engine: ..."), one line each
 * without the line end. The owner writes them to its log, in its format;
 * called on any thread, WiredTiger's included, so it must be thread-safe
 * and must not call the engine. */
typedef enum { PC_LOG_INFO = 1, PC_LOG_WARN = 2, PC_LOG_ERROR = 3 } pc_log_level;
typedef void (*pc_log_fn)(void *arg, pc_log_level level, const char *msg);

typedef struct {
    const char *dir;          /* data directory; created if missing */
    int sync;                 /* 1: pc_sync fsyncs the log; 0: it only writes it to the OS */
    const char *cache_size;   /* WiredTiger cache, e.g. "256MB"; NULL: 128MB */
    int checkpoint_secs;      /* checkpoint period; 0: 60 s */
    pc_fatal_fn on_fatal;     /* NULL: failures are only returned (PC_PANIC) */
    void *fatal_arg;
    pc_log_fn log;            /* NULL: messages go to stderr as they are */
    void *log_arg;
    /* After an action in propose mode waited for another proposal's
     * latches on its keys (engine_replica.h): how long, in ns, on the
     * waiting thread (quick, thread-safe, no engine call). NULL: not told. */
    void (*latch_waited)(void *arg, uint64_t ns);
    void *latch_arg;
    /* After each part but the last of an image's install is committed
     * (pc_image_install installs in parts: engine_replica.h), on the
     * installing thread: tests crash there (the service's failpoint
     * image_part). NULL: not told. */
    void (*image_part_done)(void *arg, pc_session *s);
    void *image_arg;
} pc_engine_config;

pc_rc pc_engine_open(const pc_engine_config *cfg, pc_engine **out);
void pc_engine_close(pc_engine *e);   /* sessions must be closed first */

pc_rc pc_session_open(pc_engine *e, pc_session **out);
void pc_session_close(pc_session *s);

/* Waits until everything applied so far is in the log on disk (fsync
 * when the engine was opened with sync=1): a single node's replicator
 * calls it after it applied a group of batches. Concurrent callers share
 * one flush: group commit. PC_SYNC_FAILED when the flush failed. */
pc_rc pc_sync(pc_session *s);

/* ---- values passed in and out ---- */

typedef struct {
    const void *data;
    size_t len;
} pc_slice;

/* A growable buffer the caller owns; the engine appends to it. */
typedef struct {
    char *data;
    size_t len, cap;
} pc_buf;
void pc_buf_free(pc_buf *b);
pc_rc pc_buf_append(pc_buf *b, const void *p, size_t len);
/* Bytewise key order, shorter first on a common prefix (WiredTiger's,
 * so the order of every scan): <0, 0 or >0. */
int pc_key_cmp(const void *a, size_t alen, const void *b, size_t blen);

typedef enum { PC_OP_PUT = 1, PC_OP_DELETE = 2 } pc_op;

typedef struct {
    pc_op op;
    pc_slice key;
    pc_slice value;           /* PC_OP_PUT only */
} pc_mutation;

/* What every lock of one transaction records. */
typedef struct {
    uint64_t start_ts;
    pc_slice primary;         /* the primary key: the transaction's commit point */
    pc_slice owner;           /* who coordinates it (a session id), <= PC_OWNER_MAX */
    uint64_t wall_ms;         /* coordinator's wall clock when the lock was written */
    uint64_t ttl_ms;          /* the lock is stale once wall_ms + ttl_ms has passed */
} pc_txn_meta;

/* A lock as stored; pointers are valid only for the call they are given to. */
typedef struct {
    pc_op op;
    uint64_t start_ts, wall_ms, ttl_ms;
    pc_slice key, primary, owner;
} pc_lock_view;

/* Why an action could not go on: the lock met (PC_LOCKED), or the newer
 * write (PC_WRITE_CONFLICT: lock.key and commit_ts are set). A lock with
 * start_ts 0 is a commit in flight (see pc_wait_in_flight): nothing to
 * resolve, only to wait for. Self-contained:
 * the views point into the buffers below, so a pc_conflict must not be
 * moved or copied by value (memcpy, realloc): copy one with pc_lock_copy. */
typedef struct {
    pc_lock_view lock;
    uint64_t commit_ts;
    uint64_t in_flight_ts;    /* start_ts 0: what pc_wait_in_flight waits for */
    int in_flight_mode;
    char key_buf[PC_KEY_MAX];
    char primary_buf[PC_KEY_MAX];
    char owner_buf[PC_OWNER_MAX];
} pc_conflict;

/* Copy a lock view (e.g. from pc_lock_scan's callback) into a report that
 * outlives the call. */
void pc_lock_copy(pc_conflict *dst, const pc_lock_view *src);

/* Durable before visible (docs/DESIGN.md §4.4): a commit stays in the
 * engine's in-memory table of commits in flight until the log flush that
 * makes it durable, and no read returns a version still there: such a read
 * answers PC_LOCKED with an in-flight lock (start_ts 0). Actions never
 * wait on their own; this waits, at most until deadline_mono_ms
 * (CLOCK_MONOTONIC milliseconds), for the commit that conflict c reports.
 * PC_OK: run the action again; PC_LOCKED: still in flight. */
pc_rc pc_wait_in_flight(pc_session *s, const pc_conflict *c, uint64_t deadline_mono_ms);

/* How the caller judges a lock's owner: dead if owner_alive says so, or if
 * the lock's wall time plus TTL is before now_ms. */
typedef struct {
    uint64_t now_ms;
    int (*owner_alive)(void *arg, const void *owner, size_t owner_len); /* NULL: alive */
    void *arg;
} pc_liveness;

/* ---- the protocol's actions (one file each) ----
 * An action that may write writes nothing itself: it reads the store as
 * applied and appends what it would write to the session's batch
 * (pc_session_propose, engine_replica.h), its keys latched; the caller's
 * replicator makes the batch durable and applies it (pc_apply_batch),
 * then releases the latches (docs/DESIGN.md §6.1). Without a batch such
 * an action is refused: PC_INVALID. */

/* Prewrite: lock every key and write its data at start_ts, all in one
 * WiredTiger transaction. Fails with PC_WRITE_CONFLICT on a write committed
 * at or after start_ts, PC_LOCKED on another transaction's lock,
 * PC_ROLLED_BACK if this transaction was rolled back. Idempotent. The keys
 * must be distinct (PC_INVALID otherwise: so for pc_one_pc too). */
pc_rc pc_prewrite(pc_session *s, const pc_txn_meta *txn, const pc_mutation *m, size_t n,
                  pc_conflict *conflict);

/* Commit: replace each key's lock of start_ts by a write record at
 * commit_ts. Idempotent; PC_ROLLED_BACK or PC_LOCK_MISSING otherwise. For
 * the secondaries (and roll-forward). */
pc_rc pc_commit(pc_session *s, const pc_slice *keys, size_t n, uint64_t start_ts,
                uint64_t commit_ts);

/* The commit point: commit the primary, holding it as a commit in flight
 * until the caller applied the batch and released the latches, so that no
 * reader sees the commit (or rolls a secondary forward from it) before it
 * is durable and applied. Otherwise as pc_commit. */
pc_rc pc_commit_primary(pc_session *s, pc_slice primary, uint64_t start_ts,
                        uint64_t commit_ts);

/* Rollback: remove start_ts's lock and data, leave a rollback record so a
 * late prewrite fails. PC_COMMITTED if a key already committed. */
pc_rc pc_rollback(pc_session *s, const pc_slice *keys, size_t n, uint64_t start_ts);

typedef enum {
    PC_TXN_LOCKED = 1,        /* primary still locked by a live owner */
    PC_TXN_COMMITTED,         /* commit_ts is set */
    PC_TXN_ROLLED_BACK
} pc_txn_state;

typedef struct {
    pc_txn_state state;
    uint64_t commit_ts;       /* PC_TXN_COMMITTED */
    int rolled_back_now;      /* this call rolled back a dead or missing primary */
    uint64_t wall_ms, ttl_ms; /* PC_TXN_LOCKED: the primary lock's */
} pc_txn_status;

/* Check the status of the transaction start_ts through its primary key. A
 * primary lock whose owner is dead is rolled back now; a missing one gets a
 * rollback record so that its late prewrite fails. */
pc_rc pc_check_txn_status(pc_session *s, pc_slice primary, uint64_t start_ts,
                          const pc_liveness *live, pc_txn_status *st);

/* Resolve one key's lock of start_ts: roll forward to commit_ts, or back
 * when commit_ts is 0. A lock a reader or writer met is resolved in two
 * actions by the caller: pc_check_txn_status on its primary, then, once
 * the primary committed or was rolled back, this on the key. Two, not one:
 * the primary may live in another Raft group (region) than the key; both
 * are idempotent (DESIGN §3.5). */
pc_rc pc_resolve_lock(pc_session *s, pc_slice key, uint64_t start_ts, uint64_t commit_ts);

/* Heartbeat: refresh the wall time and TTL of the primary lock. */
pc_rc pc_heartbeat(pc_session *s, pc_slice primary, uint64_t start_ts, uint64_t wall_ms,
                   uint64_t ttl_ms);

/* Source of a commit timestamp for one_pc (the oracle); returns 0 on success. */
typedef int (*pc_ts_fn)(void *arg, uint64_t *ts);

/* One-phase commit: the same conflict checks as prewrite, then the write
 * records at a commit timestamp taken from ts_fn, in one batch. The keys
 * are held in the table of commits in flight from before the timestamp is
 * fetched until the caller applied the batch and released the latches, so
 * that no snapshot above it reads them early and no read sees them before
 * they are durable and applied.
 *
 * A blind write (txn->start_ts == 0: nothing was read) needs only one
 * timestamp: it commits at ts_fn's timestamp, which is also its start, and
 * conflicts with any lock and with any write at or above it. */
pc_rc pc_one_pc(pc_session *s, const pc_txn_meta *txn, const pc_mutation *m, size_t n,
                pc_ts_fn ts_fn, void *ts_arg, uint64_t *commit_ts, pc_conflict *conflict);

/* One independent blind write of a batch (pc_one_pc_blind). The caller
 * fills m and n (engine keys, sorted, distinct); the call fills the rest. */
typedef struct {
    const pc_mutation *m;
    size_t n;
    pc_rc rc;                 /* as pc_one_pc's; PC_LOCKED with conflict.lock.start_ts
                                 0: another one-phase commit of a key is in flight */
    uint64_t commit_ts;       /* when rc == PC_OK */
    pc_conflict conflict;     /* on PC_LOCKED / PC_WRITE_CONFLICT */
} pc_blind_write;

/* Source of `count` consecutive timestamps first..first+count-1; 0 on success. */
typedef int (*pc_ts_range_fn)(void *arg, size_t count, uint64_t *first);

/* Group commit of blind writes: each w[i] is a pc_one_pc with start_ts 0
 * and is checked on its own (one write's conflict fails it alone; what it
 * appended to the batch is taken back), but all of them take their
 * timestamps from one ts_fn call. The in-memory locks are taken for every
 * write first (a write whose key is held already, also by an earlier write
 * of the same batch or by a commit not yet durable, fails with PC_LOCKED
 * and takes no timestamp), then the timestamps are fetched, then the
 * writes go into the batch in order. The committed writes stay held
 * (invisible to reads): once the batch is applied, call
 * pc_one_pc_blind_durable. */
void pc_one_pc_blind(pc_session *s, pc_blind_write *const *w, size_t n, pc_ts_range_fn ts_fn,
                     void *ts_arg);
/* After the batch of a pc_one_pc_blind was applied: let the writes that
 * committed (rc PC_OK) be read. Never call it when the batch was not. */
void pc_one_pc_blind_durable(pc_session *s, pc_blind_write *const *w, size_t n);

/* ---- reads ---- */

/* Snapshot read at ts. PC_LOCKED (with the lock) when a lock at or below
 * ts is in the way, or a commit in flight (start_ts 0): resolve it or
 * wait (pc_wait_in_flight), then read again. On PC_NOT_FOUND,
 * *commit_ts is the commit of the delete that removed the key (0 if the
 * key never had a version at or below ts). */
pc_rc pc_get(pc_session *s, pc_slice key, uint64_t ts, pc_buf *value, uint64_t *commit_ts,
             pc_conflict *conflict);

/* The latest durable committed value, without a timestamp; a pure read
 * (it writes and latches nothing, also in propose mode). A newest commit
 * still waiting for its log flush is read under (nobody has been told of
 * it yet). A lock in the way answers PC_LOCKED with the lock in *conflict,
 * as pc_get does: the caller resolves it (pc_check_txn_status on its
 * primary, then pc_resolve_lock) and reads again, or, when its primary has
 * not reached its commit point, reads again with step_over_locks: the
 * newest committed value below the lock, which is older news. Never waits;
 * PC_LOCKED with an in-flight lock (start_ts 0) only when commits kept
 * landing under it, which is rare. */
pc_rc pc_get_latest(pc_session *s, pc_slice key, bool step_over_locks, pc_buf *value,
                    uint64_t *commit_ts, pc_conflict *conflict);

typedef struct {
    pc_slice key, value;
    uint64_t commit_ts;
} pc_item;

/* A scan's answer: items point into one arena. */
typedef struct {
    pc_item *items;
    size_t n, cap;
    pc_buf arena;
    int more;                 /* the limit stopped the scan: more keys may follow */
} pc_items;
void pc_items_free(pc_items *it);
/* Building one outside a scan (a scan cut at region bounds, an answer
 * read off the wire): add items in order, then finish (before it, the
 * items hold offsets, as the arena may move); append another's finished
 * items to a finished one. PC_NOMEM leaves out finished-able and whole. */
pc_rc pc_items_add(pc_items *out, pc_slice key, pc_slice value, uint64_t commit_ts);
void pc_items_finish(pc_items *out);
pc_rc pc_items_append(pc_items *dst, const pc_items *src);

/* Snapshot scan of [start, end) at ts (end.len == 0: no end), at most
 * limit keys, bytewise order. PC_LOCKED like pc_get. */
pc_rc pc_scan(pc_session *s, pc_slice start, pc_slice end, uint64_t ts, size_t limit,
              pc_items *out, pc_conflict *conflict);
/* pc_scan that also stops (more = 1) before a key once the answer's keys
 * and values reach max_bytes: at most max_bytes plus the last item, and
 * always at least one item. */
pc_rc pc_scan_bounded(pc_session *s, pc_slice start, pc_slice end, uint64_t ts, size_t limit,
                      size_t max_bytes, pc_items *out, pc_conflict *conflict);

/* ---- maintenance ---- */

/* Visit outstanding locks with key > after (after.len == 0: from the first),
 * at most limit. fn returns non-zero to stop. */
pc_rc pc_lock_scan(pc_session *s, pc_slice after, size_t limit,
                   int (*fn)(void *arg, const pc_lock_view *lock), void *arg);
/* The same from key from on (a region's first key: its own lock too). */
pc_rc pc_lock_scan_from(pc_session *s, pc_slice from, size_t limit,
                        int (*fn)(void *arg, const pc_lock_view *lock), void *arg);

typedef struct {
    uint64_t keys;             /* distinct keys visited */
    uint64_t versions;         /* write records visited */
    uint64_t versions_removed; /* write records dropped */
    uint64_t data_removed;     /* data rows dropped */
} pc_gc_stats;

/* Garbage collection drops the versions no snapshot at or above
 * safe_point can see: for each key, every version older than the newest
 * put/delete at or below safe_point (that one too when it is a delete),
 * and rollback records below safe_point. It goes in parts, one short
 * transaction and one batch each (DESIGN §9):
 *  - pc_gc_begin lowers the safe point below every pinned snapshot, raises
 *    it in memory (new pins below it are refused) and into the batch as a
 *    RAISE_SAFE_POINT operation, which every member applies to its meta
 *    table; the caller applies it before the first part. *applied (may be
 *    NULL) says where it ended; the walk is NULL when the safe point did
 *    not rise (nothing to do);
 *  - each pc_gc_next puts the removals of the next keys' dead versions
 *    into the batch and adds to st; *done once the walk has passed the
 *    last key. Between parts the caller applies what it proposed;
 *  - pc_gc_end frees the walk (NULL is fine).
 * A part never crosses a limit the caller set (pc_gc_walk_limit): a part
 * is one batch, and a batch is one region's; the next part starts at the
 * first key at or past the limit (pc_gc_walk_position: the key the next
 * part starts at, empty before the first), where the caller sets the
 * next region's end. A limit at or below that key makes empty parts. */
typedef struct pc_gc_walk pc_gc_walk;
pc_rc pc_gc_begin(pc_session *s, uint64_t safe_point, uint64_t *applied, pc_gc_walk **walk);
pc_rc pc_gc_next(pc_session *s, pc_gc_walk *walk, pc_gc_stats *st, bool *done);
/* A walk from key from (empty: the first) below a safe point another
 * node began (its pc_gc_begin, proposed in the log of the region holding
 * the empty key): only once this store holds a safe point at or above it,
 * else PC_UNAVAILABLE (try when this node has applied it); lowered below
 * this node's pinned reads. Its parts go as pc_gc_next's. For a region
 * led here while the node that began the GC leads another (DESIGN §6.6). */
pc_rc pc_gc_walk_at(pc_session *s, uint64_t safe_point, pc_slice from, pc_gc_walk **walk);
pc_slice pc_gc_walk_position(const pc_gc_walk *walk);
/* The next parts stop before key end (NULL: at no key). */
void pc_gc_walk_limit(pc_gc_walk *walk, const void *end, size_t len);
void pc_gc_end(pc_gc_walk *walk);

/* The GC safe point: snapshots below it may have lost versions. Kept in
 * the store, so it survives restarts. */
uint64_t pc_gc_safe_point(pc_engine *e);

/* The highest timestamp the store holds (a version's, a lock's, a write
 * or rollback record's): kept durably with the writes, found at open, and
 * raised by every write since. An oracle whose timestamps are not above it
 * has lost its state (DESIGN §4.8). */
uint64_t pc_store_max_ts(pc_engine *e);

/* Pin a snapshot while a read at ts runs (pc_gc never passes a pinned
 * ts). PC_INVALID when ts is below the safe point already. Every pin is
 * undone by one pc_snapshot_unpin. */
pc_rc pc_snapshot_pin(pc_engine *e, uint64_t ts);
void pc_snapshot_unpin(pc_engine *e, uint64_t ts);

/* ---- changes (changes.c, docs/DESIGN.md §10): what a change feed reads ---- */

/* A committed put or delete of key at commit_ts by the transaction of
 * start_ts. has_value: value holds a put's value (a short one); else a
 * put's value is read with pc_change_value. */
typedef struct {
    pc_slice key, value;
    uint64_t commit_ts, start_ts;
    pc_op op;
    bool has_value;
} pc_change;

/* Call fn for every put and delete a write batch commits (its write
 * records; rollback records are no change), in the batch's order. The
 * change's bytes are valid during the call. fn returns non-zero to stop.
 * PC_INVALID: not a well-formed batch. */
pc_rc pc_batch_changes(const void *batch, size_t len,
                       int (*fn)(void *arg, const pc_change *c), void *arg);
/* Each user key a batch writes (PUT or DEL, any table; a key written
 * twice comes twice), in the batch's order, to fn; the key's bytes are
 * valid during the call. fn returns non-zero to stop. PC_INVALID: not a
 * well-formed batch (batch_keys.c). */
pc_rc pc_batch_keys(const void *batch, size_t len,
                    int (*fn)(void *arg, const void *key, size_t klen), void *arg);
/* A put's value kept in the data table (key, start_ts), appended to out.
 * PC_NOT_FOUND: not there (GC removed the version). */
pc_rc pc_change_value(pc_session *s, pc_slice key, uint64_t start_ts, pc_buf *out);

/* The changes of [start, end) (end.len == 0: no end) with after <
 * commit_ts <= upto, by commit_ts, then key; about limit of them: when
 * there are more, the answer stops at a commit timestamp, never inside
 * one commit's changes, and upto says where (every change in (after,
 * upto] is in the answer). The caller reads at or above the GC safe point
 * (pc_snapshot_pin) for the answer to be whole. */
typedef struct {
    pc_change *v;
    size_t n;
    uint64_t upto;
    pc_buf arena;             /* the changes' bytes */
} pc_changes;
pc_rc pc_changes_scan(pc_session *s, pc_slice start, pc_slice end, uint64_t after,
                      uint64_t upto, size_t limit, pc_changes *out);
void pc_changes_free(pc_changes *out);

/* The resolved timestamp at or below upto: no change at or below it can
 * still be committed, given that upto is at or below a timestamp the
 * oracle handed out before the call (transactions that have not asked for
 * their commit timestamp yet get one above it). Lowered below every lock
 * in the store (a transaction commits above its start_ts) and below every
 * commit in flight (memlock.c), which are read in that order, after the
 * locks: a commit the lock scan saw done is in the store or still in
 * flight. The caller also waits for applies that began before the call
 * to finish, if it gathers the changes from applied batches. */
pc_rc pc_resolved_ts(pc_session *s, uint64_t upto, uint64_t *resolved);
/* The part of it this node's commits in flight set (memlock.c): none of
 * them lands at or below it; UINT64_MAX when none is in flight. Another
 * node's change feed takes it with this node's read index of a region
 * (DESIGN §10 rule 10), read before that index. */
uint64_t pc_in_flight_floor(pc_engine *e);

/* Keys under these prefixes get a notify entry when a write commits.
 * Replaces the previous set. */
pc_rc pc_notify_set_prefixes(pc_engine *e, const pc_slice *prefixes, size_t n);

/* The dirty entries of [start, end) (end.len == 0: no end), beginning at
 * `from` and wrapping around to start once: at most limit, as items (key,
 * empty value, commit_ts = the write that made the key dirty). Only the
 * notify table is read: the cost follows dirty keys, not data. */
pc_rc pc_notify_scan(pc_session *s, pc_slice start, pc_slice end, pc_slice from, size_t limit,
                     pc_items *out);

/* Remove key's notify entry if no write newer than upto_ts made it dirty. */
pc_rc pc_notify_clear(pc_session *s, pc_slice key, uint64_t upto_ts);

#endif
