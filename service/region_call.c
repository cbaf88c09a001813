/*
 * region_call.c — see region_call.h.
 */
#include "region_call.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "curl_peer.h"
#include "log.h"
#include "raft_group.h"
#include "sessions.h"
#include "timeutil.h"
#include "token.h"

#define MAX_IDLE 64 /* handles kept between calls (each keeps its connections) */

struct region_calls {
    svc *s;
    oc_tls tls; /* main's flags: they outlive the calls (as forward.c's) */
    struct curl_slist *headers; /* Content-Type, no Expect, the token */
    size_t max_reply;
    long timeout_ms;
    pthread_mutex_t mu;
    CURL *idle[MAX_IDLE];
    size_t nidle;
};

/* The call this thread serves (routes_region_calls.c), if any. */
static _Thread_local char call_run[24];

void region_call_serving(const char *run)
{
    snprintf(call_run, sizeof call_run, "%s", run != NULL ? run : "");
}

const char *region_call_for_run(void)
{
    return call_run[0] != '\0' ? call_run : NULL;
}

region_calls *region_calls_start(svc *s, const oc_tls *tls, char *err, size_t errlen)
{
    region_calls *rc = calloc(1, sizeof *rc);
    if (rc == NULL || pthread_mutex_init(&rc->mu, NULL) != 0) {
        free(rc);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    rc->s = s;
    rc->tls = *tls;
    /* An answer carries a value, or a scan's part (its keys and values up
     * to --max-reply-bytes and one more, items at most REGION_CALL_MAX_SCAN),
     * in base64, and a lock's keys. */
    rc->max_reply = (size_t)(s->cfg.max_value_bytes + s->cfg.max_reply_bytes) / 3 * 4 +
                    (size_t)REGION_CALL_MAX_SCAN * 64 + ((size_t)64 << 10);
    /* The longest an action may take there: a read's lock wait, then a
     * quorum round (forward.c's bound, for the same reason). */
    rc->timeout_ms = (long)(s->cfg.lock_wait_ms + 30000);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (h != NULL)
        rc->headers = h;
    h = h != NULL ? curl_slist_append(rc->headers, "Expect:") : NULL;
    if (h != NULL) {
        char line[TOKEN_MAX + 64];
        snprintf(line, sizeof line, PEER_TOKEN_HEADER ": %s", s->peer_auth.secret);
        h = curl_slist_append(rc->headers, line);
    }
    if (h != NULL && s->auth.secret != NULL) {
        char line[TOKEN_MAX + 32];
        snprintf(line, sizeof line, "Authorization: Bearer %s", s->auth.secret);
        h = curl_slist_append(rc->headers, line);
    }
    if (h == NULL) {
        region_calls_free(rc);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return rc;
}

void region_calls_free(region_calls *rc)
{
    if (rc == NULL)
        return;
    for (size_t i = 0; i < rc->nidle; i++)
        curl_easy_cleanup(rc->idle[i]);
    pthread_mutex_destroy(&rc->mu);
    curl_slist_free_all(rc->headers);
    free(rc);
}

bool region_call_elsewhere(svc *s, pc_slice key, char *url, size_t len)
{
    if (region_call_for_run() != NULL)
        return false; /* serving a call: run here, or refuse (region_call.h) */
    if (s->calls == NULL || !s->cfg.region_logs || s->regions == NULL)
        return false;
    region *r = router_find(s->regions, key.data, key.len);
    if (r == NULL || r->raft == NULL || r->repl == NULL || svc_region_ready_term(r) != RP_TERM_NONE)
        return false; /* led here, ready (or no such region: here, refused) */
    raft_group_status st;
    raft_group_get_status(r->raft, &st);
    if (st.leader_id == 0 || st.leader_id == (unsigned)s->cfg.shared.raft_id ||
        st.leader_http[0] == '\0' || strlen(st.leader_http) >= len)
        return false;
    memcpy(url, st.leader_http, strlen(st.leader_http) + 1);
    return true;
}

/* ---- the client ---- */

/* The owner of the lock a status check is for, if this node's sessions
 * own it: whether they say it lives (actions.c owner_alive_for). */
static int owner_verdict(svc *s, const act_call *a)
{
    const pc_slice *o = &a->meta.owner;
    size_t rl = strlen(s->run_id);
    if (a->kind != ACT_CHECK_TXN_STATUS || o->len <= rl || memcmp(o->data, s->run_id, rl) != 0 ||
        ((const char *)o->data)[rl] != '-')
        return ACT_OWNER_UNKNOWN;
    return sessions_owner_alive(s->sessions, o->data, o->len, time_wall_ms()) ? ACT_OWNER_ALIVE
                                                                              : ACT_OWNER_DEAD;
}

static CURL *take_handle(region_calls *rc)
{
    CURL *e = NULL;
    pthread_mutex_lock(&rc->mu);
    if (rc->nidle > 0)
        e = rc->idle[--rc->nidle];
    pthread_mutex_unlock(&rc->mu);
    if (e != NULL)
        return e;
    e = curl_easy_init();
    if (e == NULL)
        return NULL;
    if (curl_peer_connection(e, 1000, rc->timeout_ms) != 0 ||
        curl_peer_tls(e, rc->tls.ca_file, rc->tls.cert_file, rc->tls.key_file) != 0 ||
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK) {
        curl_easy_cleanup(e);
        return NULL;
    }
    return e;
}

static void give_handle(region_calls *rc, CURL *e)
{
    pthread_mutex_lock(&rc->mu);
    if (rc->nidle < MAX_IDLE) {
        rc->idle[rc->nidle++] = e;
        e = NULL;
    }
    pthread_mutex_unlock(&rc->mu);
    if (e != NULL)
        curl_easy_cleanup(e);
}

typedef struct {
    buf *b;
    size_t max;
} reply_sink;

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    reply_sink *r = arg;
    size_t len = size * n;
    if (r->b->len + len > r->max || buf_append(r->b, p, len) != 0)
        return 0; /* too long, or no memory: the transfer fails */
    return len;
}

pc_rc region_call(svc *s, const char *url, const act_call *a, act_answer *out)
{
    region_calls *rc = s->calls;
    /* A node serving a call runs it alone (routes_region_calls.c): what
     * it sends would wait on other nodes' workers, which may be waiting
     * on its own. Nothing does; this keeps it so. */
    if (region_call_for_run() != NULL) {
        log_warn("region call: %s not sent to %s while serving a call", act_name(a->kind), url);
        return PC_UNAVAILABLE;
    }
    json_t *body = region_call_encode(a, s->run_id, atomic_load(&s->observed_digest),
                                      owner_verdict(s, a));
    char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    CURL *e = text != NULL ? take_handle(rc) : NULL;
    if (e == NULL) {
        free(text);
        return PC_NOMEM;
    }
    char full[RAFT_PEER_ADDR_MAX + sizeof REGION_CALL_PATH + 8];
    snprintf(full, sizeof full, "%s%s", url, REGION_CALL_PATH);
    buf reply = BUF_INIT;
    reply_sink sink = {&reply, rc->max_reply};
    long status = 0, sent = 0;
    CURLcode cc = CURLE_OUT_OF_MEMORY;
    if (curl_easy_setopt(e, CURLOPT_URL, full) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, rc->headers) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, text) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(text)) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                         a->timeout_ms != 0 ? (long)a->timeout_ms : rc->timeout_ms) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &sink) == CURLE_OK)
        cc = curl_easy_perform(e);
    if (cc == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    /* Bytes of the request written, every attempt: libcurl sends a POST
     * again by itself on a fresh connection when a kept one died, so a
     * failed connect may follow a request the node read and ran. */
    if (curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &sent) != CURLE_OK)
        sent = 1;
    /* The handle keeps its connection, not the request's buffers. */
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, NULL);
    give_handle(rc, e);
    free(text);

    pc_rc r;
    if (cc != CURLE_OK && sent == 0) {
        r = PC_NOT_LEADER; /* never sent (no connection, no TLS): safe to send elsewhere */
    } else if (cc != CURLE_OK) {
        log_warn("region call: %s to %s: %s", act_name(a->kind), url, curl_easy_strerror(cc));
        r = PC_UNAVAILABLE;
    } else if (status != 200) {
        log_warn("region call: %s to %s answered %ld: %.200s", act_name(a->kind), url, status,
                 reply.data != NULL ? reply.data : "");
        /* A 4xx refused the call itself (a bug of ours, or peers of
         * another secret); anything else may follow the action run. */
        r = status >= 400 && status < 500 ? PC_ERROR : PC_UNAVAILABLE;
    } else {
        json_error_t jerr;
        json_t *o = json_loadb(reply.data != NULL ? reply.data : "", reply.len, 0, &jerr);
        r = o != NULL ? region_answer_decode(o, a, out) : PC_UNAVAILABLE;
        if (r == PC_SYNC_FAILED || r == PC_PANIC)
            r = PC_UNAVAILABLE; /* its store failed, not ours: it stops, another leads */
        if (json_is_true(json_object_get(o, "observers_differ")))
            atomic_store(&s->observers_behind, true); /* maybe this node's (janitor.c) */
        json_decref(o);
    }
    buf_free(&reply);
    return r;
}

