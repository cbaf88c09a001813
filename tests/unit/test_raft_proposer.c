/*
 * The one proposer (common/raft_proposer.c), the real code both programs
 * run, driven on C Raft's in-memory fixture: three members on simulated
 * time, disk and network, each with the product's raft_io guard and a
 * proposer of its own, stepped between fixture steps as the programs'
 * loop steps it (common/raft_host.c: rp_step, then the owner takes what is
 * queued and proposes it with rp_apply). The state machine is a list: each
 * entry carries the ids of the requests it answers, and each member
 * records the ids it applied, in order.
 *
 * What the proposer promises (raft_proposer.h), each checked here:
 *  - every request it queued is answered exactly once (and one it refused
 *    never is);
 *  - a proposal answered RP_OK is applied on every member, exactly once;
 *    one answered RP_NOT_LEADER is applied nowhere (nothing was done);
 *  - a member proposes only once the first barrier of its term is
 *    applied, and every entry committed in an earlier term is applied on
 *    it by then (the rule of DESIGN §7.1 the programs' state machines
 *    rely on: the oracle's mark, the service's store);
 *  - a read answered RP_OK was answered by a member that had applied
 *    everything any member knew committed when the read was queued
 *    (DESIGN §9: linearizable reads); a read a member may make at once on
 *    the request's thread (rp_read_now, the lease the loop published)
 *    finds applied there every proposal answered RP_OK anywhere before
 *    it: it is ordered after every write acknowledged before it;
 *  - the refusals: a follower says not leader; a new leader before its
 *    barrier refuses (the service) or holds the request for it (the
 *    oracle); a stopping member refuses and fails what it holds; a request
 *    still queued at its deadline is taken out and answered unavailable.
 *
 * Environment: PROPOSER_SEED=<n> replays one random run (default: seeds
 * 1..PROPOSER_SEEDS, 12 unless set). Every failure names its seed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <raft.h>
#include <raft/fixture.h>

#include "log.h"
#include "fixture_raft.h"
#include "raft_io_guard.h"
#include "raft_proposer.h"

#define N 3
#define MAX_REQS 4096
#define MAX_APPLIED 8192
#define STEPS 3000
#define WAIT_MS 20000 /* simulated */
#define ULL(x) ((unsigned long long)(x))

typedef struct cluster cluster;

/* One client request, proposal or read, on one member. */
typedef struct {
    rp_wait base;        /* first: the proposer's part */
    cluster *c;
    uint64_t id;         /* a proposal's payload */
    unsigned member;
    rp_rc submitted;     /* what rp_submit said */
    unsigned answers;
    rp_rc rc;
    uint64_t commit_seen;/* a read: the highest commit index any member knew at submit */
    bool read_stale;     /* a read answered OK below commit_seen */
    uint64_t failures_submit, failures_answer; /* rp_failures of its member then */
} request;

typedef struct {
    struct raft_fsm fsm; /* first: the callbacks cast it back */
    cluster *c;
    unsigned i;
    uint64_t applied[MAX_APPLIED];
    size_t n_applied;
    bool has[MAX_REQS + 1]; /* by request id: applied here */
    unsigned missing;       /* proposals answered RP_OK not applied here */
} member;

struct cluster {
    struct raft_fixture f;
    raft_io_guard guard[N];
    member m[N];
    raft_proposer *p[N];
    request *reqs;
    unsigned n_reqs;
    char ctx[96];
    unsigned n_entries, n_ready_checks;
    unsigned stale;      /* a_stale_leader_answers_no_read: the old leader */
    bool acked[MAX_REQS + 1]; /* by request id: a proposal answered RP_OK */
    unsigned fast_reads; /* rp_read_now said yes (and was checked) */
    bool tag_terms;      /* proposals carry the term they were made in, as the service's */
};

/* ---- the state machine: an entry is the ids of its requests ---- */

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    member *m = (member *)fsm;
    *result = NULL;
    for (size_t off = 0; off + 8 <= buf->len && m->n_applied < MAX_APPLIED; off += 8) {
        uint64_t id;
        memcpy(&id, (const uint8_t *)buf->base + off, 8);
        m->applied[m->n_applied++] = id;
        if (id <= MAX_REQS && !m->has[id]) {
            m->has[id] = true;
            m->missing -= m->c->acked[id];
        }
    }
    return 0;
}

/* ---- the cluster ---- */

static struct raft *R(cluster *c, unsigned i)
{
    return raft_fixture_get(&c->f, i);
}

static uint64_t fixture_now_ms(void *arg)
{
    return (uint64_t)raft_fixture_time(&((cluster *)arg)->f);
}

/* lease_ms: reads under the leader's lease (0: every read takes a barrier;
 * the fixture's election timeout is 1,000 simulated ms, the product's
 * lease 4/5 of it). */
