/*
 * oracle_client.h — the service's client of the timestamp oracle.
 *
 * Coalescing (the paper's batching): at most one request to the oracle is in
 * flight per client. Every caller that asks for a timestamp while it is in
 * flight joins the next batch; when the flight lands, one of them sends a
 * single request for as many timestamps as the batch has callers and hands
 * each caller its own. Under load the number of oracle round trips is
 * independent of the number of callers.
 *
 * The connection is kept open (libcurl keep-alive) and re-opened by itself
 * after the oracle restarts. When the oracle cannot be reached (refused,
 * timeout, 5xx) the callers of that batch get OC_UNAVAILABLE, which the
 * service answers as 503 oracle_unavailable; the next batch tries again.
 *
 * As a safety net the client refuses (OC_PROTOCOL) an answer that does not
 * lie above every timestamp it was given before.
 */
#ifndef PERCOLATOR_ORACLE_CLIENT_H
#define PERCOLATOR_ORACLE_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "metrics.h"

enum {
    OC_OK = 0,
    OC_UNAVAILABLE = 1,   /* cannot reach the oracle, it timed out or answered 5xx */
    OC_PROTOCOL = 2,      /* the oracle answered something unexpected */
    OC_NOMEM = 3,
    OC_BEHIND = 4         /* the oracle answered at or below a timestamp it had handed
                             out before (it lost its state): *first is its answer,
                             oc_highest what it had handed out */
};

#define OC_MAX_BATCH 100000   /* the oracle's per-request limit */

typedef struct oc_client oc_client;

/* TLS to an https:// oracle (file names; NULL or "": not given). */
typedef struct oc_tls {
    const char *ca_file;     /* PEM CAs the oracle's certificate must chain to
                                (only these); none: the system's CAs */
    const char *cert_file;   /* client certificate for mutual TLS, with key_file */
    const char *key_file;
} oc_tls;

/* TLS settings for https:// oracle URLs, before the first request. When
 * every URL is https://, the client speaks https only (a redirect to an
 * http:// URL fails like an unreachable member). 0, or -1 if libcurl
 * refused an option. */
int oc_set_tls(oc_client *c, const oc_tls *tls);

/* base_url: "http://127.0.0.1:8090", or the members of an oracle Raft
 * group, comma-separated (at most 7): the client asks the member that last
 * answered, follows a follower's 307 to the leader and remembers it, and
 * tries the next member while one is unreachable or knows no leader. It
 * answers OC_UNAVAILABLE only when no member could. A redirect is
 * followed only to another member's /v1/timestamps (http or https). timeout_ms bounds one oracle request
 * (connect included); <= 0 means 2000. metrics may be NULL; otherwise the
 * client registers percolator_oracle_client_* families in it.
 * NULL if out of memory or libcurl cannot start. */
oc_client *oc_open(const char *base_url, int timeout_ms, metrics_registry *metrics);

/* Send "Authorization: Bearer <token>" with every request (the oracle's
 * --auth-token-file). Before the first request. 0, or -1 out of memory. */
int oc_set_token(oc_client *c, const char *token);

/* One timestamp. OC_OK or an error code; thread-safe, blocks at most about
 * two timeouts (the flight in the air, then ours). */
int oc_timestamp(oc_client *c, uint64_t *ts);

/* count (1..OC_MAX_BATCH) consecutive timestamps first..first+count-1, from
 * the same coalesced batches as oc_timestamp. */
int oc_timestamps(oc_client *c, unsigned count, uint64_t *first);

/* The highest timestamp the oracle has handed this client. */
uint64_t oc_highest(oc_client *c);

/* Whether the most recent oracle request succeeded (for health reports). */
bool oc_available(oc_client *c);

/* Oracle HTTP requests made so far (coalescing shows as far fewer requests
 * than timestamps). */
uint64_t oc_requests(oc_client *c);

const char *oc_strerror(int err);

/* Free. No call may be running on c. NULL is fine. */
void oc_close(oc_client *c);

#endif
