/*
 * httpd.c — HTTP/JSON server layer over libmicrohttpd (see httpd.h).
 *
 * Life of a request, as MHD drives it:
 *   1. on_uri()      MHD has read the request line; we allocate the request
 *                    context and keep the raw URI (MHD would otherwise
 *                    percent-decode the path before we can split it, turning
 *                    an encoded '/' inside a key into a separator).
 *   2. on_request()  first call: headers are in. Route, decode parameters,
 *                    check Content-Length / Content-Type. Nothing is queued
 *                    here (see the keep-alive note in httpd.h) except a 413
 *                    for a declared oversized body, where closing the
 *                    connection is what we want anyway.
 *   3. on_request()  calls with body data: append up to max_body, or discard.
 *   4. on_request()  last call (no data): answer an error found earlier,
 *                    or run the handler: a GET (or HEAD) right here, on the
 *                    MHD thread; any other method on a handler worker: the
 *                    connection is suspended, the worker runs the handler
 *                    and resumes it, MHD calls on_request once more and the
 *                    reply is queued there, on MHD's thread. A route's fast
 *                    handler runs first, here: it may answer, or defer the
 *                    request to a thread of its own (httpd_defer; that
 *                    thread answers and resumes it with httpd_finish, or
 *                    passes it to the workers with httpd_dispatch).
 *   5. on_completed() MHD is done with the request: record nothing more,
 *                    free the context.
 *
 * Threads: MHD's pool (`threads` epoll threads) reads and writes and runs
 * GET handlers inline: reads are short, and a hand-off to another thread
 * would cost them more than it saves (a point read at one connection went
 * from ~23 k/s to ~7 k/s). Writes (PUT, POST, DELETE, PATCH) run on a
 * separate pool of `threads` workers fed from one queue: their handlers
 * block (group commit fsync, two oracle round trips); run on MHD's threads,
 * every connection MHD happened to assign to a blocked thread would wait
 * behind it (a connection stays on the thread that accepted it), which at
 * 64 connections gave p99 latencies of hundreds of milliseconds. From one
 * queue, any free worker takes the next request.
 *
 * Every MHD call's result is checked; when MHD cannot take a reply we return
 * MHD_NO, which makes it close the connection: the client sees a broken
 * connection rather than a hang.
 */
#include "httpd.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "buf.h"
#include "listen_socket.h"
#include "log.h"
#include "tls.h"
#include "timeutil.h"
#include "utf8.h"

#define MAX_SEGMENTS 16       /* path segments in a pattern */
#define MAX_PARAMS 8          /* {param} segments in a pattern */
#define MAX_QUERY 64          /* query parameters kept; more are ignored */
#define MAX_URI 65536         /* longer request targets get 414-ish 400 */
#define STATUS_SLOTS 500      /* statuses 100..599 cached per route */
#define STOP_SEND_MS 1000     /* httpd_stop: most time given to send replies made */

typedef struct segment {
    char *text;               /* literal text, or the parameter name */
    bool is_param;
    bool rest;                /* {name...}: the rest of the path, slashes and all */
} segment;

typedef struct route {
    const httpd_route *def;
    char *label;              /* metrics label */
    segment seg[MAX_SEGMENTS];
    int nseg;
    metrics_series *latency;
    _Atomic(metrics_series *) by_status[STATUS_SLOTS];
} route;

/* A connection's deadline for its request headers (the slowloris guard):
 * MHD's own timeout only closes a connection that sends nothing, so one
 * that trickles a byte at a time would hold its descriptor for ever. */
typedef struct conn_watch {
    struct conn_watch *prev, *next;
    int fd;
    _Atomic uint64_t deadline_ms; /* monotonic; 0: none (body or handler) */
    bool served;                  /* a request was completed on it */
} conn_watch;

struct httpd {
    struct MHD_Daemon *daemon;
    int listen_fd;            /* ours until MHD_start_daemon is given it, then -1 */
    /* handler workers and their queue (FIFO of suspended requests) */
    pthread_t *workers;
    unsigned nworkers;
    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    httpd_req *q_head, *q_tail;
    bool q_stop;
    httpd_config cfg;
    route *routes;
    size_t nroutes;
    route unmatched;          /* metrics for requests that matched no route */
    uint16_t port;
    _Atomic long in_flight;   /* requests being answered: whole (or refused at
                                 once), not yet completed. A request still
                                 sending its body is not one: a stop does not
                                 wait for a client that stalls. */
    _Atomic long deferred;    /* requests held by other threads (httpd_defer) */
    _Atomic long resumed;     /* answered off the event thread, reply not yet
                                 sent (resumed, not completed) */
    atomic_bool stopping;     /* httpd_stop began: no more hand-offs, close after replies */
    _Atomic long open_conns;  /* connections MHD holds */
    _Atomic size_t body_bytes; /* request bodies held in memory, all requests */
    _Atomic uint64_t refused_logged_ms; /* last "connection refused" log line */
    _Atomic unsigned long refused; /* connections refused since that line */
    tls_server *tls;          /* TLS credentials (NULL: plain HTTP) */
    metrics_family *req_family, *lat_family;
    metrics_series *conn_total, *conn_open, *conn_refused, *body_refused, *header_timeouts;
    /* Connections under watch (conn_watch), and the thread that closes
     * those past their deadline. */
    pthread_mutex_t w_mu;
    conn_watch watched;       /* list head */
    pthread_t watcher;
    bool watcher_on;
    atomic_bool watcher_stop;
    uint64_t late_logged_ms;  /* last "slow headers" log line (watcher only) */
    unsigned long late;       /* connections closed since that line */
    _Atomic uint64_t rid_seq; /* request ids made here: <rid_prefix>-<seq> */
    char rid_prefix[17];
    _Atomic uint64_t mhd_logged_ms; /* microhttpd's messages: rate limit */
    _Atomic unsigned long mhd_lines, mhd_dropped;
};

typedef struct kv {
    const char *key, *val;
    size_t klen, vlen;
} kv;

struct httpd_req {
    httpd *h;
    struct MHD_Connection *conn;
    conn_watch *watch;        /* its connection's deadline, may be NULL */
    char rid[HTTPD_REQUEST_ID_MAX + 1]; /* X-Request-Id: the client's, or ours */
    char *uri;                /* raw path ('?' and what follows cut off) */
    const char *query_str;    /* raw text after '?', or NULL */
    size_t path_len;          /* strlen(uri) */
    size_t target_len;        /* length of the whole raw request target */
    const char *method;       /* MHD's string; valid for the request */
    route *route;             /* NULL: no match (see early_status) */
    uint64_t t0;              /* monotonic ns at first call */
    bool called;              /* first call of the access handler seen */
    bool counted;             /* counted in h->in_flight (being answered) */
    bool queued;              /* a reply was given to MHD */
    bool dispatched;          /* handed to a worker (connection suspended) */
    bool resumed;             /* counted in h->resumed */
    _Atomic bool handled;     /* the worker is done: queue the reply */
    httpd_req *next;          /* worker queue link */

    /* An error decided before the handler could run (404, 405, 413, 415,
     * 400 for bad encoding); answered on the last call. */
    unsigned early_status;
    const char *early_code;
    char early_msg[256];
    char *early_location;     /* a 307's Location (malloc'd), or NULL */
    char *forward_to;         /* httpd_config.forward's target (malloc'd), or NULL */
    /* httpd_reply_stream: the body made as it is sent (stream_read NULL: none). */
    long (*stream_read)(void *, uint64_t, char *, size_t);
    void (*stream_done)(void *);
    void *stream_arg;
    uint64_t stream_size;

    char *scratch;            /* decoded params and query pieces */
    kv params[MAX_PARAMS];
    int nparams;
    kv query[MAX_QUERY];
    int nquery;

