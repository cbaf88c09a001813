/*
 * Conflicts and the protocol's edge rules, one case per test, named as the
 * rule it shows (the paper's Figure 6; TiKV's refinements, DESIGN §3).
 */
#include "engine_fixture.h"

/* Commit "key=value" alone at (start, commit). */
static void prewrite_aborts_on_a_lock_at_any_timestamp(void **state)
{
    fx *f = *state;
    pc_conflict c;
    pc_txn_meta t10 = fx_meta(10, "k"), t5 = fx_meta(5, "k"), t20 = fx_meta(20, "k");
    pc_mutation m = PUT("k", "v");

    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t10, &m, 1, NULL)), PC_OK);
    /* An older and a newer transaction both find the lock. */
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t5, &m, 1, &c)), PC_LOCKED);
    assert_int_equal(c.lock.start_ts, 10);
    assert_memory_equal(c.lock.key.data, "k", 1);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t20, &m, 1, &c)), PC_LOCKED);
    assert_int_equal(c.lock.start_ts, 10);
    assert_int_equal(c.lock.primary.len, 1);
}

static void prewrite_aborts_on_a_write_after_start(void **state)
{
    fx *f = *state;
    pc_conflict c;
    fx_put_committed(f, "k", "a", 10, 12);
    pc_txn_meta t11 = fx_meta(11, "k"), t13 = fx_meta(13, "k");
    pc_mutation m = PUT("k", "b");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t11, &m, 1, &c)), PC_WRITE_CONFLICT);
    assert_int_equal(c.commit_ts, 12);
    assert_int_equal(c.lock.key.len, 1);
    assert_table(f, "lock", "");
    /* Started after the commit: no conflict. */
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t13, &m, 1, &c)), PC_OK);
}

static void a_conflict_on_one_key_writes_nothing(void **state)
{
    fx *f = *state;
    fx_put_committed(f, "b", "old", 10, 12);
    pc_txn_meta t = fx_meta(11, "a");
    pc_mutation m[3] = {PUT("a", "1"), PUT("b", "2"), PUT("c", "3")};
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 3, NULL)), PC_WRITE_CONFLICT);
    assert_table(f, "lock", "");
    assert_table(f, "data", "");
}

static void read_blocked_by_a_lock_at_or_below_its_ts_only(void **state)
{
    fx *f = *state;
    char v[32];
    fx_put_committed(f, "k", "old", 2, 3);
    pc_txn_meta t = fx_meta(10, "k");
    pc_mutation m = PUT("k", "new");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(fx_get(f, "k", 9, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "old");
    assert_int_equal(fx_get(f, "k", 10, v, sizeof(v)), PC_LOCKED);
    assert_int_equal(fx_get(f, "k", 11, v, sizeof(v)), PC_LOCKED);
}

static void no_partial_transaction_is_ever_visible(void **state)
{
    fx *f = *state;
    char v[32];
    pc_conflict c;
    pc_txn_status st;
    pc_liveness live = {.now_ms = pc_now_ms()};
    fx_put_committed(f, "a", "a0", 2, 3);
    fx_put_committed(f, "b", "b0", 4, 5);
    pc_txn_meta t = fx_meta(10, "a");
    pc_mutation m[2] = {PUT("a", "a1"), PUT("b", "b1")};
    pc_slice a = S("a");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 2, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &a, 1, 10, 11)), PC_OK);

    /* The primary is committed, the secondary still locked: a reader at 12
     * gets a1, and for b the lock, never b0. */
    assert_int_equal(fx_get(f, "a", 12, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "a1");
    pc_buf val = {0};
    uint64_t cts;
    assert_int_equal(pc_get(f->s, S("b"), 12, &val, &cts, &c), PC_LOCKED);
    /* Resolving the met lock rolls it forward from the primary. */
    assert_int_equal(fx_resolve_met_lock(f->s, &c.lock, &live, &st), PC_OK);
    assert_int_equal(st.state, PC_TXN_COMMITTED);
    assert_int_equal(st.commit_ts, 11);
    assert_int_equal(pc_get(f->s, S("b"), 12, &val, &cts, &c), PC_OK);
    assert_int_equal(cts, 11);
    assert_memory_equal(val.data, "b1", 2);
    pc_buf_free(&val);
    /* A snapshot between start and commit sees neither write. */
    assert_int_equal(fx_get(f, "a", 10, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "a0");
    assert_int_equal(fx_get(f, "b", 10, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "b0");
}

static void a_rollback_record_makes_a_late_prewrite_fail(void **state)
{
    fx *f = *state;
    pc_slice k = S("k");
    pc_txn_meta t = fx_meta(10, "k");
    pc_mutation m = PUT("k", "v");

    /* A cleaner rolled the transaction back before its prewrite arrived. */
    assert_int_equal(APPLY(f->s, pc_rollback(f->s, &k, 1, 10)), PC_OK);
    assert_table(f, "write", "k@10 rollback start=10\n");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_ROLLED_BACK);
    assert_table(f, "lock", "");
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &k, 1, 10, 11)), PC_ROLLED_BACK);
    /* Rolling back again is harmless. */
    assert_int_equal(APPLY(f->s, pc_rollback(f->s, &k, 1, 10)), PC_OK);
}