static cluster *cluster_new_lease(bool queue_unready, unsigned lease_ms)
{
    cluster *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->reqs = calloc(MAX_REQS, sizeof(*c->reqs));
    assert_non_null(c->reqs);
    assert_int_equal(raft_fixture_initialize(&c->f), 0);
    for (unsigned i = 0; i < N; i++) {
        member *m = &c->m[i];
        m->c = c;
        m->i = i;
        m->fsm.version = 1;
        m->fsm.data = m;
        m->fsm.apply = fsm_apply;
        assert_int_equal(raft_fixture_grow(&c->f, &m->fsm), 0);
        tl_fixture_guard(&c->f, i, &c->guard[i]); /* as in the product */
        raft_set_snapshot_threshold(R(c, i), 1000000); /* the list has no image */
        /* The fixture's raft ids are 1..N: member i is --raft-id i+1. */
        rp_config cfg = {.who = "test", .id = i + 1, .queue_unready = queue_unready,
                         .lease_ms = lease_ms, .now_ms = fixture_now_ms, .loop_arg = c};
        assert_non_null(c->p[i] = rp_new(&cfg));
    }
    tl_fixture_start(&c->f);
    return c;
}

static cluster *cluster_new(bool queue_unready)
{
    return cluster_new_lease(queue_unready, 0);
}

/* Stop every proposer, step it once (it fails what it holds queued), and
 * close libraft (it fails what it holds): every request is answered. */
static void cluster_close(cluster *c)
{
    for (unsigned i = 0; i < N; i++) {
        rp_stop(c->p[i]);
        assert_false(rp_step(c->p[i], R(c, i)));
    }
    raft_fixture_close(&c->f);
    for (unsigned i = 0; i < N; i++) {
        rp_free(c->p[i]);
        c->p[i] = NULL;
    }
}

static void cluster_free(cluster *c)
{
    if (c->p[0] != NULL)
        cluster_close(c);
    free(c->reqs);
    free(c);
}

/* ---- the programs' loop, per member ---- */

/* The highest index known committed whose entry is of a term before
 * member i's: Raft puts every such entry in the log of i before its
 * barrier. Read off the members whose term is not above i's (their commit
 * index came from leaders of i's term or earlier; a later leader may
 * commit old entries i never held). */
static uint64_t committed_before(cluster *c, unsigned i)
{
    raft_term t = R(c, i)->current_term;
    uint64_t top = 0;
    for (unsigned j = 0; j < N; j++) {
        struct raft *r = R(c, j);
        if (r->current_term > t)
            continue;
        for (raft_index k = r->commit_index; k > top; k--) {
            const struct raft_entry *e = tl_entry_at(r, k);
            if (e == NULL)
                break;
            if (e->term < t) {
                top = k;
                break;
            }
        }
    }
    return top;
}

/* Whether r's log holds a barrier of its current term below index k. */
static bool barrier_of_term_below(struct raft *r, raft_index k)
{
    for (raft_index x = k - 1; tl_entry_at(r, x) != NULL; x--) {
        const struct raft_entry *e = tl_entry_at(r, x);
        if (e->term != r->current_term)
            return false;
        if (e->type == RAFT_BARRIER)
            return true;
    }
    return false;
}

/* One step of member i's loop, as common/raft_host.c and the owners run
 * it: the proposer's step, then everything queued in one entry. */
static void drive(cluster *c, unsigned i)
{
    struct raft *r = R(c, i);
    if (!raft_fixture_alive(&c->f, i) || !rp_step(c->p[i], r))
        return;
    /* The first rule: ready means every earlier term's commit is applied. */
    uint64_t before = committed_before(c, i);
    c->n_ready_checks++;
    if (raft_last_applied(r) < before)
        fail_msg("%s: member %u ready in term %llu with %llu applied, below %llu committed "
                 "in an earlier term", c->ctx, i, ULL(r->current_term), ULL(raft_last_applied(r)),
                 ULL(before));
    rp_wait *list = rp_take(c->p[i], NULL, NULL);
    if (list == NULL)
        return;
    size_t n = 0;
    for (rp_wait *w = list; w != NULL; w = w->next)
        n++;
    struct raft_buffer buf = {.base = raft_malloc(8 * n), .len = 8 * n};
    assert_non_null(buf.base);
    size_t k = 0;
    for (rp_wait *w = list; w != NULL; w = w->next, k++)
        memcpy((uint8_t *)buf.base + 8 * k, &((request *)w)->id, 8);
    raft_index at = raft_last_index(r) + 1;
    if (rp_apply(c->p[i], r, list, &buf) == 0) {
        c->n_entries++;
        if (!barrier_of_term_below(r, at))
            fail_msg("%s: member %u proposed at %llu in term %llu with no barrier of that term "
                     "before it", c->ctx, i, ULL(at), ULL(r->current_term));
    }
}

static void drive_all(cluster *c)
{
    for (unsigned i = 0; i < N; i++)
        drive(c, i);
}

