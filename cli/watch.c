/*
 * watch.c — `percolator watch`: follow GET /v1/watch, and resume it.
 *
 * The stream's changes are held until the progress line that follows
 * them, then printed: a stream cut before that progress line is resumed
 * from the previous one (start_ts = its resolved_ts), and the changes
 * after it come again — printed once, because they were never printed
 * (docs/DESIGN.md §10, rule 7). The first line of a stream is a progress
 * line at its start, so even a stream begun "now" knows where to resume.
 */
#include "cli.h"

#include <string.h>
#include <time.h>

typedef struct {
    const cli_opts *o;
    buf line;                     /* a line not yet whole */
    json_t *held;                 /* changes since the last progress line */
    uint64_t resume;              /* the last resolved_ts */
    bool have_resume;
    long printed;                 /* changes printed */
    bool done;                    /* --count reached */
    bool progressed;              /* a progress line came on this try */
    char error[64];               /* the stream's error line, if it ended with one */
} watch_state;

static void print_change(const cli_opts *o, json_t *c)
{
    if (o->json) {
        char *s = json_dumps(c, JSON_COMPACT);
        if (s != NULL)
            printf("%s\n", s);
        free(s);
        return;
    }
    const char *type = json_string_value(json_object_get(c, "type"));
    printf("%llu\t%s\t", (unsigned long long)json_integer_value(json_object_get(c, "commit_ts")),
           type ? type : "?");
    cli_print_string(json_object_get(c, "key"));
    if (type != NULL && strcmp(type, "put") == 0) {
        putchar('\t');
        cli_print_string(json_object_get(c, "value"));
    }
    putchar('\n');
}

/* One whole line of the stream. */
static void take_line(watch_state *w, const char *p, size_t n)
{
    json_t *j = json_loadb(p, n, JSON_ALLOW_NUL, NULL);
    const char *type = json_string_value(json_object_get(j, "type"));
    if (type == NULL) {
        json_decref(j);
        return;
    }
    if (strcmp(type, "put") == 0 || strcmp(type, "delete") == 0) {
        json_array_append(w->held, j);
    } else if (strcmp(type, "progress") == 0) {
        size_t i;
        json_t *c;
        json_array_foreach(w->held, i, c) {
            if (w->done)
                break;
            print_change(w->o, c);
            w->done = w->o->has_count && ++w->printed >= w->o->count;
        }
        json_array_clear(w->held);
        if (w->o->json && !w->done)
            print_change(w->o, j);
        fflush(stdout);
        w->resume = (uint64_t)json_integer_value(json_object_get(j, "resolved_ts"));
        w->have_resume = true;
        w->progressed = true;
    } else if (strcmp(type, "error") == 0) {
        const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
        snprintf(w->error, sizeof w->error, "%s", code ? code : "?");
    }
    json_decref(j);
}

static size_t on_bytes(void *arg, const char *p, size_t n)
{
    watch_state *w = arg;
    if (w->done || w->line.len + n > CLI_MAX_REPLY || buf_append(&w->line, p, n) != 0)
        return 0; /* ends the transfer */
    char *start = w->line.data, *end = w->line.data + w->line.len, *nl;
    while (!w->done && (nl = memchr(start, '\n', (size_t)(end - start))) != NULL) {
        take_line(w, start, (size_t)(nl - start));
        start = nl + 1;
    }
    if (w->done)
        return 0;
    size_t rest = (size_t)(end - start);
    memmove(w->line.data, start, rest);
    w->line.len = rest;
    return n;
}

/* The request's path: the range, the encoding, where to start. */
static int watch_path(const watch_state *w, buf *p)
{
    const cli_opts *o = w->o;
    int rc = buf_puts(p, "/v1/watch?");
    if (o->key != NULL)
        rc |= buf_puts(p, "key=") | cli_pct_append(p, o->key);
    else if (o->nargs > 0)
        rc |= buf_puts(p, "prefix=") | cli_pct_append(p, o->args[0]);
    if (w->have_resume)
        rc |= buf_printf(p, "&start_ts=%llu", (unsigned long long)w->resume);
    rc |= buf_puts(p, cli_encoding_query(o, '&'));
    return rc;
}

int cli_watch(const cli_opts *o)
{
    if (o->key != NULL && o->nargs > 0) {
        fprintf(stderr, "percolator: watch takes a PREFIX or --key, not both\n");
        return EXIT_USAGE;
    }
    watch_state w = {.o = o, .held = json_array(), .resume = o->start_ts,
                     .have_resume = o->has_start_ts};
    if (w.held == NULL)
        return EXIT_SERVER;
    size_t n = cli_endpoint_count(), at = 0;
    long idle = 0, backoff = 100;
    int rc = EXIT_OK;
    while (!w.done) {
        buf path = BUF_INIT;
        cli_reply r;
        if (watch_path(&w, &path) != 0) {
            buf_free(&path);
            rc = EXIT_SERVER;
            break;
        }
        w.progressed = false;
        w.error[0] = '\0';
        w.line.len = 0;
        json_array_clear(w.held); /* they come again from the last progress */
        cli_stream_one(at, path.data, on_bytes, &w, &r);
        buf_free(&path);
        if (o->verbose)
            fprintf(stderr, "percolator: watch through %s ended (%ld%s%s), resume at %llu\n",
                    cli_endpoint(at), r.status, w.error[0] ? " " : "", w.error,
                    (unsigned long long)w.resume);
        /* A refusal that trying again cannot mend (400, 401, 410). */
        if (!w.done && r.status >= 400 && r.status < 500) {
            rc = cli_fail(&r);
            cli_reply_free(&r);
            break;
        }
        cli_reply_free(&r);
        if (w.done)
            break;
        /* Cut, refused (503) or unreachable: resume, on the next endpoint
         * when this one made no progress. */
        idle = w.progressed ? 0 : idle + 1;
        if (idle > o->retries + 3) {
            fprintf(stderr, "percolator: watch: no endpoint served the stream (%ld tries)\n",
                    idle);
            rc = EXIT_UNAVAILABLE;
            break;
        }
        if (!w.progressed) {
            at = (at + 1) % n;
            struct timespec ts = {backoff / 1000, (backoff % 1000) * 1000000L};
            nanosleep(&ts, NULL);
            backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
        } else {
            backoff = 100;
        }
    }
    buf_free(&w.line);
    json_decref(w.held);
    return rc;
}
