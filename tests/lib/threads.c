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

/* cmocka runs a test's teardown after a failure too: if the test left
 * threads behind, nothing after this can be trusted, so the program ends
 * here (exit code 1, as a failed test's), its programs killed first. */
int tl_threads_teardown(void **state)
{
    (void)state;
    int n = atomic_load(&running);
    if (n == 0)
        return 0;
    fprintf(stderr, "ERROR: the test failed with %d of its threads still running: the "
            "program stops here (the tests after it did not run)\n", n);
    fflush(NULL);
    tl_kill_started();
    _exit(1);
}
