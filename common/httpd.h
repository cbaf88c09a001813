/*
 * httpd.h — a small HTTP/JSON server layer over libmicrohttpd.
 *
 * What it gives a program: a routing table (method + path pattern with
 * {param} segments), request bodies accumulated up to a hard limit (413),
 * the JSON content-type rule (415), query and header access, JSON / text /
 * empty replies, the error envelope {"error":{"code","message",...}},
 * per-route request counters and latency histograms, and a graceful stop.
 *
 * Threading: MHD runs an epoll-based pool of `threads` threads. A GET (or
 * HEAD) handler runs on the MHD thread of its connection: if it blocks, the
 * other connections of that thread wait. Any other method's handler runs
 * on a separate pool of `threads` workers fed from one queue (the
 * connection is suspended meanwhile): it may block and holds its worker
 * only. A write route, or a blocking GET, may also have a `fast` handler
 * that runs first on the event thread: it answers what it can at once,
 * defers the request to another thread (httpd_defer), which answers it
 * later without a worker in between, or returns and lets the worker run
 * the route's handler: no hand-off and no worker wake-up when the fast
 * path suffices. Handlers share the `ctx` pointer from the config and must
 * synchronise access to it.
 *
 * A handler answers exactly once through one of the httpd_reply_* calls; a
 * handler that returns without replying produces a 500 `internal`. The reply
 * is queued with MHD after the handler returns, never on MHD's first call
 * for a request: MHD 0.9.75 answers such early replies with
 * "Connection: close", which kills keep-alive.
 */
#ifndef PERCOLATOR_HTTPD_H
#define PERCOLATOR_HTTPD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "metrics.h"

#define HTTPD_DEFAULT_MAX_BODY ((size_t)64 << 20) /* DESIGN §2: 64 MiB */
#define HTTPD_REQUEST_ID_MAX 128                    /* X-Request-Id characters */

typedef struct httpd httpd;
typedef struct httpd_req httpd_req;

typedef void (*httpd_handler)(httpd_req *req, void *ctx);

typedef struct httpd_route {
    const char *method;   /* "GET", "POST", ... */
    const char *pattern;  /* "/v1/txns/{id}/keys/{key...}": a {x} segment matches one
                             non-empty path segment, a last {x...} the rest of the
                             path, slashes included (non-empty); both percent-decoded */
    httpd_handler handler;
    bool blocking;        /* a GET that may wait (locks, the oracle): run it on a
                             handler worker, not on the event thread */
    bool public;          /* served without the authorize check (health) */
    httpd_handler fast;   /* optional, for writes and blocking GETs: runs first,
                             on the event thread, and must not block. It replies,
                             or hands the request on with httpd_defer, or returns
                             having done neither: then `handler` runs on a
                             worker. */
} httpd_route;

/* Where a request should be served instead (httpd_config.elsewhere). */
typedef struct {
    char location[256];           /* "http://host:port" to redirect or forward to, or "" */
    bool forward;                 /* with location: read the body, then hand the
                                     request to httpd_config.forward */
    const char *code;             /* the error code of the answer (static) */
    char message[256];
} httpd_elsewhere;

typedef struct httpd_config {
    const char *listen;           /* "host:port"; port 0 picks a free one */
    int listen_fd;                /* > 0: a socket httpd_listen made for listen, served
                                     from (the server takes a copy: the caller closes
                                     its own); 0: httpd_start binds listen itself */
    unsigned threads;             /* MHD threads, and as many write workers; 0: number of CPUs */
    size_t max_body;              /* 0: HTTPD_DEFAULT_MAX_BODY */
    unsigned max_connections;     /* 0: 1024; past it a connection is closed at once */
    unsigned max_per_ip;          /* connections from one client address; 0: no limit */
    size_t body_budget;           /* request body bytes held at once, all requests
                                     together; past it 503 busy. 0: 4 x max_body */
    unsigned idle_timeout_s;      /* idle keep-alive connections closed after; 0: 120 */
    unsigned header_timeout_ms;   /* a request's line and headers must arrive within
                                     this of the connection's start (first request) or
                                     of the request line (later ones); else the
                                     connection is closed. 0: 10000 */
    const httpd_route *routes;
    size_t nroutes;
    /* HTTPS: the certificate (chain) and its key as PEM text (tls.h reads
     * the files); both or neither (NULL: plain HTTP). With tls_client_ca
     * too, mutual TLS: a client must present a certificate signed by one
     * of these CAs, or its handshake fails. The texts must outlive the
     * server (httpd_tls_reload replaces them). */
    const char *tls_cert, *tls_key, *tls_client_ca;
    void *ctx;                    /* passed to every handler */
    /* Optional: checked as soon as a request's headers are in, before any
     * body is read, for every route but the public ones. NULL: allowed;
     * otherwise the reason, and the request is answered 401 unauthorized
     * (with WWW-Authenticate: Bearer) without running its handler. */
    const char *(*authorize)(const httpd_req *req, void *ctx);
    /* Optional: whether another server answers this request (a Raft
     * follower sends clients to its leader). Checked after authorize, for
     * every route but the public ones. false: served here. true (with
     * out->code set): answered without running the handler, with the error
     * out->code and out->message: 307 to out->location + the request's
     * path and query when location is set (the body, if any, is read and
     * dropped: the client sends it again there), else 503 with
     * Retry-After: 1. */
    bool (*elsewhere)(const httpd_req *req, void *ctx, httpd_elsewhere *out);
    /* Required when elsewhere may set out->forward: called on the event
     * thread once such a request is whole (its body read under the usual
     * limits), instead of the route's handlers, with out->location. It
     * must not block: it defers the request (httpd_defer) to whoever sends
     * it on, or replies. Neither: 503 not_leader. */
    void (*forward)(httpd_req *req, const char *target, void *ctx);
    metrics_registry *metrics;    /* optional: request counters and latency */
    bool access_log;              /* one log line per request answered (log_access) */
} httpd_config;

