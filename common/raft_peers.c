/*
 * raft_peers.c — see raft_peers.h.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft_peers.h"

typedef struct {
    raft_peer *peers;
    size_t *n;
} peer_list;

raft_peer *raft_peers_find(raft_peer *peers, size_t n, unsigned id)
{
    for (size_t i = 0; i < n; i++)
        if (peers[i].id == id)
            return &peers[i];
    return NULL;
}

/* Split "1=a,2=b" calling fn(id, value) for each. */
static int each_pair(const char *list,
                     int (*fn)(peer_list *, unsigned, const char *, char *, size_t),
                     peer_list *l, char *err, size_t errlen)
{
    char item[2 * RAFT_PEER_ADDR_MAX];
    const char *p = list;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= sizeof(item)) {
            snprintf(err, errlen, "'%.40s': each member is ID=ADDRESS", p);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        char *eq = strchr(item, '='), *end;
        unsigned long id = eq ? strtoul(item, &end, 10) : 0;
        if (eq == NULL || end != eq || id == 0 || id > 1000000 || eq[1] == '\0') {
            snprintf(err, errlen, "'%s': each member is ID=ADDRESS with ID from 1", item);
            return -1;
        }
        if (fn(l, (unsigned)id, eq + 1, err, errlen) != 0)
            return -1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* Why addr is not HOST:PORT with a port 1..65535, or NULL when it is.
 * Checked here so that a typo stops the program at start with its reason
 * (exit 2), rather than showing later as a member nobody reaches. */
static const char *bad_host_port(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    if (colon == NULL)
        return "not HOST:PORT";
    if (colon == addr)
        return "no host before the port";
    const char *port = colon + 1;
    size_t digits = strspn(port, "0123456789");
    if (*port == '\0')
        return "no port after the host";
    if (digits == 0 || port[digits] != '\0')
        return "the port is not a number";
    unsigned long n = strtoul(port, NULL, 10); /* ULONG_MAX when too long */
    if (n == 0 || n > 65535)
        return "the port is not in 1..65535";
    return NULL;
}

const char *raft_peers_bad_address(const char *addr)
{
    return strlen(addr) >= RAFT_PEER_ADDR_MAX ? "the address is too long" : bad_host_port(addr);
}

bool raft_peers_url_ok(const char *url)
{
    size_t len = strlen(url);
    if (len >= RAFT_PEER_ADDR_MAX ||
        (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0))
        return false;
    for (size_t i = 0; i < len; i++)
        if (url[i] <= ' ' || url[i] > '~')
            return false;
    return true;
}

void raft_peers_conf_address(const raft_peer *p, bool with_url, char *out, size_t len)
{
    if (with_url && p->http[0] != '\0')
        snprintf(out, len, "%s %s", p->raft, p->http);
    else
        snprintf(out, len, "%s", p->raft);
}

int raft_peers_from_conf_address(const char *conf, raft_peer *p, const char **why)
{
    const char *space = strchr(conf, ' ');
    size_t rlen = space != NULL ? (size_t)(space - conf) : strlen(conf);
    if (rlen >= sizeof p->raft) {
        *why = "the raft address is too long";
        return -1;
    }
    memcpy(p->raft, conf, rlen);
    p->raft[rlen] = '\0';
    if ((*why = bad_host_port(p->raft)) != NULL)
        return -1;
    p->http[0] = '\0';
    if (space == NULL)
        return 0;
    if (!raft_peers_url_ok(space + 1)) {
        *why = "the URL after the raft address is not http:// or https:// (printable, no "
               "space, under 128 bytes)";
        return -1;
    }
    snprintf(p->http, sizeof p->http, "%s", space + 1);
    return 0;
}

static int add_raft(peer_list *l, unsigned id, const char *addr, char *err, size_t errlen)
{
    const char *why = raft_peers_bad_address(addr);
    if (why == NULL && raft_peers_find(l->peers, *l->n, id) != NULL)
        why = "the id is given twice";
    if (why != NULL) {
        snprintf(err, errlen, "--raft-peers member %u=%s: %s", id, addr, why);
        return -1;
    }
    if (*l->n == RAFT_PEERS_MAX) {
        snprintf(err, errlen, "--raft-peers: more than %d members", RAFT_PEERS_MAX);
        return -1;
    }
    raft_peer *pr = &l->peers[(*l->n)++];
    memset(pr, 0, sizeof(*pr));
    pr->id = id;
    snprintf(pr->raft, sizeof(pr->raft), "%s", addr);
    return 0;
}

static int add_url(peer_list *l, unsigned id, const char *url, char *err, size_t errlen)
{
    raft_peer *pr = raft_peers_find(l->peers, *l->n, id);
    if (pr == NULL || !raft_peers_url_ok(url)) {
        snprintf(err, errlen, "%u=%s: not a member of --raft-peers, or not an http:// URL", id,
                 url);
        return -1;
    }
    snprintf(pr->http, sizeof(pr->http), "%s", url);
    return 0;
}

int raft_peers_parse(const char *peers, const char *urls, unsigned self, raft_peer *out,
                     size_t *n, char *err, size_t errlen)
{
    peer_list l = {out, n};
    *n = 0;
    if (each_pair(peers, add_raft, &l, err, errlen) != 0)
        return -1;
    if (urls != NULL && each_pair(urls, add_url, &l, err, errlen) != 0)
        return -1;
    if (*n == 0 || raft_peers_find(out, *n, self) == NULL) {
        snprintf(err, errlen, "--raft-id %u is not among the members of --raft-peers", self);
        return -1;
    }
    return 0;
}

int raft_peers_set_initial(raft_peer *peers, size_t n, const char *ids, char *err,
                           size_t errlen)
{
    if (ids == NULL || ids[0] == '\0')
        return 0;
    for (size_t i = 0; i < n; i++)
        peers[i].later = true;
    const char *p = ids;
    while (*p != '\0') {
        char *end;
        unsigned long id = strtoul(p, &end, 10);
        raft_peer *m = end != p && (*end == ',' || *end == '\0') && id <= 1000000
                           ? raft_peers_find(peers, n, (unsigned)id)
                           : NULL;
        if (m == NULL) {
            snprintf(err, errlen, "--raft-initial-members: '%.40s' is not a list of members of "
                     "--raft-peers (ID,ID,...)", ids);
            return -1;
        }
        m->later = false;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}