static void on_answer(rp_wait *w, rp_rc rc)
{
    request *q = (request *)w;
    q->answers++;
    q->rc = rc;
    cluster *c = q->c;
    q->failures_answer = rp_failures(c->p[q->member]);
    if (!w->read && rc == RP_OK && !c->acked[q->id]) {
        c->acked[q->id] = true;
        for (unsigned i = 0; i < N; i++)
            c->m[i].missing += !c->m[i].has[q->id];
    }
    if (w->read && rc == RP_OK && raft_last_applied(R(q->c, q->member)) < q->commit_seen)
        q->read_stale = true;
}

static request *submit(cluster *c, unsigned i, bool read)
{
    assert_true(c->n_reqs < MAX_REQS);
    request *q = &c->reqs[c->n_reqs++];
    q->c = c;
    q->id = c->n_reqs; /* 1.. */
    q->member = i;
    q->base.read = read;
    q->base.done = on_answer;
    if (c->tag_terms && !read) { /* as svc_write_begin: the term it was computed in */
        rp_status st;
        rp_get_status(c->p[i], &st);
        q->base.term = st.ready_term != 0 ? st.ready_term : RP_TERM_NONE;
    }
    for (unsigned j = 0; j < N; j++)
        if (R(c, j)->commit_index > q->commit_seen)
            q->commit_seen = R(c, j)->commit_index;
    q->failures_submit = rp_failures(c->p[i]);
    q->submitted = rp_submit(c->p[i], &q->base);
    return q;
}

static void step(cluster *c)
{
    drive_all(c);
    raft_fixture_step(&c->f);
}

/* A read on member i's request thread, as the service's event thread
 * makes it: when rp_read_now lets it go at once, every proposal answered
 * RP_OK so far must be applied there. */
static void read_now(cluster *c, unsigned i)
{
    if (!rp_read_now(c->p[i]))
        return;
    c->fast_reads++;
    if (c->m[i].missing != 0)
        fail_msg("%s: member %u read at once with %u acknowledged proposals not applied there "
                 "(term %llu, applied %llu)", c->ctx, i, c->m[i].missing,
                 ULL(R(c, i)->current_term), ULL(raft_last_applied(R(c, i))));
}

static bool has_ready_leader(struct raft_fixture *f, void *arg)
{
    cluster *c = arg;
    drive_all(c);
    unsigned l = raft_fixture_leader_index(f);
    return l < N && rp_ready(c->p[l], R(c, l));
}

static unsigned ready_leader(cluster *c)
{
    assert_true(raft_fixture_step_until(&c->f, has_ready_leader, c, WAIT_MS));
    return raft_fixture_leader_index(&c->f);
}

static bool answered(struct raft_fixture *f, void *arg)
{
    (void)f;
    request *q = arg;
    drive_all(q->c);
    return q->answers > 0;
}

static void wait_answer(cluster *c, request *q)
{
    assert_true(raft_fixture_step_until(&c->f, answered, q, WAIT_MS));
}

static size_t count_applied(const member *m, uint64_t id)
{
    size_t k = 0;
    for (size_t x = 0; x < m->n_applied; x++)
        k += m->applied[x] == id;
    return k;
}

/* ---- tests ---- */

/* A follower refuses (not leader); the leader, once its barrier is
 * applied, commits a proposal everywhere and answers a read. */
static void a_ready_leader_commits_and_a_follower_refuses(void **state)
{
    (void)state;
    cluster *c = cluster_new(false);
    snprintf(c->ctx, sizeof c->ctx, "basic");
    unsigned l = ready_leader(c), f = (l + 1) % N;
    request *no = submit(c, f, false);
    assert_int_equal(no->submitted, RP_NOT_LEADER);
    request *w = submit(c, l, false), *rd = submit(c, l, true);
    assert_int_equal(w->submitted, RP_OK);
    assert_int_equal(rd->submitted, RP_OK);
    wait_answer(c, w);
    wait_answer(c, rd);
    assert_int_equal(w->rc, RP_OK);
    assert_int_equal(rd->rc, RP_OK);
    assert_false(rd->read_stale);
    assert_true(raft_fixture_step_until_applied(&c->f, N, raft_last_index(R(c, l)), WAIT_MS));
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(count_applied(&c->m[i], w->id), 1);
        assert_int_equal(count_applied(&c->m[i], no->id), 0);
    }
    cluster_free(c);
}

/* Before its barrier is applied a new leader refuses (the service's
 * setting) or holds a proposal for it (the oracle's), and answers it once
 * the barrier is applied. */
