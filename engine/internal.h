/*
 * internal.h — what the engine's files share and the service never sees:
 * the session layout, the WiredTiger transaction runner, key encoding,
 * record formats, the in-memory lock table and MVCC lookups.
 */
#ifndef PC_INTERNAL_H
#define PC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <wiredtiger.h>

#include "engine.h"
#include "engine_admin.h"
#include "engine_replica.h"


/* Encoded user key: escaped bytes plus a 2-byte terminator, then 8 bytes of
 * inverted timestamp in versioned tables. */
#define PC_EKEY_MAX (2 * PC_KEY_MAX + 2)
#define PC_VKEY_MAX (PC_EKEY_MAX + 8)

typedef struct pc_memlocks pc_memlocks;
typedef struct pc_latch_table pc_latch_table;

/* ---- log.c: the engine's messages go to its owner's log ---- */
typedef struct {
    pc_log_fn fn;                 /* NULL: stderr */
    void *arg;
} pc_logger;
/* One message through lg (NULL, or no fn: a line on stderr). */
void pc_logf(const pc_logger *lg, pc_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The engine's own messages, "engine: " and the text; e may be NULL. */
#define pc_log(e, level, ...) \
    pc_logf((e) != NULL ? &(e)->log : NULL, (level), "engine: " __VA_ARGS__)

#define PC_SLOTS_N 2048           /* session slots (ts_floor.c): more than WiredTiger's session_max */

struct pc_engine {
    WT_CONNECTION *conn;
    int sync;

    pc_logger log;                /* where messages go (log.c) */

    /* Fatal storage failures (fatal.c). */
    WT_EVENT_HANDLER events;      /* passed to wiredtiger_open: its messages, panics */
    pc_fatal_fn on_fatal;
    void *fatal_arg;
    atomic_bool failed;           /* reported once */

    atomic_bool backup_running;   /* one backup at a time (backup.c) */

    /* The highest timestamp in the store (ts_floor.c), and the sessions'
     * slots (one meta row each). */
    _Atomic uint64_t ts_max;
    pthread_mutex_t slot_mu;
    bool slot_used[PC_SLOTS_N];

    /* Group commit (durable.c): commits counted, flushes done. */
    pthread_mutex_t sync_mu;
    pthread_cond_t sync_cv;
    uint64_t sync_requested;      /* bumped by every pc_sync caller */
    uint64_t sync_done;           /* everything up to this request is flushed */
    bool sync_running;

    pc_memlocks *memlocks;        /* one_pc's in-flight keys (memlock.c) */
    pc_latch_table *latches;      /* propose mode's key latches (latch.c) */
    void (*latch_waited)(void *arg, uint64_t ns); /* pc_engine_config's */
    void *latch_arg;
    void (*image_part_done)(void *arg, pc_session *s); /* pc_engine_config's */
    void *image_arg;

    /* Snapshots (snapshots.c): the GC safe point and the reads pinned. */
    pthread_mutex_t snap_mu;
    _Atomic uint64_t safe_point;
    uint64_t *pins;               /* one entry per pinned read, unordered */
    size_t npins, cappins;

    /* Observed prefixes (notify.c), replaced as a whole under the rwlock. */
    pthread_rwlock_t notify_mu;
    pc_buf notify_prefixes;       /* [u32 len][bytes]... */
    size_t notify_count;
};

struct pc_session {
    pc_engine *e;
    WT_SESSION *wt;
    WT_CURSOR *data, *lock, *write, *notify, *meta;
    pc_buf scratch;               /* record encoding, reused */
    uint32_t slot;                /* this session's ts_max row (ts_floor.c) */
    uint64_t txn_ts;              /* the highest timestamp the running action writes */
    uint64_t ts_stored;           /* what the session's row holds */
    pc_buf *propose;              /* propose mode: writes go here (batch.c) */
    pc_latches *latches;          /* propose mode: held until the caller releases
                                     them (latch_session.c); NULL: none */
    bool pinned;                  /* an image's transaction is open (image.c) */
    uint64_t pin_region, pin_applied, pin_max_ts;
};

/* ---- batch.c: appending to a write batch ---- */
typedef struct {
    size_t len;
    uint32_t count;
} pc_batch_mark;
enum {
    PC_BATCH_PUT = 1,
    PC_BATCH_DEL = 2,
    PC_BATCH_RAISE_TS = 3,
    PC_BATCH_RAISE_SAFE_POINT = 4,
    PC_BATCH_SET_META = 5,
    PC_BATCH_SET_REGION = 6
};
#define PC_BATCH_HEADER 8         /* "pcB1" and the number of operations */
typedef struct {
    uint8_t op, table;            /* table: 0..3, data lock write notify */
    const uint8_t *key, *val;     /* SET_META: the name and the value; SET_REGION:
                                   * the id (8 bytes) and the row (region_rows.c) */
    size_t klen, vlen;
    uint64_t ts;                  /* PC_BATCH_RAISE_TS, _SAFE_POINT: the value */
} pc_batch_op;
/* Decode the operation at *p (end: the batch's end), moving *p past it;
 * false if it is malformed. */
bool pc_batch_next(const uint8_t **p, const uint8_t *end, pc_batch_op *o);
/* Each operation of a checked batch to fn, in order: fn returns 0 for the
 * next, > 0 to stop (PC_OK), < 0 when the operation does not decode
 * (PC_INVALID). PC_INVALID also when the batch is not well formed. */
pc_rc pc_batch_each(const void *batch, size_t len, int (*fn)(void *arg, const pc_batch_op *o),
                    void *arg);
/* Where a batch is now, and back there (an action's attempt that failed). */
pc_batch_mark pc_batch_mark_of(const pc_buf *b);
void pc_batch_rewind(pc_buf *b, pc_batch_mark m);
pc_rc pc_batch_put(pc_buf *b, int table, const void *k, size_t klen, const void *v, size_t vlen);
pc_rc pc_batch_del(pc_buf *b, int table, const void *k, size_t klen);
pc_rc pc_batch_raise_ts(pc_buf *b, uint64_t ts);
pc_rc pc_batch_raise_safe_point(pc_buf *b, uint64_t safe_point);
/* meta.c: the named values (pc_meta_get), in the session's transaction:
 * set one (apply.c), append every one as SET_META to an image's batch
 * (image.c), remove every one (an image replaces them). */
pc_rc pc_named_put(pc_session *s, const void *name, size_t nlen, const void *v, size_t vlen);
pc_rc pc_named_image(pc_session *s, pc_buf *batch);
pc_rc pc_named_empty(pc_session *s);
/* snapshots.c: the stored GC safe point, read in the session's
 * transaction (0: none); raise it (apply.c: in the transaction; then
 * note it in memory once committed). */
pc_rc pc_read_safe_point(pc_session *s, uint64_t *value);
pc_rc pc_store_safe_point(pc_session *s, uint64_t value);
void pc_safe_point_note(pc_engine *e, uint64_t value);
/* The tables of a batch's operations (pc_batch_op.table), in the order
 * of pc_session's first four cursors. */
enum { PC_TABLE_DATA = 0, PC_TABLE_LOCK = 1, PC_TABLE_WRITE = 2, PC_TABLE_NOTIFY = 3 };
/* key_range.c: a range of user keys [start, end) (end.data NULL: to the
 * end) over the four tables: whether a row's key is in it; a cursor to
 * the table's first row at or past its start (PC_NOT_FOUND: none). */
typedef struct {
    pc_slice start, end;
} pc_key_range;
bool pc_range_has(const pc_key_range *r, int table, const void *key, size_t len);
/* Whether r's keys are keys (at most PC_KEY_MAX bytes each). */
bool pc_range_ok(const pc_key_range *r);
pc_rc pc_range_seek(pc_session *s, WT_CURSOR *c, int table, const pc_key_range *r);

/* region_rows.c: a region row as the bytes of its value, and back (a
 * SET_REGION's id and value; false: not a well-formed region); set and
 * read one in the session's transaction (PC_NOT_FOUND: none; the row
 * read points into mem). */
pc_rc pc_region_row_encode(const pc_region_row *r, pc_buf *out);
bool pc_region_row_decode(uint64_t id, const void *value, size_t len, pc_region_row *out);
pc_rc pc_region_row_put(pc_session *s, const pc_region_row *r);
pc_rc pc_region_row_read(pc_session *s, uint64_t id, pc_region_row *out, pc_buf *mem);
/* Whether a SET_REGION (checked) sets a row (region's own; with 0, any)
 * to a range inside range: what a region's batch and image may set. */
typedef struct {
    uint64_t region;
    const pc_key_range *range;
} pc_region_check;
bool pc_region_op_inside(const pc_batch_op *o, uint64_t region, const pc_key_range *range);
/* split.c: whether the rows a region's batch sets are its own, or a
 * split of its range (checked before it applies); whether a batch's row
 * raises the stored epoch (in the transaction: PC_INVALID when not). */
bool pc_region_rows_check(const void *batch, size_t len, uint64_t region,
                          const pc_key_range *range);
pc_rc pc_region_rows_rise(pc_session *s, const pc_region_row *r);
/* Apply a checked batch as number index of region's log (0: the node's
 * one log; apply.c). replace: an image (image.c), which first empties the
 * tables, or with range only that range of them (a region's image). */
pc_rc pc_apply_ops(pc_session *s, uint64_t region, const void *batch, size_t len, uint64_t index,
                   bool replace, const pc_key_range *range);
/* fn of pc_batch_each (arg: a pc_key_range): an op a region's image may
 * hold, rows of that range, the highest timestamp, the safe point and a
 * row (image.c). */
int pc_image_op_ok(void *arg, const pc_batch_op *o);
/* Install a checked batch (an image's rows) as row's new replica: its
 * range emptied, the rows written in parts, the row set with the last;
 * no applied index read or recorded (region_fill.c). */
pc_rc pc_install_fill(pc_session *s, const pc_region_row *row, const void *batch, size_t len);
/* The applied index of region's log (0: the node's), inside a
 * transaction (apply.c). */
pc_rc pc_read_region_applied(pc_session *s, uint64_t region, uint64_t *index);
pc_rc pc_read_applied(pc_session *s, uint64_t *index);

/* ---- store.c: running actions as WiredTiger transactions ---- */

/* The tables, in the order of pc_session's cursors (data, lock, write,
 * notify, meta). */
#define PC_NTABLES 5
extern const char *const pc_tables[PC_NTABLES];

/* The body of one action; returns PC_OK to commit, anything else to roll
 * back (PC_RETRY: roll back and run again). A proposing session's body
 * reads the store and writes into its batch (the transaction is rolled
 * back either way); otherwise the body is the applier's (apply.c) or
 * reads only, and its writes commit to the store. */
typedef pc_rc (*pc_txn_body)(pc_session *s, void *arg);
pc_rc pc_run_txn(pc_session *s, pc_txn_body body, void *arg);

/* Maps a WiredTiger error to pc_rc, logging the unexpected ones; a fatal
 * one (pc_wt_fatal) is reported with pc_fatal and answers PC_PANIC. */
pc_rc pc_wt_error(pc_session *s, int ret, const char *what);

/* ---- the highest timestamp in the store: rows kept by store.c, loaded
 * by ts_floor.c ---- */

#define PC_SLOTS PC_SLOTS_N

/* An action writes a version, lock or record at ts: pc_run_txn keeps the
 * store's maximum in the same transaction. */
static inline void pc_note_ts(pc_session *s, uint64_t ts)
{
    if (ts > s->txn_ts)
        s->txn_ts = ts;
}
#define PC_TS_ROW_PREFIX "ts_max/" /* + slot: a meta row per session slot */
void pc_ts_max_raise(pc_engine *e, uint64_t ts);
/* A session's slot: taken at open (then its row loaded), given back at close. */
pc_rc pc_slot_take(pc_session *s);
void pc_slot_give_back(pc_session *s);
pc_rc pc_slot_load(pc_session *s);
/* Write the session's row (s->txn_ts) in the running transaction; once it
 * committed, pc_ts_row_committed. */
pc_rc pc_ts_row_put(pc_session *s);
void pc_ts_row_committed(pc_session *s);
/* At open: the maximum of the rows (or of a scan, for an older store). */
pc_rc pc_ts_floor_load(pc_session *s);

/* ---- fatal.c: failures only a restart recovers from ---- */

/* Set the hook and the WiredTiger event handler (before wiredtiger_open);
 * the handler sends WiredTiger's messages to e->log. */
void pc_fatal_init(pc_engine *e, pc_fatal_fn fn, void *arg);
/* Is this WiredTiger return a failure of the store itself (WT_PANIC, a
 * failed disk write)? */
bool pc_wt_fatal(int ret);
/* Report a fatal failure: logged, then the owner's hook, once. */
void pc_fatal(pc_engine *e, const char *what);

/* Positions c at the first key >= k. PC_NOT_FOUND past the end. */
pc_rc pc_cursor_seek_ge(pc_session *s, WT_CURSOR *c, const void *k, size_t klen);

/* Point lookup; on PC_OK *v points into the cursor until its next move. */
pc_rc pc_cursor_get(pc_session *s, WT_CURSOR *c, const void *k, size_t klen, WT_ITEM *v);
pc_rc pc_cursor_put(pc_session *s, WT_CURSOR *c, const void *k, size_t klen, const void *v,
                    size_t vlen);
pc_rc pc_cursor_del(pc_session *s, WT_CURSOR *c, const void *k, size_t klen);

bool pc_key_ok(pc_slice k);
uint64_t pc_now_ms(void);

/* ---- keys.c: order-preserving encoding ---- */

/* enc(key): 0x00 -> 0x00 0xFF, then the terminator 0x00 0x01. Byte order
 * of encodings is the byte order of keys, and no encoding is a prefix of
 * another's, so all versions of a key are adjacent. Returns the length. */
size_t pc_ekey(uint8_t *out, const void *key, size_t len);
/* enc(key) followed by ~ts big-endian: newer versions sort first. */
size_t pc_vkey(uint8_t *out, const void *key, size_t len, uint64_t ts);
/* Splits a versioned key; *key_len bytes go to out (PC_KEY_MAX room). */
int pc_vkey_decode(const uint8_t *vk, size_t vlen, uint8_t *out, size_t *key_len,
                   uint64_t *ts);
/* The encoded-key part of a versioned key (everything but the timestamp). */
static inline size_t pc_vkey_prefix_len(size_t vlen) { return vlen - 8; }

/* ---- records.c: lock and write records ---- */

#define PC_RECORD_VERSION 1

typedef enum { PC_W_PUT = 1, PC_W_DELETE = 2, PC_W_ROLLBACK = 3 } pc_wtype;

typedef struct {
    pc_op op;
    uint64_t start_ts, wall_ms, ttl_ms;
    pc_slice primary, owner;
    bool has_value;           /* short value kept in the lock */
    pc_slice value;
} pc_lock_rec;

typedef struct {
    pc_wtype type;
    uint64_t start_ts;
    bool has_value;           /* short value kept in the write record */
    pc_slice value;
} pc_write_rec;

/* Encoders append to b; decoders point into the bytes given. */
/* 8 and 4 bytes big-endian: records, meta rows, batches, region rows
 * (records.c). */
void pc_put_be64(uint8_t *p, uint64_t v);
uint64_t pc_get_be64(const uint8_t *p);
void pc_put_be32(uint8_t *p, uint32_t v);
uint32_t pc_get_be32(const uint8_t *p);
pc_rc pc_lock_encode(pc_buf *b, const pc_lock_rec *r);
pc_rc pc_lock_decode(const void *p, size_t len, pc_lock_rec *r);
pc_rc pc_write_encode(pc_buf *b, const pc_write_rec *r);
pc_rc pc_write_decode(const void *p, size_t len, pc_write_rec *r);

pc_rc pc_buf_reserve(pc_buf *b, size_t extra);

/* Encode w and put it as key's write record at ts (in the caller's
 * transaction; commit.c). */
pc_rc pc_write_put(pc_session *s, pc_slice key, uint64_t ts, const pc_write_rec *w);

/* batch_changes.c: the write record rec at the versioned key vk as a
 * change: 1, or 0 for a rollback record, -1 when either does not decode
 * (keybuf: PC_KEY_MAX bytes, where c->key then points). */
int pc_change_of(const uint8_t *vk, size_t vklen, const void *rec, size_t rlen, uint8_t *keybuf,
                 pc_change *c);

/* ---- mvcc.c: lookups the actions share (none writes) ---- */

/* The lock on key, if any: PC_OK with *r pointing into the lock cursor. */
pc_rc pc_lock_load(pc_session *s, pc_slice key, pc_lock_rec *r);

/* Is the cursor on a version of the key whose encoding is ek? Sets *ts. */
bool pc_on_key(WT_CURSOR *c, const uint8_t *ek, size_t eklen, uint64_t *ts);

/* Decode the write record under the cursor (valid until it moves). */
pc_rc pc_cursor_write_rec(pc_session *s, WT_CURSOR *c, pc_write_rec *r);

/* The write record of transaction start_ts on key (commit or rollback),
 * searching versions with commit_ts >= start_ts. PC_NOT_FOUND if none. */
pc_rc pc_find_txn_write(pc_session *s, pc_slice key, uint64_t start_ts, pc_write_rec *r,
                        uint64_t *commit_ts);

/* Prewrite's checks for one key (prewrite.c, shared with one_pc): PC_OK
 * (free to lock), PC_WRITE_CONFLICT, PC_LOCKED (another transaction's
 * lock), PC_ROLLED_BACK; *own_lock / *own_commit tell that start_ts already
 * holds the lock or already committed here. */
pc_rc pc_prewrite_check(pc_session *s, pc_slice key, uint64_t start_ts, pc_conflict *c,
                        bool *own_lock, bool *own_commit);

/* read.c: pc_get's transaction alone (no check of commits in flight):
 * PC_LOCKED on a lock at or below ts unless ignore_locks. */
pc_rc pc_read_txn(pc_session *s, pc_slice key, uint64_t ts, bool ignore_locks, pc_buf *value,
                  uint64_t *commit_ts, pc_conflict *conflict);

/* The value visible at ts, ignoring locks: PC_OK (appended to value),
 * PC_NOT_FOUND. */
pc_rc pc_read_at(pc_session *s, pc_slice key, uint64_t ts, pc_buf *value,
                 uint64_t *commit_ts);

/* Argument checks shared by prewrite and one_pc (prewrite.c). */
pc_rc pc_check_mutations(const pc_engine *e, const pc_txn_meta *t, const pc_mutation *m,
                         size_t n);

/* Roll back one key inside the caller's transaction (rollback.c). */
pc_rc pc_rollback_key(pc_session *s, pc_slice key, uint64_t start_ts);

/* Fill a conflict report from a lock record (conflict.c). */
void pc_conflict_from_lock(pc_conflict *c, pc_slice key, const pc_lock_rec *r);
void pc_conflict_from_write(pc_conflict *c, pc_slice key, uint64_t commit_ts);

/* Write the rollback record of start_ts on key and drop its data
 * (rollback.c). */
pc_rc pc_put_rollback_record(pc_session *s, pc_slice key, uint64_t start_ts);

/* Turn a lock of this key into a write record at commit_ts (commit.c). */
pc_rc pc_commit_locked_key(pc_session *s, pc_slice key, const pc_lock_rec *lock,
                           uint64_t commit_ts);

/* Is this lock's owner gone, or its wall time + TTL past? */
bool pc_lock_dead(const pc_lock_rec *r, const pc_liveness *live);

/* ---- memlock.c: commits in flight (pending, or committed but not durable) ---- */

typedef enum {
    PC_MEMLOCK_SNAPSHOT = 1, /* a snapshot read at ts: any entry that may land at or below ts */
    PC_MEMLOCK_COMMITTED,    /* a read that found versions up to ts: committed, not durable */
    PC_MEMLOCK_ANY           /* a writer that needs the key free */
} pc_memlock_mode;

pc_rc pc_memlocks_new(pc_memlocks **out, const _Atomic uint64_t *ts_max);
void pc_memlocks_free(pc_memlocks *m);
/* Take all keys for start_ts (pending), or none (PC_LOCKED, *busy names
 * the key): a key with any entry is busy. */
pc_rc pc_memlock_acquire(pc_memlocks *m, const pc_mutation *muts, size_t n, uint64_t start_ts,
                         size_t *busy);
/* The acquired keys of start_ts committed at commit_ts: they stay held
 * until released after the flush. */
void pc_memlock_committed(pc_memlocks *m, const pc_mutation *muts, size_t n, uint64_t start_ts,
                          uint64_t commit_ts);
/* Hold a two-phase commit point (tag commit_ts) while it commits and syncs. */
pc_rc pc_memlock_hold_commit(pc_memlocks *m, pc_slice key, uint64_t commit_ts);
void pc_memlock_release(pc_memlocks *m, const pc_mutation *muts, size_t n, uint64_t tag);
void pc_memlock_release_key(pc_memlocks *m, pc_slice key, uint64_t tag);
/* Propose mode: the entries (key, tag) of muts are now owner's, released
 * all at once by pc_memlock_release_owner (with the latches: latch_session.c). */
void pc_memlock_hand_over(pc_memlocks *m, const pc_mutation *muts, size_t n, uint64_t tag,
                          const void *owner);
void pc_memlock_release_owner(pc_memlocks *m, const void *owner);
/* Never waits: true when an entry keeps a read of [start, end) (a point
 * when point) at ts from going on; c then reports it as an in-flight lock
 * (start_ts 0) for pc_wait_in_flight. */
bool pc_memlock_blocked(pc_memlocks *m, pc_slice start, const pc_slice *end, bool point,
                        uint64_t ts, pc_memlock_mode mode, pc_conflict *c);
/* upto, lowered so that no entry's commit can land at or below it (a
 * change feed's resolved timestamp, changes.c). */
uint64_t pc_memlock_resolved(pc_memlocks *m, uint64_t upto);
/* The oldest commit of key that is committed but not yet durable; 0: none. */
uint64_t pc_memlock_oldest_commit(pc_memlocks *m, pc_slice key);
/* Wait until no entry blocks key at ts, at most until the deadline
 * (CLOCK_MONOTONIC ms). PC_LOCKED when it is still there. */
pc_rc pc_memlock_wait(pc_memlocks *m, pc_slice key, uint64_t ts, pc_memlock_mode mode,
                      uint64_t deadline_mono_ms);

/* ---- latch.c: the latch table (docs/DESIGN.md §4.10) ---- */

#define PC_LATCH_SLOTS 4096       /* a power of two */

/* A set of slots, the latches of some keys: sorted and deduplicated by
 * being a bitmap, so it is bounded whatever the number of keys. */
typedef struct {
    uint64_t bits[PC_LATCH_SLOTS / 64];
} pc_latch_set;

pc_rc pc_latch_table_new(pc_latch_table **out);
void pc_latch_table_free(pc_latch_table *t);
void pc_latch_set_clear(pc_latch_set *set);
void pc_latch_set_add(pc_latch_set *set, const void *key, size_t len);
bool pc_latch_set_empty(const pc_latch_set *set);
/* Is every slot of want in held? */
bool pc_latch_set_covers(const pc_latch_set *held, const pc_latch_set *want);
/* Take every slot of set, in increasing order, waiting first come first
 * served on each; or, try, take all of them now or none (false). */
/* Waits for every slot of set; how long it waited (ns; 0: none was busy). */
uint64_t pc_latch_lock(pc_latch_table *t, const pc_latch_set *set);
bool pc_latch_trylock(pc_latch_table *t, const pc_latch_set *set);
/* Give back a set taken; any thread may. */
void pc_latch_unlock(pc_latch_table *t, const pc_latch_set *set);
/* How many acquirers wait on a slot now (for tests). */
size_t pc_latch_waiting(pc_latch_table *t);

/* latch_session.c: an action latches its keys before its first read
 * (waiting for them). PC_INVALID when the session proposes into no batch,
 * or holds latches that do not cover them. */
pc_rc pc_latch_keys(pc_session *s, const pc_slice *keys, size_t n);
pc_rc pc_latch_mutations(pc_session *s, const pc_mutation *m, size_t n);
pc_rc pc_latch_take(pc_session *s, const pc_latch_set *want);
/* The session's latches take over the entries (key of m, tag) in the
 * table of commits in flight and release them with themselves, after the
 * caller applied the batch. Only after the action latched its keys. */
void pc_latch_keep_memlocks(pc_session *s, const pc_mutation *m, size_t n, uint64_t tag);

/* ---- snapshots.c ---- */

/* Load the stored safe point (engine open). */
pc_rc pc_snapshots_load(pc_session *s);
/* Raise the safe point to at most want, below every pinned read, and store
 * it durably. *applied: the new safe point, 0 if it was not raised. */
pc_rc pc_safe_point_raise(pc_session *s, uint64_t want, uint64_t *applied);
/* *usable: want lowered below this node's pins, or 0 while the stored
 * safe point is below want (snapshots.c). */
pc_rc pc_safe_point_agreed(pc_session *s, uint64_t want, uint64_t *usable);

/* ---- items.c: building a pc_items answer ---- */

/* Append an item whose value was already appended to the arena at voff
 * (voff == arena.len: no value). Items hold arena offsets until
 * pc_items_finish turns them into pointers (the arena moves as it grows). */
pc_rc pc_items_push(pc_items *out, const void *key, size_t klen, size_t voff, uint64_t ts);

/* ---- notify.c ---- */

/* Set key's notify entry when it is under an observed prefix. */
pc_rc pc_notify_mark(pc_session *s, pc_slice key, uint64_t commit_ts);

#endif
