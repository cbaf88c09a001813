/*
 * raft_identity.h — who a member is in its Raft group, and what it does
 * when it starts without its data (docs/DESIGN.md §7.3).
 *
 * Raft's safety rests on every voter keeping its log, term and vote. A
 * member whose data dir was wiped, replaced or restored from an old copy
 * has lost them; if it came back under its old identity it could vote
 * for a candidate that misses acknowledged writes (or a second candidate
 * in a term it had voted in) and the group would lose data silently. So:
 *
 *  - A member's libraft id is its member number (--raft-id) plus an
 *    incarnation in the high 32 bits. The first members of a group have
 *    incarnation 0 (their raft id is their number, as before this file).
 *  - The data dir holds a small "member" file: the group's id (a hash of
 *    the program and the first --raft-peers, taken at bootstrap) and this
 *    member's raft id. A dir without it but with libraft's state is one
 *    from before this file: incarnation 0.
 *  - A member that starts with an empty data dir asks the other members
 *    (a probe on the peer transport, raft_transport.h, or over the
 *    node's network, raft_io_net.h) before it does
 *    anything. If any of them holds more of the group than its bootstrap
 *    entry, or is itself joining, the group exists: this member takes a
 *    new incarnation and starts with an empty log and no configuration.
 *    libraft never lets a server that is not a voter in its configuration
 *    vote or stand, so it counts toward no quorum. The leader sees the
 *    new incarnation (in the transport's hello), removes the old one and
 *    adds the new one as a spare, then promotes it to voter; libraft
 *    promotes only after the spare has caught up (raft_assign).
 *  - A member bootstraps the group only when enough of the other members
 *    that bootstrap (all, or those of --raft-initial-members) answered to
 *    meet every majority of them without counting itself (n - q + 1 of
 *    n, q a majority: all three of three, four of five), and none of them
 *    holds more than the bootstrap entry or a term past the bootstrap's.
 *    Itself it cannot count: an empty dir may be a wiped one that voted
 *    and held entries with the members that do not answer. Answered so,
 *    no election was won and nothing committed (a winner's voters and a
 *    commit's quorum each meet those who answered, who would say so).
 *    Fewer answers: it waits and asks again. A group of one bootstraps
 *    alone. A member that is not one of them only ever joins.
 */
#ifndef PC_RAFT_IDENTITY_H
#define PC_RAFT_IDENTITY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raft_peers.h"

/* The member number (--raft-id, the key of --raft-peers) of a raft id. */
static inline unsigned raft_member_of(uint64_t raft_id)
{
    return (unsigned)(raft_id & 0xffffffffu);
}

typedef struct {
    uint64_t cluster;  /* the group's id; never 0 */
    uint64_t raft_id;  /* this member's libraft id */
} raft_member_identity;

/* The file's name in the raft dir. */
#define RAFT_MEMBER_FILE "member"

/* Read dir's member file: 1 read, 0 there is none, -1 (err) unreadable or
 * not one of ours. */
int raft_member_load(const char *dir, raft_member_identity *out, char *err, size_t errlen);

/* Write it durably (a temporary file, fsync, rename, fsync of dir). 0 or
 * -1 with err. */
int raft_member_save(const char *dir, const raft_member_identity *id, char *err,
                     size_t errlen);

/* Whether dir holds libraft state (its metadata files): a member that
 * has been running. */
bool raft_member_has_state(const char *dir);

/* The id a group bootstraps with: a hash of the program ("oracle",
 * "service") and its bootstrap members' numbers and addresses (those not
 * marked later), in any order; never 0. Members of another program or another group do not share it, and
 * their connections are refused. */
uint64_t raft_member_cluster_id(const char *kind, const raft_peer *peers, size_t n);

/* A new incarnation of member: its number with random high bits (never
 * incarnation 0). */
uint64_t raft_member_new_incarnation(unsigned member);

/* What one other member answered to a probe. */
typedef struct {
    bool initial;         /* one of the members that bootstrap (the caller sets it) */
    bool answered;
    uint64_t cluster;     /* 0: it knows no group yet */
    uint64_t raft_id;
    bool has_state;       /* it runs with libraft state */
    uint64_t last_index;  /* its log's last index (UINT64_MAX: not known yet) */
} raft_member_probe;

typedef enum {
    RAFT_MEMBER_WAIT,       /* too few answers to tell: ask again */
    RAFT_MEMBER_BOOTSTRAP,  /* a new group: bootstrap it (cluster: own) */
    RAFT_MEMBER_JOIN,       /* the group exists: join it (cluster: theirs) */
    RAFT_MEMBER_CONFLICT,   /* members answer with different groups */
} raft_member_decision;

/* The rule above, for a member with an empty data dir: answers from the
 * n other members, own is the cluster id this member would bootstrap
 * with, self_initial whether it is one of the members that bootstrap
 * (--raft-initial-members; n - q + 1 of those others must answer; one
 * that is not only ever joins). *cluster is set for BOOTSTRAP and JOIN. */
raft_member_decision raft_member_decide(const raft_member_probe *answers, size_t n,
                                        bool self_initial, uint64_t own, uint64_t *cluster);

/* What a member last said it is (in a hello, an answer or a Raft
 * message) and when, as a member's own transport (raft_transport.c) and
 * the node's network (raft_io_net.c) note it: under their lock, but ms
 * is atomic so that a rate limit may read it without. */
typedef struct {
    uint64_t raft_id;
    atomic_uint_fast64_t ms;  /* when (time_mono_ms); 0: never */
    bool has_state;
} raft_seen;

/* Note that the member said it is raft_id (with state or not), now. */
void raft_seen_note(raft_seen *s, uint64_t raft_id, bool has_state);

/* What s says (s NULL, or never noted: 0, false, 0), and whether it was
 * noted within max_age_ms. */
bool raft_seen_get(const raft_seen *s, uint64_t max_age_ms, uint64_t *raft_id, bool *has_state,
                   uint64_t *at_ms);

#endif
