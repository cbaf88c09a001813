/*
 * pd_report.c — see pd_report.h. One thread for the reports; two clients
 * (a libcurl handle each, and where each sends): the thread's, and one
 * for new ids, which splits ask for on other threads, so that a split
 * never waits for a round of reports. The JSON is jansson's. Nothing here
 * changes the service's state: it reads the router's map and the
 * member's leadership, and reports them.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"
#include "buf.h"
#include "curl_peer.h"
#include "log.h"
#include "pd_report.h"
#include "timeutil.h"

#define PD_URLS_MAX 8            /* oracle members tried */
#define PD_URL_MAX 512
#define PD_IDS_MAX 100000        /* ids in one request: the driver's limit */
#define PD_REPORT_CHUNK 1000     /* regions in one heartbeat: well below the driver's
                                    1 MiB body with keys of a few hundred bytes */

/* One HTTP client of the driver. */
typedef struct {
    pd_report *r;
    CURL *curl;
    buf answer;
    size_t at;                   /* the member that answered last */
    char base[PD_URL_MAX];       /* where requests go now: urls[at], or the leader a 307 named */
} pd_client;

struct pd_report {
    svc *s;
    pd_report_config cfg;
    char urls[PD_URLS_MAX][PD_URL_MAX];
    size_t nurls;                /* the members */
    char self_url[PD_URL_MAX];
    char *token_header;          /* "Authorization: Bearer ..." or NULL */
    struct curl_slist *headers;  /* shared by the two clients */
    pd_client rep;               /* the reporting thread's */
    pd_client ids;               /* new ids', under ids_mu */
    pthread_mutex_t ids_mu;
    uint64_t node;               /* this node's id at the driver (0: not registered yet) */
    uint64_t member_ids[RAFT_PEERS_MAX]; /* each member's id at the driver (0: not yet) */
    _Atomic bool alone;          /* the oracle has no driver: nothing to report, local ids */
    bool failing;                /* the last round failed (logged once until one works) */
    metrics_family *m_reports;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, started;
    _Atomic bool stopping;       /* stop asked: no more tries, a transfer under way aborts */
};

/* libcurl's progress callback: a transfer under way gives up once the
 * service stops, so stopping waits for no timeout. */
static int abort_if_stopping(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&((pd_report *)arg)->stopping) ? 1 : 0;
}

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
    return buf_append(arg, p, size * n) == 0 ? size * n : 0;
}

/* The origin (scheme://host:port) of url into out. */
static void origin_of(const char *url, char *out, size_t len)
{
    const char *p = strstr(url, "://");
    const char *end = p != NULL ? strchr(p + 3, '/') : NULL;
    size_t n = end != NULL ? (size_t)(end - url) : strlen(url);
    snprintf(out, len, "%.*s", (int)n, url);
}

/* POST path with body (a JSON text, or NULL): the status (0: no answer
 * from any member), the answer in c->answer. A 307 moves to the leader it
 * names; a member that does not answer, or answers 503, gives way to the
 * next. */
static long post(pd_client *c, const char *path, const char *body)
{
    pd_report *r = c->r;
    long status = 0;
    for (size_t tries = 0; tries < r->nurls + 3 && !atomic_load(&r->stopping); tries++) {
        char url[PD_URL_MAX + 128];
        snprintf(url, sizeof url, "%s%s", c->base, path);
        buf_reset(&c->answer);
        curl_easy_setopt(c->curl, CURLOPT_URL, url);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body != NULL ? body : "");
        status = 0;
        if (curl_easy_perform(c->curl) == CURLE_OK)
            curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
        char *loc = NULL;
        if (status == 307 && curl_easy_getinfo(c->curl, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK &&
            loc != NULL) {
            origin_of(loc, c->base, sizeof c->base); /* the leader, for this and what follows */
            continue;
        }
        if (status != 0 && status != 503)
            return status;
        c->at = (c->at + 1) % r->nurls;
        snprintf(c->base, sizeof c->base, "%s", r->urls[c->at]);
    }
    return status;
}

static const char *answer_text(const pd_client *c)
{
    return c->answer.data != NULL ? c->answer.data : "";
}

/* A single oracle's answer: it has no driver. */
static bool says_alone(const pd_client *c, long status)
{
    return status == 409 && strstr(answer_text(c), "not_in_a_group") != NULL;
}

