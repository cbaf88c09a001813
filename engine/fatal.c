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
 * only through its event handler, which is installed here. The handler
 * also takes WiredTiger's messages, which it would print to stderr and
 * stdout itself, and gives them to the owner's log (log.c): every line a
 * program writes is then in its --log-format.
 */
#include <errno.h>
#include <stddef.h>

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
    pc_log(e, PC_LOG_ERROR, "fatal storage failure: %s", what);
    if (e->on_fatal != NULL)
        e->on_fatal(e->fatal_arg, what);
}

static pc_engine *engine_of(WT_EVENT_HANDLER *h)
{
    return (pc_engine *)(void *)((char *)h - offsetof(pc_engine, events));
}

/* WiredTiger's error messages, whole (it formats them: time, thread,
 * function, reason), plus the panic check. Returning 0: the error goes on
 * as WiredTiger decided. */
static int handle_error(WT_EVENT_HANDLER *h, WT_SESSION *ws, int error, const char *message)
{
    (void)ws;
    pc_engine *e = engine_of(h);
    pc_logf(&e->log, PC_LOG_ERROR, "%s", message);
    if (error == WT_PANIC)
        pc_fatal(e, message);
    return 0;
}

/* Its informational messages (recovery, verbose output). Returning 0:
 * handled, WiredTiger does not print them as well. */
static int handle_message(WT_EVENT_HANDLER *h, WT_SESSION *ws, const char *message)
{
    (void)ws;
    pc_logf(&engine_of(h)->log, PC_LOG_INFO, "%s", message);
    return 0;
}

void pc_fatal_init(pc_engine *e, pc_fatal_fn fn, void *arg)
{
    e->on_fatal = fn;
    e->fatal_arg = arg;
    e->events.handle_error = handle_error;
    e->events.handle_message = handle_message;
    /* progress and close: WiredTiger's defaults, which print nothing */
}
