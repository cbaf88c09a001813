/*
 * loadgen.c — closed-loop HTTP/1.1 load generator for the benchmarks:
 * percolator-service, percolator-oracle, etcd's HTTP/JSON gateway and an
 * empty libmicrohttpd server, all driven by the same code.
 *
 * Each connection is a keep-alive TCP socket with one request in flight
 * (no pipelining). Client threads (--threads, default 1) each own an epoll
 * instance and a share of the connections, so the client costs little
 * next to the server: no libcurl, no JSON library on the hot path, one
 * write() and usually one read() per request.
 *
 * An "operation" is what a row counts: one request for the simple
 * workloads, a whole transaction (several requests) for the session and
 * transfer workloads. Latency is per operation, from the first byte sent
 * to the last byte of the last answer, kept in a log-linear histogram
 * (~3% resolution).
 *
 *   loadgen --url http://127.0.0.1:8080 --workload pc-get --conns 64
 *           --seconds 5 [--keys 100000] [--label TEXT] [--format row|kv]
 *           [--window W]
 *   --window W: also one line per W seconds of the run ("window=I ..."
 *   in kv format: its operations per second, p50, p99, p99.9, errors),
 *   before the summary: a soak's latency over time.
 *   loadgen --free-port       print a loopback TCP port free right now
 *
 * Workloads (pc- percolator-service, etcd- etcd's gateway):
 *   pc-get / etcd-get       point read of a random preloaded key k%08d
 *   pc-put / etcd-put       autocommit write of a distinct key (pc-put: of one of
 *                           --rewrite keys per connection, in turn, when given;
 *                           attached to lease --lease when given)
 *   pc-keepalive            POST /v1/leases/{--lease}/keepalive
 *   pc-txn / etcd-txn       one-shot: condition "key a exists", write a and b
 *   pc-session              begin, read a, read b, write a, write b, commit
 *   pc-xfer                 the same on --hot hot keys, moving 1 from a to b
 *   pc-xfer-cas / etcd-xfer read a, read b, conditional txn on both versions
 *   pc-load / etcd-load     preload keys [--from, --keys) in batched txns
 *   pc-hot / etcd-hot       preload the --hot hot keys with 1000000 each
 *   oracle                  POST /v1/timestamps?count=--count
 *   plain                   GET --path (an empty server's fixed answer)
 * A 409 (percolator) or "succeeded":false (etcd) ends an operation as
 * aborted: counted apart, and for sessions a rollback is sent.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- */
/* options                                                           */

typedef enum {
    W_PC_GET, W_PC_PUT, W_PC_TXN, W_PC_SESSION, W_PC_XFER, W_PC_XFER_CAS, W_PC_LOAD, W_PC_HOT,
    W_ETCD_GET, W_ETCD_PUT, W_ETCD_TXN, W_ETCD_XFER, W_ETCD_LOAD, W_ETCD_HOT,
    W_ORACLE, W_PLAIN, W_PC_KEEPALIVE,
} wl_kind;

static const struct { const char *name; wl_kind k; } WL_NAMES[] = {
    {"pc-get", W_PC_GET}, {"pc-put", W_PC_PUT}, {"pc-txn", W_PC_TXN},
    {"pc-session", W_PC_SESSION}, {"pc-xfer", W_PC_XFER}, {"pc-xfer-cas", W_PC_XFER_CAS},
    {"pc-load", W_PC_LOAD}, {"pc-hot", W_PC_HOT}, {"etcd-get", W_ETCD_GET},
    {"etcd-put", W_ETCD_PUT}, {"etcd-txn", W_ETCD_TXN}, {"etcd-xfer", W_ETCD_XFER},
    {"etcd-load", W_ETCD_LOAD}, {"etcd-hot", W_ETCD_HOT}, {"oracle", W_ORACLE},
    {"plain", W_PLAIN}, {"pc-keepalive", W_PC_KEEPALIVE},
};

static struct {
    char host[64];
    int port;
    wl_kind wl;
    int conns, threads;
    double seconds;
    unsigned window; /* --window: seconds per window line (0: none) */
    unsigned long keys, from, batch, hot, count, value_size, rewrite;
    unsigned long long lease;
    const char *label, *format, *path, *tag;
} opt = {
    .conns = 1, .threads = 1, .seconds = 5, .keys = 100000, .batch = 500, .hot = 10,
    .count = 1, .value_size = 100, .label = "", .format = "row", .path = "/", .tag = "r",
};

static char value_text[1024]; /* value_size 'v' characters */
static char value_b64[1400];  /* the same, base64 */

/* ---------------------------------------------------------------- */
/* small helpers                                                     */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t b64enc(const void *src, size_t n, char *dst)
{
    const unsigned char *s = src;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        dst[o++] = B64[v >> 18 & 63];
        dst[o++] = B64[v >> 12 & 63];
        dst[o++] = i + 1 < n ? B64[v >> 6 & 63] : '=';
        dst[o++] = i + 2 < n ? B64[v & 63] : '=';
    }
    dst[o] = '\0';
    return o;
}

