/*
 * forward.c — requests passed on to another server over kept-alive
 * connections, on one thread running libcurl's multi interface
 * (forward.h; docs/DESIGN.md §9, item 4).
 *
 * A request's life: forward_request defers it and queues a job; the thread
 * adds the job's easy handle to the multi handle; libcurl sends it and
 * reads the reply into the job; the thread answers the deferred request
 * (httpd_finish) and frees the job. Every 100 ms the thread asks whether
 * each job's target is still where requests go, and gives up the ones
 * whose target is not: a client never waits on a leader that is gone for
 * longer than it takes its follower to notice.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "curl_peer.h"
#include "forward.h"
#include "log.h"
#include "timeutil.h"

#define CHECK_MS 100  /* how often jobs in flight are checked against their target */

typedef struct job {
    httpd_req *req;
    CURL *easy;
    struct curl_slist *headers;
    char *url;
    char *target;
    bool read_only;                 /* GET or HEAD: never applied, however it ends */
    bool sent;                      /* any byte of it left (CURLINFO_REQUEST_SIZE) */
    size_t max_reply;
    buf reply;
    bool too_big;
    /* Reply headers relayed; "" when absent. */
    char content_type[128], retry_after[32], location[512], www_auth[128], allow[128];
    char error[CURL_ERROR_SIZE];
    struct job *next;
} job;

struct forwarder {
    forward_config cfg;
    char self[64];                  /* cfg.self, copied: the caller's may not last */
    CURLM *multi;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;             /* guards queue and stopping */
    job *queue;                     /* handed over, not yet added to multi */
    bool stopping;
    job *active;                    /* in multi (the thread's alone) */
    _Atomic uint64_t give_up_at;    /* forward_drain: monotonic ms (0: never) */
    metrics_series *m_ok, *m_unreachable, *m_lost, *m_received;
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
    job *j = arg;
    size_t n = size * nmemb;
    if (j->reply.len + n > j->max_reply) {
        j->too_big = true;
        return 0; /* makes curl fail the transfer */
    }
    return buf_append(&j->reply, p, n) == 0 ? n : 0;
}

/* Keep a header the client must see; the others (Date, Content-Length,
 * Connection, X-Request-Id: ours) are the relaying server's own. */
static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
    job *j = arg;
    size_t n = size * nmemb;
    static const struct {
        const char *name;
        size_t off, cap;
    } kept[] = {{"Content-Type", offsetof(job, content_type), sizeof(((job *)0)->content_type)},
                {"Retry-After", offsetof(job, retry_after), sizeof(((job *)0)->retry_after)},
                {"Location", offsetof(job, location), sizeof(((job *)0)->location)},
                {"WWW-Authenticate", offsetof(job, www_auth), sizeof(((job *)0)->www_auth)},
                {"Allow", offsetof(job, allow), sizeof(((job *)0)->allow)}};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        size_t nl = strlen(kept[i].name);
        if (n <= nl + 1 || strncasecmp(p, kept[i].name, nl) != 0 || p[nl] != ':')
            continue;
        const char *v = p + nl + 1;
        size_t vl = n - nl - 1;
        while (vl > 0 && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        if (vl < kept[i].cap) {
            char *dst = (char *)j + kept[i].off;
            memcpy(dst, v, vl);
            dst[vl] = '\0';
        }
    }
    return n;
}

static void job_free(job *j)
{
    if (j == NULL)
        return;
    if (j->easy != NULL)
        curl_easy_cleanup(j->easy);
    curl_slist_free_all(j->headers);
    free(j->url);
    free(j->target);
    buf_free(&j->reply);
    free(j);
}

static void relay_header(httpd_req *req, const char *name, const char *value)
{
    if (value[0] != '\0')
        httpd_add_header(req, name, value);
}

/* Answer the client from the job's outcome, and give the request back. */
static void answer(forwarder *f, job *j, CURLcode rc)
{
    httpd_req *req = j->req;
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK && status >= 100 && status <= 599) {
        metrics_inc(f->m_ok, 1);
        relay_header(req, "Retry-After", j->retry_after);
        relay_header(req, "Location", j->location);
        relay_header(req, "WWW-Authenticate", j->www_auth);
        relay_header(req, "Allow", j->allow);
        relay_header(req, FORWARD_LEADER_HEADER, j->target);
        if (j->reply.len == 0 && j->content_type[0] == '\0')
            httpd_reply_empty(req, (unsigned)status);
        else
            httpd_reply_text(req, (unsigned)status,
                             j->content_type[0] ? j->content_type : "application/octet-stream",
                             j->reply.data ? j->reply.data : "", j->reply.len);
    } else if (j->too_big) {
        metrics_inc(f->m_lost, 1);
        httpd_reply_error(req, 502, "bad_gateway", NULL,
                          "the leader's reply is over %zu bytes, more than a member relays",
                          j->max_reply);
    } else if (!j->sent || j->read_only) {
        /* Nothing was sent, or nothing could have been changed (a read):
         * the client may simply ask again. Not "could not connect": libcurl
         * sends a request again on a new connection when a kept-alive one
         * died before any answer, and a refused second connect says
         * nothing of the first send. */
        metrics_inc(f->m_unreachable, 1);
        httpd_add_header(req, "Retry-After", "1");
        httpd_reply_error(req, 503, "not_leader", json_pack("{s:i}", "retry_after_ms", 1000),
                          "the leader at %s did not answer (%s); an election may be under way: "
                          "retry", j->target, j->error[0] ? j->error : curl_easy_strerror(rc));
    } else {
        /* Sent, and no answer: the leader may have applied it. */
        metrics_inc(f->m_lost, 1);
        httpd_add_header(req, "Retry-After", "1");
        httpd_reply_error(req, 503, "raft_unavailable",
                          json_pack("{s:i}", "retry_after_ms", 1000),
                          "the leader at %s was lost while it had this request (%s): it may "
                          "or may not have been applied; retry", j->target,
                          j->error[0] ? j->error : curl_easy_strerror(rc));
    }
    httpd_finish(req);
}

