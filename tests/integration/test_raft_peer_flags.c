/*
 * test_raft_peer_flags.c — the rules of the --peer-* flags
 * (docs/DESIGN.md §7.2, README "Raft peers and TLS") with the real
 * programs:
 *
 *  - without peer certificates, a group whose --raft-peers are not all on
 *    127.0.0.0/8 does not start (exit 2, naming the flags), in both
 *    programs; --peer-insecure lets it past that rule;
 *  - the three files go together, the CA is required, and a certificate
 *    that names neither the member's address nor raft-member-<id> is
 *    refused at start (exit 2): the others would refuse it;
 *  - a port outside 1..65535 in --raft-peers exits 2;
 *  - SIGHUP reads the peer files again: a broken file leaves the
 *    certificate in use (logged, the member goes on), a good one is taken
 *    for new connections (logged).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer_certs.h"
#include "testlib.h"
#include "timeutil.h"

static tl_peer_certs PC;

static int setup(void **state)
{
    (void)state;
    return tl_peer_certs_make(&PC, NULL);
}

static int teardown(void **state)
{
    (void)state;
    tl_peer_certs_remove(&PC);
    return 0;
}

/* Run prog with args (NULL-ended): its exit status; its stderr in err. */
static int run(const char *prog, const char *const args[], char *err, size_t errlen)
{
    tl_run_result r;
    assert_int_equal(tl_run(prog, args, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
    snprintf(err, errlen, "%s", r.err ? r.err : "");
    int status = r.status;
    tl_run_free(&r);
    return status;
}

static void a_group_off_loopback_needs_certificates(void **state)
{
    (void)state;
    char err[4096], dir[600];
    char *tmp = tl_mkdtemp("peer-flags");
    assert_non_null(tmp);
    snprintf(dir, sizeof dir, "%s/data", tmp);
    const char *peers = "1=10.11.12.1:9001,2=10.11.12.2:9001,3=10.11.12.3:9001";
    const char *oracle[] = {"--listen", "127.0.0.1:0", "--data-dir", dir, "--raft-id", "1",
                            "--raft-peers", peers, NULL};
    assert_int_equal(run("percolator-oracle", oracle, err, sizeof err), 2);
    assert_non_null(strstr(err, "--peer-cert-file"));
    assert_non_null(strstr(err, "--peer-insecure"));
    const char *service[] = {"--listen", "127.0.0.1:0", "--data-dir", dir, "--raft-id", "2",
                             "--raft-peers", peers, NULL};
    assert_int_equal(run("percolator-service", service, err, sizeof err), 2);
    assert_non_null(strstr(err, "--peer-cert-file"));
    /* --peer-insecure: past the rule (then 10.11.12.1 is no address of
     * this machine: it cannot listen there, exit 1). */
    const char *insecure[] = {"--listen", "127.0.0.1:0", "--data-dir", dir, "--raft-id", "1",
                              "--raft-peers", peers, "--peer-insecure", "on", NULL};
    int st = run("percolator-oracle", insecure, err, sizeof err);
    assert_int_not_equal(st, 2);
    assert_null(strstr(err, "--peer-cert-file"));
    tl_rmtree(tmp);
    free(tmp);
}

static void bad_peer_flags_exit_2(void **state)
{
    (void)state;
    char err[4096], dir[600];
    char *tmp = tl_mkdtemp("peer-flags");
    assert_non_null(tmp);
    snprintf(dir, sizeof dir, "%s/data", tmp);
    const char *peers = "1=127.0.0.1:19001,2=127.0.0.2:19002,3=127.0.0.3:19003";
    /* Member 1 with member 2's certificate: names IP:127.0.0.2 only. */
    const char *wrong[] = {"--data-dir", dir, "--raft-id", "1", "--raft-peers", peers,
                           "--peer-cert-file", PC.cert[1], "--peer-key-file", PC.key[1],
                           "--peer-trusted-ca-file", PC.ca, NULL};
    assert_int_equal(run("percolator-oracle", wrong, err, sizeof err), 2);
    assert_non_null(strstr(err, "names neither IP:127.0.0.1"));
    const char *no_ca[] = {"--data-dir", dir, "--raft-id", "1", "--raft-peers", peers,
                           "--peer-cert-file", PC.cert[0], "--peer-key-file", PC.key[0], NULL};
    assert_int_equal(run("percolator-service", no_ca, err, sizeof err), 2);
    assert_non_null(strstr(err, "--peer-trusted-ca-file"));
    const char *no_key[] = {"--data-dir", dir, "--raft-id", "1", "--raft-peers", peers,
                            "--peer-cert-file", PC.cert[0], "--peer-trusted-ca-file", PC.ca,
                            NULL};
    assert_int_equal(run("percolator-oracle", no_key, err, sizeof err), 2);
    assert_non_null(strstr(err, "--peer-key-file"));
    const char *mismatch[] = {"--data-dir", dir, "--raft-id", "1", "--raft-peers", peers,
                              "--peer-cert-file", PC.cert[0], "--peer-key-file", PC.key[1],
                              "--peer-trusted-ca-file", PC.ca, NULL};
    assert_int_equal(run("percolator-oracle", mismatch, err, sizeof err), 2);
    assert_non_null(strstr(err, "does not belong"));
    const char *port[] = {"--data-dir", dir, "--raft-id", "1", "--raft-peers",
                          "1=127.0.0.1:99999,2=127.0.0.2:19002,3=127.0.0.3:19003", NULL};
    assert_int_equal(run("percolator-oracle", port, err, sizeof err), 2);
    assert_non_null(strstr(err, "65535"));
    tl_rmtree(tmp);
    free(tmp);
}

/* Whether the log at path holds text, waiting up to 10 s. */
static bool log_says(const char *path, const char *text)
{
    for (int i = 0; i < 100; i++) {
        char *log = tl_read_file(path, NULL);
        bool found = log != NULL && strstr(log, text) != NULL;
        free(log);
        if (found)
            return true;
        time_sleep_ms(100);
    }
    return false;
}

static void sighup_reloads_the_peer_files(void **state)
{
    (void)state;
    char *tmp = tl_mkdtemp("peer-reload");
    assert_non_null(tmp);
    char dir[600], log[600], cert[600], key[600], peers[64], listen[32], url[64];
    snprintf(dir, sizeof dir, "%s/data", tmp);
    snprintf(log, sizeof log, "%s/oracle.log", tmp);
    snprintf(cert, sizeof cert, "%s/member.crt", tmp);
    snprintf(key, sizeof key, "%s/member.key", tmp);
    size_t n;
    char *pem = tl_read_file(PC.cert[0], &n);
    assert_non_null(pem);
    assert_int_equal(tl_write_file(cert, pem, n), 0);
    free(pem);
    pem = tl_read_file(PC.key[0], &n);
    assert_non_null(pem);
    assert_int_equal(tl_write_file(key, pem, n), 0);
    free(pem);
    int port = tl_free_port(), raft = tl_free_port();
    snprintf(peers, sizeof peers, "1=127.0.0.1:%d", raft);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    /* A group of one: it elects itself over nothing, but its transport
     * runs with the peer files. */
    const char *args[] = {"--listen", listen, "--data-dir", dir, "--raft-id", "1",
                          "--raft-peers", peers, "--peer-cert-file", cert, "--peer-key-file", key,
                          "--peer-trusted-ca-file", PC.ca, NULL};
    pid_t pid = tl_spawn("percolator-oracle", args, NULL, log);
    assert_true(pid > 0);
    assert_int_equal(tl_wait_health(url, pid, TL_START_MS), 0);

    assert_int_equal(tl_write_file(cert, "not a certificate\n", 18), 0);
    assert_int_equal(kill(pid, SIGHUP), 0);
    assert_true(log_says(log, "raft peer tls: SIGHUP: the certificate in use stays"));
    assert_int_equal(tl_wait_health(url, pid, TL_START_MS), 0); /* still serving */

    /* A good certificate of the group's CA, but member 2's (IP:127.0.0.2):
     * the other members would refuse it as this member's, so it stays. */
    for (int k = 0; k < 2; k++) {
        pem = tl_read_file(k == 0 ? PC.cert[1] : PC.key[1], &n);
        assert_non_null(pem);
        assert_int_equal(tl_write_file(k == 0 ? cert : key, pem, n), 0);
        free(pem);
    }
    assert_int_equal(kill(pid, SIGHUP), 0);
    assert_true(log_says(log, "nor DNS:raft-member-1 as a subjectAltName"));
    assert_int_equal(tl_wait_health(url, pid, TL_START_MS), 0);

    pem = tl_read_file(PC.key[0], &n);
    assert_non_null(pem);
    assert_int_equal(tl_write_file(key, pem, n), 0);
    free(pem);
    pem = tl_read_file(PC.cert[0], &n);
    assert_non_null(pem);
    assert_int_equal(tl_write_file(cert, pem, n), 0);
    free(pem);
    assert_int_equal(kill(pid, SIGHUP), 0);
    assert_true(log_says(log, "raft peer tls: SIGHUP: new peer connections get the certificate"));
    assert_int_equal(tl_stop(pid, TL_STOP_MS), 0);
    tl_rmtree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(a_group_off_loopback_needs_certificates),
        TL_TEST(bad_peer_flags_exit_2),
        TL_TEST(sighup_reloads_the_peer_files),
    };
    return cmocka_run_group_tests_name("raft peer flags", tests, setup, teardown);
}
