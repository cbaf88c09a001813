/*
 * test_service_local.c — the service's protocol code in process, on a
 * local region: svc_open starts the core as main does (a store in a
 * temporary dir, a single node's log of one, the write batcher) against a
 * real percolator-oracle on loopback, and the tests call the coordinator,
 * the sessions, one-shot transactions and the write batcher the way the
 * routes do, without HTTP.
 * What they check is what a client is told: a commit is readable once
 * answered, conflicts and an oracle outage end the way coordinator.h
 * says, blind writes of one key commit in arrival order.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator.h"
#include "engine_replica.h"
#include "keyspace.h"
#include "one_shot.h"
#include "reader.h"
#include "service.h"
#include "sessions.h"
#include "testlib.h"
#include "timeutil.h"
#include "write_batch.h"

typedef struct {
    tl_oracle_env *oenv;
    char dir[512], data[600];
    svc s;
} local;

static int open_service(local *l, bool one_pc, const char *split_keys)
{
    svc_config *c = &l->s.cfg;
    snprintf(l->data, sizeof l->data, "%s/service", l->dir);
    *c = (svc_config){
        .data_dir = l->data, .oracle = l->oenv->o.url, .sync = "fsync",
        .auth_token_file = "", .openapi_file = "", .oracle_token_file = "",
        .backup_dir = "", .restore_from = "",
        .lease_ttl_ms = 10000, .max_lock_age_ms = 30000, .janitor_interval_ms = 1000,
        .lock_wait_ms = 1000, .cache_size = 64u << 20, .max_value_bytes = 1u << 20,
        .max_txn_bytes = 16u << 20, .txn_retention_ms = 300000, .oracle_timeout_ms = 2000,
        .gc_retention_ms = 600000, .max_body_memory = 64u << 20, .max_reply_bytes = 16u << 20,
        .max_sessions = 1000, .max_session_bytes = 256u << 20, .one_pc = one_pc,
        .region_split_keys = split_keys,
    };
    c->shared.threads = 4;
    return svc_open(&l->s, NULL, NULL, NULL);
}

static int setup_with(void **state, bool one_pc, const char *split_keys)
{
    local *l = calloc(1, sizeof(*l));
    assert_non_null(l);
    assert_non_null(l->oenv = tl_oracle_env_new("svc-local"));
    assert_int_equal(tl_oracle_start(&l->oenv->o, l->oenv->data, 0), 0);
    snprintf(l->dir, sizeof l->dir, "%s", l->oenv->dir);
    assert_int_equal(open_service(l, one_pc, split_keys), 0);
    *state = l;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, true, "");
}

static int setup_two_phase(void **state)
{
    return setup_with(state, false, "");
}

/* Two regions, cut at user key "m". */
static int setup_two_regions(void **state)
{
    return setup_with(state, true, "m");
}

static int teardown(void **state)
{
    local *l = *state;
    svc_close(&l->s);
    tl_oracle_env_free(l->oenv);
    free(l);
    return 0;
}

/* A session with writes buffered: key=value pairs, NULL-terminated. */
static txn *session_with(svc *s, const char *const *kv)
{
    uint64_t ts;
    assert_true(svc_timestamp(s, &ts));
    txn *t = sessions_begin(s->sessions, ts, s->cfg.lease_ttl_ms);
    assert_non_null(t);
    t->raft_term = svc_leader_term(s);
    for (size_t i = 0; kv[i] != NULL; i += 2)
        assert_int_equal(txn_buffer(t, kv[i], strlen(kv[i]), false, kv[i + 1],
                                    strlen(kv[i + 1]), s->cfg.max_txn_bytes),
                         TXN_BUFFERED);
    return t;
}

/* Commit a session as h_commit does; its rc, *cts the commit timestamp. */
static pc_rc commit(svc *s, txn *t, uint64_t *cts)
{
    char *keys = NULL;
    size_t n = 0;
    pc_mutation *m = coord_mutations(t, &keys, &n);
    assert_non_null(m);
    pc_session *ps = svc_engine_session(s);
    assert_non_null(ps);
    pc_conflict c;
    sessions_commit_begin(t);
    pc_rc rc = coord_commit(s, ps, t, m, n, cts, &c);
    if (rc == PC_TS_UNAVAILABLE)
        sessions_commit_retry(t);
    free(m);
    free(keys);
    return rc;
}