static void rollback_removes_the_lock_and_data(void **state)
{
    fx *f = *state;
    char big[400];
    memset(big, 'z', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    pc_txn_meta t = fx_meta(10, "k");
    pc_mutation m = PUT("k", big);
    pc_slice k = S("k");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_table(f, "data", "k@10=zzzzzzzz..(399)\n");
    assert_int_equal(APPLY(f->s, pc_rollback(f->s, &k, 1, 10)), PC_OK);
    assert_table(f, "data", "");
    assert_table(f, "lock", "");
    assert_table(f, "write", "k@10 rollback start=10\n");
    /* Another transaction is not held up by the rollback record. */
    pc_txn_meta t2 = fx_meta(12, "k");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t2, &m, 1, NULL)), PC_OK);
}

static void prewrite_and_commit_are_idempotent(void **state)
{
    fx *f = *state;
    pc_txn_meta t = fx_meta(10, "a");
    pc_mutation m[2] = {PUT("a", "1"), PUT("b", "2")};
    pc_slice keys[2] = {S("a"), S("b")};
    char before[8192], after[8192];

    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 2, NULL)), PC_OK);
    fx_dump(f, "lock", before, sizeof(before));
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 2, NULL)), PC_OK);
    fx_dump(f, "lock", after, sizeof(after));
    assert_string_equal(before, after);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, keys, 2, 10, 11)), PC_OK);
    fx_dump(f, "write", before, sizeof(before));
    assert_int_equal(APPLY(f->s, pc_commit(f->s, keys, 2, 10, 11)), PC_OK);
    /* A prewrite retried after the commit changes nothing either. */
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 2, NULL)), PC_OK);
    fx_dump(f, "write", after, sizeof(after));
    assert_string_equal(before, after);
    assert_table(f, "lock", "");
}

static void rollback_of_a_committed_key_fails(void **state)
{
    fx *f = *state;
    pc_slice k = S("k");
    fx_put_committed(f, "k", "v", 10, 11);
    assert_int_equal(APPLY(f->s, pc_rollback(f->s, &k, 1, 10)), PC_COMMITTED);
}

static void commit_without_a_lock_fails(void **state)
{
    fx *f = *state;
    pc_slice k = S("k");
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &k, 1, 10, 11)), PC_LOCK_MISSING);
    /* Another transaction's lock is not ours either. */
    pc_txn_meta t = fx_meta(12, "k");
    pc_mutation m = PUT("k", "v");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &k, 1, 10, 13)), PC_LOCK_MISSING);
}

