/*
 * main.c — `percolator`, the command-line client of percolator-service:
 * the options, the command table, usage and exit codes.
 *
 * Options may come before or after the command; "--" ends them (for a key
 * or value that starts with "-"; "-" alone is an argument: stdin). Each option belongs to the commands listed in its
 * row; anywhere else it is a usage error.
 */
#include "version.h"
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "token.h"


enum { C_GET = 1, C_PUT = 2, C_DEL = 4, C_SCAN = 8, C_TXN = 16, C_WATCH = 32, C_MEMBER = 64,
       C_BACKUP = 128, C_STATUS = 256, C_STREAM = 512, C_LEASE = 1024, C_REGION = 2048,
       C_PD = 4096, C_ALL = 8191 };

typedef struct command {
    const char *name;
    int bit;
    int min_args, max_args;
    int (*run)(const cli_opts *);
} command;

static const command commands[] = {
    {"get", C_GET, 1, 1, cli_get},
    {"put", C_PUT, 2, 2, cli_put},
    {"del", C_DEL, 1, 1, cli_del},
    {"scan", C_SCAN, 0, 0, cli_scan},
    {"txn", C_TXN, 0, 1, cli_txn},
    {"watch-claim", C_WATCH, 1, 1, cli_watch_claim},
    {"watch", C_STREAM, 0, 1, cli_watch},
    {"member", C_MEMBER, 1, 4, cli_member},
    {"backup", C_BACKUP, 2, 2, cli_backup},
    {"status", C_STATUS, 0, 0, cli_status},
    {"lease", C_LEASE, 1, 2, cli_lease},
    {"region", C_REGION, 1, 2, cli_region},
    {"pd", C_PD, 1, 1, cli_pd},
};

typedef enum { O_STR, O_LONG, O_U64, O_FLAG } opt_kind;

typedef struct option {
    const char *name;
    opt_kind kind;
    int cmds;          /* the commands it applies to */
    long min, max;     /* O_LONG bounds */
} option;

static const option options[] = {
    {"endpoints", O_STR, C_ALL, 0, 0},
    {"endpoint", O_STR, C_ALL, 0, 0},
    {"verbose", O_FLAG, C_ALL, 0, 0},
    {"token-file", O_STR, C_ALL, 0, 0},
    {"base64", O_FLAG, C_ALL, 0, 0},
    {"json", O_FLAG, C_ALL, 0, 0},
    {"timeout-ms", O_LONG, C_ALL, 1, 3600000},
    {"retries", O_LONG, C_ALL, 0, 100},
    {"ts", O_U64, C_GET | C_SCAN, 0, 0},
    {"if-commit-ts", O_U64, C_PUT | C_DEL, 0, 0},
    {"prefix", O_STR, C_SCAN, 0, 0},
    {"start", O_STR, C_SCAN, 0, 0},
    {"end", O_STR, C_SCAN, 0, 0},
    {"limit", O_LONG, C_SCAN | C_PD, 1, 1000000000},
    {"page-size", O_LONG, C_SCAN, 1, 10000},
    {"count", O_LONG, C_WATCH | C_STREAM | C_LEASE, 1, 1000000000},
    {"lease", O_U64, C_PUT, 0, 0},
    {"every-ms", O_LONG, C_LEASE, 1, 3600000},
    {"start-ts", O_U64, C_STREAM, 0, 0},
    {"key", O_STR, C_STREAM, 0, 0},
    {"wait-ms", O_LONG, C_WATCH, 0, 3600000},
    {"no-ack", O_FLAG, C_WATCH, 0, 0},
    {"dir", O_STR, C_BACKUP, 0, 0},
};
#define NOPTIONS (sizeof options / sizeof options[0])

