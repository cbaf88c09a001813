/*
 * exchange_log.c — every HTTP exchange a test makes, recorded for the
 * OpenAPI check (api-spec/validate.mjs) when PERCOLATOR_EXCHANGE_LOG names
 * a file: one JSON object a line, appended under a lock so threads do not
 * interleave. Requests a test sends to unrouted paths or with methods a
 * path does not have on purpose are marked "expect_off_spec".
 */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "testlib.h"

#define MAX_RECORDED_BODY (1u << 20) /* larger bodies are recorded as null */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int off_spec;

void tl_expect_off_spec(bool on)
{
    atomic_store(&off_spec, on);
}

/* A body as a JSON string, or null when too large or not UTF-8 text. */
static json_t *body_json(const char *p, size_t len)
{
    if (p == NULL || len > MAX_RECORDED_BODY || !codec_utf8_valid(p, len))
        return json_null();
    json_t *j = json_stringn(p, len);
    return j ? j : json_null();
}

/* The raw header block as {"lower-case-name": "value"}; the content type
 * comes back through ct. */
static json_t *headers_json(const char *raw, char *ct, size_t ctlen)
{
    json_t *h = json_object();
    ct[0] = '\0';
    for (const char *line = raw; line && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *colon = memchr(line, ':', len);
        if (colon != NULL && strncmp(line, "HTTP/", 5) != 0) {
            char name[128], value[1024];
            size_t nl = (size_t)(colon - line) < sizeof(name) - 1 ? (size_t)(colon - line)
                                                                    : sizeof(name) - 1;
            for (size_t i = 0; i < nl; i++)
                name[i] = (char)(line[i] >= 'A' && line[i] <= 'Z' ? line[i] + 32 : line[i]);
            name[nl] = '\0';
            const char *v = colon + 1;
            while (*v == ' ')
                v++;
            size_t vl = len - (size_t)(v - line);
            if (vl >= sizeof(value))
                vl = sizeof(value) - 1;
            memcpy(value, v, vl);
            value[vl] = '\0';
            json_object_set_new(h, name, json_string(value));
            if (strcmp(name, "content-type") == 0) {
                size_t n = vl < ctlen - 1 ? vl : ctlen - 1;
                memcpy(ct, value, n);
                ct[n] = '\0';
            }
        }
        line += len + (end ? 2 : 0);
    }
    return h;
}

void tl_record_exchange(const char *method, const char *url, const void *body, size_t body_len,
                        const char *content_type, const tl_resp *r)
{
    const char *path = getenv("PERCOLATOR_EXCHANGE_LOG");
    char rct[256];
    if (path == NULL || path[0] == '\0' || r->status == 0)
        return;
    json_t *hdrs = headers_json(r->headers, rct, sizeof(rct));
    json_t *j = json_pack("{s:s,s:s,s:i,s:o,s:o,s:s,s:o,s:o}", "method", method, "url", url,
                          "status", (int)r->status, "request_content_type",
                          content_type ? json_string(content_type) : json_null(),
                          "request_body", body ? body_json(body, body_len) : json_null(),
                          "response_content_type", rct, "response_body",
                          body_json(r->body, r->len), "response_headers", hdrs);
    if (j == NULL)
        return;
    if (atomic_load(&off_spec))
        json_object_set_new(j, "expect_off_spec", json_true());
    char *line = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (line == NULL)
        return;
    pthread_mutex_lock(&log_mu);
    FILE *f = fopen(path, "a");
    if (f != NULL) {
        fputs(line, f);
        fputc('\n', f);
        fclose(f);
    }
    pthread_mutex_unlock(&log_mu);
    free(line);
}