static void check_txn_status_decides_by_the_primary(void **state)
{
    fx *f = *state;
    pc_txn_status st;
    uint64_t now = pc_now_ms();
    pc_liveness alive = {.now_ms = now};
    pc_liveness later = {.now_ms = now + 120000}; /* past the 60 s TTL */
    pc_txn_meta t = fx_meta(10, "p");
    pc_mutation m = PUT("p", "v");

    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_check_txn_status(f->s, S("p"), 10, &alive, &st)), PC_OK);
    assert_int_equal(st.state, PC_TXN_LOCKED);
    /* A heartbeat moves the wall time forward: still alive "later". */
    assert_int_equal(APPLY(f->s, pc_heartbeat(f->s, S("p"), 10, now + 100000, 60000)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_check_txn_status(f->s, S("p"), 10, &later, &st)), PC_OK);
    assert_int_equal(st.state, PC_TXN_LOCKED);
    /* Past wall time + TTL it is rolled back on the spot. */
    pc_liveness much_later = {.now_ms = now + 200000};
    assert_int_equal(APPLY(f->s, pc_check_txn_status(f->s, S("p"), 10, &much_later, &st)), PC_OK);
    assert_int_equal(st.state, PC_TXN_ROLLED_BACK);
    assert_int_equal(st.rolled_back_now, 1);
    assert_table(f, "lock", "");
    assert_int_equal(APPLY(f->s, pc_heartbeat(f->s, S("p"), 10, now, 1000)), PC_ROLLED_BACK);
    /* A primary never prewritten gets a rollback record. */
    assert_int_equal(APPLY(f->s, pc_check_txn_status(f->s, S("q"), 30, &alive, &st)), PC_OK);
    assert_int_equal(st.state, PC_TXN_ROLLED_BACK);
    pc_txn_meta t30 = fx_meta(30, "q");
    pc_mutation mq = PUT("q", "late");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t30, &mq, 1, NULL)), PC_ROLLED_BACK);
}

static int owner_is_dead(void *arg, const void *owner, size_t len)
{
    (void)arg;
    return !(len == 4 && memcmp(owner, "dead", 4) == 0);
}

static void a_dead_owner_is_recognised_at_once(void **state)
{
    fx *f = *state;
    pc_txn_status st;
    pc_liveness live = {.now_ms = pc_now_ms(), .owner_alive = owner_is_dead};
    pc_txn_meta t = fx_meta(10, "p");
    t.owner = S("dead");
    pc_mutation m = PUT("p", "v");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_check_txn_status(f->s, S("p"), 10, &live, &st)), PC_OK);
    assert_int_equal(st.state, PC_TXN_ROLLED_BACK);
}

static void one_pc_commits_in_one_step_with_the_same_checks(void **state)
{
    fx *f = *state;
    char v[32];
    uint64_t cts = 0;
    pc_conflict c;
    pc_txn_meta t = fx_meta(fx_ts(f), "a");
    pc_mutation m[2] = {PUT("a", "1"), DEL("b")};

    f->ts += 10; /* leave room for a start_ts between start and commit */
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &t, m, 2, fx_ts_fn, f, &cts, &c)), PC_OK);
    assert_true(cts > t.start_ts);
    assert_table(f, "lock", "");
    assert_int_equal(fx_get(f, "a", fx_ts(f), v, sizeof(v)), PC_OK);
    assert_string_equal(v, "1");
    /* Same checks: a write after start... */
    pc_txn_meta old = fx_meta(t.start_ts, "a");
    old.start_ts = cts - 1;
    pc_mutation m2 = PUT("a", "2");
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &old, &m2, 1, fx_ts_fn, f, &cts, &c)), PC_WRITE_CONFLICT);
    /* ...and a lock at any timestamp. */
    pc_txn_meta t2 = fx_meta(fx_ts(f), "a");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t2, &m2, 1, NULL)), PC_OK);
    pc_txn_meta t3 = fx_meta(fx_ts(f), "a");
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &t3, &m2, 1, fx_ts_fn, f, &cts, &c)), PC_LOCKED);
    assert_int_equal(c.lock.start_ts, t2.start_ts);
    /* A 2PC prewrite that started before a one-phase commit conflicts. */
    pc_txn_meta t4 = fx_meta(fx_ts(f), "x");
    pc_txn_meta t5 = fx_meta(fx_ts(f), "x");
    pc_mutation mx = PUT("x", "5");
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &t5, &mx, 1, fx_ts_fn, f, &cts, &c)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t4, &mx, 1, &c)), PC_WRITE_CONFLICT);
}