static size_t b64dec(const char *src, size_t n, char *dst)
{
    unsigned v = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n && src[i] != '='; i++) {
        const char *p = strchr(B64, src[i]);
        if (!p || !*p)
            break;
        v = v << 6 | (unsigned)(p - B64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            dst[o++] = (char)(v >> bits & 255);
        }
    }
    dst[o] = '\0';
    return o;
}

/* The string value of "name":"..." (or the number of "name":N) in a JSON
 * text; a tiny scanner for the few fields the workloads need. */
static bool json_field(const char *j, size_t n, const char *name, char *out, size_t outlen)
{
    char pat[64];
    int pl = snprintf(pat, sizeof pat, "\"%s\":", name);
    const char *p = memmem(j, n, pat, (size_t)pl);
    if (!p)
        return false;
    p += pl;
    const char *end = j + n;
    bool quoted = p < end && *p == '"';
    if (quoted)
        p++;
    size_t o = 0;
    while (p < end && o + 1 < outlen && (quoted ? *p != '"' : (*p != ',' && *p != '}')))
        out[o++] = *p++;
    out[o] = '\0';
    return true;
}

/* ---------------------------------------------------------------- */
/* histogram: 32 sub-buckets per power of two of nanoseconds          */

#define HSUB 32
#define HBUCKETS (64 * HSUB)

typedef struct hist {
    uint64_t b[HBUCKETS];
    uint64_t n;
} hist;

static unsigned hidx(uint64_t v)
{
    if (v < HSUB)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned sub = (unsigned)(v >> (msb - 5)) & (HSUB - 1);
    return (msb - 4) * HSUB + sub;
}

static double hval(unsigned i)
{
    if (i < HSUB)
        return i;
    unsigned msb = i / HSUB + 4, sub = i % HSUB;
    double lo = (double)((uint64_t)(HSUB + sub) << (msb - 5));
    return lo + (double)(1ull << (msb - 5)) / 2; /* middle of the bucket */
}

static void hadd(hist *h, uint64_t v)
{
    h->b[hidx(v)]++;
    h->n++;
}

static double hpct(const hist *h, double p)
{
    if (h->n == 0)
        return 0;
    uint64_t want = (uint64_t)(p * (double)h->n + 0.5), seen = 0;
    if (want < 1)
        want = 1;
    for (unsigned i = 0; i < HBUCKETS; i++) {
        seen += h->b[i];
        if (seen >= want)
            return hval(i);
    }
    return 0;
}

/* ---------------------------------------------------------------- */
/* connections                                                       */

typedef enum { OP_MORE, OP_DONE, OP_ABORT, OP_ERROR } op_result;

typedef struct conn {
    int fd, id;
    struct thr *t;
    uint64_t rng, seq;
    /* request */
    char *w;
    size_t wlen, woff, wcap;
    /* response */
    char *r;
    size_t rlen, rcap;
    /* operation state */
    int step;
    bool aborting;
    uint64_t op_t0;
    unsigned long ka, kb, lo;
    char txn[96];
    long va, vb;
    char ca[32], cb[32];
} conn;

typedef struct thr {
    int ep;
    conn *c;
    int n;
    uint64_t deadline;
    uint64_t done, aborted, errors, requests;
    hist h;
    hist *win;             /* --window: a histogram per window */
    uint64_t *win_errors;  /* and the errors in each */
    pthread_t tid;
    unsigned long load_next, load_end; /* pc-load / etcd-load: shared range of this thread */
} thr;

static void die(const char *m)
{
    perror(m);
    exit(1);
}

static void wreserve(conn *c, size_t n)
{
    if (n > c->wcap) {
        c->wcap = n * 2;
        if (!(c->w = realloc(c->w, c->wcap)))
            die("realloc");
    }
}

/* Queue a request: method, path, optional JSON body. */
static void req(conn *c, const char *method, const char *path, const char *body, size_t blen)
{
    wreserve(c, strlen(path) + blen + 256);
    int n;
    if (body)
        n = snprintf(c->w, c->wcap,
                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, opt.host, opt.port, blen);
    else
        n = snprintf(c->w, c->wcap, "%s %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", method, path,
                     opt.host, opt.port);
    if (body)
        memcpy(c->w + n, body, blen);
    c->wlen = (size_t)n + (body ? blen : 0);
    c->woff = 0;
    c->t->requests++;
}

static void key_name(unsigned long i, char *out) { sprintf(out, "k%08lu", i); }

/* The body buffer for building JSON (one per thread would do; one per
 * connection keeps it simple). */
static _Thread_local char jb[1 << 20];

static void etcd_key(unsigned long i, char *out)
{
    char k[32];
    key_name(i, k);
    b64enc(k, strlen(k), out);
}

