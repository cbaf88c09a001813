/*
 * raft_peers.h — the members of a Raft group as the programs' flags give
 * them: "--raft-peers 1=host:port,2=host:port,..." (each member's raft
 * transport address) and "--raft-urls 1=http://host:port,..." (each
 * member's HTTP URL, for redirects to the leader). Shared by the oracle
 * and the service (docs/DESIGN.md §7, §9).
 */
#ifndef PC_RAFT_PEERS_H
#define PC_RAFT_PEERS_H

#include <stdbool.h>
#include <stddef.h>

#define RAFT_PEERS_MAX 7
#define RAFT_PEER_ADDR_MAX 128

typedef struct {
    unsigned id;
    char raft[RAFT_PEER_ADDR_MAX];   /* host:port of its raft transport */
    char http[RAFT_PEER_ADDR_MAX];   /* http://host:port of its API ("" if unknown) */
    bool later;                      /* not among the members that bootstrap the group */
} raft_peer;

/* Parse peers (and urls, which may be NULL) into out[0..*n), at most
 * RAFT_PEERS_MAX; self must be among them; each raft address is HOST:PORT
 * with a host and a port 1..65535. 0, or -1 with a reason in err. */
int raft_peers_parse(const char *peers, const char *urls, unsigned self, raft_peer *out,
                     size_t *n, char *err, size_t errlen);

/* --raft-initial-members "1,2,3": the members that bootstrap the group;
 * every other member of peers joins it later (raft_identity.h). "" : all
 * of them. 0, or -1 with a reason (an id that is not a peer). */
int raft_peers_set_initial(raft_peer *peers, size_t n, const char *ids, char *err,
                           size_t errlen);

/* The member with this id, or NULL. */
raft_peer *raft_peers_find(raft_peer *peers, size_t n, unsigned id);

#endif
