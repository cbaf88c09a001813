/*
 * request.c — one HTTP request to the service, and what its failure means
 * as an exit code.
 *
 * One curl handle for the whole run, so the pages of a scan and the claim
 * and commit of watch-claim share one keep-alive connection, to the member
 * that answered last. Any member of a group serves any request (a follower
 * passes it on to its leader), so failing over is moving to the next
 * endpoint; what may be sent again is what cannot have been applied: a
 * request that never connected, one a member refused with 503 not_leader
 * (it did nothing), and reads.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

static CURL *curl;
static const cli_opts *opts;
static char auth_header[4200];
static char *endpoints[CLI_MAX_ENDPOINTS];
static size_t nendpoints, current; /* current: the one that answered last */
static char endpoint_list[8192];

/* Split a comma-separated list into endpoints[] (pointers into
 * endpoint_list, trailing '/' dropped). The count, or -1 with a reason. */
static int split_endpoints(const char *list, const char **why)
{
    size_t n = 0;
    if (strlen(list) >= sizeof endpoint_list) {
        *why = "the list is too long";
        return -1;
    }
    strcpy(endpoint_list, list);
    for (char *save = NULL, *e = strtok_r(endpoint_list, ",", &save); e != NULL;
         e = strtok_r(NULL, ",", &save)) {
        if (n == CLI_MAX_ENDPOINTS) {
            *why = "more than 16 endpoints";
            return -1;
        }
        if (strncmp(e, "http://", 7) != 0 && strncmp(e, "https://", 8) != 0) {
            *why = "each endpoint must be an http:// or https:// URL";
            return -1;
        }
        size_t len = strlen(e);
        while (len > 0 && e[len - 1] == '/')
            e[--len] = '\0';
        endpoints[n++] = e;
    }
    if (n == 0)
        *why = "no endpoint given";
    return n == 0 ? -1 : (int)n;
}

int cli_endpoints_check(const char *list)
{
    const char *why = NULL;
    if (split_endpoints(list, &why) < 0) {
        fprintf(stderr, "percolator: --endpoints %s: %s (percolator --help)\n", list, why);
        return -1;
    }
    return 0;
}

int cli_http_init(const cli_opts *o)
{
    opts = o;
    const char *why = NULL;
    int n = split_endpoints(o->endpoint, &why);
    if (n < 0)
        return -1;
    nendpoints = (size_t)n;
    current = 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return -1;
    curl = curl_easy_init(); /* cli_http_done cleans up, also after a failure */
    if (curl == NULL)
        return -1;
    if (o->token) {
        int n = snprintf(auth_header, sizeof auth_header, "Authorization: Bearer %s", o->token);
        if (n < 0 || (size_t)n >= sizeof auth_header)
            return -1;
    }
    return 0;
}

void cli_http_done(void)
{
    if (curl)
        curl_easy_cleanup(curl);
    curl = NULL;
    curl_global_cleanup();
}

/* cli_download's file: a 200's body goes there, any other into the reply;
 * or cli_stream_one's function. */
static FILE *sink;
static size_t (*stream_fn)(void *, const char *, size_t);
static void *stream_arg;

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    buf *b = ud;
    size_t len = size * n;
    long status = 0;
    bool ok = (sink != NULL || stream_fn != NULL) &&
              curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
              status == 200;
    if (ok && stream_fn != NULL)
        return stream_fn(stream_arg, p, len);
    if (ok)
        return fwrite(p, 1, len, sink); /* short: CURLE_WRITE_ERROR */
    if (b->len + len > CLI_MAX_REPLY || buf_append(b, p, len) != 0)
        return 0; /* makes curl fail the transfer: CURLE_WRITE_ERROR */
    return len;
}

/* The leader a follower passed the last request on to
 * (X-Percolator-Leader), "" when it came from the member asked. */
static char leader_seen[512];

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    (void)ud;
    size_t len = size * n;
    static const char name[] = "X-Percolator-Leader:";
    size_t nl = sizeof name - 1;
    if (len > nl && strncasecmp(p, name, nl) == 0) {
        const char *v = p + nl;
        size_t vl = len - nl;
        while (vl > 0 && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        if (vl < sizeof leader_seen) {
            memcpy(leader_seen, v, vl);
            leader_seen[vl] = '\0';
        }
    }
    return len;
}

