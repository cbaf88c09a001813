/*
 * sessions.h — transaction sessions (the spec's sessions): their state, the writes
 * they buffer until commit, and the liveness lease every request renews.
 *
 * A session has two names. Its id, "<sequence>-<128 random bits>" in hex,
 * is what its client holds: whoever knows it may read the session's
 * uncommitted writes and end it, so it cannot be guessed (the bits come
 * from the kernel, getrandom). Its owner, "<run id>-<sequence>", is written
 * into every lock the session's commit takes and is public (GET /v1/locks
 * shows it): whether a lock's owner is alive is a lookup here by sequence,
 * and a session of an earlier run of the service is never found, so its
 * locks are recognised as dead at once (DESIGN §3.5).
 */
#ifndef PC_SESSIONS_H
#define PC_SESSIONS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

/*
 * A session's states and the only transitions between them (each made by
 * one function of sessions.c, which asserts it, with t->mu held):
 *
 *   (begin) ------------------------------> ACTIVE       sessions_begin
 *   ACTIVE ---- a commit starts ----------> COMMITTING   sessions_commit_begin
 *   COMMITTING -- nothing committed, the
 *                 commit may be retried ---> ACTIVE       sessions_commit_retry
 *   COMMITTING -- committed ---------------> COMMITTED    sessions_end
 *   COMMITTING -- conflict, rolled back ---> ABORTED      sessions_end
 *   ACTIVE ---- rollback, lease expired ---> ABORTED      sessions_end
 *
 * COMMITTED and ABORTED are final. While COMMITTING the owner counts as
 * alive whatever its lease: its locks are being written or committed.
 */
typedef enum { TXN_ACTIVE, TXN_COMMITTING, TXN_COMMITTED, TXN_ABORTED } txn_state;

typedef struct txn_write {
    char *key;                /* user key */
    size_t klen;
    bool deleted;
    char *val;
    size_t vlen;
} txn_write;

typedef struct txn {
    char id[56];                         /* secret: the client's handle */
    char owner[40];                      /* public: written into its locks */
    uint64_t seq;                        /* the table's key */
    uint64_t start_ts, commit_ts, lease_ttl_ms;
    _Atomic uint64_t lease_deadline_ms;  /* monotonic clock */
    _Atomic int state;                   /* txn_state */
    const char *end_reason;              /* "committed", "rollback", "conflict", "expired" */
    pthread_mutex_t mu;                  /* one request at a time works on the buffer */
    txn_write *w;                        /* buffered writes, sorted by key */
    size_t nw, capw, bytes;
    size_t charged;                      /* bytes held against --max-session-bytes
                                          * (sessions_charge); 0 once ended */
    size_t writes;                       /* buffered writes (kept after the end) */
    bool commit_pending;                 /* a commit left its prewrite locks (the
                                          * oracle was down): the writes are fixed
                                          * until it commits or rolls back */
    struct obs_claim *claim;             /* an observer's claim (observers.c) */
    bool internal;                       /* the service's own (one-shot writes):
                                          * forgotten as soon as it ends */
    uint64_t raft_term;                  /* the term its writes are proposed in
                                          * (svc_leader_term when it began; a
                                          * single node's never ends) */
    /* Owned by the table. */
    int refs;
    uint64_t ended_ms;
    struct txn *next;
} txn;

typedef struct sessions sessions;

sessions *sessions_new(const char *run_id, uint64_t retention_ms);
void sessions_free(sessions *s);

/* A new active session, referenced once for the caller. */
txn *sessions_begin(sessions *s, uint64_t start_ts, uint64_t lease_ttl_ms);
/* The same, unless max_open sessions are open (active or committing)
 * already: NULL then, with *full set (NULL and !*full: out of memory). */
txn *sessions_begin_capped(sessions *s, uint64_t start_ts, uint64_t lease_ttl_ms,
                           size_t max_open, bool *full);

/* Bounded memory. Every session is counted open from its begin to its
 * sessions_end; its buffer is charged to the table's total. Charge the
 * session `bytes` (more or less than before; t->mu held): false, nothing
 * changed, when growing would take all sessions together past max_total.
 * sessions_end charges 0, however the session ends (commit, rollback,
 * conflict, lease expiry by a request or the janitor). */
bool sessions_charge(sessions *s, txn *t, size_t bytes, size_t max_total);
size_t sessions_open(sessions *s);
size_t sessions_charged(sessions *s);
/* Gauges kept equal to sessions_open and sessions_charged (NULL: none). */
void sessions_set_gauges(sessions *s, metrics_series *open, metrics_series *bytes);
/* The session with this id, referenced, or NULL. */
txn *sessions_get(sessions *s, const char *id, size_t len);
void sessions_release(sessions *s, txn *t);

/* The monotonic clock as the session table sees it. Every reading also
 * watches for a stall of the whole process (SIGSTOP, a frozen VM): when
 * the clock jumps by more than stall_ms between readings (the janitor reads
 * it every interval), the process was not running, so no client could have
 * renewed its lease. Sessions alive when the stall began then get one more
 * lease TTL from the moment it ended (DESIGN §4.5). */
uint64_t sessions_now(sessions *s);
void sessions_set_stall_ms(sessions *s, uint64_t stall_ms);
/* How long the last stall lasted, while its grace period runs (else 0):
 * wall-clock checks of lock ages subtract it. */
uint64_t sessions_stall_credit_ms(sessions *s);
/* The last stall: when it ended and how long it lasted (0, 0: none). */
void sessions_last_stall(sessions *s, uint64_t *end, uint64_t *len);

/* Renew the lease; false if it had already run out (the caller then ends
 * the session as expired). Only for active sessions. */
bool sessions_renew(sessions *s, txn *t);
/* ACTIVE -> COMMITTING, and back to ACTIVE when the commit committed
 * nothing and may be retried (the oracle was down). t->mu held. */
void sessions_commit_begin(txn *t);
void sessions_commit_retry(txn *t);
/* End the session: committed or aborted, with the reason. Frees its
 * buffer; call with t->mu held. */
void sessions_end(sessions *s, txn *t, txn_state state, const char *reason);

bool sessions_owner_alive(sessions *s, const void *owner, size_t len, uint64_t now_ms);

/* Called by sessions_end for a session holding an observer claim, however
 * it ends (commit, rollback, expiry), with t->mu held. */
void sessions_set_end_hook(sessions *s, void (*fn)(void *arg, txn *t), void *arg);

/* Expire sessions whose lease ran out and forget ended ones past the
 * retention. Returns how many sessions expired. */
size_t sessions_reap(sessions *s, uint64_t now_ms);

/* The smallest start_ts among sessions still active (UINT64_MAX if none). */
uint64_t sessions_oldest_start(sessions *s);
size_t sessions_active(sessions *s);

typedef enum { TXN_BUFFERED, TXN_TOO_BIG, TXN_NOMEM } txn_buffer_rc;
/* Buffer a write (replacing an earlier one of the same key). TXN_TOO_BIG:
 * the session would hold more than max_bytes (nothing changed). */
txn_buffer_rc txn_buffer(txn *t, const void *key, size_t klen, bool deleted, const void *val,
               size_t vlen, size_t max_bytes);
/* What t->bytes would be after buffering a write of klen + vlen bytes. */
size_t txn_bytes_after(const txn *t, const void *key, size_t klen, size_t vlen);
/* The buffered write of a key, or NULL. */
const txn_write *txn_find(const txn *t, const void *key, size_t klen);
/* Index of the first buffered write with key >= (key, klen). */
size_t txn_lower_bound(const txn *t, const void *key, size_t klen);

#endif