static void end(svc *s, txn *t, txn_state state)
{
    sessions_end(s->sessions, t, state, state == TXN_COMMITTED ? "committed" : "test");
    sessions_release(s->sessions, t);
}

/* The value of user key k at a fresh timestamp, and its commit_ts. */
static void must_read(svc *s, const char *k, const char *want, uint64_t want_cts)
{
    char ek[SVC_MAX_KEY + 8];
    pc_slice key = {ek, ks_user(ek, k, strlen(k))};
    uint64_t ts, cts = 0;
    assert_true(svc_timestamp(s, &ts));
    pc_buf v = {0};
    pc_conflict c;
    assert_int_equal(rd_get(s, svc_engine_session(s), key, ts, &v, &cts, &c), PC_OK);
    assert_int_equal(v.len, strlen(want));
    assert_memory_equal(v.data, want, v.len);
    if (want_cts != 0)
        assert_int_equal(cts, want_cts);
    pc_buf_free(&v);
}

/* One phase (three keys fit) or two (--one-pc off): either way the
 * answer's commit_ts is the one every key is read at. */
static void a_session_commits_and_is_read_back(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    static const char *const kv[] = {"a", "1", "b", "2", "c", "3", NULL};
    txn *t = session_with(s, kv);
    uint64_t cts = 0;
    assert_int_equal(commit(s, t, &cts), PC_OK);
    assert_true(cts > t->start_ts);
    end(s, t, TXN_COMMITTED);
    must_read(s, "a", "1", cts);
    must_read(s, "b", "2", cts);
    must_read(s, "c", "3", cts);
    bool one_phase = s->cfg.one_pc;
    assert_int_equal(metrics_counter_value(s->m.commits_1pc), one_phase ? 1 : 0);
    assert_int_equal(metrics_counter_value(s->m.commits_2pc), one_phase ? 0 : 1);
}

static void a_two_phase_session_commits_and_is_read_back(void **state)
{
    a_session_commits_and_is_read_back(state); /* the same, --one-pc off */
}

/* Snapshot isolation's first-committer-wins: of two sessions that
 * overlap and write one key, the later committer is refused and writes
 * nothing. */
static void the_second_of_two_overlapping_writers_conflicts(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    static const char *const first[] = {"k", "first", NULL};
    static const char *const second[] = {"k", "second", "other", "x", NULL};
    txn *t1 = session_with(s, first), *t2 = session_with(s, second);
    uint64_t c1 = 0, c2 = 0;
    assert_int_equal(commit(s, t2, &c2), PC_OK);
    end(s, t2, TXN_COMMITTED);
    assert_int_equal(commit(s, t1, &c1), PC_WRITE_CONFLICT);
    end(s, t1, TXN_ABORTED);
    must_read(s, "k", "second", c2);
    must_read(s, "other", "x", c2);
}

/* An oracle outage between prewrite and commit (two phases: 70 keys):
 * PC_TS_UNAVAILABLE with the locks left (commit_pending); once the
 * oracle is back the same session's retry commits every key. */
static void a_commit_the_oracle_interrupts_is_finished_by_a_retry(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    uint64_t ts;
    assert_true(svc_timestamp(s, &ts));
    txn *t = sessions_begin(s->sessions, ts, s->cfg.lease_ttl_ms);
    assert_non_null(t);
    t->raft_term = svc_leader_term(s);
    for (int i = 0; i < 70; i++) {
        char k[16];
        snprintf(k, sizeof k, "big%02d", i);
        assert_int_equal(txn_buffer(t, k, strlen(k), false, "v", 1, s->cfg.max_txn_bytes),
                         TXN_BUFFERED);
    }
    int port = l->oenv->o.port;
    assert_int_equal(tl_oracle_stop(&l->oenv->o), 0);
    uint64_t cts = 0;
    pc_rc rc = commit(s, t, &cts);
    assert_int_equal(rc, PC_TS_UNAVAILABLE);
    assert_true(t->commit_pending);
    assert_int_equal(tl_oracle_start(&l->oenv->o, l->oenv->data, port), 0);
    assert_int_equal(commit(s, t, &cts), PC_OK);
    end(s, t, TXN_COMMITTED);
    must_read(s, "big00", "v", cts);
    must_read(s, "big69", "v", cts);
}

