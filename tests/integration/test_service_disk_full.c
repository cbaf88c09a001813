/*
 * test_service_disk_full.c — a full disk under the real service (issue
 * #18, docs/DESIGN.md §4.7): the data dir is a small tmpfs; writes are
 * acknowledged until the store cannot write any more; then the service
 * must exit non-zero at once (not answer 500 forever while /v1/health
 * says ok); with room again (the tmpfs remounted bigger) it restarts on
 * the same data dir and every acknowledged write is there, committed at
 * the commit_ts it was acknowledged with.
 *
 * Two ways to fill it, each of which left the service answering 500
 * before the fix (issue #18):
 *  - two-phase transactions with values larger than WiredTiger's log
 *    buffer, so that a commit writes its own log record: the log write that
 *    fails is inside commit_transaction (not a log flush, which already
 *    stopped the service) and WiredTiger panics;
 *  - autocommit PUTs of 60 KB values: most often a write to the data file
 *    fails (ENOSPC) in WiredTiger's eviction thread, which then panics
 *    (only the event handler sees that: no call of the service failed);
 *    sometimes inside an insert (ENOSPC, no panic), or the log flush fails
 *    first (which stopped the service before the fix too). Which comes
 *    first varies from run to run; all must stop it.
 * Each prints the engine's "fatal storage failure" line it ended on.
 *
 * Mounting needs root (mount(2), no external program); without it the
 * test says SKIPPED loudly. The mount is undone in every exit path (the
 * teardown runs after a failed assertion too).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "svc_fixture.h"

#define SMALL "size=16m"         /* the disk that fills */
#define ROOMY "size=256m"        /* after the space is freed (a checkpoint rewrites pages) */
#define MAX_WRITES 2000          /* far more than SMALL holds */
#define VALUE_MAX 600000

typedef struct {
    tl_stack st;
    bool started, mounted;
} disk_full;

/* One write of a workload: dk<i> (and its companions) = value_of(i); the
 * status of the first request that did not succeed (0: no answer), or 200
 * with *cts the commit timestamp. */
typedef long (*write_fn)(tl_stack *st, int i, size_t value_bytes, uint64_t *cts);

typedef struct {
    const char *flags[4];     /* service flags */
    write_fn write;
    size_t value_bytes;
    int keys;                 /* keys per write: dk<i>, dc<i> */
} workload;

static int teardown(void **state)
{
    disk_full *d = *state;
    if (d == NULL)
        return 0;
    if (d->st.svc.pid > 0) {
        tl_kill9(d->st.svc.pid);
        d->st.svc.pid = 0;
    }
    if (d->mounted && umount2(d->st.svc.data, MNT_DETACH) != 0)
        fprintf(stderr, "umount %s: %s\n", d->st.svc.data, strerror(errno));
    if (d->started)
        tl_stack_stop(&d->st);
    free(d);
    *state = NULL;
    return 0;
}

/* A fresh, empty data dir on a small tmpfs. */
static void mount_small(disk_full *d)
{
    assert_int_equal(tl_service_stop(&d->st), 0);
    d->st.svc.pid = 0;
    assert_int_equal(tl_rmtree(d->st.svc.data), 0);
    assert_int_equal(mkdir(d->st.svc.data, 0755), 0);
    if (mount("tmpfs", d->st.svc.data, "tmpfs", 0, SMALL) != 0)
        fail_msg("mount tmpfs on %s: %s", d->st.svc.data, strerror(errno));
    d->mounted = true;
}

static void value_of(char *out, size_t len, int i)
{
    int n = snprintf(out, len, "v%05d-", i);
    for (size_t k = (size_t)n; k + 1 < len; k++)
        out[k] = (char)('a' + (k + (size_t)i) % 26);
    out[len - 1] = '\0';
}

/* Key dk<i> = value_of(i) and its companion dc<i> in one two-phase
 * transaction (--one-pc off: prewrites, then the commit point). The status
 * of the first request that did not succeed (0: no answer), or 200 with
 * *cts the commit timestamp. */
static long txn_write(tl_stack *st, int i, size_t value_bytes, uint64_t *cts)
{
    static char value[VALUE_MAX + 1], body[VALUE_MAX + 32];
    char id[64], path[160];
    json_t *j = NULL;
    long status = tl_try_call(st, "POST", "/v1/txns", NULL, &j);
    if (status != 201) {
        json_decref(j);
        return status;
    }
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    value_of(value, value_bytes + 1, i);
    snprintf(body, sizeof(body), "{\"value\":\"%s\"}", value);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof(path), "/v1/txns/%s/keys/%s%05d", id, k == 0 ? "dk" : "dc", i);
        if ((status = tl_try_call(st, "PUT", path, body, NULL)) != 204)
            return status;
    }
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    status = tl_try_call(st, "POST", path, NULL, &j);
    if (status == 200)
        *cts = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
    json_decref(j);
    return status;
}

