/*
 * test_tls.c — HTTPS on both programs, mutual TLS, and the service's
 * oracle client over HTTPS, with real certificates made by openssl in the
 * test's temp dir (a CA, a server certificate for 127.0.0.1, a client
 * certificate, an unrelated second CA with a client certificate of its
 * own, and a server certificate that expired in 2020):
 *
 *  - the service over HTTPS: a client trusting the CA is served; plain
 *    HTTP to the TLS port gets no answer; a client trusting another CA
 *    refuses the server's certificate; `openssl s_client` gets TLS 1.3 and
 *    TLS 1.2 with ECDHE and AES-GCM or ChaCha20-Poly1305, and no handshake
 *    with TLS 1.1 or 1.0 or a CBC suite (SHA-1 or SHA-256) (tls.h:
 *    TLS_PRIORITIES);
 *  - a server with an expired certificate is refused by the client;
 *  - with --tls-client-ca-file: no client certificate, or one from the
 *    other CA, gets no answer (not even /v1/health); the right one is
 *    served;
 *  - the service commits through an oracle that speaks HTTPS and
 *    requires client certificates; without its client certificate, or
 *    trusting the wrong CA, it gets no timestamps (503);
 *  - both programs refuse to start, with the reason and exit status 2,
 *    on a missing key file, a certificate without its key and a key that
 *    does not belong to the certificate;
 *  - SIGHUP makes both programs read their TLS files again: new
 *    connections get the new certificate and client CAs; a bad key file
 *    leaves the current ones in place; past TLS_MAX_RELOADS a reload is
 *    refused (earlier credentials stay in memory: the bound).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "svc_fixture.h"
#include "tls.h"

static char *dir;          /* the temp dir: certificates, data, logs */
static int nrun;           /* programs started so far (unique data dirs) */

/* Makes the certificates in the current directory. EC P-256 keys (fast).
 * The expired one comes from `openssl ca`, which takes fixed dates. */
static const char CERTS_SH[] =
    "set -e\n"
    "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \"$1\"; }\n"
    "ca() { key $1.key; openssl req -x509 -new -key $1.key -subj /CN=$1 -days 2 -out $1.crt"
    " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign; }\n"
    "leaf() { key $1.key; openssl req -new -key $1.key -subj /CN=$1 -out $1.csr;"
    " printf '%s\\n' \"$3\" > $1.ext;"
    " openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial -days 2"
    " -extfile $1.ext -out $1.crt; }\n"
    "ca ca; ca otherca\n"
    "leaf server ca 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth'\n"
    "leaf client ca 'extendedKeyUsage=clientAuth'\n"
    "leaf stranger otherca 'extendedKeyUsage=clientAuth'\n"
    "leaf otherserver otherca 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth'\n"
    "key expired.key; openssl req -new -key expired.key -subj /CN=expired -out expired.csr\n"
    ": > index.txt; echo 01 > serial\n"
    "printf '[ca]\\ndefault_ca=d\\n[d]\\ndatabase=index.txt\\nnew_certs_dir=.\\nserial=serial\\n"
    "default_md=sha256\\npolicy=p\\n[p]\\ncommonName=supplied\\n[x]\\n"
    "subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > ca.cnf\n"
    "openssl ca -batch -notext -config ca.cnf -cert ca.crt -keyfile ca.key -in expired.csr"
    " -out expired.crt -startdate 20200101000000Z -enddate 20200102000000Z -extensions x\n";

static int make_certs(void **state)
{
    (void)state;
    if (system("command -v openssl >/dev/null") != 0) {
        fprintf(stderr, "test_tls: openssl is not installed (make deps installs it)\n");
        return -1;
    }
    if ((dir = tl_mkdtemp("tls")) == NULL)
        return -1;
    char script[700], cmd[1400];
    snprintf(script, sizeof script, "%s/certs.sh", dir);
    if (tl_write_file(script, CERTS_SH, sizeof CERTS_SH - 1) != 0)
        return -1;
    snprintf(cmd, sizeof cmd, "cd '%s' && sh certs.sh > certs.log 2>&1", dir);
    if (system(cmd) != 0) {
        snprintf(cmd, sizeof cmd, "%s/certs.log", dir);
        tl_dump_file(cmd);
        return -1;
    }
    return 0;
}

