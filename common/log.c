/*
 * log.c — leveled logging (see log.h).
 *
 * The line is formatted into a stack buffer (long messages are cut, with
 * "..." at the end) and written at once, so a log line is never split by
 * another thread's. Newlines inside a message are replaced by spaces to keep
 * the one-line-per-event rule that makes logs greppable.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *const log_level_names[] = {"debug", "info", "warn", "error", "off", NULL};
static const char *const level_tags[] = {"DEBUG", "INFO", "WARN", "ERROR", "OFF"};

static _Atomic int current_level = LOG_INFO;

void log_set_level(log_level level)
{
    atomic_store(&current_level, (int)level);
}

log_level log_get_level(void)
{
    return (log_level)atomic_load(&current_level);
}

int log_level_parse(const char *name, log_level *out)
{
    for (int i = 0; log_level_names[i]; i++) {
        if (strcmp(name, log_level_names[i]) == 0) {
            *out = (log_level)i;
            return 0;
        }
    }
    return -1;
}

void log_msg(log_level level, const char *fmt, ...)
{
    if ((int)level < atomic_load(&current_level) || level >= LOG_OFF)
        return;

    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ %s ",
                          ts.tv_nsec / 1000000L, level_tags[level]);

    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    size_t start = n;
    if ((size_t)m >= sizeof line - n - 1) {
        n = sizeof line - 2; /* truncated: mark it */
        memcpy(line + n - 3, "...", 3);
    } else {
        n += (size_t)m;
    }
    for (size_t i = start; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[n++] = '\n';

    /* A short write to stderr is not worth retrying into a loop; one try. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}
