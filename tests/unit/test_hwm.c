/*
 * test_hwm.c — oracle/hwm (the persisted high-water mark) and oracle/tso
 * (allocation over it), in-process: the format, corruption, the lock, and
 * that allocation never passes the durable mark.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "hwm.h"
#include "testlib.h"
#include "tso.h"

static void test_format_round_trips_and_rejects_damage(void **state)
{
    (void)state;
    char text[128];
    int n = hwm_format(123456789, text, sizeof text);
    assert_true(n > 0);
    uint64_t v = 0;
    assert_int_equal(hwm_parse(text, (size_t)n, &v), 0);
    assert_true(v == 123456789);
    for (int i = 0; i < n; i++) {          /* any single changed byte is caught */
        char bad[128];
        memcpy(bad, text, (size_t)n);
        bad[i] ^= 0x01;
        if (hwm_parse(bad, (size_t)n, &v) == 0)
            fail_msg("damage at byte %d not detected", i);
    }
    assert_int_equal(hwm_parse(text, (size_t)n - 1, &v), -1);  /* truncated */
    assert_int_equal(hwm_parse("", 0, &v), -1);
    assert_int_equal(hwm_format(0, text, 10), -1);              /* too small */
}

static void test_persist_then_reopen(void **state)
{
    (void)state;
    char *dir = tl_mkdtemp("hwm");
    char sub[600];
    snprintf(sub, sizeof sub, "%s/a/b", dir);   /* created on open */
    hwm_store *s;
    uint64_t mark = 99;
    char err[256];
    assert_int_equal(hwm_open(sub, &s, &mark, err, sizeof err), 0);
    assert_true(mark == 0);

    /* A second opener is refused while the first holds the lock. */
    hwm_store *s2;
    assert_int_equal(hwm_open(sub, &s2, &mark, err, sizeof err), -1);
    assert_non_null(strstr(err, "in use"));

    unsigned fsyncs = 0;
    assert_int_equal(hwm_persist(s, 5000, &fsyncs, err, sizeof err), 0);
    assert_int_equal(fsyncs, 2);
    assert_int_equal(hwm_persist(s, 9000, NULL, err, sizeof err), 0);
    hwm_close(s);

    /* A leftover tmp file from a crash mid-persist is ignored. */
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", sub, HWM_STATE_FILE);
    assert_int_equal(tl_write_file(tmp, "junk", 4), 0);
    assert_int_equal(hwm_open(sub, &s, &mark, err, sizeof err), 0);
    assert_true(mark == 9000);
    assert_int_not_equal(access(tmp, F_OK), 0);
    hwm_close(s);
    tl_rmtree(dir);
    free(dir);
}

static void test_tso_never_passes_the_durable_mark(void **state)
{
    (void)state;
    char *dir = tl_mkdtemp("tso");
    tso *t;
    char err[256];
    assert_int_equal(tso_open(dir, NULL, &t, err, sizeof err), 0);
    uint64_t first, prev = 0;
    for (int i = 0; i < 2000; i++) {
        uint32_t count = 1 + (uint32_t)(i * 37 % TSO_MAX_COUNT);
        assert_int_equal(tso_next(t, count, &first, err, sizeof err), TSO_OK);
        assert_true(first > prev);
        assert_true(first + count - 1 <= tso_persisted(t));
        prev = first + count - 1;
    }
    assert_int_equal(tso_next(t, 0, &first, err, sizeof err), TSO_ERR_ARG);
    assert_int_equal(tso_next(t, TSO_MAX_COUNT + 1, &first, err, sizeof err), TSO_ERR_ARG);
    uint64_t persisted = tso_persisted(t);
    tso_close(t);

    /* Reopen: starts above the mark, so above everything handed out. */
    assert_int_equal(tso_open(dir, NULL, &t, err, sizeof err), 0);
    assert_int_equal(tso_next(t, 1, &first, err, sizeof err), TSO_OK);
    assert_true(first == persisted + 1);
    tso_close(t);
    tl_rmtree(dir);
    free(dir);
}

typedef struct racer {
    tso *t;
    uint64_t *got;
    int n;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    char err[128];
    for (int i = 0; i < r->n; i++)
        if (tso_next(r->t, 3, &r->got[i], err, sizeof err) != TSO_OK)
            r->got[i] = 0;
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_tso_threads_get_disjoint_blocks(void **state)
{
    (void)state;
    char *dir = tl_mkdtemp("tso-race");
    tso *t;
    char err[256];
    assert_int_equal(tso_open(dir, NULL, &t, err, sizeof err), 0);
    enum { THREADS = 4, PER = 50000 };
    uint64_t *all = calloc(THREADS * PER, sizeof *all);
    racer r[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        r[i] = (racer){t, all + i * PER, PER};
        assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    qsort(all, THREADS * PER, sizeof *all, cmp_u64);
    assert_true(all[0] >= 1);
    for (int i = 1; i < THREADS * PER; i++)
        assert_true(all[i] >= all[i - 1] + 3);   /* blocks of 3 never overlap */
    free(all);
    tso_close(t);
    tl_rmtree(dir);
    free(dir);
}

static void test_buf_grows_and_formats(void **state)
{
    (void)state;
    buf b = BUF_INIT;
    for (int i = 0; i < 1000; i++)
        assert_int_equal(buf_printf(&b, "%d,", i), 0);
    assert_int_equal(strncmp(b.data, "0,1,2,", 6), 0);
    assert_true(b.len == strlen(b.data));
    size_t len;
    char *p = buf_take(&b, &len);
    assert_true(len > 3000);
    assert_null(b.data);
    free(p);
    p = buf_take(&b, &len);  /* empty: an empty string */
    assert_string_equal(p, "");
    free(p);
    assert_int_equal(buf_append(&b, "x", (size_t)-1), -1);  /* overflow refused */
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_round_trips_and_rejects_damage),
        cmocka_unit_test(test_persist_then_reopen),
        cmocka_unit_test(test_tso_never_passes_the_durable_mark),
        cmocka_unit_test(test_tso_threads_get_disjoint_blocks),
        cmocka_unit_test(test_buf_grows_and_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
