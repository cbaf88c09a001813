/*
 * raft_member.h — what integration tests of Raft groups (the oracle's and
 * the service's) share: a member's view from its /v1/health, and a
 * partition made with iptables on loopback (root only).
 */
#ifndef PC_TL_RAFT_MEMBER_H
#define PC_TL_RAFT_MEMBER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    bool leader;            /* its role is "leader" */
    int leader_id;          /* the leader it knows of, 0: none */
    int64_t term;
    int64_t applied;        /* applied_index (-1: not reported) */
    int64_t hwm;            /* the oracle's high-water mark (-1: not reported) */
} tl_raft_view;

/* What the member at http://127.0.0.1:port says; false when it did not
 * answer 200 within timeout_ms. */
bool tl_raft_health(int port, int timeout_ms, tl_raft_view *v);

/* Drop (on) or stop dropping (off) every TCP packet to addr:port: a member
 * listening for raft there then hears from nobody (its own messages still
 * leave, no answer comes back). Rules carry a comment naming this process;
 * any left when it exits are deleted then. 0, or iptables' exit status. */
int tl_raft_cut(const char *addr, int port, bool on);

/* Whether iptables can be used here (root, installed). */
bool tl_raft_can_cut(void);

#endif
