/*
 * pd.c — `percolator pd nodes|regions`: the placement driver's view of the
 * cluster (docs/DESIGN.md §6.3), from an oracle group's member
 * (--endpoints names any; a follower's 307 leads to the leader): the
 * nodes with their last heartbeat, and the region map with each region's
 * replicas and leader, in the manner of TiKV's `pd-ctl store` and
 * `pd-ctl region`. GET /v1/pd/nodes, GET /v1/pd/regions.
 */
#include "base64.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str_of(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL ? s : "?";
}

/* An integer field, or "-" when null (not heard from yet). */
static const char *int_or_dash(const json_t *o, const char *key, char *buf, size_t len)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        return "-";
    snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    return buf;
}

static int print_nodes(const cli_reply *r)
{
    json_t *list = json_object_get(r->json, "nodes");
    if (!json_is_array(list)) {
        fprintf(stderr, "percolator: the reply has no node list\n");
        return EXIT_SERVER;
    }
    printf("%-8s %-32s %-14s %-8s %s\n", "ID", "ADDRESS", "HEARTBEAT-MS", "LEADERS", "BYTES");
    size_t i;
    json_t *n;
    json_array_foreach(list, i, n) {
        char a[24], b[24], c[24];
        printf("%-8lld %-32s %-14s %-8s %s\n", (long long)json_integer_value(json_object_get(n, "id")),
               str_of(n, "address"), int_or_dash(n, "heartbeat_ms_ago", a, sizeof a),
               int_or_dash(n, "leaders", b, sizeof b), int_or_dash(n, "bytes", c, sizeof c));
    }
    return EXIT_OK;
}

/* A region bound as printed: its bytes when they are printable ASCII, else
 * base64 marked "b64:"; open for null, (start) for "". */
static void bound(const json_t *r, const char *name, const char *open, char *out, size_t len)
{
    const json_t *b = json_object_get(r, name);
    const char *s = json_string_value(b);
    if (s == NULL) {
        snprintf(out, len, "%s", json_is_null(b) || b == NULL ? open : "?");
        return;
    }
    if (s[0] == '\0') {
        snprintf(out, len, "(start)");
        return;
    }
    unsigned char raw[96];
    size_t slen = strlen(s);
    long n = slen <= 4 * (sizeof raw / 3) ? b64_decode(s, slen, raw) : -1; /* short ones only */
    bool text = n > 0;
    for (long i = 0; text && i < n; i++)
        text = raw[i] > ' ' && raw[i] < 0x7f;
    if (text)
        snprintf(out, len, "%.*s", (int)n, (const char *)raw);
    else
        snprintf(out, len, "b64:%s", s);
}

static int print_regions(const cli_reply *r)
{
    json_t *list = json_object_get(r->json, "regions");
    if (!json_is_array(list)) {
        fprintf(stderr, "percolator: the reply has no region list\n");
        return EXIT_SERVER;
    }
    printf("%-8s %-8s %-20s %-20s %-16s %-32s %s\n", "ID", "VERSION", "START", "END", "REPLICAS",
           "LEADER", "BYTES");
    size_t i;
    json_t *g;
    json_array_foreach(list, i, g) {
        char start[128], end[128], reps[64] = "", bytes[24];
        bound(g, "start", "(start)", start, sizeof start);
        bound(g, "end", "(end)", end, sizeof end);
        size_t k;
        json_t *x;
        json_array_foreach(json_object_get(g, "replicas"), k, x) {
            size_t used = strlen(reps);
            snprintf(reps + used, sizeof reps - used, "%s%lld", k ? "," : "",
                     (long long)json_integer_value(x));
        }
        const json_t *leader = json_object_get(g, "leader");
        printf("%-8lld %-8lld %-20s %-20s %-16s %-32s %s\n",
               (long long)json_integer_value(json_object_get(g, "id")),
               (long long)json_integer_value(json_object_get(g, "version")), start, end,
               reps[0] ? reps : "-", json_is_object(leader) ? str_of(leader, "address") : "-",
               int_or_dash(g, "bytes", bytes, sizeof bytes));
    }
    printf("(%lld regions in the map)\n", (long long)json_integer_value(json_object_get(r->json, "total")));
    return EXIT_OK;
}

int cli_pd(const cli_opts *o)
{
    bool nodes = strcmp(o->args[0], "nodes") == 0, regions = strcmp(o->args[0], "regions") == 0;
    if (!nodes && !regions) {
        fprintf(stderr, "percolator: pd %s: use `pd nodes` or `pd regions` (percolator --help)\n",
                o->args[0]);
        return EXIT_USAGE;
    }
    char path[64];
    snprintf(path, sizeof path, nodes ? "/v1/pd/nodes" : "/v1/pd/regions?limit=%ld",
             o->has_limit ? o->limit : 1000L);
    cli_reply r;
    cli_request("GET", path, NULL, 0, &r);
    int rc = r.status != 200 ? cli_fail(&r)
             : o->json       ? (cli_print_body(&r), EXIT_OK)
             : nodes         ? print_nodes(&r)
                             : print_regions(&r);
    cli_reply_free(&r);
    return rc;
}