static int no_timestamp(void *arg, uint64_t *ts)
{
    (void)arg;
    (void)ts;
    return -1;
}

static void one_pc_without_a_timestamp_writes_nothing(void **state)
{
    fx *f = *state;
    uint64_t cts;
    pc_txn_meta t = fx_meta(fx_ts(f), "a");
    pc_mutation m = PUT("a", "1");
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &t, &m, 1, no_timestamp, NULL, &cts, NULL)),
                     PC_TS_UNAVAILABLE);
    assert_table(f, "write", "");
    /* The in-memory lock was released: the key is free again. */
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &t, &m, 1, fx_ts_fn, f, &cts, NULL)), PC_OK);
}

static void a_blind_write_commits_at_its_one_timestamp(void **state)
{
    fx *f = *state;
    char v[32];
    uint64_t cts = 0;
    pc_conflict c;
    pc_txn_meta blind = fx_meta(1, "k");
    blind.start_ts = 0;
    pc_mutation m = PUT("k", "1");

    f->ts = 100;
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &blind, &m, 1, fx_ts_fn, f, &cts, &c)), PC_OK);
    assert_int_equal(cts, 101);
    assert_table(f, "write", "k@101 put start=101 short=1\n");
    assert_int_equal(fx_get(f, "k", 101, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "1");
    assert_int_equal(fx_get(f, "k", 100, v, sizeof(v)), PC_NOT_FOUND);
    /* A lock at any timestamp stops it, as it stops any write. */
    pc_txn_meta t = fx_meta(fx_ts(f), "k");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &blind, &m, 1, fx_ts_fn, f, &cts, &c)), PC_LOCKED);
    assert_int_equal(c.lock.start_ts, t.start_ts);
    assert_table(f, "write", "k@101 put start=101 short=1\n");
}

/* The stand-in oracle of a batch: counts calls and what they asked for. */
typedef struct {
    fx *f;
    int calls;
    size_t asked;
    bool fail;
} range_oracle;

static int range_ts(void *arg, size_t count, uint64_t *first)
{
    range_oracle *o = arg;
    o->calls++;
    o->asked = count;
    if (o->fail)
        return -1;
    *first = o->f->ts + 1;
    o->f->ts += count;
    return 0;
}