static uint64_t answer_int(pd_client *c, const char *field)
{
    json_t *j = json_loadb(answer_text(c), c->answer.len, 0, NULL);
    json_int_t v = json_integer_value(json_object_get(j, field));
    json_decref(j);
    return v > 0 ? (uint64_t)v : 0;
}

/* What a failed request got, in words: the driver's error message, or
 * that no member answered. */
static void failure_text(const pd_client *c, long status, char *why, size_t whylen)
{
    if (status == 0) {
        snprintf(why, whylen, "no member of the oracle group answered");
        return;
    }
    json_t *j = json_loadb(answer_text(c), c->answer.len, 0, NULL);
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    snprintf(why, whylen, "it answered %ld%s%.200s", status, msg != NULL ? ": " : "",
             msg != NULL ? msg : "");
    json_decref(j);
}

/* The driver's id for url (registering it: a known address keeps its
 * id); 0 when it did not answer 200. */
static uint64_t register_url(pd_report *r, const char *url, long *status)
{
    json_t *b = json_pack("{s:s}", "address", url);
    char *text = b != NULL ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    *status = text != NULL ? post(&r->rep, "/v1/pd/nodes", text) : 0;
    free(text);
    return *status == 200 ? answer_int(&r->rep, "id") : 0;
}

static json_t *key_json(const pc_buf *k)
{
    char *s = malloc(4 * ((k->len + 2) / 3) + 1);
    if (s == NULL)
        return NULL;
    b64_encode(k->data, k->len, s);
    json_t *j = json_string(s);
    free(s);
    return j;
}

/* The next chunk of the regions this node leads (all[*at..]), as the
 * driver takes them; *at moves past them. NULL when out of memory. */
static json_t *regions_json(region **all, const uint64_t *terms, size_t n, size_t *at,
                            json_t *replicas)
{
    json_t *list = json_array();
    for (size_t k = 0; list != NULL && *at < n && k < PD_REPORT_CHUNK; k++, (*at)++) {
        const region *g = all[*at];
        uint64_t term = terms[*at];
        int64_t size = atomic_load(&g->size);
        json_t *o = json_pack("{s:I,s:o,s:o,s:I,s:i,s:O,s:I,s:I}", "id", (json_int_t)g->id,
                              "start", key_json(&g->start), "end",
                              g->unbounded ? json_null() : key_json(&g->end), "version",
                              (json_int_t)g->epoch, "conf_ver", 1, "replicas", replicas, "bytes",
                              (json_int_t)(size > 0 ? size : 0), "term", (json_int_t)term);
        if (o == NULL || json_array_append_new(list, o) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    return list;
}

/* Each region's term as its leader here (terms[i] for all[i]): the one
 * log's, or with --region-logs its own group's (their terms are unrelated
 * numbers; the driver compares a region's hints with its own only).
 * Regions not led here (a lead being handed over) are left out, the rest
 * moved up in place. How many are left. */
static size_t region_terms(svc *s, region **all, uint64_t *terms, size_t n, uint64_t term)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t t = term;
        if (s->cfg.region_logs &&
            svc_write_term(s, (pc_slice){all[i]->start.data, all[i]->start.len}, &t) == NULL)
            t = RP_TERM_NONE;
        if (t == RP_TERM_NONE)
            continue;
        all[kept] = all[i];
        terms[kept++] = t;
    }
    return kept;
}

/* One heartbeat of regions (a JSON array, taken): the status. */
static long send_heartbeat(pd_report *r, json_t *regions)
{
    json_t *body = regions != NULL ? json_pack("{s:I,s:o}", "node", (json_int_t)r->node,
                                               "regions", regions)
                                   : NULL;
    char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    long st = text != NULL ? post(&r->rep, "/v1/pd/heartbeat", text) : 0;
    free(text);
    return st;
}

static void count(pd_report *r, const char *outcome)
{
    metrics_inc(metrics_series_get(r->m_reports, outcome, NULL), 1);
}