static void a_new_leader_refuses_or_holds_until_its_barrier(void **state)
{
    (void)state;
    for (int unready = 0; unready <= 1; unready++) {
        cluster *c = cluster_new(unready);
        snprintf(c->ctx, sizeof c->ctx, "new leader, queue_unready %d", unready);
        raft_fixture_elect(&c->f, 0);
        assert_false(rp_step(c->p[0], R(c, 0))); /* appends the barrier: not ready */
        request *q = submit(c, 0, false);
        request *rd = submit(c, 0, true);
        assert_int_equal(q->submitted, unready ? RP_OK : RP_UNAVAILABLE);
        assert_int_equal(rd->submitted, RP_UNAVAILABLE); /* reads are never held */
        if (unready) {
            wait_answer(c, q);
            assert_int_equal(q->rc, RP_OK);
            assert_true(raft_fixture_step_until_applied(&c->f, N, raft_last_index(R(c, 0)),
                                                        WAIT_MS));
            assert_int_equal(count_applied(&c->m[1], q->id), 1);
        }
        assert_int_equal(q->answers, 0 + unready);
        cluster_free(c);
    }
}

/* A request still queued at its deadline is taken out and answered
 * unavailable; one queued when the member stops is failed, and a stopped
 * member refuses. */
static void a_deadline_and_a_stop_answer_what_is_queued(void **state)
{
    (void)state;
    cluster *c = cluster_new(false);
    snprintf(c->ctx, sizeof c->ctx, "deadline and stop");
    unsigned l = ready_leader(c);
    rp_wait w = {.read = false};
    /* Nobody steps the loop: the request stays queued past 30 ms. */
    assert_int_equal(rp_wait_for(c->p[l], &w, 30), RP_UNAVAILABLE);
    assert_true(rp_step(c->p[l], R(c, l)));
    assert_null(rp_take(c->p[l], NULL, NULL)); /* it was taken out of the queue */

    request *q = submit(c, l, false);
    assert_int_equal(q->submitted, RP_OK);
    rp_stop(c->p[l]);
    assert_int_equal(submit(c, l, false)->submitted, RP_UNAVAILABLE);
    assert_false(rp_step(c->p[l], R(c, l)));
    assert_false(rp_ready(c->p[l], R(c, l)));
    assert_int_equal(q->answers, 1);
    assert_int_equal(q->rc, RP_UNAVAILABLE);
    cluster_free(c);
}

static void cut_off(cluster *c, unsigned i, bool cut)
{
    for (unsigned j = 0; j < N; j++)
        if (j != i) {
            (cut ? raft_fixture_saturate : raft_fixture_desaturate)(&c->f, i, j);
            (cut ? raft_fixture_saturate : raft_fixture_desaturate)(&c->f, j, i);
        }
}

static bool ready_leader_other_than(struct raft_fixture *f, void *arg)
{
    (void)f;
    cluster *c = arg;
    drive_all(c); /* the old leader is paused: drive() passes it by */
    for (unsigned i = 0; i < N; i++)
        if (i != c->stale && rp_ready(c->p[i], R(c, i)))
            return true;
    return false;
}

/* A leader cut off from the others, while they elect another leader and
 * commit more, still believes it leads: a read it is asked must not be
 * answered from its stale state (the second rule). */
static void stale_leader_reads(unsigned lease_ms)
{
    cluster *c = cluster_new_lease(false, lease_ms);
    snprintf(c->ctx, sizeof c->ctx, "stale leader");
    unsigned old = c->stale = ready_leader(c);
    cut_off(c, old, true);
    raft_fixture_kill(&c->f, old); /* paused: it neither ticks nor steps down */
    assert_true(raft_fixture_step_until(&c->f, ready_leader_other_than, c, WAIT_MS));
    unsigned l = (old + 1) % N;
    if (!rp_ready(c->p[l], R(c, l)))
        l = (old + 2) % N;
    request *w = submit(c, l, false);
    wait_answer(c, w);
    assert_int_equal(w->rc, RP_OK);
    raft_fixture_revive(&c->f, old);
    cut_off(c, old, true); /* revive joined its links again */
    assert_int_equal(raft_state(R(c, old)), RAFT_LEADER);
    request *rd = submit(c, old, true);
    assert_int_equal(rd->submitted, RP_OK);
    assert_true(rd->commit_seen > raft_last_applied(R(c, old)));
    wait_answer(c, rd);
    assert_false(rd->read_stale);
    assert_int_not_equal(rd->rc, RP_OK);
    cluster_free(c);
}

static void a_stale_leader_answers_no_read(void **state)
{
    (void)state;
    stale_leader_reads(0);
    stale_leader_reads(800); /* its lease ran out while the others elected */
}

/* Under its lease a leader answers a read at once, with no barrier (no
 * entry appended), and it sees the write committed just before; so does
 * a request thread of its own (rp_read_now) until a transfer ends the
 * lease. */
