/*
 * oracle_client.c — coalescing, keep-alive client of the timestamp oracle
 * (see oracle_client.h).
 *
 * The batching scheme. Shared state, guarded by `mu`:
 *   pending    the batch that callers are joining now (NULL: none yet)
 *   in_flight  whether a request to the oracle is on the wire
 * A caller joins `pending` (creating it if needed) and takes the next index
 * in it. Whoever finds no flight in the air while its batch is still pending
 * becomes the batch's leader: it detaches the batch (so later callers start
 * a new one), sends one request for batch->n timestamps without holding the
 * lock, then publishes the result in the batch and wakes everyone. Each
 * member reads first + its index. Batches are heap objects with a reference
 * count of their members, because a member may wake up only after the next
 * batch has already landed: results cannot live in shared fields.
 *
 * Only the leader touches the curl handle, and there is one leader at a
 * time (in_flight), so the handle needs no lock of its own and its
 * connection is reused from one batch to the next.
 */
#include "oracle_client.h"
#include "token.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "curl_peer.h"
#include "log.h"
#include "timeutil.h"

#define MAX_REPLY 4096                         /* an oracle reply is ~40 bytes */
#define MAX_TS ((UINT64_C(1) << 53) - 1)

typedef struct oc_batch {
    pthread_cond_t cv;   /* the members wait here, so a landing wakes only them */
    unsigned n;          /* members (= timestamps to fetch) */
    unsigned refs;       /* members that have not read the result yet */
    bool done;
    int err;
    uint64_t first;
} oc_batch;

#define OC_MAX_URLS 7

struct oc_client {
    char *base_url;                /* the oracle's URL, or its members' URLs,
                                      comma-separated (an oracle Raft group) */
    char *urls[OC_MAX_URLS];       /* point into base_url, or into learned */
    char learned[OC_MAX_URLS][128]; /* members named by a redirect only */
    size_t nurls, cur;             /* cur: the member asked first (leader only) */
    char url[512 + 64];
    CURL *curl;
    struct curl_slist *headers;
    buf reply;
    int timeout_ms;
    _Atomic uint64_t last_ts;      /* highest timestamp received (written by the
                                      batch leader only) */

    pthread_mutex_t mu;
    pthread_cond_t cv;             /* callers waiting for room in a full batch */
    oc_batch *pending;
    bool in_flight;

    _Atomic bool available;
    _Atomic uint64_t requests;

    metrics_series *m_ok, *m_unavailable, *m_protocol;
    metrics_series *m_batch, *m_latency, *m_wait;
};

/* fetch_one's answer when a follower named the leader (never returned). */
#define OC_REDIRECTED 100

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

const char *oc_strerror(int err)
{
    switch (err) {
    case OC_OK: return "ok";
    case OC_UNAVAILABLE: return "timestamp oracle unavailable";
    case OC_PROTOCOL: return "unexpected reply from the timestamp oracle";
    case OC_NOMEM: return "out of memory";
    case OC_BEHIND: return "the timestamp oracle went backwards (it lost its state)";
    }
    return "unknown error";
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg)
{
    buf *b = arg;
    size_t n = size * nmemb;
    if (b->len + n > MAX_REPLY || buf_append(b, p, n) != 0)
        return 0; /* makes curl fail the transfer */
    return n;
}

static void register_metrics(oc_client *c, metrics_registry *m)
{
    static const double batch_buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
    metrics_family *req = metrics_counter(m, "percolator_oracle_client_requests_total",
                                          "requests made to the timestamp oracle, by result",
                                          "result", NULL);
    c->m_ok = metrics_series_get(req, "ok", NULL);
    c->m_unavailable = metrics_series_get(req, "unavailable", NULL);
    c->m_protocol = metrics_series_get(req, "protocol", NULL);
    c->m_batch = metrics_series_get(
        metrics_histogram(m, "percolator_oracle_client_batch_size",
                          "timestamps fetched per oracle request (callers coalesced)",
                          NULL, NULL, batch_buckets, sizeof batch_buckets / sizeof batch_buckets[0]),
        NULL, NULL);
    c->m_latency = metrics_series_get(
        metrics_histogram(m, "percolator_oracle_client_request_seconds",
                          "latency of one request to the timestamp oracle", NULL, NULL,
                          metrics_latency_buckets, metrics_latency_nbuckets),
        NULL, NULL);
    c->m_wait = metrics_series_get(
        metrics_histogram(m, "percolator_oracle_client_wait_seconds",
                          "time a caller waited for its timestamp", NULL, NULL,
                          metrics_latency_buckets, metrics_latency_nbuckets),
        NULL, NULL);
}

