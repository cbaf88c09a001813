/*
 * httpd_internal.h — what the pieces of the HTTP server share (common/httpd*.c);
 * nothing outside them includes it. The public interface is httpd.h.
 *
 *   httpd.c          the MHD callbacks: the life of a request, the workers,
 *                    the connection watch, TLS set-up; start and stop
 *   httpd_parse.c    percent-decoding, path parameters, query strings,
 *                    listen addresses
 *   httpd_route.c    route patterns and matching a request to one
 *   httpd_request.c  what a handler reads of its request
 *   httpd_reply.c    replies, handing them to MHD, and their metrics
 */
#ifndef PERCOLATOR_HTTPD_INTERNAL_H
#define PERCOLATOR_HTTPD_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "httpd.h"
#include "metrics.h"
#include "tls.h"

#define MAX_SEGMENTS 16       /* path segments in a pattern */
#define MAX_PARAMS 8          /* {param} segments in a pattern */
#define MAX_QUERY 64          /* query parameters kept; more are ignored */
#define STATUS_SLOTS 500      /* statuses 100..599 cached per route */

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
    /* Feeds whose reply is not over (httpd_feed.c): woken at a stop. */
    pthread_mutex_t feeds_mu;
    httpd_feed *feeds;
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
    httpd_feed *stream_feed;  /* httpd_reply_feed: the feed (stream_* are its) */

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

/* httpd_parse.c: decode the matched route's {param} segments, and the
 * query string, into the request's scratch (*out moves past what is
 * written). 0, or -1 for a malformed percent-escape. */
int httpd_decode_params(httpd_req *rq, char **out);
int httpd_decode_query(httpd_req *rq, char **out);

/* httpd_feed.c: a feed's body as a stream's read and done, its
 * connection (once MHD has the response), and a stop's wake-up of every
 * feed, so that each ends its body (MHD must not stop with a connection
 * suspended). */
long httpd_feed_read(void *feed, uint64_t pos, char *buf, size_t max);
void httpd_feed_done(void *feed);
void httpd_feed_attach(httpd_feed *f, struct MHD_Connection *conn);
void httpd_feeds_stop(httpd *h);

/* httpd_route.c */
/* Split "/a/{b}/c" into segments. 0 or -1 (bad pattern, memory). */
int httpd_route_compile(route *r, const httpd_route *def);
void httpd_route_free(route *r);
/* Route the request and decode its parameters (first call). */
void httpd_route_request(httpd_req *rq);

/* httpd_reply.c */
/* An error found before the handler could run, answered once the request
 * is whole; the first one found is the one reported. */
void httpd_set_early(httpd_req *rq, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Give the reply to MHD. MHD_YES or MHD_NO (connection will be closed). */
enum MHD_Result httpd_queue_reply(httpd_req *rq);

#endif
