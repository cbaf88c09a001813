/*
 * svc_fixture.c — the oracle and the service as a test fixture.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "svc_fixture.h"

int tl_service_start(tl_stack *st)
{
    tl_service *s = &st->svc;
    char listen[64], *argv[64];
    int n = 0;

    if (s->port <= 0)
        s->port = tl_free_port();
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", s->port);
    snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d", s->port);
    argv[n++] = "--listen";
    argv[n++] = listen;
    argv[n++] = "--data-dir";
    argv[n++] = s->data;
    argv[n++] = "--oracle";
    argv[n++] = st->oracle.url;
    for (int i = 0; i < s->nargs && n < 60; i++)
        argv[n++] = s->args[i];
    argv[n] = NULL;
    const char *envp[5];
    for (int i = 0; i < s->nenv && i < 4; i++)
        envp[i] = s->env[i];
    envp[s->nenv < 4 ? s->nenv : 4] = NULL;
    s->pid = tl_spawn("percolator-service", (const char *const *)argv, envp, s->log);

    if (s->pid <= 0 || tl_wait_health(s->url, s->pid, TL_START_MS) != 0) {
        fprintf(stderr, "percolator-service did not become healthy; its log:\n");
        tl_dump_file(s->log);
        return -1;
    }
    return 0;
}

int tl_service_stop(tl_stack *st)
{
    int rc = tl_stop(st->svc.pid, TL_STOP_MS);
    st->svc.pid = 0;
    if (rc != 0) {
        fprintf(stderr, "percolator-service exited with %d; its log:\n", rc);
        tl_dump_file(st->svc.log);
    }
    return rc;
}

int tl_stack_start(tl_stack *st, const char *const extra[])
{
    char odata[600];

    memset(st, 0, sizeof(*st));
    if ((st->dir = tl_mkdtemp("stack")) == NULL)
        return -1;
    snprintf(odata, sizeof(odata), "%s/oracle", st->dir);
    snprintf(st->svc.data, sizeof(st->svc.data), "%s/service", st->dir);
    snprintf(st->svc.log, sizeof(st->svc.log), "%s/service.log", st->dir);
    for (int i = 0; extra != NULL && extra[i] != NULL && i < 16; i++)
        snprintf(st->svc.args[st->svc.nargs++], sizeof(st->svc.args[0]), "%s", extra[i]);
    if (tl_oracle_start(&st->oracle, odata, 0) != 0)
        return -1;
    return tl_service_start(st);
}

int tl_stack_stop(tl_stack *st)
{
    int rc = 0;
    if (st->svc.pid > 0 && tl_service_stop(st) != 0)
        rc = -1;
    if (st->oracle.pid > 0 && tl_oracle_stop(&st->oracle) != 0)
        rc = -1;
    if (st->dir != NULL) {
        tl_rmtree(st->dir);
        free(st->dir);
        st->dir = NULL;
    }
    return rc;
}

void tl_call_raw(tl_stack *st, const char *method, const char *path, const void *body,
                 size_t len, const char *content_type, tl_resp *out)
{
    char url[8192 + 128];
    snprintf(url, sizeof(url), "%s%s", st->svc.url, path);
    if (tl_http(method, url, body, len, content_type, TL_REQUEST_MS, out) != 0) {
        fprintf(stderr, "no reply to %s %s\n", method, path);
        abort();
    }
}

json_t *tl_call(tl_stack *st, const char *method, const char *path, const char *body,
                long *status)
{
    tl_resp r;
    tl_call_raw(st, method, path, body, body ? strlen(body) : 0,
                body ? "application/json" : NULL, &r);
    *status = r.status;
    json_t *j = r.len > 0 ? json_loadb(r.body, r.len, JSON_ALLOW_NUL, NULL) : NULL;
    tl_resp_free(&r);
    return j;
}

long tl_try_call(tl_stack *st, const char *method, const char *path, const char *body,
                 json_t **out)
{
    char url[8192 + 128];
    tl_resp r;
    snprintf(url, sizeof(url), "%s%s", st->svc.url, path);
    if (out)
        *out = NULL;
    if (tl_http(method, url, body, body ? strlen(body) : 0, body ? "application/json" : NULL,
                TL_REQUEST_MS, &r) != 0) {
        tl_resp_free(&r);
        return 0;
    }
    long status = r.status;
    if (out && r.len > 0)
        *out = json_loadb(r.body, r.len, 0, NULL);
    tl_resp_free(&r);
    return status;
}

const char *tl_error_code(json_t *j)
{
    const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    return code ? code : "";
}

json_t *tl_expect(tl_stack *st, const char *method, const char *path, const char *body,
                  long want)
{
    long status = 0;
    json_t *j = tl_call(st, method, path, body, &status);
    if (status != want) {
        char *d = j ? json_dumps(j, 0) : NULL;
        print_error("%s %s -> %ld (expected %ld) %s\n", method, path, status, want, d ? d : "");
        free(d);
    }
    assert_int_equal(status, want);
    return j;
}

json_t *tl_must(tl_stack *st, const char *method, const char *path, const char *body, long want)
{
    json_t *j;
    long status = tl_try_call(st, method, path, body, &j);
    if (status != want) {
        char *d = j ? json_dumps(j, 0) : NULL;
        print_error("%s %s -> %ld (expected %ld) %s\n", method, path, status, want, d ? d : "");
        free(d);
        tl_dump_file(st->svc.log);
    }
    assert_int_equal(status, want);
    return j;
}

double tl_service_metric(tl_stack *st, const char *name)
{
    char url[128];
    tl_resp r;
    snprintf(url, sizeof(url), "%s/metrics", st->svc.url);
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    double v = tl_metric(r.body, name);
    tl_resp_free(&r);
    return v < 0 ? 0 : v;
}