static const char usage_text[] =
    "Usage: percolator [options] COMMAND [args]\n"
    "\n"
    "A client of percolator-service's HTTP API.\n"
    "\n"
    "commands:\n"
    "  get KEY [--ts TS]          print the value\n"
    "  put KEY VALUE|- [--if-commit-ts N] [--lease ID]\n"
    "                             write (\"-\": the value from stdin); prints the commit_ts;\n"
    "                             --if-commit-ts: only if the key's latest commit_ts is N\n"
    "                             (0: only if it does not exist); --lease: the key is\n"
    "                             deleted when lease ID ends\n"
    "  del KEY [--if-commit-ts N]\n"
    "                             delete; prints the commit_ts; --if-commit-ts as for put\n"
    "  scan [--prefix P | --start S --end E] [--limit N] [--page-size N] [--ts TS]\n"
    "                             one KEY<TAB>VALUE line per item (JSON lines with --json),\n"
    "                             following the pages until the end or N items\n"
    "  txn [DOC|-]                POST /v1/txn with the JSON document DOC (or stdin):\n"
    "                             {\"conditions\":[...],\"reads\":[...],\"writes\":[...]};\n"
    "                             prints the JSON reply\n"
    "  watch-claim OBSERVER [--count N] [--wait-ms MS] [--no-ack]\n"
    "                             claim up to N (1) notifications, each waiting up to MS\n"
    "                             (5000); print each (KEY<TAB>VALUE, a deleted key alone)\n"
    "                             and acknowledge it by committing the claim's session\n"
    "                             (--no-ack: roll it back, so the change stays pending)\n"
    "  watch [PREFIX] [--key K] [--start-ts TS] [--count N]\n"
    "                             follow every committed change under PREFIX (or of key K,\n"
    "                             or of every key), in commit order: one COMMIT_TS<TAB>put\n"
    "                             <TAB>KEY<TAB>VALUE or COMMIT_TS<TAB>delete<TAB>KEY line each\n"
    "                             (the stream's JSON lines with --json, progress lines\n"
    "                             too), from TS on (default: now); a cut stream is resumed\n"
    "                             from its last progress, on the next endpoint when one is\n"
    "                             gone, each change printed once; stops after N changes, or\n"
    "                             exit 4 after --retries + 3 tries in a row with no progress\n"
    "  lease grant TTL_MS         a new lease; prints its id. It ends (and every key put\n"
    "                             with it is deleted) TTL_MS after its last keep-alive\n"
    "  lease keepalive ID [--every-ms MS [--count N]]\n"
    "                             keep lease ID alive: once, or every MS until N were sent\n"
    "                             (without --count: until the lease is gone, exit 1)\n"
    "  lease revoke ID            end lease ID now: its keys are deleted in one transaction\n"
    "  lease get ID               its TTL, the time left and its keys (one a line)\n"
    "  lease list                 every lease: ID, TTL-MS, REMAINING-MS\n"
    "  member list                the Raft group's members as its leader sees them (ID,\n"
    "                             RAFT-ID, ADDRESS, ROLE, LEADER, MATCH-INDEX, LAG, ANSWERS)\n"
    "  member add ID [HOST:PORT [URL]]\n"
    "                             add member ID (started) as a spare, promoted to voter once\n"
    "                             caught up; HOST:PORT, its raft address, and URL, its HTTP\n"
    "                             URL, when no member's --raft-peers/--raft-urls give them\n"
    "  member remove ID           remove member ID (refused if the rest would lack a quorum)\n"
    "  member lead ID             hand the lead to voter ID\n"
    "                             (member: any member of the service's or the oracle's group)\n"
    "  region list                the regions the service cuts the keyspace into\n"
    "                             (--region-split-keys, splits): ID, EPOCH, START, END,\n"
    "                             BATCHES, BYTES (at the last size check; - : none)\n"
    "  region split KEY           split the region holding KEY before it (a command\n"
    "                             in the log), then list the regions\n"
    "  pd nodes                   the placement driver's nodes (an oracle group's: give\n"
    "                             --endpoints an oracle member): ID, ADDRESS, HEARTBEAT-MS\n"
    "                             (since the last), LEADERS, BYTES (- : not heard from)\n"
    "  pd regions [--limit N]     its region map in key order (N: 1000, at most 10000):\n"
    "                             ID, VERSION, START, END, REPLICAS, LEADER, BYTES\n"
    "  status                     what each of --endpoints says of itself (its /v1/health),\n"
    "                             a row each: ID, STATUS, ROLE, MEMBERSHIP, TERM, APPLIED,\n"
    "                             LAG (entries behind the leader's APPLIED, when the leader\n"
    "                             is among them), STORE SIZE (its data dir on disk),\n"
    "                             LEADER; with --json the answers, each with its endpoint\n"
    "                             and lag; exit 4 if one does not answer\n"
    "  backup save FILE           a fresh backup of the store, streamed from the service (the\n"
    "                             leader of a group) into FILE, a tar archive, checked whole\n"
    "                             before it is named FILE\n"
    "  backup restore FILE --dir DIR\n"
    "                             make the new directory DIR from FILE: a single node serves\n"
    "                             it as --data-dir DIR, a group is made from it with\n"
    "                             --restore-from DIR\n"
    "\n"
    "options:\n"
    "  --endpoints URL[,URL...]\n"
    "                     the service: one URL, or the members of a group, any of which\n"
    "                     serves any request (default http://127.0.0.1:8080; env\n"
    "                     PERCOLATOR_ENDPOINTS, or PERCOLATOR_ENDPOINT; --endpoint is the\n"
    "                     same option). A request goes to the member that answered last;\n"
    "                     one that cannot be reached or answers 503 not_leader is passed\n"
    "                     over for the next, and so is any that fails a read\n"
    "  --verbose          say on stderr which member each request went to, its status\n"
    "                     and time\n"
    "  --token-file FILE  send Authorization: Bearer <the token in FILE>\n"
    "                     (env PERCOLATOR_TOKEN_FILE)\n"
    "  --base64           keys, values and prefixes are given and printed in base64\n"
    "  --json             print the service's JSON instead of plain text\n"
    "  --timeout-ms MS    time limit of each request (default 10000)\n"
    "  --retries N        after every endpoint failed, or one answered 503, try again up\n"
    "                     to N times with backoff (default 0); never a write whose answer\n"
    "                     was lost\n"
    "  --help, --version\n"
    "  --                 ends the options (for a key or value that starts with -)\n"
    "\n"
    "exit codes:\n"
    "  0  ok\n"
    "  1  not found (get, an unknown observer or lease), a condition failed (put --if-commit-ts,\n"
    "     txn conditions), nothing to claim (watch-claim)\n"
    "  2  usage error, or the service refused the request as malformed (400, 413, 415)\n"
    "  3  conflict (409 write_conflict, key_locked, membership_refused, ...; 410)\n"
    "  4  unavailable: no member reached, a read timed out, 503, 502 or 504, a redirect\n"
    "     that led nowhere\n"
    "  5  other server error (500, an unexpected reply)\n"
    "  6  unauthorized (401: a missing or wrong token)\n"
    "  7  unknown outcome: a write was sent and its answer lost (timed out, the\n"
    "     connection dropped, 503 raft_unavailable): it may or may not be applied\n";