/* One round: register if not yet, then the heartbeat. */
static void round_once(pd_report *r)
{
    long st = 0;
    if (r->node == 0) {
        r->node = register_url(r, r->self_url, &st);
        if (says_alone(&r->rep, st)) {
            log_info("placement driver: the oracle runs alone (no Raft group), so there is no "
                     "driver to report to; this node does not report");
            atomic_store(&r->alone, true);
            return;
        }
        if (r->node == 0)
            goto failed;
        log_info("placement driver: this node is node %llu (%s)", (unsigned long long)r->node,
                 r->self_url);
    }
    bool leads = !svc_replicated(r->s) || svc_leads(r->s);
    json_t *replicas = json_array();
    if (!svc_replicated(r->s)) {
        json_array_append_new(replicas, json_integer((json_int_t)r->node));
    } else if (leads) {
        /* Every member registered first: the map takes a region's
         * replicas only with a newer epoch, so a report missing one would
         * stand until the next split. */
        for (size_t i = 0; i < r->cfg.nmembers && leads; i++) {
            long ignored;
            if (r->member_ids[i] == 0 && r->cfg.members[i].http[0] != '\0')
                r->member_ids[i] = register_url(r, r->cfg.members[i].http, &ignored);
            if (r->member_ids[i] != 0)
                json_array_append_new(replicas, json_integer((json_int_t)r->member_ids[i]));
            else
                leads = false; /* this round says only that the node is alive */
        }
    }
    /* The term it leads in: the driver keeps the hint of the highest term,
     * so a deposed leader's late report does not undo its successor's. */
    uint64_t term = 1; /* a single node's one term */
    if (svc_replicated(r->s) && leads) {
        raft_group_status gs;
        svc_raft_status(r->s, &gs);
        term = gs.ready_term; /* read after leads: deposed since, it is 0 */
        leads = term != 0;
    }
    region **all = NULL;
    size_t n = leads ? router_list(r->s->regions, &all) : 0, at = 0;
    uint64_t *terms = n > 0 ? calloc(n, sizeof *terms) : NULL;
    if (n > 0 && (all == NULL || terms == NULL))
        n = 0; /* out of memory: an empty report, the regions next time */
    n = region_terms(r->s, all, terms, n, term);
    do { /* in chunks: a node with many regions stays under the body limit */
        st = send_heartbeat(r, regions_json(all, terms, n, &at, replicas));
    } while (st == 200 && at < n && !atomic_load(&r->stopping));
    free(all);
    free(terms);
    json_decref(replicas);
    if (st == 404) { /* the driver lost this node (a new oracle group): register again */
        r->node = 0;
        memset(r->member_ids, 0, sizeof r->member_ids);
    }
    if (st != 200)
        goto failed;
    if (r->failing)
        log_info("placement driver: reporting again");
    r->failing = false;
    count(r, "ok");
    return;
failed:
    if (!r->failing)
        log_warn("placement driver: a report failed (status %ld%s%.200s); trying again every "
                 "%u ms",
                 st, r->rep.answer.len ? ": " : "", answer_text(&r->rep),
                 r->cfg.interval_ms);
    r->failing = true;
    count(r, st == 0 ? "unreachable" : "refused");
}

static void *run(void *arg)
{
    pd_report *r = arg;
    round_once(r); /* at once: the node is known as soon as it serves */
    pthread_mutex_lock(&r->mu);
    while (!r->stop && !atomic_load(&r->alone)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)r->cfg.interval_ms * 1000000u;
        until.tv_sec += (time_t)(ns / 1000000000u);
        until.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&r->cv, &r->mu, &until);
        if (r->stop)
            continue;
        pthread_mutex_unlock(&r->mu);
        round_once(r);
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void client_clear(pd_client *c)
{
    if (c->curl != NULL)
        curl_easy_cleanup(c->curl);
    buf_free(&c->answer);
}

static void free_report(pd_report *r)
{
    client_clear(&r->rep);
    client_clear(&r->ids);
    curl_slist_free_all(r->headers);
    free(r->token_header);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->ids_mu);
    free(r);
}

/* The headers both clients send; false when out of memory. */
static bool make_headers(pd_report *r)
{
    r->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (r->headers != NULL && r->token_header != NULL) {
        struct curl_slist *h = curl_slist_append(r->headers, r->token_header);
        if (h == NULL)
            return false;
        r->headers = h;
    }
    return r->headers != NULL;
}

/* A client with its handle's options, sending to the first member; false
 * if libcurl refused one. */
static bool client_init(pd_report *r, pd_client *c)
{
    const oc_tls *t = r->cfg.tls;
    long timeout = (long)(r->s->cfg.oracle_timeout_ms ? r->s->cfg.oracle_timeout_ms : 2000);
    c->r = r;
    snprintf(c->base, sizeof c->base, "%s", r->urls[0]);
    c->curl = curl_easy_init();
    return c->curl != NULL && curl_peer_connection(c->curl, timeout, 2 * timeout) == 0 &&
           (t == NULL || curl_peer_tls(c->curl, t->ca_file, t->cert_file, t->key_file) == 0) &&
           curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, r->headers) == CURLE_OK &&
           curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, collect) == CURLE_OK &&
           curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &c->answer) == CURLE_OK &&
           curl_easy_setopt(c->curl, CURLOPT_POST, 1L) == CURLE_OK &&
           curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L) == CURLE_OK &&
           curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, abort_if_stopping) == CURLE_OK &&
           curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, r) == CURLE_OK;
}

