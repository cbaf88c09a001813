/*
 * raft_net.c — see raft_net.h.
 *
 * Threads: a listener; a reader per connection another node opened; a
 * writer per node this one sends to (it dials, says hello, then writes
 * its queue). Groups are looked up under a read lock held while a record
 * is delivered, so raft_net_leave (the write lock) returns only once no
 * delivery to that group runs.
 */
#include "raft_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "le.h"
#include "log.h"
#include "raft_transport.h"
#include "timeutil.h"

#define HELLO_MAGIC "pcRN"
#define HELLO_VERSION 1
#define HELLO_ADDR_MAX RAFT_PEER_ADDR_MAX
#define RECORD_HEADER 32
#define MAX_GROUPS 4096
#define MAX_PEERS 256          /* nodes this one sends to */
#define MAX_READERS 256        /* connections other nodes opened */
#define HELLO_MS 5000
#define DIAL_MS 2000
/* Bytes of records being read at once, by every reader: past it a
 * connection that announces another record is closed (a peer that sends
 * more waits for nothing: Raft sends again). */
#define READING_MAX ((uint64_t)1 << 30)

typedef struct record {
    uint8_t header[RECORD_HEADER];
    uint8_t *msg;
    size_t len;
    struct record *next;
} record;

typedef struct {
    raft_net *n;
    char address[HELLO_ADDR_MAX];
    pthread_t thread;
    pthread_cond_t cv;          /* under n->mu: records queued, or the stop */
    record *head, *tail;
    uint64_t queued;            /* bytes */
    int fd;                     /* the writer's, -1 */
} peer;

typedef struct {
    raft_net *n;
    pthread_t thread;
    int fd;
    bool done;                  /* under n->mu: the thread ended; the listener joins it */
    char from[HELLO_ADDR_MAX];  /* the node's address, from its hello */
} reader;

typedef struct {
    uint64_t group;
    raft_net_deliver_fn fn;
    void *arg;
} member;

struct raft_net {
    char address[HELLO_ADDR_MAX];
    struct sockaddr_in self;    /* host, port 0: what writers bind to */
    uint64_t max_queue, max_record;
    int lfd, wake[2];
    pthread_t listener;
    bool listening;
    atomic_bool closing;

    pthread_mutex_t mu;         /* peers, readers, counters */
    peer *peers[MAX_PEERS];
    reader *readers[MAX_READERS];
    raft_net_stats st;

    atomic_uint_fast64_t reading;   /* bytes being read (READING_MAX) */
    pthread_rwlock_t groups_lock;   /* prefers its writer: a leave is not starved by reads */
    member groups[MAX_GROUPS];
    size_t ngroups;
};

static void count(raft_net *n, uint64_t *field, uint64_t by)
{
    pthread_mutex_lock(&n->mu);
    *field += by;
    pthread_mutex_unlock(&n->mu);
}

