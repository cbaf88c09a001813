/*
 * watchers.c — the change feed under load: --watchers connections follow
 * GET /v1/watch?prefix=PREFIX while --writers connections write fresh keys
 * under it at --rate writes a second in all (open loop: each write is sent
 * on its schedule, whatever the answers), each value the wall clock of
 * its send in ns. A watcher's delivery latency of a change is the time
 * from the write's send to the line's arrival; every watcher should get
 * every acknowledged write.
 *
 *   watchers --url http://127.0.0.1:8080 --watchers 1000 --writers 16
 *            --rate 2000 --seconds 10 [--prefix wb/] [--pid N]
 *
 * Prints one row: writes sent, acknowledged and their p50/p99 latency,
 * lines delivered against watchers × acknowledged, delivery p50/p99/max,
 * watchers that ended early, and the service's RSS (--pid) at the end.
 * One thread with epoll for everything: a watcher costs a socket and a
 * small buffer here.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Latencies in µs, kept whole (a run's worth) and sorted at the end. */
typedef struct {
    uint64_t *v;
    size_t n, cap;
} lat;

static void lat_add(lat *l, uint64_t us)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1 << 16;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (l->v == NULL)
            abort();
    }
    l->v[l->n++] = us;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(lat *l, double p)
{
    if (l->n == 0)
        return NAN;
    size_t i = (size_t)(p / 100.0 * (double)(l->n - 1));
    return (double)l->v[i] / 1000.0; /* ms */
}

typedef struct conn {
    int fd;
    bool watcher, headers_done, ended;
    char in[65536];
    size_t inlen;
    /* chunked body: bytes left of the current chunk (0: a size line next) */
    size_t chunk_left;
    char line[8192];
    size_t linelen;
    uint64_t lines;
    /* writer: the send time of the write in flight (0: none) */
    uint64_t sent_ns;
} conn;

static struct sockaddr_in addr;
static char host[64];
static const char *prefix = "wb/";
static lat write_lat, deliver_lat;
static uint64_t delivered, acked, sent, failed;

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* A watcher's line: a put of ours carries its send time ("t<ns>"). */
static void take_line(conn *c, const char *p, size_t n, uint64_t now)
{
    c->lines++;
    const char *v = memmem(p, n, "\"value\":\"t", 10);
    if (v == NULL)
        return;
    uint64_t t = strtoull(v + 10, NULL, 10);
    if (t > 0 && now > t)
        lat_add(&deliver_lat, (now - t) / 1000);
    delivered++;
}

/* Bytes of a watcher's chunked body: chunks into lines. */
static void watcher_bytes(conn *c, uint64_t now)
{
    size_t i = 0;
    if (!c->headers_done) {
        char *e = memmem(c->in, c->inlen, "\r\n\r\n", 4);
        if (e == NULL)
            return;
        if (strncmp(c->in, "HTTP/1.1 200", 12) != 0) {
            c->ended = true;
            return;
        }
        c->headers_done = true;
        i = (size_t)(e - c->in) + 4;
    }
    while (i < c->inlen) {
        if (c->chunk_left == 0) {
            char *e = memmem(c->in + i, c->inlen - i, "\r\n", 2);
            if (e == NULL)
                break;
            if (e == c->in + i) { /* the CRLF after a chunk's data */
                i += 2;
                continue;
            }
            c->chunk_left = strtoul(c->in + i, NULL, 16);
            i = (size_t)(e - c->in) + 2;
            if (c->chunk_left == 0) {
                c->ended = true;
                break;
            }
            continue;
        }
        size_t take = c->inlen - i < c->chunk_left ? c->inlen - i : c->chunk_left;
        for (size_t k = 0; k < take; k++) {
            char ch = c->in[i + k];
            if (ch == '\n') {
                take_line(c, c->line, c->linelen, now);
                c->linelen = 0;
            } else if (c->linelen < sizeof c->line) {
                c->line[c->linelen++] = ch;
            }
        }
        i += take;
        c->chunk_left -= take;
    }
    memmove(c->in, c->in + i, c->inlen - i);
    c->inlen -= i;
}

/* A writer's answer: one status line and a Content-Length body. */
static void writer_bytes(conn *c, uint64_t now)
{
    char *e = memmem(c->in, c->inlen, "\r\n\r\n", 4);
    if (e == NULL || c->sent_ns == 0)
        return;
    char *cl = memmem(c->in, (size_t)(e - c->in), "Content-Length: ", 16);
    size_t body = cl ? strtoul(cl + 16, NULL, 10) : 0, whole = (size_t)(e - c->in) + 4 + body;
    if (c->inlen < whole)
        return;
    if (strncmp(c->in, "HTTP/1.1 200", 12) == 0) {
        acked++;
        lat_add(&write_lat, (now - c->sent_ns) / 1000);
    } else {
        failed++;
    }
    c->sent_ns = 0;
    memmove(c->in, c->in + whole, c->inlen - whole);
    c->inlen -= whole;
}

