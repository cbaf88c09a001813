/*
 * test_service_limits.c — what a client without a token, or with too many
 * connections, can make the service spend (the security review's
 * denial-of-service findings), with the real programs and raw sockets:
 *
 *  - under a low file limit, idle connections past the connection limit
 *    are closed at once and never take the descriptors the storage engine
 *    needs; the service works on after the attack;
 *  - one client address cannot hold more than --max-connections-per-ip
 *    while another client still gets answers;
 *  - connections that trickle their headers (slowloris) are closed at
 *    --header-timeout-ms, logged in one line, while others are answered;
 *  - request bodies in memory are bounded by --max-body-memory (503 busy
 *    with Retry-After past it);
 *  - a request without the token is refused when its headers arrive,
 *    before its body is read;
 *  - the oracle refuses a body on its timestamp requests;
 *  - /v1/health (no token needed) makes no oracle request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "svc_fixture.h"
#include "timeutil.h"

static int open_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Timing: the machine may be loaded (a CPU hog beside `make test`, a
 * sanitizer build), so nothing here expects the service to have done
 * something within a fixed nap. Where a test needs the service to have
 * taken every connection, it waits until the kernel's accept queue of the
 * listening socket is empty (listen_queue); where it needs the service to
 * have read what was sent, until the socket holds no unread bytes
 * (unread_bytes); other waits poll for what they need, bounded by
 * WAIT_MS. Connections that send nothing are closed by nothing else than
 * the limit under test: those tests set the header timeout far out. */
enum { WAIT_MS = 60000 };

/* A line of /proc/net/tcp for local port lport (and remote port rport,
 * if > 0) in state st (0x0A: listening, 0x01: established): its receive
 * queue (for a listening socket, the connections not yet accepted; for
 * a connection, the bytes not yet read), or -1 if there is none. */
static long tcp_rx_queue(int lport, int rport, unsigned st)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    long found = -1;
    if (f == NULL)
        return -1;
    while (found < 0 && fgets(line, sizeof line, f) != NULL) {
        unsigned lp, rp, state, tx, rx;
        if (sscanf(line, " %*u: %*x:%x %*x:%x %x %x:%x", &lp, &rp, &state, &tx, &rx) == 5 &&
            (int)lp == lport && (rport <= 0 || (int)rp == rport) && state == st)
            found = (long)rx;
    }
    fclose(f);
    return found;
}

/* Wait (bounded) until the service has accepted every connection made to
 * port: its listen queue is empty. */
static void await_accepted(int port)
{
    long q = -1;
    for (uint64_t t0 = time_mono_ms(); time_mono_ms() - t0 < WAIT_MS; time_sleep_ms(20))
        if ((q = tcp_rx_queue(port, 0, 0x0A)) == 0)
            break;
    if (q != 0)
        print_error("listen queue of port %d: %ld connection(s) never accepted\n", port, q);
    assert_int_equal(q, 0);
}

/* Wait (bounded) until the service has read every byte the client sent
 * on fd (connected to port): nothing unsent on the client's side, nothing
 * unread on the service's. */
static void await_read(int fd, int port)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    int me = ntohs(a.sin_port);
    long unsent = -1, unread = -1;
    for (uint64_t t0 = time_mono_ms(); time_mono_ms() - t0 < WAIT_MS; time_sleep_ms(20)) {
        int pending = -1;
        unsent = ioctl(fd, SIOCOUTQ, &pending) == 0 ? pending : -1;
        unread = tcp_rx_queue(port, me, 0x01);
        if (unsent == 0 && unread == 0)
            break;
    }
    if (unsent != 0 || unread != 0)
        print_error("port %d: %ld byte(s) unsent, %ld unread by the service\n", me, unsent, unread);
    assert_true(unsent == 0 && unread == 0);
}

/* Wait (bounded) until the service answers again and holds at most
 * `most` connections (the metrics request among them). */
