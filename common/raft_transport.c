/*
 * raft_transport.c — see raft_transport.h.
 *
 * Threads: libraft calls init, listen, connect and close on the loop
 * thread, and gets its streams and connect results there too (the async
 * handle below). A listener thread accepts; each connection runs on a
 * thread of its own with blocking sockets, so that TLS, the handshake and
 * the frame check read like the protocol they implement. Every
 * connection is in r->conns under r->mu; the loop joins and frees the
 * ones whose thread has ended.
 */
#include "raft_transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <uv.h>

#include "listen_socket.h"
#include "log.h"
#include "raft_conf_check.h"
#include "raft_identity.h"
#include "timeutil.h"

#define HANDSHAKE_PROTOCOL 1 /* libraft 0.15's UV__TCP_HANDSHAKE_PROTOCOL */
#define IO_CHUNK 65536

/* Our hello, both ways, before libraft's handshake (raft_transport.h):
 * "pcRH", version, kind, flags, 0, the group's id, the sender's raft id,
 * its log's last index; little-endian as libraft's. */
#define HELLO_LEN 32
#define HELLO_VERSION 1
enum { HELLO_PROBE = 0, HELLO_RAFT = 1 };
#define HELLO_HAS_STATE 1
typedef struct {
    uint8_t kind;
    bool has_state;
    uint64_t cluster, raft_id, last_index;
} hello;
/* A probe must be answered within this (ms). */
#define PROBE_MS 1000

typedef enum { REFUSED_TLS, REFUSED_IDENTITY, REFUSED_HANDSHAKE, REFUSED_FRAME, REFUSED_BUSY,
               REFUSED_N } refusal;
static const char *const refusal_name[REFUSED_N] = {"tls", "identity", "handshake", "frame",
                                                     "busy"};

typedef struct rt rt;

typedef struct conn {
    rt *r;
    bool out;                  /* we connected (libraft sends on it) */
    int fd;                    /* the TCP socket; -1 once closed (under r->mu) */
    int mine, theirs;          /* the socket pair: our end, libraft's end; -1: none */
    gnutls_session_t tls;      /* NULL: plain TCP */
    pthread_t thread;
    char from[INET_ADDRSTRLEN];/* accepted: the peer's address */
    /* under r->mu */
    bool in_handshake;         /* counted against the handshake limits */
    bool exited;               /* the thread is done with everything but r->mu */
    bool deliver;              /* the loop has a stream or a result to give libraft */
    bool delivered;
    bool joined;               /* its thread was joined (closing) */
    int status;                /* connecting: 0, or RAFT_NOCONNECTION */
    /* accepted: who the handshake says it is; connecting: whom we dial */
    raft_id id;
    char address[RAFT_FRAME_ADDRESS_MAX + 1];
    struct raft_uv_connect *req;
    raft_uv_connect_cb cb;
} conn;

struct rt {
    struct raft_uv_transport *t;
    uv_loop_t *loop;
    raft_id id;
    char address[RAFT_FRAME_ADDRESS_MAX + 1];
    raft_peer peers[RAFT_PEERS_MAX];
    size_t npeers;
    tls_server *tls;
    raft_frame_limits lim;
    size_t inbuf;               /* an accepted connection's read buffer */
    raft_uv_accept_cb accept_cb;
    atomic_bool accepting;      /* libraft listens: raft connections may be accepted */
    atomic_bool async_open_flag;/* threads may signal the loop */
    /* What our hello says (raft_transport_set_self, _set_last_index). */
    atomic_uint_fast64_t my_cluster, my_raft_id, my_last_index;
    atomic_bool my_state;
    bool loopback_only;         /* plain TCP because every member is on loopback: a member
                                   added since must be there too */
    /* The raft id each member's hello last gave, and when (under mu):
     * --raft-peers members and members added since, the oldest note
     * making room for a new one. */
    struct {
        unsigned member;
        raft_seen note;
    } seen[RAFT_TRANSPORT_SEEN_MAX];
    atomic_uint_fast64_t last_other_log_ms;
    uv_async_t async;           /* threads -> loop: something to deliver or reap */
    bool async_open;
    int lfd;                    /* listening socket, -1 */
    int wake[2];                /* tells the listener to stop */
    pthread_t listener;
    bool listening;
    atomic_bool closing;
    raft_uv_transport_close_cb close_cb;
    pthread_mutex_t mu;
    conn *conns[RAFT_TRANSPORT_MAX_CONNS];
    atomic_uint_fast64_t last_log_ms;
    metrics_series *m_refused[REFUSED_N], *m_open_in, *m_open_out;
};

/* ---- small helpers ---- */

