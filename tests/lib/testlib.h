/*
 * testlib.h — helpers for integration tests (and benchmarks) that drive the
 * real programs over loopback.
 *
 * Processes: tl_spawn() starts a program from PERCOLATOR_BIN_DIR with its
 * output in a log file and remembers its pid; tl_stop()/tl_kill9() signal
 * only such pids. An atexit hook SIGKILLs any started process still alive,
 * and every child gets PR_SET_PDEATHSIG so it dies with the test even if
 * the test itself is killed by the runner's timeout.
 *
 * Everything is bounded: waits take a timeout, HTTP requests have one.
 */
#ifndef PERCOLATOR_TESTLIB_H
#define PERCOLATOR_TESTLIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Bounds for the fixtures' waits. They are generous on purpose: `make
 * test` must pass on a loaded machine (a CPU hog beside it, a sanitizer
 * build), and a bound only decides how long a broken program takes to
 * fail, never whether a working one passes. A test that proves a time
 * bound of the program's own sets and measures it itself. */
#define TL_START_MS 60000   /* a program started until its health answers */
#define TL_STOP_MS 60000    /* a graceful stop (SIGTERM) until it exits */
#define TL_REQUEST_MS 60000 /* one request of a fixture helper */

/* --- files and directories --- */
/* Where the programs are: $PERCOLATOR_BIN_DIR, else "bin". */
const char *tl_bin_dir(void);
/* A fresh directory under $TMPDIR (or /tmp); malloc'd path, NULL on error. */
char *tl_mkdtemp(const char *tag);
/* rm -rf. 0 or -1. */
int tl_rmtree(const char *path);
/* Whole file into a malloc'd NUL-terminated buffer; NULL on error. */
char *tl_read_file(const char *path, size_t *len);
int tl_write_file(const char *path, const void *data, size_t len);

/* --- network --- */
/* A loopback TCP port that was free a moment ago (bind 127.0.0.1:0). */
int tl_free_port(void);

/* --- processes --- */
/* Start prog (a bare name is looked up in tl_bin_dir()) with args (NULL-
 * terminated, without argv[0]) and extra environment entries "K=V" (NULL-
 * terminated or NULL), stdout+stderr appended to log_path. pid or -1. */
pid_t tl_spawn(const char *prog, const char *const args[], const char *const env[],
               const char *log_path);
/* argv (path, then args) and envp (the environment, with env's entries
 * "K=V" replacing inherited ones of the same name) for execve, built
 * before a fork; the caller frees both arrays (not their strings). 0 or -1. */
int tl_exec_vectors(const char *path, const char *const args[], const char *const env[],
                    char ***argv, char ***envp);
/* Poll GET base_url/v1/health until it answers 200. 0, or -1 on timeout or
 * if pid (when > 0) exits meanwhile. */
int tl_wait_health(const char *base_url, pid_t pid, int timeout_ms);
/* Wait for pid to exit. Returns its wait status decoded: exit code 0..255,
 * 128+signal if killed, -1 on timeout (process left running). */
int tl_wait_exit(pid_t pid, int timeout_ms);
/* SIGTERM and wait up to timeout_ms: the decoded exit status. If it is
 * still running then, SIGKILL it and return -1 (not a clean stop). */
int tl_stop(pid_t pid, int timeout_ms);
/* SIGKILL and reap. 0 or -1. */
int tl_kill9(pid_t pid);
/* SIGKILL and reap every program started here that is still running (the
 * atexit hook). */
void tl_kill_started(void);

/* --- a test's own threads (threads.c) ---
 * A test that fails leaves the function by cmocka's longjmp: threads it
 * started and had not joined would go on using its stack frame, long
 * gone, and crash the program later under another test's name (or hide
 * the failure). So tests start and join them with these, and list each
 * test with TL_TEST: a test that ends with a thread running fails, and
 * the program ends at the next test's setup (after cmocka printed why),
 * the programs it started killed first. Threads that use only their own
 * heap memory (tests/lib/watch_client.c) need not be counted. */
int tl_thread_start(pthread_t *t, void *(*fn)(void *), void *arg); /* pthread_create's rc */
int tl_thread_join(pthread_t t, void **ret);                         /* pthread_join's rc */
int tl_threads_setup(void **state);
int tl_threads_teardown(void **state);
#define TL_TEST(f) cmocka_unit_test_setup_teardown(f, tl_threads_setup, tl_threads_teardown)

/* Run a program (a bare name is looked up in tl_bin_dir()) with args (NULL-
 * terminated, without argv[0]), extra environment "K=V" (NULL or NULL-
 * terminated; wins over the test's own), in_len bytes of in on its stdin;
 * wait up to timeout_ms. status: the exit code, 128+signal, or -1 when it
 * ran out of time (then killed). 0, or -1 if it could not be run. Always
 * call tl_run_free. (run.c) */
typedef struct tl_run_result {
    int status;
    char *out, *err;      /* stdout and stderr, NUL-terminated */
    size_t out_len, err_len;
} tl_run_result;
int tl_run(const char *prog, const char *const args[], const char *const env[], const void *in,
           size_t in_len, int timeout_ms, tl_run_result *r);
void tl_run_free(tl_run_result *r);

/* --- HTTP (libcurl, a fresh connection per call) --- */
typedef struct tl_resp {
    long status;          /* 0 if no response */
    char *body;           /* NUL-terminated */
    size_t len;
    char *headers;        /* raw header block, NUL-terminated */
    int transport_error;  /* the CURLcode when no response came (0: none) */
} tl_resp;

/* body may be NULL (no body); content_type NULL: none sent. 0 if a response
 * arrived, -1 on transport error. Always call tl_resp_free. */
int tl_http(const char *method, const char *url, const void *body, size_t body_len,
            const char *content_type, int timeout_ms, tl_resp *out);
/* tl_http with one more request header ("Name: value"; NULL: none). */
int tl_http_with(const char *method, const char *url, const void *body, size_t body_len,
                 const char *content_type, const char *header, int timeout_ms, tl_resp *out);
/* TLS for every later tl_http* call (tests over https://): the CA file to
 * trust alone (NULL: libcurl's default CAs), a client certificate and its
 * key (NULL: none). Process-wide; set it between requests. All NULL: back
 * to the defaults. */
void tl_http_tls(const char *ca_file, const char *cert_file, const char *key_file);
/* Exchanges are recorded for the OpenAPI check when PERCOLATOR_EXCHANGE_LOG
 * names a file (exchange_log.c). A test that sends a request the API does
 * not route on purpose (an unknown path, a method a path lacks) brackets
 * it with tl_expect_off_spec(true) ... (false). */
void tl_expect_off_spec(bool on);
void tl_record_exchange(const char *method, const char *url, const void *body, size_t body_len,
                        const char *content_type, const tl_resp *r);
/* tl_spawn tells the exchange log which program (percolator-oracle or
 * -service, maybe behind a wrapper in args) listens on which --listen port,
 * so that exchanges with it name their program. */
void tl_exchange_program(const char *prog, const char *const args[]);

/* A response header's value (case-insensitive name) copied into out;
 * NULL if absent. */
const char *tl_resp_header(const tl_resp *r, const char *name, char *out, size_t outlen);
void tl_resp_free(tl_resp *r);

/* The value of the first sample line "name value" (name may include labels
 * exactly as rendered) in Prometheus text; -1 if absent. */
double tl_metric(const char *text, const char *name);
/* tl_metric of the /metrics of the program at base ("http://host:port");
 * -1 if absent, or if /metrics did not answer 200. */
double tl_metric_at(const char *base, const char *name);

/* --- the oracle as a fixture --- */
typedef struct tl_oracle {
    pid_t pid;
    int port;
    char url[64];          /* http://127.0.0.1:port */
    char dir[512];         /* data dir */
    char log[600];         /* its stdout+stderr */
} tl_oracle;

/* A test's oracle with its own temp dir (data in dir/data), for cmocka
 * setup/teardown: tl_oracle_env_new makes the dir (the oracle is started
 * by the test), tl_oracle_env_free stops the oracle if running and removes
 * everything. */
typedef struct tl_oracle_env {
    char *dir;
    char data[600];
    tl_oracle o;
} tl_oracle_env;
tl_oracle_env *tl_oracle_env_new(const char *tag);
void tl_oracle_env_free(tl_oracle_env *e);

/* Start percolator-oracle on a free port (port <= 0) or the given port with
 * data_dir, wait for health. 0 or -1 (the log is printed on failure). */
int tl_oracle_start(tl_oracle *o, const char *data_dir, int port);
/* Graceful stop; returns the exit status (0 expected). */
int tl_oracle_stop(tl_oracle *o);
/* POST /v1/timestamps?count=n; 0 and *first on 200, else -1. */
int tl_oracle_next(const tl_oracle *o, unsigned n, uint64_t *first);
/* --- raw TCP (sock.c) --- */
/* A connection from src (NULL: any address) to 127.0.0.1:port; -1 on failure. */
int tl_dial(const char *src, int port);
/* Has the server closed fd (EOF or reset), waiting at most ms? */
bool tl_closed_by_server(int fd, int ms);
/* Send req on a new connection and read the reply until the server closes
 * it or ms pass; the bytes read (NUL-terminated in out), or -1. */
long tl_raw_exchange(int port, const void *req, size_t len, char *out, size_t cap, int ms);
/* The status of a raw reply ("HTTP/1.1 404 ..."), or -1. */
int tl_raw_status(const char *reply);

/* Print a file to stderr (to show a program's log when a test fails). */
void tl_dump_file(const char *path);
/* The same, only its last max bytes. */
void tl_dump_tail(const char *path, size_t max);

#endif
