/*
 * raft_io_guard.c — see raft_io_guard.h: every raft_io method goes through
 * to the real I/O unchanged, except that received AppendEntries and sent
 * AppendEntries results are corrected to what the leader proved.
 */
#include "raft_io_guard.h"

#include <stdatomic.h>
#include <string.h>

#include "timeutil.h"

static raft_io_guard *guard_of(struct raft_io *inner)
{
    return inner->data;
}

/* An error from the real I/O: libraft reads the message from its own io. */
static int passed(raft_io_guard *g, int rv)
{
    if (rv != 0)
        memcpy(g->io.errmsg, g->inner->errmsg, sizeof(g->io.errmsg));
    return rv;
}

/* The follower holds the leader of term's log through index. Within one
 * term only that leader sends entries, and it never contradicts its own,
 * so what it proved stays proved until the term changes. */
static void note_proved(raft_io_guard *g, raft_term term, raft_index index)
{
    if (term > g->proved_term) {
        g->proved_term = term;
        g->proved_index = index;
    } else if (term == g->proved_term && index > g->proved_index) {
        g->proved_index = index;
    }
}

/* ---- the two corrections ---- */

static void on_tick(struct raft_io *inner)
{
    raft_io_guard *g = guard_of(inner);
    g->tick(&g->io);
}

/* Messages no member of a group sends, which break an invariant libraft
 * 0.15 only asserts given the receiver's state (Debian builds it with
 * NDEBUG: the assert is gone and libraft runs on; an AppendEntries at a
 * leader's own term overwrote its leader state and it crashed on its next
 * tick). Only this thread knows that state: the transport's frame check
 * cannot see them (docs/DESIGN.md §7.2). With peer TLS only a member's
 * certificate could send one; on loopback without TLS, any local process. */
static raft_term term_of(const struct raft_message *m)
{
    switch (m->type) {
    case RAFT_IO_APPEND_ENTRIES:
        return m->append_entries.term;
    case RAFT_IO_APPEND_ENTRIES_RESULT:
        return m->append_entries_result.term;
    case RAFT_IO_REQUEST_VOTE:
        return m->request_vote.term;
    case RAFT_IO_REQUEST_VOTE_RESULT:
        return m->request_vote_result.term;
    case RAFT_IO_INSTALL_SNAPSHOT:
        return m->install_snapshot.term;
    case RAFT_IO_TIMEOUT_NOW:
        return m->timeout_now.term;
    default:
        return 0;
    }
}

/* Entries that start inside this member's image, when its log starts
 * right after the image (a member that installed one, or started from
 * one): the first k are the image's last entries. If the last of those
 * has the image's last term, the leader's log and the image agree there
 * (Log Matching), and the message is made to start right after the
 * image, which libraft takes. Needed: a leader whose send of an image
 * failed probes from the image's index, not the one after
 * (progressToProbe), and would send these forever, every one dropped,
 * to a member that restarted with the image installed (a joining member
 * stuck for good: DESIGN §7.2). false: left as it is (impossible() drops
 * it when it still starts inside the image). */
static bool trim_to_image(const struct raft *r, struct raft_message *m)
{
    if (r == NULL || m->type != RAFT_IO_APPEND_ENTRIES || m->append_entries.n_entries == 0)
        return false;
    struct raft_append_entries *ae = &m->append_entries;
    raft_index image = r->log.snapshot.last_index;
    if (image == 0 || r->log.offset != image || ae->prev_log_index >= image)
        return false;
    raft_index k = image - ae->prev_log_index; /* entries at or before the image's index */
    if (k > ae->n_entries || ae->entries[k - 1].term != r->log.snapshot.last_term)
        return false; /* all of them inside the image (stale), or not the image's */
    if (k == ae->n_entries) {
        /* Every entry is the image's: a heartbeat at the image's index
         * (libraft frees the array, and a batch only when it has entries). */
        raft_free(ae->entries[0].batch);
        ae->n_entries = 0;
    } else {
        /* libraft frees entries[0].batch (one buffer for all) and the array. */
        memmove(ae->entries, ae->entries + k, (ae->n_entries - k) * sizeof ae->entries[0]);
        ae->n_entries -= (unsigned)k;
    }
    ae->prev_log_index = image;
    ae->prev_log_term = r->log.snapshot.last_term;
    return true;
}

