/*
 * peer_tls.h — the --peer-* flags of both programs: the credentials a
 * member of a Raft group proves itself with to the others, and the rule
 * for going without (docs/DESIGN.md §7.2).
 *
 *   --peer-cert-file, --peer-key-file, --peer-trusted-ca-file
 *       go together (etcd's names). The certificate must name this member
 *       (IP:<its --raft-peers host> or DNS:raft-member-<id> as a
 *       subjectAltName: raft_transport.h) and be signed by the trusted CA
 *       that signs every member's. Read again
 *       on SIGHUP, like the HTTP certificate: new connections get them.
 *   --peer-insecure
 *       plain TCP between members even on non-loopback addresses. Without
 *       the files and without it, a group whose members are not all on
 *       127.0.0.0/8 does not start: anyone who reaches a peer port could
 *       otherwise crash the group or rewrite its log.
 */
#ifndef PC_PEER_TLS_H
#define PC_PEER_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "raft_peers.h"
#include "tls.h"

typedef struct {
    const char *cert_file, *key_file, *ca_file; /* "" or NULL: not given */
    bool insecure;
} peer_tls_flags;

/* The credentials for a member `self` of peers, or *out NULL for plain TCP
 * where that is allowed. 0, or -1 with a one-line reason naming the flag
 * (the programs exit 2). */
int peer_tls_open(const peer_tls_flags *f, const raft_peer *peers, size_t npeers, unsigned self,
                  tls_server **out, char *err, size_t errlen);

/* SIGHUP: read the files again; new peer connections get them. A file
 * that cannot be read or checked, or a certificate that does not name
 * this member (as peer_tls_open requires), leaves the current ones
 * (logged). */
void peer_tls_reload(tls_server *t, const peer_tls_flags *f);

#endif