static void set_timeouts(int fd, unsigned ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* A peer that went away without a word (power cut, cable) is noticed by
 * TCP keepalive within about a minute; Nagle off, as etcd's and TiKV's
 * raft connections: a small AppendEntries must not wait for a delayed ACK
 * (measured before: a put's p99 at 45-50 ms with Nagle on). */
static void tune_tcp(int fd)
{
    int on = 1, idle = 30, intvl = 10, cnt = 3;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

/* All len bytes through TLS when tls is given, else on fd. 0 or -1. */
static int send_all(gnutls_session_t tls, int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = tls != NULL ? gnutls_record_send(tls, p, len) : send(fd, p, len, MSG_NOSIGNAL);
        if (tls != NULL ? n == GNUTLS_E_INTERRUPTED : n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_all_fd(int fd, const uint8_t *p, size_t len)
{
    return send_all(NULL, fd, p, len);
}

/* From the peer: >0 bytes, 0 at its end, -1 on an error or a timeout. */
static ssize_t conn_recv(conn *c, uint8_t *buf, size_t len)
{
    ssize_t n;
    if (c->tls != NULL) {
        do
            n = gnutls_record_recv(c->tls, buf, len);
        while (n == GNUTLS_E_INTERRUPTED);
        /* A peer that closed its socket without TLS's close_notify (it
         * exited, or dialled and found another incarnation here) has
         * closed the connection: the end, as on plain TCP, not an error.
         * Our frames carry their own lengths, so nothing can be cut off
         * unnoticed. */
        if (n == GNUTLS_E_PREMATURE_TERMINATION)
            return 0;
        return n < 0 ? -1 : n;
    }
    do
        n = recv(c->fd, buf, len, 0);
    while (n < 0 && errno == EINTR);
    return n;
}

static int conn_send(conn *c, const uint8_t *p, size_t len)
{
    return send_all(c->tls, c->fd, p, len);
}

/* Count a refusal; log it at most once a second (an attacker must not
 * fill the log). */
static void refuse(conn *c, refusal why, const char *detail)
{
    rt *r = c->r;
    metrics_inc(r->m_refused[why], 1);
    uint64_t now = time_mono_ms(), last = atomic_load(&r->last_log_ms);
    if (now - last >= 1000 && atomic_compare_exchange_strong(&r->last_log_ms, &last, now))
        log_warn("raft peer %s %s: refused (%s): %s", c->out ? "at" : "from",
                 c->out ? c->address : c->from, refusal_name[why], detail);
}

/* ---- TLS and identity ---- */

/* Whether the verified certificate the peer presented names member id
 * at host: the identity rule of raft_transport.h. */
typedef struct {
    raft_id id;
    const char *host;
} member_at;

static bool names_member(void *crt, const void *arg)
{
    const member_at *m = arg;
    return raft_transport_cert_names(crt, m->id, m->host);
}

static bool cert_names_member(gnutls_session_t s, raft_id id, const char *host)
{
    return tls_peer_cert_check(s, names_member, &(member_at){id, host});
}

bool raft_transport_cert_names(void *x509_crt, uint64_t id, const char *host)
{
    gnutls_x509_crt_t crt = x509_crt;
    struct in_addr ip;
    char name[48];
    snprintf(name, sizeof name, "raft-member-%u", raft_member_of(id));
    if (inet_pton(AF_INET, host, &ip) == 1 &&
        gnutls_x509_crt_check_ip(crt, (const unsigned char *)&ip, sizeof ip, 0) != 0)
        return true;
    return gnutls_x509_crt_check_hostname2(crt, name, GNUTLS_VERIFY_DO_NOT_ALLOW_WILDCARDS) != 0;
}

/* Mutual TLS on c->fd: the peer's certificate must chain to the trusted
 * CA (checked during the handshake: gnutls_session_set_verify_cert). 0,
 * or -1 with the reason in why. */
static int tls_start(conn *c, const char **why)
{
    rt *r = c->r;
    unsigned flags = (c->out ? GNUTLS_CLIENT : GNUTLS_SERVER) | GNUTLS_NO_TICKETS;
    *why = "cannot set up a TLS session";
    if (gnutls_init(&c->tls, flags) < 0) {
        c->tls = NULL;
        return -1;
    }
    if (gnutls_priority_set_direct(c->tls, TLS_PRIORITIES, NULL) < 0)
        return -1;
    if (c->out) {
        if (gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE,
                                   tls_server_credentials(r->tls)) < 0)
            return -1;
        gnutls_session_set_verify_cert(c->tls, NULL, 0);
    } else if (tls_server_attach(r->tls, c->tls) != 0) {
        return -1;
    }
    gnutls_transport_set_int(c->tls, c->fd);
    gnutls_handshake_set_timeout(c->tls, RAFT_TRANSPORT_HANDSHAKE_MS);
    int rc;
    do
        rc = gnutls_handshake(c->tls);
    while (rc == GNUTLS_E_INTERRUPTED);
    if (rc < 0) {
        *why = gnutls_strerror(rc);
        return -1;
    }
    /* The second lock (as on HTTP): a certificate was presented and the
     * verification set up above ran and passed. */
    if (!tls_client_verified(c->tls)) {
        *why = "no verified certificate";
        return -1;
    }
    return 0;
}

/* ---- handing streams to libraft, on the loop thread ---- */

static void free_handle(uv_handle_t *h)
{
    raft_free(h);
}

/* libraft's end of the pair as a libuv stream (libraft uv_close()s and
 * raft_free()s it); NULL on failure, fd closed. */
static struct uv_stream_s *stream_of(rt *r, int fd)
{
    uv_pipe_t *p = raft_malloc(sizeof *p);
    if (p == NULL) {
        close(fd);
        return NULL;
    }
    if (uv_pipe_init(r->loop, p, 0) != 0) {
        raft_free(p);
        close(fd);
        return NULL;
    }
    if (uv_pipe_open(p, fd) != 0) {
        close(fd);
        uv_close((uv_handle_t *)p, free_handle);
        return NULL;
    }
    return (struct uv_stream_s *)p;
}

/* Give libraft what c's thread prepared. */
static void deliver(rt *r, conn *c)
{
    int fd = c->theirs;
    c->theirs = -1;
    if (c->out && c->status != 0) {
        c->cb(c->req, NULL, c->status);
        return;
    }
    struct uv_stream_s *s = stream_of(r, fd);
    if (s == NULL) {
        pthread_mutex_lock(&r->mu);
        if (c->mine >= 0)
            shutdown(c->mine, SHUT_RDWR); /* its thread ends */
        pthread_mutex_unlock(&r->mu);
        if (c->out)
            c->cb(c->req, NULL, RAFT_NOCONNECTION);
        return;
    }
    if (c->out)
        c->cb(c->req, s, 0);
    else
        r->accept_cb(r->t, c->id, c->address, s);
}

static void conn_free(conn *c)
{
    if (c->theirs >= 0)
        close(c->theirs);
    free(c);
}

/* Threads said something: deliver what is ready, reap what has ended.
 * libraft's callbacks run with r->mu released (they may call connect). */
static void on_async(uv_async_t *a)
{
    rt *r = a->data;
    conn *todo[RAFT_TRANSPORT_MAX_CONNS], *ended[RAFT_TRANSPORT_MAX_CONNS];
    size_t ntodo = 0, nended = 0;
    if (atomic_load(&r->closing))
        return; /* close() takes over */
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < RAFT_TRANSPORT_MAX_CONNS; i++) {
        conn *c = r->conns[i];
        if (c == NULL)
            continue;
        if (c->deliver && !c->delivered) {
            c->delivered = true;
            todo[ntodo++] = c;
        } else if (c->exited && (!c->deliver || c->delivered)) {
            r->conns[i] = NULL;
            ended[nended++] = c;
        }
    }
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < ntodo; i++)
        deliver(r, todo[i]);
    for (size_t i = 0; i < nended; i++) {
        pthread_join(ended[i]->thread, NULL);
        conn_free(ended[i]);
    }
    if (ntodo > 0)
        uv_async_send(&r->async); /* reap those once their thread ends */
}

/* ---- a connection's thread ---- */

/* Under r->mu: the thread is done; the loop reaps it. */
static void conn_exit(conn *c)
{
    rt *r = c->r;
    if (c->tls != NULL) {
        gnutls_deinit(c->tls);
        c->tls = NULL;
    }
    pthread_mutex_lock(&r->mu);
    if (c->fd >= 0)
        close(c->fd);
    if (c->mine >= 0)
        close(c->mine);
    c->fd = c->mine = -1;
    c->in_handshake = false;
    c->exited = true;
    pthread_mutex_unlock(&r->mu);
    if (atomic_load(&r->async_open_flag))
        uv_async_send(&r->async);
}

/* The pair, and the stream for libraft queued for the loop. */
static int hand_over(conn *c)
{
    rt *r = c->r;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    set_timeouts(c->fd, RAFT_TRANSPORT_STALL_MS);
    pthread_mutex_lock(&r->mu);
    c->mine = sv[0];
    c->theirs = sv[1];
    c->in_handshake = false;
    c->deliver = true;
    pthread_mutex_unlock(&r->mu);
    metrics_add(c->out ? r->m_open_out : r->m_open_in, 1);
    uv_async_send(&r->async);
    return 0;
}

/* What is left of the message being passed on. A RAFT_CHANGE entry's data
 * is a configuration libraft decodes as it appends the entry
 * (membershipUncommittedChange), with the same trust as a snapshot's: so
 * such an entry is held back until it is all in and checked
 * (raft_frame_configuration, conf_is_ours). */
#define MAX_CHANGES 16
typedef struct {
    uint64_t left;                       /* payload bytes still to pass on */
    uint64_t pos;                        /* payload bytes passed on */
    uint64_t change_at[MAX_CHANGES];     /* where each RAFT_CHANGE entry starts */
    uint64_t change_len[MAX_CHANGES];
    size_t nchanges, next;
} inflow;

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The rules every member's address in this group follows
 * (raft_conf_check.h): members may be added at other addresses. */
static raft_member_rules rules_of(const rt *r)
{
    return (raft_member_rules){r->peers, r->npeers, true, r->loopback_only};
}

static int member_address(const rt *r, unsigned member, const char *raft_addr,
                          struct sockaddr_in *sa, char *host, size_t hostlen, const char **why)
{
    raft_member_rules rules = rules_of(r);
    return raft_member_address(&rules, member, raft_addr, sa, host, hostlen, why);
}

static bool conf_is_ours(const rt *r, const uint8_t *conf, size_t len)
{
    raft_member_rules rules = rules_of(r);
    return raft_conf_is_ours(&rules, conf, len);
}

/* A message whose header raft_frame_message passed (at m): note where
 * its RAFT_CHANGE entries lie in its payload. NULL, or why not. */
static const char *note_changes(const rt *r, inflow *in, const uint8_t *m, uint64_t payload)
{
    in->left = payload;
    in->pos = 0;
    in->nchanges = in->next = 0;
    if (le64(m) == RAFT_FRAME_INSTALL_SNAPSHOT) {
        /* header: term, last index, last term, conf index, conf length, conf */
        const uint8_t *h = m + RAFT_FRAME_PREAMBLE;
        if (!conf_is_ours(r, h + 40, (size_t)le64(h + 32)))
            return "a snapshot's configuration is not this group's";
        return NULL;
    }
    if (le64(m) != RAFT_FRAME_APPEND_ENTRIES)
        return NULL;
    const uint8_t *h = m + RAFT_FRAME_PREAMBLE;
    uint64_t n = le64(h + 32), at = 0; /* entries (the frame check capped n) */
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *e = h + 40 + 16 * i;
        uint64_t len = (uint64_t)e[12] | (uint64_t)e[13] << 8 | (uint64_t)e[14] << 16 |
                       (uint64_t)e[15] << 24;
        if (e[8] == 3 /* RAFT_CHANGE */) {
            if (in->nchanges == MAX_CHANGES || len > IO_CHUNK)
                return "too many or too large configuration entries";
            in->change_at[in->nchanges] = at;
            in->change_len[in->nchanges++] = len;
        }
        at += len;
    }
    return NULL;
}

/* How many of the avail bytes at p (payload of the current message) may
 * be passed on now: 0 when a configuration entry must wait for more;
 * -1 (why set) when one is bad. */
static int64_t passable(const rt *r, inflow *in, const uint8_t *p, uint64_t avail,
                        const char **why)
{
    uint64_t n = avail < in->left ? avail : in->left;
    if (in->next == in->nchanges)
        return (int64_t)n;
    uint64_t at = in->change_at[in->next], len = in->change_len[in->next];
    if (in->pos < at) /* up to the entry */
        return (int64_t)(n < at - in->pos ? n : at - in->pos);
    if (n < len)
        return 0;
    if (raft_frame_configuration(p, len, why) != RAFT_FRAME_OK)
        return -1;
    if (!conf_is_ours(r, p, len)) {
        *why = "a configuration entry that is not this group's";
        return -1;
    }
    in->next++;
    return (int64_t)len;
}

/* Accepted, after the handshake: every message from the peer is checked
 * (raft_frame_message) before its bytes reach libraft; a payload passes
 * as it comes, but for configuration entries (above). buf holds have
 * bytes read already. Returns when either side ends or a frame is
 * refused. */
static void pump_in(conn *c, uint8_t *buf, size_t cap, size_t have)
{
    rt *r = c->r;
    inflow in = {0};
    for (;;) {
        size_t off = 0;
        while (off < have) {
            const char *why = NULL;
            if (in.left > 0) {
                int64_t n = passable(r, &in, buf + off, have - off, &why);
                if (n < 0) {
                    refuse(c, REFUSED_FRAME, why);
                    return;
                }
                if (n == 0)
                    break;
                if (send_all_fd(c->mine, buf + off, (size_t)n) != 0)
                    return;
                off += (size_t)n;
                in.left -= (uint64_t)n;
                in.pos += (uint64_t)n;
                continue;
            }
            size_t used = 0;
            uint64_t payload = 0;
            raft_frame_verdict v =
                raft_frame_message(buf + off, have - off, &r->lim, &used, &payload, &why);
            if (v == RAFT_FRAME_OK && (why = note_changes(r, &in, buf + off, payload)) != NULL)
                v = RAFT_FRAME_BAD;
            if (v == RAFT_FRAME_BAD) {
                refuse(c, REFUSED_FRAME, why);
                return;
            }
            if (v == RAFT_FRAME_MORE)
                break;
            if (send_all_fd(c->mine, buf + off, used) != 0)
                return;
            off += used;
        }
        memmove(buf, buf + off, have - off);
        have -= off;
        if (have == cap) { /* cannot happen: cap holds the longest header */
            refuse(c, REFUSED_FRAME, "a header longer than the buffer");
            return;
        }
        if (c->tls == NULL || gnutls_record_check_pending(c->tls) == 0) {
            /* libraft never writes on an accepted stream: readable means
             * it closed its end. */
            struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN},
                                  {.fd = c->mine, .events = POLLIN}};
            if (poll(p, 2, -1) < 0) {
                if (errno == EINTR)
                    continue;
                return;
            }
            if (p[1].revents != 0)
                return;
            if (p[0].revents == 0)
                continue;
        }
        ssize_t n = conn_recv(c, buf + have, cap - have);
        if (n <= 0)
            return;
        have += (size_t)n;
    }
}

