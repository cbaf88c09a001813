/*
 * actions.h — the protocol's actions on a region's keys, each run where
 * its region is led (docs/DESIGN.md §6.6). Here: the engine's action
 * between svc_write_begin and svc_write_end, its batch proposed to the
 * region's log; a read fenced by the region's leader. When another node
 * leads the region (--region-logs, its lead not moved here yet), the
 * action is sent to that node (region_call.h), which runs it as its own,
 * as TiKV's client sends each region's part of a request to the region's
 * leader. The answer is the same either way.
 *
 * Every action is idempotent (the paper's, Peng & Dabek, OSDI 2010, §2.2:
 * a prewrite of the same start_ts finds its own lock, a commit its own
 * write record), so one that failed on the wire may be sent again.
 */
#ifndef PC_ACTIONS_H
#define PC_ACTIONS_H

#include "engine.h"
#include "service.h"

typedef enum {
    ACT_PREWRITE,         /* meta, m[n] */
    ACT_COMMIT_PRIMARY,   /* keys[0], meta.start_ts, ts: the commit point */
    ACT_COMMIT,           /* keys[n], meta.start_ts, ts */
    ACT_ROLLBACK,         /* keys[n], meta.start_ts */
    ACT_HEARTBEAT,        /* meta.primary, start_ts, wall_ms, ttl_ms */
    ACT_CHECK_TXN_STATUS, /* meta.primary, start_ts, owner; the answer's status */
    ACT_RESOLVE_LOCK,     /* keys[0], meta.start_ts, ts (0: roll back) */
    ACT_GET,              /* keys[0] at ts; the answer's value, commit_ts, conflict */
    ACT_GET_LATEST,       /* keys[0], newest committed; the same */
    ACT_NOTIFY_CLEAR,     /* keys[0]'s notify entry, if no write after ts made it dirty */
    ACT_SCAN,             /* [keys[0], keys[1]) at ts (keys[1] empty: no end), at most
                           * limit items and about max_bytes; the answer's items */
    ACT_OLDEST_LOCK,      /* keys[0] to its region's end: the oldest lock's start_ts in
                           * the answer's commit_ts (0: none), next and last (gc_parts.h) */
    ACT_GC,               /* a few GC parts from keys[0] within its region below safe
                           * point ts; the answer's gc, next and last (gc_parts.h) */
    ACT_READ_INDEX,       /* keys[0]'s region fenced by its leader: the answer's ri
                           * (read_index.h) */
    ACT_COUNT
} act_kind;

typedef struct {
    act_kind kind;
    pc_txn_meta meta;
    const pc_mutation *m;
    const pc_slice *keys;
    size_t n;                 /* of m, or of keys */
    uint64_t ts;              /* the commit timestamp, or the read's */
    size_t limit, max_bytes;  /* a scan's */
    bool step_over;           /* get_latest: step over locks (pc_get_latest) */
    int owner_verdict;        /* check_txn_status sent by another node: what its
                               * sessions say of meta.owner, the owner of the lock
                               * met (ACT_OWNER_*) */
    unsigned timeout_ms;      /* sent: the call's time-out (0: region_call.c's, a
                               * lock wait and a quorum round) */
} act_call;

/* A region's read index (read_index.h): the region's id as the leader
 * found it after its barrier, its store's applied index of that region's
 * log, and the floor of the leader's commits in flight (UINT64_MAX: none). */
typedef struct {
    uint64_t index, floor, region;
} act_read_index;

enum { ACT_OWNER_UNKNOWN, ACT_OWNER_ALIVE, ACT_OWNER_DEAD };

/* Where an action's results go (the caller's; those its kind has). */
typedef struct {
    pc_conflict *c;           /* prewrite, get: PC_LOCKED / PC_WRITE_CONFLICT */
    pc_txn_status *st;        /* check_txn_status */
    pc_buf *value;            /* get */
    uint64_t *commit_ts;      /* get */
    pc_items *items;          /* scan */
    pc_gc_stats *gc;          /* gc: its counts added */
    pc_buf *next;             /* oldest_lock, gc: where the next call starts */
    bool *last;               /* oldest_lock, gc: nothing left past next */
    act_read_index *ri;       /* read_index */
} act_answer;

/* The action's name on the wire ("prewrite", ...); NULL past ACT_COUNT. */
const char *act_name(act_kind k);
/* The kind named; ACT_COUNT when none is. */
act_kind act_kind_named(const char *name);

/* Run a write where its region is led: here, or on the node that leads
 * it (region_call.h region_call_route). Reads: reader.h. */
pc_rc act_run(svc *s, pc_session *ps, const act_call *a, act_answer *out);

/* Run a write here, as the node that leads its region (a follower's batch
 * is refused, PC_NOT_LEADER). Serving another node's call (region_call.h
 * region_call_for_run), a status check judges the locks of that node's
 * sessions by their TTL, as that node alone knows whether they live. */
pc_rc act_here(svc *s, pc_session *ps, const act_call *a, act_answer *out);

/* The one-line forms the coordinator and the resolvers use. */
pc_rc act_prewrite(svc *s, pc_session *ps, const pc_txn_meta *t, const pc_mutation *m,
                   size_t n, pc_conflict *c);
pc_rc act_commit_primary(svc *s, pc_session *ps, pc_slice primary, uint64_t start_ts,
                         uint64_t commit_ts);
pc_rc act_commit(svc *s, pc_session *ps, const pc_slice *keys, size_t n, uint64_t start_ts,
                 uint64_t commit_ts);
pc_rc act_rollback(svc *s, pc_session *ps, const pc_slice *keys, size_t n, uint64_t start_ts);
pc_rc act_heartbeat(svc *s, pc_session *ps, pc_slice primary, uint64_t start_ts,
                    uint64_t wall_ms, uint64_t ttl_ms);
/* owner: the owner of the lock met (the transaction's, as every lock of
 * it names the same). */
pc_rc act_check_txn_status(svc *s, pc_session *ps, pc_slice primary, uint64_t start_ts,
                           pc_slice owner, pc_txn_status *st);
pc_rc act_resolve_lock(svc *s, pc_session *ps, pc_slice key, uint64_t start_ts,
                       uint64_t commit_ts);
pc_rc act_notify_clear(svc *s, pc_session *ps, pc_slice key, uint64_t upto_ts);

#endif