static void a_batch_of_blind_writes_takes_one_timestamp_each_in_one_call(void **state)
{
    fx *f = *state;
    char v[32];
    pc_mutation a = PUT("a", "1"), b[2] = {PUT("b", "2"), DEL("c")}, a2 = PUT("a", "again");
    pc_blind_write w[3] = {{.m = &a, .n = 1}, {.m = b, .n = 2}, {.m = &a2, .n = 1}};
    pc_blind_write *pw[3] = {&w[0], &w[1], &w[2]};
    range_oracle o = {.f = f};

    f->ts = 100;
    APPLY_BLIND(f->s, pc_one_pc_blind(f->s, pw, 3, range_ts, &o));
    /* One oracle call for the two writes that could hold their keys; the
     * third writes a key the first holds: it waits, with no timestamp. */
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.asked, 2);
    assert_int_equal(w[0].rc, PC_OK);
    assert_int_equal(w[0].commit_ts, 101);
    assert_int_equal(w[1].rc, PC_OK);
    assert_int_equal(w[1].commit_ts, 102);
    assert_int_equal(w[2].rc, PC_LOCKED);
    assert_int_equal(w[2].conflict.lock.start_ts, 0);
    assert_int_equal(w[2].commit_ts, 0);
    assert_table(f, "write",
                 "a@101 put start=101 short=1\nb@102 put start=102 short=2\n"
                 "c@102 delete start=102\n");
    assert_table(f, "lock", "");
    /* Committed, not yet durable: no read may see them, and the key is
     * still busy for the put-off write. */
    assert_int_equal(fx_get(f, "b", 101, v, sizeof(v)), PC_NOT_FOUND);
    pc_buf lv = {0};
    uint64_t cts;
    pc_conflict c;
    assert_int_equal(pc_get(f->s, S("b"), 102, &lv, &cts, &c), PC_LOCKED);
    assert_int_equal(c.lock.start_ts, 0);
    assert_int_equal(pc_wait_in_flight(f->s, &c, 0), PC_LOCKED); /* deadline passed */
    /* The latest read goes under it: a was never there before. */
    assert_int_equal(pc_get_latest(f->s, S("a"), false, &lv, &cts, &c), PC_NOT_FOUND);
    APPLY_BLIND(f->s, pc_one_pc_blind(f->s, &pw[2], 1, range_ts, &o));
    assert_int_equal(w[2].rc, PC_LOCKED);
    /* Their batch was applied and flushed (APPLY_BLIND): let them go. */
    pc_one_pc_blind_durable(f->s, pw, 3);
    assert_int_equal(pc_wait_in_flight(f->s, &c, 0), PC_OK);
    assert_int_equal(pc_get_latest(f->s, S("a"), false, &lv, &cts, &c), PC_OK);
    assert_int_equal(cts, 101);
    pc_buf_free(&lv);
    assert_int_equal(fx_get(f, "b", 102, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "2");
    /* The put-off write goes through now. */
    APPLY_BLIND(f->s, pc_one_pc_blind(f->s, &pw[2], 1, range_ts, &o));
    assert_int_equal(w[2].rc, PC_OK);
    assert_int_equal(w[2].commit_ts, 103);
    pc_one_pc_blind_durable(f->s, &pw[2], 1);
    assert_int_equal(fx_get(f, "a", 103, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "again");
}

static void a_conflict_in_a_batch_fails_only_its_own_write(void **state)
{
    fx *f = *state;
    char v[32];
    pc_conflict c;
    pc_mutation x = PUT("x", "1"), y = PUT("y", "1"), z = PUT("z", "1");
    pc_blind_write w[3] = {{.m = &x, .n = 1}, {.m = &y, .n = 1}, {.m = &z, .n = 1}};
    pc_blind_write *pw[3] = {&w[0], &w[1], &w[2]};
    range_oracle o = {.f = f};

    /* y is locked by a 2PC transaction; z has a version above what the
     * batch's timestamps will be (an oracle that lags behind a write). */
    pc_txn_meta t = fx_meta(fx_ts(f), "y");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &y, 1, NULL)), PC_OK);
    pc_txn_meta late = fx_meta(500, "z");
    pc_mutation z0 = PUT("z", "0");
    uint64_t cts;
    f->ts = 500;
    assert_int_equal(APPLY(f->s, pc_one_pc(f->s, &late, &z0, 1, fx_ts_fn, f, &cts, &c)), PC_OK);
    f->ts = 200;
    APPLY_BLIND(f->s, pc_one_pc_blind(f->s, pw, 3, range_ts, &o));
    assert_int_equal(w[0].rc, PC_OK);
    assert_int_equal(w[1].rc, PC_LOCKED);
    assert_int_equal(w[1].conflict.lock.start_ts, t.start_ts);
    assert_int_equal(w[2].rc, PC_WRITE_CONFLICT);
    pc_one_pc_blind_durable(f->s, pw, 3);
    assert_int_equal(fx_get(f, "x", w[0].commit_ts, v, sizeof(v)), PC_OK);
    assert_int_equal(fx_get(f, "z", 1000, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "0");
}