/* An autocommit PUT of dk<i>. */
static long put_write(tl_stack *st, int i, size_t value_bytes, uint64_t *cts)
{
    static char value[VALUE_MAX + 1], body[VALUE_MAX + 32];
    char path[64];
    json_t *j = NULL;
    value_of(value, value_bytes + 1, i);
    snprintf(body, sizeof(body), "{\"value\":\"%s\"}", value);
    snprintf(path, sizeof(path), "/v1/kv/dk%05d", i);
    long status = tl_try_call(st, "PUT", path, body, &j);
    if (status == 200)
        *cts = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
    json_decref(j);
    return status;
}

static void fill_restart_and_read_back(void **state, const workload *w)
{
    if (geteuid() != 0) {
        fprintf(stderr, "\n*** SKIPPED: test_service_disk_full needs root to mount a tmpfs ***\n\n");
        skip();
    }
    disk_full *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    *state = d;
    assert_int_equal(tl_stack_start(&d->st, w->flags), 0);
    d->started = true;
    mount_small(d);
    assert_int_equal(tl_service_start(&d->st), 0);

    static uint64_t acked_ts[MAX_WRITES];
    int acked = 0;
    long status = 200;
    while (acked < MAX_WRITES &&
           (status = w->write(&d->st, acked, w->value_bytes, &acked_ts[acked])) == 200)
        acked++;
    fprintf(stderr, "disk full after %d acknowledged writes (then status %ld)\n", acked, status);
    assert_true(acked > 2);           /* the disk held some */
    assert_true(acked < MAX_WRITES);  /* and then was full */
    /* The failure stops the process (exit 70, SVC_EXIT_STORAGE), instead of
     * a process that answers 500 to everything while health says ok. */
    int rc = tl_wait_exit(d->st.svc.pid, TL_STOP_MS);
    if (rc != 70) {
        tl_dump_file(d->st.svc.log);
        fail_msg("the service did not exit 70 after the disk filled (wait: %d)", rc);
    }
    d->st.svc.pid = 0;
    char *log = tl_read_file(d->st.svc.log, NULL);
    assert_non_null(log);
    const char *fatal = strstr(log, "fatal storage failure: ");
    assert_non_null(fatal);
    assert_non_null(strstr(log, "storage failure ("));
    fprintf(stderr, "%.*s\n", (int)strcspn(fatal, "\n"), fatal);
    free(log);

    /* Room again: the same files, a bigger filesystem. */
    if (mount("tmpfs", d->st.svc.data, "tmpfs", MS_REMOUNT, ROOMY) != 0)
        fail_msg("remount %s: %s", d->st.svc.data, strerror(errno));
    assert_int_equal(tl_service_start(&d->st), 0);
    static char value[VALUE_MAX + 1];
    for (int i = 0; i < acked; i++) {
        value_of(value, w->value_bytes + 1, i);
        for (int k = 0; k < w->keys; k++) {
            char path[64];
            snprintf(path, sizeof(path), "/v1/kv/%s%05d", k == 0 ? "dk" : "dc", i);
            json_t *j = tl_must(&d->st, "GET", path, NULL, 200);
            assert_string_equal(json_string_value(json_object_get(j, "value")), value);
            assert_int_equal(json_integer_value(json_object_get(j, "commit_ts")), acked_ts[i]);
            json_decref(j);
        }
    }
    /* And it works on. */
    json_decref(tl_must(&d->st, "PUT", "/v1/kv/after", "{\"value\":\"healed\"}", 200));
    assert_int_equal(tl_service_stop(&d->st), 0);
    d->st.svc.pid = 0;
}

/* The log write inside a commit fails: WiredTiger panics. */
static void a_log_write_panic_stops_the_service(void **state)
{
    const workload w = {{"--one-pc", "off", NULL}, txn_write, 600000, 2};
    fill_restart_and_read_back(state, &w);
}

/* A data file write fails (ENOSPC): in the eviction thread (a panic seen
 * by the event handler) or inside an insert (no panic). */
static void a_failed_data_write_stops_the_service(void **state)
{
    const workload w = {{NULL}, put_write, 60000, 1};
    fill_restart_and_read_back(state, &w);
}

int main(void)
{
    if (getenv("CMOCKA_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("CMOCKA_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(a_log_write_panic_stops_the_service, teardown),
        cmocka_unit_test_teardown(a_failed_data_write_stops_the_service, teardown),
    };
    return cmocka_run_group_tests_name("service: a full disk", tests, NULL, NULL);
}