static int remove_dir(void **state)
{
    (void)state;
    tl_http_tls(NULL, NULL, NULL);
    if (dir != NULL)
        tl_rmtree(dir);
    free(dir);
    dir = NULL;
    return 0;
}

/* dir/name, in a static ring (so a call's arguments can hold several). */
static const char *in_dir(const char *name)
{
    static char ring[12][640];
    static int next;
    char *p = ring[next++ % 12];
    snprintf(p, sizeof ring[0], "%s/%s", dir, name);
    return p;
}

/* A program under test: started with tl_spawn, stopped by its pid. */
typedef struct prog {
    pid_t pid;
    int port;
    char url[64];      /* https://127.0.0.1:port (or http:// if plain) */
    char data[600];
    char log[640];
} prog;

/* Start percolator-<name> on a free port with extra flags (NULL-ended).
 * Returns once its port accepts connections, or when it exited. */
static void start(prog *p, const char *name, bool https, const char *const extra[])
{
    memset(p, 0, sizeof *p);
    p->port = tl_free_port();
    snprintf(p->url, sizeof p->url, "%s://127.0.0.1:%d", https ? "https" : "http", p->port);
    snprintf(p->data, sizeof p->data, "%s/%s-%d", dir, name, ++nrun);
    snprintf(p->log, sizeof p->log, "%s.log", p->data);
    char listen[64], path[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", p->port);
    snprintf(path, sizeof path, "percolator-%s", name);
    const char *args[32] = {"--listen", listen, "--data-dir", p->data, "--threads", "4"};
    int n = 6;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 31; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    p->pid = tl_spawn(path, args, NULL, p->log);
    assert_true(p->pid > 0);
}

/* Poll url until anything but "connection refused" happens (the port is
 * open: TLS or not, answered or not); the last attempt's result. */
static void call_when_open(const char *method, const char *url, pid_t pid, tl_resp *r)
{
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(tl_wait_exit(pid, 0), -1); /* still running */
        tl_http(method, url, NULL, 0, NULL, 5000, r);
        if (r->status != 0 || r->transport_error != CURLE_COULDNT_CONNECT)
            return;
        tl_resp_free(r);
        usleep(10000);
    }
    fail_msg("nothing listens at %s", url);
}

static void stop(prog *p)
{
    if (p->pid > 0) {
        int rc = tl_stop(p->pid, TL_STOP_MS);
        if (rc != 0)
            tl_dump_file(p->log);
        assert_int_equal(rc, 0);
    }
    p->pid = 0;
}

/* GET url: the status (0: no answer) and the transport error. */
static long get(const char *url, int *transport_error)
{
    tl_resp r;
    tl_http("GET", url, NULL, 0, NULL, 5000, &r);
    long status = r.status;
    if (transport_error != NULL)
        *transport_error = r.transport_error;
    tl_resp_free(&r);
    return status;
}

/* `openssl s_client` to 127.0.0.1:port with opts (the protocol and
 * suites it offers): true when the handshake completed with a protocol or
 * suite named `want`, false when it failed (a timeout fails the test). */
static bool handshake(int port, const char *opts, const char *want)
{
    char cmd[1024];
    const char *out = in_dir("s_client.out");
    snprintf(cmd, sizeof cmd, "timeout 10 openssl s_client -connect 127.0.0.1:%d %s "
             "</dev/null >'%s' 2>&1", port, opts, out);
    int rc = system(cmd);
    char *text = tl_read_file(out, NULL);
    assert_non_null(text);
    bool done = WIFEXITED(rc) && WEXITSTATUS(rc) == 0 && strstr(text, "Cipher is (NONE)") == NULL;
    if (!(WIFEXITED(rc) && WEXITSTATUS(rc) <= 1) || (done && strstr(text, want) == NULL)) {
        fprintf(stderr, "openssl s_client %s: exit status %d, expected %s; output:\n%s\n", opts,
                rc, want, text);
        fail();
    }
    free(text);
    return done;
}