    buf body;
    size_t body_held;         /* bytes of body counted in h->body_bytes */
    size_t discarded;         /* body bytes dropped after an early error */
    unsigned long long declared; /* Content-Length, 0 if none */
    bool has_body;            /* a body was announced (length or chunked) */

    /* The reply, built by the handler, queued after it returns. */
    bool replied;
    unsigned status;
    char *resp;               /* malloc'd; given to MHD */
    size_t resp_len;
    char ctype[96];
    buf headers;              /* "name\0value\0" pairs */

    /* What a fast handler parsed, for the worker that runs the handler. */
    void *slot;
    void (*slot_free)(void *);
};

/* ------------------------------------------------------------------ */
/* percent-decoding and parsing                                        */

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long httpd_percent_decode(const char *src, size_t len, char *dst, bool plus_space)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= len) /* need two hex digits after '%' */
                return -1;
            int hi = hexval((unsigned char)src[i + 1]);
            int lo = hexval((unsigned char)src[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            dst[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else if (plus_space && c == '+') {
            dst[o++] = ' ';
        } else {
            dst[o++] = c;
        }
    }
    dst[o] = '\0';
    return (long)o;
}

int httpd_parse_listen(const char *listen, struct sockaddr_storage *addr,
                       socklen_t *addrlen, char *err, size_t errlen)
{
    char host[256], port[16];
    const char *colon;
    if (!listen || !*listen) {
        snprintf(err, errlen, "empty listen address (want host:port)");
        return -1;
    }
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':') {
            snprintf(err, errlen, "bad listen address '%.100s' (want [v6addr]:port)", listen);
            return -1;
        }
        colon = close + 1;
        size_t hl = (size_t)(close - listen - 1);
        if (hl >= sizeof host) goto bad;
        memcpy(host, listen + 1, hl);
        host[hl] = '\0';
    } else {
        colon = strrchr(listen, ':');
        if (!colon) goto bad;
        size_t hl = (size_t)(colon - listen);
        if (hl >= sizeof host) goto bad;
        memcpy(host, listen, hl);
        host[hl] = '\0';
        if (strchr(host, ':')) goto bad; /* bare IPv6 needs brackets */
    }
    {
        const char *p = colon + 1;
        size_t pl = strlen(p);
        if (pl == 0 || pl > 5 || strspn(p, "0123456789") != pl || atol(p) > 65535)
            goto bad;
        memcpy(port, p, pl + 1);
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "cannot resolve listen host '%.100s': %s", host, gai_strerror(rc));
        if (res) freeaddrinfo(res);
        return -1;
    }
    if (res->ai_addrlen > sizeof *addr) {
        freeaddrinfo(res);
        goto bad;
    }
    memset(addr, 0, sizeof *addr);
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *addrlen = (socklen_t)res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
bad:
    snprintf(err, errlen, "bad listen address '%.100s' (want host:port, port 0..65535)", listen);
    return -1;
}

/* ------------------------------------------------------------------ */
/* routing                                                             */

static void route_free(route *r)
{
    for (int i = 0; i < r->nseg; i++)
        free(r->seg[i].text);
    free(r->label);
}

/* Split "/a/{b}/c" into segments. 0 or -1 (bad pattern, memory). */
static int route_compile(route *r, const httpd_route *def)
{
    memset(r, 0, sizeof *r);
    r->def = def;
    const char *p = def->pattern;
    if (!p || p[0] != '/')
        return -1;
    if (strcmp(p, "/") != 0) {
        p++;
        while (*p) {
            const char *slash = strchr(p, '/');
            size_t len = slash ? (size_t)(slash - p) : strlen(p);
            if (len == 0 || r->nseg >= MAX_SEGMENTS)
                return -1;
            segment *s = &r->seg[r->nseg++];
            s->is_param = len >= 3 && p[0] == '{' && p[len - 1] == '}';
            s->rest = s->is_param && len >= 6 && memcmp(p + len - 4, "...}", 4) == 0;
            s->text = s->rest       ? strndup(p + 1, len - 5)
                      : s->is_param ? strndup(p + 1, len - 2)
                                    : strndup(p, len);
            if (!s->text)
                return -1;
            p += len;
            if (s->rest && *p != '\0')
                return -1; /* the rest of the path comes last */
            if (*p == '/')
                p++;
        }
    }
    int nparams = 0;
    for (int i = 0; i < r->nseg; i++)
        nparams += r->seg[i].is_param;
    if (nparams > MAX_PARAMS)
        return -1;
    /* One label scheme for both programs' metrics and access logs: the
     * method and the path as the OpenAPI documents write it, so a rest
     * parameter {key...} is labelled {key} ("PUT /v1/kv/{key}"). */
    size_t n = strlen(def->method) + strlen(def->pattern) + 2;
    r->label = malloc(n);
    if (!r->label)
        return -1;
    char *o = r->label + snprintf(r->label, n, "%s ", def->method);
    for (const char *p = def->pattern; *p != '\0'; p++) {
        if (strncmp(p, "...}", 4) == 0)
            p += 3;
        *o++ = *p;
    }
    *o = '\0';
    return 0;
}

/* Does the raw path match the route's segments (literals compared raw)? */
static bool route_matches(const route *r, const char *path, size_t plen)
{
    if (plen == 0 || path[0] != '/')
        return false;
    if (r->nseg == 0)
        return plen == 1;
    size_t i = 1;
    for (int k = 0; k < r->nseg; k++) {
        if (i > plen)
            return false;
        const char *slash = memchr(path + i, '/', plen - i);
        size_t len = slash ? (size_t)(slash - (path + i)) : plen - i;
        if (r->seg[k].rest)
            return i < plen; /* whatever is left, if anything is */
        if (len == 0)
            return false;
        if (!r->seg[k].is_param &&
            (strlen(r->seg[k].text) != len || memcmp(r->seg[k].text, path + i, len) != 0))
            return false;
        i += len;
        if (k + 1 < r->nseg) {
            if (i >= plen || path[i] != '/')
                return false;
            i++;
        }
    }
    return i == plen;
}

static void set_early(httpd_req *rq, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_early(httpd_req *rq, unsigned status, const char *code, const char *fmt, ...)
{
    if (rq->early_status)
        return; /* the first problem found is the one reported */
    rq->early_status = status;
    rq->early_code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rq->early_msg, sizeof rq->early_msg, fmt, ap);
    va_end(ap);
}

/* Decode the matched route's {param} segments into scratch. */
static int decode_params(httpd_req *rq, char **out)
{
    const route *r = rq->route;
    const char *path = rq->uri;
    size_t i = 1;
    for (int k = 0; k < r->nseg; k++) {
        const char *slash = memchr(path + i, '/', rq->path_len - i);
        size_t len = slash && !r->seg[k].rest ? (size_t)(slash - (path + i)) : rq->path_len - i;
        if (r->seg[k].is_param) {
            long n = httpd_percent_decode(path + i, len, *out, false);
            if (n < 0)
                return -1;
            kv *p = &rq->params[rq->nparams++];
            p->key = r->seg[k].text;
            p->klen = strlen(p->key);
            p->val = *out;
            p->vlen = (size_t)n;
            *out += n + 1;
        }
        i += len + 1;
    }
    return 0;
}

/* Split and decode "a=1&b=x%20y" into rq->query. */
static int decode_query(httpd_req *rq, char **out)
{
    const char *q = rq->query_str;
    while (q && *q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        if (len > 0 && rq->nquery < MAX_QUERY) {
            const char *eq = memchr(q, '=', len);
            size_t klen = eq ? (size_t)(eq - q) : len;
            kv *p = &rq->query[rq->nquery];
            long kn = httpd_percent_decode(q, klen, *out, true);
            if (kn < 0)
                return -1;
            p->key = *out;
            p->klen = (size_t)kn;
            *out += kn + 1;
            long vn = eq ? httpd_percent_decode(eq + 1, len - klen - 1, *out, true)
                         : httpd_percent_decode("", 0, *out, true);
            if (vn < 0)
                return -1;
            p->val = *out;
            p->vlen = (size_t)vn;
            *out += vn + 1;
            rq->nquery++;
        }
        q += len;
        if (*q == '&')
            q++;
    }
    return 0;
}