/* Connected: what libraft writes goes to the peer; the peer sends nothing
 * on this direction, so anything from it (its close included) ends it. */
static void pump_out(conn *c)
{
    uint8_t *buf = malloc(IO_CHUNK);
    if (buf == NULL)
        return;
    for (;;) {
        struct pollfd p[2] = {{.fd = c->mine, .events = POLLIN},
                              {.fd = c->fd, .events = POLLIN}};
        bool pending = c->tls != NULL && gnutls_record_check_pending(c->tls) > 0;
        if (!pending && poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pending || p[1].revents != 0) {
            (void)conn_recv(c, buf, IO_CHUNK);
            break;
        }
        if (p[0].revents == 0)
            continue;
        ssize_t n = recv(c->mine, buf, IO_CHUNK, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || conn_send(c, buf, (size_t)n) != 0)
            break;
    }
    free(buf);
}

/* Read the libraft handshake: at most 24 + RAFT_FRAME_ADDRESS_MAX bytes,
 * within the handshake time. Bytes after it (the first message) stay in
 * buf: *have in all, *used the handshake's. 0, or -1 (refused, counted). */
static int read_handshake(conn *c, uint8_t *buf, size_t cap, size_t *have, size_t *used)
{
    uint64_t deadline = time_mono_ms() + RAFT_TRANSPORT_HANDSHAKE_MS;
    const char *why = "closed before its handshake";
    uint64_t id = 0;
    *have = 0;
    for (;;) {
        raft_frame_verdict v =
            raft_frame_handshake(buf, *have, used, &id, c->address, sizeof c->address, &why);
        if (v == RAFT_FRAME_OK) {
            c->id = (raft_id)id;
            return 0;
        }
        if (v == RAFT_FRAME_BAD || time_mono_ms() > deadline)
            break;
        ssize_t n = conn_recv(c, buf + *have, cap - *have);
        if (n == 0 && *have == 0)
            return -1; /* a dialler that found another incarnation here: not a refusal */
        if (n <= 0) {
            why = n == 0 ? "closed before its handshake" : "no handshake in time";
            break;
        }
        *have += (size_t)n;
    }
    refuse(c, REFUSED_HANDSHAKE, why);
    return -1;
}

