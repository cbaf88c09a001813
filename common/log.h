/*
 * log.h — leveled logging to stderr.
 *
 * One line per event: "2024-05-01T12:00:00.123Z INFO message". Each line is
 * written with a single write(2) so lines from different threads never
 * interleave. The level is process-wide (set once from --log-level), and
 * so is the format: text as above, or one JSON object a line
 * (--log-format json): {"ts":"…","level":"info","msg":"…"}.
 */
#ifndef PERCOLATOR_LOG_H
#define PERCOLATOR_LOG_H

#include <stdbool.h>
#include <stddef.h>

typedef enum log_level {
    LOG_DEBUG = 0,
    LOG_INFO = 1,
    LOG_WARN = 2,
    LOG_ERROR = 3,
    LOG_OFF = 4
} log_level;

/* "debug", "info", "warn", "error", "off", NULL: usable as a flags enum table
 * whose index is the log_level. */
extern const char *const log_level_names[];

/* "text", "json", NULL: a flags enum table (index 1: JSON). */
extern const char *const log_format_names[];
void log_set_json(bool on);

void log_set_level(log_level level);
log_level log_get_level(void);
/* Parse a level name; 0 or -1. */
int log_level_parse(const char *name, log_level *out);

void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Why a program cannot start (it exits next), whatever the level: the
 * line "prog: message" in the text format, an error line in the JSON one
 * (so that with --log-format json every line it writes parses). */
void log_startup_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One access-log line (level info): text "access GET /path 200 1.234ms 56B
 * route=… id=…", or in JSON the fields method, path, route, status,
 * duration_ms, bytes, request_id. */
void log_access(const char *method, const char *path, const char *route, unsigned status,
                double ms, size_t bytes, const char *request_id);

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
