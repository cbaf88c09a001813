/*
 * keyspace.h — the engine's key space is shared by user keys and the
 * service's own records (observer acknowledgments later). A one-byte prefix
 * keeps them apart, so that no user key can collide with an internal one
 * and user scans never see internal records.
 */
#ifndef PC_KEYSPACE_H
#define PC_KEYSPACE_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"
#include "service.h"

#define KS_USER 'u'      /* user keys */
#define KS_ACK 'a'       /* observer acknowledgments: 'a' name '\0' user-key */
#define KS_OBSERVER 'o'  /* observer registrations: 'o' name -> prefix */
#define KS_LEASE 'l'     /* leases: 'l' id(8) -> TTL (leases.h) */
#define KS_LEASE_KEY 'm' /* keys attached to a lease: 'm' id(8) user-key */
#define KS_MAX (SVC_MAX_KEY + 1)

/* User key -> engine key ("u" + key); out has KS_MAX bytes. */
size_t ks_user(char *out, const void *key, size_t len);

/* Engine key -> user key (points into k); false if k is not a user key. */
bool ks_is_user(pc_slice k, pc_slice *user);

/* The engine range of user keys in [start, end); an empty end means to
 * the end of user keys. Buffers of KS_MAX + 1 bytes. */
void ks_user_range(const void *start, size_t slen, const void *end, size_t elen, char *sbuf,
                   pc_slice *s, char *ebuf, pc_slice *e);

/* The smallest key above every key with this prefix (in place); false if
 * there is none (the prefix is all 0xFF). */
bool ks_prefix_end(char *p, size_t *len);

/* --region-split-keys: user keys, comma-separated, each percent-encoded
 * as in a URL path (%2C for a comma), 1..SVC_MAX_KEY bytes decoded, in
 * strictly increasing order, at most KS_MAX_SPLITS. Their engine keys go
 * in *out (n of them; the caller frees each pc_buf, then the array); ""
 * or NULL gives none. -1 with a message in err when the list is not that. */
#define KS_MAX_SPLITS 1024
int ks_split_keys(const char *spec, pc_buf **out, size_t *n, char *err, size_t errlen);

#endif
