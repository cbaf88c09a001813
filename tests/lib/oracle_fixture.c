/*
 * oracle_fixture.c — start/stop a real percolator-oracle for a test
 * (testlib.h).
 */
#include "testlib.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tl_oracle_start(tl_oracle *o, const char *data_dir, int port)
{
    memset(o, 0, sizeof *o);
    o->port = port > 0 ? port : tl_free_port();
    if (o->port <= 0)
        return -1;
    snprintf(o->url, sizeof o->url, "http://127.0.0.1:%d", o->port);
    snprintf(o->dir, sizeof o->dir, "%s", data_dir);
    snprintf(o->log, sizeof o->log, "%s.log", data_dir);
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", o->port);
    const char *args[] = {"--listen", listen, "--data-dir", data_dir, NULL};
    o->pid = tl_spawn("percolator-oracle", args, NULL, o->log);
    if (o->pid <= 0)
        return -1;
    if (tl_wait_health(o->url, o->pid, TL_START_MS) != 0) {
        fprintf(stderr, "testlib: oracle did not become healthy on %s\n", o->url);
        tl_dump_file(o->log);
        tl_stop(o->pid, 2000);
        o->pid = 0;
        return -1;
    }
    return 0;
}

int tl_oracle_stop(tl_oracle *o)
{
    if (o->pid <= 0)
        return -1;
    int rc = tl_stop(o->pid, TL_STOP_MS);
    o->pid = 0;
    if (rc != 0) {
        /* Not a clean stop: the log says why. */
        fprintf(stderr, "testlib: the oracle exited with status %d\n", rc);
        tl_dump_file(o->log);
    }
    return rc;
}

int tl_oracle_next(const tl_oracle *o, unsigned n, uint64_t *first)
{
    char url[128];
    snprintf(url, sizeof url, "%s/v1/timestamps?count=%u", o->url, n);
    tl_resp r;
    int rc = -1;
    if (tl_http("POST", url, NULL, 0, NULL, TL_REQUEST_MS, &r) == 0 && r.status == 200) {
        json_t *j = json_loads(r.body, 0, NULL);
        json_t *f = json_object_get(j, "first");
        json_t *c = json_object_get(j, "count");
        if (json_is_integer(f) && json_is_integer(c) && json_integer_value(c) == (json_int_t)n) {
            *first = (uint64_t)json_integer_value(f);
            rc = 0;
        }
        json_decref(j);
    }
    tl_resp_free(&r);
    return rc;
}

tl_oracle_env *tl_oracle_env_new(const char *tag)
{
    tl_oracle_env *e = calloc(1, sizeof *e);
    if (!e || !(e->dir = tl_mkdtemp(tag))) {
        free(e);
        return NULL;
    }
    snprintf(e->data, sizeof e->data, "%s/data", e->dir);
    return e;
}

void tl_oracle_env_free(tl_oracle_env *e)
{
    if (!e)
        return;
    if (e->o.pid > 0)
        tl_oracle_stop(&e->o);
    tl_rmtree(e->dir);
    free(e->dir);
    free(e);
}
