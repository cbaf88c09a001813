/*
 * program.c — the start-up and the stop both server programs share (see
 * program.h).
 */
#include "program.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fdlimit.h"
#include "log.h"
#include "raft_host.h"
#include "signals.h"
#include "tls_reload.h"

#define NSHARED 22

/* The shared flags' table, before the program's own in --help. */
static void shared_defs(program_flags *f, const program_texts *t, flag_def *d)
{
    const flag_def defs[NSHARED] = {
        {"listen", FLAG_STRING, &f->listen, t->listen, "address to serve HTTP on (host:port)", NULL, 0, 0},
        {"threads", FLAG_UINT64, &f->threads, "0", t->threads, NULL, 0, t->threads_max},
        {"max-connections", FLAG_UINT64, &f->max_connections, "4096", "connections at once; more are closed at once (lowered to what the file limit leaves)", NULL, 16, 1000000},
        {"max-connections-per-ip", FLAG_UINT64, &f->max_per_ip, "1024", t->per_ip, NULL, 0, 1000000},
        {"header-timeout-ms", FLAG_UINT64, &f->header_timeout_ms, "10000", "a connection's request line and headers must arrive within this, or it is closed (slowloris guard)", NULL, 100, 3600000},
        {"tls-cert-file", FLAG_STRING, &f->tls_cert_file, "", "PEM certificate (chain) to serve HTTPS with; needs --tls-key-file (the --tls-* files are read again on SIGHUP)", NULL, 0, 0},
        {"tls-key-file", FLAG_STRING, &f->tls_key_file, "", "PEM private key of --tls-cert-file", NULL, 0, 0},
        {"tls-client-ca-file", FLAG_STRING, &f->tls_ca_file, "", "PEM CA certificate(s): every client must present a certificate they signed (mutual TLS)", NULL, 0, 0},
        {"log-level", FLAG_ENUM, &f->log_level, "info", "least severe level logged", log_level_names, 0, 0},
        {"log-format", FLAG_ENUM, &f->log_format, "text", "text, or json: one JSON object a line", log_format_names, 0, 0},
        {"access-log", FLAG_BOOL, &f->access_log, "off", "one log line per request: method, path, route, status, duration, bytes, request id", NULL, 0, 0},
        {"raft-id", FLAG_UINT64, &f->raft_id, "0", t->raft_id, NULL, 0, 1000000},
        {"raft-peers", FLAG_STRING, &f->raft_peers, "", t->raft_peers, NULL, 0, 0},
        {"raft-urls", FLAG_STRING, &f->raft_urls, "", t->raft_urls, NULL, 0, 0},
        {"raft-initial-members", FLAG_STRING, &f->raft_initial, "", "the members of --raft-peers that bootstrap the group, ID,ID,... (default: all); the others join it when they start, and the leader adds them", NULL, 0, 0},
        {"raft-ready-lag", FLAG_UINT64, &f->ready_lag, "1024", "a member more than this many committed entries behind its leader answers /v1/ready 503 (catching up)", NULL, 1, 1000000000},
        {"raft-election-timeout-ms", FLAG_UINT64, &f->election_ms, "1000", "a follower that hears no leader for this long (randomized up to twice it) starts an election; at least 5 heartbeats", NULL, 50, 60000},
        {"raft-heartbeat-ms", FLAG_UINT64, &f->heartbeat_ms, "100", "the leader's heartbeat, also libraft's timer tick", NULL, 10, 1000},
        {"peer-cert-file", FLAG_STRING, &f->peer.cert_file, "", "PEM certificate this member proves itself with to the other members (mutual TLS on the raft transport); it must name this member's --raft-peers host as an IP subjectAltName (read again on SIGHUP)", NULL, 0, 0},
        {"peer-key-file", FLAG_STRING, &f->peer.key_file, "", "PEM private key of --peer-cert-file", NULL, 0, 0},
        {"peer-trusted-ca-file", FLAG_STRING, &f->peer.ca_file, "", "PEM CA certificate(s) that sign every member's peer certificate", NULL, 0, 0},
        {"peer-insecure", FLAG_BOOL, &f->peer.insecure, "off", "allow plain TCP between members on addresses outside 127.0.0.0/8 (anyone who reaches a raft port can then disrupt the group)", NULL, 0, 0},
    };
    memcpy(d, defs, sizeof defs);
}

void program_parse_or_exit(const char *prog, const char *about, const flag_def *own,
                           size_t nown, program_flags *f, const program_texts *t, int argc,
                           char **argv)
{
    flag_def *defs = calloc(nown + NSHARED, sizeof *defs);
    if (defs == NULL) {
        log_startup_error(prog, "out of memory");
        exit(1);
    }
    shared_defs(f, t, defs);
    memcpy(defs + NSHARED, own, nown * sizeof *defs);
    flags_parse_or_exit(prog, about, defs, nown + NSHARED, argc, argv);
    free(defs); /* the values point into argv, environ and string literals */
    log_set_level((log_level)f->log_level);
    log_set_json(f->log_format == 1);

    char err[512];
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (httpd_parse_listen(f->listen, &ss, &sslen, err, sizeof err) != 0) {
        log_startup_error(prog, "--listen: %s", err);
        exit(2);
    }
    raft_host_set_ready_lag(f->ready_lag);
    /* Checked even on a single node: a bad pair is a mistake either way. */
    if (raft_host_check_timeouts((unsigned)f->election_ms, (unsigned)f->heartbeat_ms, err,
                                 sizeof err) != 0) {
        log_startup_error(prog, "%s", err);
        exit(2);
    }
}

int program_prepare(const char *prog, const program_flags *f, unsigned reserve,
                    const char *who, program_run *run)
{
    char err[512];
    memset(run, 0, sizeof *run);
    if (tls_pem_load(f->tls_cert_file, f->tls_key_file, f->tls_ca_file, &run->tls, err,
                     sizeof err) != 0) {
        log_startup_error(prog, "%s", err);
        return 2;
    }
    uint64_t nofile = fd_limit_raise();
    run->connections = fd_connection_limit(nofile, reserve, (unsigned)f->max_connections, 16);
    if (run->connections == 0) {
        log_startup_error(prog, "only %llu files may be open (ulimit -n); it needs %u for %s "
                          "and at least 16 for connections",
                          (unsigned long long)nofile, reserve, who);
        tls_pem_free(&run->tls);
        return 1;
    }
    /* Before any thread starts, so that only the main thread sees them;
     * SIGHUP reloads the TLS files (and no longer ends the program). */
    stop_signals_block(&run->stop);
    sigaddset(&run->stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &run->stop, NULL);
    return 0;
}

int program_wait(const program_flags *f, program_run *run, httpd *server,
                 tls_server *peer_tls)
{
    int sig;
    while ((sig = stop_signals_wait(&run->stop)) == SIGHUP) {
        if (run->tls.cert != NULL || peer_tls == NULL)
            tls_reload(server, f->tls_cert_file, f->tls_key_file, f->tls_ca_file);
        peer_tls_reload(peer_tls, &f->peer);
    }
    return sig;
}

void program_done(program_run *run)
{
    tls_pem_free(&run->tls);
}