/* A snapshot read may begin at a timestamp handed out, never above every
 * one handed out (a commit could still land below it). */
static void a_snapshot_above_every_timestamp_handed_out_is_refused(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    uint64_t ts;
    assert_true(svc_timestamp(s, &ts));
    assert_int_equal(svc_snapshot_begin(s, ts), SVC_SNAP_OK);
    svc_snapshot_end(s, ts);
    assert_int_equal(svc_snapshot_begin(s, ts + 1000000), SVC_SNAP_FUTURE);
}

/* ---- one-shot transactions (one_shot.h), built as the parser builds them ---- */

static void list_add(key_list *l, const char *k)
{
    assert_non_null(l->off = realloc(l->off, (l->n + 1) * sizeof(*l->off)));
    assert_non_null(l->len = realloc(l->len, (l->n + 1) * sizeof(*l->len)));
    l->off[l->n] = l->keys.len;
    l->len[l->n] = strlen(k);
    assert_int_equal(buf_append(&l->keys, k, strlen(k)), 0);
    l->n++;
}

/* A one-shot transaction writing key=value (NULL value: no write). */
static void shot_write(one_shot *o, const char *key, const char *value)
{
    *o = (one_shot){.enc = ENC_TEXT};
    if (value == NULL)
        return;
    assert_non_null(o->ekeys = malloc(KS_MAX));
    assert_non_null(o->writes = calloc(1, sizeof(*o->writes)));
    o->writes[0] = (pc_mutation){PC_OP_PUT, {o->ekeys, ks_user(o->ekeys, key, strlen(key))},
                                 {value, strlen(value)}};
    o->nwrites = 1;
}

static void shot_condition(one_shot *o, const char *key, condition c)
{
    assert_non_null(o->conds = realloc(o->conds, (o->ckeys.n + 1) * sizeof(*o->conds)));
    o->conds[o->ckeys.n] = c;
    list_add(&o->ckeys, key);
}

/* Conditions are checked and reads taken at the run's start timestamp;
 * a failed condition writes nothing and says which and why. */
static void a_one_shot_transaction_checks_its_conditions_and_reads(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    one_shot o;
    one_shot_outcome out;

    shot_write(&o, "acct", "100");
    assert_int_equal(one_shot_exec(s, &o, false, &out), PC_OK);
    uint64_t c1 = out.commit_ts;
    one_shot_outcome_free(&out);
    one_shot_free(&o);

    /* if commit_ts(acct) == c1: read acct and a missing key, write 90 */
    shot_write(&o, "acct", "90");
    shot_condition(&o, "acct", (condition){.kind = COND_COMMIT_TS, .commit_ts = c1});
    list_add(&o.reads, "acct");
    list_add(&o.reads, "missing");
    assert_int_equal(one_shot_exec(s, &o, true, &out), PC_OK);
    uint64_t c2 = out.commit_ts;
    assert_true(c2 > c1);
    assert_int_equal(out.nreads, 2);
    assert_true(out.reads[0].found);
    assert_int_equal(out.reads[0].commit_ts, c1);
    assert_int_equal(out.reads[0].value.len, 3);
    assert_memory_equal(out.reads[0].value.data, "100", 3);
    assert_false(out.reads[1].found);
    one_shot_outcome_free(&out);
    one_shot_free(&o);

    /* The same condition again is stale now: refused, nothing written. */
    shot_write(&o, "acct", "0");
    shot_condition(&o, "acct", (condition){.kind = COND_EXISTS, .exists = true});
    shot_condition(&o, "acct", (condition){.kind = COND_COMMIT_TS, .commit_ts = c1});
    assert_int_equal(one_shot_exec(s, &o, false, &out), PC_NOT_FOUND);
    assert_true(out.cond_failed);
    assert_int_equal(out.cond, 1);
    assert_non_null(strstr(out.why, "expected commit_ts"));
    one_shot_outcome_free(&out);
    one_shot_free(&o);
    must_read(s, "acct", "90", c2);
}