/* What the server accepts (TLS_PRIORITIES): TLS 1.3; TLS 1.2 with ECDHE
 * and an AEAD cipher; nothing older, no CBC suite, no SHA-1 MAC. Each
 * refused offer is one the server would have taken with GnuTLS's
 * defaults: its certificate is ECDSA, and the older protocols are let
 * into OpenSSL's client with SECLEVEL=0 (so the server is what refuses). */
static void check_tls_suites(int port)
{
    assert_true(handshake(port, "-tls1_3", "TLSv1.3"));
    assert_true(handshake(port, "-tls1_2 -cipher ECDHE-ECDSA-AES128-GCM-SHA256",
                          "ECDHE-ECDSA-AES128-GCM-SHA256"));
    assert_true(handshake(port, "-tls1_2 -cipher ECDHE-ECDSA-AES256-GCM-SHA384",
                          "ECDHE-ECDSA-AES256-GCM-SHA384"));
    assert_true(handshake(port, "-tls1_2 -cipher ECDHE-ECDSA-CHACHA20-POLY1305",
                          "ECDHE-ECDSA-CHACHA20-POLY1305"));
    assert_false(handshake(port, "-tls1_2 -cipher ECDHE-ECDSA-AES128-SHA", "-"));
    assert_false(handshake(port, "-tls1_2 -cipher ECDHE-ECDSA-AES256-SHA", "-"));
    assert_false(handshake(port, "-tls1_2 -cipher ECDHE-ECDSA-AES128-SHA256", "-"));
    assert_false(handshake(port, "-tls1_1 -cipher DEFAULT@SECLEVEL=0", "-"));
    assert_false(handshake(port, "-tls1 -cipher DEFAULT@SECLEVEL=0", "-"));
}

static void https_service(void **state)
{
    (void)state;
    prog o, s;
    start(&o, "oracle", false, NULL);
    const char *flags[] = {"--oracle", o.url, "--tls-cert-file", in_dir("server.crt"),
                           "--tls-key-file", in_dir("server.key"), NULL};
    assert_int_equal(tl_wait_health(o.url, o.pid, TL_START_MS), 0);
    start(&s, "service", true, flags);
    tl_http_tls(in_dir("ca.crt"), NULL, NULL);
    assert_int_equal(tl_wait_health(s.url, s.pid, TL_START_MS), 0);

    char url[160], plain[160];
    snprintf(url, sizeof url, "%s/v1/kv/greeting", s.url);
    tl_resp r;
    assert_int_equal(tl_http("PUT", url, "{\"value\":\"hello\"}", 17, "application/json", TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"value\":\"hello\""));
    tl_resp_free(&r);

    /* Plain HTTP to the TLS port: no HTTP answer at all. */
    snprintf(plain, sizeof plain, "http://127.0.0.1:%d/v1/health", s.port);
    int err = 0;
    assert_int_equal(get(plain, &err), 0);
    assert_int_not_equal(err, CURLE_OK);

    /* A client that trusts another CA refuses the server's certificate. */
    snprintf(url, sizeof url, "%s/v1/health", s.url);
    tl_http_tls(in_dir("otherca.crt"), NULL, NULL);
    assert_int_equal(get(url, &err), 0);
    assert_int_equal(err, CURLE_PEER_FAILED_VERIFICATION);
    /* ... and so does one that trusts only the system's CAs. */
    tl_http_tls(NULL, NULL, NULL);
    assert_int_equal(get(url, &err), 0);
    assert_int_equal(err, CURLE_PEER_FAILED_VERIFICATION);

    /* TLS 1.3 and 1.2 with AEAD suites only. */
    check_tls_suites(s.port);
    tl_http_tls(in_dir("ca.crt"), NULL, NULL);
    assert_int_equal(get(url, NULL), 200); /* still serving */
    stop(&s);
    stop(&o);
}