/* A GET route also answers HEAD (RFC 9110 §9.3.2): the same status and
 * headers, and MHD leaves the body out. */
static bool method_matches(const char *route_method, const char *method)
{
    return strcmp(route_method, method) == 0 ||
           (strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0);
}

/* Route the request and decode its parameters (first call). */
static void route_request(httpd_req *rq)
{
    httpd *h = rq->h;
    char allow[128] = "";
    size_t alen = 0;
    for (size_t i = 0; i < h->nroutes; i++) {
        route *r = &h->routes[i];
        if (!route_matches(r, rq->uri, rq->path_len))
            continue;
        if (method_matches(r->def->method, rq->method)) {
            rq->route = r;
            break;
        }
        bool get = strcmp(r->def->method, "GET") == 0;
        int k = snprintf(allow + alen, sizeof allow - alen, "%s%s%s", alen ? ", " : "",
                         r->def->method, get ? ", HEAD" : "");
        if (k > 0 && (size_t)k < sizeof allow - alen)
            alen += (size_t)k;
    }
    if (!rq->route) {
        if (alen) {
            set_early(rq, 405, "method_not_allowed", "method %s is not allowed here (allowed: %s)",
                      rq->method, allow);
            httpd_add_header(rq, "Allow", allow);
        } else {
            set_early(rq, 404, "not_found", "no such endpoint: %s %.*s", rq->method,
                      (int)(rq->path_len > 100 ? 100 : rq->path_len), rq->uri);
        }
        return;
    }
    /* Decoded pieces are never longer than their encoded form; each needs
     * one NUL, and pieces are separated by at least one byte in the URI. */
    rq->scratch = malloc(2 * rq->target_len + 2);
    if (!rq->scratch) {
        set_early(rq, 500, "internal", "out of memory");
        return;
    }
    char *out = rq->scratch;
    if (decode_params(rq, &out) != 0 || decode_query(rq, &out) != 0)
        set_early(rq, 400, "bad_request", "malformed percent-encoding in the URL");
}

/* ------------------------------------------------------------------ */
/* metrics                                                             */

static void record(httpd_req *rq)
{
    httpd *h = rq->h;
    route *r = rq->route ? rq->route : &h->unmatched;
    double secs = (double)(time_mono_ns() - rq->t0) / 1e9;
    if (h->cfg.access_log)
        log_access(rq->method ? rq->method : "?", rq->uri, r->label, rq->status, secs * 1e3,
                   rq->resp_len, rq->rid[0] ? rq->rid : "-");
    if (!h->req_family)
        return;
    metrics_series *s = NULL;
    unsigned st = rq->status;
    if (st >= 100 && st < 100 + STATUS_SLOTS) {
        s = atomic_load_explicit(&r->by_status[st - 100], memory_order_acquire);
        if (!s) {
            char code[8];
            snprintf(code, sizeof code, "%u", st);
            s = metrics_series_get(h->req_family, r->label, code);
            atomic_store_explicit(&r->by_status[st - 100], s, memory_order_release);
        }
    }
    metrics_inc(s, 1);
    metrics_observe(r->latency, secs);
}

/* ------------------------------------------------------------------ */
/* replies                                                             */

static bool begin_reply(httpd_req *rq)
{
    if (rq->replied) {
        log_warn("httpd: second reply for %s %.80s ignored", rq->method, rq->uri);
        return false;
    }
    rq->replied = true;
    return true;
}

void httpd_reply_text(httpd_req *rq, unsigned status, const char *content_type,
                      const char *data, size_t len)
{
    if (!begin_reply(rq))
        return;
    rq->status = status;
    snprintf(rq->ctype, sizeof rq->ctype, "%s", content_type ? content_type : "text/plain");
    rq->resp = malloc(len ? len : 1);
    if (!rq->resp) {
        rq->status = 500; /* nothing to say it with: empty 500 */
        rq->ctype[0] = '\0';
        rq->resp_len = 0;
        return;
    }
    if (len)
        memcpy(rq->resp, data, len);
    rq->resp_len = len;
}

void httpd_reply_stream(httpd_req *rq, unsigned status, const char *content_type,
                        uint64_t size, long (*read)(void *, uint64_t, char *, size_t),
                        void (*done)(void *), void *arg)
{
    if (!begin_reply(rq)) {
        done(arg);
        return;
    }
    rq->status = status;
    snprintf(rq->ctype, sizeof rq->ctype, "%s", content_type);
    rq->stream_read = read;
    rq->stream_done = done;
    rq->stream_arg = arg;
    rq->stream_size = size;
}

/* A streamed body handed to MHD: its reader's and its end's. */
typedef struct {
    long (*read)(void *, uint64_t, char *, size_t);
    void (*done)(void *);
    void *arg;
} stream_body;

/* MHD's content reader over a stream's read (httpd_reply_stream). */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_body *b = cls;
    long n = b->read(b->arg, pos, buf, max);
    return n > 0 ? (ssize_t)n : MHD_CONTENT_READER_END_WITH_ERROR;
}

/* MHD is done with the response (sent, or its connection closed). */
static void stream_free(void *cls)
{
    stream_body *b = cls;
    b->done(b->arg);
    free(b);
}

/* The response of a streamed reply; NULL when out of memory (then the
 * request still owns the stream, and req_free ends it). */
static struct MHD_Response *stream_response(httpd_req *rq)
{
    stream_body *b = malloc(sizeof *b);
    if (b == NULL)
        return NULL;
    *b = (stream_body){rq->stream_read, rq->stream_done, rq->stream_arg};
    struct MHD_Response *resp =
        MHD_create_response_from_callback(rq->stream_size, 64 * 1024, stream_reader, b,
                                          stream_free);
    if (resp == NULL) {
        free(b);
        return NULL;
    }
    rq->stream_read = NULL; /* MHD's now: stream_free ends it */
    return resp;
}

void httpd_reply_empty(httpd_req *rq, unsigned status)
{
    if (!begin_reply(rq))
        return;
    rq->status = status;
    rq->ctype[0] = '\0';
}

