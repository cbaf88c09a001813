/*
 * main.c — percolator-service: the REST front end, the engine under it,
 * and the janitor.
 *
 * Start: flags (each with a PERCOLATOR_* twin), the engine (WiredTiger),
 * the oracle client, the session table, the HTTP server. Stop (SIGTERM or
 * SIGINT, taken by the main thread with sigwait): stop accepting, finish
 * requests in flight, stop the janitor, close WiredTiger cleanly,
 * exit 0.
 */
#include <errno.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_admin.h"
#include "engine_replica.h"
#include "failpoint.h"
#include "flags.h"
#include "janitor.h"
#include "keyspace.h"
#include "observers.h"
#include "pd_report.h"
#include "log.h"
#include "peer_tls.h"
#include "region_call.h"
#include "program.h"
#include "raft_host.h"
#include "raft_transport.h"
#include "service.h"
#include "watch.h"
#include "write_batch.h"
#include "sessions.h"
#include "timeutil.h"
#include "tls.h"

#define PROG "percolator-service"

static const char *const SYNC_MODES[] = {"fsync", "none", NULL};

/* ---- start-up helpers ---- */

/* A whole small file into memory (NUL-terminated); NULL on failure. */
static char *read_file(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    if (f == NULL)
        return NULL;
    data = malloc(max + 1);
    if (data != NULL) {
        *len = fread(data, 1, max, f);
        if (ferror(f) || !feof(f)) {
            free(data);
            data = NULL;
        } else {
            data[*len] = '\0';
        }
    }
    fclose(f);
    return data;
}

/* --oracle: one http:// or https:// URL, or up to 7 comma-separated (a
 * Raft group). *all_https: every one is https://. */
static bool oracle_urls_ok(const char *list, bool *all_https)
{
    int n = 0;
    *all_https = true;
    for (const char *p = list; p != NULL; p = strchr(p, ','), p = p ? p + 1 : NULL) {
        bool tls = strncmp(p, "https://", 8) == 0;
        if ((!tls && strncmp(p, "http://", 7) != 0) || ++n > 7)
            return false;
        *all_https = *all_https && tls;
    }
    return n > 0;
}

/* The --oracle-*-file or --forward-*-file flags (`who`): readable files,
 * a certificate with its key, and for the oracle only https:// URLs. 0 or
 * -1 with a reason. */
static int client_tls_ok(const char *who, const oc_tls *t, bool all_https, char *err,
                         size_t errlen)
{
    const char *const what[] = {"ca", "cert", "key"};
    const char *const files[] = {t->ca_file, t->cert_file, t->key_file};
    bool any = false;
    for (size_t i = 0; i < 3; i++) {
        if (files[i][0] == '\0')
            continue;
        any = true;
        FILE *f = fopen(files[i], "rb");
        if (f == NULL) {
            snprintf(err, errlen, "--%s-%s-file %s: %s", who, what[i], files[i], strerror(errno));
            return -1;
        }
        fclose(f);
    }
    if ((t->cert_file[0] == '\0') != (t->key_file[0] == '\0')) {
        snprintf(err, errlen, "--%s-cert-file and --%s-key-file go together", who, who);
        return -1;
    }
    if (any && !all_https) {
        snprintf(err, errlen, "--%s-ca-file, --%s-cert-file and --%s-key-file need https:// "
                 "%s URLs", who, who, who, who);
        return -1;
    }
    return 0;
}

/* --raft-id, --raft-peers, --raft-urls: all or none; the log goes in
 * <data-dir>/raft. 0, or -1 with a reason. */