int main(int argc, char **argv)
{
    const char *url = "http://127.0.0.1:8080";
    long nwatch = 100, nwrite = 8, rate = 1000, seconds = 10, pid = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--url")) url = argv[i + 1];
        else if (!strcmp(argv[i], "--watchers")) nwatch = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--writers")) nwrite = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--rate")) rate = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--prefix")) prefix = argv[i + 1];
        else if (!strcmp(argv[i], "--pid")) pid = atol(argv[i + 1]);
        else { fprintf(stderr, "watchers: unknown option %s\n", argv[i]); return 2; }
    }
    int port = 0;
    if (sscanf(url, "http://%63[^:]:%d", host, &port) != 2 || nwatch < 0 || nwrite < 1 ||
        rate < 1 || seconds < 1) {
        fprintf(stderr, "watchers: bad options\n");
        return 2;
    }
    struct rlimit rl = {65536, 65536};
    setrlimit(RLIMIT_NOFILE, &rl);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, host, &addr.sin_addr);
    long n = nwatch + nwrite;
    conn *cs = calloc((size_t)n, sizeof *cs);
    int ep = epoll_create1(0);
    char req[512];
    for (long i = 0; i < n; i++) {
        conn *c = &cs[i];
        c->watcher = i < nwatch;
        if ((c->fd = dial()) < 0) {
            fprintf(stderr, "watchers: cannot connect\n");
            return 1;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    /* Let the connections complete, then ask for the streams. */
    struct timespec settle = {0, 200000000};
    nanosleep(&settle, NULL);
    for (long i = 0; i < nwatch; i++) {
        int len = snprintf(req, sizeof req,
                           "GET /v1/watch?prefix=%s HTTP/1.1\r\nHost: %s\r\n\r\n", prefix, host);
        send_all(cs[i].fd, req, (size_t)len);
    }
    nanosleep(&settle, NULL);
    uint64_t start = now_ns(CLOCK_MONOTONIC), end = start + (uint64_t)seconds * 1000000000u;
    uint64_t every = 1000000000u / (uint64_t)rate, next = start, seq = 0;
    struct epoll_event evs[256];
    uint64_t drain_until = end + 3000000000u; /* deliveries of the last writes */
    for (;;) {
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        if (now >= drain_until)
            break;
        /* Writes due: on a writer with none in flight (else counted late). */
        while (now < end && next <= now) {
            conn *w = NULL;
            for (long k = 0; k < nwrite && w == NULL; k++) {
                conn *c = &cs[nwatch + (long)((seq + (uint64_t)k) % (uint64_t)nwrite)];
                if (c->sent_ns == 0)
                    w = c;
            }
            if (w == NULL)
                break; /* every writer busy: the schedule slips */
            char body[64];
            int bl = snprintf(body, sizeof body, "{\"value\":\"t%llu\"}",
                              (unsigned long long)now_ns(CLOCK_REALTIME));
            int len = snprintf(req, sizeof req,
                               "PUT /v1/kv/%s%llu HTTP/1.1\r\nHost: %s\r\n"
                               "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                               prefix, (unsigned long long)seq, host, bl, body);
            w->sent_ns = now;
            send_all(w->fd, req, (size_t)len);
            sent++;
            seq++;
            next += every;
        }
        int k = epoll_wait(ep, evs, 256, 1);
        uint64_t wall = now_ns(CLOCK_REALTIME);
        for (int i = 0; i < k; i++) {
            conn *c = evs[i].data.ptr;
            ssize_t r = read(c->fd, c->in + c->inlen, sizeof c->in - c->inlen);
            if (r <= 0) {
                if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                    c->ended = true;
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                }
                continue;
            }
            c->inlen += (size_t)r;
            if (c->watcher)
                watcher_bytes(c, wall);
            else
                writer_bytes(c, now_ns(CLOCK_MONOTONIC));
        }
    }
    long ended = 0;
    for (long i = 0; i < nwatch; i++)
        ended += cs[i].ended;
    qsort(write_lat.v, write_lat.n, sizeof(uint64_t), cmp_u64);
    qsort(deliver_lat.v, deliver_lat.n, sizeof(uint64_t), cmp_u64);
    long rss_kb = 0;
    if (pid > 0) {
        char path[64], line[256];
        snprintf(path, sizeof path, "/proc/%ld/status", pid);
        FILE *f = fopen(path, "r");
        while (f != NULL && fgets(line, sizeof line, f) != NULL)
            if (sscanf(line, "VmRSS: %ld", &rss_kb) == 1)
                break;
        if (f != NULL)
            fclose(f);
    }
    double expect = (double)acked * (double)nwatch;
    printf("| %ld | %ld | %.0f | %.1f | %.1f | %.0f%% | %.1f | %.1f | %.1f | %ld | %.0f |\n",
           nwatch, rate, (double)acked / (double)seconds, pct(&write_lat, 50), pct(&write_lat, 99),
           expect > 0 ? 100.0 * (double)delivered / expect : 100.0, pct(&deliver_lat, 50),
           pct(&deliver_lat, 99), pct(&deliver_lat, 100), ended, (double)rss_kb / 1024.0);
    fprintf(stderr, "watchers: sent %llu writes, %llu acknowledged, %llu failed; %llu lines "
            "delivered of %.0f\n", (unsigned long long)sent, (unsigned long long)acked,
            (unsigned long long)failed, (unsigned long long)delivered, expect);
    for (long i = 0; i < n; i++)
        close(cs[i].fd);
    free(cs);
    free(write_lat.v);
    free(deliver_lat.v);
    return 0;
}
