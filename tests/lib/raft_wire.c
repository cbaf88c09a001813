/*
 * raft_wire.c — see raft_wire.h.
 */
#include "raft_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "timeutil.h"

/* ---- buffer ---- */

void rw_buf_free(rw_buf *b)
{
    free(b->data);
    *b = (rw_buf){0};
}

/* Room for n more bytes; false (and b->failed) when malloc says no. */
static bool reserve(rw_buf *b, size_t n)
{
    if (b->failed)
        return false;
    if (b->len + n <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (p == NULL) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void rw_put_bytes(rw_buf *b, const void *p, size_t n)
{
    if (n == 0 || !reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void rw_put_zeros(rw_buf *b, size_t n)
{
    if (n == 0 || !reserve(b, n))
        return;
    memset(b->data + b->len, 0, n);
    b->len += n;
}

/* v in n bytes, little endian. */
static void put_le(rw_buf *b, uint64_t v, int n)
{
    uint8_t x[8];
    for (int i = 0; i < n; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    rw_put_bytes(b, x, (size_t)n);
}

void rw_put64(rw_buf *b, uint64_t v)
{
    put_le(b, v, 8);
}

static size_t pad8(size_t n)
{
    return (n + 7) / 8 * 8;
}

/* ---- encoders ---- */

void rw_enc_handshake(rw_buf *b, uint64_t id, const char *address)
{
    size_t alen = strlen(address) + 1, padded = pad8(alen);
    rw_put64(b, 1); /* UV__TCP_HANDSHAKE_PROTOCOL */
    rw_put64(b, id);
    rw_put64(b, padded);
    rw_put_bytes(b, address, alen);
    rw_put_zeros(b, padded - alen);
}

void rw_enc_net_hello(rw_buf *b, unsigned lane, uint64_t realm, const char *claim)
{
    size_t alen = strlen(claim);
    uint8_t h[8] = {'p', 'c', 'R', 'N', 2, (uint8_t)lane, (uint8_t)alen, (uint8_t)(alen >> 8)};
    rw_put_bytes(b, h, sizeof h);
    rw_put64(b, realm);
    rw_put_bytes(b, claim, alen);
}

/* The preamble: message type and header length. */
static void preamble(rw_buf *b, uint64_t type, uint64_t header_len)
{
    rw_put64(b, type);
    rw_put64(b, header_len);
}

void rw_enc_append_entries(rw_buf *b, const rw_append_entries *m)
{
    size_t n = m->claimed_entries ? 0 : m->n_entries;
    preamble(b, RW_APPEND_ENTRIES, 48 + 16 * (uint64_t)n);
    rw_put64(b, m->term);
    rw_put64(b, m->prev_index);
    rw_put64(b, m->prev_term);
    rw_put64(b, m->commit);
    rw_put64(b, m->claimed_entries ? m->claimed_entries : n);
    for (size_t i = 0; i < n; i++) {
        rw_put64(b, m->entries[i].term);
        put_le(b, m->entries[i].type, 1);
        rw_put_zeros(b, 3);
        put_le(b, m->entries[i].len, 4);
    }
    rw_put_zeros(b, 8); /* the "leader id" word libraft counts, never writes */
    for (size_t i = 0; i < n; i++)
        rw_put_bytes(b, m->entries[i].data, m->entries[i].len);
}

void rw_enc_request_vote(rw_buf *b, uint64_t term, uint64_t candidate, uint64_t last_index,
                         uint64_t last_term, uint64_t flags)
{
    preamble(b, RW_REQUEST_VOTE, 40);
    rw_put64(b, term);
    rw_put64(b, candidate);
    rw_put64(b, last_index);
    rw_put64(b, last_term);
    rw_put64(b, flags);
}

void rw_enc_timeout_now(rw_buf *b, uint64_t term, uint64_t last_index, uint64_t last_term)
{
    preamble(b, RW_TIMEOUT_NOW, 24);
    rw_put64(b, term);
    rw_put64(b, last_index);
    rw_put64(b, last_term);
}

/* The configuration as configurationEncodeToBuf writes it (unpadded). */
static size_t conf_len(const rw_install_snapshot *m)
{
    size_t n = 1 + 8;
    for (size_t i = 0; i < m->n_servers; i++)
        n += 8 + strlen(m->servers[i].address) + 1 + 1;
    return n;
}

void rw_enc_install_snapshot(rw_buf *b, const rw_install_snapshot *m)
{
    size_t c = conf_len(m), cpad = pad8(c);
    preamble(b, RW_INSTALL_SNAPSHOT, 56 + cpad);
    rw_put64(b, m->term);
    rw_put64(b, m->last_index);
    rw_put64(b, m->last_term);
    rw_put64(b, m->conf_index);
    rw_put64(b, cpad);
    put_le(b, 1, 1); /* configuration encoding format */
    rw_put64(b, m->n_servers);
    for (size_t i = 0; i < m->n_servers; i++) {
        rw_put64(b, m->servers[i].id);
        rw_put_bytes(b, m->servers[i].address, strlen(m->servers[i].address) + 1);
        put_le(b, m->servers[i].role, 1);
    }
    rw_put_zeros(b, cpad - c);
    rw_put64(b, m->len);
    rw_put_zeros(b, 8); /* the "leader id" word libraft counts, never writes */
    rw_put_bytes(b, m->data, (size_t)m->len);
}

/* ---- connections ---- */

static int fail(rw_conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return -1;
}

/* ms left until deadline (at least 1 while time remains, 0 after). */
static int left_ms(uint64_t deadline)
{
    uint64_t now = time_mono_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* The socket's send and receive timeouts, for blocking calls. */
static void sock_timeouts(int fd, int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* A TCP connection to host:port within ms (left blocking): fd or -1. */
static int tcp_connect(rw_conn *c, const char *host, int port, int ms)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return fail(c, "not an IPv4 address: %s", host);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return fail(c, "socket: %s", strerror(errno));
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a), err = 0;
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        socklen_t len = sizeof err;
        if (poll(&p, 1, ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0)
            rc = err == 0 ? 0 : -1;
        else
            err = ETIMEDOUT;
    } else if (rc != 0) {
        err = errno;
    }
    if (rc != 0) {
        close(fd);
        return fail(c, "connect %s:%d: %s", host, port, strerror(err));
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* Credentials for tls: 0 or -1. */
static int tls_creds(rw_conn *c, const rw_tls *tls)
{
    gnutls_certificate_credentials_t cred;
    int rv;
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return fail(c, "gnutls: no credentials");
    c->cred = cred;
    if (tls->ca_file && (rv = gnutls_certificate_set_x509_trust_file(
                             cred, tls->ca_file, GNUTLS_X509_FMT_PEM)) <= 0)
        return fail(c, "CA file %s: %s", tls->ca_file, rv ? gnutls_strerror(rv) : "empty");
    if (tls->cert_file &&
        (rv = gnutls_certificate_set_x509_key_file(cred, tls->cert_file, tls->key_file,
                                                   GNUTLS_X509_FMT_PEM)) < 0)
        return fail(c, "certificate %s: %s", tls->cert_file, gnutls_strerror(rv));
    return 0;
}

/* Wait up to ms for the server to refuse what our side of the handshake
 * finished: 0 when it did not (nothing but time passed), -1 when it did. */
static int tls_confirm(rw_conn *c, int ms)
{
    gnutls_session_t s = c->session;
    uint64_t deadline = time_mono_ms() + (uint64_t)ms;
    char junk[512];
    while (left_ms(deadline) > 0) {
        gnutls_record_set_timeout(s, (unsigned)left_ms(deadline));
        ssize_t n = gnutls_record_recv(s, junk, sizeof junk);
        if (n == 0)
            return fail(c, "TLS: the member closed the connection after the handshake");
        if (n == GNUTLS_E_TIMEDOUT)
            return 0;
        if (n < 0 && gnutls_error_is_fatal((int)n))
            return fail(c, "TLS: refused after the handshake: %s", gnutls_strerror((int)n));
    }
    return 0;
}

/* Client handshake on c->fd within deadline: 0 or -1. */
static int tls_start(rw_conn *c, const char *host, const rw_tls *tls, uint64_t deadline)
{
    gnutls_session_t s;
    int rv;
    if (tls_creds(c, tls) != 0)
        return -1;
    if (gnutls_init(&s, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL) < 0)
        return fail(c, "gnutls_init failed");
    c->session = s;
    gnutls_set_default_priority(s);
    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, c->cred);
    if (tls->ca_file)
        gnutls_session_set_verify_cert(s, host, 0); /* IP literal: matched to IP SANs */
    gnutls_transport_set_int(s, c->fd);
    gnutls_handshake_set_timeout(s, (unsigned)(left_ms(deadline) + 1));
    do {
        rv = gnutls_handshake(s);
    } while (rv < 0 && !gnutls_error_is_fatal(rv) && left_ms(deadline) > 0);
    if (rv < 0)
        return fail(c, "TLS handshake: %s", gnutls_strerror(rv));
    return tls->confirm_ms > 0 ? tls_confirm(c, tls->confirm_ms) : 0;
}

int rw_connect(rw_conn *c, const char *host, int port, const rw_tls *tls, int timeout_ms)
{
    uint64_t deadline = time_mono_ms() + (uint64_t)timeout_ms;
    *c = (rw_conn){.fd = -1, .port = port};
    snprintf(c->host, sizeof c->host, "%s", host);
    if (tls != NULL) {
        c->tls = *tls;
        c->has_tls = true;
    }
    if ((c->fd = tcp_connect(c, host, port, timeout_ms)) < 0)
        return -1;
    sock_timeouts(c->fd, timeout_ms);
    if (tls != NULL && tls_start(c, host, tls, deadline) != 0) {
        char why[sizeof c->err];
        memcpy(why, c->err, sizeof why);
        rw_close(c);
        memcpy(c->err, why, sizeof why);
        return -1;
    }
    return 0;
}

/* One send of at most n bytes; the count, or -1 (errno-like in c->err). */
static ssize_t send_some(rw_conn *c, const uint8_t *p, size_t n, bool *again)
{
    *again = false;
    if (c->session != NULL) {
        ssize_t k = gnutls_record_send(c->session, p, n);
        if (k >= 0)
            return k;
        *again = !gnutls_error_is_fatal((int)k);
        return *again ? -1 : fail(c, "TLS send: %s", gnutls_strerror((int)k));
    }
    ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);
    if (k >= 0)
        return k;
    *again = errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    return *again ? -1 : fail(c, "send: %s", strerror(errno));
}

int rw_send_raw(rw_conn *c, const void *p, size_t n, int timeout_ms)
{
    uint64_t deadline = time_mono_ms() + (uint64_t)timeout_ms;
    const uint8_t *q = p;
    if (c->fd < 0)
        return fail(c, "not connected");
    while (n > 0) {
        int ms = left_ms(deadline);
        if (ms == 0)
            return fail(c, "send: timed out");
        sock_timeouts(c->fd, ms);
        bool again;
        ssize_t k = send_some(c, q, n, &again);
        if (k < 0 && !again)
            return -1;
        if (k > 0) {
            q += k;
            n -= (size_t)k;
        }
    }
    return 0;
}

int rw_send_buf(rw_conn *c, rw_buf *b, int timeout_ms)
{
    int rc = b->failed ? fail(c, "out of memory encoding")
                       : rw_send_raw(c, b->data, b->len, timeout_ms);
    b->len = 0;
    b->failed = false;
    return rc;
}

/* Exactly n bytes from the member within timeout_ms. 0 or -1. */
static int recv_exact(rw_conn *c, uint8_t *p, size_t n, int timeout_ms)
{
    uint64_t deadline = time_mono_ms() + (uint64_t)timeout_ms;
    while (n > 0) {
        int ms = left_ms(deadline);
        if (ms == 0)
            return fail(c, "recv: timed out");
        sock_timeouts(c->fd, ms);
        ssize_t k = c->session != NULL ? gnutls_record_recv(c->session, p, n)
                                       : recv(c->fd, p, n, 0);
        if (k <= 0) {
            if (c->session != NULL ? k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED
                                   : k < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            return fail(c, "recv: closed");
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Send one hello and read the answer's. */
static int hello_swap(rw_conn *c, uint8_t kind, uint64_t cluster, uint64_t id,
                      uint8_t answer[32], int timeout_ms)
{
    rw_buf b = {0};
    rw_put_bytes(&b, "pcRH", 4);
    uint8_t head[4] = {1, kind, 0, 0};
    rw_put_bytes(&b, head, 4);
    rw_put64(&b, cluster);
    rw_put64(&b, id);
    rw_put64(&b, 0);
    int rc = rw_send_buf(c, &b, timeout_ms);
    rw_buf_free(&b);
    return rc != 0 ? -1 : recv_exact(c, answer, 32, timeout_ms);
}

int rw_hello(rw_conn *c, uint64_t id, int timeout_ms)
{
    rw_conn probe;
    uint8_t a[32];
    rw_tls tls = c->tls;
    tls.confirm_ms = 0;
    if (rw_connect(&probe, c->host, c->port, c->has_tls ? &tls : NULL, timeout_ms) != 0)
        return fail(c, "probe: %s", probe.err);
    int rc = hello_swap(&probe, 0, 0, id, a, timeout_ms);
    rw_close(&probe);
    if (rc != 0 || memcmp(a, "pcRH", 4) != 0)
        return fail(c, "probe: no hello back");
    uint64_t cluster = 0;
    for (int i = 7; i >= 0; i--)
        cluster = cluster << 8 | a[8 + i];
    if (hello_swap(c, 1, cluster, id, a, timeout_ms) != 0 || memcmp(a, "pcRH", 4) != 0)
        return -1;
    return 0;
}

int rw_send_handshake(rw_conn *c, uint64_t id, const char *address, int timeout_ms)
{
    if (rw_hello(c, id, timeout_ms) != 0)
        return -1;
    rw_buf b = {0};
    rw_enc_handshake(&b, id, address);
    int rc = rw_send_buf(c, &b, timeout_ms);
    rw_buf_free(&b);
    return rc;
}

/* Plain TCP: EOF or an error within the deadline (data is dropped). */
static bool plain_closed(rw_conn *c, uint64_t deadline)
{
    char junk[512];
    int ms;
    while ((ms = left_ms(deadline)) > 0) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0)
            continue; /* time is up (or EINTR): the loop decides */
        ssize_t n = recv(c->fd, junk, sizeof junk, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return true;
    }
    return false;
}

/* TLS: close_notify, an alert, EOF or an error within the deadline. */
static bool tls_closed(rw_conn *c, uint64_t deadline)
{
    char junk[512];
    int ms;
    while ((ms = left_ms(deadline)) > 0) {
        gnutls_record_set_timeout(c->session, (unsigned)ms);
        ssize_t n = gnutls_record_recv(c->session, junk, sizeof junk);
        if (n == GNUTLS_E_TIMEDOUT) /* "fatal" to GnuTLS, but only time passed */
            return false;
        if (n == 0 || (n < 0 && gnutls_error_is_fatal((int)n)))
            return true;
    }
    return false;
}

bool rw_closed_by_peer(rw_conn *c, int ms)
{
    uint64_t deadline = time_mono_ms() + (uint64_t)ms;
    if (c->fd < 0)
        return true;
    return c->session != NULL ? tls_closed(c, deadline) : plain_closed(c, deadline);
}

void rw_close(rw_conn *c)
{
    if (c->session != NULL)
        gnutls_deinit(c->session);
    if (c->cred != NULL)
        gnutls_certificate_free_credentials(c->cred);
    if (c->fd >= 0)
        close(c->fd);
    *c = (rw_conn){.fd = -1};
}
