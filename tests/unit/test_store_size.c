/*
 * test_store_size.c — common/store_size (the data dir's size on disk, the
 * store_bytes of /v1/health): what a walk counts (regular files' blocks,
 * in subdirs down to its depth; not a link's target, nor past the depth),
 * and that the thread brings the figure up to date.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_size.h"
#include "testlib.h"
#include "timeutil.h"

#define KIB 1024

/* path := n bytes of data (written, so its blocks are allocated). */
static void write_bytes(const char *path, size_t n)
{
    char *data = malloc(n);
    assert_non_null(data);
    memset(data, 'x', n);
    assert_int_equal(tl_write_file(path, data, n), 0);
    free(data);
}

static void test_walk_counts_files_in_subdirs_not_links_nor_past_the_depth(void **state)
{
    (void)state;
    char *dir = tl_mkdtemp("store-size");
    char *outside = tl_mkdtemp("store-size-outside");
    char p[1200];
    assert_int_equal(store_size_walk(dir), 0);  /* empty */

    snprintf(p, sizeof p, "%s/a", dir);
    write_bytes(p, 64 * KIB);
    uint64_t one = store_size_walk(dir);
    assert_true(one >= 64 * KIB && one < 128 * KIB); /* blocks: a little more at most */

    /* A subdir (as <data-dir>/raft) counts. */
    snprintf(p, sizeof p, "%s/raft", dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/raft/seg", dir);
    write_bytes(p, 64 * KIB);
    uint64_t two = store_size_walk(dir);
    assert_true(two >= one + 64 * KIB);

    /* A link to a big file elsewhere is not followed. */
    char target[1200];
    snprintf(target, sizeof target, "%s/big", outside);
    write_bytes(target, 512 * KIB);
    snprintf(p, sizeof p, "%s/link", dir);
    assert_int_equal(symlink(target, p), 0);
    snprintf(p, sizeof p, "%s/dirlink", dir);
    assert_int_equal(symlink(outside, p), 0);
    assert_true(store_size_walk(dir) == two);

    /* Past STORE_SIZE_MAX_DEPTH levels, nothing more. */
    size_t len = (size_t)snprintf(p, sizeof p, "%s", dir);
    for (int level = 2; level <= STORE_SIZE_MAX_DEPTH + 1; level++) {
        len += (size_t)snprintf(p + len, sizeof p - len, "/d");
        assert_int_equal(mkdir(p, 0700), 0);
    }
    snprintf(p + len, sizeof p - len, "/deep");
    write_bytes(p, 64 * KIB);
    assert_true(store_size_walk(dir) == two);

    /* A dir that is not there: 0. */
    snprintf(p, sizeof p, "%s/none", dir);
    assert_int_equal(store_size_walk(p), 0);

    assert_int_equal(tl_rmtree(dir), 0);
    assert_int_equal(tl_rmtree(outside), 0);
    free(dir);
    free(outside);
}

static void test_the_thread_keeps_the_figure_current(void **state)
{
    (void)state;
    char *dir = tl_mkdtemp("store-size-thread");
    char p[1200];
    snprintf(p, sizeof p, "%s/a", dir);
    write_bytes(p, 64 * KIB);
    store_size *s = store_size_start(dir, 50);
    assert_non_null(s);
    uint64_t first = store_size_bytes(s);
    assert_true(first >= 64 * KIB); /* walked at start */
    snprintf(p, sizeof p, "%s/b", dir);
    write_bytes(p, 256 * KIB);
    uint64_t end = time_mono_ms() + 10000;
    while (store_size_bytes(s) < first + 256 * KIB && time_mono_ms() < end)
        time_sleep_ms(10);
    assert_true(store_size_bytes(s) >= first + 256 * KIB);
    store_size_stop(s);
    store_size_stop(NULL);
    assert_int_equal(tl_rmtree(dir), 0);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_counts_files_in_subdirs_not_links_nor_past_the_depth),
        cmocka_unit_test(test_the_thread_keeps_the_figure_current),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
