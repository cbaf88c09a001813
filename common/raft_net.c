/*
 * raft_net.c — see raft_net.h.
 *
 * Threads: a listener; a reader per connection another node opened; a
 * writer per node this one sends to (it dials, says hello, then writes
 * its queue). A record's group is looked up under the groups' read lock,
 * which is let go before the group is handed the record: a delivery is
 * counted on its member, and raft_net_leave (which takes the member out
 * under the write lock) returns once none runs. So a join or leave never
 * waits behind another group's delivery.
 */
#include "raft_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "le.h"
#include "log.h"
#include "raft_conf_check.h"
#include "raft_transport.h"
#include "timeutil.h"
#include "tls.h"

#define HELLO_MAGIC "pcRN"
#define HELLO_VERSION 2        /* 2: the realm after the address's length */
#define HELLO_HEADER 16
#define HELLO_ADDR_MAX RAFT_PEER_ADDR_MAX
#define RECORD_HEADER 32
/* A writer sends what is queued in runs of at most this many records and
 * bytes (a record longer goes alone), a reader reads ahead this much. */
#define WRITE_RUN_RECORDS 64
#define WRITE_RUN_BYTES (256u << 10)
#define READ_AHEAD (16u << 10)
#define MAX_GROUPS (4096 + 1) /* the most regions a node hosts, and its group of fills */
#define MAX_PEERS 512          /* lanes to the nodes this one sends to (two a node) */
#define MAX_READERS 256        /* connections other nodes opened */
#define MAX_UNNAMED 64         /* of them, before their hello passed: the rest are the nodes' */
#define MAX_UNNAMED_A_HOST 8   /* of those, from one address */
/* A record's body arrives at this rate at least, after idle_ms: one
 * trickled holds its room among the records being read a bounded time. */
#define MIN_BYTES_A_SEC ((uint64_t)4 << 20)
#define DIAL_MS 2000
#define LIVED_MS 1000          /* a connection that lasted this long resets the backoff */
#define BACKOFF_MAX_MS 1000
#define TOO_BIG_LOG_MS 60000   /* at most one warning a minute about records too long */
#define REFUSAL_LOG_MS 60000   /* and about hellos of another realm or version */

typedef struct record {
    uint8_t header[RECORD_HEADER];
    uint8_t *msg;
    size_t len;
    struct record *next;
} record;

/* One lane to a node: its connection, queue and writer. A node gets two,
 * so that an image (one record of up to max_image_bytes) never holds the
 * messages of every group behind it: RAFT_NET_MESSAGES and
 * RAFT_NET_IMAGES. */
typedef struct {
    raft_net *n;
    char address[HELLO_ADDR_MAX];
    raft_net_lane lane;
    pthread_t thread;
    pthread_cond_t cv;          /* under n->mu: records queued, or the stop */
    record *head, *tail;
    uint64_t queued;            /* bytes */
    int fd;                     /* the writer's, -1 */
    int dialing;                /* under n->mu: the socket being dialled, -1 (the stop
                                 * shuts it down: a dial takes seconds) */
    gnutls_session_t tls;       /* with the net's TLS: fd's session (the writer's) */
    uint64_t up_since_ms;       /* when fd connected */
    unsigned backoff_ms;        /* before the next dial */
    bool retired;               /* under n->mu: no group names the node any more: the
                                 * writer ends (retire) */
} peer;

typedef struct {
    raft_net *n;
    pthread_t thread;
    int fd;                     /* the thread's; others only shut it down, under n->mu */
    gnutls_session_t tls;       /* with the net's TLS: fd's session (the thread's) */
    unsigned rcv_ms;            /* fd's receive timeout now (recv_by) */
    uint8_t *ahead;             /* READ_AHEAD bytes, once the hello passed (read_records) */
    size_t ahead_at, ahead_len; /* what of it is read and not taken yet */
    bool done;                  /* under n->mu: the thread ended; the listener joins it */
    bool named;                 /* under n->mu: its hello passed, from is its node */
    bool kicked;                /* under n->mu: replaced by a newer connection */
    uint64_t seq;               /* the order it was accepted in: the newer replaces */
    raft_net_lane lane;         /* from its hello */
    struct in_addr source;      /* where the connection comes from */
    char from[HELLO_ADDR_MAX];  /* the node's address, from its hello */
} reader;

typedef struct {
    uint64_t group;
    raft_net_deliver_fn fn;
    void *arg;
    char nodes[RAFT_PEERS_MAX][HELLO_ADDR_MAX];
    size_t nnodes;
    atomic_uint busy;           /* deliveries running; to 0 under n->mu */
} member;

struct raft_net {
    char address[HELLO_ADDR_MAX];
    tls_server *tls;            /* NULL: plain TCP, loopback only */
    struct sockaddr_in self;    /* host, port 0: what writers bind to */
    uint64_t max_queue, max_reading, max_held;   /* the last two: a lane's */
    uint64_t max_record[2];     /* by lane: a message, an image */
    unsigned idle_ms, hello_ms;
    int lfd, wake[2];
    pthread_t listener;
    bool listening;
    atomic_bool closing;

    pthread_mutex_t mu;         /* peers, readers, reading, counters */
    pthread_cond_t budget_cv;   /* under mu: reading went down, a reader kicked, the stop */
    pthread_cond_t left_cv;     /* under mu: a member's last delivery ended */
    peer *peers[MAX_PEERS];
    reader *readers[MAX_READERS];
    uint64_t reading[2];        /* bytes of records being read, by lane */
    uint64_t accepted_seq;
    raft_net_stats st;
    uint64_t too_big_logged_ms;
    uint64_t realm;             /* what every node of the cluster says in its hello */
    uint64_t realm_logged_ms, version_logged_ms;

    atomic_uint_fast64_t held[2];   /* bytes handed to groups, not yet released, by lane */
    pthread_rwlock_t groups_lock;   /* prefers its writer: a leave is not starved by reads */
    member *groups[MAX_GROUPS];
    size_t ngroups;
};

static void count(raft_net *n, uint64_t *field, uint64_t by)
{
    pthread_mutex_lock(&n->mu);
    *field += by;
    pthread_mutex_unlock(&n->mu);
}