static void a_batch_without_timestamps_writes_nothing(void **state)
{
    fx *f = *state;
    pc_mutation a = PUT("a", "1"), b = PUT("b", "1");
    pc_blind_write w[2] = {{.m = &a, .n = 1}, {.m = &b, .n = 0}};
    pc_blind_write *pw[2] = {&w[0], &w[1]};
    range_oracle o = {.f = f, .fail = true};

    APPLY_BLIND(f->s, pc_one_pc_blind(f->s, pw, 2, range_ts, &o));
    assert_int_equal(w[0].rc, PC_TS_UNAVAILABLE);
    assert_int_equal(w[1].rc, PC_INVALID); /* no keys */
    assert_int_equal(o.asked, 1);
    assert_table(f, "write", "");
    /* The key was let go. */
    o.fail = false;
    APPLY_BLIND(f->s, pc_one_pc_blind(f->s, pw, 1, range_ts, &o));
    assert_int_equal(w[0].rc, PC_OK);
}

static void latest_read_steps_over_uncommitted_and_rolls_forward_committed(void **state)
{
    fx *f = *state;
    pc_buf v = {0};
    uint64_t cts;
    pc_conflict c;
    pc_liveness live = {.now_ms = pc_now_ms()};
    fx_put_committed(f, "a", "a0", 2, 3);
    fx_put_committed(f, "b", "b0", 4, 5);

    /* In flight, before its commit point: the latest value is still a0. */
    pc_txn_meta t = fx_meta(10, "a");
    pc_mutation m[2] = {PUT("a", "a1"), PUT("b", "b1")};
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 2, NULL)), PC_OK);
    assert_int_equal(fx_get_latest(f->s, S("a"), &live, &v, &cts, &c), PC_OK);
    assert_memory_equal(v.data, "a0", 2);
    assert_int_equal(fx_get_latest(f->s, S("b"), &live, &v, &cts, &c), PC_OK);
    assert_memory_equal(v.data, "b0", 2);
    /* Past the commit point: the secondary is rolled forward and read. */
    pc_slice a = S("a");
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &a, 1, 10, 11)), PC_OK);
    assert_int_equal(fx_get_latest(f->s, S("b"), &live, &v, &cts, &c), PC_OK);
    assert_memory_equal(v.data, "b1", 2);
    assert_int_equal(cts, 11);
    assert_table(f, "lock", "");
    pc_buf_free(&v);
}

/* The engine's part of that: a pure read that hands the lock it met to
 * the caller (the resolution is the service's, above the engine: the
 * primary may be in another Raft group), and steps over it when asked. */
static void latest_read_returns_the_lock_it_meets_and_writes_nothing(void **state)
{
    fx *f = *state;
    pc_buf v = {0};
    uint64_t cts;
    pc_conflict c;
    fx_put_committed(f, "a", "a0", 2, 3);
    fx_put_committed(f, "b", "b0", 4, 5);
    pc_txn_meta t = fx_meta(10, "a");
    pc_mutation m[2] = {PUT("a", "a1"), PUT("b", "b1")};
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 2, NULL)), PC_OK);
    pc_slice a = S("a");
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &a, 1, 10, 11)), PC_OK);

    /* b's primary committed, but the read does not roll b forward. */
    assert_int_equal(pc_get_latest(f->s, S("b"), false, &v, &cts, &c), PC_LOCKED);
    assert_int_equal(v.len, 0);
    assert_int_equal(c.lock.start_ts, 10);
    assert_memory_equal(c.lock.key.data, "b", 1);
    assert_memory_equal(c.lock.primary.data, "a", 1);
    assert_table(f, "lock", "b@10 primary=a put short=b1\n");
    /* Stepping over it: the newest committed value below it. */
    assert_int_equal(pc_get_latest(f->s, S("b"), true, &v, &cts, &c), PC_OK);
    assert_memory_equal(v.data, "b0", 2);
    assert_int_equal(cts, 5);
    assert_table(f, "lock", "b@10 primary=a put short=b1\n");
    /* The primary is committed: no lock in its way. */
    assert_int_equal(pc_get_latest(f->s, S("a"), false, &v, &cts, &c), PC_OK);
    assert_memory_equal(v.data, "a1", 2);
    assert_int_equal(cts, 11);
    pc_buf_free(&v);
}