pd_report *pd_report_start(svc *s, const pd_report_config *cfg, bool *failed)
{
    *failed = false;
    if (cfg->interval_ms == 0 || cfg->self_url == NULL || cfg->self_url[0] == '\0')
        return NULL;
    pd_report *r = calloc(1, sizeof *r);
    if (r == NULL) {
        *failed = true;
        return NULL;
    }
    r->s = s;
    r->cfg = *cfg;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->ids_mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    snprintf(r->self_url, sizeof r->self_url, "%s", cfg->self_url);
    for (const char *p = cfg->oracle; *p != '\0' && r->nurls < PD_URLS_MAX;) {
        size_t n = strcspn(p, ",");
        if (n > 0 && n < PD_URL_MAX)
            snprintf(r->urls[r->nurls++], PD_URL_MAX, "%.*s", (int)n, p);
        p += n + (p[n] == ',');
    }
    if (cfg->token != NULL) {
        size_t n = strlen(cfg->token) + 32;
        if ((r->token_header = malloc(n)) != NULL)
            snprintf(r->token_header, n, "Authorization: Bearer %s", cfg->token);
    }
    r->m_reports = metrics_counter(s->metrics, "percolator_pd_reports_total",
                                   "heartbeats to the placement driver, by outcome (ok, refused, "
                                   "unreachable)",
                                   "outcome", NULL);
    if (r->nurls == 0 || (cfg->token != NULL && r->token_header == NULL) || !make_headers(r) ||
        !client_init(r, &r->rep) || !client_init(r, &r->ids)) {
        free_report(r);
        *failed = true;
        return NULL;
    }
    if (pthread_create(&r->thread, NULL, run, r) != 0) {
        free_report(r);
        *failed = true;
        return NULL;
    }
    r->started = true;
    return r;
}

void pd_report_cancel(pd_report *r)
{
    if (r != NULL)
        atomic_store(&r->stopping, true); /* a request under way gives up */
}

void pd_report_stop(pd_report *r)
{
    if (r == NULL)
        return;
    pd_report_cancel(r);
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (r->started)
        pthread_join(r->thread, NULL);
    free_report(r);
}

pd_id_rc pd_report_new_id(pd_report *r, uint64_t min, uint64_t *id, char *why, size_t whylen)
{
    if (r == NULL || atomic_load(&r->alone))
        return PD_ID_NONE;
    snprintf(why, whylen, "the service is stopping");
    if (atomic_load(&r->stopping))
        return PD_ID_UNAVAILABLE;
    pthread_mutex_lock(&r->ids_mu);
    pd_id_rc rc = PD_ID_UNAVAILABLE;
    uint64_t count = 1;
    /* The ids come in order: ask until a batch reaches min, each batch
     * asking for the gap left (at most the driver's 100,000 a request). */
    bool failed = false;
    for (int tries = 0; tries < 16 && rc == PD_ID_UNAVAILABLE && !failed; tries++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/pd/ids?count=%llu", (unsigned long long)count);
        long st = post(&r->ids, path, NULL);
        uint64_t first = st == 200 ? answer_int(&r->ids, "first") : 0;
        if (says_alone(&r->ids, st)) {
            atomic_store(&r->alone, true);
            rc = PD_ID_NONE;
        } else if (first == 0) {
            if (!atomic_load(&r->stopping)) {
                failure_text(&r->ids, st, why, whylen);
                log_warn("placement driver: no new id: %s", why);
            }
            failed = true;
        } else if (first + count - 1 >= min) { /* every id of the batch is ours: min's too */
            *id = first >= min ? first : min;
            rc = PD_ID_OK;
        } else {
            uint64_t gap = min - (first + count) + 1;
            count = gap > PD_IDS_MAX ? PD_IDS_MAX : gap;
        }
    }
    if (rc == PD_ID_UNAVAILABLE && !failed) {
        snprintf(why, whylen, "its ids did not reach %llu in 16 requests", (unsigned long long)min);
        log_warn("placement driver: %s", why);
    }
    pthread_mutex_unlock(&r->ids_mu);
    return rc;
}