/* Under n->mu: p's writer is to end (the net stops, or p was retired). */
static bool ending(raft_net *n, const peer *p)
{
    return atomic_load(&n->closing) || p->retired;
}

bool raft_net_budget_take(atomic_uint_fast64_t *used, uint64_t max, uint64_t len)
{
    uint64_t before = atomic_fetch_add(used, len);
    if (before == 0 || before + len <= max)
        return true;
    atomic_fetch_sub(used, len);
    return false;
}

bool raft_net_hold(raft_net *n, raft_net_lane lane, uint64_t len)
{
    return raft_net_budget_take(&n->held[lane == RAFT_NET_IMAGES], n->max_held, len);
}

void raft_net_release(raft_net *n, raft_net_lane lane, uint64_t len)
{
    atomic_fetch_sub(&n->held[lane == RAFT_NET_IMAGES], len);
}

bool raft_net_has_tls(const raft_net *n)
{
    return n->tls != NULL;
}

uint64_t raft_net_max_message(const raft_net *n, raft_net_lane lane)
{
    return n->max_record[lane == RAFT_NET_IMAGES];
}

/* A node's "a.b.c.d:port" into sa: on loopback unless the net runs TLS
 * (plain TCP cannot tell a node from whoever reaches its port). 0 or -1. */
static int node_address(const raft_net *n, const char *address, struct sockaddr_in *sa)
{
    char host[INET_ADDRSTRLEN + 1];
    if (raft_address_parse(address, sa, host, sizeof host) != 0)
        return -1;
    return n->tls != NULL || (ntohl(sa->sin_addr.s_addr) >> 24) == 127 ? 0 : -1;
}