/* Parse "host:port" ("127.0.0.1:8090", "[::1]:80", "localhost:0", ":8080"
 * for all interfaces). 0 or -1 with a reason in err. */
int httpd_parse_listen(const char *listen, struct sockaddr_storage *addr,
                       socklen_t *addrlen, char *err, size_t errlen);

/* Bind and listen on "host:port" now, before the program opens its data
 * (listen_socket.h): *fd (> 2, the caller's) goes to httpd_start in
 * httpd_config.listen_fd. 0, or -1 with the reason in err, which names the
 * address ("cannot listen on 127.0.0.1:8080: Address already in use ..."). */
int httpd_listen(const char *listen, int *fd, char *err, size_t errlen);

/* Start serving (binding cfg->listen unless cfg->listen_fd is given). 0 or
 * -1 with a reason in err. */
int httpd_start(const httpd_config *cfg, httpd **out, char *err, size_t errlen);
/* New TLS credentials (PEM texts, as in httpd_config) for the connections
 * that open from now on; open ones keep theirs. A server started with
 * client CAs must be given client CAs. On any error nothing changes: 0 or
 * -1 with a reason. */
int httpd_tls_reload(httpd *h, const char *cert, const char *key, const char *client_ca,
                     char *err, size_t errlen);
/* The port actually bound (useful with port 0). */
uint16_t httpd_port(const httpd *h);
/* Graceful stop: stop accepting, let requests in flight finish (at most
 * grace_ms), close every connection, free everything. NULL is fine. */
void httpd_stop(httpd *h, unsigned grace_ms);

/* --- request accessors (valid during the handler) --- */
const char *httpd_method(const httpd_req *req);
const char *httpd_path(const httpd_req *req);         /* raw path, as sent (still encoded), no query */
/* The route's label in the access log and the metrics, one scheme for
 * both programs: the method and the path as the OpenAPI documents write
 * it ("GET /v1/health", "PUT /v1/kv/{key}" for the pattern
 * "/v1/kv/{key...}"); "unmatched" when no route matched. */
const char *httpd_route_name(const httpd_req *req);
/* The raw query (what follows '?', still encoded), or NULL. */
const char *httpd_query_string(const httpd_req *req);
/* The request's id: the client's X-Request-Id when it is 1..128 characters
 * of [A-Za-z0-9._:-], else one made here. Every reply echoes it in
 * X-Request-Id; the access log writes it. */
const char *httpd_request_id(const httpd_req *req);
/* Path parameter by name, percent-decoded; it may contain NUL bytes, so the
 * length is returned through len (may be NULL). NULL if no such parameter. */
const char *httpd_param(const httpd_req *req, const char *name, size_t *len);
/* Query parameter by name, decoded (%XX and '+'). "?a" gives "" for a. NULL
 * if absent. When repeated, the first one. len may be NULL. */
const char *httpd_query(const httpd_req *req, const char *name, size_t *len);
/* Request header (case-insensitive name). NULL if absent. */
const char *httpd_header(const httpd_req *req, const char *name);
/* The request body (NUL-terminated; len may be NULL). Empty: "" and 0. */
const char *httpd_body(const httpd_req *req, size_t *len);
/* Parse the body as JSON. On failure (empty, not JSON) it replies 400
 * bad_request itself and returns NULL. The caller owns the result. */
json_t *httpd_body_json(httpd_req *req);

