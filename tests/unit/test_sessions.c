/*
 * test_sessions.c — the service's session table (service/sessions.c) on
 * its own, in process:
 *
 *  - names: a session's id is "<sequence>-<32 hex digits>" and is found
 *    only whole (a changed digit or a prefix finds nothing); its owner is
 *    "<run id>-<sequence>"; an owner of another run, or an unknown one, is
 *    dead at once (DESIGN §3.5);
 *  - bounds: at most max_open sessions are open, and ending one makes
 *    room; a charge that would take all sessions past the total is refused
 *    and changes nothing; ending a session, however it ends, gives its
 *    charge back;
 *  - the buffer: writes kept sorted by key, a key written again replaced,
 *    a write that would pass max_bytes refused with nothing changed;
 *  - the lease: renewed while it runs; once run out it is not renewed, the
 *    owner is dead and the reaper ends the session as "expired" (and calls
 *    the end hook of a session holding a claim, once); a committing
 *    session is alive whatever its lease; ended sessions are forgotten
 *    after the retention, never while referenced;
 *  - a stall of the process (no reading of the clock for longer than
 *    stall_ms) is noticed, and sessions alive when it began get one more
 *    lease from its end (DESIGN §4.5);
 *  - the oldest start_ts among running sessions caps GC.
 *
 * Leases here are either long (60 s: never run out during a test, however
 * loaded the machine) or 1 ms with a sleep of 30 ms after them (always run
 * out): no assertion depends on the machine being fast.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "sessions.h"

#define LONG_MS 60000

static void sleep_ms(unsigned ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

static void end(sessions *s, txn *t, txn_state state, const char *reason)
{
    pthread_mutex_lock(&t->mu);
    if (state == TXN_COMMITTED && atomic_load(&t->state) == TXN_ACTIVE)
        sessions_commit_begin(t);
    sessions_end(s, t, state, reason);
    pthread_mutex_unlock(&t->mu);
}

static void ids_are_found_only_whole_and_owners_name_the_run(void **state)
{
    (void)state;
    sessions *s = sessions_new("run7", LONG_MS);
    assert_non_null(s);
    txn *a = sessions_begin(s, 10, LONG_MS), *b = sessions_begin(s, 11, LONG_MS);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_not_equal(a->id, b->id);

    /* "<seq>-<32 hex>" and "<run>-<seq>". */
    const char *dash = strchr(a->id, '-');
    assert_non_null(dash);
    assert_int_equal(strlen(dash + 1), 32);
    assert_int_equal(strspn(dash + 1, "0123456789abcdef"), 32);
    char owner[64];
    snprintf(owner, sizeof owner, "run7-%.*s", (int)(dash - a->id), a->id);
    assert_string_equal(a->owner, owner);

    txn *got = sessions_get(s, a->id, strlen(a->id));
    assert_ptr_equal(got, a);
    sessions_release(s, got);
    /* One hex digit of the secret changed, the id cut short: nothing. */
    char wrong[sizeof a->id];
    memcpy(wrong, a->id, sizeof wrong);
    size_t last = strlen(wrong) - 1;
    wrong[last] = wrong[last] == '0' ? '1' : '0';
    assert_null(sessions_get(s, wrong, strlen(wrong)));
    assert_null(sessions_get(s, a->id, strlen(a->id) - 1));
    assert_null(sessions_get(s, "", 0));

    /* Owners: ours alive; another run's, an unknown sequence's, dead. */
    uint64_t now = sessions_now(s);
    assert_true(sessions_owner_alive(s, a->owner, strlen(a->owner), now));
    char other[64];
    snprintf(other, sizeof other, "run8%s", a->owner + 4);
    assert_false(sessions_owner_alive(s, other, strlen(other), now));
    assert_false(sessions_owner_alive(s, "run7-ffff", 9, now));
    assert_false(sessions_owner_alive(s, "run7-", 5, now));

    end(s, a, TXN_ABORTED, "rollback");
    end(s, b, TXN_ABORTED, "rollback");
    assert_false(sessions_owner_alive(s, a->owner, strlen(a->owner), now));
    sessions_release(s, a);
    sessions_release(s, b);
    sessions_free(s);
}

