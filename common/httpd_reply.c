/*
 * httpd_reply.c — a request's answer: the early error decided before its
 * handler runs, the httpd_reply_* calls that build the reply, handing it to
 * MHD, and what is counted of it (access log, per-route metrics).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd_internal.h"
#include "log.h"
#include "timeutil.h"
#include "utf8.h"

void httpd_set_early(httpd_req *rq, unsigned status, const char *code, const char *fmt, ...)
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
    bool feed;                /* httpd_feed_read: 0 is "nothing now", -2 the end */
} stream_body;

/* MHD's content reader over a stream's read (httpd_reply_stream, and a
 * feed's: httpd_feed.c). */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_body *b = cls;
    long n = b->read(b->arg, pos, buf, max);
    if (n > 0)
        return (ssize_t)n;
    if (b->feed && n == 0)
        return 0; /* the connection is suspended until the feed is woken */
    if (b->feed && n == -2)
        return MHD_CONTENT_READER_END_OF_STREAM;
    return MHD_CONTENT_READER_END_WITH_ERROR;
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
    *b = (stream_body){rq->stream_read, rq->stream_done, rq->stream_arg,
                       rq->stream_feed != NULL};
    struct MHD_Response *resp =
        MHD_create_response_from_callback(rq->stream_size, 64 * 1024, stream_reader, b,
                                          stream_free);
    if (resp == NULL) {
        free(b);
        return NULL;
    }
    rq->stream_read = NULL; /* MHD's now: stream_free ends it */
    if (rq->stream_feed != NULL)
        httpd_feed_attach(rq->stream_feed, rq->conn);
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

enum MHD_Result httpd_queue_reply(httpd_req *rq)
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

unsigned httpd_reply_status(const httpd_req *rq, const char **body, size_t *len)
{
    if (body)
        *body = rq->resp;
    if (len)
        *len = rq->resp_len;
    return rq->replied ? rq->status : 0;
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