/* A blind write goes the one-phase way and is read back at its commit. */
static void a_blind_one_shot_write_commits_in_one_phase(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    one_shot o;
    one_shot_outcome out;
    shot_write(&o, "blind", "x");
    assert_true(one_shot_exec_blind(s, &o, &out));
    assert_int_equal(out.rc, PC_OK);
    must_read(s, "blind", "x", out.commit_ts);
    one_shot_outcome_free(&out);
    one_shot_free(&o);
    assert_int_equal(metrics_counter_value(s->m.commits_1pc), 1);
}

/* ---- the write batcher ---- */

#define JOBS 120
#define SAME_KEY 6 /* of them, writes of one key */

typedef struct {
    wb_job job;                 /* first: done gets it back */
    pc_mutation m;
    char key[16], value[16];
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *answered;
} job;

/* A stand-in for a region's group of its own (DESIGN §6.5, step 6): ready
 * in a term unrelated to the node's log's, it takes proposals without
 * applying them and keeps the term each came in. */
typedef struct {
    replicator base;
    uint64_t term;
    unsigned proposals;     /* proposed or submitted */
    uint64_t proposed_term; /* the last one's */
    unsigned terms_not_its; /* proposals in another term than its own */
    uint64_t failures;      /* rp_failures' count */
    unsigned barriers;      /* read barriers asked */
    bool fail_in_barrier;   /* each barrier sees a proposal fail meanwhile */
    /* Set: it applies what it takes as region 2's own log would
     * (pc_apply_region_batch, its range from start), and counts keys of
     * other regions. */
    pc_session *apply;
    pc_slice start;
    uint64_t index;
    unsigned outside;
} stub_repl;

static int key_outside(void *arg, const void *key, size_t len)
{
    stub_repl *st = arg;
    st->outside += pc_key_cmp(key, len, st->start.data, st->start.len) < 0;
    return 0;
}

/* Take a batch: counted, its term and keys noted, applied if asked. */
static rp_rc stub_take(stub_repl *st, const void *batch, size_t len, uint64_t term)
{
    st->proposals++;
    st->proposed_term = term;
    st->terms_not_its += term != st->term;
    if (st->apply == NULL)
        return RP_OK;
    assert_int_equal(pc_batch_keys(batch, len, key_outside, st), PC_OK);
    pc_rc rc = pc_apply_region_batch(st->apply, 2, st->start, (pc_slice){NULL, 0}, batch, len,
                                     ++st->index);
    return rc == PC_OK ? RP_OK : RP_UNAVAILABLE;
}

static uint64_t stub_ready_term(replicator *r)
{
    return ((stub_repl *)r)->term;
}

static rp_rc stub_propose(replicator *r, const void *batch, size_t len, uint64_t term,
                          unsigned wait_ms)
{
    (void)wait_ms;
    return stub_take((stub_repl *)r, batch, len, term);
}

static rp_rc stub_submit(replicator *r, const void *batch, size_t len, uint64_t term,
                         replicator_done done, void *arg)
{
    rp_rc rc = stub_take((stub_repl *)r, batch, len, term);
    if (rc == RP_OK)
        done(arg, RP_OK); /* applied: answered once */
    return rc;
}

static rp_rc stub_read_barrier(replicator *r, unsigned wait_ms)
{
    (void)wait_ms;
    stub_repl *st = (stub_repl *)r;
    st->barriers++;
    if (st->fail_in_barrier)
        st->failures++;
    return RP_OK;
}

static bool stub_read_now(replicator *r)
{
    (void)r;
    return true;
}

static uint64_t stub_failures(replicator *r)
{
    return ((stub_repl *)r)->failures;
}

static void stub_status(replicator *r, rp_status *st)
{
    (void)r;
    memset(st, 0, sizeof *st);
}

static const replicator_ops stub_ops = {stub_ready_term, stub_propose,  stub_submit, stub_read_barrier,
                                        stub_read_now,   stub_failures, stub_status};

/* A prewrite of user key k alone, begun for user key hint's region, as
 * the coordinator does (svc_write_begin, the action, svc_write_end). */
