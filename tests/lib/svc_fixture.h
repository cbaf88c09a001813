/*
 * svc_fixture.h — the oracle and the service started together for an
 * integration test, and short JSON calls against the service.
 */
#ifndef PC_SVC_FIXTURE_H
#define PC_SVC_FIXTURE_H

#include <jansson.h>

#include "testlib.h"

typedef struct tl_service {
    pid_t pid;
    int port;
    char url[64];
    char data[600];        /* data dir */
    char log[640];
    char args[16][128];    /* extra flags, kept for restarts */
    int nargs;
    char env[4][160];      /* extra environment ("K=V"), e.g. a failpoint */
    int nenv;
} tl_service;

typedef struct tl_stack {
    char *dir;             /* temp dir holding both data dirs and the logs */
    tl_oracle oracle;
    tl_service svc;
} tl_stack;

/* Start an oracle and a service (extra service flags: NULL-terminated,
 * may be NULL). 0 or -1 (logs printed). */
int tl_stack_start(tl_stack *st, const char *const extra[]);
/* Stop both (SIGTERM; each must exit 0) and remove the temp dir. Returns
 * 0 when both stopped cleanly. */
int tl_stack_stop(tl_stack *st);

/* (Re)start the service of the stack with its data dir and flags. */
int tl_service_start(tl_stack *st);
/* SIGTERM; the exit status (0 expected). */
int tl_service_stop(tl_stack *st);

/* method path [body] against the service: the status, and the JSON answer
 * (NULL when there is no body or it is not JSON). Asserts a reply came. */
json_t *tl_call(tl_stack *st, const char *method, const char *path, const char *body,
                long *status);
/* The same with any content type and raw body; the raw response returned
 * (call tl_resp_free). */
void tl_call_raw(tl_stack *st, const char *method, const char *path, const void *body,
                 size_t len, const char *content_type, tl_resp *out);

/* A request whose answer may never come (the service is being killed):
 * the status, or 0 when no answer came; *out (may be NULL) the JSON
 * answer or NULL. */
long tl_try_call(tl_stack *st, const char *method, const char *path, const char *body,
                 json_t **out);
/* tl_call that asserts the status (printing the answer when it differs). */
json_t *tl_expect(tl_stack *st, const char *method, const char *path, const char *body,
                  long want);
/* tl_try_call that asserts the status; on a mismatch it prints the answer
 * and the service's log (for requests around crashes and restarts). */
json_t *tl_must(tl_stack *st, const char *method, const char *path, const char *body, long want);
/* A sample of the service's /metrics; a series not created yet counts as 0. */
double tl_service_metric(tl_stack *st, const char *name);

/* The error code of an error answer ("" if it is not one). */
const char *tl_error_code(json_t *j);

#endif
