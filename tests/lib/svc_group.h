/*
 * svc_group.h — three percolator-service members as a Raft group over one
 * percolator-oracle, or over three as a Raft group of their own, on
 * 127.0.0.1 with free ports and a temp dir, for the integration tests of
 * the replicated service (test_service_raft, test_service_raft_api); or
 * up to five members in --raft-peers, for a group that grows; and new
 * machines, members on an address no other member's flags give.
 */
#ifndef PC_TL_SVC_GROUP_H
#define PC_TL_SVC_GROUP_H

#include <stdbool.h>
#include <sys/types.h>

#include "testlib.h"

#define TL_GROUP_NODES 3
#define TL_GROUP_MAX 5 /* members in --raft-peers at most */

typedef struct {
    char *dir;
    tl_oracle oracle;               /* the oracle, when there is one */
    int noracles;                   /* 1, or 3: a Raft group (below) */
    pid_t opid[TL_GROUP_NODES];     /* its members (0: not running) */
    int ohttp[TL_GROUP_NODES];
    char oracle_urls[256];          /* the members' --oracle */
    char opeers[256], ourls[256];   /* the oracle members' --raft-peers, --raft-urls */
    int n;                          /* members in --raft-peers: TL_GROUP_NODES, or up
                                       to TL_GROUP_MAX; then the new machines */
    int http[TL_GROUP_MAX], raft[TL_GROUP_MAX];
    pid_t pid[TL_GROUP_MAX];        /* 0: not running */
    char peers[256], urls[256];
    const char *env;                /* one "K=V" for every member, or NULL */
    const char *extra[20];          /* more flags for every member, NULL-ended */
    /* A new machine's own --raft-peers and --raft-urls ("": the group's),
     * and the members that bootstrapped the group, which it joins. */
    char own_peers[TL_GROUP_MAX][320], own_urls[TL_GROUP_MAX][320];
    char initial[32];
} tl_svc_group;

/* The oracle, every member's addresses, and members 0..started-1 started
 * (each waited for; when they are a majority, until each says it is a
 * voter: tl_raft_require_voters). env and extra (NULL-ended, at most 11)
 * as above. */
void tl_group_start(tl_svc_group *g, const char *tag, int started, const char *env,
                    const char *const extra[]);
/* The same over oracles oracles (1, or 3 as a Raft group: the members get
 * --oracle URL1,URL2,URL3 and follow its leader). */
void tl_group_start_with(tl_svc_group *g, const char *tag, int started, const char *env,
                         const char *const extra[], int oracles);
/* The same with n members (up to TL_GROUP_MAX) in --raft-peers and
 * --raft-urls, of which the first `started` are started. */
void tl_group_start_n(tl_svc_group *g, const char *tag, int n, int started, const char *env,
                      const char *const extra[], int oracles);
/* (Re)start member i on its data dir; waits until it answers health. */
void tl_group_member_start(tl_svc_group *g, int i);
/* Member i (g->n, the next one) started as a new machine (DESIGN 7.3):
 * raft on 127.0.2.(i+1), HTTP on 127.0.0.1, fresh ports and an empty data
 * dir; its flags list the group's members, the new machines before it and
 * itself, and --raft-initial-members the --raft-peers members (unless
 * extra gives it), so it only joins. No other member's flags name it, and
 * nothing adds it: that is the operator's (member add). g->n grows by one;
 * tl_group_member_start restarts it with the same flags. */
void tl_group_new_machine(tl_svc_group *g, int i);
/* Member i's raft address, HOST:PORT, as its own flags give it. */
void tl_group_raft_address(const tl_svc_group *g, int i, char *out, size_t len);
/* (Re)start oracle member i of a group of oracles on its data dir; waits
 * until it answers health. */
void tl_group_oracle_start(tl_svc_group *g, int i);
/* The running oracle member other than skip (-1: none) that says it
 * leads, waiting up to ms; -1 if none. */
int tl_group_oracle_leader(tl_svc_group *g, int skip, int ms);
/* Stop every running member and the oracle (each must exit 0); remove the dir. */
void tl_group_stop(tl_svc_group *g);
/* The running member other than skip (-1: none) that leads and is ready
 * (its writes go through), waiting up to ms; -1 if none. */
int tl_group_leader(tl_svc_group *g, int skip, int ms);
/* The end of every member's and oracle's log on stderr: why a wait for a
 * leader failed (each logs its terms and whom it followed). */
void tl_group_dump_logs(const tl_svc_group *g);
/* Wait up to ms until member i names member leader as its leader (a
 * follower learns it from the leader's first heartbeat, and shows it
 * within its next status refresh); false if it does not. */
bool tl_group_knows_leader(tl_svc_group *g, int i, int leader, int ms);
/* The locks member i lists (GET /v1/locks, up to 1,000; a follower passes
 * it on to its leader); -1 when no 200 answer comes. */
long tl_group_locks(tl_svc_group *g, int i);

#endif
