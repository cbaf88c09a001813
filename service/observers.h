/*
 * observers.h — Percolator's notifications (the paper's §2.4; the spec's
 * Observers): observers registered by name with a key prefix; a claim
 * hands out a key whose latest committed write is newer than the
 * observer's acknowledgment, inside a session that already carries the
 * acknowledgment write, so that for every change at most one observer
 * transaction commits per observer.
 */
#ifndef PC_OBSERVERS_H
#define PC_OBSERVERS_H

#include <jansson.h>
#include <stdbool.h>

#include "codec.h"
#include "service.h"
#include "sessions.h"

#define OBS_NAME_MAX 128
#define OBS_MAX 64 /* observers at most */

/* What a claiming session carries (txn->claim). */
typedef struct obs_claim {
    char name[OBS_NAME_MAX + 1];
    char *key;                  /* user key */
    size_t klen;
    uint64_t version;           /* commit_ts of the change handed out */
    char ack_key[1 + OBS_NAME_MAX + 1 + SVC_MAX_KEY];
    size_t ack_len;
    char ack_val[24];           /* the version, in decimal */
} obs_claim;

observers *observers_new(void);
void observers_free(observers *o);

/* Load the registrations from the store, in place of those in memory, and
 * tell the engine what to watch: at start-up, and on a member when it
 * begins to lead (takeover.c svc_take_over). */
bool observers_load(svc *s, pc_session *ps);
/* Whether this node marks what a node with digest marks: if not, its
 * registrations are read again from its own store, as applied (it may
 * not lead region 1, where they live), and compared again. A node that
 * still differs must not run a commit for that node: it could leave a
 * change unmarked, which no observer would ever see. */
bool observers_match(svc *s, pc_session *ps, uint64_t digest);
/* observers_load, fenced as it is, but leaving a set pushed while it read
 * (a registration made meanwhile): the janitor's, when a node answered
 * that this one's set differs from its store (region_call.h). */
bool observers_reload(svc *s, pc_session *ps);

bool observers_name_ok(const char *name, size_t len);

/* Register or replace; *created tells which. PC_TS_UNAVAILABLE without
 * the oracle. */
pc_rc observers_put(svc *s, pc_session *ps, const char *name, const void *prefix, size_t plen,
                    bool *created);
/* PC_NOT_FOUND if there is no such observer. */
pc_rc observers_delete(svc *s, pc_session *ps, const char *name);
/* {"observers":[{"name","prefix","pending"}]}; NULL if a prefix cannot be
 * shown in this encoding. */
json_t *observers_list(svc *s, pc_session *ps, codec_enc enc);

/* Claim a dirty key, waiting up to wait_ms. PC_OK with *out (a referenced
 * session holding the claim) and the item {"key","value","commit_ts"};
 * PC_NOT_FOUND: nothing to do (or no such observer: *no_observer);
 * PC_TS_UNAVAILABLE: no oracle. */
pc_rc observers_claim(svc *s, pc_session *ps, const char *name, uint64_t wait_ms, codec_enc enc,
                      txn **out, json_t **item, bool *no_observer);

/* After an observer transaction committed: clear the key's notify entry
 * when every observer watching it has acknowledged its latest change. */
void observers_committed(svc *s, pc_session *ps, const txn *t);

/* Wake claimants waiting for work (a commit may have dirtied keys). */
void observers_wake(svc *s);

/* The session end hook (sessions_set_end_hook): drop the claim. */
void observers_session_ended(void *arg, txn *t);

#endif
