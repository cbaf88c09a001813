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

#include "flags.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "raft_host.h"
#include "raft_node.h"
#include "raft_transport.h"
#include "peer_tls.h"
#include "program.h"
#include "routes.h"
#include "tls.h"
#include "tso.h"

#define PROG "percolator-oracle"
#define ORACLE_MAX_BODY 1024 /* bytes: a timestamp request carries none */
/* A group's member: a node's heartbeat to the placement driver (a few
 * thousand regions; RN_PD_MAX_BYTES holds its command). */
#define ORACLE_PD_MAX_BODY ((size_t)1 << 20)

int main(int argc, char **argv)
{
    const char *data_dir = NULL, *token_file = NULL;
    uint64_t min_ts = 0;
    program_flags pf = {0};
    const program_texts texts = {
        .listen = "127.0.0.1:8090",
        .threads = "HTTP worker threads (0: one per CPU; 32 in a Raft group)",
        .threads_max = 256,
        .per_ip = "connections at once from one client address (0: no limit)",
        .raft_id = "this node's id in a Raft group (0: a single oracle, no Raft)",
        .raft_peers = "the group's members: ID=HOST:PORT,... (raft addresses; this node's entry is where it listens for raft)",
        .raft_urls = "the members' HTTP URLs: ID=http://HOST:PORT,... (for redirects to the leader and health)",
    };
    const flag_def defs[] = {
        {"data-dir", FLAG_STRING, &data_dir, "./data/oracle", "directory of the persisted high-water mark", NULL, 0, 0},
        {"auth-token-file", FLAG_STRING, &token_file, "", "file with a bearer token every request but /v1/health needs (16-4096 characters of A-Z a-z 0-9 - . _ ~ + / =)", NULL, 0, 0},
        {"min-timestamp", FLAG_UINT64, &min_ts, "0", "hand out nothing at or below this: an oracle that lost its state, started again above the store (the service's 503 oracle_behind names the store's largest timestamp)", NULL, 0, ((int64_t)1 << 53) - 1},
    };
    program_parse_or_exit(PROG, "Percolator timestamp oracle: strictly increasing timestamps over HTTP/JSON.",
                          defs, sizeof defs / sizeof defs[0], &pf, &texts, argc, argv);
    const char *listen = pf.listen, *raft_peers = pf.raft_peers, *raft_urls = pf.raft_urls;
    uint64_t raft_id = pf.raft_id, threads = pf.threads;

    char err[512];
    if (!data_dir || !*data_dir) {
        log_startup_error(PROG, "--data-dir must not be empty");
        return 2;
    }
    raft_node_config rcfg = {.id = (unsigned)raft_id, .dir = data_dir,
                             .election_ms = (unsigned)pf.election_ms,
                             .heartbeat_ms = (unsigned)pf.heartbeat_ms, .min_ts = min_ts};
    if (raft_id != 0 &&
        (raft_node_parse_peers(raft_peers, raft_urls[0] ? raft_urls : NULL, &rcfg, err,
                               sizeof err) != 0 ||
         raft_peers_set_initial(rcfg.peers, rcfg.npeers, pf.raft_initial, err, sizeof err) != 0)) {
        log_startup_error(PROG, "--raft-peers/--raft-urls: %s", err);
        return 2;
    }
    if (raft_id == 0 && (raft_peers[0] != '\0' || raft_urls[0] != '\0')) {
        log_startup_error(PROG, "--raft-peers and --raft-urls need --raft-id");
        return 2;
    }
    if (raft_id != 0 && peer_tls_open(&pf.peer, rcfg.peers, rcfg.npeers, rcfg.id, &rcfg.peer_tls,
                                      err, sizeof err) != 0) {
        log_startup_error(PROG, "%s", err);
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
    program_run run;
    int prepared = program_prepare(PROG, &pf, 64 + 4 * pool, "itself", &run);
    if (prepared != 0) {
        tls_server_free(rcfg.peer_tls);
        return prepared;
    }
    const tls_pem tls = run.tls;

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
        if ((ctx.live = pd_live_new()) == NULL) {
            log_error("out of memory");
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
        .max_connections = run.connections,
        .max_per_ip = (unsigned)pf.max_per_ip,
        .header_timeout_ms = (unsigned)pf.header_timeout_ms,
        /* A timestamp request has no body to speak of: a single oracle
         * refuses any; a group's member takes the placement driver's
         * heartbeats. */
        .max_body = raft_id != 0 ? ORACLE_PD_MAX_BODY : ORACLE_MAX_BODY,
        .routes = oracle_routes(&nroutes),
        .authorize = oracle_authorize,
        .access_log = pf.access_log,
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

    int sig = program_wait(&pf, &run, server, rcfg.peer_tls);
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
    pd_live_free(ctx.live);
    tls_server_free(rcfg.peer_tls);
    tso_close(ctx.tso);
    program_done(&run);
    metrics_registry_free(ctx.metrics);
    token_free(&ctx.auth);
    return rc;
}
