/*
 * status.c — `percolator status`: what each of --endpoints says of itself
 * (GET /v1/health, which needs no token), one line a member, in the
 * manner of `etcdctl endpoint status`: is it up, its role in its group,
 * whether it is a full member, which leader it follows, its term and how
 * far it has applied the log. Every endpoint is asked, none skipped.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char *str_or(const json_t *j, const char *key, const char *none)
{
    const char *s = json_string_value(json_object_get(j, key));
    return s != NULL ? s : none;
}

/* An integer field as text, or "-" when absent (a single node, or a
 * public health answer without the token). */
static void int_or_dash(const json_t *j, const char *key, char *out, size_t cap)
{
    json_t *v = json_object_get(j, key);
    if (json_is_integer(v))
        snprintf(out, cap, "%lld", (long long)json_integer_value(v));
    else
        snprintf(out, cap, "-");
}

int cli_status(const cli_opts *o)
{
    int rc = EXIT_OK;
    json_t *all = o->json ? json_array() : NULL;
    if (!o->json)
        printf("%-32s %-12s %-10s %-10s %-32s %-6s %s\n", "ENDPOINT", "STATUS", "ROLE",
               "MEMBERSHIP", "LEADER", "TERM", "APPLIED");
    for (size_t i = 0; i < cli_endpoint_count(); i++) {
        cli_reply r;
        cli_request_one(i, "/v1/health", &r);
        const char *ep = cli_endpoint(i);
        if (r.json == NULL || (r.status != 200 && r.status != 503)) {
            /* Down, or not a percolator program: said, and exit 4. */
            if (o->json)
                json_array_append_new(all, json_pack("{s:s,s:s,s:s}", "endpoint", ep, "status",
                                                     "unreachable", "error",
                                                     r.status == 0 ? r.errmsg : "no health answer"));
            else
                printf("%-32s %-12s %s\n", ep, "unreachable",
                       r.status == 0 ? r.errmsg : "no health answer");
            rc = EXIT_UNAVAILABLE;
            cli_reply_free(&r);
            continue;
        }
        if (o->json) {
            json_t *h = json_deep_copy(r.json);
            json_object_set_new(h, "endpoint", json_string(ep));
            json_array_append_new(all, h);
        } else {
            const json_t *leader = json_object_get(r.json, "leader");
            char term[24], applied[24];
            int_or_dash(r.json, "term", term, sizeof term);
            int_or_dash(r.json, "applied_index", applied, sizeof applied);
            printf("%-32s %-12s %-10s %-10s %-32s %-6s %s\n", ep, str_or(r.json, "status", "?"),
                   str_or(r.json, "role", "single"), str_or(r.json, "membership", "-"),
                   json_is_object(leader) ? str_or(leader, "url", "?") : "-", term, applied);
        }
        cli_reply_free(&r);
    }
    if (o->json) {
        json_dumpf(all, stdout, JSON_COMPACT);
        putchar('\n');
        json_decref(all);
    }
    return rc;
}
