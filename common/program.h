/*
 * program.h — the start-up and the stop both server programs share
 * (percolator-oracle and percolator-service).
 *
 * Each main() does what only it knows (its own flags, its data, its
 * routes) between these steps, in this order:
 *
 *   program_parse_or_exit   its own flags and the shared ones below, one
 *                           table, one --help; the log set up; --listen
 *                           and the Raft timeouts checked (exit 2)
 *   (its own checks, its Raft peers, peer TLS)
 *   program_prepare         the TLS files read, the descriptors counted
 *                           (what is left after its reserve is for
 *                           connections), SIGTERM/SIGINT/SIGHUP blocked
 *                           before any thread starts
 *   (its ports, its data, its server)
 *   program_wait            until SIGTERM or SIGINT, the TLS files (and
 *                           the peers' certificates) read again on SIGHUP
 *   (its stop sequence)
 */
#ifndef PERCOLATOR_PROGRAM_H
#define PERCOLATOR_PROGRAM_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "flags.h"
#include "httpd.h"
#include "peer_tls.h"
#include "tls.h"

/* The flags both programs have. */
typedef struct program_flags {
    const char *listen;
    uint64_t threads, max_connections, max_per_ip, header_timeout_ms;
    bool access_log;
    const char *tls_cert_file, *tls_key_file, *tls_ca_file;
    int log_level, log_format;
    uint64_t raft_id, election_ms, heartbeat_ms, ready_lag;
    const char *raft_peers, *raft_urls, *raft_initial;
    peer_tls_flags peer;
} program_flags;

/* What the two programs say differently about those flags. */
typedef struct program_texts {
    const char *listen;        /* --listen's default */
    const char *threads;       /* --threads' help */
    int64_t threads_max;
    const char *per_ip;        /* --max-connections-per-ip's help */
    const char *raft_id, *raft_peers, *raft_urls; /* their help */
} program_texts;

/* Parse argv against the program's own flags (own, nown) and the shared
 * ones into f, set the log's level and format, and check --listen and the
 * Raft timeouts: a bad flag or value is one line and exit status 2, as
 * --help is its text and exit 0 (flags_parse_or_exit). */
void program_parse_or_exit(const char *prog, const char *about, const flag_def *own,
                           size_t nown, program_flags *f, const program_texts *t, int argc,
                           char **argv);

/* What program_prepare sets up, the program's until it stops. */
typedef struct program_run {
    tls_pem tls;               /* the --tls-* files' contents (tls.cert NULL: plain HTTP) */
    unsigned connections;      /* --max-connections, lowered to what the descriptors allow */
    sigset_t stop;             /* what program_wait waits for */
} program_run;

/* Read the --tls-* files; count the descriptors: reserve for the program
 * (who: what it needs them for, in the message), the rest for
 * connections, at least 16; block the stop signals and SIGHUP in every
 * thread to come. 0, or the exit status with the reason logged (2: a bad
 * TLS file, 1: too few descriptors), nothing left held. */
int program_prepare(const char *prog, const program_flags *f, unsigned reserve,
                    const char *who, program_run *run);

/* Serve until SIGTERM or SIGINT; on SIGHUP read the --tls-* files again
 * into server (when it serves HTTPS, or no peer TLS is set: a plain
 * server is then told the files are gone) and the peers' certificates
 * into peer_tls (NULL: none). The signal that stopped it. */
int program_wait(const program_flags *f, program_run *run, httpd *server,
                 tls_server *peer_tls);

/* Free what program_prepare took (also after a failed start). */
void program_done(program_run *run);

#endif