/* ---------------------------------------------------------------- */
/* workloads                                                         */

static void pick_two(conn *c, unsigned long n)
{
    c->ka = rnd(&c->rng) % n;
    do
        c->kb = rnd(&c->rng) % n;
    while (c->kb == c->ka && n > 1);
}

static void pick_hot(conn *c)
{
    pick_two(c, opt.hot);
}

static bool load_range(conn *c)
{
    thr *t = c->t;
    if (t->load_next >= t->load_end)
        return false;
    c->lo = t->load_next;
    t->load_next += opt.batch;
    if (t->load_next > t->load_end)
        t->load_next = t->load_end;
    c->kb = t->load_next; /* end of this batch */
    return true;
}

/* Start an operation: queue its first request. false: nothing more to do. */
static bool op_start(conn *c)
{
    char path[256], k1[32], k2[32], e1[48], e2[48];
    int n;
    c->step = 0;
    c->aborting = false;
    c->seq++;
    switch (opt.wl) {
    case W_PC_GET:
        key_name(rnd(&c->rng) % opt.keys, k1);
        snprintf(path, sizeof path, "/v1/kv/%s", k1);
        req(c, "GET", path, NULL, 0);
        break;
    case W_PC_PUT:
        snprintf(path, sizeof path, "/v1/kv/w-%s-%d-%llu", opt.tag, c->id,
                 (unsigned long long)(opt.rewrite ? c->seq % opt.rewrite : c->seq));
        if (opt.lease)
            n = snprintf(jb, sizeof jb, "{\"value\":\"%s\",\"lease\":%llu}", value_text,
                         opt.lease);
        else
            n = snprintf(jb, sizeof jb, "{\"value\":\"%s\"}", value_text);
        req(c, "PUT", path, jb, (size_t)n);
        break;
    case W_PC_KEEPALIVE:
        snprintf(path, sizeof path, "/v1/leases/%llu/keepalive", opt.lease);
        req(c, "POST", path, NULL, 0);
        break;
    case W_PC_TXN:
        pick_two(c, opt.keys);
        key_name(c->ka, k1);
        key_name(c->kb, k2);
        n = snprintf(jb, sizeof jb,
                     "{\"conditions\":[{\"key\":\"%s\",\"exists\":true}],\"writes\":["
                     "{\"key\":\"%s\",\"value\":\"%s\"},{\"key\":\"%s\",\"value\":\"%s\"}]}",
                     k1, k1, value_text, k2, value_text);
        req(c, "POST", "/v1/txn", jb, (size_t)n);
        break;
    case W_PC_SESSION:
    case W_PC_XFER:
        if (opt.wl == W_PC_SESSION)
            pick_two(c, opt.keys);
        else
            pick_hot(c);
        req(c, "POST", "/v1/txns", NULL, 0);
        break;
    case W_PC_XFER_CAS:
        pick_hot(c);
        snprintf(path, sizeof path, "/v1/kv/h%lu", c->ka);
        req(c, "GET", path, NULL, 0);
        break;
    case W_PC_LOAD:
    case W_ETCD_LOAD: {
        if (!load_range(c))
            return false;
        size_t o = 0;
        bool pc = opt.wl == W_PC_LOAD;
        o += (size_t)sprintf(jb + o, pc ? "{\"writes\":[" : "{\"success\":[");
        for (unsigned long i = c->lo; i < c->kb; i++) {
            if (pc) {
                key_name(i, k1);
                o += (size_t)sprintf(jb + o, "%s{\"key\":\"%s\",\"value\":\"%s\"}",
                                     i > c->lo ? "," : "", k1, value_text);
            } else {
                etcd_key(i, e1);
                o += (size_t)sprintf(jb + o,
                                     "%s{\"requestPut\":{\"key\":\"%s\",\"value\":\"%s\"}}",
                                     i > c->lo ? "," : "", e1, value_b64);
            }
        }
        o += (size_t)sprintf(jb + o, "]}");
        req(c, "POST", pc ? "/v1/txn" : "/v3/kv/txn", jb, o);
        break;
    }
    case W_PC_HOT:
    case W_ETCD_HOT: {
        if (c->id != 0 || c->seq > 1)
            return false;
        size_t o = 0;
        bool pc = opt.wl == W_PC_HOT;
        o += (size_t)sprintf(jb + o, pc ? "{\"writes\":[" : "{\"success\":[");
        for (unsigned long i = 0; i < opt.hot; i++) {
            snprintf(k1, sizeof k1, "h%lu", i);
            if (pc) {
                o += (size_t)sprintf(jb + o, "%s{\"key\":\"%s\",\"value\":\"1000000\"}",
                                     i ? "," : "", k1);
            } else {
                b64enc(k1, strlen(k1), e1);
                b64enc("1000000", 7, e2);
                o += (size_t)sprintf(jb + o,
                                     "%s{\"requestPut\":{\"key\":\"%s\",\"value\":\"%s\"}}",
                                     i ? "," : "", e1, e2);
            }
        }
        o += (size_t)sprintf(jb + o, "]}");
        req(c, "POST", pc ? "/v1/txn" : "/v3/kv/txn", jb, o);
        break;
    }
    case W_ETCD_GET:
        etcd_key(rnd(&c->rng) % opt.keys, e1);
        n = snprintf(jb, sizeof jb, "{\"key\":\"%s\"}", e1);
        req(c, "POST", "/v3/kv/range", jb, (size_t)n);
        break;
    case W_ETCD_PUT:
        snprintf(k1, sizeof k1, "w-%s-%d-%llu", opt.tag, c->id, (unsigned long long)c->seq);
        b64enc(k1, strlen(k1), e1);
        n = snprintf(jb, sizeof jb, "{\"key\":\"%s\",\"value\":\"%s\"}", e1, value_b64);
        req(c, "POST", "/v3/kv/put", jb, (size_t)n);
        break;
    case W_ETCD_TXN:
        pick_two(c, opt.keys);
        etcd_key(c->ka, e1);
        etcd_key(c->kb, e2);
        n = snprintf(jb, sizeof jb,
                     "{\"compare\":[{\"key\":\"%s\",\"target\":\"VERSION\",\"result\":\"GREATER\","
                     "\"version\":\"0\"}],\"success\":[{\"requestPut\":{\"key\":\"%s\",\"value\":"
                     "\"%s\"}},{\"requestPut\":{\"key\":\"%s\",\"value\":\"%s\"}}]}",
                     e1, e1, value_b64, e2, value_b64);
        req(c, "POST", "/v3/kv/txn", jb, (size_t)n);
        break;
    case W_ETCD_XFER:
        pick_hot(c);
        snprintf(k1, sizeof k1, "h%lu", c->ka);
        b64enc(k1, strlen(k1), e1);
        n = snprintf(jb, sizeof jb, "{\"key\":\"%s\"}", e1);
        req(c, "POST", "/v3/kv/range", jb, (size_t)n);
        break;
    case W_ORACLE:
        snprintf(path, sizeof path, "/v1/timestamps?count=%lu", opt.count);
        req(c, "POST", path, NULL, 0);
        break;
    case W_PLAIN:
        req(c, "GET", opt.path, NULL, 0);
        break;
    }
    c->op_t0 = now_ns();
    return true;
}