/* The member the handshake claims must be another member, at an address
 * it may have (member_address), and (with TLS) named by its certificate. */
static bool identity_ok(conn *c)
{
    rt *r = c->r;
    char host[INET_ADDRSTRLEN + 1];
    struct sockaddr_in sa;
    const char *why;
    if (raft_member_of(c->id) == raft_member_of(r->id)) {
        refuse(c, REFUSED_IDENTITY, "the handshake claims this member's own id");
        return false;
    }
    if (member_address(r, raft_member_of(c->id), c->address, &sa, host, sizeof host, &why) !=
        0) {
        refuse(c, REFUSED_IDENTITY, why);
        return false;
    }
    if (c->tls != NULL && !cert_names_member(c->tls, c->id, host)) {
        refuse(c, REFUSED_IDENTITY, "the certificate names neither the member nor its address");
        return false;
    }
    return true;
}

/* ---- our hello ---- */

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int send_hello(conn *c, uint8_t kind)
{
    rt *r = c->r;
    uint8_t b[HELLO_LEN] = {'p', 'c', 'R', 'H', HELLO_VERSION, kind,
                            atomic_load(&r->my_state) ? HELLO_HAS_STATE : 0, 0};
    put_le64(b + 8, atomic_load(&r->my_cluster));
    put_le64(b + 16, atomic_load(&r->my_raft_id));
    put_le64(b + 24, atomic_load(&r->my_last_index));
    return conn_send(c, b, sizeof b);
}

/* Exactly one hello (a peer sends nothing else before the answer), within
 * the handshake time. 0, or -1 with why. */
static int read_hello(conn *c, hello *h, const char **why)
{
    uint8_t b[HELLO_LEN];
    size_t have = 0;
    uint64_t deadline = time_mono_ms() + RAFT_TRANSPORT_HANDSHAKE_MS;
    *why = "closed before its hello";
    while (have < sizeof b) {
        ssize_t n = conn_recv(c, b + have, sizeof b - have);
        if (n <= 0 || time_mono_ms() > deadline)
            return -1;
        have += (size_t)n;
    }
    *why = "not a hello of ours (another program, or another version)";
    if (memcmp(b, "pcRH", 4) != 0 || b[4] != HELLO_VERSION || b[5] > HELLO_RAFT ||
        (b[6] & ~HELLO_HAS_STATE) != 0 || b[7] != 0)
        return -1;
    h->kind = b[5];
    h->has_state = b[6] & HELLO_HAS_STATE;
    h->cluster = le64(b + 8);
    h->raft_id = le64(b + 16);
    h->last_index = le64(b + 24);
    *why = "a hello with a raft id that is not a peer's";
    return raft_member_of(h->raft_id) != 0 ? 0 : -1;
}