static void expired_server_certificate(void **state)
{
    (void)state;
    prog o;
    const char *flags[] = {"--tls-cert-file", in_dir("expired.crt"), "--tls-key-file",
                           in_dir("expired.key"), NULL};
    start(&o, "oracle", true, flags);
    char url[160];
    snprintf(url, sizeof url, "%s/v1/health", o.url);
    tl_http_tls(in_dir("ca.crt"), NULL, NULL);
    tl_resp r;
    call_when_open("GET", url, o.pid, &r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.transport_error, CURLE_PEER_FAILED_VERIFICATION);
    tl_resp_free(&r);
    /* It started anyway, and said why clients will refuse it. */
    char *log = tl_read_file(o.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "expired"));
    free(log);
    stop(&o);
}

static void client_certificates_required(void **state)
{
    (void)state;
    prog o, s;
    start(&o, "oracle", false, NULL);
    assert_int_equal(tl_wait_health(o.url, o.pid, TL_START_MS), 0);
    const char *flags[] = {"--oracle", o.url, "--tls-cert-file", in_dir("server.crt"),
                           "--tls-key-file", in_dir("server.key"), "--tls-client-ca-file",
                           in_dir("ca.crt"), NULL};
    start(&s, "service", true, flags);
    tl_http_tls(in_dir("ca.crt"), in_dir("client.crt"), in_dir("client.key"));
    assert_int_equal(tl_wait_health(s.url, s.pid, TL_START_MS), 0);

    char health[160], kv[160];
    snprintf(health, sizeof health, "%s/v1/health", s.url);
    snprintf(kv, sizeof kv, "%s/v1/kv/k", s.url);
    int err = 0;
    assert_int_equal(get(kv, NULL), 404); /* served: not found */

    /* No client certificate: the handshake fails, nothing is served,
     * not even the public health check. */
    tl_http_tls(in_dir("ca.crt"), NULL, NULL);
    assert_int_equal(get(health, &err), 0);
    assert_int_not_equal(err, CURLE_OK);
    assert_int_equal(get(kv, &err), 0);

    /* A certificate from a CA the service does not trust: the same. */
    tl_http_tls(in_dir("ca.crt"), in_dir("stranger.crt"), in_dir("stranger.key"));
    assert_int_equal(get(health, &err), 0);
    assert_int_not_equal(err, CURLE_OK);
    assert_int_equal(get(kv, &err), 0);

    /* The right one, again: served. */
    tl_http_tls(in_dir("ca.crt"), in_dir("client.crt"), in_dir("client.key"));
    assert_int_equal(get(health, NULL), 200);
    stop(&s);
    stop(&o);
}

/* PUT /v1/kv/key through s: the status. */
static long put(const prog *s, const char *key)
{
    char url[160];
    snprintf(url, sizeof url, "%s/v1/kv/%s", s->url, key);
    tl_resp r;
    assert_int_equal(tl_http("PUT", url, "{\"value\":\"v\"}", 13, "application/json", TL_REQUEST_MS, &r), 0);
    long status = r.status;
    tl_resp_free(&r);
    return status;
}