static void open_sessions_and_their_bytes_are_bounded(void **state)
{
    (void)state;
    sessions *s = sessions_new("r", LONG_MS);
    bool full = true;
    txn *a = sessions_begin_capped(s, 1, LONG_MS, 2, &full);
    assert_non_null(a);
    assert_false(full);
    txn *b = sessions_begin_capped(s, 2, LONG_MS, 2, &full);
    assert_non_null(b);
    assert_null(sessions_begin_capped(s, 3, LONG_MS, 2, &full));
    assert_true(full);
    assert_int_equal(sessions_open(s), 2);

    /* Charges against a total of 100 bytes. */
    pthread_mutex_lock(&a->mu);
    assert_true(sessions_charge(s, a, 60, 100));
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_lock(&b->mu);
    assert_false(sessions_charge(s, b, 41, 100)); /* 101: refused, nothing changed */
    assert_int_equal(b->charged, 0);
    assert_int_equal(sessions_charged(s), 60);
    assert_true(sessions_charge(s, b, 40, 100));
    pthread_mutex_unlock(&b->mu);
    pthread_mutex_lock(&a->mu);
    assert_true(sessions_charge(s, a, 10, 100)); /* shrinking always goes */
    pthread_mutex_unlock(&a->mu);
    assert_int_equal(sessions_charged(s), 50);

    /* Ending gives the charge and the place back, however it ends. */
    end(s, a, TXN_COMMITTED, "committed");
    assert_int_equal(a->charged, 0);
    assert_int_equal(sessions_charged(s), 40);
    assert_int_equal(sessions_open(s), 1);
    txn *c = sessions_begin_capped(s, 3, LONG_MS, 2, &full);
    assert_non_null(c);
    end(s, b, TXN_ABORTED, "conflict");
    end(s, c, TXN_ABORTED, "rollback");
    assert_int_equal(sessions_charged(s), 0);
    assert_int_equal(sessions_open(s), 0);
    sessions_release(s, a);
    sessions_release(s, b);
    sessions_release(s, c);
    sessions_free(s);
}

static void the_buffer_is_sorted_replaces_and_is_bounded(void **state)
{
    (void)state;
    sessions *s = sessions_new("r", LONG_MS);
    txn *t = sessions_begin(s, 1, LONG_MS);
    pthread_mutex_lock(&t->mu);
    assert_int_equal(txn_buffer(t, "m", 1, false, "1", 1, 100), TXN_BUFFERED);
    assert_int_equal(txn_buffer(t, "b", 1, false, "22", 2, 100), TXN_BUFFERED);
    assert_int_equal(txn_buffer(t, "x", 1, true, NULL, 0, 100), TXN_BUFFERED);
    assert_int_equal(t->nw, 3);
    assert_memory_equal(t->w[0].key, "b", 1);
    assert_memory_equal(t->w[1].key, "m", 1);
    assert_memory_equal(t->w[2].key, "x", 1);
    assert_true(t->w[2].deleted);
    assert_int_equal(t->bytes, 3 + 2 + 1);

    /* m again: replaced in place, its bytes recounted. */
    assert_int_equal(txn_buffer(t, "m", 1, false, "3333", 4, 100), TXN_BUFFERED);
    assert_int_equal(t->nw, 3);
    const txn_write *w = txn_find(t, "m", 1);
    assert_non_null(w);
    assert_memory_equal(w->val, "3333", 4);
    assert_int_equal(t->bytes, 3 + 5 + 1);
    assert_int_equal(txn_bytes_after(t, "m", 1, 1), 3 + 2 + 1);
    assert_null(txn_find(t, "c", 1));
    assert_int_equal(txn_lower_bound(t, "c", 1), 1);
    assert_int_equal(txn_lower_bound(t, "z", 1), 3);

    /* Past max_bytes: refused, the buffer as it was. */
    assert_int_equal(txn_buffer(t, "y", 1, false, "0123456789", 10, 15), TXN_TOO_BIG);
    assert_int_equal(txn_buffer(t, "m", 1, false, "0123456789ab", 12, 15), TXN_TOO_BIG);
    assert_int_equal(t->nw, 3);
    assert_memory_equal(txn_find(t, "m", 1)->val, "3333", 4);
    assert_int_equal(t->bytes, 9);
    pthread_mutex_unlock(&t->mu);
    end(s, t, TXN_ABORTED, "rollback");
    assert_int_equal(t->nw, 0); /* the buffer is freed at the end */
    assert_int_equal(t->writes, 3);
    sessions_release(s, t);
    sessions_free(s);
}

