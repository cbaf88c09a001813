/*
 * log.c — where the engine's messages go (engine.h, pc_log_fn).
 *
 * The engine does not know the program's log: its owner passes a function
 * in pc_engine_config that writes a message in the program's format (text
 * or JSON lines). WiredTiger's messages come through the event handler
 * (fatal.c) and go the same way. Without that function a message is one
 * line on stderr, as before there was one (the unit tests).
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

void pc_logf(const pc_logger *lg, pc_log_level level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap); /* a longer one is cut: still one line */
    va_end(ap);
    if (lg != NULL && lg->fn != NULL)
        lg->fn(lg->arg, level, msg);
    else
        fprintf(stderr, "%s\n", msg);
}
