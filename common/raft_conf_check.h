/*
 * raft_conf_check.h — where a group's member may be, and whether a
 * configuration a peer sends is one the group can have (docs/DESIGN.md
 * §7.2, §7.3). libraft adopts any configuration it receives, in a
 * RAFT_CHANGE entry or an image, and connects where it says: a forged one
 * would hand the group to a stranger. Both transports check every
 * configuration with these rules before libraft sees it: the member's
 * own (raft_transport.c) and the node network's (raft_io_net.c).
 */
#ifndef PC_RAFT_CONF_CHECK_H
#define PC_RAFT_CONF_CHECK_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raft_peers.h"

typedef struct {
    const raft_peer *peers;     /* the group's --raft-peers */
    size_t npeers;
    bool added_ok;              /* a member added since may be on an address no peer has */
    bool loopback_only;         /* every address on 127/8 (plain TCP) */
} raft_member_rules;

/* "a.b.c.d:port" (libraft 0.15 takes IPv4 literals only) into sa, and
 * its host into host. 0 or -1. */
int raft_address_parse(const char *address, struct sockaddr_in *sa, char *host, size_t hostlen);

/* Whether member may be at raft_addr: a --raft-peers member only at its
 * address there; with added_ok, a member added since at an IPv4 address
 * no --raft-peers member has; on loopback when loopback_only. 0 with sa
 * and host, or -1 with why (static text). */
int raft_member_address(const raft_member_rules *r, unsigned member, const char *raft_addr,
                        struct sockaddr_in *sa, char *host, size_t hostlen, const char **why);

/* Whether a configuration (one raft_frame_configuration passed) is one
 * the group can have: at most RAFT_PEERS_MAX servers, each where it may
 * be (raft_member_address, of its configuration address's raft part; any
 * incarnation: raft_identity.h), no member twice, at least one voter. */
bool raft_conf_is_ours(const raft_member_rules *r, const uint8_t *conf, size_t len);

#endif
