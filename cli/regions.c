/*
 * regions.c — `percolator region list`: the regions the service cuts the
 * keyspace into (GET /v1/regions; docs/DESIGN.md §6.2), in key order, in
 * the manner of TiKV's `pd-ctl region`; `percolator region split KEY`:
 * split the region holding KEY before it (POST /v1/regions/split), then
 * the regions as `list` prints them.
 */
#include "cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A bound as printed: the key, "-" for the open end (null), "" shown as
 * (start) for the first region's start. */
static const char *bound(const json_t *r, const char *name, const char *open)
{
    const json_t *b = json_object_get(r, name);
    if (json_is_null(b) || b == NULL)
        return open;
    const char *s = json_string_value(b);
    return s == NULL ? "?" : s[0] == '\0' ? "(start)" : s;
}

static int print_regions(const cli_opts *o, const cli_reply *r)
{
    if (o->json) {
        cli_print_body(r);
        return EXIT_OK;
    }
    json_t *list = json_object_get(r->json, "regions");
    if (!json_is_array(list)) {
        fprintf(stderr, "percolator: the reply has no region list\n");
        return EXIT_SERVER;
    }
    printf("%-6s %-6s %-24s %-24s %-10s %s\n", "ID", "EPOCH", "START", "END", "BATCHES",
           "BYTES");
    size_t i;
    json_t *g;
    json_array_foreach(list, i, g) {
        const json_t *bytes = json_object_get(g, "bytes");
        char size[24] = "-"; /* not measured */
        if (json_is_integer(bytes))
            snprintf(size, sizeof size, "%lld", (long long)json_integer_value(bytes));
        printf("%-6lld %-6lld %-24s %-24s %-10lld %s\n",
               (long long)json_integer_value(json_object_get(g, "id")),
               (long long)json_integer_value(json_object_get(g, "epoch")),
               bound(g, "start", "(start)"), bound(g, "end", "(end)"),
               (long long)json_integer_value(json_object_get(g, "batches")), size);
    }
    return EXIT_OK;
}

int cli_region(const cli_opts *o)
{
    bool list = strcmp(o->args[0], "list") == 0 && o->nargs == 1;
    bool split = strcmp(o->args[0], "split") == 0 && o->nargs == 2;
    if (!list && !split) {
        fprintf(stderr, "percolator: region %s: use `region list` or `region split KEY` "
                "(percolator --help)\n", o->args[0]);
        return EXIT_USAGE;
    }
    char path[64];
    snprintf(path, sizeof path, "/v1/regions%s%s", split ? "/split" : "",
             cli_encoding_query(o, '?'));
    cli_reply r;
    char *body = NULL;
    if (split) {
        json_t *req = json_pack("{s:s}", "key", o->args[1]);
        body = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
        json_decref(req);
        if (body == NULL) {
            fprintf(stderr, "percolator: out of memory\n");
            return EXIT_USAGE;
        }
    }
    cli_request(split ? "POST" : "GET", path, body, 0, &r);
    free(body);
    int rc = r.status == 200 ? print_regions(o, &r) : cli_fail(&r);
    cli_reply_free(&r);
    return rc;
}