/* All of p to fd, through tls when it is a session. 0 or -1. */
static int send_all(gnutls_session_t tls, int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t k = tls != NULL ? gnutls_record_send(tls, p, len) : send(fd, p, len, MSG_NOSIGNAL);
        if (tls != NULL ? k == GNUTLS_E_INTERRUPTED : k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* Some of len bytes (1 to len) from fd, through tls when it is a
 * session, within step_ms and by deadline_ms (time_mono_ms; 0: none); or
 * -1 (its end, an error, its timeout: GNUTLS_E_AGAIN under SO_RCVTIMEO).
 * *set_ms is the receive timeout fd has (SO_RCVTIMEO), set again only
 * when it changes: not a system call a record. */
static ssize_t recv_some(gnutls_session_t tls, int fd, uint8_t *p, size_t len,
                         uint64_t deadline_ms, unsigned step_ms, unsigned *set_ms)
{
    for (;;) {
        uint64_t now = time_mono_ms();
        if (deadline_ms != 0 && now >= deadline_ms)
            return -1;
        unsigned ms = deadline_ms != 0 && deadline_ms - now < step_ms
                          ? (unsigned)(deadline_ms - now)
                          : step_ms;
        if (ms != *set_ms) {
            struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 + 1};
            (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            *set_ms = ms;
        }
        ssize_t k = tls != NULL ? gnutls_record_recv(tls, p, len) : recv(fd, p, len, 0);
        if (tls != NULL ? k == GNUTLS_E_INTERRUPTED : k < 0 && errno == EINTR)
            continue;
        return k > 0 ? k : -1;
    }
}

/* Exactly len bytes, each read within step_ms and, with a deadline_ms,
 * all of it by then: a peer that sends a byte now and then cannot stretch
 * it. */
static int recv_by(gnutls_session_t tls, int fd, uint8_t *p, size_t len, uint64_t deadline_ms,
                   unsigned step_ms, unsigned *set_ms)
{
    while (len > 0) {
        ssize_t k = recv_some(tls, fd, p, len, deadline_ms, step_ms, set_ms);
        if (k <= 0)
            return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* Exactly len bytes of records (after the hello), through the reader's
 * read-ahead: a small record comes whole, header and body, with the one
 * read that brought its header, and the records behind it with that read
 * too (a heartbeat is one system call, not two); a body as big as the
 * read-ahead is read straight into place. The limits are recv_by's. */
static int read_records(reader *rd, uint8_t *p, size_t len, uint64_t deadline_ms,
                        unsigned step_ms)
{
    while (len > 0) {
        if (rd->ahead_len > 0) {
            size_t k = rd->ahead_len < len ? rd->ahead_len : len;
            memcpy(p, rd->ahead + rd->ahead_at, k);
            rd->ahead_at += k;
            rd->ahead_len -= k;
            p += k;
            len -= k;
            continue;
        }
        if (len >= READ_AHEAD)
            return recv_by(rd->tls, rd->fd, p, len, deadline_ms, step_ms, &rd->rcv_ms);
        ssize_t k = recv_some(rd->tls, rd->fd, rd->ahead, READ_AHEAD, deadline_ms, step_ms,
                              &rd->rcv_ms);
        if (k <= 0)
            return -1;
        rd->ahead_at = 0;
        rd->ahead_len = (size_t)k;
    }
    return 0;
}

/* All of iov[0..n) on fd (no TLS), in as few system calls as the kernel
 * takes; or -1. iov is used up. */
static int send_iov(int fd, struct iovec *iov, size_t n)
{
    while (n > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = n};
        ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        while (n > 0 && (size_t)k >= iov->iov_len) { /* the parts sent whole */
            k -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) { /* one sent in part */
            iov->iov_base = (uint8_t *)iov->iov_base + k;
            iov->iov_len -= (size_t)k;
        }
    }
    return 0;
}

/* The records of a run (take_run), in order: each record's header and
 * body, and the run's records, go out together (one segment and one
 * wake-up of the reader for a heartbeat, where a send for the header and
 * one for the body made two). Over TLS a run is corked (it is at most
 * WRITE_RUN_BYTES); a record past that goes alone, as two sends. */
static int send_run(gnutls_session_t tls, int fd, const record *run, size_t count)
{
    if (tls == NULL) {
        struct iovec iov[2 * WRITE_RUN_RECORDS];
        size_t n = 0;
        for (const record *r = run; r != NULL && n + 2 <= 2 * count; r = r->next) {
            iov[n++] = (struct iovec){.iov_base = (void *)r->header, .iov_len = RECORD_HEADER};
            iov[n++] = (struct iovec){.iov_base = r->msg, .iov_len = r->len};
        }
        return send_iov(fd, iov, n);
    }
    if (count == 1 && run->len + RECORD_HEADER > WRITE_RUN_BYTES)
        return send_all(tls, fd, run->header, RECORD_HEADER) == 0 &&
                       send_all(tls, fd, run->msg, run->len) == 0
                   ? 0
                   : -1;
    gnutls_record_cork(tls);
    bool buffered = true; /* corked, a send only buffers (it fails out of memory) */
    for (const record *r = run; r != NULL && buffered; r = r->next)
        buffered = send_all(tls, fd, r->header, RECORD_HEADER) == 0 &&
                   send_all(tls, fd, r->msg, r->len) == 0;
    /* Not GNUTLS_RECORD_WAIT, and GNUTLS_E_AGAIN is not tried again: under
     * SO_SNDTIMEO it is the node that took nothing for idle_ms, gone, as
     * for send_all; waiting on would hold the writer until TCP gives up. */
    int k;
    do
        k = gnutls_record_uncork(tls, 0);
    while (k == GNUTLS_E_INTERRUPTED);
    return buffered && k >= 0 ? 0 : -1;
}

/* A connection's TCP settings: no delay for small records, and a peer
 * that vanished without a word (no reset) is noticed within the idle
 * limit: keepalive probes, and unacknowledged data given up on. */
static void tune(const raft_net *n, int fd)
{
    int on = 1, idle = (int)(n->idle_ms / 3000) + 1, intvl = idle, cnt = 3;
    unsigned user_ms = n->idle_ms;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof user_ms);
}

/* ---- TLS between nodes ---- */

/* Mutual TLS on fd as the dialler (client) or the acceptor: the other
 * end's certificate chains to the trusted CA, checked in the handshake
 * (the acceptor's through tls_server_attach) and again after it
 * (tls_client_verified, failing closed). Whose it is, cert_names_ip
 * says. The session, or NULL. */
static gnutls_session_t tls_open(raft_net *n, int fd, bool client, unsigned ms)
{
    gnutls_session_t s;
    if (gnutls_init(&s, (client ? GNUTLS_CLIENT : GNUTLS_SERVER) | GNUTLS_NO_TICKETS) < 0)
        return NULL;
    bool ok = gnutls_priority_set_direct(s, TLS_PRIORITIES, NULL) >= 0;
    if (ok && client) {
        ok = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE,
                                    tls_server_credentials(n->tls)) >= 0;
        gnutls_session_set_verify_cert(s, NULL, 0);
    } else if (ok) {
        ok = tls_server_attach(n->tls, s) == 0;
    }
    if (ok) {
        int rc;
        gnutls_transport_set_int(s, fd);
        gnutls_handshake_set_timeout(s, ms);
        do
            rc = gnutls_handshake(s);
        while (rc == GNUTLS_E_INTERRUPTED);
        ok = rc >= 0 && tls_client_verified(s);
    }
    if (!ok) {
        gnutls_deinit(s);
        return NULL;
    }
    return s;
}

/* Whether the verified certificate the other end presented names ip (an
 * IP subjectAltName): a node is its raft host. */
static bool names_ip(void *crt, const void *ip)
{
    return gnutls_x509_crt_check_ip(crt, ip, sizeof(struct in_addr), 0) != 0;
}

static bool cert_names_ip(gnutls_session_t s, const struct in_addr *ip)
{
    return tls_peer_cert_check(s, names_ip, ip);
}

static void set_timeouts(int fd, unsigned ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* ---- groups ---- */

static bool named_locked(const raft_net *n, const char *address);

int raft_net_join(raft_net *n, uint64_t group, const char *const *nodes, size_t nnodes,
                  raft_net_deliver_fn fn, void *arg)
{
    member *m = calloc(1, sizeof *m);
    if (m == NULL || group == 0 || nnodes > RAFT_PEERS_MAX) {
        free(m);
        return -1;
    }
    *m = (member){.group = group, .fn = fn, .arg = arg, .nnodes = nnodes};
    for (size_t k = 0; k < nnodes; k++)
        if (snprintf(m->nodes[k], sizeof m->nodes[k], "%s", nodes[k]) >= (int)sizeof m->nodes[k]) {
            free(m);
            return -1;
        }
    int rc = -1;
    pthread_rwlock_wrlock(&n->groups_lock);
    bool taken = false;
    for (size_t i = 0; i < n->ngroups; i++)
        taken = taken || n->groups[i]->group == group;
    if (!taken && n->ngroups < MAX_GROUPS) {
        n->groups[n->ngroups++] = m;
        rc = 0;
    }
    pthread_rwlock_unlock(&n->groups_lock);
    if (rc != 0)
        free(m);
    return rc;
}

/* Under the groups' lock: whether a joined group names node address. */
static bool named_locked(const raft_net *n, const char *address)
{
    for (size_t i = 0; i < n->ngroups; i++)
        for (size_t k = 0; k < n->groups[i]->nnodes; k++)
            if (strcmp(n->groups[i]->nodes[k], address) == 0)
                return true;
    return false;
}

static bool among(const char *address, char (*list)[HELLO_ADDR_MAX], size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (strcmp(list[i], address) == 0)
            return true;
    return false;
}

/* Give back what the net keeps for the nodes in gone, which no group
 * names any more: their lanes (each writer ends, what it queued is
 * dropped) and the connections they opened here (closed: a node no group
 * names is not read). A group that names one again later makes its lanes
 * anew. */
static void retire(raft_net *n, char (*gone)[HELLO_ADDR_MAX], size_t k)
{
    peer *ended[MAX_PEERS];
    size_t ne = 0;
    /* A group that joined since the leave looked may name a node again:
     * its lanes and readers stay. (The groups' lock, then n->mu, as
     * name_reader takes them.) */
    pthread_rwlock_rdlock(&n->groups_lock);
    size_t still = 0;
    for (size_t i = 0; i < k; i++)
        if (!named_locked(n, gone[i]))
            memmove(gone[still++], gone[i], HELLO_ADDR_MAX);
    k = still;
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < MAX_PEERS; i++) {
        peer *p = n->peers[i];
        if (p == NULL || !among(p->address, gone, k))
            continue;
        p->retired = true;
        if (p->fd >= 0)
            shutdown(p->fd, SHUT_RDWR);
        if (p->dialing >= 0)
            shutdown(p->dialing, SHUT_RDWR);
        pthread_cond_signal(&p->cv);
        n->peers[i] = NULL;
        ended[ne++] = p;
    }
    for (size_t i = 0; i < MAX_READERS; i++) { /* the thread owns its fd: shutdown, not close */
        reader *rd = n->readers[i];
        if (rd != NULL && rd->named && rd->fd >= 0 && among(rd->from, gone, k)) {
            rd->kicked = true; /* one waiting for room stops waiting (take_reading) */
            shutdown(rd->fd, SHUT_RDWR);
        }
    }
    pthread_cond_broadcast(&n->budget_cv); /* a reader waiting for room sees its end */
    pthread_mutex_unlock(&n->mu);
    pthread_rwlock_unlock(&n->groups_lock);
    for (size_t i = 0; i < ne; i++) {
        pthread_join(ended[i]->thread, NULL);
        pthread_cond_destroy(&ended[i]->cv);
        free(ended[i]);
    }
}

void raft_net_leave(raft_net *n, uint64_t group)
{
    member *m = NULL;
    char gone[RAFT_PEERS_MAX][HELLO_ADDR_MAX];
    size_t ngone = 0;
    pthread_rwlock_wrlock(&n->groups_lock);
    for (size_t i = 0; i < n->ngroups; i++)
        if (n->groups[i]->group == group) {
            m = n->groups[i];
            n->groups[i] = n->groups[--n->ngroups];
            break;
        }
    for (size_t k = 0; m != NULL && k < m->nnodes; k++)
        if (!named_locked(n, m->nodes[k]) && !among(m->nodes[k], gone, ngone))
            snprintf(gone[ngone++], HELLO_ADDR_MAX, "%s", m->nodes[k]);
    pthread_rwlock_unlock(&n->groups_lock);
    if (m == NULL)
        return;
    /* Out of the table: no delivery starts. Wait for those running. */
    pthread_mutex_lock(&n->mu);
    while (atomic_load(&m->busy) > 0)
        pthread_cond_wait(&n->left_cv, &n->mu);
    pthread_mutex_unlock(&n->mu);
    free(m);
    if (ngone > 0)
        retire(n, gone, ngone);
}

/* One record to its group, or dropped. */
static void deliver(raft_net *n, const uint8_t *hd, uint8_t *msg, size_t len, const reader *rd)
{
    uint64_t group = le_get64(hd);
    member *m = NULL;
    pthread_rwlock_rdlock(&n->groups_lock);
    for (size_t i = 0; i < n->ngroups && m == NULL; i++)
        if (n->groups[i]->group == group) {
            m = n->groups[i];
            atomic_fetch_add(&m->busy, 1);
        }
    pthread_rwlock_unlock(&n->groups_lock);
    if (m == NULL) {
        free(msg);
        count(n, &n->st.dropped_unknown, 1);
        return;
    }
    m->fn(m->arg, le_get64(hd + 8), le_get64(hd + 16), rd->from, rd->lane, msg, len);
    pthread_mutex_lock(&n->mu);
    n->st.received++;
    if (atomic_fetch_sub(&m->busy, 1) == 1)
        pthread_cond_broadcast(&n->left_cv);
    pthread_mutex_unlock(&n->mu);
}

/* ---- reading what other nodes send ---- */

/* A refused hello counted in *count: true when it is to be logged (once
 * a minute a kind, *logged_ms its last). */
static bool refusal_to_log(raft_net *n, uint64_t *count, uint64_t *logged_ms)
{
    uint64_t now = time_mono_ms();
    pthread_mutex_lock(&n->mu);
    ++*count;
    bool say = *logged_ms == 0 || now - *logged_ms >= REFUSAL_LOG_MS;
    if (say)
        *logged_ms = now;
    pthread_mutex_unlock(&n->mu);
    return say;
}

/* A hello naming another realm. */
static void other_realm(raft_net *n, const char *from, uint64_t realm)
{
    if (refusal_to_log(n, &n->st.other_realm, &n->realm_logged_ms))
        log_error("raft net: the node at %.64s is of another cluster (realm %016llx, this "
                  "node's %016llx): nothing it sends is read. With --region-logs the realm "
                  "is the digest of the --region-split-keys a member's store was made with, "
                  "which must be the same on every member (DESIGN §6.5)",
                  from, (unsigned long long)realm, (unsigned long long)n->realm);
}

/* A hello of our magic and another version (a node of another release),
 * with the address it came from. */
static void other_version(raft_net *n, const struct sockaddr_in *from, unsigned version)
{
    char ip[INET_ADDRSTRLEN] = "?";
    if (!refusal_to_log(n, &n->st.other_version, &n->version_logged_ms))
        return;
    inet_ntop(AF_INET, &from->sin_addr, ip, sizeof ip);
    log_error("raft net: a node at %s speaks version %u of the node network's hello, this one "
              "%d: nothing it sends is read (every member runs one release)", ip, version,
              HELLO_VERSION);
}

/* The dialler's hello: magic, version, lane, its address's length, its
 * realm, its address. Under TLS its certificate must name the address's
 * host; on plain TCP the address must be a loopback one on the host it
 * connects from; and its realm must be this node's. 0 or -1. */
static int read_hello(raft_net *n, reader *rd, const struct sockaddr_in *from)
{
    uint8_t h[HELLO_HEADER];
    uint64_t by = time_mono_ms() + n->hello_ms; /* the handshake and the hello, in all */
    if (n->tls != NULL && (rd->tls = tls_open(n, rd->fd, false, n->hello_ms)) == NULL)
        return -1;
    /* An older hello is 8 bytes before the address: the first 8 tell it. */
    if (recv_by(rd->tls, rd->fd, h, 8, by, n->hello_ms, &rd->rcv_ms) != 0 ||
        memcmp(h, HELLO_MAGIC, 4) != 0)
        return -1;
    if (h[4] != HELLO_VERSION) {
        other_version(n, from, h[4]);
        return -1;
    }
    if (recv_by(rd->tls, rd->fd, h + 8, sizeof h - 8, by, n->hello_ms, &rd->rcv_ms) != 0 ||
        h[5] > RAFT_NET_IMAGES)
        return -1;
    rd->lane = h[5];
    size_t alen = (size_t)h[6] | (size_t)h[7] << 8;
    struct sockaddr_in claimed;
    if (alen == 0 || alen >= sizeof rd->from ||
        recv_by(rd->tls, rd->fd, (uint8_t *)rd->from, alen, by, n->hello_ms, &rd->rcv_ms) != 0)
        return -1;
    rd->from[alen] = '\0';
    if (node_address(n, rd->from, &claimed) != 0)
        return -1;
    bool named = rd->tls != NULL ? cert_names_ip(rd->tls, &claimed.sin_addr)
                                 : claimed.sin_addr.s_addr == from->sin_addr.s_addr;
    if (!named)
        return -1;
    /* Checked once the dialler proved its address, so that the log names
     * a node and a stranger cannot fill it. */
    uint64_t realm = le_get64(h + 8);
    if (realm != n->realm) {
        other_realm(n, rd->from, realm);
        return -1;
    }
    return 0;
}

/* A reader whose hello passed speaks for its node if a group here has a
 * member there. A node keeps one connection a lane (it dialled again
 * after losing one): an older one from it on the same lane is closed,
 * and this one is refused if a newer one already speaks for it (its
 * hello came late). 0 or -1. */
static int name_reader(raft_net *n, reader *rd)
{
    /* The groups stay as they are until it is named: a leave that makes
     * its node unknown either comes first (refused here) or after (its
     * retire sees it named, and closes it). */
    pthread_rwlock_rdlock(&n->groups_lock);
    if (!named_locked(n, rd->from)) {
        pthread_rwlock_unlock(&n->groups_lock);
        return -1;
    }
    pthread_mutex_lock(&n->mu);
    bool newer = false;
    for (size_t i = 0; i < MAX_READERS; i++) {
        reader *o = n->readers[i];
        newer = newer || (o != NULL && o != rd && o->named && !o->done && !o->kicked &&
                          o->lane == rd->lane && o->seq > rd->seq &&
                          strcmp(o->from, rd->from) == 0);
    }
    for (size_t i = 0; i < MAX_READERS && !newer; i++) {
        reader *o = n->readers[i];
        if (o != NULL && o != rd && o->named && !o->done && !o->kicked &&
            o->lane == rd->lane && strcmp(o->from, rd->from) == 0) {
            o->kicked = true;
            if (o->fd >= 0)
                shutdown(o->fd, SHUT_RDWR);
            n->st.replaced++;
        }
    }
    rd->named = !newer;
    pthread_cond_broadcast(&n->budget_cv); /* a kicked reader may wait for room */
    pthread_mutex_unlock(&n->mu);
    pthread_rwlock_unlock(&n->groups_lock);
    return newer ? -1 : 0;
}

/* Room for a record of len bytes among those being read: waits while
 * others hold it (the sender's TCP waits too). false: the net stops, or
 * this connection was replaced. */
static bool take_reading(raft_net *n, reader *rd, uint64_t len)
{
    pthread_mutex_lock(&n->mu);
    uint64_t *reading = &n->reading[rd->lane == RAFT_NET_IMAGES];
    while (!atomic_load(&n->closing) && !rd->kicked && *reading > 0 &&
           *reading + len > n->max_reading)
        pthread_cond_wait(&n->budget_cv, &n->mu);
    bool ok = !atomic_load(&n->closing) && !rd->kicked;
    if (ok)
        *reading += len;
    pthread_mutex_unlock(&n->mu);
    return ok;
}

static void give_reading(raft_net *n, const reader *rd, uint64_t len)
{
    pthread_mutex_lock(&n->mu);
    n->reading[rd->lane == RAFT_NET_IMAGES] -= len;
    pthread_cond_broadcast(&n->budget_cv);
    pthread_mutex_unlock(&n->mu);
}

static void *reader_main(void *arg)
{
    reader *rd = arg;
    raft_net *n = rd->n;
    struct sockaddr_in from;
    socklen_t flen = sizeof from;
    set_timeouts(rd->fd, n->hello_ms);
    rd->rcv_ms = n->hello_ms;
    bool ok = getpeername(rd->fd, (struct sockaddr *)&from, &flen) == 0 &&
              read_hello(n, rd, &from) == 0 && name_reader(n, rd) == 0 &&
              (rd->ahead = malloc(READ_AHEAD)) != NULL; /* a node's: read ahead */
    if (!ok)
        count(n, &n->st.refused, 1);
    /* Every read makes progress within idle_ms: a writer sends a
     * keepalive after a third of it, so only a dead or stuck node is
     * cut off. A record's body comes by a deadline too (recv_by). */
    while (ok && !atomic_load(&n->closing)) {
        uint8_t hd[RECORD_HEADER];
        if (read_records(rd, hd, sizeof hd, 0, n->idle_ms) != 0)
            break;
        uint64_t group = le_get64(hd), len = le_get64(hd + 24);
        if (group == 0 && len == 0)
            continue; /* a keepalive */
        if (group == 0 || len == 0 || len > n->max_record[rd->lane]) {
            count(n, &n->st.refused, 1);
            break;
        }
        if (!take_reading(n, rd, len))
            break;
        /* the room taken is held until the body is in: at most the idle
         * limit and len at the slowest rate a node may send at */
        uint8_t *msg = malloc((size_t)len);
        uint64_t by = time_mono_ms() + n->idle_ms + len * 1000 / MIN_BYTES_A_SEC;
        bool got = msg != NULL &&
                   read_records(rd, msg, (size_t)len, by, n->idle_ms) == 0;
        /* The room is given back before the group is handed the record,
         * which holds it from then on (raft_net_hold, before it decodes):
         * a slow delivery, say of an image, must not hold up the other
         * readers' records. */
        give_reading(n, rd, len);
        if (!got) {
            free(msg);
            break;
        }
        deliver(n, hd, msg, (size_t)len, rd);
    }
    if (rd->tls != NULL)
        gnutls_deinit(rd->tls);
    rd->tls = NULL;
    free(rd->ahead);
    rd->ahead = NULL;
    pthread_mutex_lock(&n->mu);
    close(rd->fd);
    rd->fd = -1;
    rd->done = true;
    n->st.connections--;
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

/* Join and free readers that ended (the listener's thread, or the stop). */
static void reap(raft_net *n, bool all)
{
    for (size_t i = 0; i < MAX_READERS; i++) {
        pthread_mutex_lock(&n->mu);
        reader *rd = n->readers[i];
        bool take = rd != NULL && (all || rd->done);
        if (take)
            n->readers[i] = NULL;
        pthread_mutex_unlock(&n->mu);
        if (take) {
            pthread_join(rd->thread, NULL);
            free(rd);
        }
    }
}

/* Under n->mu: whether another connection whose hello has not passed
 * yet may come from source. Whoever reaches the port can open them, and
 * each holds a thread and a slot for up to the hello's time: they get a
 * quarter of the slots, one address a few of those, so that strangers
 * cannot take the slots from the nodes. */
static bool unnamed_room(raft_net *n, struct in_addr source)
{
    size_t all = 0, from = 0;
    for (size_t i = 0; i < MAX_READERS; i++) {
        const reader *o = n->readers[i];
        bool unnamed = o != NULL && !o->named && !o->done;
        all += unnamed;
        from += unnamed && o->source.s_addr == source.s_addr;
    }
    return all < MAX_UNNAMED && from < MAX_UNNAMED_A_HOST;
}

static void accept_one(raft_net *n)
{
    struct sockaddr_in sa = {0};
    socklen_t salen = sizeof sa;
    int fd = accept4(n->lfd, (struct sockaddr *)&sa, &salen, SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE)
            time_sleep_ms(100);
        return;
    }
    tune(n, fd);
    reader *rd = calloc(1, sizeof *rd);
    size_t slot = MAX_READERS;
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < MAX_READERS && slot == MAX_READERS && rd != NULL; i++)
        if (n->readers[i] == NULL)
            slot = i;
    if (slot < MAX_READERS && !unnamed_room(n, sa.sin_addr))
        slot = MAX_READERS;
    if (slot < MAX_READERS) {
        rd->n = n;
        rd->fd = fd;
        rd->source = sa.sin_addr;
        rd->seq = ++n->accepted_seq;
        if (pthread_create(&rd->thread, NULL, reader_main, rd) == 0) {
            n->readers[slot] = rd;
            n->st.connections++;
            n->st.accepted++;
            rd = NULL;
            fd = -1;
        }
    }
    if (fd >= 0)
        n->st.refused++;
    pthread_mutex_unlock(&n->mu);
    if (fd >= 0)
        close(fd);
    free(rd);
}

