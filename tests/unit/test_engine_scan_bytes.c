/*
 * test_engine_scan_bytes.c — pc_scan_bounded (issue #18): a scan stops at
 * its byte budget as it does at its count limit (more = 1, locks past the
 * stop do not matter), never before its first item, and a client that
 * goes on from the last key reads every key once.
 */
#include "engine_fixture.h"

enum { NKEYS = 10, VLEN = 100 };

/* k0 .. k9, each a VLEN-byte value of its own letter, committed at 3 .. */
static void load(fx *f)
{
    char key[16], val[VLEN + 1];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof key, "k%d", i);
        memset(val, 'a' + i, VLEN);
        val[VLEN] = '\0';
        fx_put_committed(f, key, val, (uint64_t)(2 + 2 * i), (uint64_t)(3 + 2 * i));
    }
}

static void stops_at_the_byte_budget(void **state)
{
    fx *f = *state;
    pc_items it = {0};
    pc_conflict c;
    load(f);

    /* Each item is 2 + 100 bytes of arena: past 250 after the third. */
    assert_int_equal(pc_scan_bounded(f->s, S("k"), S("l"), 100, 100, 250, &it, &c), PC_OK);
    assert_int_equal(it.n, 3);
    assert_int_equal(it.more, 1);
    assert_memory_equal(it.items[2].key.data, "k2", 2);
    assert_int_equal(it.items[2].value.len, VLEN);
    assert_int_equal(((const char *)it.items[2].value.data)[0], 'c');

    /* A budget smaller than one item still gives that item. */
    assert_int_equal(pc_scan_bounded(f->s, S("k"), S("l"), 100, 100, 1, &it, &c), PC_OK);
    assert_int_equal(it.n, 1);
    assert_int_equal(it.more, 1);

    /* Enough budget: everything, and nothing more to come. */
    assert_int_equal(pc_scan_bounded(f->s, S("k"), S("l"), 100, 100, NKEYS * 102, &it, &c),
                     PC_OK);
    assert_int_equal(it.n, NKEYS);
    assert_int_equal(it.more, 0);
    pc_items_free(&it);
}

static void going_on_from_the_last_key_reads_each_key_once(void **state)
{
    fx *f = *state;
    pc_items it = {0};
    pc_conflict c;
    char start[16] = "k";
    size_t slen = 1;
    int seen = 0, pages = 0;
    load(f);

    for (;;) {
        assert_int_equal(pc_scan_bounded(f->s, (pc_slice){start, slen}, S("l"), 100, 100, 250,
                                         &it, &c),
                         PC_OK);
        pages++;
        for (size_t i = 0; i < it.n; i++, seen++) {
            char want[16];
            snprintf(want, sizeof want, "k%d", seen);
            assert_int_equal(it.items[i].key.len, strlen(want));
            assert_memory_equal(it.items[i].key.data, want, strlen(want));
        }
        if (!it.more)
            break;
        /* The next start: just past the last key (key + "\0"). */
        pc_slice last = it.items[it.n - 1].key;
        memcpy(start, last.data, last.len);
        start[last.len] = '\0';
        slen = last.len + 1;
    }
    assert_int_equal(seen, NKEYS);
    assert_int_equal(pages, 4); /* 3 + 3 + 3 + 1 */
    pc_items_free(&it);
}

static void a_lock_past_the_stop_does_not_matter(void **state)
{
    fx *f = *state;
    pc_items it = {0};
    pc_conflict c;
    load(f);
    pc_txn_meta t = fx_meta(50, "k9");
    pc_mutation m = PUT("k9", "locked");
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);

    assert_int_equal(pc_scan_bounded(f->s, S("k"), S("l"), 100, 100, 250, &it, &c), PC_OK);
    assert_int_equal(it.n, 3);
    assert_int_equal(pc_scan_bounded(f->s, S("k"), S("l"), 100, 100, SIZE_MAX, &it, &c),
                     PC_LOCKED);
    assert_memory_equal(c.lock.key.data, "k9", 2);
    pc_items_free(&it);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(stops_at_the_byte_budget),
        T(going_on_from_the_last_key_reads_each_key_once),
        T(a_lock_past_the_stop_does_not_matter),
    };
    return cmocka_run_group_tests_name("engine: scans bounded by bytes", tests, NULL, NULL);
}
