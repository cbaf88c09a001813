/*
 * test_raft_io_guard.c — the raft_io guard drops, before libraft reads
 * them, the messages no member sends on which libraft 0.15 would abort
 * given its state (docs/DESIGN.md §7.2): an AppendEntries or
 * InstallSnapshot at a leader's own term, a pre-vote granted at a term
 * above the one asked, a term far above its own. Everything else reaches
 * libraft unchanged. Sent: an AppendEntries larger than the receivers'
 * frame check takes goes with the entries that fit. Noted: the commit
 * index the member's leader sent (its lag). A snapshot put is answered
 * to libraft, then told to the host. The
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

/* ---- what the guard passes on ---- */

static unsigned sent_entries; /* n_entries of the last AppendEntries sent */

static int inner_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                      raft_io_send_cb cb)
{
    (void)io, (void)req, (void)cb;
    sent_entries = m->append_entries.n_entries;
    return 0;
}

/* A leader's AppendEntries of three 8-byte entries to a follower whose
 * frame check takes max bytes of entries in one: the guard sends those
 * that fit, at least one; libraft's own message is not changed. */
static void an_append_larger_than_the_frame_check_takes_is_cut(void **state)
{
    (void)state;
    rig x;
    rig_start(&x, RAFT_LEADER, 5);
    x.inner.send = inner_send;
    uint64_t words[3] = {1, 2, 3};
    struct raft_entry e[3];
    for (int i = 0; i < 3; i++)
        e[i] = (struct raft_entry){.term = 5, .type = RAFT_COMMAND,
                                   .buf = {.base = &words[i], .len = 8}};
    struct raft_message m = {.type = RAFT_IO_APPEND_ENTRIES, .server_id = 2,
                             .server_address = "127.0.0.2:9001"};
    m.append_entries = (struct raft_append_entries){.term = 5, .prev_log_index = 3,
                                                    .prev_log_term = 5, .leader_commit = 3,
                                                    .entries = e, .n_entries = 3};
    struct raft_io_send req;
    const struct { uint64_t max; unsigned sent; } cases[] = {{0, 3}, {24, 3}, {20, 2}, {16, 2},
                                                             {4, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        x.g.max_append_bytes = cases[i].max;
        sent_entries = 0;
        assert_int_equal(x.g.io.send(&x.g.io, &req, &m, NULL), 0);
        assert_int_equal(sent_entries, cases[i].sent);
        assert_int_equal(m.append_entries.n_entries, 3);
    }
    assert_int_equal(x.g.appends_cut, 3);
}

/* The lag's reference: the commit index the member's leader sent, noted
 * once libraft follows that leader in the message's term; a member that
 * is not its leader, or an older term, changes nothing; a new term's
 * leader replaces it. */
static void the_leaders_commit_index_is_noted(void **state)
{
    (void)state;
    rig x;
    rig_start(&x, RAFT_FOLLOWER, 5);
    x.r.follower_state.current_leader.id = 2;
    struct raft_message ae = append_entries(5);
    ae.append_entries.leader_commit = 9;
    guard_recv(&x.inner, &ae);
    assert_int_equal(raft_io_guard_leader_commit(&x.g), 9);
    ae = append_entries(5);
    ae.server_id = 3; /* not the leader this member follows */
    ae.append_entries.leader_commit = 1000;
    guard_recv(&x.inner, &ae);
    assert_int_equal(raft_io_guard_leader_commit(&x.g), 9);
    ae = append_entries(4); /* an older term */
    ae.append_entries.leader_commit = 1000;
    guard_recv(&x.inner, &ae);
    assert_int_equal(raft_io_guard_leader_commit(&x.g), 9);
    x.r.current_term = 6; /* as libraft would, on the new leader's message */
    x.r.follower_state.current_leader.id = 3;
    ae = append_entries(6);
    ae.server_id = 3;
    ae.append_entries.leader_commit = 7;
    guard_recv(&x.inner, &ae);
    assert_int_equal(raft_io_guard_leader_commit(&x.g), 7);
}

/* An AppendEntries of n entries after prev, terms given, from member 2,
 * one batch buffer for all (as libraft's decoder gives them). */
static struct raft_message append_n(raft_term term, raft_index prev, const raft_term *terms,
                                    unsigned n)
{
    struct raft_message m = {.type = RAFT_IO_APPEND_ENTRIES, .server_id = 2,
                             .server_address = "127.0.0.2:9001"};
    struct raft_entry *e = raft_calloc(n, sizeof *e);
    uint8_t *batch = raft_calloc(n, 8);
    assert_non_null(e);
    assert_non_null(batch);
    for (unsigned i = 0; i < n; i++)
        e[i] = (struct raft_entry){.term = terms[i], .type = RAFT_COMMAND,
                                   .buf = {.base = batch + 8 * i, .len = 8}, .batch = batch};
    m.append_entries = (struct raft_append_entries){.term = term, .prev_log_index = prev,
                                                    .prev_log_term = term, .leader_commit = prev,
                                                    .entries = e, .n_entries = n};
    return m;
}

/* The last AppendEntries libraft got: its header and its first entry's
 * bytes (the message is freed as libraft would). */
static struct raft_append_entries seen;
static void *seen_first;

static void raft_recv_keep(struct raft_io *io, struct raft_message *m)
{
    (void)io;
    delivered++;
    seen = m->append_entries;
    seen_first = seen.n_entries > 0 ? seen.entries[0].buf.base : NULL;
    if (m->append_entries.n_entries > 0)
        raft_free(m->append_entries.entries[0].batch);
    raft_free(m->append_entries.entries);
    seen.entries = NULL;
}

/* A member whose log starts right after its image (index 576, term 2)
 * gets entries that begin one before it, as a leader whose image send
 * failed sends them: made to start after the image if the leader's entry
 * at 576 has the image's term (a heartbeat at 576 when that is the only
 * one); otherwise, or when every entry is before the image's last,
 * dropped. */
static void entries_overlapping_the_image_are_trimmed_or_dropped(void **state)
{
    (void)state;
    rig x;
    rig_start(&x, RAFT_FOLLOWER, 2);
    x.g.recv = raft_recv_keep;
    x.r.log.offset = 576;
    x.r.log.snapshot.last_index = 576;
    x.r.log.snapshot.last_term = 2;
    const raft_term same[3] = {2, 2, 2}, other[3] = {1, 2, 2};
    struct raft_message m = append_n(2, 575, same, 3);
    uint8_t *second = m.append_entries.entries[1].buf.base;
    guard_recv(&x.inner, &m);
    assert_int_equal(delivered, 1);
    assert_int_equal(seen.prev_log_index, 576);
    assert_int_equal(seen.prev_log_term, 2);
    assert_int_equal(seen.n_entries, 2);
    assert_ptr_equal(seen_first, second);
    m = append_n(2, 575, same, 1); /* only the image's last entry: a heartbeat after it */
    guard_recv(&x.inner, &m);
    assert_int_equal(delivered, 2);
    assert_int_equal(seen.prev_log_index, 576);
    assert_int_equal(seen.prev_log_term, 2);
    assert_int_equal(seen.n_entries, 0);
    m = append_n(2, 575, other, 3); /* the leader's 576 is of term 1: not the image's */
    guard_recv(&x.inner, &m);
    m = append_n(2, 572, same, 3); /* all of them inside the image */
    guard_recv(&x.inner, &m);
    assert_int_equal(delivered, 2);
    assert_int_equal(x.g.dropped, 2);
    assert_int_equal(x.g.trimmed, 2);
    m = append_n(2, 576, same, 3); /* after the image: as it is */
    guard_recv(&x.inner, &m);
    assert_int_equal(delivered, 3);
    assert_int_equal(seen.prev_log_index, 576);
    assert_int_equal(seen.n_entries, 3);
    assert_int_equal(x.g.trimmed, 2);
}

/* ---- a snapshot put: libraft's callback, then the host's (imaged) ---- */

static struct raft_io_snapshot_put *inner_req; /* what the stand-in I/O was given */
static raft_io_snapshot_put_cb inner_cb;
static int inner_puts, inner_rv;

static int inner_snapshot_put(struct raft_io *io, unsigned trailing,
                              struct raft_io_snapshot_put *req,
                              const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
    (void)io, (void)trailing, (void)snapshot;
    inner_puts++;
    if (inner_rv != 0)
        return inner_rv;
    inner_req = req;
    inner_cb = cb;
    req->cb = cb; /* as libraft's libuv I/O does */
    return 0;
}

static struct raft_io_snapshot_put *done_req; /* what libraft's callback got */
static int done_status, done_calls, imaged_calls, imaged_after_done;

static void libraft_put_done(struct raft_io_snapshot_put *req, int status)
{
    done_req = req;
    done_status = status;
    done_calls++;
}

static void on_imaged(void *arg)
{
    (void)arg;
    imaged_calls++;
    imaged_after_done += done_calls > 0;
}

/* libraft's callback gets its own request and the status, then the host
 * hears (raft_host.c images_follow aims the next image from the index
 * libraft just recorded); a put the I/O refuses at once is answered by
 * no callback and leaves no put in flight; a second put while one is in
 * flight (libraft 0.15 makes none) is passed on as it is. */
static void a_snapshot_put_is_answered_then_told(void **state)
{
    (void)state;
    rig x;
    rig_start(&x, RAFT_FOLLOWER, 3);
    x.inner.snapshot_put = inner_snapshot_put;
    x.g.imaged = on_imaged;
    struct raft_snapshot snap = {.index = 40, .term = 3};
    struct raft_io_snapshot_put req = {0}, other = {0};
    inner_puts = inner_rv = done_calls = imaged_calls = imaged_after_done = 0;

    assert_int_equal(x.g.io.snapshot_put(&x.g.io, 10, &req, &snap, libraft_put_done), 0);
    assert_int_equal(inner_puts, 1);
    assert_ptr_not_equal(inner_req, &req); /* the guard's own request */
    /* A second one meanwhile goes through untouched, and is not told. */
    assert_int_equal(x.g.io.snapshot_put(&x.g.io, 10, &other, &snap, libraft_put_done), 0);
    assert_ptr_equal(inner_req, &other);
    inner_cb(inner_req, 0);
    assert_ptr_equal(done_req, &other);
    assert_int_equal(imaged_calls, 0);
    /* The first ends: libraft hears first, with its request and status. */
    struct raft_io_snapshot_put *first = x.g.put_outer != NULL ? &x.g.put : NULL;
    assert_non_null(first);
    x.g.put.cb(&x.g.put, RAFT_CANCELED);
    assert_ptr_equal(done_req, &req);
    assert_int_equal(done_status, RAFT_CANCELED);
    assert_int_equal(imaged_calls, 1);
    assert_int_equal(imaged_after_done, 1);
    assert_null(x.g.put_outer);

    /* Refused at once: no callback, nothing in flight, the next one told. */
    inner_rv = RAFT_NOMEM;
    assert_int_equal(x.g.io.snapshot_put(&x.g.io, 10, &req, &snap, libraft_put_done), RAFT_NOMEM);
    assert_null(x.g.put_outer);
    inner_rv = 0;
    done_calls = 0;
    assert_int_equal(x.g.io.snapshot_put(&x.g.io, 10, &req, &snap, libraft_put_done), 0);
    inner_cb(inner_req, 0);
    assert_int_equal(done_calls, 1);
    assert_int_equal(done_status, 0);
    assert_int_equal(imaged_calls, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_second_leader_in_the_leaders_term_is_dropped),
        cmocka_unit_test(a_snapshot_at_the_leaders_term_is_dropped),
        cmocka_unit_test(a_pre_vote_granted_beyond_the_term_asked_is_dropped),
        cmocka_unit_test(a_term_far_ahead_is_dropped),
        cmocka_unit_test(an_append_larger_than_the_frame_check_takes_is_cut),
        cmocka_unit_test(the_leaders_commit_index_is_noted),
        cmocka_unit_test(entries_overlapping_the_image_are_trimmed_or_dropped),
        cmocka_unit_test(a_snapshot_put_is_answered_then_told),
    };
    return cmocka_run_group_tests_name("raft_io guard: messages no member sends", tests, NULL,
                                       NULL);
}
