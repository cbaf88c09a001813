/*
 * respond.h — answers shared by the route files: engine results as HTTP
 * errors (one table, DESIGN §2), a page of a scan, and opening a session
 * for a request (404 / 409 / 410 checks and the lease renewal).
 */
#ifndef PC_RESPOND_H
#define PC_RESPOND_H

#include "codec.h"
#include "engine.h"
#include "one_shot.h"
#include "service.h"
#include "sessions.h"

/* Answer an engine failure; c (may be NULL) names the key. */
void reply_engine(httpd_req *req, svc *s, pc_rc rc, const pc_conflict *c, codec_enc enc);
void reply_oracle_unavailable(httpd_req *req, svc *s);
/* 503 not_leader: this member has just begun to lead and could not take
 * over the leader's state (svc_take_over). */
void reply_not_taken_over(httpd_req *req);
/* 503 not_leader (a member of a Raft group that does not lead). */
void reply_not_leader(httpd_req *req);
/* What the leader keeps in memory (the observers' registrations, the
 * leases) is read back by a member that has just begun to lead before it
 * serves them (svc_take_over): true when it could not, and a 503 was
 * answered. */
bool reply_unless_taken_over(httpd_req *req, svc *s);
/* 404 lease_not_found, or 409 lease_full (LEASE_MAX_KEYS attached). */
void reply_lease_refused(httpd_req *req, uint64_t id, lease_hold why);
/* 500 internal: this HTTP thread has no storage session (svc_engine_session
 * failed: out of memory or descriptors, logged there). */
void reply_no_session(httpd_req *req);
/* 200 {"commit_ts": cts}, counted as a committed transaction. */
void reply_committed(httpd_req *req, svc *s, uint64_t cts);
/* 409 condition_failed naming the (user) key. */
void reply_condition_failed(httpd_req *req, const void *key, size_t klen, codec_enc enc,
                            size_t index, const char *why);

/* A user key as a JSON string (text or base64); NULL if it cannot be text. */
json_t *user_key_json(pc_slice engine_key, codec_enc enc, bool *b64);

/* Answer one page of [start, end) (user keys) at ts: {"items":[...],"next"}.
 * With a session, its buffered writes are merged in (they win). */
void reply_scan_page(httpd_req *req, svc *s, pc_session *ps, const char *start, size_t slen,
                     const char *end, size_t elen, uint64_t ts, size_t limit, const txn *own,
                     codec_enc enc);

/* Answer a one-shot transaction's run (one_shot_exec, one_shot_exec_blind):
 * 200 with its commit_ts (and the reads when want_reads), or its error. */
void reply_one_shot(httpd_req *req, svc *s, const one_shot *o, const one_shot_outcome *out,
                    bool want_reads);

/* A snapshot read that cannot begin (svc_snapshot_begin's answer, not
 * SVC_SNAP_OK): 400 with the reason, or 500 out of memory. */
void reply_snapshot_refused(httpd_req *req, svc *s, svc_snapshot why, uint64_t ts);

/* Parse the range parameters of a scan (prefix | start,end; after; limit)
 * into user-key bounds; false after answering 400. Buffers of SVC_MAX_KEY+1. */
bool parse_scan_range(httpd_req *req, codec_enc enc, char *start, size_t *slen, char *end,
                      size_t *elen, uint64_t *limit);

/* The session named by {id}, locked for this request, lease renewed; NULL
 * after answering 404 (unknown), 410 (expired) or, unless any_state, 409
 * (no longer active). Close with txn_close. */
txn *txn_open(httpd_req *req, svc *s, bool any_state);
/* Unlock and release the session, charged (sessions_charge) what its
 * buffer holds now. */
void txn_close(svc *s, txn *t);

#endif