oc_client *oc_open(const char *base_url, int timeout_ms, metrics_registry *metrics)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK || !base_url || strlen(base_url) > 512)
        return NULL;
    oc_client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    bool mu_ok = false, cv_ok = false;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    c->base_url = strdup(base_url);
    if (!c->base_url)
        goto fail;
    /* One URL, or a group's members separated by commas; trailing slashes
     * stripped so that url + "/v1/..." is well-formed. */
    for (char *save = NULL, *u = strtok_r(c->base_url, ",", &save); u != NULL;
         u = strtok_r(NULL, ",", &save)) {
        if (c->nurls == OC_MAX_URLS)
            goto fail;
        for (size_t n = strlen(u); n > 0 && u[n - 1] == '/'; n--)
            u[n - 1] = '\0';
        c->urls[c->nurls++] = u;
    }
    if (c->nurls == 0)
        goto fail;
    mu_ok = pthread_mutex_init(&c->mu, NULL) == 0;
    cv_ok = mu_ok && pthread_cond_init(&c->cv, NULL) == 0;
    if (!cv_ok)
        goto fail;
    c->curl = curl_easy_init();
    if (!c->curl)
        goto fail;
    /* No body, so no Content-Type (the oracle checks it) and no Expect. */
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type:");
    if (!h)
        goto fail;
    c->headers = h;
    h = curl_slist_append(c->headers, "Expect:");
    if (!h)
        goto fail;
    c->headers = h;

    CURL *e = c->curl;
    if (curl_peer_connection(e, (long)c->timeout_ms, (long)c->timeout_ms) != 0 ||
        curl_easy_setopt(e, CURLOPT_POST, 1L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "") != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &c->reply) != CURLE_OK)
        goto fail;
    atomic_init(&c->available, true);
    if (metrics)
        register_metrics(c, metrics);
    return c;
fail:
    if (c->headers)
        curl_slist_free_all(c->headers);
    if (c->curl)
        curl_easy_cleanup(c->curl);
    if (cv_ok)
        pthread_cond_destroy(&c->cv);
    if (mu_ok)
        pthread_mutex_destroy(&c->mu);
    free(c->base_url);
    free(c);
    return NULL;
}

int oc_set_tls(oc_client *c, const oc_tls *tls)
{
    bool all_https = true;
    for (size_t i = 0; i < c->nurls; i++)
        all_https = all_https && strncmp(c->urls[i], "https://", 8) == 0;
    /* Never a downgrade: an https:// group's requests, and any redirect
     * one of its members answers, stay https://. */
    const char *protocols = all_https ? "https" : "http,https";
    CURL *e = c->curl;
    if (curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, protocols) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, protocols) != CURLE_OK)
        return -1;
    return curl_peer_tls(e, tls->ca_file, tls->cert_file, tls->key_file);
}

/* Parse {"first":F,"count":N} and check it. OC_OK, OC_BEHIND (*first set)
 * or OC_PROTOCOL. */
static int parse_reply(oc_client *c, unsigned n, uint64_t *first)
{
    json_error_t jerr;
    json_t *j = json_loadb(c->reply.data ? c->reply.data : "", c->reply.len, 0, &jerr);
    int rc = OC_PROTOCOL;
    json_t *jf = json_object_get(j, "first");
    json_t *jc = json_object_get(j, "count");
    if (!json_is_integer(jf) || !json_is_integer(jc)) {
        log_error("oracle client: unexpected reply: %.200s", c->reply.data ? c->reply.data : "");
        goto done;
    }
    json_int_t f = json_integer_value(jf), k = json_integer_value(jc);
    if (k != (json_int_t)n || f < 1 || (uint64_t)f > MAX_TS - n + 1) {
        log_error("oracle client: reply out of range: first=%lld count=%lld (asked %u)",
                  (long long)f, (long long)k, n);
        goto done;
    }
    if ((uint64_t)f <= c->last_ts) {
        /* The oracle went backwards (its state was lost or replaced):
         * handing these out would break snapshot isolation. The service
         * logs it once (svc.c ts_verdict). */
        log_debug("oracle client: oracle went backwards: first=%lld, already had %llu",
                  (long long)f, (unsigned long long)c->last_ts);
        *first = (uint64_t)f;
        rc = OC_BEHIND;
        goto done;
    }
    c->last_ts = (uint64_t)f + n - 1;
    *first = (uint64_t)f;
    rc = OC_OK;
done:
    json_decref(j);
    return rc;
}

