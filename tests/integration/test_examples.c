/*
 * test_examples.c — the lease recipes in examples/ run against a fresh
 * service (with a janitor interval of 200 ms), and print exactly what
 * their READMEs say they print (the "# " lines after the demo.sh command):
 *
 *  - examples/leader-election: a leads, b follows; a is killed with kill -9
 *    and b leads once a's lease runs out; b resigns (a revoke) and the key
 *    is gone;
 *  - examples/service-discovery: two instances register with leases; one
 *    killed with kill -9 drops out of the list once its lease runs out (a
 *    watcher of the prefix sees the delete), the other deregisters on
 *    SIGTERM.
 *
 * Both demos bound every wait (30 s), and the whole run is bounded here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svc_fixture.h"

/* What the README shows demo.sh printing: the "# " lines that follow the
 * line running it, without their "# ". */
static char *documented_output(const char *readme)
{
    size_t len;
    char *text = tl_read_file(readme, &len);
    assert_non_null(text);
    char *at = strstr(text, "/demo.sh");
    assert_non_null(at);
    char *line = strchr(at, '\n');
    assert_non_null(line);
    line++;
    size_t cap = strlen(line) + 1, n = 0;
    char *out = calloc(1, cap);
    assert_non_null(out);
    while (strncmp(line, "# ", 2) == 0) {
        char *end = strchr(line, '\n');
        assert_non_null(end);
        memcpy(out + n, line + 2, (size_t)(end - line - 1));
        n += (size_t)(end - line - 1);
        line = end + 1;
    }
    out[n] = '\0';
    free(text);
    assert_true(n > 0);
    return out;
}

static void run_demo(const char *example)
{
    tl_stack st;
    const char *extra[] = {"--janitor-interval-ms", "200", NULL};
    assert_int_equal(tl_stack_start(&st, extra), 0);
    char cmd[1600], out[700], err[700], readme[256];
    snprintf(out, sizeof out, "%s/demo.out", st.dir);
    snprintf(err, sizeof err, "%s/demo.err", st.dir);
    /* What it prints is compared, not what bash says of the jobs it
     * kills (stderr, shown on a failure). */
    snprintf(cmd, sizeof cmd,
             "PERCOLATOR_URL=%s timeout -s KILL 120 examples/%s/demo.sh > %s 2> %s", st.svc.url,
             example, out, err);
    int rc = system(cmd);
    size_t len;
    char *got = tl_read_file(out, &len);
    assert_non_null(got);
    snprintf(readme, sizeof readme, "examples/%s/README.md", example);
    char *want = documented_output(readme);
    if (rc != 0 || strcmp(got, want) != 0) {
        fprintf(stderr, "demo.sh exited %d; it printed:\n%s\nthe README says:\n%s\n", rc, got,
                want);
        tl_dump_file(err);
    }
    assert_int_equal(rc, 0);
    assert_string_equal(got, want);
    free(got);
    free(want);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void leader_election_fails_over(void **state)
{
    (void)state;
    run_demo("leader-election");
}

static void service_discovery_drops_a_dead_instance(void **state)
{
    (void)state;
    run_demo("service-discovery");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(leader_election_fails_over),
        TL_TEST(service_discovery_drops_a_dead_instance),
    };
    return cmocka_run_group_tests_name("examples: the lease recipes", tests, NULL, NULL);
}
