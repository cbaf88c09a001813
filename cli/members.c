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
        cli_print_body(r);
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
    bool add = strcmp(what, "add") == 0;
    /* add ID [HOST:PORT [URL]]: a member on an address no --raft-peers
     * gives (etcdctl member add --peer-urls); the others take one number. */
    if (list ? o->nargs != 1 : o->nargs < 2 || o->nargs > (add ? 4 : 2)) {
        fprintf(stderr, "percolator: member %s takes %s (percolator --help)\n", what,
                list  ? "no argument"
                : add ? "a member number, and its raft address and URL when no --raft-peers "
                        "gives them"
                      : "a member number");
        return EXIT_USAGE;
    }
    unsigned id = list ? 0 : member_number(o->args[1]);
    if (!list && id == 0) {
        fprintf(stderr, "percolator: member %s: '%s' is not a member number (--raft-id)\n", what,
                o->args[1]);
        return EXIT_USAGE;
    }
    char path[64], *body = NULL;
    const char *method = "POST", *send;
    json_t *req = json_pack("{s:i}", "id", (int)id);
    if (req != NULL && add && o->nargs > 2)
        json_object_set_new(req, "address", json_string(o->args[2]));
    if (req != NULL && add && o->nargs > 3)
        json_object_set_new(req, "url", json_string(o->args[3]));
    body = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (body == NULL) {
        fprintf(stderr, "percolator: member %s: out of memory, or an argument is not UTF-8\n",
                what);
        return EXIT_USAGE;
    }
    send = body;
    if (list) {
        method = "GET";
        send = NULL;
        snprintf(path, sizeof path, "/v1/members");
    } else if (strcmp(what, "remove") == 0) {
        method = "DELETE";
        send = NULL;
        snprintf(path, sizeof path, "/v1/members/%u", id);
    } else {
        snprintf(path, sizeof path, add ? "/v1/members" : "/v1/leader");
    }
    cli_reply r;
    cli_request(method, path, send, 0, &r);
    free(body);
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