static void a_leader_under_its_lease_reads_without_a_round(void **state)
{
    (void)state;
    cluster *c = cluster_new_lease(false, 800);
    snprintf(c->ctx, sizeof c->ctx, "lease read");
    unsigned l = ready_leader(c);
    request *w = submit(c, l, false);
    wait_answer(c, w); /* its commit renews the lease */
    assert_int_equal(w->rc, RP_OK);
    raft_index last = raft_last_index(R(c, l));
    request *rd = submit(c, l, true);
    assert_true(rp_step(c->p[l], R(c, l)));
    assert_int_equal(rd->answers, 1);
    assert_int_equal(rd->rc, RP_OK);
    assert_false(rd->read_stale);
    assert_int_equal(raft_last_index(R(c, l)), last); /* no barrier */
    assert_int_equal(rp_lease_reads(c->p[l]), 1);
    /* The step published the lease: a request thread reads at once too;
     * a follower's never does. */
    assert_true(rp_read_now(c->p[l]));
    assert_int_equal(rp_lease_reads(c->p[l]), 2);
    assert_false(rp_read_now(c->p[(l + 1) % N]));
    /* A transfer ends the lease for the rest of the term, on the request
     * threads at once. */
    rp_end_lease(c->p[l], R(c, l));
    assert_false(rp_read_now(c->p[l]));
    request *rd2 = submit(c, l, true);
    assert_true(rp_step(c->p[l], R(c, l)));
    assert_int_equal(rd2->answers, 0); /* waits for a barrier */
    wait_answer(c, rd2);
    assert_int_equal(rd2->rc, RP_OK);
    assert_true(raft_last_index(R(c, l)) > last);
    assert_int_equal(rp_lease_reads(c->p[l]), 2);
    assert_false(rp_read_now(c->p[l]));
    cluster_free(c);
}

/* Reads queued while a read barrier is in flight wait for the next one:
 * the one in flight may have been appended before they came (the second
 * rule), so they are answered strictly after the reads it serves. */
static void a_read_waits_for_a_barrier_appended_after_it(void **state)
{
    (void)state;
    cluster *c = cluster_new(false);
    snprintf(c->ctx, sizeof c->ctx, "read after read");
    unsigned l = ready_leader(c);
    request *a = submit(c, l, true);
    assert_true(rp_step(c->p[l], R(c, l))); /* a's barrier is appended */
    request *b = submit(c, l, true);
    assert_true(rp_step(c->p[l], R(c, l))); /* b waits: a barrier is in flight */
    assert_int_equal(a->answers + b->answers, 0);
    wait_answer(c, a);
    assert_int_equal(a->rc, RP_OK);
    assert_int_equal(b->answers, 0); /* not served by a's barrier */
    wait_answer(c, b);
    assert_int_equal(b->rc, RP_OK);
    cluster_free(c);
}

/* A leader deposed with proposals queued fails them at its next step:
 * never proposed, so "not leader", and applied nowhere. */
static void a_deposed_leader_fails_its_queue(void **state)
{
    (void)state;
    cluster *c = cluster_new(false);
    snprintf(c->ctx, sizeof c->ctx, "deposed");
    unsigned l = ready_leader(c);
    request *q = submit(c, l, false);
    assert_int_equal(q->submitted, RP_OK);
    raft_fixture_depose(&c->f); /* steps the fixture, not our loops */
    assert_int_not_equal(raft_state(R(c, l)), RAFT_LEADER);
    assert_int_equal(q->answers, 0);
    assert_false(rp_step(c->p[l], R(c, l)));
    assert_int_equal(q->answers, 1);
    assert_int_equal(q->rc, RP_NOT_LEADER);
    unsigned l2 = ready_leader(c);
    request *w = submit(c, l2, false);
    wait_answer(c, w);
    assert_true(raft_fixture_step_until_applied(&c->f, N, raft_last_index(R(c, l2)), WAIT_MS));
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(count_applied(&c->m[i], q->id), 0);
    cluster_free(c);
}

/* A proposal computed in one term is proposed in it or not at all: a
 * member that lost the lead and won it back (its loop never ran between)
 * fails what it queued in the older term once its new barrier is in. */
static void a_proposal_of_an_earlier_term_is_never_proposed(void **state)
{
    (void)state;
    cluster *c = cluster_new(false);
    c->tag_terms = true;
    snprintf(c->ctx, sizeof c->ctx, "earlier term");
    unsigned l = ready_leader(c);
    raft_term t = R(c, l)->current_term;
    request *q = submit(c, l, false);
    assert_int_equal(q->submitted, RP_OK);
    raft_fixture_depose(&c->f);
    for (unsigned i = 0; i < N; i++) /* raft_fixture_elect's precondition */
        assert_int_equal(raft_state(R(c, i)), RAFT_FOLLOWER);
    raft_fixture_elect(&c->f, l); /* the same member, a later term */
    assert_true(R(c, l)->current_term > t);
    assert_int_equal(q->answers, 0);
    assert_int_equal(ready_leader(c), l);
    assert_int_equal(q->answers, 1);
    assert_int_equal(q->rc, RP_NOT_LEADER);
    /* One made in the old term and submitted now is refused at once. */
    request *late = &c->reqs[c->n_reqs++];
    late->c = c;
    late->base.done = on_answer;
    late->base.term = t;
    assert_int_equal(rp_submit(c->p[l], &late->base), RP_NOT_LEADER);
    request *w = submit(c, l, false);
    wait_answer(c, w);
    assert_int_equal(w->rc, RP_OK);
    assert_true(raft_fixture_step_until_applied(&c->f, N, raft_last_index(R(c, l)), WAIT_MS));
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(count_applied(&c->m[i], q->id), 0);
        assert_int_equal(count_applied(&c->m[i], w->id), 1);
    }
    cluster_free(c);
}