static void *listen_main(void *arg)
{
    raft_net *n = arg;
    while (!atomic_load(&n->closing)) {
        struct pollfd p[2] = {{.fd = n->lfd, .events = POLLIN}, {.fd = n->wake[0], .events = POLLIN}};
        if (poll(p, 2, 1000) < 0 && errno != EINTR)
            break;
        if (p[1].revents != 0)
            break;
        if (p[0].revents != 0)
            accept_one(n);
        reap(n, false);
    }
    return NULL;
}

/* ---- writing to other nodes ---- */

/* Dial p's node from this node's host, under TLS check that it is that
 * node (its certificate names the host dialled), and say hello. The fd
 * (and *tls), or -1. */
static int dial(raft_net *n, peer *p, gnutls_session_t *tls)
{
    struct sockaddr_in to, self = n->self;
    *tls = NULL;
    if (node_address(n, p->address, &to) != 0)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    set_timeouts(fd, DIAL_MS);
    tune(n, fd);
    pthread_mutex_lock(&n->mu);
    p->dialing = fd;
    /* a stop or a retire from here on shuts fd down; one before saw
     * nothing to shut down, and would wait the whole dial */
    bool end = ending(n, p);
    pthread_mutex_unlock(&n->mu);
    size_t alen = strlen(n->address);
    uint8_t hello[HELLO_HEADER + HELLO_ADDR_MAX];
    memcpy(hello, HELLO_MAGIC, 4);
    hello[4] = HELLO_VERSION;
    hello[5] = (uint8_t)p->lane;
    hello[6] = (uint8_t)alen;
    hello[7] = (uint8_t)(alen >> 8);
    le_put64(hello + 8, n->realm);
    memcpy(hello + HELLO_HEADER, n->address, alen);
    bool ok = !end && bind(fd, (struct sockaddr *)&self, sizeof self) == 0 &&
              connect(fd, (struct sockaddr *)&to, sizeof to) == 0;
    if (ok && n->tls != NULL)
        ok = (*tls = tls_open(n, fd, true, DIAL_MS)) != NULL && cert_names_ip(*tls, &to.sin_addr);
    ok = ok && send_all(*tls, fd, hello, HELLO_HEADER + alen) == 0;
    pthread_mutex_lock(&n->mu);
    p->dialing = -1;
    pthread_mutex_unlock(&n->mu);
    if (!ok) {
        if (*tls != NULL)
            gnutls_deinit(*tls);
        *tls = NULL;
        close(fd);
        return -1;
    }
    set_timeouts(fd, n->idle_ms); /* a node that takes nothing for that long is gone */
    return fd;
}