/* Set every option of one attempt; 0 or -1. */
static int setup(const char *method, const char *url, const char *body, long timeout_ms,
                 struct curl_slist *headers, cli_reply *r)
{
    curl_easy_reset(curl);
    if (curl_easy_setopt(curl, CURLOPT_URL, url) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r->body) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                         sink != NULL || stream_fn != NULL ? 0L : timeout_ms) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, opts->timeout_ms) != CURLE_OK)
        return -1;
    /* A download may take long; it fails when no byte came for the
     * timeout, and at least 10 minutes: the server copies the whole store
     * before it sends the first byte. */
    long idle_s = timeout_ms / 1000 > 600 ? timeout_ms / 1000 : 600;
    if (sink != NULL && (curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L) != CURLE_OK ||
                         curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, idle_s) != CURLE_OK))
        return -1;
    /* A stream sends a line a second at least: silence for the timeout
     * means the member is gone. */
    long stream_s = timeout_ms / 1000 > 1 ? timeout_ms / 1000 : 1;
    if (stream_fn != NULL &&
        (curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L) != CURLE_OK ||
         curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, stream_s) != CURLE_OK))
        return -1;
    /* A follower of an oracle group, or a member whose leader moved during
     * a membership change, answers 307 to its leader (the same request,
     * method and body at the leader's --raft-urls URL): follow it, with
     * the token, which every member of the group holds (curl drops the
     * Authorization header on a hop to another host or port unless told);
     * from an https endpoint only to https, so the token never goes out
     * in clear. */
    bool tls = strncmp(url, "https:", 6) == 0;
    if (curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 3L) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, tls ? "https" : "http,https") !=
            CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_UNRESTRICTED_AUTH, 1L) != CURLE_OK)
        return -1;
    if (body) {
        if (curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body) != CURLE_OK ||
            curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body)) != CURLE_OK)
            return -1;
    }
    return 0;
}

/* One try; libcurl's code (CURLE_OK when a reply came). *sent: whether
 * any of the request left this process. */
static CURLcode attempt(const char *method, const char *url, const char *body, long timeout_ms,
                        cli_reply *r, bool *sent)
{
    struct curl_slist *h = NULL, *t;
    CURLcode cc = CURLE_FAILED_INIT;
    buf_reset(&r->body);
    r->status = 0;
    r->errmsg[0] = '\0';
    *sent = false;
    leader_seen[0] = '\0';
    /* A download starts over in an empty file at each try. */
    if (sink != NULL && (fflush(sink) != 0 || ftruncate(fileno(sink), 0) != 0 ||
                         fseeko(sink, 0, SEEK_SET) != 0)) {
        snprintf(r->errmsg, sizeof r->errmsg, "cannot write the file: %s", strerror(errno));
        return CURLE_WRITE_ERROR;
    }
    if (body) {
        if ((t = curl_slist_append(h, "Content-Type: application/json")) == NULL)
            goto oom;
        h = t;
    }
    if (opts->token) {
        if ((t = curl_slist_append(h, auth_header)) == NULL)
            goto oom;
        h = t;
    }
    if ((t = curl_slist_append(h, "Expect:")) == NULL) /* no 100-continue round trip */
        goto oom;
    h = t;
    if (setup(method, url, body, timeout_ms, h, r) != 0) {
        snprintf(r->errmsg, sizeof r->errmsg, "cannot set up the request (libcurl)");
        goto out;
    }
    cc = curl_easy_perform(curl);
    long request_bytes = 0;
    *sent = curl_easy_getinfo(curl, CURLINFO_REQUEST_SIZE, &request_bytes) != CURLE_OK ||
            request_bytes > 0;
    if (cc != CURLE_OK) {
        snprintf(r->errmsg, sizeof r->errmsg, "%s: %s", url, curl_easy_strerror(cc));
        goto out;
    }
    if (curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status) != CURLE_OK)
        r->status = 0;
    goto out;
oom:
    snprintf(r->errmsg, sizeof r->errmsg, "out of memory");
out:
    curl_slist_free_all(h);
    return cc;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The reply's error code ("" when none). */
static const char *reply_code(const cli_reply *r)
{
    if (r->status == 0 || r->body.len == 0)
        return "";
    json_t *j = json_loadb(r->body.data, r->body.len, 0, NULL);
    const char *c = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    static char code[64];
    snprintf(code, sizeof code, "%s", c ? c : "");
    json_decref(j);
    return code;
}