static void service_commits_through_an_https_oracle(void **state)
{
    (void)state;
    prog o, s;
    const char *oflags[] = {"--tls-cert-file", in_dir("server.crt"), "--tls-key-file",
                            in_dir("server.key"), "--tls-client-ca-file", in_dir("ca.crt"), NULL};
    start(&o, "oracle", true, oflags);
    tl_http_tls(in_dir("ca.crt"), in_dir("client.crt"), in_dir("client.key"));
    assert_int_equal(tl_wait_health(o.url, o.pid, TL_START_MS), 0);

    /* Mutual TLS both ways: the service trusts the oracle's CA and shows
     * its client certificate. Plain HTTP towards the service's clients. */
    const char *sflags[] = {"--oracle", o.url, "--oracle-ca-file", in_dir("ca.crt"),
                            "--oracle-cert-file", in_dir("client.crt"), "--oracle-key-file",
                            in_dir("client.key"), "--oracle-timeout-ms", "2000", NULL};
    start(&s, "service", false, sflags);
    assert_int_equal(tl_wait_health(s.url, s.pid, TL_START_MS), 0);
    assert_int_equal(put(&s, "a"), 200);
    char url[160];
    snprintf(url, sizeof url, "%s/v1/txn", s.url);
    static const char txn[] = "{\"writes\":[{\"key\":\"b\",\"value\":\"1\"},{\"key\":\"c\",\"value\":\"2\"}]}";
    tl_resp r;
    assert_int_equal(tl_http("POST", url, txn, sizeof txn - 1, "application/json", TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"commit_ts\""));
    tl_resp_free(&r);
    stop(&s);

    /* Without its client certificate, the oracle does not answer it. */
    const char *nocert[] = {"--oracle", o.url, "--oracle-ca-file", in_dir("ca.crt"),
                            "--oracle-timeout-ms", "1000", NULL};
    start(&s, "service", false, nocert);
    assert_int_equal(tl_wait_health(s.url, s.pid, TL_START_MS), 0);
    assert_int_equal(put(&s, "d"), 503);
    stop(&s);

    /* Trusting another CA, it refuses the oracle's certificate. */
    const char *wrongca[] = {"--oracle", o.url, "--oracle-ca-file", in_dir("otherca.crt"),
                             "--oracle-cert-file", in_dir("client.crt"), "--oracle-key-file",
                             in_dir("client.key"), "--oracle-timeout-ms", "1000", NULL};
    start(&s, "service", false, wrongca);
    assert_int_equal(tl_wait_health(s.url, s.pid, TL_START_MS), 0);
    assert_int_equal(put(&s, "e"), 503);
    char *log = tl_read_file(s.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "SSL"));
    free(log);
    stop(&s);
    stop(&o);
}

/* Run percolator-<name> with flags: it must exit 2 with `want` in its
 * output. */
static void refused(const char *name, const char *const flags[], const char *want)
{
    prog p;
    start(&p, name, true, flags);
    int rc = tl_wait_exit(p.pid, TL_STOP_MS);
    char *log = tl_read_file(p.log, NULL);
    if (rc != 2 || log == NULL || strstr(log, want) == NULL)
        fprintf(stderr, "percolator-%s exited %d, expected 2 and '%s'; output:\n%s\n", name, rc,
                want, log ? log : "(none)");
    assert_int_equal(rc, 2);
    assert_non_null(log);
    assert_non_null(strstr(log, want));
    free(log);
}

static void refuses_to_start_on_bad_tls_files(void **state)
{
    (void)state;
    const char *missing_key[] = {"--tls-cert-file", in_dir("server.crt"), "--tls-key-file",
                                 in_dir("no-such.key"), NULL};
    const char *cert_only[] = {"--tls-cert-file", in_dir("server.crt"), NULL};
    const char *wrong_key[] = {"--tls-cert-file", in_dir("server.crt"), "--tls-key-file",
                               in_dir("client.key"), NULL};
    const char *ca_not_cert[] = {"--tls-cert-file", in_dir("server.crt"), "--tls-key-file",
                                 in_dir("server.key"), "--tls-client-ca-file",
                                 in_dir("server.key"), NULL};
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? "service" : "oracle";
        refused(name, missing_key, "--tls-key-file");
        refused(name, missing_key, "No such file or directory");
        refused(name, cert_only, "--tls-cert-file and --tls-key-file go together");
        refused(name, wrong_key, "the key does not belong to the certificate");
        refused(name, ca_not_cert, "no CA certificate in the client CA file");
    }
    const char *oracle_key_missing[] = {"--oracle", "https://127.0.0.1:1", "--oracle-cert-file",
                                        in_dir("client.crt"), "--oracle-key-file",
                                        in_dir("no-such.key"), NULL};
    refused("service", oracle_key_missing, "--oracle-key-file");
}

/* cp dir/from dir/to */
static void copy(const char *from, const char *to)
{
    size_t len = 0;
    char *data = tl_read_file(in_dir(from), &len);
    assert_non_null(data);
    assert_int_equal(tl_write_file(in_dir(to), data, len), 0);
    free(data);
}

