/*
 * Threads, each with its own session, move money between accounts with
 * 2PC and one-phase commits while a reader takes snapshots. Nothing is
 * serialised outside the engine: conflicts surface as WT_ROLLBACK inside,
 * as PC_LOCKED / PC_WRITE_CONFLICT outside, and the clients retry. Every
 * snapshot must sum to the total; at the end no lock remains and the
 * committed transfers account for every balance.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "engine_fixture.h"

#define ACCOUNTS 12
#define WRITERS 4
#define TRANSFERS 250 /* per writer */
#define START 1000

static atomic_uint_fast64_t oracle = 10;
static atomic_int writers_done;
static pc_engine *engine;

static uint64_t next_ts(void) { return atomic_fetch_add(&oracle, 1) + 1; }
static int ts_fn(void *arg, uint64_t *ts)
{
    (void)arg;
    *ts = next_ts();
    return 0;
}

static void account(int i, char *buf) { snprintf(buf, 16, "acct%02d", i % 100); }

static void backoff(unsigned attempt)
{
    struct timespec t = {0, (long)(20000u << (attempt < 6 ? attempt : 6))};
    nanosleep(&t, NULL);
}

/* Read a balance at ts, waiting out live locks. false: gave up. */
static bool read_balance(pc_session *s, const char *key, uint64_t ts, long *out)
{
    for (unsigned attempt = 0; attempt < 200; attempt++) {
        pc_buf v = {0};
        uint64_t cts;
        pc_conflict c;
        pc_rc rc = pc_get(s, S(key), ts, &v, &cts, &c);
        if (rc == PC_OK) {
            char tmp[32] = {0};
            memcpy(tmp, v.data, v.len < 31 ? v.len : 31);
            *out = strtol(tmp, NULL, 10);
            pc_buf_free(&v);
            return true;
        }
        pc_buf_free(&v);
        assert_int_equal(rc, PC_LOCKED);
        backoff(attempt);
    }
    return false;
}

typedef struct {
    int id;
    unsigned seed;
    int committed, conflicts;
} writer;

static bool transfer(pc_session *s, writer *w)
{
    int a = rand_r(&w->seed) % ACCOUNTS, b = (a + 1 + rand_r(&w->seed) % (ACCOUNTS - 1)) % ACCOUNTS;
    char ka[16], kb[16], va[24], vb[24];
    long ba, bb;
    uint64_t start = next_ts();
    account(a, ka);
    account(b, kb);
    if (!read_balance(s, ka, start, &ba) || !read_balance(s, kb, start, &bb))
        return false;
    long amount = rand_r(&w->seed) % 50;
    snprintf(va, sizeof(va), "%ld", ba - amount);
    snprintf(vb, sizeof(vb), "%ld", bb + amount);
    pc_mutation m[2] = {PUT(ka, va), PUT(kb, vb)};
    pc_slice keys[2] = {S(ka), S(kb)};
    pc_txn_meta t = {.start_ts = start, .primary = keys[0], .owner = S("w"),
                     .wall_ms = pc_now_ms(), .ttl_ms = 60000};
    pc_conflict c;

    if (rand_r(&w->seed) % 2) {
        uint64_t cts;
        pc_rc rc = APPLY(s, pc_one_pc(s, &t, m, 2, ts_fn, NULL, &cts, &c));
        if (rc != PC_OK)
            assert_true(rc == PC_LOCKED || rc == PC_WRITE_CONFLICT);
        return rc == PC_OK;
    }
    pc_rc rc = APPLY(s, pc_prewrite(s, &t, m, 1, &c));
    if (rc == PC_OK)
        rc = APPLY(s, pc_prewrite(s, &t, m + 1, 1, &c));
    if (rc != PC_OK) {
        assert_true(rc == PC_LOCKED || rc == PC_WRITE_CONFLICT);
        assert_int_equal(APPLY(s, pc_rollback(s, keys, 2, start)), PC_OK);
        return false;
    }
    uint64_t cts = next_ts();
    assert_int_equal(APPLY(s, pc_commit(s, keys, 1, start, cts)), PC_OK);
    assert_int_equal(APPLY(s, pc_commit(s, keys + 1, 1, start, cts)), PC_OK);
    return true;
}