static int usage_error(const char *fmt, const char *arg)
{
    fputs("percolator: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (percolator --help)\n", stderr);
    return EXIT_USAGE;
}

static const option *find_option(const char *name, size_t len)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        if (strlen(options[i].name) == len && memcmp(options[i].name, name, len) == 0)
            return &options[i];
    return NULL;
}

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > 9007199254740991ULL) /* timestamps stay below 2^53 */
        return -1;
    *out = v;
    return 0;
}

/* Store one option's value. 0 or -1 (bad value). */
static int set_option(cli_opts *o, const option *op, const char *v)
{
    const char *n = op->name;
    if (op->kind == O_FLAG) {
        bool *b = strcmp(n, "base64") == 0    ? &o->base64
                  : strcmp(n, "json") == 0    ? &o->json
                  : strcmp(n, "verbose") == 0 ? &o->verbose
                                              : &o->no_ack;
        *b = true;
        return 0;
    }
    if (op->kind == O_STR) {
        const char **s = strncmp(n, "endpoint", 8) == 0 ? &o->endpoint
                         : strcmp(n, "token-file") == 0 ? &o->token_file
                         : strcmp(n, "prefix") == 0     ? &o->prefix
                         : strcmp(n, "start") == 0      ? &o->start
                         : strcmp(n, "dir") == 0        ? &o->dir
                         : strcmp(n, "key") == 0        ? &o->key
                                                        : &o->end;
        *s = v;
        return 0;
    }
    if (op->kind == O_U64 && strcmp(n, "start-ts") == 0) {
        o->has_start_ts = true;
        return parse_u64(v, &o->start_ts);
    }
    if (op->kind == O_U64 && strcmp(n, "lease") == 0)
        return parse_u64(v, &o->lease) != 0 || o->lease == 0 ? -1 : 0;
    if (op->kind == O_U64) {
        bool ts = strcmp(n, "ts") == 0;
        *(ts ? &o->has_ts : &o->has_if_commit_ts) = true;
        return parse_u64(v, ts ? &o->ts : &o->if_commit_ts);
    }
    long *l = strcmp(n, "timeout-ms") == 0 ? &o->timeout_ms
              : strcmp(n, "retries") == 0  ? &o->retries
              : strcmp(n, "limit") == 0    ? &o->limit
              : strcmp(n, "page-size") == 0 ? &o->page_size
              : strcmp(n, "count") == 0    ? &o->count
              : strcmp(n, "every-ms") == 0 ? &o->every_ms
                                           : &o->wait_ms;
    o->has_limit |= strcmp(n, "limit") == 0;
    o->has_count |= strcmp(n, "count") == 0;
    return parse_long(v, op->min, op->max, l);
}

