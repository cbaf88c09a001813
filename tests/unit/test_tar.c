/*
 * test_tar.c — the archive headers of common/tar.h: what tar_header
 * writes, tar_parse reads back (octal sizes and, from 8 GiB, GNU's
 * base-256); anything else is refused with a reason: a bad checksum, a
 * name that is not a plain file name, a member that is not a file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "tar.h"

static void round_trip(const char *name, uint64_t size)
{
    unsigned char h[TAR_BLOCK];
    char got[TAR_NAME_MAX + 1];
    uint64_t got_size = 0;
    const char *why = NULL;
    assert_int_equal(tar_header(h, name, size, 1700000000), 0);
    assert_int_equal(tar_parse(h, got, &got_size, &why), 1);
    assert_string_equal(got, name);
    assert_true(got_size == size);
}

static void headers_read_back(void **state)
{
    (void)state;
    round_trip("WiredTiger", 47);
    round_trip("WiredTigerLog.0000000001", 64ULL << 20);
    round_trip("x", 0);
    round_trip("big.wt", 077777777777ULL);        /* the largest octal size */
    round_trip("bigger.wt", 077777777777ULL + 1); /* base-256 from here */
    round_trip("huge.wt", 5ULL << 40);
    char longest[TAR_NAME_MAX + 1];
    memset(longest, 'n', TAR_NAME_MAX);
    longest[TAR_NAME_MAX] = '\0';
    round_trip(longest, 1);
    assert_int_equal(tar_padded(0), 0);
    assert_int_equal(tar_padded(1), 512);
    assert_int_equal(tar_padded(512), 512);
    assert_int_equal(tar_padded(513), 1024);
}

static void names_that_do_not_fit_are_refused(void **state)
{
    (void)state;
    unsigned char h[TAR_BLOCK];
    char too_long[TAR_NAME_MAX + 2];
    memset(too_long, 'n', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = '\0';
    assert_int_equal(tar_header(h, too_long, 1, 0), -1);
    assert_int_equal(tar_header(h, "", 1, 0), -1);
    assert_int_equal(tar_header(h, "a/b", 1, 0), -1);
}

static void bad_headers_are_refused(void **state)
{
    (void)state;
    unsigned char h[TAR_BLOCK], zero[TAR_BLOCK] = {0};
    char name[TAR_NAME_MAX + 1];
    uint64_t size;
    const char *why;
    assert_int_equal(tar_parse(zero, name, &size, &why), 0); /* the end */

    /* A size so large that padding it would wrap: refused. */
    assert_int_equal(tar_header(h, "WiredTiger", UINT64_MAX, 0), 0);
    why = NULL;
    assert_int_equal(tar_parse(h, name, &size, &why), -1);
    assert_non_null(strstr(why, "size"));

    assert_int_equal(tar_header(h, "data.wt", 10, 0), 0);
    h[0] = 'D'; /* the checksum no longer holds */
    why = NULL;
    assert_int_equal(tar_parse(h, name, &size, &why), -1);
    assert_non_null(strstr(why, "checksum"));

    /* A member a header names "../x", or a directory: its checksum made
     * right, still refused. */
    static const struct {
        const char *name;
        char type;
        const char *reason;
    } cases[] = {{"../x", '0', "plain file name"},
                 {"..", '0', "plain file name"},
                 {"d", '5', "not a regular file"},
                 {"l", '2', "not a regular file"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(tar_header(h, "placeholder", 10, 0), 0);
        memset(h, 0, 100);
        memcpy(h, cases[i].name, strlen(cases[i].name));
        h[156] = (unsigned char)cases[i].type;
        unsigned sum = 0;
        for (size_t k = 0; k < TAR_BLOCK; k++)
            sum += k >= 148 && k < 156 ? ' ' : h[k];
        snprintf((char *)h + 148, 8, "%06o", sum);
        h[155] = ' ';
        why = NULL;
        assert_int_equal(tar_parse(h, name, &size, &why), -1);
        assert_non_null(strstr(why, cases[i].reason));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(headers_read_back),
        cmocka_unit_test(names_that_do_not_fit_are_refused),
        cmocka_unit_test(bad_headers_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
