/*
 * kv.c — get, put, del and scan: the single-request API (/v1/kv).
 */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "/v1/kv/<key percent-encoded>" into p. 0 or -1. */
static int key_path(buf *p, const char *key)
{
    return buf_puts(p, "/v1/kv/") == 0 && cli_pct_append(p, key) == 0 ? 0 : -1;
}

static int oom(buf *p)
{
    buf_free(p);
    fprintf(stderr, "percolator: out of memory\n");
    return EXIT_SERVER;
}

static int bad_reply(cli_reply *r)
{
    fprintf(stderr, "percolator: unexpected reply (HTTP %ld)\n", r->status);
    cli_reply_free(r);
    return EXIT_SERVER;
}

static void print_json(const json_t *j)
{
    json_dumpf(j, stdout, JSON_COMPACT);
    putchar('\n');
}

int cli_get(const cli_opts *o)
{
    buf p = BUF_INIT;
    if (key_path(&p, o->args[0]) != 0 || buf_puts(&p, cli_encoding_query(o, '?')) != 0)
        return oom(&p);
    if (o->has_ts && buf_printf(&p, "%cts=%" PRIu64, o->base64 ? '&' : '?', o->ts) != 0)
        return oom(&p);
    cli_reply r;
    cli_request("GET", p.data, NULL, 0, &r);
    buf_free(&p);
    if (r.status != 200) {
        int rc = cli_fail(&r);
        cli_reply_free(&r);
        return rc;
    }
    json_t *v = json_object_get(r.json, "value");
    if (!json_is_string(v))
        return bad_reply(&r);
    if (o->json) {
        print_json(r.json);
    } else {
        cli_print_string(v);
        putchar('\n');
    }
    cli_reply_free(&r);
    return EXIT_OK;
}

/* The commit_ts of a 200 write reply, printed (or the reply with --json). */
static int print_commit(const cli_opts *o, cli_reply *r)
{
    if (r->status != 200) {
        int rc = cli_fail(r);
        cli_reply_free(r);
        return rc;
    }
    json_t *ts = json_object_get(r->json, "commit_ts");
    if (!json_is_integer(ts))
        return bad_reply(r);
    if (o->json)
        print_json(r->json);
    else
        printf("%" JSON_INTEGER_FORMAT "\n", json_integer_value(ts));
    cli_reply_free(r);
    return EXIT_OK;
}

/* The value to write: the argument, or stdin for "-" (base64 loses its
 * line breaks). NULL on error (said on stderr); *owned is what to free. */
static const char *put_value(const cli_opts *o, size_t *len, char **owned)
{
    *owned = NULL;
    if (strcmp(o->args[1], "-") != 0) {
        *len = strlen(o->args[1]);
        return o->args[1];
    }
    char *v = cli_read_stdin(CLI_MAX_INPUT, len);
    if (v && o->base64)
        cli_strip_space(v, len);
    *owned = v;
    return v;
}

int cli_put(const cli_opts *o)
{
    size_t len;
    char *owned;
    const char *value = put_value(o, &len, &owned);
    if (value == NULL)
        return EXIT_USAGE;
    json_t *body = json_object();
    json_t *v = json_stringn(value, len);
    free(owned);
    if (v == NULL) {
        json_decref(body);
        fprintf(stderr, "percolator: the value is not valid UTF-8 text (give it in base64 with --base64)\n");
        return EXIT_USAGE;
    }
    char *text = NULL;
    if (body == NULL || json_object_set_new(body, "value", v) != 0 ||
        (o->has_if_commit_ts &&
         json_object_set_new(body, "if_commit_ts", json_integer((json_int_t)o->if_commit_ts)) != 0) ||
        (o->lease != 0 && json_object_set_new(body, "lease", json_integer((json_int_t)o->lease)) != 0) ||
        (text = json_dumps(body, JSON_COMPACT)) == NULL) {
        json_decref(body);
        fprintf(stderr, "percolator: out of memory\n");
        return EXIT_SERVER;
    }
    json_decref(body);
    buf p = BUF_INIT;
    if (key_path(&p, o->args[0]) != 0 || buf_puts(&p, cli_encoding_query(o, '?')) != 0) {
        free(text);
        return oom(&p);
    }
    cli_reply r;
    cli_request("PUT", p.data, text, 0, &r);
    buf_free(&p);
    free(text);
    return print_commit(o, &r);
}