static bool ok2xx(int st) { return st >= 200 && st < 300; }

/* A session transaction over keys ka, kb (pc-session, pc-xfer). */
static op_result session_step(conn *c, int st, const char *b, size_t n, bool xfer)
{
    char path[256], val[64], kb1[32], kb2[32];
    int len;
    if (c->aborting) /* the rollback's answer */
        return OP_ABORT;
    if (st == 409 || st == 410) {
        if (c->step == 5) /* a failed commit has aborted the session already */
            return OP_ABORT;
        c->aborting = true;
        snprintf(path, sizeof path, "/v1/txns/%s/rollback", c->txn);
        req(c, "POST", path, NULL, 0);
        return OP_MORE;
    }
    if (xfer) {
        snprintf(kb1, sizeof kb1, "h%lu", c->ka);
        snprintf(kb2, sizeof kb2, "h%lu", c->kb);
    } else {
        key_name(c->ka, kb1);
        key_name(c->kb, kb2);
    }
    switch (c->step) {
    case 0: /* begin answered */
        if (st != 201 || !json_field(b, n, "id", c->txn, sizeof c->txn))
            return OP_ERROR;
        snprintf(path, sizeof path, "/v1/txns/%s/keys/%s", c->txn, kb1);
        req(c, "GET", path, NULL, 0);
        break;
    case 1:
    case 2:
        if (!ok2xx(st) && st != 404)
            return OP_ERROR;
        if (xfer) {
            if (!json_field(b, n, "value", val, sizeof val))
                return OP_ERROR;
            if (c->step == 1)
                c->va = atol(val);
            else
                c->vb = atol(val);
        }
        if (c->step == 1) {
            snprintf(path, sizeof path, "/v1/txns/%s/keys/%s", c->txn, kb2);
            req(c, "GET", path, NULL, 0);
        } else {
            snprintf(path, sizeof path, "/v1/txns/%s/keys/%s", c->txn, kb1);
            if (xfer)
                len = snprintf(jb, sizeof jb, "{\"value\":\"%ld\"}", c->va - 1);
            else
                len = snprintf(jb, sizeof jb, "{\"value\":\"%s\"}", value_text);
            req(c, "PUT", path, jb, (size_t)len);
        }
        break;
    case 3:
        if (!ok2xx(st))
            return OP_ERROR;
        snprintf(path, sizeof path, "/v1/txns/%s/keys/%s", c->txn, kb2);
        if (xfer)
            len = snprintf(jb, sizeof jb, "{\"value\":\"%ld\"}", c->vb + 1);
        else
            len = snprintf(jb, sizeof jb, "{\"value\":\"%s\"}", value_text);
        req(c, "PUT", path, jb, (size_t)len);
        break;
    case 4:
        if (!ok2xx(st))
            return OP_ERROR;
        snprintf(path, sizeof path, "/v1/txns/%s/commit", c->txn);
        req(c, "POST", path, NULL, 0);
        break;
    case 5:
        return st == 200 ? OP_DONE : OP_ERROR;
    }
    c->step++;
    return OP_MORE;
}