void httpd_reply_json(httpd_req *rq, unsigned status, json_t *body)
{
    if (rq->replied) {
        begin_reply(rq); /* logs */
        json_decref(body);
        return;
    }
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(body);
    if (!text) {
        static const char oom[] =
            "{\"error\":{\"code\":\"internal\",\"message\":\"cannot encode the reply\"}}";
        httpd_reply_text(rq, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    begin_reply(rq);
    rq->status = status;
    snprintf(rq->ctype, sizeof rq->ctype, "application/json");
    rq->resp = text; /* jansson allocates with malloc by default */
    rq->resp_len = strlen(text);
}

void httpd_reply_error(httpd_req *rq, unsigned status, const char *code, json_t *extra,
                       const char *fmt, ...)
{
    char raw[1024], msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* A message may quote the client's bytes (a path, a parameter): those
     * that are not UTF-8 are written as \xNN, or JSON could not carry it. */
    utf8_escape(raw, msg, sizeof msg);

    json_t *err = json_object();
    json_t *root = json_object();
    if (!err || !root ||
        json_object_set_new(err, "code", json_string(code)) != 0 ||
        json_object_set_new(err, "message", json_string(msg)) != 0 ||
        (extra && json_is_object(extra) && json_object_update(err, extra) != 0) ||
        json_object_set(root, "error", err) != 0) {
        json_decref(root);
        root = NULL; /* httpd_reply_json answers a plain 500 */
    }
    json_decref(err);
    json_decref(extra);
    httpd_reply_json(rq, status, root);
}

int httpd_add_header(httpd_req *rq, const char *name, const char *value)
{
    if (buf_append(&rq->headers, name, strlen(name) + 1) != 0 ||
        buf_append(&rq->headers, value, strlen(value) + 1) != 0)
        return -1;
    return 0;
}

bool httpd_replied(const httpd_req *rq)
{
    return rq->replied;
}

/* Give the reply to MHD. MHD_YES or MHD_NO (connection will be closed). */
static enum MHD_Result queue_reply(httpd_req *rq)
{
    struct MHD_Response *resp;
    if (rq->stream_read != NULL) {
        resp = stream_response(rq);
    } else if (rq->resp_len > 0) {
        resp = MHD_create_response_from_buffer(rq->resp_len, rq->resp, MHD_RESPMEM_MUST_FREE);
        if (resp)
            rq->resp = NULL; /* MHD owns it now */
    } else {
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (!resp) {
        log_error("httpd: cannot create a response (out of memory?)");
        return MHD_NO;
    }
    if (rq->ctype[0] &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rq->ctype) != MHD_YES)
        log_warn("httpd: cannot add Content-Type '%s'", rq->ctype);
    if (rq->rid[0] != '\0' &&
        MHD_add_response_header(resp, "X-Request-Id", rq->rid) != MHD_YES)
        log_warn("httpd: cannot add X-Request-Id");
    /* Stopping: tell keep-alive clients to go, so the stop can finish. */
    if (atomic_load(&rq->h->stopping) &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES)
        log_warn("httpd: cannot add Connection: close");
    for (size_t off = 0; off < rq->headers.len;) {
        const char *name = rq->headers.data + off;
        const char *value = name + strlen(name) + 1;
        off = (size_t)(value - rq->headers.data) + strlen(value) + 1;
        if (MHD_add_response_header(resp, name, value) != MHD_YES)
            log_warn("httpd: cannot add header '%s'", name);
    }
    enum MHD_Result rc = MHD_queue_response(rq->conn, rq->status, resp);
    MHD_destroy_response(resp);
    if (rc != MHD_YES) {
        log_error("httpd: MHD refused the reply to %s %.80s", rq->method, rq->uri);
        return MHD_NO;
    }
    rq->queued = true;
    record(rq);
    return MHD_YES;
}

/* ------------------------------------------------------------------ */
/* request accessors                                                   */

const char *httpd_method(const httpd_req *rq) { return rq->method; }
const char *httpd_path(const httpd_req *rq) { return rq->uri; }
const char *httpd_query_string(const httpd_req *rq) { return rq->query_str; }
const char *httpd_route_name(const httpd_req *rq) { return rq->route ? rq->route->label : "unmatched"; }

static const char *kv_find(const kv *arr, int n, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    for (int i = 0; i < n; i++) {
        if (arr[i].klen == nl && memcmp(arr[i].key, name, nl) == 0) {
            if (len)
                *len = arr[i].vlen;
            return arr[i].val;
        }
    }
    return NULL;
}

const char *httpd_param(const httpd_req *rq, const char *name, size_t *len)
{
    return kv_find(rq->params, rq->nparams, name, len);
}

const char *httpd_query(const httpd_req *rq, const char *name, size_t *len)
{
    return kv_find(rq->query, rq->nquery, name, len);
}

const char *httpd_header(const httpd_req *rq, const char *name)
{
    return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

const char *httpd_body(const httpd_req *rq, size_t *len)
{
    if (len)
        *len = rq->body.len;
    return rq->body.data ? rq->body.data : "";
}

json_t *httpd_body_json(httpd_req *rq)
{
    if (rq->body.len == 0) {
        httpd_reply_error(rq, 400, "bad_request", NULL, "a JSON body is required");
        return NULL;
    }
    json_error_t e;
    json_t *j = json_loadb(rq->body.data, rq->body.len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &e);
    if (!j)
        httpd_reply_error(rq, 400, "bad_request", NULL, "body is not valid JSON: %s (at byte %d)",
                          e.text, e.position);
    return j;
}

/* ------------------------------------------------------------------ */
/* MHD callbacks                                                       */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    httpd_req *rq = calloc(1, sizeof *rq);
    if (!rq)
        return NULL;
    rq->h = cls;
    rq->conn = conn;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    rq->watch = ci ? ci->socket_context : NULL;
    /* The request line is in: its headers must follow within the
     * deadline. A connection's first request had its deadline set when it
     * was accepted (the line counts against it too). */
    if (rq->watch && rq->watch->served)
        atomic_store(&rq->watch->deadline_ms, time_mono_ms() + rq->h->cfg.header_timeout_ms);
    size_t n = strnlen(uri, MAX_URI + 1);
    rq->uri = strndup(uri, n > MAX_URI ? MAX_URI : n);
    if (!rq->uri) {
        free(rq);
        return NULL;
    }
    if (n > MAX_URI)
        set_early(rq, 400, "bad_request", "request target longer than %d bytes", MAX_URI);
    rq->target_len = strlen(rq->uri);
    char *q = strchr(rq->uri, '?');
    if (q) {
        *q = '\0';
        rq->query_str = q + 1;
    }
    rq->path_len = strlen(rq->uri);
    return rq;
}

static void req_free(httpd_req *rq)
{
    if (!rq)
        return;
    if (rq->slot != NULL && rq->slot_free != NULL)
        rq->slot_free(rq->slot);
    if (rq->body_held > 0)
        atomic_fetch_sub(&rq->h->body_bytes, rq->body_held);
    free(rq->uri);
    free(rq->early_location);
    free(rq->forward_to);
    if (rq->stream_read != NULL) /* never handed to MHD */
        rq->stream_done(rq->stream_arg);
    free(rq->scratch);
    free(rq->resp);
    buf_free(&rq->body);
    buf_free(&rq->headers);
    free(rq);
}

httpd_req *httpd_req_detached(void)
{
    httpd_req *rq = calloc(1, sizeof *rq);
    if (!rq)
        return NULL;
    rq->method = "NONE";
    rq->uri = strdup("");
    if (!rq->uri) {
        free(rq);
        return NULL;
    }
    return rq;
}

void httpd_req_free_detached(httpd_req *rq)
{
    req_free(rq);
}

unsigned httpd_reply_status(const httpd_req *rq, const char **body, size_t *len)
{
    if (body)
        *body = rq->resp;
    if (len)
        *len = rq->resp_len;
    return rq->replied ? rq->status : 0;
}

void httpd_set_slot(httpd_req *rq, void *p, void (*free_fn)(void *))
{
    if (rq->slot != NULL && rq->slot_free != NULL)
        rq->slot_free(rq->slot);
    rq->slot = p;
    rq->slot_free = free_fn;
}

void *httpd_slot(const httpd_req *rq)
{
    return rq->slot;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    httpd *h = cls;
    (void)conn;
    (void)toe;
    httpd_req *rq = *con_cls;
    if (!rq)
        return;
    if (rq->counted)
        atomic_fetch_sub(&h->in_flight, 1);
    if (rq->resumed)
        atomic_fetch_sub(&h->resumed, 1);
    /* Between requests a keep-alive connection may idle, not trickle: the
     * next request line must come within the idle timeout. */
    if (rq->watch) {
        rq->watch->served = true;
        atomic_store(&rq->watch->deadline_ms, time_mono_ms() + h->cfg.idle_timeout_s * 1000ull);
    }
    req_free(rq);
    *con_cls = NULL;
}

/* application/json, optionally with parameters: "application/json; charset=utf-8". */
static bool is_json_type(const char *ct)
{
    if (!ct)
        return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    static const char want[] = "application/json";
    if (strncasecmp(ct, want, sizeof want - 1) != 0)
        return false;
    ct += sizeof want - 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

typedef struct framing {
    const char *length;       /* the first Content-Length */
    bool conflict;            /* a second, different one */
} framing;

static enum MHD_Result note_length(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    framing *f = cls;
    (void)kind;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0)
        return MHD_YES;
    if (f->length != NULL && strcmp(f->length, value) != 0)
        f->conflict = true;
    if (f->length == NULL)
        f->length = value;
    return MHD_YES;
}

/* Where the body ends must be clear (RFC 9112 §6.3): two different
 * Content-Length headers, or one with a Transfer-Encoding, are the stuff
 * of request smuggling behind a proxy that reads them the other way. */
static bool framing_clear(httpd_req *rq)
{
    framing f = {NULL, false};
    if (MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, note_length, &f) < 0)
        return false;
    return !f.conflict && !(f.length != NULL && MHD_lookup_connection_value(
                                rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING));
}

/* A client's X-Request-Id is kept if it is 1..128 characters of
 * [A-Za-z0-9._:-] (so that it is safe in a header and a log line);
 * otherwise the request gets one of ours: this process's random prefix and
 * a counter. */
static void set_request_id(httpd_req *rq)
{
    const char *id = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "X-Request-Id");
    size_t n = id ? strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")
                  : 0;
    if (id != NULL && n > 0 && n <= HTTPD_REQUEST_ID_MAX && id[n] == '\0') {
        memcpy(rq->rid, id, n + 1);
        return;
    }
    snprintf(rq->rid, sizeof rq->rid, "%s-%llx", rq->h->rid_prefix,
             (unsigned long long)atomic_fetch_add(&rq->h->rid_seq, 1) + 1);
}