static void await_connections_at_most(tl_stack *st, double most)
{
    char url[128];
    double open = -1;
    snprintf(url, sizeof url, "%s/metrics", st->svc.url);
    for (uint64_t t0 = time_mono_ms(); time_mono_ms() - t0 < WAIT_MS; time_sleep_ms(50)) {
        tl_resp r;
        if (tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r) == 0 && r.status == 200)
            open = tl_metric(r.body, "percolator_http_connections_open");
        tl_resp_free(&r);
        if (open >= 0 && open <= most)
            break;
    }
    assert_true(open >= 0 && open <= most);
}

static void raise_own_limit(void)
{
    struct rlimit r;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &r), 0);
    r.rlim_cur = r.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &r), 0);
}

/* The service started under `prlimit --nofile=N:N`, with extra flags. */
static void start_limited(tl_stack *st, unsigned nofile, const char *const extra[])
{
    assert_int_equal(tl_stack_start(st, extra), 0);
    assert_int_equal(tl_service_stop(st), 0);
    /* tl_service_start runs st->svc.args after the program: run prlimit
     * with the service as its command instead. */
    char lim[32], prog[700];
    snprintf(lim, sizeof lim, "--nofile=%u:%u", nofile, nofile);
    snprintf(prog, sizeof prog, "%s/percolator-service", tl_bin_dir());
    char listen[64], oracle[128];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", st->svc.port);
    snprintf(oracle, sizeof oracle, "%s", st->oracle.url);
    const char *args[32] = {lim, "--", prog, "--listen", listen, "--data-dir", st->svc.data,
                            "--oracle", oracle};
    size_t n = 9;
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 31; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    st->svc.pid = tl_spawn("/usr/bin/prlimit", args, NULL, st->svc.log);
    assert_true(st->svc.pid > 0);
    assert_int_equal(tl_wait_health(st->svc.url, st->svc.pid, TL_START_MS), 0);
}