/* --- one slot per request: what the fast handler parsed, for the
 * handler on the worker (a request is parsed once). The slot owns p: it
 * is freed with free_fn when replaced or when the request ends. --- */
void httpd_set_slot(httpd_req *req, void *p, void (*free_fn)(void *));
void *httpd_slot(const httpd_req *req);

/* --- replies: exactly one per request --- */
/* JSON body; takes ownership of `body` (even on failure). */
void httpd_reply_json(httpd_req *req, unsigned status, json_t *body);
/* {"error":{"code":code,"message":msg, ...extra}}: the fields of `extra`
 * (a JSON object, ownership taken, may be NULL) are added to the error
 * object. */
void httpd_reply_error(httpd_req *req, unsigned status, const char *code, json_t *extra,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Any bytes with a content type ("text/plain; version=0.0.4"); copied. */
void httpd_reply_text(httpd_req *req, unsigned status, const char *content_type,
                      const char *data, size_t len);
/* A body of `size` bytes made as it is sent: read(arg, pos, buf, max)
 * fills buf with up to max bytes from offset pos and returns how many
 * (> 0), or -1 on an error (the connection is then closed: the client sees
 * a short body). It runs on the event thread, so it must not wait long (a
 * local file's read). done(arg) runs once when the reply is over, sent or
 * not (also when it could not be queued). */
void httpd_reply_stream(httpd_req *req, unsigned status, const char *content_type,
                        uint64_t size, long (*read)(void *arg, uint64_t pos, char *buf,
                                                    size_t max),
                        void (*done)(void *arg), void *arg);
/* A body that goes on (a change stream): of unknown length (chunked),
 * made as it comes. read(arg, buf, max) returns the bytes it put in buf
 * (> 0); 0 when it has nothing now: nothing is sent, and read is not
 * called again, until httpd_feed_wake; or -1 to end the body (a whole
 * reply). It runs on the event thread: it must not wait. done(arg) runs
 * once when the reply is over (ended, its connection closed, or never
 * sent); from then on the feed is gone and must not be woken: the owner
 * keeps wake and done apart with a lock of its own. A server that stops
 * ends every feed's body. NULL when out of memory (then done has run,
 * and the request is answered 500). */
typedef struct httpd_feed httpd_feed;
httpd_feed *httpd_reply_feed(httpd_req *req, unsigned status, const char *content_type,
                             long (*read)(void *arg, char *buf, size_t max),
                             void (*done)(void *arg), void *arg);
/* From any thread: read has something again. */
void httpd_feed_wake(httpd_feed *f);
/* No body (204, or any status with an empty body). */
void httpd_reply_empty(httpd_req *req, unsigned status);
/* A readiness probe's answer: 200 {"status":"ready"} when why is NULL,
 * else 503 not_ready with why and Retry-After: 1. */
void httpd_reply_ready(httpd_req *req, const char *why);
/* Add a header to the reply (e.g. "Retry-After"); may be called before or
 * after the reply call, within the handler. Copied. 0 or -1. */
int httpd_add_header(httpd_req *req, const char *name, const char *value);
/* Whether the handler already replied. */
bool httpd_replied(const httpd_req *req);

/* --- deferred requests: answered later, from another thread ---
 * A fast handler calls httpd_defer before it gives the request to another
 * thread (a batching committer, say); false means the server is stopping
 * and the request cannot be deferred (run it some other way, or just
 * return: the handler then runs as usual). That thread later either
 * replies with httpd_reply_* and calls httpd_finish, or calls
 * httpd_dispatch to have the route's `handler` run it on a worker. The
 * request must not be touched after either call. httpd_stop waits for
 * every deferred request to come back. */
bool httpd_defer(httpd_req *req);
void httpd_finish(httpd_req *req);
void httpd_dispatch(httpd_req *req);

/* A request no connection carries, for code that parses input and answers
 * its errors away from a server (the fuzz harnesses): no route, no query,
 * no body; the reply is kept, httpd_reply_status reads it. NULL when out of
 * memory. Free it with httpd_req_free_detached (NULL is fine). */
httpd_req *httpd_req_detached(void);
void httpd_req_free_detached(httpd_req *req);
/* The reply given so far: its status (0: none yet) and body (len may be NULL). */
unsigned httpd_reply_status(const httpd_req *req, const char **body, size_t *len);

/* Percent-decode src[0..len) into dst (room for len+1 bytes). plus_space:
 * '+' becomes ' ' (query strings). Returns the decoded length or -1 for a
 * malformed escape. Exposed for tests and for code that decodes keys. */
long httpd_percent_decode(const char *src, size_t len, char *dst, bool plus_space);

#endif
