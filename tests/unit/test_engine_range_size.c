/*
 * test_engine_range_size.c — pc_range_size (engine/range_size.c: what a
 * region's split check reads): the bytes of a range are those of its keys'
 * rows in the data and write tables and no other key's, growing with long
 * values (kept in the data table) and with versions; the middle key is the
 * one whose rows take the count past half, so each side holds about half
 * the keys when they are alike and a key of long values moves it, and it is
 * never the range's first key (a first key of most of the bytes: the one
 * after it); a range of one key, or of none, has no middle; the bounds are
 * user keys, a prefix of another key sorting before it.
 */
#include "engine_fixture.h"
#include "engine_admin.h"

#define N 40

/* k00 .. k39, short values (in the write rows), committed at 3, 5, ... */
static void load(fx *f, const char *value)
{
    char key[16];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "k%02d", i);
        fx_put_committed(f, key, value, (uint64_t)(2 + 2 * i), (uint64_t)(3 + 2 * i));
    }
}

static pc_range_stats size_of(fx *f, const char *start, const char *end)
{
    pc_range_stats st = {0};
    pc_slice e = end != NULL ? S(end) : (pc_slice){NULL, 0};
    assert_int_equal(pc_range_size(f->s, S(start), e, &st), PC_OK);
    return st;
}

static bool middle_is(const pc_range_stats *st, const char *want)
{
    return st->middle.len == strlen(want) && memcmp(st->middle.data, want, st->middle.len) == 0;
}

static void the_size_and_middle_of_a_range(void **state)
{
    fx *f = *state;
    pc_range_stats all = size_of(f, "", NULL);
    assert_int_equal(all.bytes, 0); /* nothing yet */
    assert_int_equal(all.keys, 0);
    assert_int_equal(all.middle.len, 0);
    load(f, "v");
    all = size_of(f, "", NULL);
    assert_int_equal(all.keys, N);
    assert_true(all.bytes > 0);
    assert_true(middle_is(&all, "k20")); /* alike keys: half on each side */
    /* Two halves add up to the whole; each has its own middle. */
    pc_range_stats lo = size_of(f, "", "k20"), hi = size_of(f, "k20", NULL);
    assert_int_equal(lo.keys + hi.keys, N);
    assert_int_equal(lo.bytes + hi.bytes, all.bytes);
    assert_true(middle_is(&lo, "k10"));
    assert_true(middle_is(&hi, "k30"));
    /* One key: no middle; none: nothing. A prefix sorts before its keys. */
    pc_range_stats one = size_of(f, "k05", "k06");
    assert_int_equal(one.keys, 1);
    assert_int_equal(one.middle.len, 0);
    pc_range_stats none = size_of(f, "k05x", "k06");
    assert_int_equal(none.keys, 0);
    assert_int_equal(none.bytes, 0);
    pc_range_stats prefix = size_of(f, "k0", "k1");
    assert_int_equal(prefix.keys, 10);
    pc_buf_free(&all.middle);
    pc_buf_free(&lo.middle);
    pc_buf_free(&hi.middle);
    pc_buf_free(&one.middle);
    pc_buf_free(&none.middle);
    pc_buf_free(&prefix.middle);
}

static void long_values_and_versions_count(void **state)
{
    fx *f = *state;
    load(f, "v");
    pc_range_stats before = size_of(f, "", NULL);
    /* A long value goes to the data table: its bytes count too. */
    char big[4001];
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    fx_put_committed(f, "k39", big, 200, 201);
    pc_range_stats after = size_of(f, "", NULL);
    assert_true(after.bytes >= before.bytes + 4000);
    assert_int_equal(after.keys, N);
    /* Most bytes are now k39's: the middle moves up to it. */
    assert_true(middle_is(&after, "k39"));
    /* The first key of most of the bytes: split after it. */
    char bigger[10001];
    memset(bigger, 'c', sizeof bigger - 1);
    bigger[sizeof bigger - 1] = '\0';
    fx_put_committed(f, "k00", bigger, 250, 251);
    pc_range_stats first = size_of(f, "", NULL);
    assert_true(middle_is(&first, "k01"));
    pc_buf_free(&first.middle);
    /* Versions of one key: more bytes, one key, no middle of its own. */
    for (int i = 0; i < 10; i++)
        fx_put_committed(f, "k00", "again", (uint64_t)(300 + 2 * i), (uint64_t)(301 + 2 * i));
    pc_range_stats k0 = size_of(f, "k00", "k01");
    assert_int_equal(k0.keys, 1);
    assert_int_equal(k0.middle.len, 0);
    assert_true(k0.bytes > 10 * 5);
    pc_buf_free(&before.middle);
    pc_buf_free(&after.middle);
    pc_buf_free(&k0.middle);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(the_size_and_middle_of_a_range, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(long_values_and_versions_count, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