/* The answer to one request: what next. */
static op_result op_step(conn *c, int st, const char *b, size_t n)
{
    char path[256], val[64], raw[64], e1[48], e2[48], k1[32], k2[32];
    int len;
    switch (opt.wl) {
    case W_PC_GET:
    case W_PC_PUT:
    case W_PC_KEEPALIVE:
    case W_PC_LOAD:
    case W_PC_HOT:
    case W_ORACLE:
    case W_PLAIN:
    case W_ETCD_GET:
    case W_ETCD_PUT:
    case W_ETCD_LOAD:
    case W_ETCD_HOT:
        return st == 200 ? OP_DONE : OP_ERROR;
    case W_PC_TXN:
        return st == 200 ? OP_DONE : st == 409 ? OP_ABORT : OP_ERROR;
    case W_ETCD_TXN:
        if (st != 200)
            return OP_ERROR;
        return memmem(b, n, "\"succeeded\":true", 16) ? OP_DONE : OP_ABORT;
    case W_PC_SESSION:
        return session_step(c, st, b, n, false);
    case W_PC_XFER:
        return session_step(c, st, b, n, true);
    case W_PC_XFER_CAS:
        if (c->step < 2) {
            if (st != 200 || !json_field(b, n, "value", val, sizeof val) ||
                !json_field(b, n, "commit_ts", c->step ? c->cb : c->ca, sizeof c->ca))
                return OP_ERROR;
            if (c->step == 0) {
                c->va = atol(val);
                snprintf(path, sizeof path, "/v1/kv/h%lu", c->kb);
                req(c, "GET", path, NULL, 0);
            } else {
                c->vb = atol(val);
                len = snprintf(jb, sizeof jb,
                               "{\"conditions\":[{\"key\":\"h%lu\",\"commit_ts\":%s},"
                               "{\"key\":\"h%lu\",\"commit_ts\":%s}],\"writes\":["
                               "{\"key\":\"h%lu\",\"value\":\"%ld\"},"
                               "{\"key\":\"h%lu\",\"value\":\"%ld\"}]}",
                               c->ka, c->ca, c->kb, c->cb, c->ka, c->va - 1, c->kb, c->vb + 1);
                req(c, "POST", "/v1/txn", jb, (size_t)len);
            }
            c->step++;
            return OP_MORE;
        }
        return st == 200 ? OP_DONE : st == 409 ? OP_ABORT : OP_ERROR;
    case W_ETCD_XFER:
        if (c->step < 2) {
            if (st != 200 || !json_field(b, n, "value", raw, sizeof raw) ||
                !json_field(b, n, "mod_revision", c->step ? c->cb : c->ca, sizeof c->ca))
                return OP_ERROR;
            b64dec(raw, strlen(raw), val);
            if (c->step == 0) {
                c->va = atol(val);
                snprintf(k1, sizeof k1, "h%lu", c->kb);
                b64enc(k1, strlen(k1), e1);
                len = snprintf(jb, sizeof jb, "{\"key\":\"%s\"}", e1);
                req(c, "POST", "/v3/kv/range", jb, (size_t)len);
            } else {
                c->vb = atol(val);
                snprintf(k1, sizeof k1, "h%lu", c->ka);
                snprintf(k2, sizeof k2, "h%lu", c->kb);
                b64enc(k1, strlen(k1), e1);
                b64enc(k2, strlen(k2), e2);
                char v1[32], v2[32], b1[48], b2[48];
                snprintf(v1, sizeof v1, "%ld", c->va - 1);
                snprintf(v2, sizeof v2, "%ld", c->vb + 1);
                b64enc(v1, strlen(v1), b1);
                b64enc(v2, strlen(v2), b2);
                len = snprintf(jb, sizeof jb,
                               "{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\",\"result\":"
                               "\"EQUAL\",\"mod_revision\":\"%s\"},{\"key\":\"%s\",\"target\":"
                               "\"MOD\",\"result\":\"EQUAL\",\"mod_revision\":\"%s\"}],"
                               "\"success\":[{\"requestPut\":{\"key\":\"%s\",\"value\":\"%s\"}},"
                               "{\"requestPut\":{\"key\":\"%s\",\"value\":\"%s\"}}]}",
                               e1, c->ca, e2, c->cb, e1, b1, e2, b2);
                req(c, "POST", "/v3/kv/txn", jb, (size_t)len);
            }
            c->step++;
            return OP_MORE;
        }
        if (st != 200)
            return OP_ERROR;
        return memmem(b, n, "\"succeeded\":true", 16) ? OP_DONE : OP_ABORT;
    }
    return OP_ERROR;
}

