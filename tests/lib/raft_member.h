/*
 * raft_member.h — what integration tests of Raft groups (the oracle's and
 * the service's) share: a member's view from its /v1/health, and a
 * partition made with iptables on loopback (root only).
 */
#ifndef PC_TL_RAFT_MEMBER_H
#define PC_TL_RAFT_MEMBER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

typedef struct {
    bool leader;            /* its role is "leader" */
    int leader_id;          /* the leader it knows of, 0: none */
    int64_t term;
    int64_t applied;        /* applied_index (-1: not reported) */
    int64_t hwm;            /* the oracle's high-water mark (-1: not reported) */
    int64_t lag;            /* entries committed, not applied here (-1: not reported) */
    char membership[16];    /* "voter", "joining", ... ("" : not reported) */
} tl_raft_view;

/* method path (body: JSON, or NULL) on the member at 127.0.0.1:port,
 * following a follower's 307 to its leader (at most 3 hops). The last
 * status (0: no answer within timeout_ms), and its body parsed into *out
 * when out is given (NULL if none; the caller frees). */
long tl_raft_call(int port, const char *method, const char *path, const char *body,
                  int timeout_ms, json_t **out);

/* Wait, up to TL_START_MS in all, until each of the count members at
 * ports[] (those whose pid is above 0) says in its health that it is a
 * voter; else the end of each one's log (dir/<log_prefix><i+1>.log) and a
 * cmocka failure. An initial member that starts only after the
 * others bootstrapped the group and wrote to it cannot tell that from a
 * member back without its disk, so it joins as a new incarnation and the
 * leader replaces its old raft id with it (DESIGN 7.3); until then the
 * group has two live voters of three, and a test that kills the leader
 * meanwhile leaves a group that cannot elect. Tests start from a whole
 * group. */
void tl_raft_require_voters(const char *dir, const char *log_prefix, const int ports[],
                           const pid_t pids[], int count);

/* The status of GET /v1/ready on the member at port (0: no answer), and
 * its message (a 503's reason) into why (may be NULL). */
long tl_raft_ready(int port, char *why, size_t len);

/* Wait up to ms until the member at port reports membership `want`;
 * false if it does not. */
bool tl_raft_membership_is(int port, const char *want, int ms);
/* Whether the member on port says, within ms, that member leader_id (its
 * --raft-id) leads: it heard that leader's term, so its hellos show a
 * group past its bootstrap entry (printed when not). */
bool tl_raft_follows(int port, int leader_id, int ms);

/* What the member at http://127.0.0.1:port says; false when it did not
 * answer 200 within timeout_ms. */
bool tl_raft_health(int port, int timeout_ms, tl_raft_view *v);

/* Whether, for ms from now, none of the members at ports[0..n-1] says it
 * leads or is past term (polled every 100 ms; one that does not answer,
 * or answers after the ms, counts as quiet). After a leader's kill, a
 * group whose election timeout is E elects nobody for at least E minus two
 * heartbeats (a follower hears from the leader at least once a heartbeat,
 * give or take one: an append in between delays the next): this shows the
 * timeout a group was given is the one it runs on. */
bool tl_raft_quiet_for(const int ports[], int n, int64_t term, int ms);

/* The election timeout flags' refusal: prog given a timeout shorter than
 * five heartbeats exits 2 naming both (a cmocka failure otherwise). */
void tl_raft_refuses_short_timeout(const char *prog);

/* kill -9 member `leader` (pids[leader], set to 0 after) of a group of n
 * whose HTTP ports are http[], and check the others stay quiet for
 * quiet_ms (tl_raft_quiet_for, from the term the leader reported). The
 * time of the kill (time_mono_ms); *hwm_out, when not NULL, the leader's
 * high-water mark as its health reported it before the kill. */
uint64_t tl_raft_kill_leader_expect_quiet(pid_t pids[], const int http[], int n, int leader,
                                          int quiet_ms, int64_t *hwm_out);

/* Drop (on) or stop dropping (off) every TCP packet to addr:port: a member
 * listening for raft there then hears from nobody (its own messages still
 * leave, no answer comes back). Rules carry a comment naming this process;
 * any left when it exits are deleted then. 0, or iptables' exit status. */
int tl_raft_cut(const char *addr, int port, bool on);

/* Whether iptables can be used here (root, installed). */
bool tl_raft_can_cut(void);

#endif