void cli_request(const char *method, const char *path, const char *body, long extra_ms,
                 cli_reply *r)
{
    buf url = BUF_INIT;
    memset(r, 0, sizeof *r);
    bool read = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    long backoff = 100;
    for (long round = 0;; round++) {
        /* Each endpoint once, from the one that answered last. */
        bool moved_on = false;
        for (size_t k = 0; k < nendpoints; k++) {
            size_t i = (current + k) % nendpoints;
            buf_reset(&url);
            if (buf_puts(&url, endpoints[i]) != 0 || buf_puts(&url, path) != 0) {
                snprintf(r->errmsg, sizeof r->errmsg, "out of memory");
                buf_free(&url);
                return;
            }
            bool sent;
            long t0 = now_ms();
            CURLcode cc = attempt(method, url.data, body, opts->timeout_ms + extra_ms, r, &sent);
            const char *code = reply_code(r);
            if (opts->verbose) {
                char *where = NULL;
                if (r->status != 0)
                    curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &where);
                fprintf(stderr, "percolator: %s %s: %ld%s%s in %ld ms%s%s\n", method,
                        url.data, r->status, code[0] ? " " : "", code, now_ms() - t0,
                        r->status == 0 ? ": " : "", r->status == 0 ? r->errmsg : "");
                if (where != NULL && strcmp(where, url.data) != 0)
                    fprintf(stderr, "percolator:   answered by %s (redirected)\n", where);
            }
            /* Another member may serve it: nothing reached this one, it
             * refused without doing anything, or it is a read. */
            bool elsewhere = (cc != CURLE_OK && (!sent || read)) ||
                             (r->status == 503 && (strcmp(code, "not_leader") == 0 || read));
            if (!elsewhere) {
                current = i;
                /* Answered through a follower: ask the leader itself next
                 * time, when it is one of the endpoints (one hop less). */
                for (size_t k = 0; leader_seen[0] != '\0' && k < nendpoints; k++)
                    if (strcmp(endpoints[k], leader_seen) == 0)
                        current = k;
                if (opts->verbose && leader_seen[0] != '\0')
                    fprintf(stderr, "percolator:   passed on to the leader at %s%s\n",
                            leader_seen, current != i ? " (asked directly from now on)" : "");
                r->maybe_applied = !read && ((cc != CURLE_OK && sent) ||
                                             (r->status == 503 &&
                                              strcmp(code, "raft_unavailable") == 0));
                moved_on = false;
                break;
            }
            moved_on = true;
        }
        /* Every endpoint tried and none could take it, or the one that
         * answered said 503: --retries more rounds, with backoff. */
        bool again = moved_on || (r->status == 503 && !r->maybe_applied);
        if (!again || round >= opts->retries)
            break;
        nap_ms(backoff);
        backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
    }
    buf_free(&url);
    if (r->status != 0 && r->body.len > 0)
        r->json = json_loadb(r->body.data, r->body.len, JSON_ALLOW_NUL, NULL);
}

size_t cli_endpoint_count(void)
{
    return nendpoints;
}

const char *cli_endpoint(size_t i)
{
    return i < nendpoints ? endpoints[i] : NULL;
}

void cli_request_one(size_t i, const char *path, cli_reply *r)
{
    buf url = BUF_INIT;
    bool sent;
    memset(r, 0, sizeof *r);
    if (i >= nendpoints || buf_puts(&url, endpoints[i]) != 0 || buf_puts(&url, path) != 0) {
        snprintf(r->errmsg, sizeof r->errmsg, "out of memory");
        buf_free(&url);
        return;
    }
    attempt("GET", url.data, NULL, opts->timeout_ms, r, &sent);
    buf_free(&url);
    if (r->status != 0 && r->body.len > 0)
        r->json = json_loadb(r->body.data, r->body.len, JSON_ALLOW_NUL, NULL);
}

void cli_stream_one(size_t i, const char *path, size_t (*fn)(void *arg, const char *p, size_t n),
                    void *arg, cli_reply *r)
{
    stream_fn = fn;
    stream_arg = arg;
    cli_request_one(i, path, r);
    stream_fn = NULL;
    stream_arg = NULL;
}

void cli_download(const char *path, FILE *out, cli_reply *r)
{
    sink = out;
    cli_request("GET", path, NULL, 0, r);
    sink = NULL;
}

void cli_reply_free(cli_reply *r)
{
    buf_free(&r->body);
    json_decref(r->json);
    r->json = NULL;
}

static int exit_for(long status, const char *code)
{
    /* No answer, a member with no leader, a lost gateway, a redirect that
     * led nowhere: nothing reached a leader. */
    if (status == 0 || status == 502 || status == 503 || status == 504 ||
        (status >= 300 && status < 400))
        return EXIT_UNAVAILABLE;
    if (status == 404 || strcmp(code, "condition_failed") == 0)
        return EXIT_NOT_FOUND;
    if (status == 400 || status == 413 || status == 415)
        return EXIT_USAGE;
    if (status == 401)
        return EXIT_UNAUTHORIZED;
    if (status == 409 || status == 410)
        return EXIT_CONFLICT;
    return EXIT_SERVER;
}

int cli_fail(const cli_reply *r)
{
    if (r->maybe_applied) {
        fprintf(stderr, "percolator: the answer was lost (%s): the write may or may not have "
                "been applied; read it back before trying again\n",
                r->status == 0 ? r->errmsg : "503 raft_unavailable");
        return EXIT_UNKNOWN;
    }
    if (r->status == 0) {
        fprintf(stderr, "percolator: cannot reach %s\n", r->errmsg);
        return EXIT_UNAVAILABLE;
    }
    json_t *e = json_object_get(r->json, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    if (code)
        fprintf(stderr, "percolator: %ld %s: %s\n", r->status, code, msg ? msg : "");
    else
        fprintf(stderr, "percolator: unexpected HTTP status %ld\n", r->status);
    return exit_for(r->status, code ? code : "");
}