static bool impossible(const struct raft *r, const struct raft_message *m)
{
    if (r == NULL)
        return false;
    /* With pre-vote a term grows by one per election a quorum allowed: no
     * member is RAFT_GUARD_MAX_TERM_JUMP terms ahead of another. A peer
     * that claims to be would otherwise push every member's term to the
     * frame check's ceiling, past which no election is possible. */
    if (term_of(m) > r->current_term + RAFT_GUARD_MAX_TERM_JUMP)
        return true;
    switch (m->type) {
    case RAFT_IO_APPEND_ENTRIES:
        /* A second leader in the leader's own term; or entries that start
         * inside this member's image. libraft reads the term of an index
         * its image replaced as 0 ("no entry there"), appends the entries
         * after its last one as if they began there, and its log no longer
         * says which entry has which index (an assert in its
         * replicationAppend; a NULL read in its entry reference table
         * without asserts). A leader never sends them: it walks back only
         * as far as the follower's commit index, and an image holds only
         * committed entries; a stale message from before the image is
         * already in it (DESIGN §7.2). */
        return (r->state == RAFT_LEADER && m->append_entries.term == r->current_term) ||
               (m->append_entries.n_entries > 0 &&
                m->append_entries.prev_log_index < r->log.offset);
    case RAFT_IO_INSTALL_SNAPSHOT:
        return r->state == RAFT_LEADER && m->install_snapshot.term == r->current_term;
    case RAFT_IO_REQUEST_VOTE_RESULT:
        /* A pre-vote asks at term + 1: granted at a later term it cannot be. */
        return r->state == RAFT_CANDIDATE && r->candidate_state.in_pre_vote &&
               m->request_vote_result.vote_granted &&
               m->request_vote_result.term > r->current_term + 1;
    default:
        return false;
    }
}

/* What libraft would have freed of a message it handled. */
static void drop(struct raft_message *m)
{
    if (m->type == RAFT_IO_APPEND_ENTRIES) {
        struct raft_append_entries *ae = &m->append_entries;
        if (ae->n_entries > 0 && ae->entries[0].batch != NULL)
            raft_free(ae->entries[0].batch);
        raft_free(ae->entries);
    } else if (m->type == RAFT_IO_INSTALL_SNAPSHOT) {
        raft_configuration_close(&m->install_snapshot.conf);
        raft_free(m->install_snapshot.data.base);
    }
}

static void note_heard(raft_io_guard *g, raft_id id)
{
    size_t n = sizeof g->heard / sizeof g->heard[0], at = 0;
    for (size_t i = 0; i < n; i++) {
        if (g->heard[i].id == id) {
            at = i;
            break;
        }
        if (g->heard[i].ms < g->heard[at].ms)
            at = i;
    }
    g->heard[at].id = id;
    g->heard[at].ms = time_mono_ms();
}

void raft_io_guard_hold_votes(raft_io_guard *g, uint64_t ms)
{
    g->votes_held_until = time_mono_ms() + ms;
}

uint64_t raft_io_guard_heard_ms(const raft_io_guard *g, raft_id id)
{
    for (size_t i = 0; i < sizeof g->heard / sizeof g->heard[0]; i++)
        if (g->heard[i].id == id)
            return g->heard[i].ms;
    return 0;
}

/* Before and after libraft handled an AppendEntries: from the leader it
 * follows, in its current term, the commit index it carried is how far
 * the group has gone (a message of another term, or from a member that is
 * not the leader, says nothing; after the call, a message that made this
 * member follow a new leader counts). */
static void note_leader_commit(raft_io_guard *g, raft_id from)
{
    const struct raft *r = g->io.data;
    if (r == NULL || r->state != RAFT_FOLLOWER || g->msg_term != r->current_term ||
        r->follower_state.current_leader.id != from)
        return;
    if (g->msg_term != g->leader_commit_term) {
        g->leader_commit_term = g->msg_term;
        atomic_store(&g->leader_commit, g->msg_commit); /* only this thread writes */
    } else if (g->msg_commit > atomic_load(&g->leader_commit)) {
        atomic_store(&g->leader_commit, g->msg_commit);
    }
}

uint64_t raft_io_guard_leader_commit(raft_io_guard *g)
{
    return atomic_load(&g->leader_commit);
}