static void idle_connections_never_starve_the_storage(void **state)
{
    (void)state;
    enum { NOFILE = 400, ATTACK = 700 };
    const char *extra[] = {"--threads", "4", "--header-timeout-ms", "600000", NULL};
    tl_stack st;
    int fds[ATTACK];
    raise_own_limit();
    start_limited(&st, NOFILE, extra);
    json_decref(tl_must(&st, "PUT", "/v1/kv/before", "{\"value\":\"1\"}", 200));

    int opened = 0, refused = 0;
    for (int i = 0; i < ATTACK; i++)
        if ((fds[i] = tl_dial(NULL, st.svc.port)) >= 0)
            opened++;
    /* Every connection taken by the service (kept, or closed at once):
     * then count its descriptors, and the connections it closed. */
    await_accepted(st.svc.port);
    int used = open_fds(st.svc.pid);
    for (uint64_t t0 = time_mono_ms(); refused == 0 && time_mono_ms() - t0 < WAIT_MS;
         time_sleep_ms(20))
        for (int i = 0; i < ATTACK; i++)
            if (fds[i] >= 0 && tl_closed_by_server(fds[i], 0)) {
                close(fds[i]);
                fds[i] = -1;
                refused++;
            }
    print_message("%d idle connections under a file limit of %d: %d closed at once; the "
                  "service holds %d descriptors\n", opened, NOFILE, refused, used);
    /* The service keeps a reserve: it never runs out of descriptors. */
    assert_true(used > 0 && used < NOFILE - 64);
    assert_true(refused > 0);
    for (int i = 0; i < ATTACK; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    /* The service has seen the closes (until then it may still be at its
     * limit and turn a new client away): it works on after the attack. */
    await_connections_at_most(&st, 1);
    json_decref(tl_must(&st, "PUT", "/v1/kv/after", "{\"value\":\"2\"}", 200));
    json_t *j = tl_must(&st, "GET", "/v1/kv/before", NULL, 200);
    json_decref(j);
    assert_true(tl_service_metric(&st, "percolator_http_connections_refused_total") >= refused);
    char *log = tl_read_file(st.svc.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "at the connection limit"));
    assert_null(strstr(log, "Too many open files"));
    free(log);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void one_address_cannot_take_every_connection(void **state)
{
    (void)state;
    enum { PER_IP = 40, ATTACK = 120 };
    const char *extra[] = {"--max-connections-per-ip", "40", "--header-timeout-ms", "600000", NULL};
    tl_stack st;
    int fds[ATTACK], open_after = ATTACK;
    raise_own_limit();
    assert_int_equal(tl_stack_start(&st, extra), 0);
    for (int i = 0; i < ATTACK; i++)
        fds[i] = tl_dial("127.0.0.2", st.svc.port);
    /* Once the service has taken them all, only the per-address limit
     * closes any (the header timeout is 10 minutes away). */
    await_accepted(st.svc.port);
    for (uint64_t t0 = time_mono_ms(); open_after > PER_IP && time_mono_ms() - t0 < WAIT_MS;
         time_sleep_ms(20)) {
        open_after = 0;
        for (int i = 0; i < ATTACK; i++)
            if (fds[i] >= 0 && !tl_closed_by_server(fds[i], 0))
                open_after++;
    }
    print_message("%d connections from 127.0.0.2: %d kept (limit %d a client address)\n", ATTACK,
                  open_after, PER_IP);
    assert_true(open_after <= PER_IP);
    /* Another client (127.0.0.1) is served meanwhile. */
    json_decref(tl_must(&st, "PUT", "/v1/kv/k", "{\"value\":\"1\"}", 200));
    json_decref(tl_must(&st, "GET", "/v1/kv/k", NULL, 200));
    for (int i = 0; i < ATTACK; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* Count the lines of a log that contain what. */
static int log_lines_with(const char *path, const char *what)
{
    char *log = tl_read_file(path, NULL);
    assert_non_null(log);
    int n = 0;
    for (const char *p = log; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    free(log);
    return n;
}

/* Slowloris: connections that trickle their headers a line at a time are
 * closed at the header deadline (MHD's idle timeout never fires on them),
 * with one log line for all of them, while a normal client is answered
 * throughout; a keep-alive connection that idles between requests is not
 * one of them. */
static void slow_headers_are_cut_off(void **state)
{
    (void)state;
    enum { SLOW = 60 };
    const char *extra[] = {"--header-timeout-ms", "1500", "--max-connections-per-ip", "64", NULL};
    tl_stack st;
    int fds[SLOW];
    raise_own_limit();
    assert_int_equal(tl_stack_start(&st, extra), 0);
    json_decref(tl_must(&st, "PUT", "/v1/kv/a", "{\"value\":\"1\"}", 200));

    /* A keep-alive client: one request, then idle past the header deadline. */
    int ka = tl_dial(NULL, st.svc.port);
    assert_true(ka >= 0);
    static const char get[] = "GET /v1/kv/a HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[4096];
    assert_int_equal(send(ka, get, sizeof get - 1, MSG_NOSIGNAL), (ssize_t)sizeof get - 1);
    assert_true(recv(ka, buf, sizeof buf, 0) > 0);

    for (int i = 0; i < SLOW; i++) {
        fds[i] = tl_dial("127.0.0.2", st.svc.port);
        assert_true(fds[i] >= 0);
        static const char line[] = "GET /v1/kv/a HTTP/1.1\r\nHost: x\r\n";
        assert_int_equal(send(fds[i], line, sizeof line - 1, MSG_NOSIGNAL), (ssize_t)sizeof line - 1);
    }
    int open = SLOW, answered = 0;
    uint64_t t0 = time_mono_ms();
    /* A header line every 300 ms on each, until the service closed them
     * all (at most WAIT_MS: nothing but the header deadline of 1.5 s
     * closes a connection that keeps sending within that time). */
    while (open > 0 && time_mono_ms() - t0 < WAIT_MS) {
        open = 0;
        for (int i = 0; i < SLOW; i++) {
            if (fds[i] < 0)
                continue;
            if (tl_closed_by_server(fds[i], 0)) {
                close(fds[i]);
                fds[i] = -1;
                continue;
            }
            send(fds[i], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
            open++;
        }
        json_decref(tl_must(&st, "GET", "/v1/kv/a", NULL, 200)); /* the normal client */
        answered++;
        time_sleep_ms(300);
    }
    print_message("%d trickling connections: %d still open after %llu ms (deadline 1500 ms); "
                  "the normal client got %d answers meanwhile\n", SLOW, open,
                  (unsigned long long)(time_mono_ms() - t0), answered);
    assert_int_equal(open, 0);
    assert_true(tl_service_metric(&st, "percolator_http_header_timeouts_total") >= SLOW);
    assert_int_equal(log_lines_with(st.svc.log, "too slow to send a request"), 1);
    assert_true(log_lines_with(st.svc.log, "microhttpd:") <= 11);

    /* The keep-alive connection idled ~2 s past the header deadline: still served. */
    assert_int_equal(send(ka, get, sizeof get - 1, MSG_NOSIGNAL), (ssize_t)sizeof get - 1);
    ssize_t n = recv(ka, buf, sizeof buf - 1, 0);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_int_equal(tl_raw_status(buf), 200);
    close(ka);
    for (int i = 0; i < SLOW; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* /v1/health needs no token, so it must cost nothing: it made one oracle
 * request each before (the review: anyone could make the service ask the
 * oracle at will). */
static void health_costs_no_oracle_request(void **state)
{
    (void)state;
    tl_stack st;
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    json_decref(tl_must(&st, "PUT", "/v1/kv/k", "{\"value\":\"1\"}", 200));
    const char *ok = "percolator_oracle_client_requests_total{result=\"ok\"}";
    double before = tl_service_metric(&st, ok);
    assert_true(before >= 1);
    for (int i = 0; i < 20; i++) {
        json_t *j = tl_must(&st, "GET", "/v1/health", NULL, 200);
        assert_string_equal(json_string_value(json_object_get(j, "oracle")), "ok");
        json_decref(j);
    }
    assert_true(tl_service_metric(&st, ok) == before);
    assert_int_equal(tl_stack_stop(&st), 0);
}

/* Send the headers of a PUT of a value of vlen bytes, and the first part
 * bytes of its body. */
static int start_put(int port, const char *token, size_t vlen, size_t part)
{
    int fd = tl_dial(NULL, port);
    assert_true(fd >= 0);
    size_t blen = vlen + strlen("{\"value\":\"\"}");
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr,
                     "PUT /v1/kv/big HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "%s%s%sContent-Length: %zu\r\n\r\n",
                     token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "",
                     blen);
    assert_int_equal(send(fd, hdr, (size_t)n, MSG_NOSIGNAL), n);
    char *body = malloc(blen);
    assert_non_null(body);
    memset(body, 'v', blen);
    memcpy(body, "{\"value\":\"", 10);
    memcpy(body + blen - 2, "\"}", 2);
    size_t sent = 0;
    while (sent < part) {
        ssize_t k = send(fd, body + sent, part - sent, MSG_NOSIGNAL);
        assert_true(k > 0);
        sent += (size_t)k;
    }
    free(body);
    return fd;
}

/* Send the rest of the body (bytes part..blen) and read the status. */
static int finish_put(int fd, size_t vlen, size_t part)
{
    size_t blen = vlen + strlen("{\"value\":\"\"}");
    char *body = malloc(blen);
    assert_non_null(body);
    memset(body, 'v', blen);
    memcpy(body + blen - 2, "\"}", 2);
    size_t sent = part;
    while (sent < blen) {
        ssize_t k = send(fd, body + sent, blen - sent, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        sent += (size_t)k;
    }
    free(body);
    char resp[4096];
    ssize_t got = 0, k;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (got < (ssize_t)sizeof(resp) - 1 && poll(&p, 1, WAIT_MS) > 0 &&
           (k = recv(fd, resp + got, sizeof(resp) - 1 - (size_t)got, 0)) > 0) {
        got += k;
        if (strstr(resp, "\r\n\r\n") != NULL)
            break;
    }
    resp[got] = '\0';
    close(fd);
    int status = 0;
    sscanf(resp, "HTTP/1.1 %d", &status);
    return status;
}

static void bodies_in_memory_are_bounded(void **state)
{
    (void)state;
    const char *extra[] = {"--max-body-memory", "2MiB", NULL};
    tl_stack st;
    enum { VLEN = 900 << 10, ALMOST = (900 << 10) - 64, PART = 400 << 10 };
    assert_int_equal(tl_stack_start(&st, extra), 0);
    /* Two bodies all but sent (1.8 MiB held), a third one starts. */
    int a = start_put(st.svc.port, NULL, VLEN, ALMOST);
    int b = start_put(st.svc.port, NULL, VLEN, ALMOST);
    /* The service holds them: it has read every byte sent on both. */
    await_read(a, st.svc.port);
    await_read(b, st.svc.port);
    int c = start_put(st.svc.port, NULL, VLEN, PART);
    int sc = finish_put(c, VLEN, PART);
    int sa = finish_put(a, VLEN, ALMOST), sb = finish_put(b, VLEN, ALMOST);
    print_message("three 900 KiB bodies at once against a 2 MiB budget: %d %d %d\n", sa, sb,
                  sc);
    assert_int_equal(sc, 503);
    assert_int_equal(sa, 200);
    assert_int_equal(sb, 200);
    assert_true(tl_service_metric(&st, "percolator_http_body_refused_total") >= 1);
    /* The budget came back. */
    json_decref(tl_must(&st, "PUT", "/v1/kv/small", "{\"value\":\"1\"}", 200));
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void no_token_no_body_read(void **state)
{
    (void)state;
    tl_stack st;
    char tokfile[100];
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    assert_int_equal(tl_service_stop(&st), 0);
    assert_true((size_t)snprintf(tokfile, sizeof tokfile, "%s/token", st.dir) < sizeof tokfile);
    assert_int_equal(tl_write_file(tokfile, "s3cret-token-0123456789\n", 24), 0);
    snprintf(st.svc.args[st.svc.nargs++], sizeof st.svc.args[0], "--auth-token-file");
    snprintf(st.svc.args[st.svc.nargs++], sizeof st.svc.args[0], "%s", tokfile);
    assert_int_equal(tl_service_start(&st), 0);
    /* 60 MiB announced, not a byte sent: the 401 comes at once. */
    int fd = tl_dial(NULL, st.svc.port);
    assert_true(fd >= 0);
    const char *hdr = "PUT /v1/kv/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: 62914560\r\n\r\n";
    assert_int_equal(send(fd, hdr, strlen(hdr), MSG_NOSIGNAL), (ssize_t)strlen(hdr));
    char resp[1024];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint64_t t0 = time_mono_ms();
    /* The answer comes without a byte of the body (none was sent); the
     * bound is only how long a broken service takes to fail. */
    assert_true(poll(&p, 1, WAIT_MS) > 0);
    ssize_t n = recv(fd, resp, sizeof resp - 1, 0);
    assert_true(n > 0);
    resp[n] = '\0';
    print_message("no token, 60 MiB announced: %.12s after %llu ms\n", resp,
                  (unsigned long long)(time_mono_ms() - t0));
    assert_non_null(strstr(resp, "HTTP/1.1 401"));
    assert_non_null(strstr(resp, "WWW-Authenticate: Bearer"));
    close(fd);
    assert_int_equal(tl_stack_stop(&st), 0);
}

static void the_oracle_takes_no_body(void **state)
{
    (void)state;
    tl_stack st;
    char url[160], body[2048];
    assert_int_equal(tl_stack_start(&st, NULL), 0);
    memset(body, ' ', sizeof body);
    body[0] = '{';
    body[sizeof body - 1] = '}';
    snprintf(url, sizeof url, "%s/v1/timestamps?count=1", st.oracle.url);
    tl_resp r;
    assert_int_equal(tl_http("POST", url, body, sizeof body, "application/json", TL_REQUEST_MS, &r),
                     0);
    assert_int_equal(r.status, 413);
    tl_resp_free(&r);
    assert_int_equal(tl_http("POST", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 200);
    tl_resp_free(&r);
    assert_int_equal(tl_stack_stop(&st), 0);
}

int main(void)
{
    if (getenv("CMOCKA_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("CMOCKA_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        TL_TEST(idle_connections_never_starve_the_storage),
        TL_TEST(one_address_cannot_take_every_connection),
        TL_TEST(slow_headers_are_cut_off),
        TL_TEST(health_costs_no_oracle_request),
        TL_TEST(bodies_in_memory_are_bounded),
        TL_TEST(no_token_no_body_read),
        TL_TEST(the_oracle_takes_no_body),
    };
    return cmocka_run_group_tests_name("service: limits against hostile clients", tests, NULL,
                                       NULL);
}