static pc_rc prewrite_one(svc *s, const char *hint, const char *k)
{
    char hk[SVC_MAX_KEY + 8], ek[SVC_MAX_KEY + 8];
    pc_slice hkey = {hk, ks_user(hk, hint, strlen(hint))}, key = {ek, ks_user(ek, k, strlen(k))};
    uint64_t ts;
    assert_true(svc_timestamp(s, &ts));
    pc_txn_meta t = {.start_ts = ts, .primary = key, .owner = {"test", 4},
                     .wall_ms = time_wall_ms(), .ttl_ms = 60000};
    pc_mutation m = {.op = PC_OP_PUT, .key = key, .value = {"v", 1}};
    pc_conflict c;
    pc_session *ps = svc_engine_session(s);
    assert_non_null(ps);
    svc_write_begin(s, ps, hkey);
    return svc_write_end(s, ps, pc_prewrite(ps, &t, &m, 1, &c), NULL);
}

/* Each write goes to its region's replicator in the term that replicator
 * was ready in when the action began, and a batch whose keys turn out to
 * be another replicator's is refused, proposed nowhere: two groups'
 * terms are unrelated numbers, and one taken for the other could pass by
 * chance (DESIGN §6.5, step 6). Region 2 ([m, ...)) is given a stand-in
 * for a group of its own, ready in term 7 (the node's log is in term 1). */
static void a_write_is_proposed_in_its_regions_term(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    assert_int_equal(router_count(s->regions), 2);
    region *r2 = router_at(s->regions, 1);
    replicator *own = r2->repl;
    stub_repl stub = {.base = {&stub_ops}, .term = 7};
    r2->repl = &stub.base;

    assert_int_equal(prewrite_one(s, "n1", "n1"), PC_OK); /* region 2's */
    assert_int_equal(stub.proposals, 1);
    assert_int_equal(stub.proposed_term, 7);

    /* Begun as region 1's, its key region 2's: refused, the stand-in not
     * asked. */
    assert_int_equal(prewrite_one(s, "a1", "n2"), PC_UNAVAILABLE);
    assert_int_equal(stub.proposals, 1);

    /* Begun as region 2's, its key region 1's: refused, and the node's
     * log did not take it (nothing of "a2" in the store). */
    assert_int_equal(prewrite_one(s, "n3", "a2"), PC_UNAVAILABLE);
    assert_int_equal(stub.proposals, 1);
    r2->repl = own;
    char ek[SVC_MAX_KEY + 8];
    pc_slice a2 = {ek, ks_user(ek, "a2", 2)};
    uint64_t ts, cts = 0;
    assert_true(svc_timestamp(s, &ts));
    pc_buf v = {0};
    pc_conflict c;
    assert_int_equal(rd_get(s, svc_engine_session(s), a2, ts, &v, &cts, &c), PC_NOT_FOUND);
    pc_buf_free(&v);

    /* Region 1's own writes go on in the node's log. */
    assert_int_equal(prewrite_one(s, "a3", "a3"), PC_OK);
}

/* A read fences each region it covers and no other, and fences again
 * only for a failure in a log it read from (svc_read_epoch); a region
 * with no log yet vouches for nothing (DESIGN §6.5, step 6). Region 2
 * ([m, ...)) is given a stand-in for a group of its own. */