int cli_del(const cli_opts *o)
{
    /* A compare-and-delete: {"if_commit_ts": N} (the API's DELETE body). */
    char cas[48];
    if (o->has_if_commit_ts)
        snprintf(cas, sizeof cas, "{\"if_commit_ts\":%llu}", (unsigned long long)o->if_commit_ts);
    buf p = BUF_INIT;
    if (key_path(&p, o->args[0]) != 0 || buf_puts(&p, cli_encoding_query(o, '?')) != 0)
        return oom(&p);
    cli_reply r;
    cli_request("DELETE", p.data, o->has_if_commit_ts ? cas : NULL, 0, &r);
    buf_free(&p);
    return print_commit(o, &r);
}

/* One query parameter "&name=<value percent-encoded>" when value is set. */
static int add_param(buf *p, const char *name, const char *value)
{
    if (value == NULL)
        return 0;
    return buf_printf(p, "&%s=", name) == 0 && cli_pct_append(p, value) == 0 ? 0 : -1;
}

/* The URL of one page: the range, the page size, the cursor. */
static int page_path(const cli_opts *o, long want, const char *after, buf *p)
{
    long n = o->page_size;
    if (want > 0 && want < n)
        n = want;
    buf_reset(p);
    if (buf_printf(p, "/v1/kv?limit=%ld", n) != 0 || buf_puts(p, cli_encoding_query(o, '&')) != 0 ||
        add_param(p, "prefix", o->prefix) != 0 || add_param(p, "start", o->start) != 0 ||
        add_param(p, "end", o->end) != 0 || add_param(p, "after", after) != 0)
        return -1;
    if (o->has_ts && buf_printf(p, "&ts=%" PRIu64, o->ts) != 0)
        return -1;
    return 0;
}

/* Print a page's items; how many, or -1 if the page is malformed. */
static long print_items(const cli_opts *o, json_t *items, long room)
{
    long printed = 0;
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        if (o->has_limit && printed >= room)
            break;
        json_t *k = json_object_get(it, "key"), *v = json_object_get(it, "value");
        if (!json_is_string(k) || !json_is_string(v))
            return -1;
        if (o->json) {
            print_json(it);
        } else {
            cli_print_string(k);
            putchar('\t');
            cli_print_string(v);
            putchar('\n');
        }
        printed++;
    }
    return printed;
}

/* Follows `next` until it is null or --limit items were printed. Without
 * --ts every page reads its own fresh snapshot (the API's rule). */
int cli_scan(const cli_opts *o)
{
    buf p = BUF_INIT;
    char *after = NULL;
    long left = o->has_limit ? o->limit : 0;
    int rc = EXIT_OK;
    for (;;) {
        if (page_path(o, left, after, &p) != 0) {
            free(after);
            return oom(&p);
        }
        cli_reply r;
        cli_request("GET", p.data, NULL, 0, &r);
        if (r.status != 200) {
            rc = cli_fail(&r);
            cli_reply_free(&r);
            break;
        }
        json_t *items = json_object_get(r.json, "items"), *next = json_object_get(r.json, "next");
        long n = json_is_array(items) ? print_items(o, items, left) : -1;
        if (n < 0 || !(json_is_string(next) || json_is_null(next))) {
            rc = bad_reply(&r);
            break;
        }
        left -= n;
        free(after);
        after = NULL;
        if (json_is_string(next) && (after = strdup(json_string_value(next))) == NULL) {
            cli_reply_free(&r);
            fprintf(stderr, "percolator: out of memory\n");
            rc = EXIT_SERVER;
            break;
        }
        cli_reply_free(&r);
        if (after == NULL || (o->has_limit && left <= 0))
            break;
    }
    free(after);
    buf_free(&p);
    fflush(stdout);
    return rc;
}