/* A follower of an oracle Raft group answers 307 naming its leader: ask
 * that member from now on (no redirect per request). Followed by hand, not
 * by libcurl, which would drop the token on the way to another host: only
 * to the same endpoint, /v1/timestamps, over http or https, and a member
 * not among --oracle's URLs is remembered as one (the group's --raft-urls
 * name it). Whether the redirect could be followed. */
static bool follow_leader(oc_client *c)
{
    char *loc = NULL;
    if (curl_easy_getinfo(c->curl, CURLINFO_REDIRECT_URL, &loc) != CURLE_OK || loc == NULL)
        return false;
    const char *end = strstr(loc, "/v1/timestamps");
    size_t len = end ? (size_t)(end - loc) : 0;
    if (len == 0 || (strncmp(loc, "http://", 7) != 0 && strncmp(loc, "https://", 8) != 0) ||
        len >= sizeof c->learned[0]) {
        log_warn("oracle client: a redirect to %.200s not followed", loc);
        return false;
    }
    for (size_t i = 0; i < c->nurls; i++) {
        if (strlen(c->urls[i]) == len && strncmp(loc, c->urls[i], len) == 0) {
            c->cur = i;
            return true;
        }
    }
    if (c->nurls == OC_MAX_URLS)
        return false;
    char *u = c->learned[c->nurls];
    memcpy(u, loc, len);
    u[len] = '\0';
    c->urls[c->nurls] = u;
    c->cur = c->nurls++;
    log_info("oracle client: the oracle's leader is at %s (learned from a redirect)", u);
    return true;
}

int oc_set_token(oc_client *c, const char *token)
{
    char line[TOKEN_MAX + 32];
    snprintf(line, sizeof line, "Authorization: Bearer %s", token);
    struct curl_slist *h = curl_slist_append(c->headers, line);
    if (h == NULL)
        return -1;
    c->headers = h;
    return curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers) == CURLE_OK ? 0 : -1;
}

/* One oracle request for n timestamps to member c->cur. */
static int fetch_one(oc_client *c, unsigned n, uint64_t *first)
{
    uint64_t t0 = time_mono_ns();
    buf_reset(&c->reply);
    snprintf(c->url, sizeof c->url, "%s/v1/timestamps?count=%u", c->urls[c->cur], n);
    int rc;
    long status = 0;
    CURLcode cc = curl_easy_setopt(c->curl, CURLOPT_URL, c->url);
    if (cc == CURLE_OK)
        cc = curl_easy_perform(c->curl);
    if (cc == CURLE_OK)
        cc = curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK) {
        rc = cc == CURLE_OUT_OF_MEMORY ? OC_NOMEM : OC_UNAVAILABLE;
        log_debug("oracle client: %s: %s", c->url, curl_easy_strerror(cc));
    } else if (status == 200) {
        rc = parse_reply(c, n, first);
    } else if (status == 307 && follow_leader(c)) {
        return OC_REDIRECTED; /* not an answer: nothing to count */
    } else if (status >= 500) {
        rc = OC_UNAVAILABLE;
        log_warn("oracle client: oracle answered %ld: %.200s", status,
                 c->reply.data ? c->reply.data : "");
    } else {
        rc = OC_PROTOCOL;
        log_error("oracle client: oracle answered %ld: %.200s", status,
                  c->reply.data ? c->reply.data : "");
    }
    atomic_fetch_add(&c->requests, 1);
    bool was = atomic_exchange(&c->available, rc == OC_OK);
    if (was && rc == OC_UNAVAILABLE)
        log_warn("oracle client: oracle at %s unavailable (%s)", c->urls[c->cur],
                 cc != CURLE_OK ? curl_easy_strerror(cc) : "server error");
    else if (!was && rc == OC_OK)
        log_info("oracle client: oracle at %s is back", c->urls[c->cur]);
    metrics_inc(rc == OC_OK ? c->m_ok : rc == OC_UNAVAILABLE ? c->m_unavailable : c->m_protocol, 1);
    metrics_observe(c->m_batch, n);
    metrics_observe(c->m_latency, (double)(time_mono_ns() - t0) / 1e9);
    return rc;
}