static void drop_queue(raft_net *n, peer *p)
{
    record *r = p->head;
    while (r != NULL) {
        record *next = r->next;
        n->st.dropped_full++;
        free(r->msg);
        free(r);
        r = next;
    }
    p->head = p->tail = NULL;
    p->queued = 0;
}

static void grow_backoff(peer *p)
{
    p->backoff_ms = p->backoff_ms == 0 ? 50
                    : p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                         : p->backoff_ms * 2;
}

/* Under n->mu: close p's connection. One that did not last starts the
 * next dial later (a node that accepts and drops at once is not dialled
 * in a loop); one that did, at once. */
static void hang_up(raft_net *n, peer *p)
{
    if (p->tls != NULL)
        gnutls_deinit(p->tls);
    p->tls = NULL;
    close(p->fd);
    p->fd = -1;
    n->st.connections--;
    if (time_mono_ms() - p->up_since_ms < LIVED_MS)
        grow_backoff(p);
    else
        p->backoff_ms = 0;
}

/* Under n->mu: wait until p has a record or the net stops; while
 * connected, a line quiet for a third of idle_ms gets a keepalive. true:
 * one is due. */
static bool wait_for_work(raft_net *n, peer *p)
{
    while (p->head == NULL && !ending(n, p)) {
        if (p->fd < 0) {
            pthread_cond_wait(&p->cv, &n->mu);
            continue;
        }
        struct timespec at = time_deadline(CLOCK_MONOTONIC, n->idle_ms / 3);
        if (pthread_cond_timedwait(&p->cv, &n->mu, &at) == ETIMEDOUT && p->head == NULL)
            return !ending(n, p);
    }
    return false;
}

