/*
 * test_readme_tour.c — the README's API tour works exactly as written.
 *
 * The commands between <!-- tour:begin --> and <!-- tour:end --> in
 * README.md run in one bash against a fresh oracle and service (the tour's
 * http://127.0.0.1:8080 becomes the test's port). A command followed by a
 * "# → output" line must print that output (several such lines in a row:
 * its lines); numbers are compared as "some number", since timestamps
 * depend on the run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svc_fixture.h"

#define MAX_CHECKS 64
#define MARK "@@tour-end-of-output@@"

/* Digit runs become one '0'; trailing blanks go. */
static char *normalise(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *out = malloc(n + 1);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++) {
        if (s[i] >= '0' && s[i] <= '9') {
            while (i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9')
                i++;
            out[o++] = '0';
        } else {
            out[o++] = s[i];
        }
    }
    while (o > 0 && (out[o - 1] == '\n' || out[o - 1] == ' ' || out[o - 1] == '\r'))
        o--;
    out[o] = '\0';
    return out;
}

static void tour_runs_as_written(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);

    size_t len;
    char *readme = tl_read_file("README.md", &len);
    assert_non_null(readme);
    char *begin = strstr(readme, "<!-- tour:begin -->"), *end = strstr(readme, "<!-- tour:end -->");
    assert_non_null(begin);
    assert_non_null(end);
    *end = '\0';

    /* Build the script; remember each expected output. */
    char script_path[700], out_path[700];
    snprintf(script_path, sizeof(script_path), "%s/tour.sh", st.dir);
    snprintf(out_path, sizeof(out_path), "%s/tour.out", st.dir);
    FILE *sh = fopen(script_path, "w");
    assert_non_null(sh);
    fprintf(sh, "set -u\n");
    char *expected[MAX_CHECKS], *owned[MAX_CHECKS]; /* owned: a joined expectation */
    int nexp = 0, commands = 0;
    bool prev_expected = false;
    char host[64];
    snprintf(host, sizeof(host), "127.0.0.1:%d", st.svc.port);
    for (char *line = strtok(begin, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (strncmp(line, "```", 3) == 0 || strncmp(line, "<!--", 4) == 0 || line[0] == '\0')
            continue;
        if (strncmp(line, "# → ", strlen("# → ")) == 0) {
            const char *text = line + strlen("# → ");
            if (prev_expected) { /* one more line of the same command's output */
                size_t a = strlen(expected[nexp - 1]), b = strlen(text);
                char *joined = malloc(a + b + 2);
                assert_non_null(joined);
                memcpy(joined, expected[nexp - 1], a);
                joined[a] = '\n';
                memcpy(joined + a + 1, text, b + 1);
                free(owned[nexp - 1]);
                expected[nexp - 1] = owned[nexp - 1] = joined;
                continue;
            }
            assert_true(nexp < MAX_CHECKS);
            owned[nexp] = NULL;
            expected[nexp++] = (char *)text;
            fprintf(sh, "printf '\\n%s\\n'\n", MARK);
            prev_expected = true;
            continue;
        }
        prev_expected = false;
        if (line[0] == '#')
            continue;
        /* Point the tour at this test's service. */
        char *at = strstr(line, "127.0.0.1:8080");
        if (at != NULL) {
            *at = '\0';
            fprintf(sh, "%s%s%s\n", line, host, at + strlen("127.0.0.1:8080"));
        } else {
            fprintf(sh, "%s\n", line);
        }
        commands++;
    }
    fclose(sh);
    assert_true(commands >= 10 && nexp >= 8);

    char cmd[1600];
    snprintf(cmd, sizeof(cmd), "bash '%s' > '%s' 2>&1", script_path, out_path);
    assert_int_equal(system(cmd), 0);
    char *out = tl_read_file(out_path, &len);
    assert_non_null(out);

    /* Each chunk of output before a mark is one command's output. */
    char *chunk = out;
    for (int i = 0; i < nexp; i++) {
        char *mark = strstr(chunk, MARK);
        assert_non_null(mark);
        *mark = '\0';
        char *got = normalise(chunk), *want = normalise(expected[i]);
        while (got[0] == '\n')
            memmove(got, got + 1, strlen(got));
        if (strcmp(got, want) != 0)
            print_error("tour step %d:\n  README: %s\n  got:    %s\n", i + 1, expected[i], chunk);
        assert_string_equal(got, want);
        free(got);
        free(want);
        chunk = mark + strlen(MARK);
    }
    for (int i = 0; i < nexp; i++)
        free(owned[i]);
    free(out);
    free(readme);
    assert_int_equal(tl_stack_stop(&st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {TL_TEST(tour_runs_as_written)};
    return cmocka_run_group_tests_name("README tour", tests, NULL, NULL);
}
