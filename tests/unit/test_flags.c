/*
 * test_flags.c — common/flags: defaults, environment twins, precedence,
 * types and the one-line errors (README: Configuration).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"

static const char *s_listen, *s_dir;
static int64_t s_ttl;
static uint64_t s_count, s_cache;
static bool s_onepc;
static int s_sync;
static const char *const sync_names[] = {"fsync", "none", NULL};

static const flag_def defs[] = {
    {"listen", FLAG_STRING, &s_listen, "127.0.0.1:8080", "address", NULL, 0, 0},
    {"data-dir", FLAG_STRING, &s_dir, NULL, "data", NULL, 0, 0},
    {"lease-ttl-ms", FLAG_INT, &s_ttl, "10000", "lease", NULL, 1, 3600000},
    {"count", FLAG_UINT64, &s_count, "5", "count", NULL, 0, 0},
    {"cache-size", FLAG_SIZE, &s_cache, "1GB", "cache", NULL, 0, 0},
    {"one-pc", FLAG_BOOL, &s_onepc, "on", "1pc", NULL, 0, 0},
    {"sync", FLAG_ENUM, &s_sync, "fsync", "sync", sync_names, 0, 0},
};
#define N (sizeof defs / sizeof defs[0])

static int parse(int argc, const char **argv, char *err)
{
    return flags_parse(defs, N, argc, (char **)argv, err, 256);
}

static int clear_env(void **state)
{
    (void)state;
    unsetenv("PERCOLATOR_LISTEN");
    unsetenv("PERCOLATOR_DATA_DIR");
    unsetenv("PERCOLATOR_LEASE_TTL_MS");
    unsetenv("PERCOLATOR_ONE_PC");
    return 0;
}

static void test_defaults_apply_when_nothing_is_given(void **state)
{
    (void)state;
    char err[256];
    const char *argv[] = {"prog"};
    assert_int_equal(parse(1, argv, err), FLAGS_OK);
    assert_string_equal(s_listen, "127.0.0.1:8080");
    assert_null(s_dir);
    assert_int_equal(s_ttl, 10000);
    assert_int_equal(s_count, 5);
    assert_int_equal(s_cache, (uint64_t)1 << 30);
    assert_true(s_onepc);
    assert_int_equal(s_sync, 0);
}

static void test_env_twin_is_used_and_flag_wins(void **state)
{
    (void)state;
    char err[256];
    setenv("PERCOLATOR_DATA_DIR", "/env/dir", 1);
    setenv("PERCOLATOR_LEASE_TTL_MS", "500", 1);
    setenv("PERCOLATOR_ONE_PC", "off", 1);
    const char *argv[] = {"prog", "--data-dir", "/flag/dir"};
    assert_int_equal(parse(3, argv, err), FLAGS_OK);
    assert_string_equal(s_dir, "/flag/dir");
    assert_int_equal(s_ttl, 500);
    assert_false(s_onepc);
}

static void test_all_value_forms(void **state)
{
    (void)state;
    char err[256];
    const char *argv[] = {"prog", "--lease-ttl-ms=42", "--cache-size", "512MB", "--one-pc",
                          "--sync=none", "--count", "18446744073709551615"};
    assert_int_equal(parse(8, argv, err), FLAGS_OK);
    assert_int_equal(s_ttl, 42);
    assert_int_equal(s_cache, (uint64_t)512 << 20);
    assert_true(s_onepc);
    assert_int_equal(s_sync, 1);
    assert_true(s_count == UINT64_MAX);

    const char *argv2[] = {"prog", "--one-pc", "off", "--cache-size", "64KiB"};
    assert_int_equal(parse(5, argv2, err), FLAGS_OK);
    assert_false(s_onepc);
    assert_int_equal(s_cache, 65536);
}

static void test_bad_input_is_one_clear_error(void **state)
{
    (void)state;
    static const char *const cases[][3] = {
        {"--nope", NULL, "unknown flag"},
        {"--lease-ttl-ms", "abc", "not an integer"},
        {"--lease-ttl-ms", "0", "out of range"},
        {"--lease-ttl-ms", "99999999999999999999", "not an integer"},
        {"--count", "-1", "not a non-negative"},
        {"--cache-size", "12XB", "not a size"},
        {"--cache-size", "99999999999T", "not a size"},
        {"--one-pc=maybe", NULL, "not on/off"},
        {"--sync", "sometimes", "fsync|none"},
        {"--listen", NULL, "needs a value"},
        {"positional", NULL, "unexpected argument"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        const char *argv[] = {"prog", cases[i][0], cases[i][1]};
        int argc = cases[i][1] ? 3 : 2;
        assert_int_equal(parse(argc, argv, err), FLAGS_ERROR);
        if (!strstr(err, cases[i][2]))
            fail_msg("case %zu: error '%s' lacks '%s'", i, err, cases[i][2]);
        assert_null(strchr(err, '\n'));
    }
    char err[256];
    setenv("PERCOLATOR_LEASE_TTL_MS", "soon", 1);
    const char *argv[] = {"prog"};
    assert_int_equal(parse(1, argv, err), FLAGS_ERROR);
    assert_non_null(strstr(err, "PERCOLATOR_LEASE_TTL_MS"));
}

static void test_help_is_recognised_and_lists_everything(void **state)
{
    (void)state;
    char err[256];
    const char *argv[] = {"prog", "--help"};
    assert_int_equal(parse(2, argv, err), FLAGS_HELP);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    flags_print_help(f, "prog", "summary", defs, N);
    fclose(f);
    for (size_t i = 0; i < N; i++) {
        char env[64];
        flags_env_name(defs[i].name, env, sizeof env);
        assert_non_null(strstr(text, defs[i].name));
        assert_non_null(strstr(text, env));
    }
    assert_non_null(strstr(text, "PERCOLATOR_LEASE_TTL_MS"));
    assert_non_null(strstr(text, "default 1GB"));
    free(text);
}

static void test_size_parser(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(flags_parse_size("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(flags_parse_size("1k", &v), 0);
    assert_int_equal(v, 1024);
    assert_int_equal(flags_parse_size("2GiB", &v), 0);
    assert_int_equal(v, (uint64_t)2 << 30);
    assert_int_equal(flags_parse_size("3T", &v), 0);
    assert_int_equal(v, (uint64_t)3 << 40);
    assert_int_equal(flags_parse_size("7B", &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(flags_parse_size("", &v), -1);
    assert_int_equal(flags_parse_size("MB", &v), -1);
    assert_int_equal(flags_parse_size("-1MB", &v), -1);
    assert_int_equal(flags_parse_size("1.5GB", &v), -1);
    assert_int_equal(flags_parse_size("1 GB", &v), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults_apply_when_nothing_is_given, clear_env),
        cmocka_unit_test_setup(test_env_twin_is_used_and_flag_wins, clear_env),
        cmocka_unit_test_setup(test_all_value_forms, clear_env),
        cmocka_unit_test_setup(test_bad_input_is_one_clear_error, clear_env),
        cmocka_unit_test_setup(test_help_is_recognised_and_lists_everything, clear_env),
        cmocka_unit_test(test_size_parser),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