/* Under n->mu: wait out p's backoff (the stop cuts it short). */
static void wait_backoff(raft_net *n, peer *p)
{
    struct timespec at = time_deadline(CLOCK_MONOTONIC, p->backoff_ms);
    while (!ending(n, p) && pthread_cond_timedwait(&p->cv, &n->mu, &at) != ETIMEDOUT)
        ;
}

/* Under n->mu: the records to send in one go, taken off p's queue: the
 * first, and those behind it while the run stays within WRITE_RUN_BYTES
 * and WRITE_RUN_RECORDS (the groups' messages queued while the last run
 * was being sent). */
static record *take_run(peer *p, size_t *count)
{
    record *first = p->head, *last = first;
    size_t bytes = RECORD_HEADER + first->len, k = 1;
    while (last->next != NULL && k < WRITE_RUN_RECORDS &&
           bytes + RECORD_HEADER + last->next->len <= WRITE_RUN_BYTES) {
        last = last->next;
        bytes += RECORD_HEADER + last->len;
        k++;
    }
    p->head = last->next;
    if (p->head == NULL)
        p->tail = NULL;
    last->next = NULL;
    p->queued -= bytes - k * RECORD_HEADER;
    *count = k;
    return first;
}

static void *writer_main(void *arg)
{
    peer *p = arg;
    raft_net *n = p->n;
    pthread_mutex_lock(&n->mu);
    for (;;) {
        bool keepalive = wait_for_work(n, p);
        if (ending(n, p))
            break;
        if (p->fd < 0) {
            if (p->backoff_ms > 0)
                wait_backoff(n, p);
            bool end = ending(n, p);
            pthread_mutex_unlock(&n->mu);
            gnutls_session_t tls = NULL;
            int fd = end ? -1 : dial(n, p, &tls);
            pthread_mutex_lock(&n->mu);
            if (ending(n, p)) { /* the stop's shutdown missed this fd */
                if (tls != NULL)
                    gnutls_deinit(tls);
                if (fd >= 0)
                    close(fd);
                break;
            }
            if (fd < 0) {
                /* The node is down: what waits for it is lost (Raft sends
                 * again), and the next try waits a little longer. */
                drop_queue(n, p);
                grow_backoff(p);
                continue;
            }
            p->fd = fd;
            p->tls = tls;
            p->up_since_ms = time_mono_ms();
            n->st.connections++;
            continue;
        }
        size_t count = 0;
        record *run = keepalive ? NULL : take_run(p, &count);
        int fd = p->fd;
        gnutls_session_t tls = p->tls; /* only this thread uses or ends it */
        pthread_mutex_unlock(&n->mu);
        static const uint8_t zeros[RECORD_HEADER];
        int rc = run == NULL ? send_all(tls, fd, zeros, RECORD_HEADER)
                             : send_run(tls, fd, run, count);
        while (run != NULL) {
            record *next = run->next;
            free(run->msg);
            free(run);
            run = next;
        }
        pthread_mutex_lock(&n->mu);
        if (rc != 0)
            hang_up(n, p);
        if (count > 0 && rc != 0)
            n->st.dropped_full += count;
        else
            n->st.sent += count;
    }
    if (p->fd >= 0)
        hang_up(n, p);
    drop_queue(n, p);
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

/* Under n->mu: the lane to address, made (with its writer) if new. */
static peer *peer_of(raft_net *n, const char *address, raft_net_lane lane)
{
    size_t free_slot = MAX_PEERS;
    for (size_t i = 0; i < MAX_PEERS; i++) {
        if (n->peers[i] != NULL && n->peers[i]->lane == lane &&
            strcmp(n->peers[i]->address, address) == 0)
            return n->peers[i];
        if (n->peers[i] == NULL && free_slot == MAX_PEERS)
            free_slot = i;
    }
    peer *p = calloc(1, sizeof *p);
    pthread_condattr_t ca;
    if (free_slot == MAX_PEERS || p == NULL || strlen(address) >= sizeof p->address ||
        pthread_condattr_init(&ca) != 0) {
        free(p);
        return NULL;
    }
    p->n = n;
    p->fd = -1;
    p->dialing = -1;
    p->lane = lane;
    snprintf(p->address, sizeof p->address, "%s", address);
    /* its waits are timed on the monotonic clock (keepalives, backoff) */
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    rc = rc == 0 ? pthread_cond_init(&p->cv, &ca) : rc;
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        free(p);
        return NULL;
    }
    if (pthread_create(&p->thread, NULL, writer_main, p) != 0) {
        pthread_cond_destroy(&p->cv);
        free(p);
        return NULL;
    }
    n->peers[free_slot] = p;
    return p;
}

