/*
 * exchange_log.c — every HTTP exchange a test makes, recorded for the
 * OpenAPI check (api-spec/validate.mjs) when PERCOLATOR_EXCHANGE_LOG names
 * a file: one JSON object a line, appended under a lock so threads do not
 * interleave. Requests a test sends to unrouted paths or with methods a
 * path does not have on purpose are marked "expect_off_spec". An exchange
 * with a program the test spawned (tl_spawn tells us its --listen port)
 * names it, "program": "service" or "oracle", so that the validator picks
 * that program's spec (api-spec/service.yaml or oracle.yaml).
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

/* Which program listens on which port, as tl_spawn started them; a port
 * taken again by another program takes the newer name. */
#define MAX_PROGRAMS 64
static struct {
    int port;
    char name[16];
} programs[MAX_PROGRAMS];
static int nprograms;

/* The port of "host:port" or of a URL "scheme://host:port/..."; 0 if none. */
static int port_of(const char *s)
{
    const char *p = strstr(s, "://");
    p = p ? p + 3 : s;
    size_t hostlen = strcspn(p, "/?#");
    const char *colon = NULL;
    for (size_t i = 0; i < hostlen; i++)
        if (p[i] == ':')
            colon = p + i;
    if (colon == NULL)
        return 0;
    long port = strtol(colon + 1, NULL, 10);
    return port > 0 && port < 65536 ? (int)port : 0;
}

void tl_exchange_program(const char *prog, const char *const args[])
{
    const char *name = NULL;
    int port = 0;
    for (size_t i = 0; args && args[i]; i++) {
        const char *base = strrchr(args[i], '/');
        base = base ? base + 1 : args[i];
        if (strcmp(base, "percolator-oracle") == 0 || strcmp(base, "percolator-service") == 0)
            prog = args[i]; /* run through a wrapper (prlimit -- prog ...) */
        if (strcmp(args[i], "--listen") == 0 && args[i + 1] != NULL)
            port = port_of(args[i + 1]);
    }
    const char *base = strrchr(prog, '/');
    base = base ? base + 1 : prog;
    if (strcmp(base, "percolator-oracle") == 0)
        name = "oracle";
    else if (strcmp(base, "percolator-service") == 0)
        name = "service";
    if (name == NULL || port == 0)
        return;
    pthread_mutex_lock(&log_mu);
    int slot = 0;
    while (slot < nprograms && programs[slot].port != port)
        slot++;
    if (slot == nprograms && nprograms < MAX_PROGRAMS)
        nprograms++;
    if (slot < nprograms) {
        programs[slot].port = port;
        snprintf(programs[slot].name, sizeof programs[slot].name, "%s", name);
    }
    pthread_mutex_unlock(&log_mu);
}

/* The program listening at url's port, or NULL when no test spawned one. */
static json_t *program_json(const char *url)
{
    int port = port_of(url);
    json_t *j = NULL;
    pthread_mutex_lock(&log_mu);
    for (int i = 0; i < nprograms && port > 0 && j == NULL; i++)
        if (programs[i].port == port)
            j = json_string(programs[i].name);
    pthread_mutex_unlock(&log_mu);
    return j;
}

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
    json_t *prog = program_json(url);
    if (prog != NULL)
        json_object_set_new(j, "program", prog);
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
