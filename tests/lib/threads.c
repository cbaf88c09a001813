/*
 * threads.c — the threads a test starts, counted, so that a failed test
 * does not leave them running against its dead stack frame (testlib.h).
 */
#include "testlib.h"

#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static atomic_int running;

int tl_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(t, NULL, fn, arg);
    if (rc == 0)
        atomic_fetch_add(&running, 1);
    return rc;
}

int tl_thread_join(pthread_t t, void **ret)
{
    int rc = pthread_join(t, ret);
    if (rc == 0)
        atomic_fetch_sub(&running, 1);
    return rc;
}

/* A test left threads running (set by the teardown, acted on by the
 * next test's setup, after cmocka printed why the test failed). */
static atomic_bool left;

int tl_threads_teardown(void **state)
{
    (void)state;
    int n = atomic_load(&running);
    if (n == 0)
        return 0;
    fprintf(stderr, "ERROR: the test ended with %d of its threads still running (it failed, or "
            "did not join them)\n", n);
    atomic_store(&left, true);
    return -1; /* cmocka reports the test failed, with its own reason first */
}

/* cmocka runs a test's teardown after a failure too, and prints the
 * failure after it: the next test's setup ends the program (exit code 1,
 * as a failed test's), its programs killed first, since nothing after a
 * thread that outlived its test can be trusted. */
int tl_threads_setup(void **state)
{
    (void)state;
    if (!atomic_load(&left))
        return 0;
    fprintf(stderr, "ERROR: a test left threads running: the program stops here (the tests "
            "after it did not run)\n");
    fflush(NULL);
    tl_kill_started();
    _exit(1);
}
