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
 *
 * The rest of the server is in files of its own, sharing httpd_internal.h:
 * httpd_parse.c (percent-decoding, parameters, listen addresses),
 * httpd_route.c (the routing table), httpd_request.c (what a handler reads
 * of its request) and httpd_reply.c (replies and their metrics).
 */
#include "httpd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "buf.h"
#include "httpd_internal.h"
#include "listen_socket.h"
#include "log.h"
#include "timeutil.h"
#include "tls.h"

#define MAX_URI 65536         /* longer request targets get 414-ish 400 */
#define STOP_SEND_MS 1000     /* httpd_stop: most time given to send replies made */

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
        httpd_set_early(rq, 400, "bad_request", "request target longer than %d bytes", MAX_URI);
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
            httpd_set_early(rq, 307, e.code, "%s", e.message);
            return true;
        }
    }
    httpd_set_early(rq, 503, e.code, "%s", e.message);
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
        httpd_set_early(rq, 400, "bad_request", "the body's length is ambiguous: Content-Length "
                        "given twice with different values, or together with Transfer-Encoding");
        return;
    }
    httpd_route_request(rq);
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
        httpd_set_early(rq, 401, "unauthorized", "%s", why);
        return;
    }
    if (!rq->route->def->public && h->cfg.elsewhere != NULL && send_elsewhere(rq))
        return;
    if (declared > h->cfg.max_body)
        httpd_set_early(rq, 413, "payload_too_large", "request body over %zu bytes",
                        h->cfg.max_body);
    else if (has_body && !is_json_type(MHD_lookup_connection_value(
                             rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)))
        httpd_set_early(rq, 415, "unsupported_media_type",
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
    return httpd_queue_reply(rq);
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
            return httpd_queue_reply(rq);
        }
        /* Not allowed (401) or malformed (400), and a body on its way:
         * answer now and let MHD close the connection rather than read a
         * byte of it (with an ambiguous length, nor could it). */
        if ((rq->early_status == 401 || rq->early_status == 400) && rq->has_body) {
            answer_early(rq);
            return httpd_queue_reply(rq);
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
            httpd_set_early(rq, 413, "payload_too_large", "request body over %zu bytes",
                            h->cfg.max_body);
            drop_body(rq);
            return MHD_YES;
        }
        /* One budget for the bodies of all requests: past it, this one
         * is refused (503) rather than the process growing without end. */
        if (atomic_fetch_add(&h->body_bytes, n) + n > h->cfg.body_budget) {
            atomic_fetch_sub(&h->body_bytes, n);
            metrics_inc(h->body_refused, 1);
            httpd_set_early(rq, 503, "busy",
                            "too many request bodies in flight; retry shortly");
            drop_body(rq);
            return MHD_YES;
        }
        rq->body_held += n;
        if (buf_append(&rq->body, upload_data, n) != 0) {
            httpd_set_early(rq, 500, "internal",
                            "out of memory reading the request body");
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
        return httpd_queue_reply(rq);
    }
    if (rq->early_status) {
        answer_early(rq);
        return httpd_queue_reply(rq);
    }
    if (rq->forward_to != NULL)
        return forward(rq);
    bool read = strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0;
    if (read && !rq->route->def->blocking) {
        run_handler(rq);
        return httpd_queue_reply(rq);
    }
    if (rq->route->def->fast != NULL && !atomic_load(&h->stopping)) {
        rq->route->def->fast(rq, h->cfg.ctx);
        if (rq->dispatched)
            return MHD_YES; /* deferred: another thread has it now */
        if (rq->replied)
            return httpd_queue_reply(rq);
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
        return httpd_queue_reply(rq);
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
    pthread_mutex_destroy(&h->feeds_mu);
    for (size_t i = 0; i < h->nroutes; i++)
        httpd_route_free(&h->routes[i]);
    free(h->routes);
    httpd_route_free(&h->unmatched);
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
    pthread_mutex_init(&h->feeds_mu, NULL);
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
        if (httpd_route_compile(&h->routes[i], &cfg->routes[i]) != 0) {
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
    httpd_feeds_stop(h); /* every feed ends its body (httpd_feed.c) */
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
