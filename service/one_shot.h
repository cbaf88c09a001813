/*
 * one_shot.h — one-shot transactions: POST /v1/txn, and PUT or DELETE
 * /v1/kv/{key} as a transaction of one write (with if_commit_ts, a
 * compare-and-set). Parsed once; then run for the client as a whole
 * Percolator transaction: a start timestamp, the conditions and reads at
 * it, the commit. The client saw nothing before the commit, so conflicts
 * are retried here (docs/DESIGN.md §5.2).
 */
#ifndef PC_ONE_SHOT_H
#define PC_ONE_SHOT_H

#include <jansson.h>
#include <stdbool.h>

#include "codec.h"
#include "engine.h"
#include "leases.h"
#include "service.h"
#include "writes.h"

typedef enum { COND_COMMIT_TS, COND_EXISTS, COND_VALUE } cond_kind;

typedef struct {
    cond_kind kind;
    uint64_t commit_ts;   /* COND_COMMIT_TS: 0 = must not exist */
    bool exists;          /* COND_EXISTS */
    buf value;            /* COND_VALUE */
} condition;

typedef struct one_shot {
    codec_enc enc;
    condition *conds;     /* conds[i] is about the key ckeys[i] */
    key_list ckeys;
    key_list reads;
    write_list wl;        /* the writes as sent */
    pc_mutation *writes;  /* the same as engine mutations: sorted, distinct */
    char *ekeys;          /* their engine keys, back to back */
    size_t nwrites;
    uint64_t lease;       /* "lease": the puts attach their keys to it (0: none) */
    size_t nputs;         /* the puts so attached */
} one_shot;

/* {"conditions":[...],"reads":[...],"writes":[...]} into o (o->enc set by
 * the caller). false when it answered the error; free o either way. */
bool one_shot_parse_txn(httpd_req *req, svc *s, json_t *body, one_shot *o);

/* PUT (a value) or DELETE /v1/kv/{key}, with if_commit_ts as a condition:
 * encoding, key and body into o. false when it answered. */
bool one_shot_parse_single(httpd_req *req, svc *s, bool del, one_shot *o);

/* A blind write: no condition, no lease (and no read: single writes have
 * none). */
static inline bool one_shot_blind(const one_shot *o)
{
    return o->ckeys.n == 0 && o->reads.n == 0 && o->lease == 0;
}

/* One read of a run: its value and commit_ts when found. */
typedef struct {
    bool found;
    pc_buf value;
    uint64_t commit_ts;
} one_shot_read;

/* How a run ended (one_shot_outcome_free frees it). rc:
 *   PC_OK               committed at commit_ts; reads[] (want_reads: one
 *                       per o->reads, in order) as seen at its start
 *   PC_NOT_FOUND        with cond_failed: condition cond failed (why says
 *                       how): nothing written
 *   PC_INVALID          with not_text: a value read is not UTF-8 text and
 *                       the request asked for text: nothing written
 *   PC_TS_UNAVAILABLE   no timestamp from the oracle: nothing written
 *   PC_NOMEM            with no_session: this thread has no storage
 *                       session: nothing done
 *   PC_NOT_FOUND        with lease (LEASE_MISSING, LEASE_FULL): the lease
 *                       does not exist (any more), or has no room for the
 *                       keys: nothing written
 *   anything else       as reply_engine answers it (conflict names the
 *                       key of a write_conflict or key_locked, after the
 *                       retries; PC_NOT_LEADER, PC_UNAVAILABLE) */
typedef struct {
    pc_rc rc;
    uint64_t commit_ts;
    bool cond_failed;
    size_t cond;
    char why[128];
    bool not_text;
    bool no_session;
    lease_hold lease;     /* LEASE_HELD (0): the lease, if any, was not the problem */
    one_shot_read *reads;
    size_t nreads;
    pc_conflict conflict;
} one_shot_outcome;

/* Run o as a whole transaction, retrying conflicts (docs/DESIGN.md §5.2);
 * returns out->rc. */
pc_rc one_shot_exec(svc *s, const one_shot *o, bool want_reads, one_shot_outcome *out);

/* A blind write in one phase with one timestamp, retried like any one-shot
 * write: true with out set; false when it cannot go that way (one-phase
 * commit off, too big, a condition): one_shot_exec then. */
bool one_shot_exec_blind(svc *s, const one_shot *o, one_shot_outcome *out);

void one_shot_outcome_free(one_shot_outcome *out);

void one_shot_free(one_shot *o);

#endif