pc_slice act_key(const act_call *a)
{
    return a->kind == ACT_PREWRITE                                        ? a->m[0].key
           : a->kind == ACT_HEARTBEAT || a->kind == ACT_CHECK_TXN_STATUS ? a->meta.primary
                                                                          : a->keys[0];
}

#define ATTEMPTS 4

pc_rc region_call_route(svc *s, pc_session *ps, const act_call *a, act_answer *out,
                        act_here_fn here)
{
    pc_slice key = act_key(a);
    char url[RAFT_PEER_ADDR_MAX];
    pc_rc rc = PC_NOT_LEADER;

    /* One log (or no calls): nowhere else to send it, as before calls. */
    int attempts = s->calls != NULL && s->cfg.region_logs ? ATTEMPTS : 1;
    for (int attempt = 0; attempt < attempts && rc == PC_NOT_LEADER; attempt++) {
        if (attempt > 0)
            time_sleep_ms(20u << attempt);
        if (!region_call_elsewhere(s, key, url, sizeof url)) {
            rc = here(s, ps, a, out);
            continue;
        }
        rc = region_call(s, url, a, out);
        metrics_inc(metrics_series_get(s->m.region_calls_sent, act_name(a->kind), pc_rc_name(rc)), 1);
    }
    return rc;
}