const char *httpd_request_id(const httpd_req *rq)
{
    return rq->rid;
}

/* The request belongs to another server (httpd_config.elsewhere): 307 to
 * it, same path and query, or 503. true when so. */
static bool send_elsewhere(httpd_req *rq)
{
    httpd *h = rq->h;
    httpd_elsewhere e = {.code = NULL};
    if (!h->cfg.elsewhere(rq, h->cfg.ctx, &e) || e.code == NULL)
        return false;
    if (e.forward && e.location[0] != '\0' && h->cfg.forward != NULL) {
        /* Served here after all, by the forward hook: the body is read
         * under the same limits as any other. Out of memory: 503 below. */
        if ((rq->forward_to = strdup(e.location)) != NULL)
            return false;
        e.location[0] = '\0';
    }
    if (e.location[0] != '\0') {
        size_t n = strlen(e.location) + rq->path_len + 2 +
                   (rq->query_str != NULL ? strlen(rq->query_str) : 0);
        if ((rq->early_location = malloc(n)) != NULL) {
            snprintf(rq->early_location, n, "%s%s%s%s", e.location, rq->uri,
                     rq->query_str != NULL ? "?" : "", rq->query_str ? rq->query_str : "");
            set_early(rq, 307, e.code, "%s", e.message);
            return true;
        }
    }
    set_early(rq, 503, e.code, "%s", e.message);
    return true;
}

/* First call: headers are in. Route and check the body's declared form. */
static void first_call(httpd_req *rq, const char *method)
{
    httpd *h = rq->h;
    rq->called = true;
    rq->method = method;
    rq->t0 = time_mono_ns();
    if (rq->watch)
        atomic_store(&rq->watch->deadline_ms, 0); /* headers are in */
    set_request_id(rq);
    if (rq->early_status)
        return;
    if (!framing_clear(rq)) {
        set_early(rq, 400, "bad_request", "the body's length is ambiguous: Content-Length given "
                  "twice with different values, or together with Transfer-Encoding");
        return;
    }
    route_request(rq);
    if (!rq->route)
        return;

    const char *cl = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_TRANSFER_ENCODING);
    unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
    rq->declared = declared;
    bool has_body = declared > 0 || te != NULL;
    rq->has_body = has_body;
    /* Refuse before spending: a request that may not be made has none of
     * its body read (on_request answers it at once when one is coming). */
    const char *why = NULL;
    if (!rq->route->def->public && h->cfg.authorize != NULL &&
        (why = h->cfg.authorize(rq, h->cfg.ctx)) != NULL) {
        set_early(rq, 401, "unauthorized", "%s", why);
        return;
    }
    if (!rq->route->def->public && h->cfg.elsewhere != NULL && send_elsewhere(rq))
        return;
    if (declared > h->cfg.max_body)
        set_early(rq, 413, "payload_too_large", "request body over %zu bytes", h->cfg.max_body);
    else if (has_body && !is_json_type(MHD_lookup_connection_value(
                             rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)))
        set_early(rq, 415, "unsupported_media_type",
                  "a request body must be sent as Content-Type: application/json");
}

/* Free what the body holds and give its bytes back to the budget. */
static void drop_body(httpd_req *rq)
{
    buf_free(&rq->body);
    if (rq->body_held > 0)
        atomic_fetch_sub(&rq->h->body_bytes, rq->body_held);
    rq->body_held = 0;
}

/* The request is whole (or refused at once): it is being answered. */
static void count_in_flight(httpd_req *rq)
{
    if (!rq->counted) {
        rq->counted = true;
        atomic_fetch_add(&rq->h->in_flight, 1);
    }
}

static void answer_early(httpd_req *rq)
{
    count_in_flight(rq);
    if (rq->early_status == 401)
        httpd_add_header(rq, "WWW-Authenticate", "Bearer");
    if (rq->early_status == 503)
        httpd_add_header(rq, "Retry-After", "1");
    if (rq->early_status == 307 && rq->early_location != NULL)
        httpd_add_header(rq, "Location", rq->early_location);
    httpd_reply_error(rq, rq->early_status, rq->early_code, NULL, "%s", rq->early_msg);
}

static void run_handler(httpd_req *rq);

/* The request is whole and belongs to another server: the forward hook
 * defers it (or replies). Not while stopping: httpd_defer refuses then. */
static enum MHD_Result forward(httpd_req *rq)
{
    httpd *h = rq->h;
    h->cfg.forward(rq, rq->forward_to, h->cfg.ctx);
    if (rq->dispatched)
        return MHD_YES;
    if (!rq->replied) {
        httpd_add_header(rq, "Retry-After", "1");
        httpd_reply_error(rq, 503, "not_leader", NULL,
                          "this member does not lead and cannot pass the request on now; retry");
    }
    return queue_reply(rq);
}

/* Append a suspended request to the workers' queue; q_mu held. */
static void enqueue(httpd *h, httpd_req *rq)
{
    rq->next = NULL;
    if (h->q_tail)
        h->q_tail->next = rq;
    else
        h->q_head = rq;
    h->q_tail = rq;
    pthread_cond_signal(&h->q_cv);
}

/* The GnuTLS session of a TLS connection; NULL for plain HTTP. */
static void *tls_session(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    return ci != NULL ? ci->tls_session : NULL;
}

/* Before its handshake, a new TLS connection gets the current credentials
 * and, with client CAs, must show a client certificate that verifies
 * (tls.h: MHD only asks for one). */
static void tls_connection_started(httpd *h, struct MHD_Connection *conn)
{
    if (h->tls != NULL && tls_server_attach(h->tls, tls_session(conn)) != 0)
        log_error("httpd: cannot set up TLS on a new connection%s",
                  h->cfg.tls_client_ca ? "; its requests will be refused" : "");
}

int httpd_tls_reload(httpd *h, const char *cert, const char *key, const char *client_ca,
                     char *err, size_t errlen)
{
    if (h->tls == NULL) {
        snprintf(err, errlen, "not serving TLS");
        return -1;
    }
    if ((client_ca != NULL) != (h->cfg.tls_client_ca != NULL)) {
        snprintf(err, errlen, "client CAs can be replaced, not added or removed");
        return -1;
    }
    return tls_server_reload(h->tls, cert, key, client_ca, err, errlen);
}

/* MHD's TLS options (an MHD_OPTION_ARRAY of 5), empty for plain HTTP, and
 * h->tls. The PEM texts are checked first, so that a bad key is refused
 * with its reason rather than as MHD's failure to start. 0 or -1 with a
 * reason. */