/* A libcurl easy handle for the request. NULL when out of memory. */
static job *job_new(forwarder *f, httpd_req *req, const char *target)
{
    job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return NULL;
    const char *method = httpd_method(req);
    const char *q = httpd_query_string(req);
    size_t body_len = 0;
    const char *body = httpd_body(req, &body_len);
    size_t n = strlen(target) + strlen(httpd_path(req)) + (q ? strlen(q) + 1 : 0) + 1;
    j->req = req;
    j->max_reply = f->cfg.max_reply;
    j->read_only = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    j->target = strdup(target);
    j->url = malloc(n);
    j->easy = curl_easy_init();
    if (j->target == NULL || j->url == NULL || j->easy == NULL)
        goto fail;
    snprintf(j->url, n, "%s%s%s%s", target, httpd_path(req), q ? "?" : "", q ? q : "");

    /* The client's credentials and body type go with it; curl adds none
     * of its own (no Expect: the leader answers at once). */
    char line[4200];
    const char *auth = httpd_header(req, "Authorization");
    const char *ctype = httpd_header(req, "Content-Type");
    struct curl_slist *h = NULL, *t;
#define ADD(...)                                                   \
    do {                                                           \
        snprintf(line, sizeof line, __VA_ARGS__);                  \
        if ((t = curl_slist_append(h, line)) == NULL)              \
            goto fail;                                             \
        h = t;                                                     \
    } while (0)
    ADD("%s: %s", FORWARD_HEADER, f->cfg.self);
    ADD("X-Request-Id: %s", httpd_request_id(req));
    ADD("Expect:");
    ADD("Accept:");
    if (auth != NULL && strlen(auth) < 4096)
        ADD("Authorization: %s", auth);
    if (ctype != NULL && strlen(ctype) < 256)
        ADD("Content-Type: %s", ctype);
    else
        ADD("Content-Type:");
#undef ADD
    j->headers = h;

    CURL *e = j->easy;
    bool ok = curl_peer_connection(
                  e, (long)(f->cfg.connect_timeout_ms ? f->cfg.connect_timeout_ms : 1000),
                  (long)(f->cfg.timeout_ms ? f->cfg.timeout_ms : 30000)) == 0 &&
              curl_easy_setopt(e, CURLOPT_URL, j->url) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_PRIVATE, j) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_HTTPHEADER, j->headers) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_WRITEDATA, j) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_HEADERDATA, j) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_ERRORBUFFER, j->error) == CURLE_OK &&
              /* The leader's answer is relayed as it is, a 307 included. */
              curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK;
    /* A HEAD goes as a GET: the body relayed gives MHD the leader's
     * Content-Length, and MHD sends no body to a HEAD. */
    if (ok && strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        ok = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method) == CURLE_OK;
    if (ok && (body_len > 0 || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0))
        /* The body stays with the request, which outlives the job. */
        ok = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len) ==
                 CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_POSTFIELDS, body) == CURLE_OK;
    if (ok)
        ok = curl_peer_tls(e, f->cfg.ca_file, f->cfg.cert_file, f->cfg.key_file) == 0;
    if (ok)
        return j;
fail:
    job_free(j);
    return NULL;
}

void forward_request(forwarder *f, httpd_req *req, const char *target)
{
    job *j = job_new(f, req, target);
    if (j == NULL) {
        httpd_add_header(req, "Retry-After", "1");
        httpd_reply_error(req, 503, "busy", NULL, "out of memory passing the request on");
        return;
    }
    pthread_mutex_lock(&f->mu);
    bool take = !f->stopping && httpd_defer(req);
    if (take) {
        j->next = f->queue;
        f->queue = j;
    }
    pthread_mutex_unlock(&f->mu);
    if (!take) {
        job_free(j); /* httpd answers 503 not_leader */
        return;
    }
    curl_multi_wakeup(f->multi);
}

/* Take a finished (or given up) job out of multi and answer it. */
static void finish(forwarder *f, job *j, CURLcode rc)
{
    long request_bytes = 1; /* unknown counts as sent */
    if (curl_easy_getinfo(j->easy, CURLINFO_REQUEST_SIZE, &request_bytes) == CURLE_OK)
        j->sent = request_bytes > 0;
    else
        j->sent = true;
    job **pp = &f->active;
    while (*pp != NULL && *pp != j)
        pp = &(*pp)->next;
    if (*pp == j)
        *pp = j->next;
    curl_multi_remove_handle(f->multi, j->easy);
    answer(f, j, rc);
    job_free(j);
}