static void reads_fence_the_regions_they_cover(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    region *r2 = router_at(s->regions, 1);
    replicator *own = r2->repl;
    stub_repl stub = {.base = {&stub_ops}, .term = 7};
    r2->repl = &stub.base;
    char ak[SVC_MAX_KEY + 8], mk[SVC_MAX_KEY + 8], nk[SVC_MAX_KEY + 8];
    pc_slice a = {ak, ks_user(ak, "a", 1)}, m = {mk, ks_user(mk, "m", 1)},
             n = {nk, ks_user(nk, "n", 1)};
    const pc_slice all = {"", 0}, to_end = {NULL, 0};

    /* Its epoch is its own region's log's. */
    uint64_t ea = svc_read_epoch(s, a), en = svc_read_epoch(s, n),
             eall = svc_read_epoch_range(s, all, to_end);
    stub.failures += 3;
    assert_int_equal(svc_read_epoch(s, a), ea);
    assert_int_equal(svc_read_epoch(s, n), en + 3);
    assert_int_equal(svc_read_epoch_range(s, all, to_end), eall + 3);
    assert_int_equal(svc_read_epoch_range(s, a, m), ea); /* [a, m): region 1's alone */
    assert_int_equal(svc_read_epoch_range(s, a, n), eall + 3); /* [a, n): both */

    /* A read of region 1's key asks region 2 nothing. */
    uint64_t ts, cts = 0;
    pc_buf v = {0};
    pc_conflict c;
    assert_true(svc_timestamp(s, &ts));
    assert_int_equal(rd_get(s, svc_engine_session(s), a, ts, &v, &cts, &c), PC_NOT_FOUND);
    assert_int_equal(stub.barriers, 0);
    /* One of region 2's fences once, and again while its log fails
     * meanwhile, until it gives up (503, asked again). */
    assert_int_equal(rd_get(s, svc_engine_session(s), n, ts, &v, &cts, &c), PC_NOT_FOUND);
    assert_int_equal(stub.barriers, 1);
    stub.fail_in_barrier = true;
    assert_int_equal(rd_get(s, svc_engine_session(s), n, ts, &v, &cts, &c), PC_UNAVAILABLE);
    assert_true(stub.barriers > 2);
    stub.fail_in_barrier = false;

    /* A region without a log of its own yet: nothing of it is read. */
    r2->repl = NULL;
    assert_int_equal(svc_read_fence(s, n), PC_UNAVAILABLE);
    assert_int_equal(svc_read_fence_all(s), PC_UNAVAILABLE);
    assert_int_equal(svc_read_fence(s, a), PC_OK);
    r2->repl = own;
    assert_int_equal(svc_read_fence_all(s), PC_OK);
    pc_buf_free(&v);
}

/* A router with a hole (--region-logs: a member that missed a split has
 * no region for the new one's keys, and its rows there are old): a read
 * that covers any key of the hole is vouched for by none, whether the
 * hole is inside, at the start or at the end of its range; the reads
 * around it fence as before. Region 1 [, m), the hole [m, t), region 3
 * [t, ...). */