/* One request for n timestamps, trying the members in turn while one is
 * unreachable or has no leader. Called by the batch leader only, without
 * the lock. */
static int fetch(oc_client *c, unsigned n, uint64_t *first)
{
    int rc = OC_UNAVAILABLE;
    unsigned hops = 0;
    for (size_t tries = 0; tries < c->nurls;) {
        rc = fetch_one(c, n, first);
        if (rc == OC_REDIRECTED && ++hops <= 2)
            continue; /* c->cur is the leader it named */
        if (rc != OC_UNAVAILABLE && rc != OC_REDIRECTED)
            return rc;
        c->cur = (c->cur + 1) % c->nurls; /* down, or no leader: the next one */
        tries++;
    }
    return OC_UNAVAILABLE;
}

static oc_batch *batch_new(void)
{
    oc_batch *b = calloc(1, sizeof *b);
    if (b && pthread_cond_init(&b->cv, NULL) != 0) {
        free(b);
        b = NULL;
    }
    return b;
}

static void batch_free(oc_batch *b)
{
    if (b) {
        pthread_cond_destroy(&b->cv);
        free(b);
    }
}

int oc_timestamps(oc_client *c, unsigned count, uint64_t *first)
{
    if (count == 0 || count > OC_MAX_BATCH)
        return OC_PROTOCOL;
    uint64_t t0 = time_mono_ns();
    pthread_mutex_lock(&c->mu);
    /* A full batch cannot take more members: wait for the next one. */
    while (c->pending && c->pending->n + count > OC_MAX_BATCH)
        pthread_cond_wait(&c->cv, &c->mu);
    if (!c->pending) {
        c->pending = batch_new();
        if (!c->pending) {
            pthread_mutex_unlock(&c->mu);
            return OC_NOMEM;
        }
    }
    oc_batch *b = c->pending;
    unsigned idx = b->n;
    b->n += count;
    b->refs++;

    while (!b->done) {
        if (!c->in_flight && c->pending == b) {
            /* Lead this batch: detach it so newcomers start the next one. */
            c->in_flight = true;
            c->pending = NULL;
            pthread_cond_broadcast(&c->cv); /* room again for any waiter */
            unsigned n = b->n;
            pthread_mutex_unlock(&c->mu);

            uint64_t first = 0;
            int err = fetch(c, n, &first);

            pthread_mutex_lock(&c->mu);
            b->first = first;
            b->err = err;
            b->done = true;
            c->in_flight = false;
            pthread_cond_broadcast(&b->cv);      /* our members: results are in */
            if (c->pending)
                pthread_cond_signal(&c->pending->cv); /* one of the next batch leads */
            break;
        }
        pthread_cond_wait(&b->cv, &c->mu);
    }

    int err = b->err;
    if (err == OC_OK || err == OC_BEHIND)
        *first = b->first + idx;
    if (--b->refs == 0)
        batch_free(b);
    pthread_mutex_unlock(&c->mu);
    metrics_observe(c->m_wait, (double)(time_mono_ns() - t0) / 1e9);
    return err;
}

uint64_t oc_highest(oc_client *c)
{
    return atomic_load(&c->last_ts);
}

int oc_timestamp(oc_client *c, uint64_t *ts)
{
    return oc_timestamps(c, 1, ts);
}

bool oc_available(oc_client *c)
{
    return atomic_load(&c->available);
}

uint64_t oc_requests(oc_client *c)
{
    return atomic_load(&c->requests);
}

void oc_close(oc_client *c)
{
    if (!c)
        return;
    batch_free(c->pending); /* NULL unless a call is still running (a misuse) */
    curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->headers);
    buf_free(&c->reply);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c->base_url);
    free(c);
}