/* ---------------------------------------------------------------- */
/* the event loop                                                    */

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
    inet_pton(AF_INET, opt.host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS)
        die("connect");
    return fd;
}

static void arm(conn *c, bool want_write, bool add)
{
    struct epoll_event ev = {.events = want_write ? EPOLLOUT : EPOLLIN, .data.ptr = c};
    if (epoll_ctl(c->t->ep, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c->fd, &ev) != 0)
        die("epoll_ctl");
}

/* Try to write the pending request; arm for what comes next. */
static void flush_out(conn *c)
{
    while (c->woff < c->wlen) {
        ssize_t k = write(c->fd, c->w + c->woff, c->wlen - c->woff);
        if (k > 0) {
            c->woff += (size_t)k;
        } else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
            arm(c, true, false);
            return;
        } else {
            return; /* the read side will see the error */
        }
    }
    arm(c, false, false);
}

static void reconnect(conn *c)
{
    close(c->fd);
    c->fd = dial();
    c->rlen = 0;
    arm(c, true, true);
}

/* Is a whole response in c->r? Then its status, body and length. */
static bool parse(conn *c, int *status, const char **body, size_t *blen, size_t *total)
{
    char *hend = memmem(c->r, c->rlen, "\r\n\r\n", 4);
    if (!hend)
        return false;
    size_t hlen = (size_t)(hend - c->r) + 4;
    *status = atoi(c->r + 9);
    long clen = -1;
    bool chunked = false;
    for (char *p = c->r; p < hend;) {
        char *eol = memmem(p, (size_t)(hend - p) + 2, "\r\n", 2);
        if (!eol)
            break;
        if (eol - p > 15 && strncasecmp(p, "Content-Length:", 15) == 0)
            clen = atol(p + 15);
        else if (eol - p > 18 && strncasecmp(p, "Transfer-Encoding:", 18) == 0 &&
                 memmem(p, (size_t)(eol - p), "chunked", 7))
            chunked = true;
        p = eol + 2;
    }
    if (!chunked) {
        if (clen < 0)
            clen = 0;
        if (c->rlen < hlen + (size_t)clen)
            return false;
        *body = c->r + hlen;
        *blen = (size_t)clen;
        *total = hlen + (size_t)clen;
        return true;
    }
    /* Chunked: de-chunk in place once the terminating chunk is in. */
    size_t p = hlen, out = hlen;
    for (;;) {
        char *eol = memmem(c->r + p, c->rlen - p, "\r\n", 2);
        if (!eol)
            return false;
        size_t sz = strtoul(c->r + p, NULL, 16), after = (size_t)(eol - c->r) + 2;
        if (c->rlen < after + sz + 2)
            return false;
        if (sz == 0) {
            /* skip trailers: assume none ("0\r\n\r\n") */
            memmove(c->r + out, c->r + p, 0);
            *body = c->r + hlen;
            *blen = out - hlen;
            *total = after + 2;
            return true;
        }
        memmove(c->r + out, c->r + after, sz);
        out += sz;
        size_t consumed = after + sz + 2;
        /* keep the raw remainder contiguous after the de-chunked part */
        memmove(c->r + out, c->r + consumed, c->rlen - consumed);
        c->rlen -= consumed - out;
        p = out;
    }
}

static uint64_t run_t0; /* when the run began (now_ns) */
static unsigned nwin;   /* --window: how many windows the run has */

/* The window an operation that ended at `end` counts in (nwin: none). */
static unsigned window_of(uint64_t end)
{
    uint64_t w = (end - run_t0) / ((uint64_t)opt.window * 1000000000ull);
    return opt.window == 0 || w >= nwin ? nwin : (unsigned)w;
}

static void finish_op(conn *c, op_result r)
{
    thr *t = c->t;
    uint64_t end = now_ns();
    if (end > t->deadline && r != OP_ERROR)
        return; /* finished after the deadline: not in the measured window */
    unsigned w = window_of(end);
    if (r == OP_DONE) {
        t->done++;
        hadd(&t->h, end - c->op_t0);
        if (w < nwin)
            hadd(&t->win[w], end - c->op_t0);
    } else if (r == OP_ABORT) {
        t->aborted++;
    } else {
        t->errors++;
        if (w < nwin)
            t->win_errors[w]++;
        if (t->errors <= 3) {
            fprintf(stderr, "loadgen: unexpected answer (step %d): %.*s\n", c->step,
                    (int)(c->rlen < 300 ? c->rlen : 300), c->r);
        }
    }
}