/* "a.b.c.d:port" on loopback into sa. 0 or -1. */
static int loopback_address(const char *address, struct sockaddr_in *sa)
{
    char host[INET_ADDRSTRLEN + 1];
    const char *colon = strrchr(address, ':');
    if (colon == NULL || (size_t)(colon - address) >= sizeof host)
        return -1;
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (*end != '\0' || port < 1 || port > 65535 || inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return -1;
    return (ntohl(sa->sin_addr.s_addr) >> 24) == 127 ? 0 : -1;
}

/* All of p to fd, or -1. */
static int send_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* Exactly len bytes from fd, or -1 (its end, an error, its timeout). */
static int recv_all(int fd, uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t k = recv(fd, p, len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

static void set_timeouts(int fd, unsigned ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* ---- reading what other nodes send ---- */

/* The dialler's hello: magic, version, its address (length, bytes). It
 * must claim a loopback address on the host it connects from. 0 or -1. */
static int read_hello(reader *rd, const struct sockaddr_in *from)
{
    uint8_t h[8];
    if (recv_all(rd->fd, h, sizeof h) != 0 || memcmp(h, HELLO_MAGIC, 4) != 0 ||
        h[4] != HELLO_VERSION || h[5] != 0)
        return -1;
    size_t alen = (size_t)h[6] | (size_t)h[7] << 8;
    struct sockaddr_in claimed;
    if (alen == 0 || alen >= sizeof rd->from || recv_all(rd->fd, (uint8_t *)rd->from, alen) != 0)
        return -1;
    rd->from[alen] = '\0';
    if (loopback_address(rd->from, &claimed) != 0 ||
        claimed.sin_addr.s_addr != from->sin_addr.s_addr)
        return -1;
    return 0;
}

/* One record to its group (under the groups' read lock), or dropped. */
static void deliver(raft_net *n, const uint8_t *hd, uint8_t *msg, size_t len, const char *from)
{
    uint64_t group = le_get64(hd);
    pthread_rwlock_rdlock(&n->groups_lock);
    for (size_t i = 0; i < n->ngroups; i++)
        if (n->groups[i].group == group) {
            n->groups[i].fn(n->groups[i].arg, le_get64(hd + 8), le_get64(hd + 16), from, msg, len);
            pthread_rwlock_unlock(&n->groups_lock);
            count(n, &n->st.received, 1);
            return;
        }
    pthread_rwlock_unlock(&n->groups_lock);
    free(msg);
    count(n, &n->st.dropped_unknown, 1);
}

static void *reader_main(void *arg)
{
    reader *rd = arg;
    raft_net *n = rd->n;
    struct sockaddr_in from;
    socklen_t flen = sizeof from;
    set_timeouts(rd->fd, HELLO_MS);
    bool ok = getpeername(rd->fd, (struct sockaddr *)&from, &flen) == 0 &&
              read_hello(rd, &from) == 0;
    if (!ok)
        count(n, &n->st.refused, 1);
    set_timeouts(rd->fd, 0); /* a quiet node is no fault: keepalive finds a dead one */
    while (ok && !atomic_load(&n->closing)) {
        uint8_t hd[RECORD_HEADER];
        if (recv_all(rd->fd, hd, sizeof hd) != 0)
            break;
        uint64_t len = le_get64(hd + 24);
        if (len == 0 || len > n->max_record ||
            atomic_fetch_add(&n->reading, len) + len > READING_MAX) {
            if (len > 0 && len <= n->max_record)
                atomic_fetch_sub(&n->reading, len);
            count(n, &n->st.refused, 1);
            break;
        }
        uint8_t *msg = malloc((size_t)len);
        bool got = msg != NULL && recv_all(rd->fd, msg, (size_t)len) == 0;
        atomic_fetch_sub(&n->reading, len);
        if (!got) {
            free(msg);
            break;
        }
        deliver(n, hd, msg, (size_t)len, rd->from);
    }
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

static void accept_one(raft_net *n)
{
    int fd = accept4(n->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE)
            time_sleep_ms(100);
        return;
    }
    int on = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    reader *rd = calloc(1, sizeof *rd);
    size_t slot = MAX_READERS;
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < MAX_READERS && slot == MAX_READERS && rd != NULL; i++)
        if (n->readers[i] == NULL)
            slot = i;
    if (slot < MAX_READERS) {
        rd->n = n;
        rd->fd = fd;
        if (pthread_create(&rd->thread, NULL, reader_main, rd) == 0) {
            n->readers[slot] = rd;
            n->st.connections++;
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

/* Dial p's node from this node's host and say hello. The fd, or -1. */
static int dial(raft_net *n, peer *p)
{
    struct sockaddr_in to, self = n->self;
    if (loopback_address(p->address, &to) != 0)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;
    if (fd < 0)
        return -1;
    set_timeouts(fd, DIAL_MS);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    size_t alen = strlen(n->address);
    uint8_t hello[8 + HELLO_ADDR_MAX];
    memcpy(hello, HELLO_MAGIC, 4);
    hello[4] = HELLO_VERSION;
    hello[5] = 0;
    hello[6] = (uint8_t)alen;
    hello[7] = (uint8_t)(alen >> 8);
    memcpy(hello + 8, n->address, alen);
    if (bind(fd, (struct sockaddr *)&self, sizeof self) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0 || send_all(fd, hello, 8 + alen) != 0) {
        close(fd);
        return -1;
    }
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

static void *writer_main(void *arg)
{
    peer *p = arg;
    raft_net *n = p->n;
    unsigned backoff = 0;
    pthread_mutex_lock(&n->mu);
    for (;;) {
        while (p->head == NULL && !atomic_load(&n->closing))
            pthread_cond_wait(&p->cv, &n->mu);
        if (atomic_load(&n->closing))
            break;
        if (p->fd < 0) {
            pthread_mutex_unlock(&n->mu);
            if (backoff > 0)
                time_sleep_ms(backoff);
            int fd = dial(n, p);
            pthread_mutex_lock(&n->mu);
            if (fd < 0) {
                /* The node is down: what waits for it is lost (Raft sends
                 * again), and the next try waits a little longer. */
                drop_queue(n, p);
                backoff = backoff == 0 ? 50 : backoff * 2 > 1000 ? 1000 : backoff * 2;
                continue;
            }
            backoff = 0;
            p->fd = fd;
            n->st.connections++;
        }
        record *r = p->head;
        p->head = r->next;
        if (p->head == NULL)
            p->tail = NULL;
        p->queued -= r->len;
        int fd = p->fd;
        pthread_mutex_unlock(&n->mu);
        int rc = send_all(fd, r->header, RECORD_HEADER) == 0 ? send_all(fd, r->msg, r->len) : -1;
        free(r->msg);
        free(r);
        pthread_mutex_lock(&n->mu);
        if (rc != 0) {
            close(p->fd);
            p->fd = -1;
            n->st.connections--;
            n->st.dropped_full++;
        } else {
            n->st.sent++;
        }
    }
    if (p->fd >= 0) {
        close(p->fd);
        p->fd = -1;
        n->st.connections--;
    }
    drop_queue(n, p);
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

/* Under n->mu: the peer for address, made (with its writer) if new. */
static peer *peer_of(raft_net *n, const char *address)
{
    size_t free_slot = MAX_PEERS;
    for (size_t i = 0; i < MAX_PEERS; i++) {
        if (n->peers[i] != NULL && strcmp(n->peers[i]->address, address) == 0)
            return n->peers[i];
        if (n->peers[i] == NULL && free_slot == MAX_PEERS)
            free_slot = i;
    }
    peer *p = calloc(1, sizeof *p);
    if (free_slot == MAX_PEERS || p == NULL || strlen(address) >= sizeof p->address) {
        free(p);
        return NULL;
    }
    p->n = n;
    p->fd = -1;
    snprintf(p->address, sizeof p->address, "%s", address);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->thread, NULL, writer_main, p) != 0) {
        pthread_cond_destroy(&p->cv);
        free(p);
        return NULL;
    }
    n->peers[free_slot] = p;
    return p;
}

int raft_net_send(raft_net *n, uint64_t group, uint64_t from, uint64_t to, const char *address,
                  uint8_t *msg, size_t len)
{
    record *r = malloc(sizeof *r);
    pthread_mutex_lock(&n->mu);
    peer *p = r != NULL && !atomic_load(&n->closing) ? peer_of(n, address) : NULL;
    if (p == NULL || p->queued + len > n->max_queue) {
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

/* ---- groups ---- */

int raft_net_join(raft_net *n, uint64_t group, raft_net_deliver_fn fn, void *arg)
{
    int rc = -1;
    pthread_rwlock_wrlock(&n->groups_lock);
    bool taken = false;
    for (size_t i = 0; i < n->ngroups; i++)
        taken = taken || n->groups[i].group == group;
    if (!taken && n->ngroups < MAX_GROUPS) {
        n->groups[n->ngroups++] = (member){group, fn, arg};
        rc = 0;
    }
    pthread_rwlock_unlock(&n->groups_lock);
    return rc;
}

void raft_net_leave(raft_net *n, uint64_t group)
{
    pthread_rwlock_wrlock(&n->groups_lock);
    for (size_t i = 0; i < n->ngroups; i++)
        if (n->groups[i].group == group) {
            n->groups[i] = n->groups[--n->ngroups];
            break;
        }
    pthread_rwlock_unlock(&n->groups_lock);
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
    if (strlen(cfg->address) >= sizeof n->address ||
        loopback_address(cfg->address, &n->self) != 0) {
        snprintf(err, errlen, "the node network runs on loopback addresses only for now: %.64s",
                 cfg->address);
        free(n);
        return -1;
    }
    snprintf(n->address, sizeof n->address, "%s", cfg->address);
    n->self.sin_port = 0;
    n->max_queue = cfg->max_queue_bytes ? cfg->max_queue_bytes : (uint64_t)64 << 20;
    n->max_record = cfg->max_record_bytes ? cfg->max_record_bytes : (uint64_t)320 << 20;
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    if (pthread_mutex_init(&n->mu, NULL) != 0 || pthread_rwlock_init(&n->groups_lock, &ra) != 0) {
        pthread_rwlockattr_destroy(&ra);
        snprintf(err, errlen, "cannot make a lock");
        free(n);
        return -1;
    }
    pthread_rwlockattr_destroy(&ra);
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
    for (size_t i = 0; i < MAX_PEERS; i++)
        if (n->peers[i] != NULL) {
            if (n->peers[i]->fd >= 0)
                shutdown(n->peers[i]->fd, SHUT_RDWR);
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
    if (n->wake[0] >= 0)
        close(n->wake[0]);
    if (n->wake[1] >= 0)
        close(n->wake[1]);
    pthread_rwlock_destroy(&n->groups_lock);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

void raft_net_get_stats(raft_net *n, raft_net_stats *st)
{
    pthread_mutex_lock(&n->mu);
    *st = n->st;
    pthread_mutex_unlock(&n->mu);
}
