/*
 * txn.c — txn (a one-shot transaction, POST /v1/txn) and watch-claim
 * (claim an observer's notifications, print them, acknowledge them).
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_json(const json_t *j)
{
    json_dumpf(j, stdout, JSON_COMPACT);
    putchar('\n');
}

/* The document is sent as given once it parses as a JSON object; the
 * service checks the rest and answers 400 with the reason. */
int cli_txn(const cli_opts *o)
{
    size_t len = 0;
    char *owned = NULL;
    const char *doc = o->nargs > 0 && strcmp(o->args[0], "-") != 0 ? o->args[0] : NULL;
    if (doc)
        len = strlen(doc);
    else if ((doc = owned = cli_read_stdin(CLI_MAX_INPUT, &len)) == NULL)
        return EXIT_USAGE;
    /* The whole input must parse (a NUL inside is an error, not an end),
     * since it is sent as a C string. */
    json_error_t err;
    json_t *j = json_loadb(doc, len, 0, &err);
    if (!json_is_object(j)) {
        fprintf(stderr, "percolator: the transaction is not a JSON object: %s\n",
                j ? "another JSON value" : err.text);
        json_decref(j);
        free(owned);
        return EXIT_USAGE;
    }
    json_decref(j);
    char path[64];
    snprintf(path, sizeof path, "/v1/txn%s", cli_encoding_query(o, '?'));
    cli_reply r;
    cli_request("POST", path, doc, 0, &r);
    free(owned);
    if (r.status != 200) {
        int rc = cli_fail(&r);
        cli_reply_free(&r);
        return rc;
    }
    if (r.json == NULL) {
        fprintf(stderr, "percolator: unexpected reply (HTTP 200 without JSON)\n");
        cli_reply_free(&r);
        return EXIT_SERVER;
    }
    print_json(r.json);
    cli_reply_free(&r);
    return EXIT_OK;
}

/* POST /v1/txns/<id>/<what>: commit (acknowledge) or rollback (give back). */
static int end_claim(const char *id, const char *what)
{
    buf p = BUF_INIT;
    if (buf_puts(&p, "/v1/txns/") != 0 || cli_pct_append(&p, id) != 0 ||
        buf_printf(&p, "/%s", what) != 0) {
        buf_free(&p);
        fprintf(stderr, "percolator: out of memory\n");
        return EXIT_SERVER;
    }
    cli_reply r;
    cli_request("POST", p.data, NULL, 0, &r);
    buf_free(&p);
    int rc = r.status == 200 || r.status == 204 ? EXIT_OK : cli_fail(&r);
    cli_reply_free(&r);
    return rc;
}

static void print_claim(const cli_opts *o, const json_t *c)
{
    if (o->json) {
        print_json(c);
        return;
    }
    /* key TAB value; a delete is the key alone (a value always has its tab). */
    cli_print_string(json_object_get(c, "key"));
    json_t *v = json_object_get(c, "value");
    if (json_is_string(v)) {
        putchar('\t');
        cli_print_string(v);
    }
    putchar('\n');
}

/* Claim one notification: EXIT_OK after printing (and ending) it,
 * EXIT_NOT_FOUND when nothing came within --wait-ms, else the failure. */
static int claim_one(const cli_opts *o, const char *path)
{
    cli_reply r;
    cli_request("POST", path, NULL, o->wait_ms, &r);
    if (r.status == 204) {
        cli_reply_free(&r);
        return EXIT_NOT_FOUND;
    }
    if (r.status != 200) {
        int rc = cli_fail(&r);
        cli_reply_free(&r);
        return rc;
    }
    json_t *txn = json_object_get(r.json, "txn");
    const char *id = json_string_value(json_object_get(txn, "id"));
    if (!json_is_string(json_object_get(r.json, "key")) || id == NULL) {
        fprintf(stderr, "percolator: unexpected claim reply\n");
        cli_reply_free(&r);
        return EXIT_SERVER;
    }
    print_claim(o, r.json);
    fflush(stdout);
    int rc = end_claim(id, o->no_ack ? "rollback" : "commit");
    cli_reply_free(&r);
    return rc;
}

/* Up to --count claims, each waiting up to --wait-ms; stops early when
 * nothing comes. Exit 0 if at least one was claimed, 1 if none. */
int cli_watch_claim(const cli_opts *o)
{
    buf p = BUF_INIT;
    if (buf_puts(&p, "/v1/observers/") != 0 || cli_pct_append(&p, o->args[0]) != 0 ||
        buf_printf(&p, "/claim?wait_ms=%ld%s", o->wait_ms, cli_encoding_query(o, '&')) != 0) {
        buf_free(&p);
        fprintf(stderr, "percolator: out of memory\n");
        return EXIT_SERVER;
    }
    int rc = EXIT_OK;
    long got = 0;
    while (got < o->count) {
        rc = claim_one(o, p.data);
        if (rc != EXIT_OK)
            break;
        got++;
    }
    buf_free(&p);
    if (rc == EXIT_NOT_FOUND && got > 0)
        return EXIT_OK;
    if (rc == EXIT_NOT_FOUND)
        fprintf(stderr, "percolator: nothing to claim within %ld ms\n", o->wait_ms);
    return rc;
}