static int active_conns(thr *t)
{
    int a = 0;
    for (int i = 0; i < t->n; i++)
        a += t->c[i].fd >= 0;
    return a;
}

static void on_readable(conn *c)
{
    thr *t = c->t;
    for (;;) {
        if (c->rcap - c->rlen < 4096) {
            c->rcap = c->rcap ? c->rcap * 2 : 16384;
            if (!(c->r = realloc(c->r, c->rcap)))
                die("realloc");
        }
        ssize_t k = read(c->fd, c->r + c->rlen, c->rcap - c->rlen - 1);
        if (k > 0) {
            c->rlen += (size_t)k;
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        /* closed or failed: the operation in flight is an error */
        finish_op(c, OP_ERROR);
        reconnect(c);
        if (now_ns() >= t->deadline || !op_start(c)) {
            close(c->fd);
            c->fd = -1;
        }
        return;
    }
    int st;
    const char *b;
    size_t bl, total;
    if (!parse(c, &st, &b, &bl, &total))
        return;
    op_result r = op_step(c, st, b, bl);
    c->rlen = 0; /* one request in flight: nothing after the response */
    if (r == OP_MORE) {
        flush_out(c);
        return;
    }
    finish_op(c, r);
    if (now_ns() >= t->deadline || !op_start(c)) {
        epoll_ctl(t->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
        return;
    }
    flush_out(c);
}

static void *run_thread(void *arg)
{
    thr *t = arg;
    struct epoll_event ev[256];
    for (int i = 0; i < t->n; i++) {
        conn *c = &t->c[i];
        c->t = t;
        c->fd = dial();
        arm(c, true, true);
        if (!op_start(c)) {
            epoll_ctl(t->ep, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);
            c->fd = -1;
        }
    }
    while (active_conns(t) > 0) {
        int k = epoll_wait(t->ep, ev, 256, 100);
        for (int i = 0; i < k; i++) {
            conn *c = ev[i].data.ptr;
            if (c->fd < 0)
                continue;
            if (ev[i].events & EPOLLOUT)
                flush_out(c);
            else
                on_readable(c);
        }
        /* A server that stopped answering: give up 10 s after the deadline. */
        if (now_ns() > t->deadline + 10000000000ull) {
            for (int i = 0; i < t->n; i++)
                if (t->c[i].fd >= 0) {
                    t->errors++;
                    close(t->c[i].fd);
                    t->c[i].fd = -1;
                }
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        die("free port");
    int p = ntohs(a.sin_port);
    close(fd);
    return p;
}

/* --window: one line per window, the threads' histograms merged. */
static void print_windows(const thr *t)
{
    hist *h = malloc(sizeof *h);
    if (h == NULL)
        die("malloc");
    for (unsigned w = 0; w < nwin; w++) {
        uint64_t errors = 0;
        memset(h, 0, sizeof *h);
        for (int i = 0; i < opt.threads; i++) {
            for (unsigned b = 0; b < HBUCKETS; b++)
                h->b[b] += t[i].win[w].b[b];
            h->n += t[i].win[w].n;
            errors += t[i].win_errors[w];
        }
        double len = (w + 1) * (double)opt.window > opt.seconds ? opt.seconds - w * (double)opt.window
                                                                  : opt.window;
        printf("window=%u start_s=%u ops_s=%.0f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f errors=%llu\n",
               w, w * opt.window, (double)h->n / len, hpct(h, 0.50) / 1e6, hpct(h, 0.99) / 1e6,
               hpct(h, 0.999) / 1e6, (unsigned long long)errors);
    }
    free(h);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: loadgen --url http://127.0.0.1:PORT --workload NAME [--conns N] [--seconds S]\n"
            "       [--threads T] [--keys N] [--from N] [--batch N] [--hot N] [--count N]\n"
            "       [--value-size N] [--path P] [--tag T] [--label TEXT] [--format row|kv]\n"
            "       [--rewrite N] [--lease ID] [--window W]\n"
            "       loadgen --free-port\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *url = NULL, *wl = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--free-port") == 0) {
            printf("%d\n", free_port());
            return 0;
        }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--url")) url = v;
        else if (!strcmp(a, "--workload")) wl = v;
        else if (!strcmp(a, "--conns")) opt.conns = atoi(v);
        else if (!strcmp(a, "--threads")) opt.threads = atoi(v);
        else if (!strcmp(a, "--seconds")) opt.seconds = atof(v);
        else if (!strcmp(a, "--window")) opt.window = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--keys")) opt.keys = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--from")) opt.from = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--batch")) opt.batch = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--hot")) opt.hot = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--count")) opt.count = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--value-size")) opt.value_size = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--rewrite")) opt.rewrite = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--lease")) opt.lease = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--path")) opt.path = v;
        else if (!strcmp(a, "--tag")) opt.tag = v;
        else if (!strcmp(a, "--label")) opt.label = v;
        else if (!strcmp(a, "--format")) opt.format = v;
        else usage();
    }
    if (!url || !wl || sscanf(url, "http://%63[0-9.]:%d", opt.host, &opt.port) != 2 ||
        opt.conns < 1 || opt.threads < 1 || opt.keys < 1 || opt.hot < 2 ||
        opt.value_size >= sizeof value_text || opt.batch < 1)
        usage();
    bool found = false;
    for (size_t i = 0; i < sizeof WL_NAMES / sizeof WL_NAMES[0]; i++)
        if (!strcmp(WL_NAMES[i].name, wl)) {
            opt.wl = WL_NAMES[i].k;
            found = true;
        }
    if (!found)
        usage();
    memset(value_text, 'v', opt.value_size);
    b64enc(value_text, opt.value_size, value_b64);
    if (opt.threads > opt.conns)
        opt.threads = opt.conns;

    bool loading = opt.wl == W_PC_LOAD || opt.wl == W_ETCD_LOAD;
    thr *t = calloc((size_t)opt.threads, sizeof *t);
    conn *cs = calloc((size_t)opt.conns, sizeof *cs);
    if (!t || !cs)
        die("calloc");
    uint64_t t0 = now_ns();
    run_t0 = t0;
    if (opt.window > 0 && !loading) {
        double n = opt.seconds / opt.window;
        if (n < 1 || n > 100000)
            usage();
        nwin = (unsigned)n + (n > (unsigned)n);
    }
    uint64_t deadline = loading || opt.wl == W_PC_HOT || opt.wl == W_ETCD_HOT
                            ? UINT64_MAX - 20000000000ull
                            : t0 + (uint64_t)(opt.seconds * 1e9);
    unsigned long span = opt.keys > opt.from ? opt.keys - opt.from : 0;
    for (int i = 0, off = 0; i < opt.threads; i++) {
        t[i].n = opt.conns / opt.threads + (i < opt.conns % opt.threads);
        t[i].c = cs + off;
        for (int j = 0; j < t[i].n; j++) {
            cs[off + j].id = off + j;
            cs[off + j].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(off + j + 1) ^ (uint64_t)t0;
            if (!cs[off + j].rng)
                cs[off + j].rng = 1;
        }
        off += t[i].n;
        t[i].deadline = deadline;
        if (nwin > 0 && (!(t[i].win = calloc(nwin, sizeof *t[i].win)) ||
                         !(t[i].win_errors = calloc(nwin, sizeof *t[i].win_errors))))
            die("calloc");
        t[i].load_next = opt.from + span * (unsigned long)i / (unsigned long)opt.threads;
        t[i].load_end = opt.from + span * (unsigned long)(i + 1) / (unsigned long)opt.threads;
        if ((t[i].ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
            die("epoll_create1");
        if (pthread_create(&t[i].tid, NULL, run_thread, &t[i]) != 0)
            die("pthread_create");
    }
    hist *h = calloc(1, sizeof *h);
    uint64_t done = 0, aborted = 0, errors = 0, requests = 0;
    for (int i = 0; i < opt.threads; i++) {
        pthread_join(t[i].tid, NULL);
        done += t[i].done;
        aborted += t[i].aborted;
        errors += t[i].errors;
        requests += t[i].requests;
        for (unsigned b = 0; b < HBUCKETS; b++)
            h->b[b] += t[i].h.b[b];
        h->n += t[i].h.n;
    }
    print_windows(t);
    double secs = (double)(now_ns() - t0) / 1e9;
    if (!loading && opt.wl != W_PC_HOT && opt.wl != W_ETCD_HOT)
        secs = opt.seconds; /* operations counted are those started before the deadline */
    double ops = (double)done / secs, p50 = hpct(h, 0.50) / 1e6, p99 = hpct(h, 0.99) / 1e6,
           p999 = hpct(h, 0.999) / 1e6;
    double abort_rate = done + aborted ? (double)aborted / (double)(done + aborted) : 0;
    if (!strcmp(opt.format, "kv")) {
        printf("ops=%llu aborted=%llu errors=%llu requests=%llu secs=%.3f ops_s=%.0f "
               "req_s=%.0f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f abort_rate=%.4f\n",
               (unsigned long long)done, (unsigned long long)aborted,
               (unsigned long long)errors, (unsigned long long)requests, secs, ops,
               (double)requests / secs, p50, p99, p999, abort_rate);
    } else {
        printf("%-44s %5d %11.0f %9.2f %9.2f", opt.label, opt.conns, ops, p50, p99);
        if (aborted)
            printf("   aborts %.1f%%", 100 * abort_rate);
        if (errors)
            printf("   ERRORS %llu", (unsigned long long)errors);
        printf("\n");
    }
    fflush(stdout);
    return errors && done == 0 ? 1 : 0;
}
