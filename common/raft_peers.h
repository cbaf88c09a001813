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

/* A member's address in libraft's configuration. A --raft-peers member's
 * is its raft address. A member an operator added on an address no
 * --raft-peers gives carries its HTTP URL too, after one space
 * ("10.0.0.4:7001 https://10.0.0.4:8080"): the configuration in the log
 * is how every member, and every member started later with older flags,
 * learns where it is and where to send its clients (docs/DESIGN.md 7.3).
 * Both parts are under RAFT_PEER_ADDR_MAX, so the whole fits the frame
 * check's bound on a configuration's address (raft_frame.h). */
#define RAFT_PEER_CONF_ADDR_MAX (2 * RAFT_PEER_ADDR_MAX)

/* p's configuration address into out (RAFT_PEER_CONF_ADDR_MAX): with its
 * URL when with_url and it has one. */
void raft_peers_conf_address(const raft_peer *p, bool with_url, char *out, size_t len);

/* Split a configuration address into p->raft and p->http (p->id is left
 * as it is): the raft part HOST:PORT, the URL, if any, http:// or
 * https:// without spaces. 0, or -1 with why (static text). */
int raft_peers_from_conf_address(const char *conf, raft_peer *p, const char **why);

/* Whether a URL is one a member may be given: http:// or https://, under
 * RAFT_PEER_ADDR_MAX, printable, no space. */
bool raft_peers_url_ok(const char *url);

/* Why addr is not HOST:PORT with a port 1..65535 under
 * RAFT_PEER_ADDR_MAX, or NULL when it is. */
const char *raft_peers_bad_address(const char *addr);

/* The member with this id, or NULL. */
raft_peer *raft_peers_find(raft_peer *peers, size_t n, unsigned id);

#endif