static void a_read_across_a_hole_in_the_regions_is_fenced_by_none(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    char ak[SVC_MAX_KEY + 8], mk[SVC_MAX_KEY + 8], nk[SVC_MAX_KEY + 8], tk[SVC_MAX_KEY + 8],
        uk[SVC_MAX_KEY + 8];
    pc_slice a = {ak, ks_user(ak, "a", 1)}, m = {mk, ks_user(mk, "m", 1)},
             n = {nk, ks_user(nk, "n", 1)}, t = {tk, ks_user(tk, "t", 1)},
             u = {uk, ks_user(uk, "u", 1)};
    const pc_slice to_end = {NULL, 0};
    router *holed = router_new();
    region *r1 = region_new(1, "", 0, m.data, m.len), *r3 = region_new(3, t.data, t.len, NULL, 0);
    assert_non_null(holed);
    assert_int_equal(router_add(holed, r1), 0);
    assert_int_equal(router_add(holed, r3), 0);
    assert_int_equal(router_adopt(s->regions, holed, NULL, NULL), 0);
    assert_int_equal(router_count(s->regions), 2);

    assert_int_equal(svc_read_fence_range(s, a, m), PC_OK);         /* region 1 only */
    assert_int_equal(svc_read_fence_range(s, t, to_end), PC_OK);    /* region 3 only */
    assert_int_equal(svc_read_fence_range(s, a, n), PC_UNAVAILABLE); /* ends in the hole */
    assert_int_equal(svc_read_fence_range(s, n, u), PC_UNAVAILABLE); /* starts in it */
    assert_int_equal(svc_read_fence_range(s, n, t), PC_UNAVAILABLE); /* all in it */
    assert_int_equal(svc_read_fence_range(s, a, u), PC_UNAVAILABLE); /* across it */
    assert_int_equal(svc_read_fence_all(s), PC_UNAVAILABLE);
    assert_int_equal(svc_read_fence(s, n), PC_UNAVAILABLE);
    assert_int_equal(svc_read_fence(s, u), PC_OK);

    /* The hole filled (region 2 [m, t)): every read fences again. */
    router *whole = router_new();
    assert_non_null(whole);
    assert_int_equal(router_add(whole, region_new(1, "", 0, m.data, m.len)), 0);
    assert_int_equal(router_add(whole, region_new(2, m.data, m.len, t.data, t.len)), 0);
    assert_int_equal(router_add(whole, region_new(3, t.data, t.len, NULL, 0)), 0);
    assert_int_equal(router_adopt(s->regions, whole, NULL, NULL), 0);
    assert_int_equal(svc_read_fence_range(s, a, u), PC_OK);
    assert_int_equal(svc_read_fence_all(s), PC_OK);

    /* Past a chunk of the walk (16 regions): 20 regions, k01..k19 their
     * starts after the first, the 17th ([k16, k17)) a hole. */
    char kb[20][SVC_MAX_KEY + 8];
    pc_slice k[20];
    for (int i = 1; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof name, "k%02d", i);
        k[i] = (pc_slice){kb[i], ks_user(kb[i], name, 3)};
    }
    k[0] = (pc_slice){"", 0};
    router *many = router_new();
    assert_non_null(many);
    for (int i = 0; i < 20; i++)
        if (i != 16)
            assert_int_equal(router_add(many, region_new((uint64_t)i + 1, k[i].data, k[i].len,
                                                         i < 19 ? k[i + 1].data : NULL,
                                                         i < 19 ? k[i + 1].len : 0)),
                             0);
    assert_int_equal(router_adopt(s->regions, many, NULL, NULL), 0);
    assert_int_equal(router_count(s->regions), 19);
    assert_int_equal(svc_read_fence_range(s, k[0], k[16]), PC_OK); /* a whole chunk, to its end */
    assert_int_equal(svc_read_fence_range(s, k[3], k[16]), PC_OK);
    assert_int_equal(svc_read_fence_range(s, k[17], to_end), PC_OK);
    assert_int_equal(svc_read_fence_range(s, k[0], k[17]), PC_UNAVAILABLE); /* into the hole */
    assert_int_equal(svc_read_fence_range(s, k[15], k[18]), PC_UNAVAILABLE); /* across it */
    assert_int_equal(svc_read_fence_all(s), PC_UNAVAILABLE);
}

static void job_done(wb_job *j);

/* The call sites, not a hand-made begin: a session's commit across both
 * regions, a one-phase commit in region 2 and a blind write there go to
 * region 2's stand-in (which applies them as its own log would) with
 * region 2's keys only, every batch in its term, and read back whole
 * (DESIGN §6.5, step 6). */
static void writes_go_to_each_regions_log_in_its_term(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    region *r2 = router_at(s->regions, 1);
    replicator *own = r2->repl;
    char mk[SVC_MAX_KEY + 8];
    stub_repl stub = {.base = {&stub_ops}, .term = 7, .start = {mk, ks_user(mk, "m", 1)}};
    assert_int_equal(pc_session_open(s->engine, &stub.apply), PC_OK);
    r2->repl = &stub.base;

    /* Two phases across the regions: region 2's prewrite and commit. */
    const char *kv[] = {"a", "1", "n", "2", NULL};
    txn *t = session_with(s, kv);
    uint64_t cts = 0;
    assert_int_equal(commit(s, t, &cts), PC_OK);
    end(s, t, TXN_COMMITTED);
    assert_int_equal(stub.proposals, 2);
    must_read(s, "a", "1", cts);
    must_read(s, "n", "2", cts);
    /* One phase in region 2 alone. */
    const char *kv2[] = {"n2", "3", "o", "4", NULL};
    t = session_with(s, kv2);
    assert_int_equal(commit(s, t, &cts), PC_OK);
    end(s, t, TXN_COMMITTED);
    assert_int_equal(stub.proposals, 3);
    must_read(s, "o", "4", cts);
    /* A blind write of region 2's key, through the committer. */
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int answered = 0;
    job b = {.mu = &mu, .cv = &cv, .answered = &answered};
    size_t kn = ks_user(b.key, "p", 1);
    snprintf(b.value, sizeof b.value, "5");
    b.m = (pc_mutation){PC_OP_PUT, {b.key, kn}, {b.value, 1}};
    b.job.w.m = &b.m;
    b.job.w.n = 1;
    b.job.done = job_done;
    assert_true(write_batch_submit(s->batch, &b.job));
    pthread_mutex_lock(&mu);
    while (answered < 1)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    assert_int_equal(b.job.w.rc, PC_OK);
    assert_int_equal(stub.proposals, 4);
    must_read(s, "p", "5", b.job.w.commit_ts);

    assert_int_equal(stub.terms_not_its, 0);
    assert_int_equal(stub.outside, 0);
    r2->repl = own;
    pc_session_close(stub.apply);
}

