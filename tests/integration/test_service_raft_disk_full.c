/*
 * test_service_raft_disk_full.c — a member of a replicated service whose
 * disk fills stops at once (docs/DESIGN.md §4.7, §7.2), as a single node
 * does: whichever fails first, WiredTiger's write (the storage-failure
 * exit) or libraft's append (libraft shuts the member down, and the
 * member then exits rather than answer health while it applies nothing),
 * it exits 70, and until then its /v1/health never reports ok with its
 * applied index left behind the leader's. The group goes on with the two
 * others; with room again the member starts, catches up and holds every
 * acknowledged write.
 *
 * A follower's data dir is a 16 MiB tmpfs (mount(2): root only; without
 * it the test says SKIPPED loudly). The mount is undone on every path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "raft_member.h"
#include "svc_group.h"
#include "timeutil.h"

#define WRITES_MAX 4000
#define VALUE_BYTES 6000 /* 4000 of them: ~24 MiB, more than the tmpfs holds */

static char mounted[700];

static void unmount(void)
{
    if (mounted[0] != '\0' && umount2(mounted, MNT_DETACH) != 0)
        fprintf(stderr, "umount %s: %s\n", mounted, strerror(errno));
    mounted[0] = '\0';
}

/* PUT key through the leader: the HTTP status. */
static long put(const tl_svc_group *g, int leader, int k, const char *value)
{
    char url[128];
    tl_resp r;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/kv/full-%d", g->http[leader], k);
    if (tl_http("PUT", url, value, strlen(value), "application/json", 10000, &r) != 0)
        return 0;
    long status = r.status;
    tl_resp_free(&r);
    return status;
}

static void a_follower_whose_disk_fills_stops(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        fprintf(stderr, "\n*** SKIPPED: test_service_raft_disk_full needs root to mount a "
                        "tmpfs ***\n\n");
        skip();
    }
    tl_svc_group g;
    tl_group_start(&g, "raft-disk-full", 3, NULL, NULL);
    atexit(unmount);
    int l = tl_group_leader(&g, -1, 30000);
    assert_true(l >= 0);
    int f = (l + 1) % TL_GROUP_NODES;

    /* The follower stops; its data dir becomes a small, empty tmpfs; it
     * starts again and catches up (an image, then the log) into it. */
    assert_int_equal(tl_stop(g.pid[f], TL_STOP_MS), 0);
    g.pid[f] = 0;
    snprintf(mounted, sizeof mounted, "%s/n%d", g.dir, f + 1);
    assert_int_equal(tl_rmtree(mounted), 0);
    assert_int_equal(mkdir(mounted, 0700), 0);
    if (mount("tmpfs", mounted, "tmpfs", 0, "size=16m") != 0)
        fail_msg("mount tmpfs on %s: %s", mounted, strerror(errno));
    tl_group_member_start(&g, f);
    assert_true(tl_group_knows_leader(&g, f, l, 30000));

    /* Writes through the leader until the follower has exited; while it
     * still answers, health must not report ok with its applied index
     * stuck behind the leader's for long (it must stop instead). */
    char *value = malloc(VALUE_BYTES + 32);
    assert_non_null(value);
    int n = snprintf(value, 32, "{\"value\":\"");
    memset(value + n, 'x', VALUE_BYTES);
    strcpy(value + n + VALUE_BYTES, "\"}");
    int acked = 0, status = -1;
    int64_t stuck_at = -1;
    uint64_t stuck_since = 0, longest_stuck = 0;
    for (int k = 0; k < WRITES_MAX && status < 0; k++) {
        if (put(&g, l, k, value) == 200)
            acked = k + 1;
        status = tl_wait_exit(g.pid[f], 0);
        tl_raft_view fv, lv;
        if (status < 0 && tl_raft_health(g.http[f], 2000, &fv) &&
            tl_raft_health(g.http[l], 2000, &lv) && fv.applied < lv.applied) {
            if (fv.applied != stuck_at) {
                stuck_at = fv.applied;
                stuck_since = time_mono_ms();
            } else if (time_mono_ms() - stuck_since > longest_stuck) {
                longest_stuck = time_mono_ms() - stuck_since;
            }
        }
    }
    if (status < 0)
        status = tl_wait_exit(g.pid[f], TL_STOP_MS);
    free(value);
    print_message("follower %d: exit status %d after %d acknowledged writes; its health "
                  "reported ok with its applied index stuck for at most %llu ms\n",
                  f + 1, status, acked, (unsigned long long)longest_stuck);
    assert_int_equal(status, 70);
    g.pid[f] = 0;
    /* Behind the leader for a moment is normal (the next heartbeat); for
     * seconds is a member that applies nothing and says ok. */
    assert_true(longest_stuck < 5000);
    char path[720];
    snprintf(path, sizeof path, "%s/n%d.log", g.dir, f + 1);
    char *log = tl_read_file(path, NULL);
    assert_non_null(log);
    assert_true(strstr(log, "stopping at once") != NULL);
    free(log);

    /* The other two went on; with room again the follower comes back and
     * holds every acknowledged write. */
    assert_int_equal(put(&g, l, WRITES_MAX, "{\"value\":\"after\"}"), 200);
    if (mount("tmpfs", mounted, "tmpfs", MS_REMOUNT, "size=256m") != 0)
        fail_msg("remount tmpfs on %s: %s", mounted, strerror(errno));
    tl_group_member_start(&g, f);
    tl_raft_view lv, fv = {0};
    assert_true(tl_raft_health(g.http[l], 5000, &lv));
    for (int i = 0; i < 300 && fv.applied < lv.applied; i++) {
        time_sleep_ms(100);
        assert_true(tl_raft_health(g.http[f], 5000, &fv));
    }
    assert_true(fv.applied >= lv.applied);
    tl_group_stop(&g);
    unmount();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(a_follower_whose_disk_fills_stops),
    };
    return cmocka_run_group_tests_name("a replicated member's disk fills", tests, NULL, NULL);
}