static void scan_is_blocked_only_by_locks_in_what_it_returns(void **state)
{
    fx *f = *state;
    pc_items it = {0};
    pc_conflict c;
    fx_put_committed(f, "a", "1", 2, 3);
    fx_put_committed(f, "b", "2", 4, 5);
    fx_put_committed(f, "m", "3", 6, 7);
    pc_txn_meta t = fx_meta(10, "m");
    pc_mutation m = PUT("m", "4");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);

    assert_int_equal(pc_scan(f->s, S("a"), S("c"), 20, 100, &it, &c), PC_OK);
    assert_int_equal(it.n, 2);
    assert_int_equal(pc_scan(f->s, S("a"), S("z"), 20, 100, &it, &c), PC_LOCKED);
    assert_memory_equal(c.lock.key.data, "m", 1);
    /* The limit stops before m: the lock does not matter. */
    assert_int_equal(pc_scan(f->s, S("a"), S("z"), 20, 2, &it, &c), PC_OK);
    assert_int_equal(it.n, 2);
    assert_int_equal(it.more, 1);
    /* Below the lock's start_ts the scan reads through it. */
    assert_int_equal(pc_scan(f->s, S(""), S(""), 9, 100, &it, &c), PC_OK);
    assert_int_equal(it.n, 3);
    assert_memory_equal(it.items[2].key.data, "m", 1);
    assert_memory_equal(it.items[2].value.data, "3", 1);
    assert_int_equal(it.items[2].commit_ts, 7);
    pc_items_free(&it);
}

static void bad_arguments_are_refused(void **state)
{
    fx *f = *state;
    char big[PC_KEY_MAX + 1];
    memset(big, 'k', sizeof(big));
    pc_txn_meta t = fx_meta(10, "a");
    pc_mutation empty = {.op = PC_OP_PUT, .key = {"", 0}, .value = S("v")};
    pc_mutation huge = {.op = PC_OP_PUT, .key = {big, sizeof(big)}, .value = S("v")};
    pc_slice k = S("a");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &empty, 1, NULL)), PC_INVALID);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &huge, 1, NULL)), PC_INVALID);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &k, 1, 10, 10)), PC_INVALID);
    assert_int_equal(fx_get(f, "a", 0, NULL, 0), PC_INVALID);
    /* Largest key accepted. */
    pc_mutation max = {.op = PC_OP_PUT, .key = {big, PC_KEY_MAX}, .value = S("v")};
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &max, 1, NULL)), PC_OK);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(prewrite_aborts_on_a_lock_at_any_timestamp),
        T(prewrite_aborts_on_a_write_after_start),
        T(a_conflict_on_one_key_writes_nothing),
        T(read_blocked_by_a_lock_at_or_below_its_ts_only),
        T(no_partial_transaction_is_ever_visible),
        T(a_rollback_record_makes_a_late_prewrite_fail),
        T(rollback_removes_the_lock_and_data),
        T(prewrite_and_commit_are_idempotent),
        T(rollback_of_a_committed_key_fails),
        T(commit_without_a_lock_fails),
        T(check_txn_status_decides_by_the_primary),
        T(a_dead_owner_is_recognised_at_once),
        T(one_pc_commits_in_one_step_with_the_same_checks),
        T(one_pc_without_a_timestamp_writes_nothing),
        T(a_blind_write_commits_at_its_one_timestamp),
        T(a_batch_of_blind_writes_takes_one_timestamp_each_in_one_call),
        T(a_conflict_in_a_batch_fails_only_its_own_write),
        T(a_batch_without_timestamps_writes_nothing),
        T(latest_read_steps_over_uncommitted_and_rolls_forward_committed),
        T(latest_read_returns_the_lock_it_meets_and_writes_nothing),
        T(scan_is_blocked_only_by_locks_in_what_it_returns),
        T(bad_arguments_are_refused),
    };
    return cmocka_run_group_tests_name("engine: conflicts and protocol rules", tests, NULL, NULL);
}