/* Give up every job whose target is no longer where requests go (all of
 * them when stopping). */
static void give_up_stale(forwarder *f, bool all)
{
    job *j = f->active, *next;
    for (; j != NULL; j = next) {
        next = j->next;
        if (!all && f->cfg.still_target(j->target, f->cfg.arg))
            continue;
        snprintf(j->error, sizeof j->error, "%s",
                 all ? "this member is stopping" : "it no longer leads, or went silent");
        /* Given up while it may be under way at the leader: a write's
         * outcome is unknown (answer() says so). */
        finish(f, j, CURLE_ABORTED_BY_CALLBACK);
    }
}

static void *run(void *arg)
{
    forwarder *f = arg;
    uint64_t checked = time_mono_ms();
    for (;;) {
        pthread_mutex_lock(&f->mu);
        job *q = f->queue;
        f->queue = NULL;
        bool stopping = f->stopping;
        pthread_mutex_unlock(&f->mu);
        while (q != NULL) {
            job *j = q;
            q = q->next;
            j->next = f->active;
            f->active = j;
            CURLMcode mc = curl_multi_add_handle(f->multi, j->easy);
            if (mc != CURLM_OK) {
                snprintf(j->error, sizeof j->error, "%s", curl_multi_strerror(mc));
                finish(f, j, CURLE_FAILED_INIT);
            }
        }
        if (stopping) {
            give_up_stale(f, true);
            return NULL;
        }
        int running = 0;
        CURLMcode mc = curl_multi_perform(f->multi, &running);
        if (mc != CURLM_OK)
            log_error("forward: libcurl: %s", curl_multi_strerror(mc));
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(f->multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE)
                continue;
            char *p = NULL;
            CURLcode rc = m->data.result;
            if (curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p) == CURLE_OK && p != NULL)
                finish(f, (job *)(void *)p, rc);
        }
        uint64_t now = time_mono_ms(), drain = atomic_load(&f->give_up_at);
        if (now - checked >= CHECK_MS) {
            give_up_stale(f, drain != 0 && now >= drain);
            checked = now;
        }
        curl_multi_poll(f->multi, NULL, 0, CHECK_MS, NULL);
    }
}

forwarder *forward_start(const forward_config *cfg, char *err, size_t errlen)
{
    forwarder *f = calloc(1, sizeof *f);
    if (f == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    f->cfg = *cfg;
    snprintf(f->self, sizeof f->self, "%s", cfg->self != NULL && cfg->self[0] ? cfg->self : "?");
    f->cfg.self = f->self;
    pthread_mutex_init(&f->mu, NULL);
    long conns = cfg->max_conns ? (long)cfg->max_conns : 64;
    if ((f->multi = curl_multi_init()) == NULL ||
        curl_multi_setopt(f->multi, CURLMOPT_MAX_HOST_CONNECTIONS, conns) != CURLM_OK ||
        curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS, conns) != CURLM_OK) {
        snprintf(err, errlen, "cannot set up libcurl's multi interface");
        forward_free(f);
        return NULL;
    }
    if (cfg->metrics != NULL) {
        metrics_family *fam = metrics_counter(
            cfg->metrics, "percolator_forwarded_requests_total",
            "requests a follower passed on to its leader, by outcome: relayed (the leader's "
            "answer), unreachable (503 not_leader), lost (503 raft_unavailable or 502)",
            "outcome", NULL);
        f->m_ok = metrics_series_get(fam, "relayed", NULL);
        f->m_unreachable = metrics_series_get(fam, "unreachable", NULL);
        f->m_lost = metrics_series_get(fam, "lost", NULL);
        f->m_received = metrics_counter1(cfg->metrics,
                                         "percolator_forwarded_requests_received_total",
                                         "requests another member passed on to this one");
    }
    if (pthread_create(&f->thread, NULL, run, f) != 0) {
        snprintf(err, errlen, "cannot start the forwarding thread");
        forward_free(f);
        return NULL;
    }
    f->started = true;
    return f;
}

void forward_note_received(forwarder *f)
{
    if (f != NULL)
        metrics_inc(f->m_received, 1);
}

void forward_drain(forwarder *f, unsigned ms)
{
    if (f != NULL)
        atomic_store(&f->give_up_at, time_mono_ms() + ms);
}

void forward_stop(forwarder *f)
{
    if (f == NULL || !f->started)
        return;
    pthread_mutex_lock(&f->mu);
    f->stopping = true;
    pthread_mutex_unlock(&f->mu);
    curl_multi_wakeup(f->multi);
    pthread_join(f->thread, NULL);
    f->started = false;
}

void forward_free(forwarder *f)
{
    if (f == NULL)
        return;
    forward_stop(f);
    if (f->multi != NULL)
        curl_multi_cleanup(f->multi);
    pthread_mutex_destroy(&f->mu);
    free(f);
}
