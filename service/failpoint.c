/*
 * failpoint.c — see failpoint.h.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failpoint.h"
#include "log.h"
#include "timeutil.h"

static char point[64];
static unsigned sleep_ms; /* 0: die */
static bool fail_here;     /* "=error" */

void failpoint_init(void)
{
    const char *v = getenv("PERCOLATOR_FAILPOINT");
    if (v == NULL || v[0] == '\0')
        return;
    const char *eq = strchr(v, '=');
    size_t n = eq ? (size_t)(eq - v) : strlen(v);
    if (n >= sizeof(point))
        n = sizeof(point) - 1;
    memcpy(point, v, n);
    point[n] = '\0';
    if (eq != NULL && strncmp(eq + 1, "sleep:", 6) == 0)
        sleep_ms = (unsigned)strtoul(eq + 7, NULL, 10);
    fail_here = eq != NULL && strcmp(eq + 1, "error") == 0;
    log_warn("failpoint armed: %s (%s)", point,
             fail_here ? "error" : sleep_ms ? "sleep" : "crash");
}

bool failpoint_fails(const char *name)
{
    return fail_here && strcmp(point, name) == 0;
}

void failpoint(pc_session *ps, const char *name)
{
    if (point[0] == '\0' || strcmp(point, name) != 0 || fail_here)
        return;
    if (sleep_ms > 0) {
        log_warn("failpoint %s: sleeping %u ms", name, sleep_ms);
        time_sleep_ms(sleep_ms);
        return;
    }
    log_warn("failpoint %s: crashing now", name);
    pc_sync(ps);
    raise(SIGKILL);
}