static void on_recv(struct raft_io *inner, struct raft_message *m)
{
    raft_io_guard *g = guard_of(inner);
    bool trimmed = trim_to_image(g->io.data, m);
    if (impossible(g->io.data, m)) {
        g->dropped++;
        drop(m);
        return;
    }
    g->trimmed += trimmed;
    if (m->type == RAFT_IO_REQUEST_VOTE && g->votes_held_until != 0 &&
        time_mono_ms() < g->votes_held_until) {
        g->votes_held++;
        return;
    }
    note_heard(g, m->server_id);
    g->handling = true;
    g->wrote = false;
    g->msg_term = 0;
    if (m->type == RAFT_IO_APPEND_ENTRIES) {
        struct raft_append_entries *ae = &m->append_entries;
        g->msg_term = ae->term;
        g->msg_proves = ae->prev_log_index + ae->n_entries;
        g->msg_commit = ae->leader_commit;
        /* Correction 1: commit nothing this message does not prove held. */
        if (ae->leader_commit > g->msg_proves) {
            ae->leader_commit = g->msg_proves;
            g->commits_lowered++;
        }
    } else if (m->type == RAFT_IO_INSTALL_SNAPSHOT) {
        g->msg_term = m->install_snapshot.term;
        g->msg_proves = m->install_snapshot.last_index;
    }
    raft_id from = m->server_id;
    bool append = m->type == RAFT_IO_APPEND_ENTRIES;
    /* Noted before libraft too: a heartbeat that lets it commit a backlog
     * it holds applies that backlog inside this call (seconds, for a
     * member far behind), and its lag must show meanwhile. */
    if (append)
        note_leader_commit(g, from);
    g->recv(&g->io, m); /* m is libraft's now */
    /* Accepted and being written (the reply comes when the write ends). */
    if (g->msg_term != 0 && g->wrote)
        note_proved(g, g->msg_term, g->msg_proves);
    if (append)
        note_leader_commit(g, from);
    g->handling = false;
}

/* An AppendEntries with the entries that fit max_append_bytes (at least
 * one). libraft releases what it acquired by its own count; the
 * follower's answer says how far it got, and libraft sends the rest from
 * there (a pipelined leader that guessed further is corrected by the
 * follower's refusal, as after any lost message). */
static int send_append(raft_io_guard *g, struct raft_io_send *req, const struct raft_message *m,
                       raft_io_send_cb cb)
{
    const struct raft_append_entries *ae = &m->append_entries;
    uint64_t sum = 0;
    unsigned n = 0;
    while (n < ae->n_entries && (n == 0 || sum + ae->entries[n].buf.len <= g->max_append_bytes))
        sum += ae->entries[n++].buf.len;
    if (n == ae->n_entries)
        return passed(g, g->inner->send(g->inner, req, m, cb));
    struct raft_message fixed = *m; /* both I/Os copy or encode it at once */
    fixed.append_entries.n_entries = n;
    g->appends_cut++;
    return passed(g, g->inner->send(g->inner, req, &fixed, cb));
}

static int g_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                  raft_io_send_cb cb)
{
    raft_io_guard *g = io->impl;
    /* libraft 0.15 answers entries it finished writing to the leader it
     * knows then, whose address a newer term may have cleared meanwhile:
     * such a message has none, and the transport would read through NULL
     * (found by test_raft_peer_security's fuzz run). Nobody to send it to:
     * refused as a connection that failed, which libraft handles. */
    if (m->server_address == NULL)
        return RAFT_NOCONNECTION;
    if (m->type == RAFT_IO_APPEND_ENTRIES && g->max_append_bytes > 0)
        return send_append(g, req, m, cb);
    if (m->type != RAFT_IO_APPEND_ENTRIES_RESULT || m->append_entries_result.rejected != 0)
        return passed(g, g->inner->send(g->inner, req, m, cb));

    struct raft_message fixed = *m; /* both I/Os copy or encode it at once */
    struct raft_append_entries_result *res = &fixed.append_entries_result;
    /* A success sent while handling an AppendEntries or InstallSnapshot
     * answers that message: it was accepted. */
    if (g->handling && g->msg_term != 0 && res->term == g->msg_term)
        note_proved(g, g->msg_term, g->msg_proves);
    /* Correction 2: claim only what this term's leader proved. */
    raft_index proved = res->term == g->proved_term ? g->proved_index : 0;
    if (res->last_log_index > proved) {
        res->last_log_index = proved;
        g->replies_lowered++;
    }
    return passed(g, g->inner->send(g->inner, req, &fixed, cb));
}

/* ---- writes: noted, then passed through ---- */

static int g_append(struct raft_io *io, struct raft_io_append *req,
                    const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
    raft_io_guard *g = io->impl;
    g->wrote = g->wrote || g->handling;
    if (g->grew != NULL)
        g->grew(g->grew_arg, 0);
    return passed(g, g->inner->append(g->inner, req, entries, n, cb));
}

/* A put finished: libraft's callback first (it records a snapshot taken
 * in its log, or restores one installed), then the host's. */
static void g_put_done(struct raft_io_snapshot_put *put, int status)
{
    raft_io_guard *g = put->data;
    struct raft_io_snapshot_put *outer = g->put_outer;
    raft_io_snapshot_put_cb cb = g->put_cb;
    g->put_outer = NULL;
    cb(outer, status);
    if (g->imaged != NULL)
        g->imaged(g->imaged_arg);
}

