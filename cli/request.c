/*
 * request.c — one HTTP request to the service, and what its failure means
 * as an exit code.
 *
 * One curl handle for the whole run, so the pages of a scan and the claim
 * and commit of watch-claim share one keep-alive connection. Redirects are
 * not followed (a redirect would carry the token elsewhere) and only
 * http/https are allowed.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

static CURL *curl;
static const cli_opts *opts;
static char auth_header[4200];

int cli_http_init(const cli_opts *o)
{
    opts = o;
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

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    buf *b = ud;
    size_t len = size * n;
    if (b->len + len > CLI_MAX_REPLY || buf_append(b, p, len) != 0)
        return 0; /* makes curl fail the transfer: CURLE_WRITE_ERROR */
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
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, opts->timeout_ms) != CURLE_OK)
        return -1;
    /* A follower of a group answers 307 to its leader (the same request,
     * method and body at the leader's --raft-urls URL): follow it, with
     * the token, which every member of the group holds (curl drops the
     * Authorization header on a hop to another host or port unless told);
     * from an https endpoint only to https, so the token never goes out
     * in clear. */
    bool tls = strncmp(opts->endpoint, "https:", 6) == 0;
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

/* One try; libcurl's code (CURLE_OK when a reply came). */
static CURLcode attempt(const char *method, const char *url, const char *body, long timeout_ms,
                        cli_reply *r)
{
    struct curl_slist *h = NULL, *t;
    CURLcode cc = CURLE_FAILED_INIT;
    buf_reset(&r->body);
    r->status = 0;
    r->errmsg[0] = '\0';
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
    if (cc != CURLE_OK) {
        snprintf(r->errmsg, sizeof r->errmsg, "%s: %s", opts->endpoint, curl_easy_strerror(cc));
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

void cli_request(const char *method, const char *path, const char *body, long extra_ms,
                 cli_reply *r)
{
    buf url = BUF_INIT;
    memset(r, 0, sizeof *r);
    /* The endpoint without a trailing '/', then the path. */
    size_t n = strlen(opts->endpoint);
    while (n > 0 && opts->endpoint[n - 1] == '/')
        n--;
    if (buf_append(&url, opts->endpoint, n) != 0 || buf_puts(&url, path) != 0) {
        snprintf(r->errmsg, sizeof r->errmsg, "out of memory");
        buf_free(&url);
        return;
    }
    long backoff = 100;
    for (long i = 0;; i++) {
        CURLcode cc = attempt(method, url.data, body, opts->timeout_ms + extra_ms, r);
        /* Retry only what cannot have been done: no connection, or 503.
         * A request that timed out may have committed. */
        bool again = cc == CURLE_COULDNT_CONNECT || r->status == 503;
        if (!again || i >= opts->retries)
            break;
        nap_ms(backoff);
        backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
    }
    buf_free(&url);
    if (r->status != 0 && r->body.len > 0)
        r->json = json_loadb(r->body.data, r->body.len, JSON_ALLOW_NUL, NULL);
}

void cli_reply_free(cli_reply *r)
{
    buf_free(&r->body);
    json_decref(r->json);
    r->json = NULL;
}

static int exit_for(long status, const char *code)
{
    if (status == 0 || status == 503 || status == 504)
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
