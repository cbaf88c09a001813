/*
 * main.c — percolator-oracle: the timestamp oracle program.
 *
 * Flags (each with a PERCOLATOR_* environment twin), then the durable
 * allocator (refusing to start on a corrupt state file), then the HTTP
 * server. SIGTERM/SIGINT are blocked in every thread and taken synchronously
 * by the main thread with sigwait(), so the stop sequence runs as ordinary
 * code: stop accepting, finish requests in flight, close, exit 0.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdlimit.h"
#include "flags.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "raft_host.h"
#include "raft_node.h"
#include "raft_transport.h"
#include "peer_tls.h"
#include "routes.h"
#include "signals.h"
#include "tls.h"
#include "tls_reload.h"
#include "tso.h"

#define PROG "percolator-oracle"
#define ORACLE_MAX_BODY 1024 /* bytes; its requests carry none */

int main(int argc, char **argv)
{
    const char *tls_cert_file = NULL, *tls_key_file = NULL, *tls_ca_file = NULL;
    const char *listen = NULL, *data_dir = NULL;
    uint64_t threads = 0, max_conns = 0, per_ip = 0, raft_id = 0, header_ms = 0;
    uint64_t election_ms = 0, heartbeat_ms = 0, min_ts = 0;
    const char *raft_peers = NULL, *raft_urls = NULL, *token_file = NULL, *raft_initial = NULL;
    peer_tls_flags peer = {0};
    int level = LOG_INFO, log_format = 0;
    bool access_log = false;
    const flag_def defs[] = {
        {"listen", FLAG_STRING, &listen, "127.0.0.1:8090", "address to serve HTTP on (host:port)", NULL, 0, 0},
        {"data-dir", FLAG_STRING, &data_dir, "./data/oracle", "directory of the persisted high-water mark", NULL, 0, 0},
        {"threads", FLAG_UINT64, &threads, "0", "HTTP worker threads (0: one per CPU; 32 in a Raft group)", NULL, 0, 256},
        {"max-connections", FLAG_UINT64, &max_conns, "4096", "connections at once; more are closed at once (lowered to what the file limit leaves)", NULL, 16, 1000000},
        {"max-connections-per-ip", FLAG_UINT64, &per_ip, "1024", "connections at once from one client address (0: no limit)", NULL, 0, 1000000},
        {"header-timeout-ms", FLAG_UINT64, &header_ms, "10000", "a connection's request line and headers must arrive within this, or it is closed (slowloris guard)", NULL, 100, 3600000},
        {"auth-token-file", FLAG_STRING, &token_file, "", "file with a bearer token every request but /v1/health needs (16-4096 characters of A-Z a-z 0-9 - . _ ~ + / =)", NULL, 0, 0},
        {"min-timestamp", FLAG_UINT64, &min_ts, "0", "hand out nothing at or below this: an oracle that lost its state, started again above the store (the service's 503 oracle_behind names the store's largest timestamp)", NULL, 0, ((int64_t)1 << 53) - 1},
        {"raft-id", FLAG_UINT64, &raft_id, "0", "this node's id in a Raft group (0: a single oracle, no Raft)", NULL, 0, 1000000},
        {"raft-peers", FLAG_STRING, &raft_peers, "", "the group's members: ID=HOST:PORT,... (raft addresses; this node's entry is where it listens for raft)", NULL, 0, 0},
        {"raft-initial-members", FLAG_STRING, &raft_initial, "", "the members of --raft-peers that bootstrap the group, ID,ID,... (default: all); the others join it when they start, and the leader adds them", NULL, 0, 0},
        {"raft-urls", FLAG_STRING, &raft_urls, "", "the members' HTTP URLs: ID=http://HOST:PORT,... (for redirects to the leader and health)", NULL, 0, 0},
        {"raft-election-timeout-ms", FLAG_UINT64, &election_ms, "1000", "a follower that hears no leader for this long (randomized up to twice it) starts an election; at least 5 heartbeats", NULL, 50, 60000},
        {"raft-heartbeat-ms", FLAG_UINT64, &heartbeat_ms, "100", "the leader's heartbeat, also libraft's timer tick", NULL, 10, 1000},
        {"peer-cert-file", FLAG_STRING, &peer.cert_file, "", "PEM certificate this member proves itself with to the other members (mutual TLS on the raft transport); it must name this member's --raft-peers host as an IP subjectAltName (read again on SIGHUP)", NULL, 0, 0},
        {"peer-key-file", FLAG_STRING, &peer.key_file, "", "PEM private key of --peer-cert-file", NULL, 0, 0},
        {"peer-trusted-ca-file", FLAG_STRING, &peer.ca_file, "", "PEM CA certificate(s) that sign every member's peer certificate", NULL, 0, 0},
        {"peer-insecure", FLAG_BOOL, &peer.insecure, "off", "allow plain TCP between members on addresses outside 127.0.0.0/8 (anyone who reaches a raft port can then disrupt the group)", NULL, 0, 0},
        {"tls-cert-file", FLAG_STRING, &tls_cert_file, "", "PEM certificate (chain) to serve HTTPS with; needs --tls-key-file (the --tls-* files are read again on SIGHUP)", NULL, 0, 0},
        {"tls-key-file", FLAG_STRING, &tls_key_file, "", "PEM private key of --tls-cert-file", NULL, 0, 0},
        {"tls-client-ca-file", FLAG_STRING, &tls_ca_file, "", "PEM CA certificate(s): every client must present a certificate they signed (mutual TLS)", NULL, 0, 0},
        {"log-level", FLAG_ENUM, &level, "info", "least severe level logged", log_level_names, 0, 0},
        {"log-format", FLAG_ENUM, &log_format, "text", "text, or json: one JSON object a line", log_format_names, 0, 0},
        {"access-log", FLAG_BOOL, &access_log, "off", "one log line per request: method, path, route, status, duration, bytes, request id", NULL, 0, 0},
    };
    flags_parse_or_exit(PROG, "Percolator timestamp oracle: strictly increasing timestamps over HTTP/JSON.",
                        defs, sizeof defs / sizeof defs[0], argc, argv);
    log_set_level((log_level)level);
    log_set_json(log_format == 1);

    char err[512];
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (httpd_parse_listen(listen, &ss, &sslen, err, sizeof err) != 0) {
        log_startup_error(PROG, "--listen: %s", err);
        return 2;
    }
    if (!data_dir || !*data_dir) {
        log_startup_error(PROG, "--data-dir must not be empty");
        return 2;
    }
    raft_node_config rcfg = {.id = (unsigned)raft_id, .dir = data_dir,
                             .election_ms = (unsigned)election_ms,
                             .heartbeat_ms = (unsigned)heartbeat_ms, .min_ts = min_ts};
    if (raft_host_check_timeouts(rcfg.election_ms, rcfg.heartbeat_ms, err, sizeof err) != 0) {
        log_startup_error(PROG, "%s", err);
        return 2;
    }
    if (raft_id != 0 &&
        (raft_node_parse_peers(raft_peers, raft_urls[0] ? raft_urls : NULL, &rcfg, err,
                               sizeof err) != 0 ||
         raft_peers_set_initial(rcfg.peers, rcfg.npeers, raft_initial, err, sizeof err) != 0)) {
        log_startup_error(PROG, "--raft-peers/--raft-urls: %s", err);
        return 2;
    }
    if (raft_id == 0 && (raft_peers[0] != '\0' || raft_urls[0] != '\0')) {
        log_startup_error(PROG, "--raft-peers and --raft-urls need --raft-id");
        return 2;
    }
    if (raft_id != 0 && peer_tls_open(&peer, rcfg.peers, rcfg.npeers, rcfg.id, &rcfg.peer_tls,
                                      err, sizeof err) != 0) {
        log_startup_error(PROG, "%s", err);
        return 2;
    }
    tls_pem tls;
    if (tls_pem_load(tls_cert_file, tls_key_file, tls_ca_file, &tls, err, sizeof err) != 0) {
        log_startup_error(PROG, "%s", err);
        tls_server_free(rcfg.peer_tls);
        return 2;
    }

    /* A member of a Raft group answers a timestamp request only once its
     * batch is committed: a handler waits a quorum round trip, so as many
     * requests can join a batch as there are handler threads. */
    if (raft_id != 0 && threads == 0)
        threads = 32;
    /* Descriptors: what the event loops and the state file need, the rest
     * for connections (fdlimit.h). */
    unsigned pool = threads ? (unsigned)threads : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
    unsigned reserve = 64 + 4 * pool;
    uint64_t nofile = fd_limit_raise();
    unsigned conns = fd_connection_limit(nofile, reserve, (unsigned)max_conns, 16);
    if (conns == 0) {
        log_startup_error(PROG, "only %llu files may be open (ulimit -n); it needs %u for "
                          "itself and at least 16 for connections",
                          (unsigned long long)nofile, reserve);
        tls_pem_free(&tls);
        tls_server_free(rcfg.peer_tls);
        return 1;
    }

    /* Before any thread starts, so that only the main thread sees them. */
    sigset_t stop;
    stop_signals_block(&stop);
    /* SIGHUP reloads the TLS files (and no longer ends the program). */
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    int rc = 1, http_fd = -1, raft_fd = -1;
    httpd *server = NULL;
    oracle_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    if (token_file[0] != '\0' && token_load(token_file, &ctx.auth, err, sizeof err) != 0) {
        log_startup_error(PROG, "%s", err);
        rc = 2;
        goto done;
    }
    /* The ports before the data (listen_socket.h): on a busy port the
     * oracle stops here, before it opens or locks its state or raft log. */
    const raft_peer *me = raft_id != 0 ? raft_peers_find(rcfg.peers, rcfg.npeers, rcfg.id) : NULL;
    if (httpd_listen(listen, &http_fd, err, sizeof err) != 0 ||
        (me != NULL && raft_transport_listen(me->raft, &raft_fd, err, sizeof err) != 0)) {
        log_startup_error(PROG, "%s", err);
        goto done;
    }
    ctx.metrics = metrics_registry_new();
    if (!ctx.metrics) {
        log_error("out of memory");
        goto done;
    }
    if (raft_id != 0) {
        /* A member of a Raft group: the mark is the group's (raft_node.h). */
        rcfg.listen_fd = raft_fd;
        int started = raft_node_start(&rcfg, ctx.metrics, &ctx.raft, err, sizeof err);
        close(raft_fd); /* the transport listens on a copy */
        raft_fd = -1;
        if (started != 0) {
            log_startup_error(PROG, "cannot start: %s", err);
            goto done;
        }
        log_info("oracle: raft member %llu of %zu, data in %s, election timeout %u ms, "
                 "heartbeat %u ms",
                 (unsigned long long)raft_id, rcfg.npeers, data_dir, rcfg.election_ms,
                 rcfg.heartbeat_ms);
    } else {
        if (tso_open(data_dir, ctx.metrics, &ctx.tso, err, sizeof err) != 0) {
            log_startup_error(PROG, "cannot start: %s", err);
            goto done;
        }
        if (min_ts > 0 && tso_raise(ctx.tso, min_ts, err, sizeof err) != TSO_OK) {
            log_startup_error(PROG, "cannot start: %s", err);
            goto done;
        }
        log_info("oracle: data dir %s, persisted high-water mark %llu: timestamps start at %llu",
                 data_dir, (unsigned long long)tso_persisted(ctx.tso),
                 (unsigned long long)tso_persisted(ctx.tso) + 1);
    }
    oracle_ctx_init_metrics(&ctx);
    ctx.raft_id = (unsigned)raft_id;
    if ((ctx.size = store_size_start(data_dir, 1000)) == NULL) {
        log_error("cannot start the data dir's size watch");
        goto done;
    }

    size_t nroutes;
    httpd_config cfg = {
        .listen = listen,
        .listen_fd = http_fd,
        .threads = (unsigned)threads,
        .max_connections = conns,
        .max_per_ip = (unsigned)per_ip,
        .header_timeout_ms = (unsigned)header_ms,
        /* A timestamp request has no body to speak of: refuse any. */
        .max_body = ORACLE_MAX_BODY,
        .routes = oracle_routes(&nroutes),
        .authorize = oracle_authorize,
        .access_log = access_log,
        .ctx = &ctx,
        .metrics = ctx.metrics,
        .tls_cert = tls.cert,
        .tls_key = tls.key,
        .tls_client_ca = tls.client_ca,
    };
    cfg.nroutes = nroutes;
    int started = httpd_start(&cfg, &server, err, sizeof err);
    close(http_fd); /* the server serves from a copy */
    http_fd = -1;
    if (started != 0) {
        log_startup_error(PROG, "cannot start: %s", err);
        goto done;
    }
    log_info("oracle: listening on %s (port %u, %s)", listen, (unsigned)httpd_port(server),
             tls.client_ca ? "https, client certificates required" : tls.cert ? "https" : "http");

    int sig;
    while ((sig = stop_signals_wait(&stop)) == SIGHUP) {
        if (tls.cert != NULL || rcfg.peer_tls == NULL)
            tls_reload(server, tls_cert_file, tls_key_file, tls_ca_file);
        peer_tls_reload(rcfg.peer_tls, &peer);
    }
    log_info("oracle: %s received, stopping", strsignal(sig));
    httpd_stop(server, 10000);
    server = NULL;
    if (ctx.tso != NULL)
        log_info("oracle: stopped; the next timestamp would have been %llu",
                 (unsigned long long)tso_last(ctx.tso) + 1);
    rc = 0;
done:
    if (http_fd >= 0)
        close(http_fd);
    if (raft_fd >= 0)
        close(raft_fd);
    httpd_stop(server, 0);
    store_size_stop(ctx.size); /* after httpd_stop: health reads it */
    raft_node_stop(ctx.raft);
    tls_server_free(rcfg.peer_tls);
    tso_close(ctx.tso);
    tls_pem_free(&tls);
    metrics_registry_free(ctx.metrics);
    token_free(&ctx.auth);
    return rc;
}