static int g_snapshot_put(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
                          const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
    raft_io_guard *g = io->impl;
    g->wrote = g->wrote || g->handling;
    if (g->put_outer != NULL) /* not libraft 0.15's way: passed as it is, untold */
        return passed(g, g->inner->snapshot_put(g->inner, trailing, req, snapshot, cb));
    g->put.data = g;
    g->put_outer = req;
    g->put_cb = cb;
    req->cb = cb; /* as the real I/O would have set it (libraft 0.15 never reads it) */
    int rv = g->inner->snapshot_put(g->inner, trailing, &g->put, snapshot, g_put_done);
    if (rv != 0)
        g->put_outer = NULL;
    return passed(g, rv);
}

/* ---- everything else: passed through ---- */

static int g_init(struct raft_io *io, raft_id id, const char *address)
{
    raft_io_guard *g = io->impl;
    return passed(g, g->inner->init(g->inner, id, address));
}

static void on_closed(struct raft_io *inner)
{
    raft_io_guard *g = guard_of(inner);
    if (g->closed != NULL)
        g->closed(&g->io);
}

static void g_close(struct raft_io *io, raft_io_close_cb cb)
{
    raft_io_guard *g = io->impl;
    g->closed = cb;
    g->inner->close(g->inner, on_closed);
}

static int g_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                  struct raft_snapshot **snapshot, raft_index *start_index,
                  struct raft_entry *entries[], size_t *n_entries)
{
    raft_io_guard *g = io->impl;
    return passed(g, g->inner->load(g->inner, term, voted_for, snapshot, start_index, entries,
                                    n_entries));
}

static int g_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv)
{
    raft_io_guard *g = io->impl;
    g->tick = tick;
    g->recv = recv;
    return passed(g, g->inner->start(g->inner, msecs, on_tick, on_recv));
}

static int g_bootstrap(struct raft_io *io, const struct raft_configuration *conf)
{
    raft_io_guard *g = io->impl;
    return passed(g, g->inner->bootstrap(g->inner, conf));
}

static int g_recover(struct raft_io *io, const struct raft_configuration *conf)
{
    raft_io_guard *g = io->impl;
    return passed(g, g->inner->recover(g->inner, conf));
}

static int g_set_term(struct raft_io *io, raft_term term)
{
    raft_io_guard *g = io->impl;
    if (g->grew != NULL)
        g->grew(g->grew_arg, term);
    return passed(g, g->inner->set_term(g->inner, term));
}

static int g_set_vote(struct raft_io *io, raft_id server_id)
{
    raft_io_guard *g = io->impl;
    return passed(g, g->inner->set_vote(g->inner, server_id));
}

static int g_truncate(struct raft_io *io, raft_index index)
{
    raft_io_guard *g = io->impl;
    return passed(g, g->inner->truncate(g->inner, index));
}

static int g_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                          raft_io_snapshot_get_cb cb)
{
    raft_io_guard *g = io->impl;
    return passed(g, g->inner->snapshot_get(g->inner, req, cb));
}

static raft_time g_time(struct raft_io *io)
{
    raft_io_guard *g = io->impl;
    return g->inner->time(g->inner);
}

static int g_random(struct raft_io *io, int min, int max)
{
    raft_io_guard *g = io->impl;
    return g->inner->random(g->inner, min, max);
}

static int g_async_work(struct raft_io *io, struct raft_io_async_work *req,
                        raft_io_async_work_cb cb)
{
    raft_io_guard *g = io->impl;
    return passed(g, g->inner->async_work(g->inner, req, cb));
}

void raft_io_guard_init(raft_io_guard *g, struct raft_io *inner)
{
    memset(g, 0, sizeof(*g));
    g->inner = inner;
    inner->data = g;
    g->io.version = inner->version;
    g->io.impl = g;
    g->io.init = g_init;
    g->io.close = g_close;
    g->io.load = g_load;
    g->io.start = g_start;
    g->io.bootstrap = g_bootstrap;
    g->io.recover = g_recover;
    g->io.set_term = g_set_term;
    g->io.set_vote = g_set_vote;
    g->io.send = g_send;
    g->io.append = g_append;
    g->io.truncate = g_truncate;
    g->io.snapshot_put = g_snapshot_put;
    g->io.snapshot_get = g_snapshot_get;
    g->io.time = g_time;
    g->io.random = g_random;
    /* libraft 0.15's raft_uv_init says version 1 but does fill async_work,
     * the one field version 2 adds (src/uv.c); libraft takes asynchronous
     * snapshots only from a version 2 io with it: this one is, when the
     * inner io has it (the service's images, docs/DESIGN.md §4.10). */
    g->io.async_work = inner->async_work != NULL ? g_async_work : NULL;
    if (g->io.async_work != NULL && g->io.version < 2)
        g->io.version = 2;
}
