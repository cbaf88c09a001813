/*
 * test_raft_peers.c — common/raft_peers: the --raft-peers and --raft-urls
 * lists, and the reasons a bad one is refused with (README: the Raft
 * flags of both programs).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "raft_peers.h"

static raft_peer peers[RAFT_PEERS_MAX];
static size_t n;
static char err[256];

static int parse(const char *list, const char *urls, unsigned self)
{
    err[0] = '\0';
    return raft_peers_parse(list, urls, self, peers, &n, err, sizeof err);
}

/* list is refused, and the reason holds `why`. */
static void refused(const char *list, const char *why)
{
    if (parse(list, NULL, 1) != -1 || strstr(err, why) == NULL)
        fail_msg("'%s': expected a refusal with '%s', got '%s'", list, why, err);
}

static void test_a_group_parses(void **state)
{
    (void)state;
    assert_int_equal(parse("1=127.0.0.1:9001,2=127.0.0.1:9002,3=10.0.0.3:65535",
                           "1=http://127.0.0.1:8081,3=https://10.0.0.3:8083", 2),
                     0);
    assert_int_equal(n, 3);
    assert_int_equal(peers[0].id, 1);
    assert_string_equal(peers[0].raft, "127.0.0.1:9001");
    assert_string_equal(peers[0].http, "http://127.0.0.1:8081");
    assert_string_equal(peers[1].http, "");
    assert_string_equal(peers[2].raft, "10.0.0.3:65535");
    assert_ptr_equal(raft_peers_find(peers, n, 3), &peers[2]);
    assert_null(raft_peers_find(peers, n, 4));
    assert_int_equal(parse("7=h:1", NULL, 7), 0); /* the lowest port, a name */
    assert_int_equal(parse("7=h:065535", NULL, 7), 0);
}

static void test_ports_outside_1_to_65535_are_refused(void **state)
{
    (void)state;
    refused("1=127.0.0.1:99999",
            "--raft-peers member 1=127.0.0.1:99999: the port is not in 1..65535");
    refused("1=127.0.0.1:65536", "not in 1..65535");
    refused("1=127.0.0.1:0", "not in 1..65535");
    refused("1=127.0.0.1:99999999999999999999999", "not in 1..65535");
    refused("1=127.0.0.1:9001,2=127.0.0.1:4294967297", "member 2=127.0.0.1:4294967297");
}

static void test_bad_ports_and_hosts_are_refused(void **state)
{
    (void)state;
    refused("1=127.0.0.1:", "no port after the host");
    refused("1=127.0.0.1:http", "the port is not a number");
    refused("1=127.0.0.1:80x", "the port is not a number");
    refused("1=127.0.0.1:-80", "the port is not a number");
    refused("1=127.0.0.1: 80", "the port is not a number");
    refused("1=:9001", "no host before the port");
    refused("1=127.0.0.1", "not HOST:PORT");
    refused("1=", "each member is ID=ADDRESS");
}

static void test_bad_lists_are_refused(void **state)
{
    (void)state;
    refused("1=a:1,1=b:2", "member 1=b:2: the id is given twice");
    refused("0=a:1", "ID from 1");
    refused("x=a:1", "ID from 1");
    refused("1=a:1,,2=b:2", "each member is ID=ADDRESS");
    refused("1=a:1,2=a:2,3=a:3,4=a:4,5=a:5,6=a:6,7=a:7,8=a:8", "more than 7 members");
    assert_int_equal(parse("1=a:1,2=b:2", NULL, 3), -1);
    assert_non_null(strstr(err, "--raft-id 3 is not among"));
    assert_int_equal(parse("1=a:1", "2=http://b:2", 1), -1);
    assert_non_null(strstr(err, "not a member of --raft-peers"));
    assert_int_equal(parse("1=a:1", "1=ftp://b:2", 1), -1);
}

/* A member on an address of its own carries its URL in the configuration
 * (raft_peers.h): composed and split back; what does not split is refused. */
static void test_configuration_addresses(void **state)
{
    (void)state;
    raft_peer p = {.id = 4}, q;
    const char *why;
    char conf[RAFT_PEER_CONF_ADDR_MAX];
    snprintf(p.raft, sizeof p.raft, "10.0.0.4:9001");
    snprintf(p.http, sizeof p.http, "https://10.0.0.4:8080");
    raft_peers_conf_address(&p, true, conf, sizeof conf);
    assert_string_equal(conf, "10.0.0.4:9001 https://10.0.0.4:8080");
    assert_int_equal(raft_peers_from_conf_address(conf, &q, &why), 0);
    assert_string_equal(q.raft, "10.0.0.4:9001");
    assert_string_equal(q.http, "https://10.0.0.4:8080");
    raft_peers_conf_address(&p, false, conf, sizeof conf); /* a --raft-peers member's */
    assert_string_equal(conf, "10.0.0.4:9001");
    assert_int_equal(raft_peers_from_conf_address(conf, &q, &why), 0);
    assert_string_equal(q.http, "");
    const char *bad[] = {"10.0.0.4", "10.0.0.4:0 http://x", "10.0.0.4:9001 ftp://x",
                         "10.0.0.4:9001 http://a b", "10.0.0.4:9001 ", ":9001 http://x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(raft_peers_from_conf_address(bad[i], &q, &why), -1);
    char longest[300];
    memset(longest, 'a', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    assert_int_equal(raft_peers_from_conf_address(longest, &q, &why), -1);
    assert_true(raft_peers_url_ok("http://127.0.0.1:8080"));
    assert_false(raft_peers_url_ok("http://127.0.0.1:8080\n"));
    assert_non_null(raft_peers_bad_address("10.0.0.4:65536"));
    assert_null(raft_peers_bad_address("10.0.0.4:65535"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_group_parses),
        cmocka_unit_test(test_ports_outside_1_to_65535_are_refused),
        cmocka_unit_test(test_bad_ports_and_hosts_are_refused),
        cmocka_unit_test(test_bad_lists_are_refused),
        cmocka_unit_test(test_configuration_addresses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