int raft_net_send(raft_net *n, uint64_t group, uint64_t from, uint64_t to, const char *address,
                  raft_net_lane lane, uint8_t *msg, size_t len)
{
    record *r = malloc(sizeof *r);
    uint64_t max = raft_net_max_message(n, lane);
    pthread_mutex_lock(&n->mu);
    if (len > max) { /* the other end would close the connection on it */
        n->st.dropped_too_big++;
        uint64_t now = time_mono_ms();
        if (n->too_big_logged_ms == 0 || now - n->too_big_logged_ms >= TOO_BIG_LOG_MS) {
            n->too_big_logged_ms = now;
            log_warn("raft net: %s of %zu bytes for group %llu cannot go to %.64s: they are at "
                     "most %llu bytes (DESIGN §6.5)", lane == RAFT_NET_IMAGES ? "an image" : "a message",
                     len, (unsigned long long)group, address, (unsigned long long)max);
        }
    }
    peer *p = r != NULL && len <= max && !atomic_load(&n->closing) ? peer_of(n, address, lane)
                                                                   : NULL;
    /* An empty queue takes any record: one longer than the queue's bound
     * still goes in the end, alone. The images lane takes only that: one
     * image waiting for a node, besides the one being sent. */
    uint64_t bound = lane == RAFT_NET_IMAGES ? 0 : n->max_queue;
    if (p == NULL || (p->queued > 0 && p->queued + len > bound)) {
        if (len <= max)
            n->st.dropped_full++;
        pthread_mutex_unlock(&n->mu);
        free(r);
        free(msg);
        return -1;
    }
    le_put64(r->header, group);
    le_put64(r->header + 8, from);
    le_put64(r->header + 16, to);
    le_put64(r->header + 24, len);
    r->msg = msg;
    r->len = len;
    r->next = NULL;
    if (p->tail != NULL)
        p->tail->next = r;
    else
        p->head = r;
    p->tail = r;
    p->queued += len;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&n->mu);
    return 0;
}