static void job_done(wb_job *j)
{
    job *b = (job *)j;
    pthread_mutex_lock(b->mu);
    (*b->answered)++;
    pthread_cond_broadcast(b->cv);
    pthread_mutex_unlock(b->mu);
}

/* Blind writes queued together: each answered once; those of one key
 * commit in the order they were queued (a later one is put off to the
 * next round), so the last is the value read back. */
static void blind_writes_commit_in_rounds_in_arrival_order(void **state)
{
    local *l = *state;
    svc *s = &l->s;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int answered = 0;
    job *jobs = calloc(JOBS, sizeof(*jobs));
    assert_non_null(jobs);
    for (int i = 0; i < JOBS; i++) {
        job *b = &jobs[i];
        if (i < SAME_KEY)
            snprintf(b->key, sizeof b->key, "hot");
        else
            snprintf(b->key, sizeof b->key, "cold%03d", i);
        snprintf(b->value, sizeof b->value, "v%03d", i);
        char ek[32];
        size_t kn = ks_user(ek, b->key, strlen(b->key));
        memcpy(b->key, ek, kn); /* the engine key, in the job's own buffer */
        b->m = (pc_mutation){PC_OP_PUT, {b->key, kn}, {b->value, strlen(b->value)}};
        b->job.w.m = &b->m;
        b->job.w.n = 1;
        b->job.done = job_done;
        b->mu = &mu;
        b->cv = &cv;
        b->answered = &answered;
        assert_true(write_batch_submit(s->batch, &b->job));
    }
    pthread_mutex_lock(&mu);
    while (answered < JOBS)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < JOBS; i++)
        assert_int_equal(jobs[i].job.w.rc, PC_OK);
    for (int i = 1; i < SAME_KEY; i++)
        assert_true(jobs[i].job.w.commit_ts > jobs[i - 1].job.w.commit_ts);
    char want[16];
    snprintf(want, sizeof want, "v%03d", SAME_KEY - 1);
    must_read(s, "hot", want, jobs[SAME_KEY - 1].job.w.commit_ts);
    must_read(s, "cold100", "v100", jobs[100].job.w.commit_ts);
    assert_int_equal(metrics_counter_value(s->m.commits_1pc), JOBS);
    free(jobs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_session_commits_and_is_read_back, setup, teardown),
        cmocka_unit_test_setup_teardown(a_two_phase_session_commits_and_is_read_back,
                                        setup_two_phase, teardown),
        cmocka_unit_test_setup_teardown(the_second_of_two_overlapping_writers_conflicts, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_commit_the_oracle_interrupts_is_finished_by_a_retry,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_snapshot_above_every_timestamp_handed_out_is_refused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_one_shot_transaction_checks_its_conditions_and_reads,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_blind_one_shot_write_commits_in_one_phase, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_write_is_proposed_in_its_regions_term,
                                        setup_two_regions, teardown),
        cmocka_unit_test_setup_teardown(reads_fence_the_regions_they_cover, setup_two_regions,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_read_across_a_hole_in_the_regions_is_fenced_by_none,
                                        setup_two_regions, teardown),
        cmocka_unit_test_setup_teardown(writes_go_to_each_regions_log_in_its_term,
                                        setup_two_regions, teardown),
        cmocka_unit_test_setup_teardown(blind_writes_commit_in_rounds_in_arrival_order, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("service on a local region", tests, NULL, NULL);
}