static int tls_options(httpd *h, struct MHD_OptionItem opts[5], char *err, size_t errlen)
{
    const httpd_config *cfg = &h->cfg;
    int n = 0;
    if ((cfg->tls_cert != NULL) != (cfg->tls_key != NULL) ||
        (cfg->tls_client_ca != NULL && cfg->tls_cert == NULL)) {
        snprintf(err, errlen, "TLS needs a certificate and its key");
        return -1;
    }
    if (cfg->tls_cert != NULL) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            snprintf(err, errlen, "this libmicrohttpd was built without TLS");
            return -1;
        }
        h->tls = tls_server_new(cfg->tls_cert, cfg->tls_key, cfg->tls_client_ca, err, errlen);
        if (h->tls == NULL)
            return -1;
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cfg->tls_cert};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)cfg->tls_key};
        /* MHD's default priorities still offer CBC and SHA-1 suites in
         * TLS 1.2: TLS 1.3 and 1.2 with AEAD and ECDHE only (tls.h). */
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                            (void *)TLS_PRIORITIES};
        if (cfg->tls_client_ca != NULL)
            opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0,
                                                (void *)cfg->tls_client_ca};
    }
    opts[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    httpd *h = cls;
    (void)url;
    (void)version;
    httpd_req *rq = *con_cls;
    if (!rq)
        return MHD_NO; /* on_uri ran out of memory: drop the connection */

    if (!rq->called) {
        /* Mutual TLS, second lock: never serve a connection whose client
         * certificate did not verify (closed without an answer). */
        if (h->cfg.tls_client_ca != NULL && !tls_client_verified(tls_session(conn))) {
            log_warn("httpd: a request on a connection without a verified client "
                     "certificate; closing it");
            return MHD_NO;
        }
        first_call(rq, method);
        /* A declared body far over the limit: answer now, which makes MHD
         * close the connection instead of reading what we would throw away.
         * A body up to twice the limit is drained instead (see below), so
         * that the client reliably reads the 413: closing a socket with
         * unread input makes the kernel send a reset that can destroy the
         * reply before the client sees it. */
        if (rq->early_status == 413 && rq->declared > 2 * h->cfg.max_body) {
            answer_early(rq);
            return queue_reply(rq);
        }
        /* Not allowed (401) or malformed (400), and a body on its way:
         * answer now and let MHD close the connection rather than read a
         * byte of it (with an ambiguous length, nor could it). */
        if ((rq->early_status == 401 || rq->early_status == 400) && rq->has_body) {
            answer_early(rq);
            return queue_reply(rq);
        }
        return MHD_YES;
    }

    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (rq->early_status) {
            /* Drain what the client sends so we can answer on a clean
             * connection, but not forever. */
            rq->discarded += n;
            return rq->discarded > 2 * h->cfg.max_body ? MHD_NO : MHD_YES;
        }
        if (rq->body.len + n > h->cfg.max_body) {
            set_early(rq, 413, "payload_too_large", "request body over %zu bytes",
                      h->cfg.max_body);
            drop_body(rq);
            return MHD_YES;
        }
        /* One budget for the bodies of all requests: past it, this one
         * is refused (503) rather than the process growing without end. */
        if (atomic_fetch_add(&h->body_bytes, n) + n > h->cfg.body_budget) {
            atomic_fetch_sub(&h->body_bytes, n);
            metrics_inc(h->body_refused, 1);
            set_early(rq, 503, "busy", "too many request bodies in flight; retry shortly");
            drop_body(rq);
            return MHD_YES;
        }
        rq->body_held += n;
        if (buf_append(&rq->body, upload_data, n) != 0) {
            set_early(rq, 500, "internal", "out of memory reading the request body");
            drop_body(rq);
        }
        return MHD_YES;
    }

    /* Last call: the whole request is in. */
    if (rq->queued)
        return MHD_YES;
    count_in_flight(rq);
    if (rq->dispatched) {
        /* Called again after the worker resumed us: its reply is ready. */
        if (!atomic_load_explicit(&rq->handled, memory_order_acquire))
            return MHD_YES; /* cannot happen: we are resumed only when done */
        return queue_reply(rq);
    }
    if (rq->early_status) {
        answer_early(rq);
        return queue_reply(rq);
    }
    if (rq->forward_to != NULL)
        return forward(rq);
    bool read = strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0;
    if (read && !rq->route->def->blocking) {
        run_handler(rq);
        return queue_reply(rq);
    }
    if (rq->route->def->fast != NULL && !atomic_load(&h->stopping)) {
        rq->route->def->fast(rq, h->cfg.ctx);
        if (rq->dispatched)
            return MHD_YES; /* deferred: another thread has it now */
        if (rq->replied)
            return queue_reply(rq);
    }
    /* Hand the request to a worker; MHD stops watching the connection
     * until the worker resumes it. Once stopping, nothing is handed off
     * (the workers are draining): it runs here instead. The check is under
     * the queue's lock, as is the workers' stop flag, so no request can be
     * queued after the workers were told to finish. */
    pthread_mutex_lock(&h->q_mu);
    if (h->q_stop || atomic_load(&h->stopping)) {
        pthread_mutex_unlock(&h->q_mu);
        run_handler(rq);
        return queue_reply(rq);
    }
    rq->dispatched = true;
    MHD_suspend_connection(conn);
    enqueue(h, rq);
    pthread_mutex_unlock(&h->q_mu);
    return MHD_YES;
}

/* Give an answered request back to MHD's event loop, which sends the
 * reply; counted until MHD reports it complete (httpd_stop, step 5). */
static void hand_back(httpd_req *rq)
{
    rq->resumed = true;
    atomic_fetch_add(&rq->h->resumed, 1);
    atomic_store_explicit(&rq->handled, true, memory_order_release);
    MHD_resume_connection(rq->conn);
}

bool httpd_defer(httpd_req *rq)
{
    httpd *h = rq->h;
    if (rq->dispatched || rq->replied)
        return false;
    /* Count first, then look at `stopping`; httpd_stop sets `stopping`
     * first, then reads the count (both sequentially consistent). So
     * either httpd_stop waits for this request, or we see it stopping and
     * back out: a request is never deferred behind its back. */
    atomic_fetch_add(&h->deferred, 1);
    if (atomic_load(&h->stopping)) {
        atomic_fetch_sub(&h->deferred, 1);
        return false;
    }
    rq->dispatched = true;
    /* Suspended before any other thread can see the request, so a quick
     * httpd_finish always finds it suspended. */
    MHD_suspend_connection(rq->conn);
    return true;
}

void httpd_finish(httpd_req *rq)
{
    httpd *h = rq->h;
    if (!rq->replied) {
        log_error("httpd: deferred %s finished without a reply", rq->route->label);
        httpd_reply_error(rq, 500, "internal", NULL, "the handler gave no reply");
    }
    hand_back(rq);
    atomic_fetch_sub(&h->deferred, 1);
}

void httpd_dispatch(httpd_req *rq)
{
    httpd *h = rq->h;
    /* httpd_stop stops the workers only once nothing is deferred, so the
     * queue is still served here. */
    pthread_mutex_lock(&h->q_mu);
    enqueue(h, rq);
    pthread_mutex_unlock(&h->q_mu);
    atomic_fetch_sub(&h->deferred, 1);
}

static void run_handler(httpd_req *rq)
{
    rq->route->def->handler(rq, rq->h->cfg.ctx);
    if (!rq->replied) {
        log_error("httpd: handler for %s gave no reply", rq->route->label);
        httpd_reply_error(rq, 500, "internal", NULL, "the handler gave no reply");
    }
}

/* A handler worker: run queued requests' handlers, then resume their
 * connections so that MHD queues the replies. Drains the queue before it
 * stops, so no connection stays suspended. */