static int raft_flags_ok(const svc_config *c, raft_group_config *r, char *dir, size_t dirlen,
                         char *err, size_t errlen)
{
    r->election_ms = (unsigned)c->shared.election_ms; /* checked by program_parse_or_exit */
    r->heartbeat_ms = (unsigned)c->shared.heartbeat_ms;
    if (c->shared.raft_id == 0 && c->shared.raft_peers[0] == '\0' && c->shared.raft_urls[0] == '\0')
        return 0;
    if (c->shared.raft_id == 0 || c->shared.raft_peers[0] == '\0') {
        snprintf(err, errlen, "--raft-id and --raft-peers go together (--raft-urls needs both)");
        return -1;
    }
    if (raft_peers_parse(c->shared.raft_peers, c->shared.raft_urls[0] ? c->shared.raft_urls : NULL, r->id, r->peers,
                         &r->npeers, err, errlen) != 0 ||
        raft_peers_set_initial(r->peers, r->npeers, c->shared.raft_initial, err, errlen) != 0)
        return -1;
    if ((size_t)snprintf(dir, dirlen, "%s/raft", c->data_dir) >= dirlen) {
        snprintf(err, errlen, "--data-dir is too long");
        return -1;
    }
    r->dir = dir;
    return 0;
}

/* glibc gives busy threads malloc arenas of their own (up to 8 per CPU);
 * with dozens of handler threads their free memory held ~120 MiB beyond the
 * WiredTiger cache while 1M keys loaded, 4 arenas ~60 MiB (make bench).
 * MALLOC_ARENA_MAX in the environment still decides when set. */
static void limit_malloc_arenas(void)
{
    if (getenv("MALLOC_ARENA_MAX") == NULL && mallopt(M_ARENA_MAX, 4) != 1)
        log_debug("mallopt(M_ARENA_MAX) refused (another allocator, e.g. a sanitizer's)");
}

/* --advertise-url: "" or an http(s):// URL the driver can list (printable
 * ASCII, no spaces, under 256 bytes), on a single node only: a group's
 * leader registers its members by their --raft-urls entries, so another
 * URL would make a member two nodes. */
static bool advertise_url_ok(const svc_config *c, char *err, size_t errlen)
{
    const char *u = c->advertise_url;
    size_t n = strlen(u);
    bool printable = true;
    for (size_t i = 0; i < n; i++)
        printable &= u[i] > ' ' && u[i] <= '~';
    if (n == 0)
        return true;
    if (c->shared.raft_id != 0)
        snprintf(err, errlen, "--advertise-url is for a single node: a group member is known by "
                              "its --raft-urls entry");
    else if ((strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) || !printable ||
             n >= 256 || u[strcspn(u, ":") + 3] == '\0')
        snprintf(err, errlen, "--advertise-url must be an http:// or https:// URL of printable "
                              "ASCII without spaces, under 256 bytes");
    else
        return true;
    return false;
}

/* Reports to the placement driver (pd_report.h), unless --pd-heartbeat-ms
 * is 0. This node's URL: its own --raft-urls entry in a group, else its
 * --listen address. 0, or -1 when it cannot start. */
static int start_pd_report(svc *s, const raft_group_config *rcfg, const oc_tls *otls,
                           const char *oracle_secret, bool https, pd_report **out)
{
    const svc_config *c = &s->cfg;
    char self[512] = ""; /* a --raft-urls entry, or --advertise-url (< 256 bytes) */
    for (size_t i = 0; svc_replicated(s) && i < rcfg->npeers; i++)
        if (rcfg->peers[i].id == rcfg->id)
            snprintf(self, sizeof self, "%s", rcfg->peers[i].http);
    if (!svc_replicated(s) && c->advertise_url[0] != '\0')
        snprintf(self, sizeof self, "%s", c->advertise_url);
    else if (!svc_replicated(s))
        snprintf(self, sizeof self, "%s://%s", https ? "https" : "http", c->shared.listen);
    pd_report_config pc = {.oracle = c->oracle, .token = oracle_secret, .tls = otls,
                           .self_url = self, .members = svc_replicated(s) ? rcfg->peers : NULL,
                           .nmembers = svc_replicated(s) ? rcfg->npeers : 0,
                           .interval_ms = (unsigned)c->pd_heartbeat_ms};
    bool failed;
    *out = pd_report_start(s, &pc, &failed);
    if (failed)
        log_error("cannot start the placement driver's reports");
    return failed ? -1 : 0;
}