/* The oracle's window: rp_take hands out queued proposals from the head
 * while they fit, and leaves the rest queued in order. */
typedef struct {
    rp_wait base;
    unsigned count;
} sized;

static bool fits_budget(void *arg, const rp_wait *w)
{
    unsigned *left = arg;
    unsigned n = ((const sized *)w)->count;
    if (n > *left)
        return false;
    *left -= n;
    return true;
}

static void on_sized(rp_wait *w, rp_rc rc)
{
    (void)w;
    (void)rc;
}

static void take_stops_at_the_first_that_does_not_fit(void **state)
{
    (void)state;
    cluster *c = cluster_new(true);
    unsigned l = ready_leader(c);
    sized s[4] = {{.count = 3}, {.count = 4}, {.count = 2}, {.count = 1}};
    for (int k = 0; k < 4; k++) {
        s[k].base.done = on_sized;
        assert_int_equal(rp_submit(c->p[l], &s[k].base), RP_OK);
    }
    unsigned left = 8; /* 3 and 4 fit; 2 does not; 1 would, but order is kept */
    rp_wait *got = rp_take(c->p[l], fits_budget, &left);
    assert_ptr_equal(got, &s[0].base);
    assert_ptr_equal(got->next, &s[1].base);
    assert_null(got->next->next);
    rp_finish(c->p[l], got, RP_OK);
    rp_wait *rest = rp_take(c->p[l], NULL, NULL);
    assert_ptr_equal(rest, &s[2].base);
    assert_ptr_equal(rest->next, &s[3].base);
    rp_finish(c->p[l], rest, RP_UNAVAILABLE);
    for (int k = 0; k < 4; k++)
        assert_true(s[k].base.answered);
    cluster_free(c);
}

/* Two kinds of proposal share the queue (the oracle's timestamps and its
 * placement driver's commands): rp_take_kind passes the other kind over,
 * which stays queued in order, and stops at the first of its own kind
 * that does not fit. */
static void take_kind_passes_the_other_kind_over(void **state)
{
    (void)state;
    cluster *c = cluster_new(true);
    unsigned l = ready_leader(c);
    sized s[5] = {{.count = 1}, {.count = 1}, {.count = 1}, {.count = 9}, {.count = 1}};
    unsigned kinds[5] = {1, 0, 1, 0, 0};
    for (int k = 0; k < 5; k++) {
        s[k].base.done = on_sized;
        s[k].base.kind = kinds[k];
        assert_int_equal(rp_submit(c->p[l], &s[k].base), RP_OK);
    }
    unsigned left = 8; /* kind 0: 1 fits, 9 does not, so the last 1 stays too */
    rp_wait *got = rp_take_kind(c->p[l], 0, fits_budget, &left);
    assert_ptr_equal(got, &s[1].base);
    assert_null(got->next);
    rp_finish(c->p[l], got, RP_OK);
    rp_wait *ones = rp_take_kind(c->p[l], 1, NULL, NULL);
    assert_ptr_equal(ones, &s[0].base);
    assert_ptr_equal(ones->next, &s[2].base);
    assert_null(ones->next->next);
    rp_finish(c->p[l], ones, RP_OK);
    rp_wait *rest = rp_take(c->p[l], NULL, NULL);
    assert_ptr_equal(rest, &s[3].base);
    assert_ptr_equal(rest->next, &s[4].base);
    rp_finish(c->p[l], rest, RP_UNAVAILABLE);
    for (int k = 0; k < 5; k++)
        assert_true(s[k].base.answered);
    cluster_free(c);
}

/* A wait taken by the loop has no deadline any more: its thread waits
 * for the answer, however late (a write may be committed). */
typedef struct {
    raft_proposer *p;
    rp_wait w;
    rp_rc rc;
} waiter;

static void *wait_briefly(void *arg)
{
    waiter *x = arg;
    x->rc = rp_wait_for(x->p, &x->w, 50);
    return NULL;
}