static int hook_calls;
static txn *hook_last;

static void count_end(void *arg, txn *t)
{
    (void)arg;
    hook_calls++;
    hook_last = t;
}

static void a_lease_that_ran_out_is_not_renewed_and_the_session_expires(void **state)
{
    (void)state;
    sessions *s = sessions_new("r", 0); /* ended sessions forgotten at once */
    sessions_set_end_hook(s, count_end, NULL);
    hook_calls = 0;
    txn *live = sessions_begin(s, 5, LONG_MS);
    txn *gone = sessions_begin(s, 6, 1);
    txn *busy = sessions_begin(s, 7, 1);
    gone->claim = (struct obs_claim *)(void *)&hook_calls; /* any non-NULL claim */
    pthread_mutex_lock(&busy->mu);
    sessions_commit_begin(busy);
    pthread_mutex_unlock(&busy->mu);
    assert_true(sessions_renew(s, live));
    sleep_ms(30);

    uint64_t now = sessions_now(s);
    assert_false(sessions_renew(s, gone));
    assert_false(sessions_owner_alive(s, gone->owner, strlen(gone->owner), now));
    /* Committing: alive whatever its lease, and not reaped. */
    assert_true(sessions_owner_alive(s, busy->owner, strlen(busy->owner), now));
    assert_int_equal(sessions_oldest_start(s), 5);

    assert_int_equal(sessions_reap(s, now), 1);
    assert_int_equal(atomic_load(&gone->state), TXN_ABORTED);
    assert_string_equal(gone->end_reason, "expired");
    assert_int_equal(hook_calls, 1);
    assert_ptr_equal(hook_last, gone);
    assert_int_equal(atomic_load(&busy->state), TXN_COMMITTING);
    assert_int_equal(atomic_load(&live->state), TXN_ACTIVE);
    assert_int_equal(sessions_active(s), 1);
    assert_int_equal(sessions_reap(s, now), 0); /* once */
    assert_int_equal(hook_calls, 1);

    /* Still referenced: kept past the retention. Released: forgotten. */
    char id[sizeof gone->id];
    memcpy(id, gone->id, sizeof id);
    sleep_ms(5);
    sessions_reap(s, sessions_now(s));
    txn *again = sessions_get(s, id, strlen(id));
    assert_ptr_equal(again, gone);
    sessions_release(s, again);
    sessions_release(s, gone);
    sessions_reap(s, sessions_now(s));
    assert_null(sessions_get(s, id, strlen(id)));

    end(s, busy, TXN_COMMITTED, "committed");
    assert_int_equal(sessions_oldest_start(s), 5);
    end(s, live, TXN_ABORTED, "rollback");
    assert_int_equal(sessions_oldest_start(s), UINT64_MAX);
    sessions_release(s, busy);
    sessions_release(s, live);
    sessions_free(s);
}

static void a_stall_gives_the_sessions_alive_then_one_more_lease(void **state)
{
    (void)state;
    sessions *s = sessions_new("r", LONG_MS);
    sessions_set_stall_ms(s, 20);
    uint64_t end_ts, len;
    sessions_now(s);
    txn *t = sessions_begin(s, 1, 40);
    sessions_last_stall(s, &end_ts, &len);
    assert_int_equal(len, 0);
    sleep_ms(100); /* nobody reads the clock: a stall, past the lease */

    uint64_t now = sessions_now(s);
    sessions_last_stall(s, &end_ts, &len);
    assert_true(len >= 100);
    assert_true(end_ts <= now);
    assert_true(sessions_stall_credit_ms(s) > 0);
    /* The lease ran out during the stall, when no client could renew it:
     * it lasts one more TTL from the stall's end. */
    assert_true(sessions_owner_alive(s, t->owner, strlen(t->owner), now));
    assert_int_equal(sessions_reap(s, now), 0);
    assert_true(sessions_renew(s, t));
    end(s, t, TXN_ABORTED, "rollback");
    sessions_release(s, t);
    sessions_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ids_are_found_only_whole_and_owners_name_the_run),
        cmocka_unit_test(open_sessions_and_their_bytes_are_bounded),
        cmocka_unit_test(the_buffer_is_sorted_replaces_and_is_bounded),
        cmocka_unit_test(a_lease_that_ran_out_is_not_renewed_and_the_session_expires),
        cmocka_unit_test(a_stall_gives_the_sessions_alive_then_one_more_lease),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
