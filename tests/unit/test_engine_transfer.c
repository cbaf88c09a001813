/*
 * The paper's worked example (its Figure 4): Bob
 * sends Joe $7. The contents of the lock, write and data columns are
 * asserted after each step, first with short values (kept in the lock and
 * write records) and then with long ones (kept in data).
 */
#include "engine_fixture.h"

static const pc_slice BOB = {"Bob", 3}, JOE = {"Joe", 3};

/* Before: Bob has $10 and Joe $2, written at 5 and committed at 6. */
static void seed_balances(fx *f, const char *bob, const char *joe)
{
    pc_txn_meta t = fx_meta(5, "Bob");
    pc_mutation m[2] = {PUT("Bob", bob), PUT("Joe", joe)};
    pc_slice keys[2] = {BOB, JOE};

    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, m, 2, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, keys, 2, 5, 6)), PC_OK);
}

static void transfer_short_values(void **state)
{
    fx *f = *state;
    char v[64];
    seed_balances(f, "$10", "$2");
    assert_table(f, "write", "Bob@6 put start=5 short=$10\nJoe@6 put start=5 short=$2\n");
    assert_table(f, "lock", "");

    /* 1. Prewrite the primary: Bob's lock, which is the primary. */
    pc_txn_meta t = fx_meta(7, "Bob");
    pc_mutation bob = PUT("Bob", "$3"), joe = PUT("Joe", "$9");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &bob, 1, NULL)), PC_OK);
    assert_table(f, "lock", "Bob@7 primary=Bob put short=$3\n");
    assert_table(f, "data", "");
    /* A snapshot above the lock must wait; one below it reads $10. */
    assert_int_equal(fx_get(f, "Bob", 8, v, sizeof(v)), PC_LOCKED);
    assert_int_equal(fx_get(f, "Bob", 6, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "$10");

    /* 2. Prewrite the secondary: Joe's lock points at Bob. */
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &joe, 1, NULL)), PC_OK);
    assert_table(f, "lock", "Bob@7 primary=Bob put short=$3\nJoe@7 primary=Bob put short=$9\n");

    /* 3. Commit the primary at 8: the commit point. */
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &BOB, 1, 7, 8)), PC_OK);
    assert_table(f, "lock", "Joe@7 primary=Bob put short=$9\n");
    assert_table(f, "write", "Bob@8 put start=7 short=$3\nBob@6 put start=5 short=$10\n"
                             "Joe@6 put start=5 short=$2\n");
    assert_int_equal(fx_get(f, "Bob", 9, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "$3");
    assert_int_equal(fx_get(f, "Joe", 9, v, sizeof(v)), PC_LOCKED);

    /* 4. Commit the secondary. */
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &JOE, 1, 7, 8)), PC_OK);
    assert_table(f, "lock", "");
    assert_table(f, "write", "Bob@8 put start=7 short=$3\nBob@6 put start=5 short=$10\n"
                             "Joe@8 put start=7 short=$9\nJoe@6 put start=5 short=$2\n");
    assert_int_equal(fx_get(f, "Joe", 9, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "$9");
    /* The old snapshot still reads the old balances. */
    assert_int_equal(fx_get(f, "Bob", 7, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "$10");
    assert_int_equal(fx_get(f, "Joe", 7, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "$2");
}

/* Values past PC_SHORT_VALUE_MAX: the data column holds them at start_ts,
 * the write record points at it. */
static void transfer_long_values(void **state)
{
    fx *f = *state;
    char b10[300], j2[300], b3[300], j9[300];
    memset(b10, 'x', sizeof(b10));
    memcpy(b10, "$10", 3);
    memcpy(j2, b10, sizeof(j2));
    memcpy(j2, "$2.", 3);
    memcpy(b3, b10, sizeof(b3));
    memcpy(b3, "$3.", 3);
    memcpy(j9, b10, sizeof(j9));
    memcpy(j9, "$9.", 3);
    b10[299] = j2[299] = b3[299] = j9[299] = '\0';

    seed_balances(f, b10, j2);
    assert_table(f, "data", "Bob@5=$10xxxxx..(299)\nJoe@5=$2.xxxxx..(299)\n");
    assert_table(f, "write", "Bob@6 put start=5\nJoe@6 put start=5\n");

    pc_txn_meta t = fx_meta(7, "Bob");
    pc_mutation bob = PUT("Bob", b3), joe = PUT("Joe", j9);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &bob, 1, NULL)), PC_OK);
    assert_table(f, "lock", "Bob@7 primary=Bob put\n");
    assert_table(f, "data", "Bob@7=$3.xxxxx..(299)\nBob@5=$10xxxxx..(299)\nJoe@5=$2.xxxxx..(299)\n");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &joe, 1, NULL)), PC_OK);
    assert_table(f, "lock", "Bob@7 primary=Bob put\nJoe@7 primary=Bob put\n");
    assert_table(f, "data", "Bob@7=$3.xxxxx..(299)\nBob@5=$10xxxxx..(299)\n"
                            "Joe@7=$9.xxxxx..(299)\nJoe@5=$2.xxxxx..(299)\n");
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &BOB, 1, 7, 8)), PC_OK);
    assert_table(f, "lock", "Joe@7 primary=Bob put\n");
    assert_table(f, "write", "Bob@8 put start=7\nBob@6 put start=5\nJoe@6 put start=5\n");
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &JOE, 1, 7, 8)), PC_OK);
    assert_table(f, "lock", "");
    assert_table(f, "write", "Bob@8 put start=7\nBob@6 put start=5\n"
                             "Joe@8 put start=7\nJoe@6 put start=5\n");

    char v[400];
    assert_int_equal(fx_get(f, "Joe", 9, v, sizeof(v)), PC_OK);
    assert_string_equal(v, j9);
    assert_int_equal(fx_get(f, "Bob", 7, v, sizeof(v)), PC_OK);
    assert_string_equal(v, b10);
}

/* A delete is a write record of its own; the snapshot below still reads. */
static void delete_is_a_version(void **state)
{
    fx *f = *state;
    char v[64];
    seed_balances(f, "$10", "$2");
    pc_txn_meta t = fx_meta(7, "Joe");
    pc_mutation d = DEL("Joe");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &d, 1, NULL)), PC_OK);
    assert_table(f, "lock", "Joe@7 primary=Joe delete\n");
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &JOE, 1, 7, 8)), PC_OK);
    assert_table(f, "write", "Bob@6 put start=5 short=$10\n"
                             "Joe@8 delete start=7\nJoe@6 put start=5 short=$2\n");
    assert_int_equal(fx_get(f, "Joe", 9, v, sizeof(v)), PC_NOT_FOUND);
    assert_int_equal(fx_get(f, "Joe", 7, v, sizeof(v)), PC_OK);
    assert_string_equal(v, "$2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(transfer_short_values, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(transfer_long_values, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(delete_is_a_version, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("engine: Bob pays Joe", tests, NULL, NULL);
}