static void a_taken_wait_outlives_its_deadline(void **state)
{
    (void)state;
    cluster *c = cluster_new(false);
    unsigned l = ready_leader(c);
    waiter x = {.p = c->p[l], .rc = RP_UNAVAILABLE};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_briefly, &x), 0);
    rp_wait *got = NULL;
    for (int k = 0; k < 5000 && got == NULL; k++) { /* until it is queued (5 s at most) */
        got = rp_take(c->p[l], NULL, NULL);
        if (got == NULL)
            usleep(1000);
    }
    assert_ptr_equal(got, &x.w);
    usleep(200 * 1000); /* four times its deadline */
    rp_finish(c->p[l], got, RP_OK);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(x.rc, RP_OK);
    cluster_free(c);
}

static uint64_t rnd(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static bool all_applied(struct raft_fixture *f, void *arg)
{
    cluster *c = arg;
    drive_all(c);
    unsigned l = raft_fixture_leader_index(f);
    if (l >= N || !rp_ready(c->p[l], R(c, l)))
        return false;
    for (unsigned i = 0; i < N; i++)
        if (raft_last_applied(R(c, i)) < raft_last_index(R(c, l)))
            return false;
    return true;
}

/* Random requests on random members under deposals, pauses and cut links;
 * then heal, commit one more proposal, and check every request's answer
 * against what every member applied. */
static void run_seed(unsigned long long seed)
{
    /* Both settings, with and without lease reads. */
    cluster *c = cluster_new_lease(seed % 2 == 0, seed % 4 >= 2 ? 800 : 0);
    c->tag_terms = seed % 2 == 1;             /* the service's */
    snprintf(c->ctx, sizeof c->ctx, "seed %llu (PROPOSER_SEED=%llu)", seed, seed);
    uint64_t s = seed;
    bool cut[N][N] = {{false}};
    unsigned n_depose = 0, n_kill = 0, n_cut = 0;
    for (unsigned k = 0; k < STEPS && c->n_reqs < MAX_REQS - 16; k++) {
        unsigned r = (unsigned)(rnd(&s) % 1000), i = (unsigned)(rnd(&s) % N);
        unsigned j = (i + 1 + (unsigned)(rnd(&s) % (N - 1))) % N, dead = 0;
        for (unsigned x = 0; x < N; x++)
            dead += !raft_fixture_alive(&c->f, x);
        if (r < 150) { /* mostly to whoever leads, as clients are sent there */
            unsigned l = raft_fixture_leader_index(&c->f);
            if (l < N && r % 4 != 0)
                i = l;
            if (raft_fixture_alive(&c->f, i))
                submit(c, i, r < 40);
        } else if (r < 153 && dead == 0) {
            unsigned l = raft_fixture_leader_index(&c->f);
            bool ok = l < N; /* raft_fixture_depose's precondition */
            for (unsigned x = 0; ok && x < N; x++)
                ok = x == l || raft_state(R(c, x)) == RAFT_FOLLOWER;
            if (ok) {
                raft_fixture_depose(&c->f);
                n_depose++;
            }
        } else if (r < 157 && dead == 0) {
            raft_fixture_kill(&c->f, i);
            n_kill++;
        } else if (r < 170 && !raft_fixture_alive(&c->f, i)) {
            raft_fixture_revive(&c->f, i);
        } else if (r < 176) {
            cut[i][j] = cut[j][i] = true;
            n_cut++;
        } else if (r < 190) {
            cut[i][j] = cut[j][i] = false;
        }
        for (unsigned x = 0; x < N; x++) /* kill and revive rewrite links: our model wins */
            for (unsigned y = 0; y < N; y++) {
                bool down = cut[x][y] || !raft_fixture_alive(&c->f, x) ||
                            !raft_fixture_alive(&c->f, y);
                if (x != y && down != raft_fixture_saturated(&c->f, x, y))
                    (down ? raft_fixture_saturate : raft_fixture_desaturate)(&c->f, x, y);
            }
        step(c);
        for (unsigned x = 0; x < N; x++)
            read_now(c, x); /* paused members' threads run too */
    }
    /* Heal, and commit a proposal of the final leader's term: every member
     * then applies the whole log. */
    for (unsigned i = 0; i < N; i++) {
        if (!raft_fixture_alive(&c->f, i))
            raft_fixture_revive(&c->f, i);
        for (unsigned j = 0; j < N; j++)
            if (i != j)
                raft_fixture_desaturate(&c->f, i, j);
    }
    request *last = NULL;
    for (unsigned tries = 0; tries < 10 && (last == NULL || last->rc != RP_OK); tries++) {
        last = submit(c, ready_leader(c), false);
        if (last->submitted == RP_OK)
            wait_answer(c, last);
    }
    if (last->rc != RP_OK)
        fail_msg("%s: nothing committed after healing, 10 tries", c->ctx);
    if (!raft_fixture_step_until(&c->f, all_applied, c, WAIT_MS))
        fail_msg("%s: not every member applied the leader's whole log", c->ctx);

    unsigned ok = 0, refused = 0, lost = 0, not_leader = 0, reads = 0, lease_reads = 0;
    unsigned failed_yet_committed = 0;
    for (unsigned i = 0; i < N; i++)
        lease_reads += (unsigned)rp_lease_reads(c->p[i]);
    for (unsigned i = 1; i < N; i++)
        if (c->m[i].n_applied != c->m[0].n_applied ||
            memcmp(c->m[i].applied, c->m[0].applied, c->m[0].n_applied * 8) != 0)
            fail_msg("%s: members 0 and %u applied different lists", c->ctx, i);
    cluster_close(c); /* fails what is still queued or in flight: all answered */
    for (unsigned k = 0; k < c->n_reqs; k++) {
        const request *q = &c->reqs[k];
        size_t times = count_applied(&c->m[0], q->id);
        if (q->submitted != RP_OK) {
            refused++;
            if (q->answers != 0 || (!q->base.read && times != 0))
                fail_msg("%s: request %u refused (%d) yet answered %u times, applied %zu", c->ctx,
                         k, (int)q->submitted, q->answers, times);
            continue;
        }
        if (q->answers != 1)
            fail_msg("%s: request %u answered %u times", c->ctx, k, q->answers);
        if (q->base.read) {
            reads++;
            if (q->read_stale)
                fail_msg("%s: read %u answered OK below what was committed when it came", c->ctx,
                         k);
            continue;
        }
        if (q->rc == RP_OK && times != 1)
            fail_msg("%s: proposal %u answered OK, applied %zu times", c->ctx, k, times);
        if (q->rc == RP_NOT_LEADER && times != 0)
            fail_msg("%s: proposal %u answered not leader, yet applied", c->ctx, k);
        if (times > 1)
            fail_msg("%s: proposal %u applied %zu times", c->ctx, k, times);
        /* A proposal whose writer heard it failed, but which a later leader
         * committed: its member's failure count moved before the answer, so
         * that a read fenced before then fences again (svc_read_epoch) and
         * cannot read past the commits in flight its writer let go. */
        if (q->rc != RP_OK && times == 1) {
            failed_yet_committed++;
            if (q->failures_answer <= q->failures_submit)
                fail_msg("%s: proposal %u answered %d, committed later, with no failure "
                         "counted before its answer", c->ctx, k, (int)q->rc);
        }
        ok += q->rc == RP_OK;
        lost += q->rc == RP_UNAVAILABLE;
        not_leader += q->rc == RP_NOT_LEADER;
    }
    print_message("proposer seed %llu: %u requests (%u reads, %u under a lease, %u more at once "
                  "on their thread): %u proposals committed, %u "
                  "unavailable (%u of them committed later), %u not leader, %u refused at once; "
                  "%u entries, %u ready checks, %u deposals, %u pauses, %u cuts\n",
                  seed, c->n_reqs, reads, lease_reads - c->fast_reads, c->fast_reads, ok, lost,
                  failed_yet_committed, not_leader, refused, c->n_entries, c->n_ready_checks,
                  n_depose, n_kill, n_cut);
    if (ok == 0)
        fail_msg("%s: no proposal committed: the run shows nothing", c->ctx);
    /* With a lease, reads at once happen (else their check shows nothing). */
    if (seed % 4 >= 2 && c->fast_reads == 0)
        fail_msg("%s: no read at once under the lease: the run shows nothing of it", c->ctx);
    cluster_free(c);
}

static void random_faults_keep_every_answer_true(void **state)
{
    (void)state;
    const char *one = getenv("PROPOSER_SEED"), *many = getenv("PROPOSER_SEEDS");
    if (one != NULL) {
        run_seed(strtoull(one, NULL, 10));
        return;
    }
    unsigned long long n = many != NULL ? strtoull(many, NULL, 10) : 12;
    for (unsigned long long seed = 1; seed <= n; seed++)
        run_seed(seed);
}

int main(void)
{
    log_set_level(LOG_ERROR); /* the proposer's warnings on every lost leadership */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_ready_leader_commits_and_a_follower_refuses),
        cmocka_unit_test(a_new_leader_refuses_or_holds_until_its_barrier),
        cmocka_unit_test(a_deadline_and_a_stop_answer_what_is_queued),
        cmocka_unit_test(a_stale_leader_answers_no_read),
        cmocka_unit_test(a_leader_under_its_lease_reads_without_a_round),
        cmocka_unit_test(a_read_waits_for_a_barrier_appended_after_it),
        cmocka_unit_test(a_deposed_leader_fails_its_queue),
        cmocka_unit_test(a_proposal_of_an_earlier_term_is_never_proposed),
        cmocka_unit_test(take_stops_at_the_first_that_does_not_fit),
        cmocka_unit_test(take_kind_passes_the_other_kind_over),
        cmocka_unit_test(a_taken_wait_outlives_its_deadline),
        cmocka_unit_test(random_faults_keep_every_answer_true),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