static size_t peer_index(const rt *r, unsigned member)
{
    size_t i = 0;
    while (i < r->npeers && r->peers[i].id != member)
        i++;
    return i;
}

/* Under mu: member's note in r->seen, or the slot for a new one (a free
 * one, else the oldest). */
static size_t seen_slot(rt *r, unsigned member)
{
    size_t pick = 0;
    for (size_t i = 0; i < RAFT_TRANSPORT_SEEN_MAX; i++) {
        if (r->seen[i].member == member)
            return i;
        if (atomic_load(&r->seen[i].note.ms) < atomic_load(&r->seen[pick].note.ms))
            pick = i;
    }
    return pick;
}

/* Remember the raft id a member's hello gave (raft_transport_seen): only
 * from a member of this group (one still deciding says nothing yet). */
static void note_seen(rt *r, const hello *h)
{
    uint64_t mine = atomic_load(&r->my_cluster);
    if (mine == 0 || h->cluster != mine)
        return;
    unsigned member = raft_member_of(h->raft_id);
    pthread_mutex_lock(&r->mu);
    size_t i = seen_slot(r, member);
    r->seen[i].member = member;
    raft_seen_note(&r->seen[i].note, h->raft_id, h->has_state);
    pthread_mutex_unlock(&r->mu);
}

/* Accepted: the hello's member must be another member, named by its
 * certificate at its --raft-peers host; one added since on another
 * address (docs/DESIGN.md 7.3), whose hello says no address, at the host
 * it connects from (or by its DNS name, cert_names_member). */
static bool hello_identity_ok(conn *c, const hello *h)
{
    rt *r = c->r;
    unsigned member = raft_member_of(h->raft_id);
    size_t i = peer_index(r, member);
    char host[INET_ADDRSTRLEN + 1];
    struct sockaddr_in sa;
    if (member == raft_member_of(r->id)) {
        refuse(c, REFUSED_IDENTITY, "a hello that claims this member's own id");
        return false;
    }
    if (i < r->npeers ? raft_address_parse(r->peers[i].raft, &sa, host, sizeof host) != 0
                      : snprintf(host, sizeof host, "%s", c->from) >= (int)sizeof host) {
        refuse(c, REFUSED_IDENTITY, "a hello from a member without a usable address");
        return false;
    }
    if (c->tls != NULL && !cert_names_member(c->tls, h->raft_id, host)) {
        refuse(c, REFUSED_IDENTITY, "the certificate names neither the member nor its address");
        return false;
    }
    return true;
}

static void *in_main(void *arg)
{
    conn *c = arg;
    rt *r = c->r;
    const char *why;
    size_t have = 0, used = 0;
    uint8_t *buf = malloc(r->inbuf);
    set_timeouts(c->fd, RAFT_TRANSPORT_HANDSHAKE_MS);
    tune_tcp(c->fd);
    if (buf == NULL)
        goto out;
    if (r->tls != NULL && tls_start(c, &why) != 0) {
        refuse(c, REFUSED_TLS, why);
        goto out;
    }
    hello h;
    if (read_hello(c, &h, &why) != 0) {
        refuse(c, REFUSED_HANDSHAKE, why);
        goto out;
    }
    if (!hello_identity_ok(c, &h))
        goto out;
    note_seen(r, &h);
    if (h.kind == HELLO_PROBE) {
        (void)send_hello(c, HELLO_PROBE);
        goto out;
    }
    /* A raft connection: our hello goes back first (the dialer learns
     * whom it reached); then it must be from a member of this group, to a
     * member that runs libraft, and libraft's handshake must name the
     * same raft id as the hello. */
    if (send_hello(c, HELLO_RAFT) != 0)
        goto out;
    /* This member does not know its group yet (an empty data dir still
     * asking the others) or runs no libraft yet: the dialer, told so by
     * our hello, tries again later. Counted, but not logged as a refusal:
     * every member that starts after the others meets it once. */
    uint64_t mine = atomic_load(&r->my_cluster);
    if (mine == 0 || !atomic_load(&r->accepting)) {
        metrics_inc(r->m_refused[REFUSED_BUSY], 1);
        log_debug("raft peer from %s: closed: this member has not started its raft yet",
                  c->from);
        goto out;
    }
    if (h.cluster == 0 || h.cluster != mine) {
        refuse(c, REFUSED_IDENTITY, "a member of another group (its group id differs)");
        goto out;
    }
    if (read_handshake(c, buf, r->inbuf, &have, &used) != 0 || !identity_ok(c))
        goto out;
    if (c->id != h.raft_id) {
        refuse(c, REFUSED_IDENTITY, "the handshake's raft id is not the hello's");
        goto out;
    }
    if (hand_over(c) != 0)
        goto out;
    memmove(buf, buf + used, have - used);
    pump_in(c, buf, r->inbuf, have - used);
    metrics_add(r->m_open_in, -1);
out:
    free(buf);
    conn_exit(c);
    return NULL;
}

/* TCP connect to sa, giving up when the transport closes or the
 * handshake time passes. 0 or -1. */