/* Split argv into options and positional arguments (the command first).
 * seen[] marks the options given, to check them against the command.
 * EXIT_OK, EXIT_USAGE, or -1 when --help/--version was answered. */
static int parse_args(int argc, char **argv, cli_opts *o, char **pos, int *npos, bool *seen)
{
    bool opts_done = false;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (opts_done || a[0] != '-' || strcmp(a, "-") == 0) {
            pos[(*npos)++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            opts_done = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return -1;
        }
        if (strcmp(a, "--version") == 0) {
            printf("percolator %s\n", PERCOLATOR_VERSION);
            return -1;
        }
        if (a[1] != '-')
            return usage_error("unknown option %s", a);
        const char *eq = strchr(a + 2, '=');
        const option *op = find_option(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
        if (op == NULL)
            return usage_error("unknown option %s", a);
        const char *v = eq ? eq + 1 : NULL;
        if (op->kind == O_FLAG && v)
            return usage_error("%s takes no value", a);
        if (op->kind != O_FLAG && v == NULL) {
            if (i + 1 >= argc)
                return usage_error("%s needs a value", a);
            v = argv[++i];
        }
        if (set_option(o, op, v) != 0)
            return usage_error("bad value for %s", a);
        seen[op - options] = true;
    }
    return EXIT_OK;
}

static int run(int argc, char **argv, cli_opts *o)
{
    char **pos = calloc((size_t)argc + 1, sizeof *pos);
    int npos = 0;
    bool seen[NOPTIONS] = {false};
    if (pos == NULL)
        return EXIT_SERVER;
    int rc = parse_args(argc, argv, o, pos, &npos, seen);
    if (rc != EXIT_OK) {
        free(pos);
        return rc < 0 ? EXIT_OK : rc;
    }
    const command *c = NULL;
    for (size_t i = 0; npos > 0 && i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(pos[0], commands[i].name) == 0)
            c = &commands[i];
    if (c == NULL)
        rc = npos == 0 ? usage_error("no command%s", "") : usage_error("unknown command %s", pos[0]);
    else if (npos - 1 < c->min_args || npos - 1 > c->max_args)
        rc = usage_error("wrong number of arguments for %s", c->name);
    else if (c->bit == C_SCAN && o->prefix && (o->start || o->end))
        rc = usage_error("--prefix %s cannot be combined with --start or --end", o->prefix);
    else if (c->bit != C_SCAN && c->bit != C_TXN && c->min_args > 0 && pos[1][0] == '\0')
        rc = usage_error("%s needs a non-empty key or name", c->name);
    for (size_t i = 0; c && rc == EXIT_OK && i < NOPTIONS; i++)
        if (seen[i] && !(options[i].cmds & c->bit))
            rc = usage_error("--%s does not apply to this command", options[i].name);
    if (rc != EXIT_OK) {
        free(pos);
        return rc;
    }
    o->args = pos + 1;
    o->nargs = npos - 1;
    if (cli_endpoints_check(o->endpoint) != 0) {
        free(pos);
        return EXIT_USAGE;
    }
    token t = {0};
    if (o->token_file && *o->token_file) {
        char err[512];
        if (token_load(o->token_file, &t, err, sizeof err) != 0) {
            fprintf(stderr, "percolator: %s\n", err);
            free(pos);
            return EXIT_USAGE;
        }
        o->token = t.secret;
    }
    if (cli_http_init(o) != 0) {
        fprintf(stderr, "percolator: cannot initialise libcurl\n");
        rc = EXIT_SERVER;
    } else {
        rc = c->run(o);
    }
    cli_http_done();
    token_free(&t);
    free(pos);
    if (fflush(stdout) != 0 && rc == EXIT_OK) {
        fprintf(stderr, "percolator: cannot write the output\n");
        rc = EXIT_SERVER;
    }
    return rc;
}

int main(int argc, char **argv)
{
    const char *ep = getenv("PERCOLATOR_ENDPOINTS");
    if (ep == NULL || *ep == '\0')
        ep = getenv("PERCOLATOR_ENDPOINT");
    cli_opts o = {
        .endpoint = ep && *ep ? ep : "http://127.0.0.1:8080",
        .token_file = getenv("PERCOLATOR_TOKEN_FILE"),
        .timeout_ms = 10000,
        .page_size = 1000,
        .count = 1,
        .wait_ms = 5000,
    };
    return run(argc, argv, &o);
}
