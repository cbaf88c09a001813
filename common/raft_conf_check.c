/*
 * raft_conf_check.c — see raft_conf_check.h.
 */
#include "raft_conf_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>

#include "raft_frame.h"
#include "raft_identity.h"

int raft_address_parse(const char *address, struct sockaddr_in *sa, char *host, size_t hostlen)
{
    const char *colon = strrchr(address, ':');
    if (colon == NULL || (size_t)(colon - address) >= hostlen)
        return -1;
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (errno != 0 || *end != '\0' || end == colon + 1 || port == 0 || port > 65535)
        return -1;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

int raft_member_address(const raft_member_rules *r, unsigned member, const char *raft_addr,
                        struct sockaddr_in *sa, char *host, size_t hostlen, const char **why)
{
    bool listed = false;
    for (size_t i = 0; i < r->npeers; i++) {
        bool same = strcmp(r->peers[i].raft, raft_addr) == 0;
        if (r->peers[i].id == member && !same) {
            *why = "the address is not the one --raft-peers gives the member";
            return -1;
        }
        if (r->peers[i].id != member && same) {
            *why = "the address is another member's";
            return -1;
        }
        listed = listed || r->peers[i].id == member;
    }
    if (!listed && !r->added_ok) {
        *why = "the member is not one of --raft-peers";
        return -1;
    }
    if (raft_address_parse(raft_addr, sa, host, hostlen) != 0) {
        *why = "the address is not an IPv4 HOST:PORT";
        return -1;
    }
    if (r->loopback_only && (ntohl(sa->sin_addr.s_addr) >> 24) != 127) {
        *why = "the address is off loopback, and the group runs plain TCP";
        return -1;
    }
    return 0;
}

bool raft_conf_is_ours(const raft_member_rules *r, const uint8_t *conf, size_t len)
{
    raft_frame_server sv[RAFT_FRAME_CONF_SERVERS_MAX];
    size_t n = raft_frame_configuration_servers(conf, len, sv, RAFT_FRAME_CONF_SERVERS_MAX);
    bool voter = false;
    if (n == 0 || n > RAFT_PEERS_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        raft_peer p;
        struct sockaddr_in sa;
        char host[INET_ADDRSTRLEN + 1];
        const char *why;
        unsigned member = raft_member_of(sv[i].id);
        if (raft_peers_from_conf_address(sv[i].address, &p, &why) != 0 ||
            raft_member_address(r, member, p.raft, &sa, host, sizeof host, &why) != 0)
            return false;
        for (size_t k = 0; k < i; k++)
            if (raft_member_of(sv[k].id) == member)
                return false;
        voter = voter || sv[i].role == RAFT_VOTER;
    }
    return voter;
}
