/*
 * raft_io_guard.h — a raft_io that sits between libraft 0.15 and its real
 * I/O (the libuv one, or the fixture's in-memory one) and corrects what a
 * follower tells its leader, so that an entry counts as replicated only
 * when the leader's own messages proved the follower holds it.
 *
 * The defect it corrects (docs/DESIGN.md §7.1): libraft 0.15 answers an
 * AppendEntries with the index of its last stored entry, stale entries of
 * older terms included, and commits up to the leader's commit index over
 * such entries too. Raft's rule (Figure 2 of the Raft paper, "If
 * leaderCommit > commitIndex, set commitIndex = min(leaderCommit, index of
 * last new entry)"; and a successful reply proves the follower's log equal
 * to the leader's through prevLogIndex + the entries sent) is what the guard
 * restores, from outside the library:
 *
 *  1. An AppendEntries received: its leader_commit is lowered to
 *     prev_log_index + n_entries, the last index the message proves.
 *  2. An AppendEntries result sent with success: its last_log_index is
 *     lowered to the highest index the current term's leader proved and
 *     this follower accepted (an accepted AppendEntries: prev_log_index +
 *     n_entries; an accepted InstallSnapshot: its last_index). Accepted
 *     means libraft answered that message with success at once, or started
 *     writing its entries or snapshot while handling it.
 *
 * Lowering either number never lets libraft believe more than before; it
 * can only delay a commit until a message proves it, which the next
 * AppendEntries carrying entries does.
 *
 * It also drops, before libraft sees them, the messages no member sends
 * that break what libraft 0.15 asserts of its state (an AppendEntries or
 * InstallSnapshot at a leader's own term; a pre-vote granted at a term
 * above the one asked), and those whose term is more than
 * RAFT_GUARD_MAX_TERM_JUMP above this member's: docs/DESIGN.md §7.2. And
 * it does not send a message that has no address (libraft 0.15 answers
 * entries it finished writing to the leader it knew, whose address a newer
 * term may have cleared): the send fails as a lost connection would.
 * An AppendEntries whose entries begin inside this member's image is made
 * to begin after it when the leader's entry at the image's index has the
 * image's term (else dropped); one larger than the receivers' frame check
 * takes is sent with the entries that fit; and the commit index the
 * member's leader sent is noted (its lag).
 *
 * Threads: whatever libraft runs on (one loop); nothing here locks, but
 * leader_commit is read by other threads (atomic).
 */
#ifndef PC_RAFT_IO_GUARD_H
#define PC_RAFT_IO_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include <raft.h>

/* With pre-vote a term grows by one per election a quorum allowed, so no
 * honest member is this far ahead of another (16.7 million elections);
 * reaching the 2^62 ceiling of the frame check then takes 2^38 messages. */
#define RAFT_GUARD_MAX_TERM_JUMP ((raft_term)1 << 24)

typedef struct raft_io_guard {
    struct raft_io io;      /* what libraft is given (raft_init) */
    struct raft_io *inner;  /* the real I/O; its data points back here */
    raft_io_tick_cb tick;   /* libraft's callbacks, called with &io */
    raft_io_recv_cb recv;
    raft_io_close_cb closed;

    /* The highest index this follower holds as the leader of proved_term
     * proved it (0: nothing proved in that term yet). */
    raft_term proved_term;
    raft_index proved_index;

    /* The message libraft is handling now, between the two halves of the
     * recv trampoline. */
    bool handling;
    bool wrote;             /* libraft started an append or snapshot put for it */
    raft_term msg_term;
    raft_index msg_proves;
    raft_index msg_commit;  /* an AppendEntries' leader_commit, as sent */

    /* When each sender's last message passed (time_mono_ms), for the
     * admin's quorum check (raft_host_change): a few entries, the oldest
     * replaced. */
    struct { raft_id id; uint64_t ms; } heard[16];

    /* The commit index this member's leader last sent it (before
     * correction 1), noted once libraft accepted the message as its
     * current leader's: how far the group has gone, for the member's lag
     * (raft_io_guard_leader_commit; read by other threads). */
    raft_term leader_commit_term;
    _Atomic uint64_t leader_commit;

    /* The largest AppendEntries payload the receivers' frame check takes
     * (raft_frame.h; 0: no limit): libraft 0.15 sends a follower every
     * entry it misses in one message, and one above the limit would be
     * refused each time it is sent again. The guard sends the entries
     * that fit (at least one); the follower's answer brings the rest. */
    uint64_t max_append_bytes;
    uint64_t appends_cut;   /* AppendEntries sent with fewer entries so */

    /* Corrections made (metrics, tests). */
    uint64_t commits_lowered;
    uint64_t replies_lowered;
    uint64_t dropped;       /* messages no member sends, that libraft asserts on */
    uint64_t trimmed;       /* AppendEntries made to start after this member's image */
    uint64_t votes_held_until; /* time_mono_ms(): no vote asked of this member counts
                                  before it (raft_io_guard_hold_votes) */
    uint64_t votes_held;    /* requests for votes dropped so */

    /* Told, on the loop thread, before an append or a new term goes to
     * the I/O (term: the new one; 0 for an append): the host keeps what
     * its hellos say current with it (raft_host.c said_last_index). May
     * be NULL. */
    void (*grew)(void *arg, raft_term term);
    void *grew_arg;

    /* Told, on the loop thread, once a snapshot put (an image taken or
     * installed) finished and libraft's own callback ran: the host aims
     * its next image from there (raft_host.c images_follow). May be
     * NULL. libraft 0.15 has one put in flight at most (r->snapshot.put). */
    void (*imaged)(void *arg);
    void *imaged_arg;
    /* The put in flight, as the real I/O sees it (ours; its callback
     * calls libraft's with libraft's request). */
    struct raft_io_snapshot_put put;
    struct raft_io_snapshot_put *put_outer; /* libraft's; NULL: none in flight */
    raft_io_snapshot_put_cb put_cb;
} raft_io_guard;

/* Wrap inner: pass &g->io to raft_init, or swap it in for the io of an
 * already initialized raft (the fixture) before raft_start. g must stay
 * where it is until libraft closed it. */
void raft_io_guard_init(raft_io_guard *g, struct raft_io *inner);

/* Drop every request for a vote (or a pre-vote) that reaches this member
 * within ms from now: a member that starts knows no leader, and libraft
 * would grant at once a vote that a running member refuses while it
 * hears from its leader. Holding them for an election timeout keeps the
 * promise a leader's lease rests on (docs/DESIGN.md §7.4) across a
 * restart. Dropping a message is always safe for Raft. */
void raft_io_guard_hold_votes(raft_io_guard *g, uint64_t ms);

/* When a message from raft id last passed to libraft (time_mono_ms), 0:
 * not lately. */
uint64_t raft_io_guard_heard_ms(const raft_io_guard *g, raft_id id);
/* The highest commit index a leader told this member of (0: none yet);
 * any thread. */
uint64_t raft_io_guard_leader_commit(raft_io_guard *g);

#endif