static void *worker_main(void *arg)
{
    httpd *h = arg;
    for (;;) {
        pthread_mutex_lock(&h->q_mu);
        while (!h->q_head && !h->q_stop)
            pthread_cond_wait(&h->q_cv, &h->q_mu);
        httpd_req *rq = h->q_head;
        if (!rq) {
            pthread_mutex_unlock(&h->q_mu);
            return NULL;
        }
        h->q_head = rq->next;
        if (!h->q_head)
            h->q_tail = NULL;
        pthread_mutex_unlock(&h->q_mu);

        run_handler(rq);
        hand_back(rq);
    }
}

static void workers_stop(httpd *h)
{
    pthread_mutex_lock(&h->q_mu);
    h->q_stop = true;
    pthread_cond_broadcast(&h->q_cv);
    pthread_mutex_unlock(&h->q_mu);
    for (unsigned i = 0; i < h->nworkers; i++)
        pthread_join(h->workers[i], NULL);
    h->nworkers = 0;
}

/* MHD's accept policy: once stopping, every new connection is closed at
 * once (httpd_stop, step 1). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    httpd *h = cls;
    (void)addr;
    (void)addrlen;
    if (atomic_load(&h->stopping))
        return MHD_NO;
    /* Past the limit: closed at once, so no idle connection can take the
     * descriptors the rest of the process needs (fdlimit.h). */
    if (atomic_load(&h->open_conns) >= (long)h->cfg.max_connections) {
        metrics_inc(h->conn_refused, 1);
        unsigned long n = atomic_fetch_add(&h->refused, 1) + 1;
        uint64_t now = time_mono_ms(), last = atomic_load(&h->refused_logged_ms);
        /* One line a minute at most: an attack must not flood the log. */
        if (now - last >= 60000 && atomic_compare_exchange_strong(&h->refused_logged_ms, &last, now)) {
            atomic_store(&h->refused, 0);
            log_warn("httpd: at the connection limit (%u): %lu connection(s) refused since the "
                     "last report", h->cfg.max_connections, n);
        }
        return MHD_NO;
    }
    return MHD_YES;
}

/* A new connection: its request headers are due within header_timeout_ms.
 * NULL (no watch) if out of memory: MHD's idle timeout still applies. */
static conn_watch *watch_start(httpd *h, struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    conn_watch *w = ci ? calloc(1, sizeof *w) : NULL;
    if (!w)
        return NULL;
    w->fd = ci->connect_fd;
    atomic_init(&w->deadline_ms, time_mono_ms() + h->cfg.header_timeout_ms);
    pthread_mutex_lock(&h->w_mu);
    w->next = h->watched.next;
    w->prev = &h->watched;
    h->watched.next->prev = w;
    h->watched.next = w;
    pthread_mutex_unlock(&h->w_mu);
    return w;
}

/* MHD tells us a connection closed before it closes the socket, so under
 * w_mu the watcher never shuts down a descriptor that was reused. */
static void watch_end(httpd *h, conn_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&h->w_mu);
    w->prev->next = w->next;
    w->next->prev = w->prev;
    pthread_mutex_unlock(&h->w_mu);
    free(w);
}

/* Every 200 ms: shut down the connections past their deadline. MHD sees
 * the end of the stream and closes them on its own thread. */
static void *watcher_main(void *arg)
{
    httpd *h = arg;
    while (!atomic_load(&h->watcher_stop)) {
        time_sleep_ms(200);
        uint64_t now = time_mono_ms();
        unsigned long n = 0;
        pthread_mutex_lock(&h->w_mu);
        for (conn_watch *w = h->watched.next; w != &h->watched; w = w->next) {
            uint64_t d = atomic_load(&w->deadline_ms);
            if (d != 0 && now >= d) {
                atomic_store(&w->deadline_ms, 0);
                shutdown(w->fd, SHUT_RDWR);
                n++;
            }
        }
        pthread_mutex_unlock(&h->w_mu);
        if (n == 0)
            continue;
        metrics_inc(h->header_timeouts, n);
        h->late += n;
        /* One line a minute at most: an attack must not flood the log. */
        if (h->late_logged_ms == 0 || now - h->late_logged_ms >= 60000) {
            log_warn("httpd: closed %lu connection(s) too slow to send a request (due within "
                     "%u ms; slowloris?)", h->late, h->cfg.header_timeout_ms);
            h->late_logged_ms = now;
            h->late = 0;
        }
    }
    return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    httpd *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        tls_connection_started(h, conn);
        atomic_fetch_add(&h->open_conns, 1);
        metrics_inc(h->conn_total, 1);
        metrics_add(h->conn_open, 1);
        *socket_ctx = watch_start(h, conn);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        atomic_fetch_sub(&h->open_conns, 1);
        metrics_add(h->conn_open, -1);
        watch_end(h, *socket_ctx);
        *socket_ctx = NULL;
    }
}

/* microhttpd's messages (a client that hung up, a bad request line):
 * at most 10 a minute, then a count of those left out, so that a flood
 * of bad connections cannot flood the log. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    httpd *h = cls;
    uint64_t now = time_mono_ms(), start = atomic_load(&h->mhd_logged_ms);
    if (now - start >= 60000 && atomic_compare_exchange_strong(&h->mhd_logged_ms, &start, now)) {
        unsigned long dropped = atomic_exchange(&h->mhd_dropped, 0);
        atomic_store(&h->mhd_lines, 0);
        if (dropped > 0)
            log_warn("microhttpd: %lu more message(s) in the last minute left out", dropped);
    }
    if (atomic_fetch_add(&h->mhd_lines, 1) >= 10) {
        atomic_fetch_add(&h->mhd_dropped, 1);
        return;
    }
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    log_warn("microhttpd: %s", msg);
}

/* ------------------------------------------------------------------ */
/* start / stop                                                        */

static void httpd_free(httpd *h)
{
    if (!h)
        return;
    if (h->listen_fd >= 0)
        close(h->listen_fd);
    workers_stop(h);
    if (h->watcher_on) {
        atomic_store(&h->watcher_stop, true);
        pthread_join(h->watcher, NULL);
    }
    free(h->workers);
    pthread_cond_destroy(&h->q_cv);
    pthread_mutex_destroy(&h->q_mu);
    pthread_mutex_destroy(&h->w_mu);
    for (size_t i = 0; i < h->nroutes; i++)
        route_free(&h->routes[i]);
    free(h->routes);
    route_free(&h->unmatched);
    tls_server_free(h->tls); /* MHD stopped: no connection holds it */
    free(h);
}

int httpd_listen(const char *listen, int *fd, char *err, size_t errlen)
{
    struct sockaddr_storage addr;
    socklen_t addrlen;
    if (httpd_parse_listen(listen, &addr, &addrlen, err, errlen) != 0)
        return -1;
    /* Bound here, not by MHD: its message names "port 0" (it would be
     * given a socket address), this one the address and why. */
    if ((*fd = listen_socket((const struct sockaddr *)&addr, addrlen)) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s%s", listen, strerror(errno),
                 errno == EADDRINUSE ? " (another program has this port)" : "");
        return -1;
    }
    return 0;
}

