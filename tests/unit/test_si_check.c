/*
 * test_si_check.c — the snapshot-isolation checker (tests/lib/si_check.c)
 * on hand-made histories: a correct one passes, and each kind of anomaly
 * it exists to catch is reported. The integration tests trust it to say
 * "0 anomalies" only because these show it says otherwise when it must.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "si_check.h"

/* A transaction: start, reads "key=value@cts" or "key=-", writes "key=value",
 * outcome. */
static long txn(si_history *h, uint64_t start, si_outcome out, uint64_t commit,
                const char *const reads[], const char *const writes[])
{
    long t = si_begin(h, start);
    assert_true(t >= 0);
    for (size_t i = 0; reads != NULL && reads[i] != NULL; i++) {
        char key[64], value[64];
        unsigned long long cts = 0;
        if (sscanf(reads[i], "%63[^=]=%63[^@]@%llu", key, value, &cts) == 3)
            si_read(h, t, key, true, value, cts);
        else if (sscanf(reads[i], "%63[^=]=-", key) == 1)
            si_read(h, t, key, false, NULL, 0);
        else
            fail_msg("bad read %s", reads[i]);
    }
    for (size_t i = 0; writes != NULL && writes[i] != NULL; i++) {
        char key[64], value[64];
        assert_int_equal(sscanf(writes[i], "%63[^=]=%63s", key, value), 2);
        si_write(h, t, key, value);
    }
    si_end(h, t, out, commit);
    return t;
}

#define R(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NONE NULL

/* x0 committed at 10 by T0; T1 (start 12) reads it and writes x1 at 15;
 * T2 (start 20) sees x1; T3 (start 5) saw nothing; T4 aborted; T5's
 * outcome unknown and never seen. */
static si_history *good(void)
{
    si_history *h = si_new(32);
    txn(h, 1, SI_COMMITTED, 10, NONE, R("x=x0", "y=y0"));
    txn(h, 12, SI_COMMITTED, 15, R("x=x0@10"), R("x=x1"));
    txn(h, 20, SI_COMMITTED, 21, R("x=x1@15", "y=y0@10"), NONE);
    txn(h, 5, SI_COMMITTED, 6, R("x=-"), NONE);
    txn(h, 13, SI_ABORTED, 0, R("x=x0@10"), R("x=x2"));
    txn(h, 22, SI_UNKNOWN, 0, R("y=y0@10"), R("y=y9"));
    return h;
}

static void a_correct_history_passes(void **state)
{
    (void)state;
    si_history *h = good();
    si_report r = si_check(h);
    assert_int_equal(r.anomalies, 0);
    assert_int_equal(r.txns, 6);
    assert_int_equal(r.committed, 4);
    assert_int_equal(r.aborted, 1);
    assert_int_equal(r.unknown, 1);
    assert_int_equal(r.reads, 6);
    si_free(h);
}

static unsigned anomalies_with(const char *const reads[], const char *const writes[],
                               uint64_t start, si_outcome out, uint64_t commit)
{
    si_history *h = good();
    txn(h, start, out, commit, reads, writes);
    unsigned n = si_check(h).anomalies;
    si_free(h);
    return n;
}

static void each_anomaly_is_reported(void **state)
{
    (void)state;
    /* A stale read: x1 committed at 15 is below 30, yet x0 came back. */
    assert_int_equal(anomalies_with(R("x=x0@10"), NONE, 30, SI_COMMITTED, 31), 1);
    /* A committed version missed: nothing found at 30. */
    assert_int_equal(anomalies_with(R("x=-"), NONE, 30, SI_COMMITTED, 31), 1);
    /* A version from the future: x1 (15) read at start 14. */
    assert_int_equal(anomalies_with(R("x=x1@15"), NONE, 14, SI_COMMITTED, 31) >= 1, 1);
    /* An aborted write read. */
    assert_int_equal(anomalies_with(R("x=x2@14"), NONE, 30, SI_COMMITTED, 31) >= 1, 1);
    /* A value nobody wrote, and a known writer's wrong commit_ts. */
    assert_int_equal(anomalies_with(R("x=zz@14"), NONE, 30, SI_COMMITTED, 31) >= 1, 1);
    assert_int_equal(anomalies_with(R("x=x1@16"), NONE, 30, SI_COMMITTED, 31) >= 1, 1);
    /* A lost update: started at 11 (before x1's commit at 15), wrote x,
     * committed at 25 (after T2's start, so T2's read stays right). */
    assert_int_equal(anomalies_with(NONE, R("x=x3"), 11, SI_COMMITTED, 25), 1);
    /* The same, with the write seen through an unknown outcome. */
    {
        si_history *h = good();
        txn(h, 11, SI_UNKNOWN, 0, NONE, R("x=x4"));
        txn(h, 40, SI_COMMITTED, 41, R("x=x4@25"), NONE);
        assert_int_equal(si_check(h).anomalies, 1);
        si_free(h);
    }
}

/* An unknown outcome seen committed counts as committed at the commit_ts
 * the read showed, for all its keys: a later reader that misses its other
 * key saw a fractured commit. */
static void an_unknown_commit_seen_must_be_whole(void **state)
{
    (void)state;
    si_history *h = good();
    txn(h, 30, SI_UNKNOWN, 0, NONE, R("x=x5", "y=y5"));
    txn(h, 40, SI_COMMITTED, 41, R("x=x5@33", "y=y5@33"), NONE);
    si_report r = si_check(h);
    assert_int_equal(r.anomalies, 0);
    assert_int_equal(r.inferred, 1);
    txn(h, 50, SI_COMMITTED, 51, R("x=x5@33", "y=y0@10"), NONE);
    assert_int_equal(si_check(h).anomalies, 1);
    si_free(h);

    h = good(); /* two reads disagree on its commit_ts */
    txn(h, 30, SI_UNKNOWN, 0, NONE, R("x=x6"));
    txn(h, 40, SI_COMMITTED, 41, R("x=x6@33"), NONE);
    txn(h, 42, SI_COMMITTED, 43, R("x=x6@34"), NONE);
    assert_true(si_check(h).anomalies >= 1);
    si_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_correct_history_passes),
        cmocka_unit_test(each_anomaly_is_reported),
        cmocka_unit_test(an_unknown_commit_seen_must_be_whole),
    };
    return cmocka_run_group_tests_name("snapshot-isolation checker", tests, NULL, NULL);
}