static int dial(conn *c, const struct sockaddr_in *sa, unsigned ms)
{
    rt *r = c->r;
    int fl = fcntl(c->fd, F_GETFL);
    if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return -1;
    if (connect(c->fd, (const struct sockaddr *)sa, sizeof *sa) != 0 && errno != EINPROGRESS)
        return -1;
    uint64_t deadline = time_mono_ms() + ms;
    for (;;) {
        struct pollfd p = {.fd = c->fd, .events = POLLOUT};
        int n = poll(&p, 1, 100);
        if (atomic_load(&r->closing) || time_mono_ms() > deadline)
            return -1;
        if (n > 0)
            break;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
        return -1;
    return fcntl(c->fd, F_SETFL, fl);
}

/* libraft's handshake: protocol, our id, our address NUL-padded to 8. */
static int send_handshake(conn *c)
{
    rt *r = c->r;
    uint8_t hs[RAFT_FRAME_HANDSHAKE_FIXED + RAFT_FRAME_ADDRESS_MAX] = {0};
    size_t alen = (strlen(r->address) + 1 + 7) / 8 * 8;
    uint64_t words[3] = {HANDSHAKE_PROTOCOL, r->id, alen};
    for (int w = 0; w < 3; w++)
        for (int b = 0; b < 8; b++)
            hs[w * 8 + b] = (uint8_t)(words[w] >> (8 * b));
    memcpy(hs + RAFT_FRAME_HANDSHAKE_FIXED, r->address, strlen(r->address));
    return conn_send(c, hs, RAFT_FRAME_HANDSHAKE_FIXED + alen);
}

static void *out_main(void *arg)
{
    conn *c = arg;
    rt *r = c->r;
    struct sockaddr_in sa;
    char host[INET_ADDRSTRLEN + 1];
    const char *why;
    bool ok = false;
    if (member_address(r, raft_member_of(c->id), c->address, &sa, host, sizeof host, &why) !=
        0) {
        refuse(c, REFUSED_IDENTITY, why);
        goto done;
    }
    if (dial(c, &sa, RAFT_TRANSPORT_HANDSHAKE_MS) != 0)
        goto done;
    set_timeouts(c->fd, RAFT_TRANSPORT_HANDSHAKE_MS);
    tune_tcp(c->fd);
    if (r->tls != NULL && tls_start(c, &why) != 0) {
        refuse(c, REFUSED_TLS, why);
        goto done;
    }
    if (c->tls != NULL && !cert_names_member(c->tls, c->id, host)) {
        refuse(c, REFUSED_IDENTITY, "the certificate names neither the member dialled nor its "
                                    "address");
        goto done;
    }
    hello h;
    if (send_hello(c, HELLO_RAFT) != 0 || read_hello(c, &h, &why) != 0) {
        refuse(c, REFUSED_HANDSHAKE, why);
        goto done;
    }
    if (raft_member_of(h.raft_id) != raft_member_of(c->id)) {
        refuse(c, REFUSED_IDENTITY, "the member answering is not the one dialled");
        goto done;
    }
    note_seen(r, &h);
    if (h.cluster != atomic_load(&r->my_cluster) || h.raft_id != c->id) {
        /* Another group, or this member under another raft id: it lost
         * its data and came back as a new incarnation (raft_identity.h),
         * which the leader puts in the old one's place. Not libraft's. */
        uint64_t now = time_mono_ms(), last = atomic_load(&r->last_other_log_ms);
        if (now - last >= 10000 &&
            atomic_compare_exchange_strong(&r->last_other_log_ms, &last, now))
            log_warn("raft peer at %s answers as raft id %llu of group %016llx, not as raft id "
                     "%llu of this group (%s)", c->address, (unsigned long long)h.raft_id,
                     (unsigned long long)h.cluster, (unsigned long long)c->id,
                     h.cluster == 0 ? "it is starting and does not know its group yet"
                     : h.cluster != atomic_load(&r->my_cluster)
                         ? "another group: check --raft-peers"
                         : "a new incarnation of the member, which lost its data");
        if (c->tls != NULL) /* a clean end: the peer must not take it for a refusal */
            (void)gnutls_bye(c->tls, GNUTLS_SHUT_WR);
        goto done;
    }
    ok = send_handshake(c) == 0 && hand_over(c) == 0;
done:
    if (!ok) {
        pthread_mutex_lock(&r->mu);
        c->status = RAFT_NOCONNECTION;
        c->deliver = true;
        pthread_mutex_unlock(&r->mu);
    } else {
        pump_out(c);
        metrics_add(r->m_open_out, -1);
    }
    conn_exit(c);
    return NULL;
}

/* Start c's thread in a free slot. 0, or -1 (c not taken). */
static int conn_start(rt *r, conn *c, void *(*main)(void *))
{
    pthread_mutex_lock(&r->mu);
    size_t slot = RAFT_TRANSPORT_MAX_CONNS;
    for (size_t i = 0; i < RAFT_TRANSPORT_MAX_CONNS && slot == RAFT_TRANSPORT_MAX_CONNS; i++)
        if (r->conns[i] == NULL)
            slot = i;
    int rc = -1;
    if (slot < RAFT_TRANSPORT_MAX_CONNS && !atomic_load(&r->closing)) {
        r->conns[slot] = c;
        if (pthread_create(&c->thread, NULL, main, c) == 0)
            rc = 0;
        else
            r->conns[slot] = NULL;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static conn *conn_new(rt *r, bool out, int fd)
{
    conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->r = r;
    c->out = out;
    c->fd = fd;
    c->mine = c->theirs = -1;
    c->in_handshake = true;
    return c;
}

/* ---- accepting ---- */

/* Whether another connection from ip may start its handshake (under mu). */
static bool handshake_room(rt *r, const char *ip)
{
    size_t all = 0, same = 0;
    for (size_t i = 0; i < RAFT_TRANSPORT_MAX_CONNS; i++) {
        conn *c = r->conns[i];
        if (c != NULL && !c->out && c->in_handshake) {
            all++;
            same += strcmp(c->from, ip) == 0;
        }
    }
    return all < RAFT_TRANSPORT_MAX_HANDSHAKES && same < RAFT_TRANSPORT_MAX_HANDSHAKES_PER_ADDR;
}

/* Join and free the ended connections that have nothing for libraft (the
 * listener's thread: before libraft listens, nothing else reaps). */
static void reap_quiet(rt *r)
{
    conn *ended[RAFT_TRANSPORT_MAX_CONNS];
    size_t n = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < RAFT_TRANSPORT_MAX_CONNS; i++) {
        conn *c = r->conns[i];
        if (c != NULL && c->exited && !c->deliver) {
            r->conns[i] = NULL;
            ended[n++] = c;
        }
    }
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < n; i++) {
        pthread_join(ended[i]->thread, NULL);
        conn_free(ended[i]);
    }
}

static void accept_one(rt *r)
{
    struct sockaddr_in sa;
    reap_quiet(r);
    socklen_t len = sizeof sa;
    int fd = accept4(r->lfd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE)
            time_sleep_ms(100); /* out of descriptors: do not spin */
        return;
    }
    conn *c = conn_new(r, false, fd);
    if (c == NULL) {
        close(fd);
        return;
    }
    if (inet_ntop(AF_INET, &sa.sin_addr, c->from, sizeof c->from) == NULL)
        snprintf(c->from, sizeof c->from, "?");
    pthread_mutex_lock(&r->mu);
    bool room = handshake_room(r, c->from);
    pthread_mutex_unlock(&r->mu);
    if (!room || conn_start(r, c, in_main) != 0) {
        refuse(c, REFUSED_BUSY, "too many connections");
        close(fd);
        free(c);
    }
}

