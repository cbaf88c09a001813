/*
 * routes.h — the oracle's HTTP API (api-spec/oracle.yaml):
 *   POST /v1/timestamps?count=N   {"first":F,"count":N}
 *   GET  /v1/health               {"status":"ok",...}   (no token needed)
 *   GET  /v1/ready                {"status":"ready"}, or 503 not_ready (no token needed)
 *   /v1/members, /v1/leader       a group's membership (common/raft_admin.h)
 *   GET  /metrics                 Prometheus text
 *   /v1/pd/...                    the placement driver (routes_pd.c)
 */
#ifndef PERCOLATOR_ORACLE_ROUTES_H
#define PERCOLATOR_ORACLE_ROUTES_H

#include <stddef.h>

#include "httpd.h"
#include "metrics.h"
#include "pd_live.h"
#include "token.h"
#include "raft_node.h"
#include "store_size.h"
#include "tso.h"

typedef struct oracle_ctx {
    tso *tso;                       /* single node: the persisted mark */
    raft_node *raft;                /* a Raft group's member (tso is then NULL) */
    unsigned raft_id;               /* its --raft-id (0: a single oracle) */
    store_size *size;               /* the data dir's bytes on disk (/v1/health) */
    metrics_registry *metrics;
    metrics_series *m_timestamps;   /* timestamps handed out */
    metrics_series *m_requests;     /* successful POST /v1/timestamps */
    token auth;                     /* secret NULL: no auth (--auth-token-file) */
    pd_live *live;                  /* a group's member: the leader's hints (pd_live.h) */
    metrics_series *m_pd_heartbeats, *m_pd_taken, *m_pd_stale, *m_pd_unproposed;
} oracle_ctx;

/* The answer to a request this member cannot serve (rc of a Raft call):
 * 307 to the leader's URL with the same path and query when it is known,
 * else 503 not_leader or oracle_unavailable; both name the leader known. */
void oracle_reply_elsewhere(httpd_req *req, oracle_ctx *ctx, rn_rc rc);

/* The placement driver's handlers (routes_pd.c). */
void oracle_pd_register(httpd_req *req, void *arg);
void oracle_pd_nodes(httpd_req *req, void *arg);
void oracle_pd_heartbeat(httpd_req *req, void *arg);
void oracle_pd_regions(httpd_req *req, void *arg);
void oracle_pd_ids(httpd_req *req, void *arg);

/* Register the oracle's own metrics in ctx->metrics (set tso and metrics first). */
void oracle_ctx_init_metrics(oracle_ctx *ctx);

/* httpd's authorize hook: with a token, every route but health needs
 * "Authorization: Bearer <token>". */
const char *oracle_authorize(const httpd_req *req, void *ctx);

/* The route table (static; ctx is passed through httpd_config.ctx). */
const httpd_route *oracle_routes(size_t *n);

/* Parse a count query value: decimal 1..TSO_MAX_COUNT. 0 or -1. */
int oracle_parse_count(const char *s, unsigned *out);

#endif
