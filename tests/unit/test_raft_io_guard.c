/*
 * test_raft_io_guard.c — the raft_io guard drops, before libraft reads
 * them, the messages no member sends on which libraft 0.15 would abort
 * given its state (docs/DESIGN.md §7.2): an AppendEntries or
 * InstallSnapshot at a leader's own term, a pre-vote granted at a term
 * above the one asked, a term far above its own. Everything else reaches
 * libraft unchanged. The
 * guard sits on a stand-in I/O whose start hands the guard's receive
 * callback to the test; libraft's side is a stand-in struct raft (the
 * guard reads its state and term) and a receive callback that counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <string.h>

#include <raft.h>

#include "raft_io_guard.h"

static raft_io_recv_cb guard_recv; /* what the guard gave the inner I/O */
static int delivered;              /* messages libraft's callback got */

static int inner_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                       raft_io_recv_cb recv)
{
    (void)io, (void)msecs, (void)tick;
    guard_recv = recv;
    return 0;
}

static void raft_recv(struct raft_io *io, struct raft_message *m)
{
    (void)io;
    delivered++;
    if (m->type == RAFT_IO_APPEND_ENTRIES && m->append_entries.n_entries > 0) {
        raft_free(m->append_entries.entries[0].batch);
        raft_free(m->append_entries.entries);
    }
}

static void raft_tick(struct raft_io *io)
{
    (void)io;
}

typedef struct {
    struct raft_io inner;
    raft_io_guard g;
    struct raft r;
} rig;

static void rig_start(rig *x, unsigned short state, raft_term term)
{
    memset(x, 0, sizeof *x);
    x->inner.start = inner_start;
    raft_io_guard_init(&x->g, &x->inner);
    x->g.io.data = &x->r; /* raft_init sets it so */
    x->r.state = state;
    x->r.current_term = term;
    delivered = 0;
    assert_int_equal(x->g.io.start(&x->g.io, 100, raft_tick, raft_recv), 0);
    assert_non_null(guard_recv);
}

/* An AppendEntries with one 8-byte entry, allocated as libraft's decoder
 * does (the batch and the entries array are the receiver's to free). */
static struct raft_message append_entries(raft_term term)
{
    struct raft_message m = {.type = RAFT_IO_APPEND_ENTRIES, .server_id = 2,
                             .server_address = "127.0.0.2:9001"};
    struct raft_entry *e = raft_calloc(1, sizeof *e);
    assert_non_null(e);
    e->term = term;
    e->type = RAFT_COMMAND;
    e->buf.len = 8;
    e->buf.base = raft_calloc(1, 8);
    e->batch = e->buf.base;
    m.append_entries = (struct raft_append_entries){.term = term, .prev_log_index = 3,
                                                    .prev_log_term = term, .leader_commit = 3,
                                                    .entries = e, .n_entries = 1};
    return m;
}

static void a_second_leader_in_the_leaders_term_is_dropped(void **state)
{
    (void)state;
    rig x;
    rig_start(&x, RAFT_LEADER, 5);
    struct raft_message m = append_entries(5);
    guard_recv(&x.inner, &m);
    assert_int_equal(delivered, 0);
    assert_int_equal(x.g.dropped, 1);
    /* A later term deposes this leader: libraft must see it. */
    m = append_entries(6);
    guard_recv(&x.inner, &m);
    assert_int_equal(delivered, 1);
    /* A follower or candidate takes the leader of its term. */
    rig_start(&x, RAFT_FOLLOWER, 5);
    m = append_entries(5);
    guard_recv(&x.inner, &m);
    rig_start(&x, RAFT_CANDIDATE, 5);
    m = append_entries(5);
    guard_recv(&x.inner, &m);
    assert_int_equal(delivered, 1);
    assert_int_equal(x.g.dropped, 0);
}

static void a_snapshot_at_the_leaders_term_is_dropped(void **state)
{
    (void)state;
    rig x;
    rig_start(&x, RAFT_LEADER, 7);
    struct raft_message m = {.type = RAFT_IO_INSTALL_SNAPSHOT, .server_id = 2,
                             .server_address = "127.0.0.2:9001"};
    m.install_snapshot.term = 7;
    m.install_snapshot.last_index = 10;
    m.install_snapshot.last_term = 7;
    raft_configuration_init(&m.install_snapshot.conf);
    assert_int_equal(raft_configuration_add(&m.install_snapshot.conf, 1, "127.0.0.1:9001",
                                            RAFT_VOTER), 0);
    m.install_snapshot.data.len = 8;
    m.install_snapshot.data.base = raft_calloc(1, 8);
    guard_recv(&x.inner, &m); /* freed by the guard: ASan would tell a leak */
    assert_int_equal(delivered, 0);
    assert_int_equal(x.g.dropped, 1);
}

static void a_pre_vote_granted_beyond_the_term_asked_is_dropped(void **state)
{
    (void)state;
    rig x;
    rig_start(&x, RAFT_CANDIDATE, 4);
    x.r.candidate_state.in_pre_vote = true;
    struct raft_message m = {.type = RAFT_IO_REQUEST_VOTE_RESULT, .server_id = 3,
                             .server_address = "127.0.0.3:9001"};
    m.request_vote_result = (struct raft_request_vote_result){
        .term = 6, .vote_granted = true, .pre_vote = raft_tribool_true};
    guard_recv(&x.inner, &m);
    assert_int_equal(delivered, 0);
    /* Granted at the term asked (4 + 1), or refused at a later one: libraft's. */
    m.request_vote_result.term = 5;
    guard_recv(&x.inner, &m);
    m.request_vote_result.term = 9;
    m.request_vote_result.vote_granted = false;
    guard_recv(&x.inner, &m);
    assert_int_equal(delivered, 2);
    assert_int_equal(x.g.dropped, 1);
}

static void a_term_far_ahead_is_dropped(void **state)
{
    (void)state;
    rig x;
    rig_start(&x, RAFT_FOLLOWER, 5);
    struct raft_message m = {.type = RAFT_IO_TIMEOUT_NOW, .server_id = 2,
                             .server_address = "127.0.0.2:9001"};
    m.timeout_now.term = 5 + RAFT_GUARD_MAX_TERM_JUMP + 1;
    guard_recv(&x.inner, &m);
    m = (struct raft_message){.type = RAFT_IO_REQUEST_VOTE, .server_id = 2,
                              .server_address = "127.0.0.2:9001"};
    m.request_vote.term = (raft_term)1 << 52;
    m.request_vote.candidate_id = 2;
    guard_recv(&x.inner, &m);
    struct raft_message ae = append_entries((raft_term)1 << 40);
    guard_recv(&x.inner, &ae);
    assert_int_equal(delivered, 0);
    assert_int_equal(x.g.dropped, 3);
    /* A jump within the bound is an ordinary term change: libraft's. */
    m.request_vote.term = 5 + RAFT_GUARD_MAX_TERM_JUMP;
    guard_recv(&x.inner, &m);
    assert_int_equal(delivered, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_second_leader_in_the_leaders_term_is_dropped),
        cmocka_unit_test(a_snapshot_at_the_leaders_term_is_dropped),
        cmocka_unit_test(a_pre_vote_granted_beyond_the_term_asked_is_dropped),
        cmocka_unit_test(a_term_far_ahead_is_dropped),
    };
    return cmocka_run_group_tests_name("raft_io guard: messages no member sends", tests, NULL,
                                       NULL);
}
