/*
 * log.c — leveled logging (see log.h).
 *
 * The line is formatted into a stack buffer (long messages are cut, with
 * "..." at the end) and written at once, so a log line is never split by
 * another thread's. Newlines inside a message are replaced by spaces to keep
 * the one-line-per-event rule that makes logs greppable. With the JSON
 * format (--log-format json) each line is one JSON object, for log
 * collectors: {"ts":…,"level":…,"msg":…} plus an access line's fields.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "utf8.h"

const char *const log_level_names[] = {"debug", "info", "warn", "error", "off", NULL};
static const char *const level_tags[] = {"DEBUG", "INFO", "WARN", "ERROR", "OFF"};

static _Atomic int current_level = LOG_INFO;
static atomic_bool json_format;

const char *const log_format_names[] = {"text", "json", NULL};

void log_set_json(bool on)
{
    atomic_store(&json_format, on);
}

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

/* "2024-05-01T12:00:00.123Z" into out (at least 32 bytes); its length. */
static size_t timestamp(char *out, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(out + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000L);
    return n;
}

/* Append src to out[*n..cap) as the inside of a JSON string: quotes,
 * backslashes and control characters escaped, bytes that are not UTF-8
 * as \\xNN. Stops (cut) when out is full, keeping room for what closes
 * the line. */
static void json_append(char *out, size_t *n, size_t cap, const char *src)
{
    char clean[2048];
    utf8_escape(src, clean, sizeof clean);
    for (const char *p = clean; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        char esc[8];
        size_t k;
        if (c == '"' || c == '\\')
            k = (size_t)snprintf(esc, sizeof esc, "\\%c", c);
        else if (c < 0x20)
            k = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
        else
            esc[0] = (char)c, k = 1;
        if (*n + k + 8 >= cap)
            return;
        memcpy(out + *n, esc, k);
        *n += k;
    }
}

static void emit(const char *line, size_t n)
{
    /* A short write to stderr is not worth retrying into a loop; one try. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}

static const char *const level_json[] = {"debug", "info", "warn", "error", "off"};

/* One JSON line: {"ts","level","msg"} and, if given, more fields already
 * formatted as ',"k":v...'. */
static void emit_json(log_level level, const char *msg, const char *fields)
{
    char line[4096];
    size_t n = (size_t)snprintf(line, sizeof line, "{\"ts\":\"");
    n += timestamp(line + n, sizeof line - n);
    n += (size_t)snprintf(line + n, sizeof line - n, "\",\"level\":\"%s\",\"msg\":\"",
                          level_json[level]);
    json_append(line, &n, sizeof line - 16, msg);
    n += (size_t)snprintf(line + n, sizeof line - n, "\"%s}\n", fields ? fields : "");
    if (n >= sizeof line) { /* the fields did not fit: close the line as it is */
        n = sizeof line - 3;
        memcpy(line + n, "}\n", 2);
        n += 2;
    }
    emit(line, n);
}

void log_msg(log_level level, const char *fmt, ...)
{
    if ((int)level < atomic_load(&current_level) || level >= LOG_OFF)
        return;

    char line[2048];
    if (atomic_load(&json_format)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        emit_json(level, line, NULL);
        return;
    }
    size_t n = timestamp(line, sizeof line);
    n += (size_t)snprintf(line + n, sizeof line - n, " %s ", level_tags[level]);

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
    emit(line, n);
}

void log_startup_error(const char *prog, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (atomic_load(&json_format)) {
        emit_json(LOG_ERROR, msg, NULL);
        return;
    }
    char line[1200];
    int n = snprintf(line, sizeof line, "%s: %s\n", prog, msg);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line) { /* cut: still one line */
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    emit(line, (size_t)n);
}

void log_access(const char *method, const char *path, const char *route, unsigned status,
                double ms, size_t bytes, const char *request_id)
{
    if (LOG_INFO < atomic_load(&current_level))
        return;
    if (!atomic_load(&json_format)) {
        log_msg(LOG_INFO, "access %s %.200s %u %.3fms %zuB route=%s id=%s", method, path, status,
                ms, bytes, route, request_id);
        return;
    }
    char fields[1024];
    size_t n = (size_t)snprintf(fields, sizeof fields, ",\"method\":\"");
    json_append(fields, &n, sizeof fields, method);
    n += (size_t)snprintf(fields + n, sizeof fields - n, "\",\"path\":\"");
    json_append(fields, &n, sizeof fields - 200, path);
    n += (size_t)snprintf(fields + n, sizeof fields - n, "\",\"route\":\"");
    json_append(fields, &n, sizeof fields - 150, route);
    n += (size_t)snprintf(fields + n, sizeof fields - n,
                          "\",\"status\":%u,\"duration_ms\":%.3f,\"bytes\":%zu,\"request_id\":\"",
                          status, ms, bytes);
    json_append(fields, &n, sizeof fields - 4, request_id);
    if (n + 2 < sizeof fields) {
        fields[n++] = '"';
        fields[n] = '\0';
    }
    emit_json(LOG_INFO, "access", fields);
}
