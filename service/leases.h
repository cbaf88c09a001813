/*
 * leases.h — keys that expire (etcd's leases; docs/DESIGN.md §11).
 *
 * A lease is granted with a TTL; a put may attach its key to a lease; when
 * the lease is revoked, or runs out without a keep-alive, every key still
 * attached to it is deleted in one transaction, replicated like any write.
 *
 * Two kinds of records, committed like data (keyspace.h):
 *   lease       'l' id(8, big-endian)            -> TTL in ms, in decimal
 *   attachment  'm' id(8, big-endian) user-key   -> "" (written by the put,
 *                                                   in the same transaction)
 * A key is attached to a lease while its latest write is the one that
 * wrote the attachment: both carry the same commit_ts. A later write of
 * the key (without the lease, with another, or a delete) detaches it
 * without touching the old lease's records.
 *
 * What is not in the store is the clock: each lease's deadline lives in
 * the leader's memory (a keep-alive is not a write), read from the
 * session clock, which notices a stall of the whole process. A member
 * that begins to lead reads the leases back and gives each a fresh TTL
 * (etcd does the same): a lease never ends before its TTL has run on the
 * leader that ends it.
 */
#ifndef PC_LEASES_H
#define PC_LEASES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "codec.h"
#include "service.h"

#define LEASE_MAX_KEYS 1000          /* keys attached to one lease, at most */
#define LEASE_MIN_TTL_MS 1000
#define LEASE_MAX_TTL_MS (7ull * 24 * 3600 * 1000)
#define LEASE_RECORD_KEY 9           /* 'l' id(8): a lease's engine key */
#define LEASE_ATTACH_MAX (LEASE_RECORD_KEY + SVC_MAX_KEY) /* an attachment's */
#define LEASE_ID_LIMIT (1ull << 53)   /* ids stay below it (JSON numbers) */

leases *leases_new(void);
void leases_free(leases *l);

/* Read every lease back from the store, in place of those in memory, each
 * with a fresh TTL: when a member begins to lead in term `term` (a single
 * node: at start; takeover.c). Until then, and on a member that does not
 * lead in the term the table was read for, nothing is granted, held, kept
 * alive or ended (PC_NOT_LEADER, LEASE_NOT_READY). */
bool leases_load(svc *s, pc_session *ps, uint64_t term);

/* Grant: a new lease (its id is an oracle timestamp, so unique across
 * leaders). PC_OK with *id; PC_INVALID: --lease-max leases exist already
 * (grants under way count); PC_TS_UNAVAILABLE: no oracle; else as the
 * engine answers (a grant whose outcome is unknown is kept as ending: the
 * janitor removes its record if it was written). */
pc_rc leases_grant(svc *s, pc_session *ps, uint64_t ttl_ms, uint64_t *id);

/* Keep alive: its deadline is now + TTL, once this member has confirmed
 * it leads (a read fence). PC_NOT_FOUND: no such lease (it ended, is
 * ending, or its TTL ran out); a refusal of the fence as it comes. */
pc_rc leases_keepalive(svc *s, uint64_t id, uint64_t *ttl_ms);

/* End a lease now (revoke; the janitor's expiry): every key still attached
 * is deleted, the attachments and the lease with them, in one transaction
 * whose commit_ts is *commit_ts. PC_NOT_FOUND: no such lease. On any other
 * failure the lease stays ending (refused to puts and keep-alives) and
 * the janitor tries again. */
pc_rc leases_revoke(svc *s, pc_session *ps, uint64_t id, size_t *deleted, uint64_t *commit_ts);

/* {"id","ttl_ms","remaining_ms","keys":[...]} (the keys attached now);
 * PC_NOT_FOUND: no such lease; *out NULL with PC_OK: a key is not text in
 * this encoding. */
pc_rc leases_lookup(svc *s, pc_session *ps, uint64_t id, codec_enc enc, json_t **out);

/* {"leases":[{"id","ttl_ms","remaining_ms"}]}, by id. */
json_t *leases_list(svc *s);

/* The janitor: end the leases whose deadline passed (and those whose end
 * failed before), up to 64 a tick. Leader only (the table's term). */
void leases_expire(svc *s, pc_session *ps);

/* A put attaching nputs keys to lease id holds it while it commits, so
 * that the lease cannot end between the put's start and its commit (the
 * end's transaction would not see the attachment, and the key would
 * outlive its lease). LEASE_HELD with *gen, the table's generation;
 * LEASE_MISSING, LEASE_FULL: refused; LEASE_UNCOUNTED: leases_count, then
 * again; LEASE_NOT_READY: this member does not lead (yet). */
typedef enum {
    LEASE_HELD,
    LEASE_MISSING,
    LEASE_FULL,
    LEASE_UNCOUNTED,
    LEASE_NOT_READY
} lease_hold;
lease_hold leases_hold(svc *s, uint64_t id, size_t nputs, uint64_t *gen);
/* Whether a hold of generation gen still counts: no read-back since (a
 * put checks it after its start timestamp, before it commits). */
bool leases_still_held(svc *s, uint64_t gen);
/* Count the lease's attachment records (read back, or after a put whose
 * outcome is unknown), once no put holds it. */
pc_rc leases_count(svc *s, pc_session *ps, uint64_t id);
/* Let go of the hold of the put that ended with rc; added: the attachment
 * keys it created, if it committed. An unknown outcome makes the lease
 * counted again. */
void leases_release(svc *s, uint64_t id, uint64_t gen, size_t nputs, size_t added, pc_rc rc);

/* lease_keys.c: the records' keys. A lease's ('l' id; out has
 * LEASE_RECORD_KEY bytes); an attachment's ('m' id user-key; out has
 * LEASE_ATTACH_MAX bytes); the range [start, end) of a lease's attachments
 * (LEASE_RECORD_KEY bytes each). The parsers say false for anything else. */
void lease_record_key(char *out, uint64_t id);
bool lease_record_parse(const void *k, size_t len, uint64_t *id);
size_t lease_attach_key(char *out, uint64_t id, const void *key, size_t klen);
void lease_attach_range(uint64_t id, char *start, char *end);
bool lease_attach_parse(const void *k, size_t len, uint64_t *id, const char **user,
                        size_t *ulen);
/* A lease id as the API writes it: decimal, 1 .. LEASE_ID_LIMIT - 1, no
 * sign, no leading zero. */
bool lease_id_parse(const char *s, size_t len, uint64_t *id);

#endif
