/*
 * test_service_crash.c — crashes, stalls and stuck owners (DESIGN §1.4,
 * §6.5), with the real programs:
 *
 *  - a multi-key transaction crashes the service (kill -9 through a
 *    failpoint) at each point of its commit; after a restart it is all
 *    there or all gone, rolled back before the commit point and forward
 *    after it — whether a reader meets the locks first (and answers at
 *    once) or the janitor alone clears them;
 *  - the bank workload while the service is killed again and again: the
 *    total holds, every acknowledged transfer is there, no refused one is;
 *  - a paused service (SIGSTOP) does not expire sessions that renew soon
 *    after it resumes;
 *  - a live but stuck owner's lock is resolved once it is too old;
 *  - garbage collection drops old versions and reads stay right.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bank.h"
#include "svc_fixture.h"
#include "timeutil.h"

#define NKEYS 6

static const char *value_of(json_t *j)
{
    const char *v = json_string_value(json_object_get(j, "value"));
    assert_non_null(v);
    return v;
}

static size_t lock_count(tl_stack *st)
{
    json_t *j = tl_must(st, "GET", "/v1/locks?limit=1000", NULL, 200);
    size_t n = json_array_size(json_object_get(j, "locks"));
    json_decref(j);
    return n;
}


/* Wait (bounded) until no lock remains; false if some do at the deadline. */
static bool locks_drain(tl_stack *st, unsigned within_ms)
{
    uint64_t end = time_mono_ms() + within_ms;
    do {
        if (lock_count(st) == 0)
            return true;
        time_sleep_ms(50);
    } while (time_mono_ms() < end);
    return false;
}

/* ---- crash at each point of a commit ---- */

