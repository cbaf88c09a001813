/*
 * fatal.c — storage failures the process cannot go on from (engine.h,
 * pc_fatal_fn; docs/DESIGN.md §4.7).
 *
 * Once WiredTiger panics, every call of the connection fails with WT_PANIC
 * until the process restarts and recovers from the log; freeing disk
 * space changes nothing. A write to disk that failed (ENOSPC, EIO) leaves
 * the store consistent but the process can do no useful work either. In
 * both cases the engine tells its owner at once (the service exits, its
 * supervisor restarts it) instead of answering errors while looking alive.
 * WiredTiger reports a panic of its own threads (log, checkpoint, eviction)
 * only through its event handler, which is installed here.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "internal.h"

bool pc_wt_fatal(int ret)
{
    return ret == WT_PANIC || ret == ENOSPC || ret == EDQUOT || ret == EIO;
}

void pc_fatal(pc_engine *e, const char *what)
{
    /* The first report calls the hook; a hook that returns is not called
     * again for the failures that follow from the same one. */
    if (atomic_exchange(&e->failed, true))
        return;
    fprintf(stderr, "engine: fatal storage failure: %s\n", what);
    if (e->on_fatal != NULL)
        e->on_fatal(e->fatal_arg, what);
}

/* WiredTiger's error messages, as its default handler prints them, plus the
 * panic check. Returning 0: the error goes on as WiredTiger decided. */
static int handle_error(WT_EVENT_HANDLER *h, WT_SESSION *ws, int error, const char *message)
{
    (void)ws;
    pc_engine *e = (pc_engine *)(void *)((char *)h - offsetof(pc_engine, events));
    fprintf(stderr, "%s\n", message);
    if (error == WT_PANIC)
        pc_fatal(e, message);
    return 0;
}

void pc_fatal_init(pc_engine *e, pc_fatal_fn fn, void *arg)
{
    e->on_fatal = fn;
    e->fatal_arg = arg;
    e->events.handle_error = handle_error; /* the other events: WiredTiger's defaults */
}