int main(int argc, char **argv)
{
    static svc S;
    oc_tls otls = {NULL, NULL, NULL};
    oc_tls ftls = {NULL, NULL, NULL}; /* towards an https:// leader (forward.h) */
    const program_texts texts = {
        .listen = "127.0.0.1:8080",
        .threads = "HTTP worker threads (0: 32, or 64 in a Raft group, where a worker mostly waits for a quorum)",
        .threads_max = 1024,
        .per_ip = "connections at once from one client address (0: no limit; raise it behind a load balancer)",
        .raft_id = "this member's id among --raft-peers (0: a single node, no Raft)",
        .raft_peers = "the Raft group's members as ID=HOST:PORT,... (their raft transport addresses; IPv4 literals); the log goes in <data-dir>/raft",
        .raft_urls = "each member's HTTP URL as ID=http://HOST:PORT,...: where a follower passes its clients' requests on to the leader",
    };
    svc *s = &S;
    svc_config *c = &s->cfg;
    int sync_mode = 0;
    const flag_def defs[] = {
        {"data-dir", FLAG_STRING, &c->data_dir, "./data/service", "WiredTiger data directory", NULL, 0, 0},
        {"oracle", FLAG_STRING, &c->oracle, "http://127.0.0.1:8090", "base URL of the timestamp oracle, or its members' URLs comma-separated (an oracle Raft group)", NULL, 0, 0},
        {"lease-ttl-ms", FLAG_UINT64, &c->lease_ttl_ms, "10000", "default session lease; every request renews it", NULL, 100, 3600000},
        {"max-lock-age-ms", FLAG_UINT64, &c->max_lock_age_ms, "30000", "a lock whose wall time is older is resolved even if its owner lives", NULL, 100, 86400000},
        {"janitor-interval-ms", FLAG_UINT64, &c->janitor_interval_ms, "1000", "period of the janitor: session expiry, abandoned locks, GC", NULL, 10, 3600000},
        {"lock-wait-ms", FLAG_UINT64, &c->lock_wait_ms, "1000", "how long a read waits on a live lock before 409 key_locked", NULL, 0, 600000},
        {"sync", FLAG_ENUM, &sync_mode, "fsync", "durability of commits: fsync the log, or none", SYNC_MODES, 0, 0},
        {"cache-size", FLAG_SIZE, &c->cache_size, "256MB", "WiredTiger cache size", NULL, 1 << 20, (int64_t)1 << 42},
        {"max-value-bytes", FLAG_SIZE, &c->max_value_bytes, "1MiB", "largest value accepted", NULL, 1, (int64_t)64 << 20},
        {"max-txn-bytes", FLAG_SIZE, &c->max_txn_bytes, "16MiB", "most bytes a session may buffer", NULL, 1, (int64_t)1 << 32},
        {"watch-max", FLAG_UINT64, &c->watch_max, "1000", "watchers (GET /v1/watch) connected at once; past it a new one answers 503 too_many_watchers", NULL, 1, 100000},
        {"watch-buffer-bytes", FLAG_UINT64, &c->watch_buffer_bytes, "67108864", "recent changes kept in memory for watchers; one further behind reads the store", NULL, 1 << 20, 1ull << 40},
        {"lease-max", FLAG_UINT64, &c->lease_max, "10000", "leases (POST /v1/leases) alive at once; past it a grant answers 503 too_many_leases", NULL, 1, 1000000},
        {"max-sessions", FLAG_UINT64, &c->max_sessions, "10000", "sessions open at once; past it beginning one answers 503 too_many_sessions", NULL, 1, 10000000},
        {"max-session-bytes", FLAG_SIZE, &c->max_session_bytes, "256MiB", "bytes buffered by all sessions together; past it a write answers 503 session_memory_full", NULL, 1 << 20, (int64_t)1 << 42},
        {"max-reply-bytes", FLAG_SIZE, &c->max_reply_bytes, "16MiB", "bytes of items in a scan page; past it the page ends early with next (one item is always sent)", NULL, 1 << 10, (int64_t)1 << 32},
        {"one-pc", FLAG_BOOL, &c->one_pc, "on", "commit small transactions in one phase", NULL, 0, 0},
        {"auth-token-file", FLAG_STRING, &c->auth_token_file, "", "file with a bearer token every request but /v1/health needs (16-4096 characters of A-Z a-z 0-9 - . _ ~ + / =)", NULL, 0, 0},
        {"backup-dir", FLAG_STRING, &c->backup_dir, "", "where POST /v1/admin/backup makes its copies (\"\": backups off)", NULL, 0, 0},
        {"backup-keep", FLAG_UINT64, &c->backup_keep, "8", "backups kept in --backup-dir: after a backup, the oldest beyond this many are removed (0: keep all)", NULL, 0, 1000000},
        {"restore-from", FLAG_STRING, &c->restore_from, "", "at start, make --data-dir (which must not exist) from this backup, then serve it", NULL, 0, 0},
        {"peer-token-file", FLAG_STRING, &c->peer_token_file, "", "file with the secret the service nodes of a cluster share to send each other a region's actions (POST /v1/region-calls; the same token rules); without it a node sends and serves none", NULL, 0, 0},
        {"oracle-token-file", FLAG_STRING, &c->oracle_token_file, "", "file with the bearer token the oracle asks for (its --auth-token-file)", NULL, 0, 0},
        {"openapi-file", FLAG_STRING, &c->openapi_file, "api-spec/service.yaml", "the spec served at /openapi.yaml", NULL, 0, 0},
        {"gc-retention-ms", FLAG_UINT64, &c->gc_retention_ms, "600000", "versions stay readable this long after they are overwritten (0: no GC)", NULL, 0, 86400000000},
        {"txn-retention-ms", FLAG_UINT64, &c->txn_retention_ms, "300000", "how long a finished session stays readable", NULL, 0, 86400000},
        {"oracle-timeout-ms", FLAG_UINT64, &c->oracle_timeout_ms, "2000", "time limit of one oracle request", NULL, 10, 60000},
        {"max-body-memory", FLAG_SIZE, &c->max_body_memory, "256MiB", "request bodies held in memory at once, all requests together; past it 503 busy", NULL, 1 << 20, (int64_t)1 << 40},
        {"oracle-ca-file", FLAG_STRING, &otls.ca_file, "", "PEM CA certificate(s) an https:// oracle's certificate must chain to (default: the system's CAs)", NULL, 0, 0},
        {"oracle-cert-file", FLAG_STRING, &otls.cert_file, "", "PEM client certificate for an https:// oracle that requires one (mutual TLS)", NULL, 0, 0},
        {"oracle-key-file", FLAG_STRING, &otls.key_file, "", "PEM private key of --oracle-cert-file", NULL, 0, 0},
        {"forward-ca-file", FLAG_STRING, &ftls.ca_file, "", "PEM CA certificate(s) the leader's HTTPS certificate must chain to when a follower passes a request on (default: the system's CAs)", NULL, 0, 0},
        {"forward-cert-file", FLAG_STRING, &ftls.cert_file, "", "PEM client certificate a follower shows the leader when passing a request on, if the leader requires one (its --tls-client-ca-file)", NULL, 0, 0},
        {"forward-key-file", FLAG_STRING, &ftls.key_file, "", "PEM private key of --forward-cert-file", NULL, 0, 0},
        {"advertise-url", FLAG_STRING, &c->advertise_url, "", "the URL other machines reach this node at, which the placement driver lists (a single node; default http(s):// + --listen; a group member's is its --raft-urls entry)", NULL, 0, 0},
        {"pd-heartbeat-ms", FLAG_UINT64, &c->pd_heartbeat_ms, "10000", "report this node and the regions it leads to the placement driver (an oracle group) this often (0: never; DESIGN 6.3)", NULL, 0, 3600000},
        {"region-max-bytes", FLAG_UINT64, &c->region_max_bytes, "0", "split a region whose rows pass this many bytes, at its middle key, on the leader (0: never; DESIGN §6.2)", NULL, 0, (uint64_t)1 << 40},
        {"region-split-keys", FLAG_STRING, &c->region_split_keys, "", "cut the keyspace into regions before these user keys (comma-separated, in increasing order, percent-encoded as in /v1/kv paths): each batch of a transaction is one region's (DESIGN §6.2); the same on every member; for a store that never split (POST /v1/regions/split)", NULL, 0, 0},
        {"region-leaders-gather", FLAG_BOOL, &c->gather_leaders, "on", "with --region-logs, hand each region's lead to region 1's leader; off: each stays where elected and a region's actions are sent to its leader (POST /v1/region-calls), but GC and the change feed wait while a region is led elsewhere (DESIGN §6.6)", NULL, 0, 0},
        {"region-logs", FLAG_BOOL, &c->region_logs, "off", "give each region a Raft group of its own, the groups of a node sharing one network connection per pair of nodes on the --raft-peers address (a member; fixed when the store is made: a store of one log for every region never runs so, nor the other way round; DESIGN §6.5 step 6)", NULL, 0, 0},
        {"raft-snapshot-entries", FLAG_UINT64, &c->raft_snapshot_entries, "8192", "Raft log compaction: a snapshot (an image of the store) every this many entries", NULL, 16, 100000000},
    };
    program_parse_or_exit(PROG, "Percolator transactional key-value store over HTTP/JSON.", defs,
                          sizeof defs / sizeof defs[0], &c->shared, &texts, argc, argv);
    c->sync = SYNC_MODES[sync_mode];

    char err[512];
    bool all_https = false;
    if (c->data_dir[0] == '\0' || !oracle_urls_ok(c->oracle, &all_https)) {
        log_startup_error(PROG, "--data-dir must not be empty and --oracle must be an http:// "
                          "or https:// URL (or several, comma-separated)");
        return 2;
    }
    if (client_tls_ok("oracle", &otls, all_https, err, sizeof err) != 0 ||
        client_tls_ok("forward", &ftls, true, err, sizeof err) != 0) {
        log_startup_error(PROG, "%s", err);
        return 2;
    }
    if (!advertise_url_ok(c, err, sizeof err)) {
        log_startup_error(PROG, "%s", err);
        return 2;
    }
    /* A group per region: a member's (a single node has one log), not yet
     * with a restore (DESIGN §6.5 step 6). */
    if (c->region_logs && !c->gather_leaders && c->peer_token_file[0] == '\0') {
        log_startup_error(PROG, "--region-leaders-gather off needs --peer-token-file: a region "
                                "led on another member is sent its actions");
        return 2;
    }
    if (c->region_logs && (c->shared.raft_id == 0 || c->restore_from[0] != '\0')) {
        log_startup_error(PROG, "--region-logs is for a member of a group (--raft-id), and does "
                                "not restore a backup yet (no --restore-from)");
        return 2;
    }
    pc_buf *splits = NULL;
    size_t nsplits = 0;
    if (ks_split_keys(c->region_split_keys, &splits, &nsplits, err, sizeof err) != 0) {
        log_startup_error(PROG, "%s", err);
        return 2;
    }
    for (size_t i = 0; i < nsplits; i++)
        pc_buf_free(&splits[i]);
    free(splits);
    raft_group_config rcfg = {.id = (unsigned)c->shared.raft_id};
    char raft_dir[4096];
    if (raft_flags_ok(c, &rcfg, raft_dir, sizeof raft_dir, err, sizeof err) != 0 ||
        (c->shared.raft_id != 0 && peer_tls_open(&c->shared.peer, rcfg.peers, rcfg.npeers, rcfg.id,
                                          &rcfg.peer_tls, err, sizeof err) != 0)) {
        log_startup_error(PROG, "%s", err);
        return 2;
    }
    /* A worker holds a request until it is answered: in a group that is a
     * quorum round trip or two, so more of them are needed to keep the
     * CPUs busy (measured, 2-key transactions at 64 connections on three
     * members: 16 workers 2,100/s, 32 3,300/s, 64 4,000/s). */
    if (c->shared.threads == 0)
        c->shared.threads = c->shared.raft_id != 0 ? 64 : 32;
    /* Descriptors: WiredTiger's files, the event loops (an epoll set and a
     * wake-up pipe each), the oracle client's connections, logs: what is
     * left is for connections (fdlimit.h). */
    program_run run;
    int prepared = program_prepare(PROG, &c->shared, 128 + 4 * (unsigned)c->shared.threads,
                                   "itself and its storage", &run);
    if (prepared != 0) {
        tls_server_free(rcfg.peer_tls);
        return prepared;
    }
    const tls_pem tls = run.tls;

    int rc = 1, http_fd = -1, raft_fd = -1;
    httpd *server = NULL;
    janitor *jan = NULL;
    pd_report *pd = NULL;
    httpd_route *routes = NULL;
    token oracle_token = {NULL, 0};
    failpoint_init();
    limit_malloc_arenas();

    if ((c->auth_token_file[0] != '\0' &&
         token_load(c->auth_token_file, &s->auth, err, sizeof err) != 0) ||
        (c->oracle_token_file[0] != '\0' &&
         token_load(c->oracle_token_file, &oracle_token, err, sizeof err) != 0) ||
        (c->peer_token_file[0] != '\0' &&
         token_load(c->peer_token_file, &s->peer_auth, err, sizeof err) != 0)) {
        log_startup_error(PROG, "%s", err);
        rc = 2;
        goto done;
    }
    /* The ports before the data (listen_socket.h): a copy started by
     * mistake on a busy port stops here, before it opens, locks or
     * recovers a store, or touches its raft log. */
    const raft_peer *me =
        c->shared.raft_id != 0 ? raft_peers_find(rcfg.peers, rcfg.npeers, rcfg.id) : NULL;
    if (httpd_listen(c->shared.listen, &http_fd, err, sizeof err) != 0 ||
        (me != NULL && raft_transport_listen(me->raft, &raft_fd, err, sizeof err) != 0)) {
        log_startup_error(PROG, "%s", err);
        goto done;
    }
    s->openapi = read_file(c->openapi_file, 4 << 20, &s->openapi_len);
    if (s->openapi == NULL)
        log_warn("no OpenAPI spec at %s: /openapi.yaml will answer 404", c->openapi_file);
    if (c->shared.raft_id != 0) {
        rcfg.listen_fd = raft_fd;
        rcfg.snapshot_entries = (unsigned)c->raft_snapshot_entries;
    }
    int opened = svc_open(s, c->shared.raft_id != 0 ? &rcfg : NULL, &otls, oracle_token.secret);
    if (raft_fd >= 0)
        close(raft_fd); /* the transport listens on a copy */
    raft_fd = -1;
    if (opened != 0) {
        rc = opened;
        goto done;
    }
    if (svc_replicated(s)) {
        log_info("service: raft member %u of %zu, log in %s, election timeout %u ms, heartbeat "
                 "%u ms", rcfg.id, rcfg.npeers, rcfg.dir, rcfg.election_ms, rcfg.heartbeat_ms);
        if ((s->fwd = svc_forwarder_start(s, &ftls, err, sizeof err)) == NULL) {
            log_startup_error(PROG, "%s", err);
            goto done;
        }
        /* A region led on another node is sent its actions (region_call.h). */
        if (c->region_logs && s->peer_auth.secret != NULL &&
            (s->calls = region_calls_start(s, &ftls, err, sizeof err)) == NULL) {
            log_startup_error(PROG, "%s", err);
            goto done;
        }
    }

    /* The route table: every resource's routes, in one array. */
    const httpd_route *groups[] = {txn_routes, kv_routes, observer_routes, ops_routes,
                                   admin_routes, members_routes, watch_routes, lease_routes,
                                   regions_routes, region_call_routes};
    const size_t sizes[] = {txn_routes_n, kv_routes_n, observer_routes_n, ops_routes_n,
                            admin_routes_n, members_routes_n, watch_routes_n, lease_routes_n,
                            regions_routes_n, region_call_routes_n};
    size_t n = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        n += sizes[g];
    if ((routes = calloc(n, sizeof(*routes))) == NULL)
        goto done;
    n = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (size_t i = 0; i < sizes[g]; i++)
            routes[n++] = groups[g][i];
    httpd_config hc = {
        .listen = c->shared.listen,
        .listen_fd = http_fd,
        .threads = (unsigned)c->shared.threads,
        .max_connections = run.connections,
        .max_per_ip = (unsigned)c->shared.max_per_ip,
        .body_budget = c->max_body_memory,
        .header_timeout_ms = (unsigned)c->shared.header_timeout_ms,
        .access_log = c->shared.access_log,
        .routes = routes,
        .nroutes = n,
        .ctx = s,
        .metrics = s->metrics,
        .authorize = svc_authorize,
        .elsewhere = svc_replicated(s) ? svc_elsewhere : NULL,
        .forward = svc_forward,
        .tls_cert = tls.cert,
        .tls_key = tls.key,
        .tls_client_ca = tls.client_ca,
    };
    /* The driver's client before the janitor, whose splits ask it for ids. */
    if (start_pd_report(s, &rcfg, &otls, oracle_token.secret, tls.cert != NULL, &pd) != 0)
        goto done;
    s->pd = pd;
    if ((jan = janitor_start(s)) == NULL) {
        log_error("cannot start the janitor");
        goto done;
    }
    /* After the raft log exists: its first figure counts it too. */
    if ((s->size = store_size_start(c->data_dir, 1000)) == NULL) {
        log_error("cannot start the data dir's size watch");
        goto done;
    }
    int started = httpd_start(&hc, &server, err, sizeof err);
    close(http_fd); /* the server serves from a copy */
    http_fd = -1;
    if (started != 0) {
        log_startup_error(PROG, "cannot start: %s", err);
        goto done;
    }
    log_info("service: run %s, data in %s (sync %s), oracle %s, listening on %s (port %u, %s)",
             s->run_id, c->data_dir, c->sync, c->oracle, c->shared.listen, (unsigned)httpd_port(server),
             tls.client_ca ? "https, client certificates required" : tls.cert ? "https" : "http");

    int sig = program_wait(&c->shared, &run, server, rcfg.peer_tls);
    log_info("service: %s received, stopping", strsignal(sig));
    pd_report_cancel(pd); /* a split waiting on the driver gives up: nothing waits on it */
    forward_drain(s->fwd, 10000); /* the same grace for what it passed on */
    watch_hub_stop(s->watch); /* watchers are told, their bodies end */
    httpd_stop(server, 10000);
    server = NULL;
    rc = 0;
done:
    forward_stop(s->fwd); /* answers what it holds: httpd_stop waits for those */
    if (http_fd >= 0)
        close(http_fd);
    if (raft_fd >= 0)
        close(raft_fd);
    watch_hub_stop(s->watch);
    httpd_stop(server, 0);
    forward_free(s->fwd);
    pd_report_cancel(pd);
    janitor_stop(jan); /* its splits ask the driver's client: before that is freed */
    s->pd = NULL;
    pd_report_stop(pd); /* it reads the router and the leadership: before svc_close */
    store_size_stop(s->size); /* after httpd_stop: health reads it */
    svc_close(s); /* after httpd_stop: deferred writes come back first */
    region_calls_free(s->calls); /* after every thread that sends them (workers, janitor) */
    s->calls = NULL;
    tls_server_free(rcfg.peer_tls); /* after the Raft group stopped */
    free(routes);
    token_free(&s->auth);
    token_free(&s->peer_auth);
    token_free(&oracle_token);
    free(s->openapi);
    program_done(&run);
    if (rc == 0)
        log_info("service: stopped cleanly");
    return rc;
}