/* ---- the node ---- */

int raft_net_start(const raft_net_config *cfg, raft_net **out, char *err, size_t errlen)
{
    raft_net *n = calloc(1, sizeof *n);
    *out = NULL;
    if (n == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    n->lfd = n->wake[0] = n->wake[1] = -1;
    n->tls = cfg->tls;
    if (strlen(cfg->address) >= sizeof n->address ||
        node_address(n, cfg->address, &n->self) != 0) {
        snprintf(err, errlen, "%.64s: %s", cfg->address,
                 n->tls != NULL ? "not an IPv4 HOST:PORT"
                                : "without peer TLS the node network runs on loopback only");
        free(n);
        return -1;
    }
    snprintf(n->address, sizeof n->address, "%s", cfg->address);
    n->self.sin_port = 0;
    n->max_queue = cfg->max_queue_bytes ? cfg->max_queue_bytes : (uint64_t)64 << 20;
    n->max_record[0] = cfg->max_record_bytes ? cfg->max_record_bytes : (uint64_t)320 << 20;
    n->max_record[1] = cfg->max_image_bytes ? cfg->max_image_bytes : (uint64_t)4 << 30;
    n->max_reading = cfg->max_reading_bytes ? cfg->max_reading_bytes : (uint64_t)1 << 30;
    n->max_held = cfg->max_held_bytes ? cfg->max_held_bytes : (uint64_t)512 << 20;
    n->idle_ms = cfg->idle_ms ? cfg->idle_ms : 30000;
    if (n->idle_ms < 30)
        n->idle_ms = 30;
    n->hello_ms = cfg->hello_ms ? cfg->hello_ms : 5000;
    n->realm = cfg->realm;
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_mutex_init(&n->mu, NULL);
    if (rc == 0 && (rc = pthread_rwlock_init(&n->groups_lock, &ra)) != 0)
        pthread_mutex_destroy(&n->mu);
    if (rc == 0 && (rc = pthread_cond_init(&n->budget_cv, NULL)) != 0) {
        pthread_rwlock_destroy(&n->groups_lock);
        pthread_mutex_destroy(&n->mu);
    }
    if (rc == 0 && (rc = pthread_cond_init(&n->left_cv, NULL)) != 0) {
        pthread_cond_destroy(&n->budget_cv);
        pthread_rwlock_destroy(&n->groups_lock);
        pthread_mutex_destroy(&n->mu);
    }
    pthread_rwlockattr_destroy(&ra);
    if (rc != 0) {
        snprintf(err, errlen, "cannot make a lock");
        free(n);
        return -1;
    }
    if (pipe2(n->wake, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot make a pipe");
        raft_net_stop(n);
        return -1;
    }
    if (cfg->listen_fd > 0 ? (n->lfd = fcntl(cfg->listen_fd, F_DUPFD_CLOEXEC, 3)) < 0
                           : raft_transport_listen(n->address, &n->lfd, err, errlen) != 0) {
        if (cfg->listen_fd > 0)
            snprintf(err, errlen, "cannot listen on %.64s: %s", n->address, strerror(errno));
        n->lfd = -1;
        raft_net_stop(n);
        return -1;
    }
    if (pthread_create(&n->listener, NULL, listen_main, n) != 0) {
        snprintf(err, errlen, "cannot start a thread");
        raft_net_stop(n);
        return -1;
    }
    n->listening = true;
    *out = n;
    return 0;
}

void raft_net_stop(raft_net *n)
{
    if (n == NULL)
        return;
    atomic_store(&n->closing, true);
    if (n->listening) {
        (void)!write(n->wake[1], "x", 1);
        pthread_join(n->listener, NULL);
    }
    if (n->lfd >= 0)
        close(n->lfd);
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < MAX_READERS; i++) /* the thread owns its fd: shutdown, not close */
        if (n->readers[i] != NULL && n->readers[i]->fd >= 0)
            shutdown(n->readers[i]->fd, SHUT_RDWR);
    pthread_cond_broadcast(&n->budget_cv);
    for (size_t i = 0; i < MAX_PEERS; i++)
        if (n->peers[i] != NULL) {
            if (n->peers[i]->fd >= 0)
                shutdown(n->peers[i]->fd, SHUT_RDWR);
            if (n->peers[i]->dialing >= 0)
                shutdown(n->peers[i]->dialing, SHUT_RDWR);
            pthread_cond_signal(&n->peers[i]->cv);
        }
    pthread_mutex_unlock(&n->mu);
    reap(n, true);
    for (size_t i = 0; i < MAX_PEERS; i++)
        if (n->peers[i] != NULL) {
            pthread_join(n->peers[i]->thread, NULL);
            pthread_cond_destroy(&n->peers[i]->cv);
            free(n->peers[i]);
        }
    for (size_t i = 0; i < n->ngroups; i++) /* groups that never left: nothing delivers now */
        free(n->groups[i]);
    if (n->wake[0] >= 0)
        close(n->wake[0]);
    if (n->wake[1] >= 0)
        close(n->wake[1]);
    pthread_cond_destroy(&n->left_cv);
    pthread_cond_destroy(&n->budget_cv);
    pthread_rwlock_destroy(&n->groups_lock);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

void raft_net_get_stats(raft_net *n, raft_net_stats *st)
{
    pthread_mutex_lock(&n->mu);
    *st = n->st;
    st->lanes = 0;
    for (size_t i = 0; i < MAX_PEERS; i++)
        st->lanes += n->peers[i] != NULL;
    pthread_mutex_unlock(&n->mu);
}
