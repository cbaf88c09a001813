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
} one_shot;

/* {"conditions":[...],"reads":[...],"writes":[...]} into o (o->enc set by
 * the caller). false when it answered the error; free o either way. */
bool one_shot_parse_txn(httpd_req *req, svc *s, json_t *body, one_shot *o);

/* PUT (a value) or DELETE /v1/kv/{key}, with if_commit_ts as a condition:
 * encoding, key and body into o. false when it answered. */
bool one_shot_parse_single(httpd_req *req, svc *s, bool del, one_shot *o);

/* A blind write: no condition (and no read: single writes have none). */
static inline bool one_shot_blind(const one_shot *o)
{
    return o->ckeys.n == 0 && o->reads.n == 0;
}

/* Run o and answer the request (with the reads when want_reads). */
void one_shot_run(httpd_req *req, svc *s, one_shot *o, bool want_reads);

/* A blind write in one phase with one timestamp, retried like any one-shot
 * write; answers the request. false (nothing answered) when it cannot go
 * that way (one-phase commit off, too big): one_shot_run then. */
bool one_shot_blind_write(httpd_req *req, svc *s, one_shot *o);

void one_shot_free(one_shot *o);

#endif
