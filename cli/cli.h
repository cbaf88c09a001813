/*
 * cli.h — the pieces of the `percolator` command-line client.
 *
 * The client speaks only the HTTP API (api-spec/openapi.yaml): it links
 * libcurl, jansson and common/buf.c and token.c, never the engine or the service.
 *
 *   main.c     options, the command table, usage and exit codes
 *   request.c  one HTTP request over libcurl (endpoints, failover, token, timeout,
 *              retries)
 *   text.c     percent-encoding, bounded reads of stdin, printing values
 *   kv.c       get, put, del, scan
 *   txn.c      txn, watch-claim
 *   members.c  member list|add|remove|lead (a Raft group's membership)
 *   backup.c   backup save|restore (an archive of the store, taken home)
 *   status.c   status (what each endpoint says of itself)
 *   watch.c    watch (a change stream, resumed across cuts and members)
 *   lease.c    lease grant|keepalive|revoke|get|list (keys that expire)
 *   regions.c  region list, region split (the regions of the keyspace)
 *   pd.c       pd nodes, pd regions (the placement driver's view, an oracle group's)
 */
#ifndef PERCOLATOR_CLI_H
#define PERCOLATOR_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "buf.h"

/* Exit codes (documented in --help and README "Command-line client"). */
enum {
    EXIT_OK = 0,
    EXIT_NOT_FOUND = 1,    /* no such key/observer, a condition failed, nothing to claim */
    EXIT_USAGE = 2,        /* bad arguments, or the server called the request malformed (400, 413, 415) */
    EXIT_CONFLICT = 3,     /* 409 write_conflict / key_locked / txn_not_active ..., 410 */
    EXIT_UNAVAILABLE = 4,  /* cannot connect, timed out, 503 */
    EXIT_SERVER = 5,       /* 500, an unexpected status or reply */
    EXIT_UNAUTHORIZED = 6, /* 401 */
    EXIT_UNKNOWN = 7       /* a write sent whose answer was lost (timed out, the leader
                              lost it: 503 raft_unavailable): it may or may not be applied */
};

/* Endpoints given to --endpoints at most. */
#define CLI_MAX_ENDPOINTS 16

/* Largest value or document read from stdin: the service's body limit. */
#define CLI_MAX_INPUT ((size_t)64 << 20)
/* Largest reply accepted (a scan page of big values can be large). */
#define CLI_MAX_REPLY ((size_t)512 << 20)

/* Everything the command line says. Strings point into argv. */
typedef struct cli_opts {
    const char *endpoint;    /* --endpoints (or --endpoint): URL[,URL...] */
    const char *token_file;
    const char *token;       /* read from token_file (common/token.c); owned by main */
    bool base64, json, no_ack, verbose;
    long timeout_ms;
    long retries;
    /* command options; has_* says whether they were given */
    bool has_ts, has_if_commit_ts, has_limit, has_count, has_start_ts;
    uint64_t ts, if_commit_ts, start_ts;
    uint64_t lease;          /* put --lease (0: none) */
    long limit, page_size, count, wait_ms;
    long every_ms;           /* lease keepalive --every-ms (0: once) */
    const char *prefix, *start, *end, *key;
    const char *dir;         /* backup restore --dir */
    /* positional arguments after the command */
    char **args;
    int nargs;
} cli_opts;

/* --- request.c --- */
typedef struct cli_reply {
    long status;             /* 0: no reply (transport error; errmsg says why) */
    buf body;
    json_t *json;            /* the body parsed, NULL when empty or not JSON */
    char errmsg[512];
    bool maybe_applied;      /* a write was sent and its answer lost (EXIT_UNKNOWN) */
} cli_reply;

/* Check --endpoints: 1..CLI_MAX_ENDPOINTS http:// or https:// URLs,
 * comma-separated. 0, or -1 with the reason on stderr. */
int cli_endpoints_check(const char *list);
/* Set up libcurl for the program's life. 0 or -1. */
int cli_http_init(const cli_opts *o);
void cli_http_done(void);
/* method endpoint+path (path starts with '/', already encoded, query
 * included); body NULL for none (else sent as application/json). extra_ms
 * is added to the timeout (long polls). Sent to the endpoint that answered
 * last (the first at start); moves on to the next endpoint when one cannot
 * be reached or answers 503 not_leader, and for a read on any failure;
 * after every endpoint failed, retries up to --retries times (any 503, or
 * no connection), with backoff. Always call cli_reply_free. */
void cli_request(const char *method, const char *path, const char *body, long extra_ms,
                 cli_reply *r);
/* cli_request("GET", path) with a 200's body written to out (emptied at
 * each try) instead of kept; any other reply's body is kept as usual. No
 * overall time limit beyond --timeout-ms without data (a big download
 * takes its time). */
void cli_download(const char *path, FILE *out, cli_reply *r);
void cli_reply_free(cli_reply *r);
/* The endpoints given, and one GET sent to endpoint i alone (no failover,
 * no retry): for what each member says of itself. */
size_t cli_endpoint_count(void);
const char *cli_endpoint(size_t i);
void cli_request_one(size_t i, const char *path, cli_reply *r);
/* GET path from endpoint i (following a follower's 307), a 200's body
 * handed to fn as it comes (fn returns how many bytes it took: fewer ends
 * the transfer); it fails once no byte came for --timeout-ms. Any other
 * reply's body is kept in r. One try: the caller resumes. */
void cli_stream_one(size_t i, const char *path, size_t (*fn)(void *arg, const char *p, size_t n),
                    void *arg, cli_reply *r);
/* The exit code for a reply that is not the success the caller wanted,
 * with the reason on stderr ("percolator: 409 write_conflict: ..."). */
int cli_fail(const cli_reply *r);

/* --- text.c --- */
/* Append s percent-encoded (everything but A-Z a-z 0-9 - . _ ~). 0 or -1. */
int cli_pct_append(buf *b, const char *s);
/* Read all of stdin, at most max bytes. NUL-terminated, length in *len.
 * NULL with a message on stderr when it is larger or unreadable. */
char *cli_read_stdin(size_t max, size_t *len);
/* Drop every ASCII space, tab, CR and LF (base64 from `base64` wraps lines). */
void cli_strip_space(char *s, size_t *len);
/* "?encoding=base64" or "" per --base64; sep is '?' or '&'. */
const char *cli_encoding_query(const cli_opts *o, char sep);
/* Write a JSON string's bytes (may hold NULs) to stdout. */
void cli_print_string(const json_t *s);
/* The reply's body as it came, and a newline (--json). */
void cli_print_body(const cli_reply *r);

/* --- kv.c, txn.c: each command returns its exit code --- */
int cli_get(const cli_opts *o);
int cli_put(const cli_opts *o);
int cli_del(const cli_opts *o);
int cli_scan(const cli_opts *o);
int cli_txn(const cli_opts *o);
int cli_watch_claim(const cli_opts *o);
/* --- watch.c --- */
int cli_watch(const cli_opts *o);
/* --- members.c --- */
int cli_member(const cli_opts *o);
/* --- backup.c --- */
int cli_backup(const cli_opts *o);
/* --- status.c --- */
int cli_status(const cli_opts *o);
/* --- lease.c --- */
int cli_lease(const cli_opts *o);
/* regions.c */
int cli_region(const cli_opts *o);
int cli_pd(const cli_opts *o);

#endif
