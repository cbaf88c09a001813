/*
 * lease.c — `percolator lease grant|keepalive|revoke|get|list`: keys that
 * expire (POST /v1/leases, POST /v1/leases/{id}/keepalive, DELETE and GET
 * /v1/leases/{id}, GET /v1/leases; docs/DESIGN.md §11), in the manner of
 * `etcdctl lease grant|keep-alive|revoke|timetolive|list`. A put attaches
 * its key with `percolator put KEY VALUE --lease ID` (kv.c).
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A lease id: a positive integer below 2^53. 0 if s is not one. */
static uint64_t lease_id(const char *s)
{
    char *end;
    errno = 0;
    if (*s < '1' || *s > '9')
        return 0;
    unsigned long long v = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0' && v < (1ull << 53) ? (uint64_t)v : 0;
}

static long long num(const json_t *j, const char *key)
{
    return (long long)json_integer_value(json_object_get(j, key));
}

/* A 200/201 reply printed with --json; else fn prints it. */
static int answer(const cli_opts *o, cli_reply *r, long want, void (*fn)(const json_t *))
{
    int rc = EXIT_OK;
    if (r->status != want) {
        rc = cli_fail(r);
    } else if (!json_is_object(r->json)) {
        fprintf(stderr, "percolator: the reply is not a JSON object\n");
        rc = EXIT_SERVER;
    } else if (o->json) {
        cli_print_body(r);
    } else {
        fn(r->json);
    }
    cli_reply_free(r);
    return rc;
}

static void print_id(const json_t *j)
{
    printf("%lld\n", num(j, "id"));
}

static void print_revoked(const json_t *j)
{
    printf("%lld key(s) deleted at %lld\n", num(j, "deleted_keys"), num(j, "commit_ts"));
}

static void print_kept(const json_t *j)
{
    printf("%lld kept alive for %lld ms\n", num(j, "id"), num(j, "ttl_ms"));
}

static void print_lease(const json_t *j)
{
    json_t *keys = json_object_get(j, "keys"), *k;
    size_t i;
    printf("lease %lld: ttl %lld ms, %lld ms left, %zu key(s)\n", num(j, "id"), num(j, "ttl_ms"),
           num(j, "remaining_ms"), json_array_size(keys));
    json_array_foreach(keys, i, k) {
        cli_print_string(k);
        putchar('\n');
    }
}

static void print_list(const json_t *j)
{
    json_t *l;
    size_t i;
    printf("%-18s %-12s %s\n", "ID", "TTL-MS", "REMAINING-MS");
    json_array_foreach(json_object_get(j, "leases"), i, l)
        printf("%-18lld %-12lld %lld\n", num(l, "id"), num(l, "ttl_ms"), num(l, "remaining_ms"));
}

/* keepalive ID [--every-ms MS [--count N]]: one keep-alive, or one every
 * MS until N were sent (no --count: until the lease is gone, exit 1). */
static int keepalive(const cli_opts *o, uint64_t id)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/leases/%llu/keepalive", (unsigned long long)id);
    for (long sent = 0;;) {
        cli_reply r;
        cli_request("POST", path, NULL, 0, &r);
        int rc = answer(o, &r, 200, print_kept);
        fflush(stdout);
        if (rc != EXIT_OK || o->every_ms == 0 || (o->has_count && ++sent >= o->count))
            return rc;
        struct timespec ts = {o->every_ms / 1000, (o->every_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int cli_lease(const cli_opts *o)
{
    const char *what = o->args[0];
    bool list = strcmp(what, "list") == 0, grant = strcmp(what, "grant") == 0;
    bool known = list || grant || strcmp(what, "keepalive") == 0 ||
                 strcmp(what, "revoke") == 0 || strcmp(what, "get") == 0;
    if (!known) {
        fprintf(stderr, "percolator: lease %s: not grant, keepalive, revoke, get or list "
                "(percolator --help)\n", what);
        return EXIT_USAGE;
    }
    if (o->nargs != (list ? 1 : 2)) {
        fprintf(stderr, "percolator: lease %s takes %s\n", what,
                list ? "no argument" : grant ? "a TTL in ms" : "a lease id");
        return EXIT_USAGE;
    }
    if ((o->every_ms != 0 || o->has_count) && strcmp(what, "keepalive") != 0) {
        fprintf(stderr, "percolator: --every-ms and --count go with lease keepalive\n");
        return EXIT_USAGE;
    }
    cli_reply r;
    char path[64], body[64];
    if (list) {
        cli_request("GET", "/v1/leases", NULL, 0, &r);
        return answer(o, &r, 200, print_list);
    }
    if (grant) {
        char *end;
        errno = 0;
        unsigned long long ttl = strtoull(o->args[1], &end, 10);
        if (errno || *end || end == o->args[1] || ttl == 0 || ttl > 1000000000000ULL) {
            fprintf(stderr, "percolator: lease grant: the TTL is a number of milliseconds\n");
            return EXIT_USAGE;
        }
        snprintf(body, sizeof body, "{\"ttl_ms\":%llu}", ttl);
        cli_request("POST", "/v1/leases", body, 0, &r);
        return answer(o, &r, 201, print_id);
    }
    uint64_t id = lease_id(o->args[1]);
    if (id == 0) {
        fprintf(stderr, "percolator: lease %s: %s is not a lease id\n", what, o->args[1]);
        return EXIT_USAGE;
    }
    if (strcmp(what, "keepalive") == 0)
        return keepalive(o, id);
    snprintf(path, sizeof path, "/v1/leases/%llu", (unsigned long long)id);
    if (strcmp(what, "revoke") == 0) {
        cli_request("DELETE", path, NULL, 0, &r);
        return answer(o, &r, 200, print_revoked);
    }
    buf p = BUF_INIT;
    if (buf_puts(&p, path) != 0 || buf_puts(&p, cli_encoding_query(o, '?')) != 0) {
        buf_free(&p);
        fprintf(stderr, "percolator: out of memory\n");
        return EXIT_SERVER;
    }
    cli_request("GET", p.data, NULL, 0, &r);
    buf_free(&p);
    return answer(o, &r, 200, print_lease);
}
