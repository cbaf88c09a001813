/*
 * members.c — `percolator member list|add|remove|lead`: a Raft group's
 * membership (the oracle's or the service's: --endpoint names any member;
 * a follower's 307 leads to the leader). GET /v1/members, POST
 * /v1/members, DELETE /v1/members/{id}, POST /v1/leader
 * (docs/DESIGN.md §7.3), in the manner of `etcdctl member list|add|remove`
 * and `etcdctl move-leader`.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A member number (--raft-id): 1 .. 2^32-1. 0 if s is not one. */
static unsigned member_number(const char *s)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9')
        return 0;
    unsigned long v = strtoul(s, &end, 10);
    return errno == 0 && *end == '\0' && v >= 1 && v <= 0xffffffffUL ? (unsigned)v : 0;
}

static const char *str_of(const json_t *m, const char *key)
{
    const char *s = json_string_value(json_object_get(m, key));
    return s != NULL ? s : "?";
}

/* One table row a member, or the JSON with --json. */
static int print_members(const cli_opts *o, const cli_reply *r)
{
    if (o->json) {
        fwrite(r->body.data, 1, r->body.len, stdout);
        putchar('\n');
        return EXIT_OK;
    }
    json_t *list = json_object_get(r->json, "members");
    if (!json_is_array(list)) {
        fprintf(stderr, "percolator: the reply has no member list\n");
        return EXIT_SERVER;
    }
    printf("%-4s %-22s %-22s %-8s %-7s %-12s %-8s %s\n", "ID", "RAFT-ID", "ADDRESS", "ROLE",
           "LEADER", "MATCH-INDEX", "LAG", "ANSWERS");
    size_t i;
    json_t *m;
    json_array_foreach(list, i, m) {
        printf("%-4lld %-22s %-22s %-8s %-7s %-12lld %-8lld %s\n",
               (long long)json_integer_value(json_object_get(m, "id")),
               str_of(m, "raft_id"),
               str_of(m, "address"),
               str_of(m, "role"),
               json_is_true(json_object_get(m, "leader")) ? "yes" : "no",
               (long long)json_integer_value(json_object_get(m, "match_index")),
               (long long)json_integer_value(json_object_get(m, "lag")),
               json_is_true(json_object_get(m, "answers")) ? "yes" : "no");
    }
    printf("term %lld, commit index %lld, last index %lld\n",
           (long long)json_integer_value(json_object_get(r->json, "term")),
           (long long)json_integer_value(json_object_get(r->json, "commit_index")),
           (long long)json_integer_value(json_object_get(r->json, "last_index")));
    return EXIT_OK;
}

int cli_member(const cli_opts *o)
{
    const char *what = o->args[0];
    bool list = strcmp(what, "list") == 0;
    if (!list && strcmp(what, "add") != 0 && strcmp(what, "remove") != 0 &&
        strcmp(what, "lead") != 0) {
        fprintf(stderr, "percolator: member %s: not list, add, remove or lead (percolator "
                "--help)\n", what);
        return EXIT_USAGE;
    }
    if (list != (o->nargs == 1)) {
        fprintf(stderr, "percolator: member %s takes %s (percolator --help)\n", what,
                list ? "no argument" : "a member number");
        return EXIT_USAGE;
    }
    unsigned id = list ? 0 : member_number(o->args[1]);
    if (!list && id == 0) {
        fprintf(stderr, "percolator: member %s: '%s' is not a member number (--raft-id)\n", what,
                o->args[1]);
        return EXIT_USAGE;
    }
    char path[64], body[48];
    const char *method = "POST", *send = body;
    snprintf(body, sizeof body, "{\"id\":%u}", id);
    if (list) {
        method = "GET";
        send = NULL;
        snprintf(path, sizeof path, "/v1/members");
    } else if (strcmp(what, "remove") == 0) {
        method = "DELETE";
        send = NULL;
        snprintf(path, sizeof path, "/v1/members/%u", id);
    } else {
        snprintf(path, sizeof path, strcmp(what, "add") == 0 ? "/v1/members" : "/v1/leader");
    }
    cli_reply r;
    cli_request(method, path, send, 0, &r);
    int rc;
    if (r.status != 200)
        rc = cli_fail(&r);
    else if (list)
        rc = print_members(o, &r);
    else {
        const char *status = json_string_value(json_object_get(r.json, "status"));
        printf("member %u: %s\n", id, status ? status : "done");
        rc = EXIT_OK;
    }
    cli_reply_free(&r);
    return rc;
}