/* Wait (at most 10 s) until p's log holds `text` n times. */
static void wait_log(const prog *p, const char *text, int n)
{
    for (int i = 0; i < 1000; i++) {
        char *log = tl_read_file(p->log, NULL);
        int seen = 0;
        for (const char *at = log; at != NULL && (at = strstr(at, text)) != NULL; at++)
            seen++;
        free(log);
        if (seen >= n)
            return;
        usleep(10000);
    }
    tl_dump_file(p->log);
    fail_msg("'%s' not logged %d times", text, n);
}

static void sighup_reloads_the_certificate(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? "service" : "oracle";
        copy("server.crt", "live.crt");
        copy("server.key", "live.key");
        copy("ca.crt", "live-ca.crt");
        prog o = {0}, p;
        const char *flags[] = {"--tls-cert-file", in_dir("live.crt"), "--tls-key-file",
                               in_dir("live.key"), "--tls-client-ca-file", in_dir("live-ca.crt"),
                               NULL, NULL, NULL};
        if (i == 0) {
            start(&o, "oracle", false, NULL); /* the service's, plain */
            assert_int_equal(tl_wait_health(o.url, o.pid, TL_START_MS), 0);
            flags[6] = "--oracle";
            flags[7] = o.url;
        }
        start(&p, name, true, flags);
        char url[160];
        snprintf(url, sizeof url, "%s/v1/health", p.url);
        tl_http_tls(in_dir("ca.crt"), in_dir("client.crt"), in_dir("client.key"));
        assert_int_equal(tl_wait_health(p.url, p.pid, TL_START_MS), 0);
        tl_http_tls(in_dir("otherca.crt"), in_dir("stranger.crt"), in_dir("stranger.key"));
        assert_int_equal(get(url, NULL), 0);

        /* Another CA's certificate and client CA: served after SIGHUP,
         * and the old ones no longer are. */
        copy("otherserver.crt", "live.crt");
        copy("otherserver.key", "live.key");
        copy("otherca.crt", "live-ca.crt");
        assert_int_equal(kill(p.pid, SIGHUP), 0);
        wait_log(&p, "tls: SIGHUP: new connections get", 1);
        assert_int_equal(get(url, NULL), 200);
        tl_http_tls(in_dir("ca.crt"), in_dir("client.crt"), in_dir("client.key"));
        int err = 0;
        assert_int_equal(get(url, &err), 0);
        assert_int_equal(err, CURLE_PEER_FAILED_VERIFICATION);

        /* A key that is not the certificate's: the current pair stays. */
        copy("client.key", "live.key");
        assert_int_equal(kill(p.pid, SIGHUP), 0);
        wait_log(&p, "the certificate in use stays", 1);
        tl_http_tls(in_dir("otherca.crt"), in_dir("stranger.crt"), in_dir("stranger.key"));
        assert_int_equal(get(url, NULL), 200);

        /* Each reload keeps the earlier credentials (connections may use
         * them): after TLS_MAX_RELOADS in all, a reload is refused. */
        if (i == 1) {
            copy("otherserver.key", "live.key");
            for (int n = 2; n <= TLS_MAX_RELOADS; n++) {
                assert_int_equal(kill(p.pid, SIGHUP), 0);
                wait_log(&p, "tls: SIGHUP: new connections get", n);
            }
            assert_int_equal(kill(p.pid, SIGHUP), 0);
            wait_log(&p, "restart to reload again", 1);
            assert_int_equal(get(url, NULL), 200);
        }
        stop(&p);
        stop(&o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(https_service),
        TL_TEST(expired_server_certificate),
        TL_TEST(client_certificates_required),
        TL_TEST(service_commits_through_an_https_oracle),
        TL_TEST(refuses_to_start_on_bad_tls_files),
        TL_TEST(sighup_reloads_the_certificate),
    };
    return cmocka_run_group_tests(tests, make_certs, remove_dir);
}