static void *listen_main(void *arg)
{
    rt *r = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = r->lfd, .events = POLLIN}, {.fd = r->wake[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents != 0 || atomic_load(&r->closing))
            break;
        if (p[0].revents != 0)
            accept_one(r);
    }
    return NULL;
}

/* ---- the interface libraft calls (loop thread) ---- */

static int t_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    rt *r = t->impl;
    if (strlen(address) >= sizeof r->address) {
        snprintf(t->errmsg, sizeof t->errmsg, "address too long: %.64s", address);
        return RAFT_INVALID;
    }
    if (strcmp(address, r->address) != 0) {
        snprintf(t->errmsg, sizeof t->errmsg, "not the address listened on: %.64s", address);
        return RAFT_INVALID;
    }
    r->id = id;
    return 0;
}

static int open_async(rt *r)
{
    if (r->async_open)
        return 0;
    if (uv_async_init(r->loop, &r->async, on_async) != 0)
        return -1;
    r->async.data = r;
    r->async_open = true;
    atomic_store(&r->async_open_flag, true);
    return 0;
}

int raft_transport_listen(const char *address, int *fd, char *err, size_t errlen)
{
    struct sockaddr_in sa;
    char host[INET_ADDRSTRLEN + 1];
    if (raft_address_parse(address, &sa, host, sizeof host) != 0) {
        snprintf(err, errlen, "not an IPv4 address:port: %.64s", address);
        return -1;
    }
    if ((*fd = listen_socket((struct sockaddr *)&sa, sizeof sa)) < 0) {
        snprintf(err, errlen, "cannot listen on %.64s: %s%s", address, strerror(errno),
                 errno == EADDRINUSE ? " (another program has this port)" : "");
        return -1;
    }
    return 0;
}

/* Listen on the member's address (from raft_transport_init on: probes are
 * answered before libraft runs), on a copy of given_fd when the program
 * bound it already (> 0). 0 or -1 with err. */
static int start_listening(rt *r, int given_fd, char *err, size_t errlen)
{
    if (pipe2(r->wake, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot set up the listener");
        return -1;
    }
    if (given_fd > 0) {
        if ((r->lfd = fcntl(given_fd, F_DUPFD_CLOEXEC, 3)) < 0) {
            snprintf(err, errlen, "listen on %.64s: %s", r->address, strerror(errno));
            return -1;
        }
    } else if (raft_transport_listen(r->address, &r->lfd, err, errlen) != 0) {
        r->lfd = -1;
        return -1;
    }
    if (pthread_create(&r->listener, NULL, listen_main, r) != 0) {
        snprintf(err, errlen, "listen on %.64s: cannot start a thread", r->address);
        return -1;
    }
    r->listening = true;
    return 0;
}

static int t_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    rt *r = t->impl;
    if (open_async(r) != 0) {
        snprintf(t->errmsg, sizeof t->errmsg, "cannot set up the listener");
        return RAFT_IOERR;
    }
    r->accept_cb = cb;
    atomic_store(&r->accepting, true);
    return 0;
}

static int t_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
                     const char *address, raft_uv_connect_cb cb)
{
    rt *r = t->impl;
    if (strlen(address) >= sizeof r->address || open_async(r) != 0)
        return RAFT_NOCONNECTION;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    conn *c = fd >= 0 ? conn_new(r, true, fd) : NULL;
    if (c == NULL) {
        if (fd >= 0)
            close(fd);
        return RAFT_NOCONNECTION;
    }
    c->id = id;
    /* A member added on an address of its own has its URL after the raft
     * address in the configuration (raft_peers.h): dial the raft part. */
    snprintf(c->address, sizeof c->address, "%.*s", (int)strcspn(address, " "), address);
    c->req = req;
    c->cb = cb;
    if (conn_start(r, c, out_main) != 0) {
        close(fd);
        free(c);
        return RAFT_NOCONNECTION;
    }
    return 0;
}

/* After the async handle closed: the connects libraft still waits for are
 * cancelled, streams it never got are closed, then libraft is told. */
static void on_async_closed(uv_handle_t *h)
{
    rt *r = h->data;
    for (size_t i = 0; i < RAFT_TRANSPORT_MAX_CONNS; i++) {
        conn *c = r->conns[i];
        if (c == NULL)
            continue;
        r->conns[i] = NULL;
        if (c->out && !c->delivered)
            c->cb(c->req, NULL, RAFT_CANCELED);
        conn_free(c);
    }
    r->close_cb(r->t);
}

/* Stop the listener and every connection's thread (they are joined, not
 * freed). */
static void stop_threads(rt *r)
{
    atomic_store(&r->closing, true);
    if (r->listening) {
        (void)!write(r->wake[1], "x", 1);
        pthread_join(r->listener, NULL);
        r->listening = false;
    }
    /* Wake every thread: shutdown, not close (the thread owns its fds). */
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < RAFT_TRANSPORT_MAX_CONNS; i++) {
        conn *c = r->conns[i];
        if (c != NULL && c->fd >= 0)
            shutdown(c->fd, SHUT_RDWR);
        if (c != NULL && c->mine >= 0)
            shutdown(c->mine, SHUT_RDWR);
    }
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < RAFT_TRANSPORT_MAX_CONNS; i++)
        if (r->conns[i] != NULL && !r->conns[i]->joined) {
            pthread_join(r->conns[i]->thread, NULL);
            r->conns[i]->joined = true;
        }
}

static void t_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    rt *r = t->impl;
    r->close_cb = cb;
    stop_threads(r);
    if (r->async_open)
        uv_close((uv_handle_t *)&r->async, on_async_closed);
    else
        cb(t);
}

