/*
 * http.c — a blocking HTTP request helper over libcurl for tests
 * (testlib.h). One easy handle per call: simple, and tests that care about
 * connection reuse use their own handles.
 */
#include "testlib.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* tl_http_tls: "" is not set. */
static char tls_ca[512], tls_cert[512], tls_key[512];

void tl_http_tls(const char *ca_file, const char *cert_file, const char *key_file)
{
    snprintf(tls_ca, sizeof tls_ca, "%s", ca_file ? ca_file : "");
    snprintf(tls_cert, sizeof tls_cert, "%s", cert_file ? cert_file : "");
    snprintf(tls_key, sizeof tls_key, "%s", key_file ? key_file : "");
}

static void set_tls(CURL *e)
{
    if (tls_ca[0]) {
        curl_easy_setopt(e, CURLOPT_CAINFO, tls_ca);
        curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    }
    if (tls_cert[0])
        curl_easy_setopt(e, CURLOPT_SSLCERT, tls_cert);
    if (tls_key[0])
        curl_easy_setopt(e, CURLOPT_SSLKEY, tls_key);
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *arg)
{
    size_t n = size * nmemb;
    return buf_append(arg, p, n) == 0 ? n : 0;
}

int tl_http(const char *method, const char *url, const void *body, size_t body_len,
            const char *content_type, int timeout_ms, tl_resp *out)
{
    return tl_http_with(method, url, body, body_len, content_type, NULL, timeout_ms, out);
}

int tl_http_with(const char *method, const char *url, const void *body, size_t body_len,
                 const char *content_type, const char *header, int timeout_ms, tl_resp *out)
{
    pthread_once(&curl_once, curl_init);
    memset(out, 0, sizeof *out);
    buf b = BUF_INIT, h = BUF_INIT;
    struct curl_slist *hdrs = NULL;
    char ct[256];
    int rc = -1;
    CURL *e = curl_easy_init();
    if (!e)
        goto done;
    if (content_type) {
        snprintf(ct, sizeof ct, "Content-Type: %s", content_type);
        hdrs = curl_slist_append(hdrs, ct);
    } else {
        hdrs = curl_slist_append(hdrs, "Content-Type:");
    }
    /* No "Expect: 100-continue" wait unless the caller asks for it (then
     * curl holds the body until the server says go on, or answers). */
    struct curl_slist *h2 = hdrs;
    if (hdrs != NULL && (header == NULL || strncasecmp(header, "Expect:", 7) != 0))
        h2 = curl_slist_append(hdrs, "Expect:");
    if (!h2)
        goto done;
    hdrs = h2;
    if (header != NULL) {
        if ((h2 = curl_slist_append(hdrs, header)) == NULL)
            goto done;
        hdrs = h2;
    }
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(timeout_ms > 0 ? timeout_ms : 5000));
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &h);
    set_tls(e);
    if (body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
    } else if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    }
    CURLcode cc = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
    if (cc == CURLE_OK || out->status > 0)
        rc = 0;
    else
        out->transport_error = (int)cc;
done:
    out->body = buf_take(&b, &out->len);
    out->headers = buf_take(&h, NULL);
    if (rc == 0)
        tl_record_exchange(method, url, body, body_len, content_type, out);
    curl_slist_free_all(hdrs);
    if (e)
        curl_easy_cleanup(e);
    buf_free(&b);
    buf_free(&h);
    return rc;
}

const char *tl_resp_header(const tl_resp *r, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            size_t vl = len - (size_t)(v - line);
            if (vl >= outlen)
                vl = outlen - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return out;
        }
        line += len + (end ? 2 : 0);
    }
    return NULL;
}

void tl_resp_free(tl_resp *r)
{
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

double tl_metric(const char *text, const char *name)
{
    size_t nl = strlen(name);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        if (strncmp(line, name, nl) == 0 && line[nl] == ' ')
            return strtod(line + nl + 1, NULL);
        line = end ? end + 1 : NULL;
    }
    return -1;
}

double tl_metric_at(const char *base, const char *name)
{
    char url[512];
    snprintf(url, sizeof url, "%s/metrics", base);
    tl_resp r;
    double v = -1;
    if (tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r) == 0 && r.status == 200 &&
        r.body != NULL)
        v = tl_metric(r.body, name);
    tl_resp_free(&r);
    return v;
}