static void *writer_main(void *arg)
{
    writer *w = arg;
    pc_session *s;
    assert_int_equal(pc_session_open(engine, &s), PC_OK);
    for (int i = 0; i < TRANSFERS; i++) {
        unsigned attempt = 0;
        while (!transfer(s, w)) {
            w->conflicts++;
            backoff(attempt++ % 8);
        }
        w->committed++;
    }
    pc_session_close(s);
    atomic_fetch_add(&writers_done, 1);
    return NULL;
}

typedef struct {
    int snapshots;
} reader;

static void *reader_main(void *arg)
{
    reader *r = arg;
    pc_session *s;
    assert_int_equal(pc_session_open(engine, &s), PC_OK);
    while (atomic_load(&writers_done) < WRITERS && r->snapshots < 100000) {
        uint64_t ts = next_ts();
        pc_items it = {0};
        pc_conflict c;
        pc_rc rc;
        unsigned attempt = 0;
        while ((rc = pc_scan(s, S("acct"), S("acct~"), ts, 100, &it, &c)) == PC_LOCKED)
            backoff(attempt++ % 8);
        assert_int_equal(rc, PC_OK);
        assert_int_equal(it.n, ACCOUNTS);
        long sum = 0;
        for (size_t i = 0; i < it.n; i++) {
            char tmp[32] = {0};
            memcpy(tmp, it.items[i].value.data, it.items[i].value.len < 31 ? it.items[i].value.len : 31);
            sum += strtol(tmp, NULL, 10);
        }
        assert_int_equal(sum, (long)ACCOUNTS * START);
        pc_items_free(&it);
        r->snapshots++;
    }
    pc_session_close(s);
    return NULL;
}

static void transfers_conserve_the_total(void **state)
{
    fx *f = *state;
    engine = f->e;
    pc_mutation m[ACCOUNTS];
    pc_slice keys[ACCOUNTS];
    char names[ACCOUNTS][16], vals[ACCOUNTS][16];
    for (int i = 0; i < ACCOUNTS; i++) {
        account(i, names[i]);
        snprintf(vals[i], sizeof(vals[i]), "%d", START);
        m[i] = PUT(names[i], vals[i]);
        keys[i] = S(names[i]);
    }
    pc_txn_meta t = fx_meta(next_ts(), "acct00");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, ACCOUNTS, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, keys, ACCOUNTS, t.start_ts, next_ts())), PC_OK);

    pthread_t th[WRITERS + 1];
    writer w[WRITERS];
    reader r = {0};
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){.id = i, .seed = (unsigned)(i * 7919 + 1)};
        assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
    }
    assert_int_equal(pthread_create(&th[WRITERS], NULL, reader_main, &r), 0);
    for (int i = 0; i <= WRITERS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);

    int committed = 0, conflicts = 0;
    for (int i = 0; i < WRITERS; i++) {
        committed += w[i].committed;
        conflicts += w[i].conflicts;
    }
    print_message("committed %d transfers, %d retries, %d snapshots checked\n", committed,
                  conflicts, r.snapshots);
    assert_int_equal(committed, WRITERS * TRANSFERS);
    assert_true(r.snapshots > 0);
    assert_table(f, "lock", "");

    /* Latest reads agree, and so does a reopened store. */
    for (int pass = 0; pass < 2; pass++) {
        long sum = 0;
        for (int i = 0; i < ACCOUNTS; i++) {
            long b;
            assert_true(read_balance(f->s, names[i], next_ts(), &b));
            sum += b;
        }
        assert_int_equal(sum, (long)ACCOUNTS * START);
        fx_reopen(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(transfers_conserve_the_total, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("engine: concurrent transfers", tests, NULL, NULL);
}