/* ---- setup ---- */

int raft_transport_init(struct raft_uv_transport *t, struct uv_loop_s *loop,
                        const raft_transport_config *cfg, char *err, size_t errlen)
{
    rt *r = calloc(1, sizeof *r);
    if (r == NULL || cfg->npeers > RAFT_PEERS_MAX) {
        snprintf(err, errlen, r == NULL ? "out of memory" : "too many peers");
        free(r);
        return -1;
    }
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        snprintf(err, errlen, "cannot make a mutex");
        free(r);
        return -1;
    }
    memset(t, 0, sizeof *t);
    r->t = t;
    r->loop = loop;
    r->lfd = r->wake[0] = r->wake[1] = -1;
    memcpy(r->peers, cfg->peers, cfg->npeers * sizeof r->peers[0]);
    r->npeers = cfg->npeers;
    r->tls = cfg->tls;
    r->loopback_only = cfg->tls == NULL && raft_transport_plain_allowed(r->peers, r->npeers);
    snprintf(r->address, sizeof r->address, "%s", cfg->address);
    atomic_store(&r->my_last_index, UINT64_MAX);
    r->lim = raft_frame_limits_or_default(&cfg->limits);
    r->inbuf = raft_frame_max_header(&r->lim) + IO_CHUNK;
    if (cfg->metrics != NULL) {
        metrics_family *f = metrics_counter(
            cfg->metrics, "percolator_raft_peer_refused_total",
            "raft peer connections closed before libraft read them (docs/DESIGN.md 7.2)", "reason",
            NULL);
        for (int i = 0; i < REFUSED_N; i++)
            r->m_refused[i] = metrics_series_get(f, refusal_name[i], NULL);
        metrics_family *g = metrics_gauge(cfg->metrics, "percolator_raft_peer_connections",
                                          "raft peer connections open (past their handshakes)",
                                          "direction", NULL);
        r->m_open_in = metrics_series_get(g, "in", NULL);
        r->m_open_out = metrics_series_get(g, "out", NULL);
    }
    t->impl = r;
    if (strlen(cfg->address) >= sizeof r->address ||
        start_listening(r, cfg->listen_fd, err, errlen) != 0) {
        if (strlen(cfg->address) >= sizeof r->address)
            snprintf(err, errlen, "address too long: %.64s", cfg->address);
        raft_transport_free(t);
        return -1;
    }
    t->init = t_init;
    t->listen = t_listen;
    t->connect = t_connect;
    t->close = t_close;
    return 0;
}

void raft_transport_free(struct raft_uv_transport *t)
{
    rt *r = t->impl;
    if (r == NULL)
        return;
    if (!r->async_open) { /* libraft never ran us: nothing closed the threads */
        stop_threads(r);
        for (size_t i = 0; i < RAFT_TRANSPORT_MAX_CONNS; i++)
            if (r->conns[i] != NULL)
                conn_free(r->conns[i]);
    }
    if (r->lfd >= 0)
        close(r->lfd);
    if (r->wake[0] >= 0)
        close(r->wake[0]);
    if (r->wake[1] >= 0)
        close(r->wake[1]);
    pthread_mutex_destroy(&r->mu);
    free(r);
    t->impl = NULL;
}

bool raft_transport_plain_allowed(const raft_peer *peers, size_t npeers)
{
    for (size_t i = 0; i < npeers; i++) {
        struct sockaddr_in sa;
        char host[INET_ADDRSTRLEN + 1];
        if (raft_address_parse(peers[i].raft, &sa, host, sizeof host) != 0 ||
            (ntohl(sa.sin_addr.s_addr) >> 24) != 127)
            return false;
    }
    return true;
}

void raft_transport_set_self(struct raft_uv_transport *t, uint64_t cluster, uint64_t raft_id,
                             bool has_state)
{
    rt *r = t->impl;
    atomic_store(&r->my_cluster, cluster);
    atomic_store(&r->my_raft_id, raft_id);
    atomic_store(&r->my_state, has_state);
}

void raft_transport_set_last_index(struct raft_uv_transport *t, uint64_t index)
{
    rt *r = t->impl;
    atomic_store(&r->my_last_index, index);
}

int raft_transport_probe(struct raft_uv_transport *t, const raft_peer *peer,
                         raft_member_probe *out)
{
    rt *r = t->impl;
    struct sockaddr_in sa;
    char host[INET_ADDRSTRLEN + 1];
    const char *why;
    hello h;
    memset(out, 0, sizeof *out);
    conn c = {.r = r, .out = true, .mine = -1, .theirs = -1, .id = peer->id};
    snprintf(c.address, sizeof c.address, "%s", peer->raft);
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = -1;
    if (c.fd < 0 || raft_address_parse(peer->raft, &sa, host, sizeof host) != 0 ||
        dial(&c, &sa, PROBE_MS) != 0)
        goto done;
    set_timeouts(c.fd, PROBE_MS);
    if (r->tls != NULL && (tls_start(&c, &why) != 0 || !cert_names_member(c.tls, peer->id, host)))
        goto done;
    if (send_hello(&c, HELLO_PROBE) != 0 || read_hello(&c, &h, &why) != 0 ||
        raft_member_of(h.raft_id) != peer->id)
        goto done;
    out->answered = true;
    out->cluster = h.cluster;
    out->raft_id = h.raft_id;
    out->has_state = h.has_state;
    out->last_index = h.last_index;
    rc = 0;
done:
    if (c.tls != NULL)
        gnutls_deinit(c.tls);
    if (c.fd >= 0)
        close(c.fd);
    return rc;
}

bool raft_transport_seen(struct raft_uv_transport *t, unsigned member, uint64_t max_age_ms,
                         uint64_t *raft_id, bool *has_state, uint64_t *at_ms)
{
    rt *r = t->impl;
    pthread_mutex_lock(&r->mu);
    size_t i = seen_slot(r, member);
    bool fresh = raft_seen_get(r->seen[i].member == member ? &r->seen[i].note : NULL, max_age_ms,
                               raft_id, has_state, at_ms);
    pthread_mutex_unlock(&r->mu);
    return fresh;
}