int httpd_start(const httpd_config *cfg, httpd **out, char *err, size_t errlen)
{
    *out = NULL;
    /* MHD gets a socket of its own, closed by MHD_stop_daemon, and by
     * MHD_start_daemon on most but not all of its failures (0.9.75): what
     * is ours to close stays apart from what may be MHD's. */
    int fd = -1;
    if (cfg->listen_fd > 0) {
        if ((fd = fcntl(cfg->listen_fd, F_DUPFD_CLOEXEC, 3)) < 0) {
            snprintf(err, errlen, "cannot listen on %s: %s", cfg->listen, strerror(errno));
            return -1;
        }
    } else if (httpd_listen(cfg->listen, &fd, err, errlen) != 0) {
        return -1;
    }

    httpd *h = calloc(1, sizeof *h);
    if (!h) {
        close(fd);
        goto oom;
    }
    h->listen_fd = fd;
    pthread_mutex_init(&h->q_mu, NULL);
    pthread_cond_init(&h->q_cv, NULL);
    pthread_mutex_init(&h->w_mu, NULL);
    h->watched.next = h->watched.prev = &h->watched;
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        memset(r, 0, sizeof r);
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(h->rid_prefix + 2 * i, 3, "%02x", r[i]);
    h->cfg = *cfg;
    if (!h->cfg.max_body)
        h->cfg.max_body = HTTPD_DEFAULT_MAX_BODY;
    if (!h->cfg.max_connections)
        h->cfg.max_connections = 1024;
    if (!h->cfg.body_budget)
        h->cfg.body_budget = 4 * h->cfg.max_body;
    if (!h->cfg.idle_timeout_s)
        h->cfg.idle_timeout_s = 120;
    if (!h->cfg.header_timeout_ms)
        h->cfg.header_timeout_ms = 10000;
    if (!h->cfg.threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        h->cfg.threads = n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
    }

    h->routes = calloc(cfg->nroutes ? cfg->nroutes : 1, sizeof *h->routes);
    if (!h->routes)
        goto oom;
    for (size_t i = 0; i < cfg->nroutes; i++) {
        h->nroutes = i + 1; /* so httpd_free frees what was compiled */
        if (route_compile(&h->routes[i], &cfg->routes[i]) != 0) {
            snprintf(err, errlen, "bad route pattern '%s'", cfg->routes[i].pattern);
            goto fail;
        }
    }
    h->unmatched.label = strdup("unmatched");
    if (!h->unmatched.label)
        goto oom;

    if (cfg->metrics) {
        h->req_family = metrics_counter(cfg->metrics, "percolator_http_requests_total",
                                        "HTTP requests answered, by route and status",
                                        "route", "status");
        h->lat_family = metrics_histogram(cfg->metrics, "percolator_http_request_seconds",
                                          "HTTP request latency (first byte in to reply queued)",
                                          "route", NULL, metrics_latency_buckets,
                                          metrics_latency_nbuckets);
        for (size_t i = 0; i < h->nroutes; i++)
            h->routes[i].latency = metrics_series_get(h->lat_family, h->routes[i].label, NULL);
        h->unmatched.latency = metrics_series_get(h->lat_family, "unmatched", NULL);
        /* Connections opened: with keep-alive working this stays near the
         * number of clients, not the number of requests. */
        h->conn_total = metrics_counter1(cfg->metrics, "percolator_http_connections_total",
                                         "TCP connections accepted");
        h->conn_open = metrics_gauge1(cfg->metrics, "percolator_http_connections_open",
                                      "TCP connections open now");
        h->conn_refused = metrics_counter1(cfg->metrics,
                                           "percolator_http_connections_refused_total",
                                           "connections closed at once: the limit was reached");
        h->body_refused = metrics_counter1(cfg->metrics, "percolator_http_body_refused_total",
                                           "requests refused (503 busy): the body budget was spent");
        h->header_timeouts = metrics_counter1(
            cfg->metrics, "percolator_http_header_timeouts_total",
            "connections closed: no whole request headers within the header timeout");
    }

    h->workers = calloc(h->cfg.threads, sizeof *h->workers);
    if (!h->workers)
        goto oom;
    for (unsigned i = 0; i < h->cfg.threads; i++) {
        if (pthread_create(&h->workers[i], NULL, worker_main, h) != 0) {
            snprintf(err, errlen, "cannot start handler threads");
            goto fail;
        }
        h->nworkers = i + 1;
    }
    if (pthread_create(&h->watcher, NULL, watcher_main, h) != 0) {
        snprintf(err, errlen, "cannot start the connection watcher");
        goto fail;
    }
    h->watcher_on = true;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    struct MHD_OptionItem tls_opts[5];
    if (tls_options(h, tls_opts, err, errlen) != 0)
        goto fail;
    if (h->cfg.tls_cert != NULL)
        flags |= MHD_USE_TLS;
    h->daemon = MHD_start_daemon(
        flags, 0, on_accept, h, on_request, h,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h, /* first, so it covers all */
        MHD_OPTION_LISTEN_SOCKET, h->listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, h->cfg.threads,
        /* MHD's own limit a little above ours: on_accept refuses first,
         * at once, instead of MHD leaving them in the listen queue. */
        MHD_OPTION_CONNECTION_LIMIT, h->cfg.max_connections + 16,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, h->cfg.max_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, h->cfg.idle_timeout_s,
        /* MHD 0.9.75 zeroes a connection's whole memory pool for every
         * request: at 128 KiB that memset was ~20% of the CPU of a point
         * read (perf). 64 KiB still holds the longest request target the
         * API needs (a scan with three 4096-byte keys, percent-encoded
         * base64: ~48 KiB) plus headers. */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_ARRAY, tls_opts,
        MHD_OPTION_END);
    h->listen_fd = -1; /* MHD's now, or closed (or not) by its failure */
    if (!h->daemon) {
        snprintf(err, errlen, "cannot serve on %s (see the log above)", cfg->listen);
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : 0;
    *out = h;
    return 0;

oom:
    snprintf(err, errlen, "out of memory");
fail:
    httpd_free(h);
    return -1;
}

uint16_t httpd_port(const httpd *h)
{
    return h->port;
}

void httpd_stop(httpd *h, unsigned grace_ms)
{
    if (!h)
        return;
    /* 0. From now on requests run where they arrive and their replies
     *    close their connections.
     * 1. Stop accepting: on_accept turns every new connection away (MHD
     *    closes it at once). Not MHD_quiesce_daemon: with epoll and a
     *    thread pool, MHD 0.9.75 races its own threads to take the listen
     *    socket out of their epoll sets, and the loser aborts the process
     *    (MHD_PANIC "Failed to remove listen FD from epoll set"); seen as
     *    a SIGABRT on about one stop in a few hundred. */
    atomic_store(&h->stopping, true);
    /* 2. Let requests in flight finish, bounded. */
    uint64_t deadline = time_mono_ms() + grace_ms;
    while (atomic_load(&h->in_flight) > 0 && time_mono_ms() < deadline)
        time_sleep_ms(5);
    if (atomic_load(&h->in_flight) > 0)
        log_warn("httpd: %ld request(s) still running after %u ms; closing them",
                 atomic_load(&h->in_flight), grace_ms);
    /* 3. Deferred requests must come back whatever the grace (MHD must not
     *    be stopped with a connection suspended); their threads answer or
     *    dispatch them in bounded time (oracle timeout, lock wait). */
    for (unsigned n = 1; atomic_load(&h->deferred) > 0; n++) {
        if (n % 1000 == 0)
            log_warn("httpd: waiting for %ld deferred request(s)", atomic_load(&h->deferred));
        time_sleep_ms(5);
    }
    /* 4. Let the workers finish what is queued (each resumes its
     *    connection), then close idle keep-alive connections and join
     *    MHD's threads. */
    workers_stop(h);
    /* 5. Replies given back to the event loop by step 3 or 4 are made but
     *    maybe not yet sent: MHD_stop_daemon would close their connections
     *    unsent. Wait for them, bounded (a client may not read). */
    uint64_t send_deadline = time_mono_ms() + STOP_SEND_MS;
    while (atomic_load(&h->resumed) > 0 && time_mono_ms() < send_deadline)
        time_sleep_ms(2);
    MHD_stop_daemon(h->daemon);
    httpd_free(h);
}

void httpd_reply_ready(httpd_req *req, const char *why)
{
    if (why == NULL) {
        httpd_reply_json(req, 200, json_pack("{s:s}", "status", "ready"));
        return;
    }
    httpd_add_header(req, "Retry-After", "1");
    httpd_reply_error(req, 503, "not_ready", NULL, "%s", why);
}