static void crash_at(const char *point, bool by_reader)
{
    /* The janitor sleeps in the reader case, so the reader meets the locks
     * first; a wait on them would outlast the HTTP timeout and fail. */
    const char *extra[] = {"--one-pc", "off", "--lease-ttl-ms", "1000", "--lock-wait-ms",
                           "60000", "--janitor-interval-ms", by_reader ? "600000" : "200", NULL};
    tl_stack st;
    char path[128], body[1024];
    bool forward = strcmp(point, "after_commit_primary") == 0 ||
                   strcmp(point, "after_half_secondaries") == 0;

    assert_int_equal(tl_stack_start(&st, extra), 0);
    strcpy(body, "{\"writes\":[");
    for (int i = 0; i < NKEYS; i++)
        snprintf(body + strlen(body), sizeof(body) - strlen(body),
                 "%s{\"key\":\"k%d\",\"value\":\"old\"}", i ? "," : "", i);
    strcat(body, "]}");
    json_decref(tl_must(&st, "POST", "/v1/txn", body, 200));

    /* Restart with the failpoint armed, then commit a transaction. */
    assert_int_equal(tl_service_stop(&st), 0);
    snprintf(st.svc.env[0], sizeof(st.svc.env[0]), "PERCOLATOR_FAILPOINT=%s", point);
    st.svc.nenv = 1;
    assert_int_equal(tl_service_start(&st), 0);
    json_t *j = tl_must(&st, "POST", "/v1/txns", NULL, 201);
    char id[64];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    for (int i = 0; i < NKEYS; i++) {
        snprintf(path, sizeof(path), "/v1/txns/%s/keys/k%d", id, i);
        json_decref(tl_must(&st, "PUT", path, "{\"value\":\"new\"}", 204));
    }
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    assert_int_equal(tl_try_call(&st, "POST", path, NULL, NULL), 0); /* no answer: it died */
    assert_int_equal(tl_wait_exit(st.svc.pid, TL_STOP_MS), 128 + SIGKILL);
    st.svc.pid = 0;

    /* Restart without it. */
    st.svc.nenv = 0;
    assert_int_equal(tl_service_start(&st), 0);
    const char *want = forward ? "new" : "old";
    if (by_reader) {
        assert_true(lock_count(&st) > 0); /* the crash left locks behind */
        /* A snapshot scan meets them first: their owner (of the earlier run)
         * is dead, so they are resolved at once. */
        j = tl_must(&st, "GET", "/v1/kv?prefix=k", NULL, 200);
        json_t *items = json_object_get(j, "items");
        assert_int_equal(json_array_size(items), NKEYS);
        for (size_t i = 0; i < NKEYS; i++)
            assert_string_equal(value_of(json_array_get(items, i)), want);
        json_decref(j);
        assert_true(tl_service_metric(&st, "percolator_locks_resolved_total{how=\"rolled_forward\"}") +
                        tl_service_metric(&st, "percolator_locks_resolved_total{how=\"rolled_back\"}") >
                    0);
    } else {
        /* Nobody reads: the janitor clears them within a lease TTL plus an
         * interval (1000 + 200 ms; with slack for a loaded machine). */
        assert_true(locks_drain(&st, 1000 + 200 + 3000));
        assert_true(tl_service_metric(&st, "percolator_janitor_resolved_total{how=\"rolled_forward\"}") +
                        tl_service_metric(&st, "percolator_janitor_resolved_total{how=\"rolled_back\"}") >
                    0);
    }
    for (int i = 0; i < NKEYS; i++) {
        snprintf(path, sizeof(path), "/v1/kv/k%d", i);
        j = tl_must(&st, "GET", path, NULL, 200);
        assert_string_equal(value_of(j), want);
        json_decref(j);
    }
    assert_int_equal(lock_count(&st), 0);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* A crash while an observer is registered (two phases: --one-pc off)
 * leaves a lock on its registration; the next start reads the
 * registrations and meets it. Its owner is dead, so it is resolved there
 * and then, as any write, through the replicator (svc_open starts it
 * before it reads them): the service starts, and the registration is
 * rolled back whole. */
static void a_lock_left_on_an_observer_registration_is_resolved_at_start(void **state)
{
    (void)state;
    const char *extra[] = {"--one-pc", "off", "--janitor-interval-ms", "600000", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    assert_int_equal(tl_service_stop(&st), 0);
    snprintf(st.svc.env[0], sizeof(st.svc.env[0]), "PERCOLATOR_FAILPOINT=after_prewrite_primary");
    st.svc.nenv = 1;
    assert_int_equal(tl_service_start(&st), 0);
    assert_int_equal(tl_try_call(&st, "PUT", "/v1/observers/crashed", "{\"prefix\":\"x/\"}", NULL),
                     0); /* no answer: it died with the registration's lock in the store */
    assert_int_equal(tl_wait_exit(st.svc.pid, TL_STOP_MS), 128 + SIGKILL);
    st.svc.pid = 0;
    st.svc.nenv = 0;
    assert_int_equal(tl_service_start(&st), 0);
    /* Met and rolled back at start (its owner died before the commit
     * point), so registering it again creates it. */
    assert_true(tl_service_metric(&st, "percolator_locks_resolved_total{how=\"rolled_back\"}") > 0);
    json_decref(tl_must(&st, "PUT", "/v1/observers/crashed", "{\"prefix\":\"x/\"}", 201));
    /* And it serves writes as usual. */
    json_decref(tl_must(&st, "PUT", "/v1/kv/x/after", "{\"value\":\"v\"}", 200));
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void crash_after_prewrite_primary(void **s) { (void)s; crash_at("after_prewrite_primary", true); crash_at("after_prewrite_primary", false); }
static void crash_after_prewrites(void **s) { (void)s; crash_at("after_prewrites", true); crash_at("after_prewrites", false); }
static void crash_after_commit_primary(void **s) { (void)s; crash_at("after_commit_primary", true); crash_at("after_commit_primary", false); }
static void crash_after_half_secondaries(void **s) { (void)s; crash_at("after_half_secondaries", true); crash_at("after_half_secondaries", false); }

/* ---- the bank while the service is killed again and again ---- */

#define ACCOUNTS 20
#define CLIENTS 8
#define PER_CLIENT 400
#define KILLS 12
#define MARKERS (CLIENTS * PER_CLIENT)

enum { M_NONE, M_ACKED, M_REFUSED, M_UNKNOWN };

static tl_stack BANK;
static atomic_int bank_stop;
static _Atomic unsigned char marker_state[MARKERS];

/* One transfer that also writes its marker; the outcome as the client
 * sees it. */
static int transfer(int client, int seq, unsigned *seed)
{
    int from = rand_r(seed) % ACCOUNTS, to = (from + 1 + rand_r(seed) % (ACCOUNTS - 1)) % ACCOUNTS;
    long amount = rand_r(seed) % 50;
    char a[16], b[16], marker[32];
    snprintf(a, sizeof(a), "a%02d", from);
    snprintf(b, sizeof(b), "a%02d", to);
    snprintf(marker, sizeof(marker), "m/%d/%d", client, seq);
    /* Half through a session, half as a read and a compare-and-set. */
    tl_transfer r = tl_bank_transfer(&BANK, seq % 2 == 0, a, b, amount, marker);
    if (!r.committing)
        return M_NONE; /* nothing was committed: try again later */
    if (r.status == 200)
        return M_ACKED;
    if (r.status == 0 || r.status >= 500)
        return M_UNKNOWN; /* the answer was lost: it may or may not have committed */
    return M_REFUSED;     /* 409, 410, or 404 from a new run that never saw it */
}

static void *bank_client(void *arg)
{
    int client = (int)(intptr_t)arg;
    unsigned seed = (unsigned)client * 7919u + 3;
    for (int seq = 0; seq < PER_CLIENT && !atomic_load(&bank_stop); seq++) {
        int outcome;
        while ((outcome = transfer(client, seq, &seed)) == M_NONE && !atomic_load(&bank_stop))
            time_sleep_ms(5);
        atomic_store(&marker_state[client * PER_CLIENT + seq], (unsigned char)outcome);
    }
    return NULL;
}

static void bank_survives_repeated_kill9(void **state)
{
    (void)state;
    const char *extra[] = {"--one-pc", "off", "--lease-ttl-ms", "2000",
                           "--janitor-interval-ms", "200", "--lock-wait-ms", "500", NULL};
    assert_int_equal(tl_stack_start(&BANK, extra), 0);
    char body[4096] = "{\"writes\":[";
    for (int i = 0; i < ACCOUNTS; i++)
        snprintf(body + strlen(body), sizeof(body) - strlen(body),
                 "%s{\"key\":\"a%02d\",\"value\":\"1000\"}", i ? "," : "", i);
    strcat(body, "]}");
    json_decref(tl_must(&BANK, "POST", "/v1/txn", body, 200));

    pthread_t th[CLIENTS];
    for (intptr_t i = 0; i < CLIENTS; i++)
        assert_int_equal(tl_thread_start(&th[i], bank_client, (void *)i), 0);
    unsigned seed = 99;
    for (int k = 0; k < KILLS; k++) {
        time_sleep_ms(300 + (unsigned)(rand_r(&seed) % 500));
        assert_int_equal(tl_kill9(BANK.svc.pid), 0);
        BANK.svc.pid = 0;
        assert_int_equal(tl_service_start(&BANK), 0);
    }
    time_sleep_ms(500);
    atomic_store(&bank_stop, 1);
    for (int i = 0; i < CLIENTS; i++)
        assert_int_equal(tl_thread_join(th[i], NULL), 0);

    /* Abandoned locks go within a lease TTL plus an interval (slack added). */
    assert_true(locks_drain(&BANK, 2000 + 200 + 5000));
    json_t *j = tl_must(&BANK, "GET", "/v1/kv?prefix=a&limit=100", NULL, 200);
    json_t *items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), ACCOUNTS);
    long sum = 0;
    for (size_t i = 0; i < ACCOUNTS; i++)
        sum += tl_bank_balance(json_array_get(items, i));
    json_decref(j);
    assert_int_equal(sum, ACCOUNTS * 1000L);

    int acked = 0, refused = 0, unknown = 0;
    for (int c = 0; c < CLIENTS; c++) {
        for (int seq = 0; seq < PER_CLIENT; seq++) {
            int m = atomic_load(&marker_state[c * PER_CLIENT + seq]);
            if (m == M_NONE || m == M_UNKNOWN) {
                unknown += m == M_UNKNOWN;
                continue;
            }
            char path[64];
            snprintf(path, sizeof(path), "/v1/kv/m%%2F%d%%2F%d", c, seq);
            json_decref(tl_must(&BANK, "GET", path, NULL, m == M_ACKED ? 200 : 404));
            acked += m == M_ACKED;
            refused += m == M_REFUSED;
        }
    }
    print_message("%d kills: %d transfers acknowledged (all present), %d refused (none "
                  "present), %d with the answer lost; total conserved\n",
                  KILLS, acked, refused, unknown);
    assert_true(acked > 50);
    assert_int_equal(tl_stack_stop(&BANK), 0);
}

/* ---- a paused service ---- */

static void a_paused_service_gives_sessions_one_more_ttl(void **state)
{
    (void)state;
    /* Leases of 3 s: long enough that a loaded machine gets a's requests
     * in before its lease (or its extra one after the pause) runs out. */
    const char *extra[] = {"--lease-ttl-ms", "3000", "--janitor-interval-ms", "100", NULL};
    tl_stack st;
    char a[64], b[64], path[160];
    assert_int_equal(tl_stack_start(&st, extra), 0);
    json_t *j = tl_must(&st, "POST", "/v1/txns", NULL, 201);
    snprintf(a, sizeof(a), "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    j = tl_must(&st, "POST", "/v1/txns", NULL, 201);
    snprintf(b, sizeof(b), "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/p", a);
    json_decref(tl_must(&st, "PUT", path, "{\"value\":\"v\"}", 204));

    /* Stopped for 2.5 leases: no client could renew meanwhile. */
    assert_int_equal(kill(st.svc.pid, SIGSTOP), 0);
    time_sleep_ms(7500);
    assert_int_equal(kill(st.svc.pid, SIGCONT), 0);

    /* a renews right away: it lives, and commits. */
    snprintf(path, sizeof(path), "/v1/txns/%s/keepalive", a);
    json_decref(tl_must(&st, "POST", path, NULL, 200));
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", a);
    json_decref(tl_must(&st, "POST", path, NULL, 200));
    /* b does not renew within the extra TTL: then it expires. */
    time_sleep_ms(3000 + 4500);
    snprintf(path, sizeof(path), "/v1/txns/%s/keepalive", b);
    json_decref(tl_must(&st, "POST", path, NULL, 410));
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- a stuck owner ---- */

typedef struct {
    tl_stack *st;
    char id[64];
    long status;
    atomic_int done;
} committer;

static void *commit_thread(void *arg)
{
    committer *c = arg;
    char path[160];
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", c->id);
    c->status = tl_try_call(c->st, "POST", path, NULL, NULL);
    atomic_store(&c->done, 1);
    return NULL;
}

static void a_stuck_owner_lock_is_resolved_when_too_old(void **state)
{
    (void)state;
    const char *extra[] = {"--one-pc", "off", "--max-lock-age-ms", "500",
                           "--janitor-interval-ms", "100", NULL};
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, extra), 0);
    json_decref(tl_must(&st, "POST", "/v1/txn",
                     "{\"writes\":[{\"key\":\"s1\",\"value\":\"old\"},{\"key\":\"s2\",\"value\":\"old\"}]}",
                     200));
    assert_int_equal(tl_service_stop(&st), 0);
    /* The coordinator will stall for 10 s after its prewrites while its
     * session stays alive: only the locks' age can free the keys. */
    snprintf(st.svc.env[0], sizeof(st.svc.env[0]), "PERCOLATOR_FAILPOINT=after_prewrites=sleep:10000");
    st.svc.nenv = 1;
    assert_int_equal(tl_service_start(&st), 0);

    committer c = {.st = &st};
    json_t *j = tl_must(&st, "POST", "/v1/txns", NULL, 201);
    snprintf(c.id, sizeof(c.id), "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    char path[160];
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/s1", c.id);
    json_decref(tl_must(&st, "PUT", path, "{\"value\":\"new\"}", 204));
    snprintf(path, sizeof(path), "/v1/txns/%s/keys/s2", c.id);
    json_decref(tl_must(&st, "PUT", path, "{\"value\":\"new\"}", 204));
    pthread_t th;
    assert_int_equal(tl_thread_start(&th, commit_thread, &c), 0);

    /* The janitor rolls the locks back once they are older than 500 ms,
     * while the commit is still stuck (it sleeps 10 s; this waits at most
     * 8 for the janitor). */
    uint64_t end = time_mono_ms() + 8000;
    while (tl_service_metric(&st, "percolator_janitor_resolved_total{how=\"rolled_back\"}") < 2 &&
           time_mono_ms() < end)
        time_sleep_ms(50);
    assert_true(tl_service_metric(&st, "percolator_janitor_resolved_total{how=\"rolled_back\"}") >= 2);
    assert_int_equal(lock_count(&st), 0);
    assert_false(atomic_load(&c.done)); /* the owner is alive and still stuck */
    j = tl_must(&st, "GET", "/v1/kv/s1", NULL, 200);
    assert_string_equal(value_of(j), "old");
    json_decref(j);
    /* When the owner wakes up, its commit finds itself rolled back. */
    assert_int_equal(tl_thread_join(th, NULL), 0);
    assert_int_equal(c.status, 410);
    j = tl_must(&st, "GET", "/v1/kv/s2", NULL, 200);
    assert_string_equal(value_of(j), "old");
    json_decref(j);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* ---- garbage collection ---- */

static void gc_drops_old_versions_and_reads_stay_right(void **state)
{
    (void)state;
    const char *extra[] = {"--gc-retention-ms", "300", "--janitor-interval-ms", "100", NULL};
    tl_stack st;
    char path[64], body[64];
    assert_int_equal(tl_stack_start(&st, extra), 0);
    json_int_t first_ts = 0;
    for (int round = 0; round < 30; round++) {
        for (int k = 0; k < 10; k++) {
            snprintf(path, sizeof(path), "/v1/kv/g%d", k);
            snprintf(body, sizeof(body), "{\"value\":\"%d\"}", round);
            json_t *j = tl_must(&st, "PUT", path, body, 200);
            if (first_ts == 0)
                first_ts = json_integer_value(json_object_get(j, "commit_ts"));
            json_decref(j);
        }
    }
    /* Within a few retention periods only the newest versions remain (the
     * gauge is set by each GC pass; wait for one that removed them). */
    uint64_t end = time_mono_ms() + 15000;
    double versions = -1, removed = 0;
    while (time_mono_ms() < end) {
        removed = tl_service_metric(&st, "percolator_gc_versions_removed_total");
        versions = tl_service_metric(&st, "percolator_mvcc_versions");
        if (removed >= 290 && versions <= 10)
            break;
        time_sleep_ms(100);
    }
    print_message("versions stored after GC: %.0f (300 written)\n", versions);
    assert_true(versions >= 10 && versions <= 10);
    assert_true(tl_service_metric(&st, "percolator_gc_versions_removed_total") >= 290);
    for (int k = 0; k < 10; k++) {
        snprintf(path, sizeof(path), "/v1/kv/g%d", k);
        json_t *j = tl_must(&st, "GET", path, NULL, 200);
        assert_string_equal(value_of(j), "29");
        json_decref(j);
    }
    /* A snapshot from before the safe point cannot be read any more. */
    snprintf(path, sizeof(path), "/v1/kv/g0?ts=%lld", (long long)first_ts);
    json_decref(tl_must(&st, "GET", path, NULL, 400));
    assert_int_equal(tl_stack_stop(&st), 0);
}

int main(void)
{
    /* CMOCKA_TEST_FILTER=name runs the matching tests only (debugging). */
    if (getenv("CMOCKA_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("CMOCKA_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        TL_TEST(a_lock_left_on_an_observer_registration_is_resolved_at_start),
        TL_TEST(crash_after_prewrite_primary),
        TL_TEST(crash_after_prewrites),
        TL_TEST(crash_after_commit_primary),
        TL_TEST(crash_after_half_secondaries),
        TL_TEST(bank_survives_repeated_kill9),
        TL_TEST(a_paused_service_gives_sessions_one_more_ttl),
        TL_TEST(a_stuck_owner_lock_is_resolved_when_too_old),
        TL_TEST(gc_drops_old_versions_and_reads_stay_right),
    };
    return cmocka_run_group_tests_name("service: crashes, stalls, janitor", tests, NULL, NULL);
}
