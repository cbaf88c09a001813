/*
 * forward.h — pass a request on to another server and relay its answer:
 * how a Raft follower serves any client by asking its leader
 * (docs/DESIGN.md §9, item 4).
 *
 * One thread runs libcurl's multi interface: many requests in flight, over
 * connections to the target kept alive between them, none blocking an
 * HTTP thread (httpd_defer). The answer is relayed as it came (status,
 * body, Content-Type, Retry-After, Location, WWW-Authenticate, Allow); when
 * the target cannot be reached, or is given up because it no longer leads,
 * the client gets a 503 with Retry-After that says whether the request may
 * have been applied.
 */
#ifndef PERCOLATOR_FORWARD_H
#define PERCOLATOR_FORWARD_H

#include <stdbool.h>
#include <stddef.h>

#include "httpd.h"
#include "metrics.h"

/* The request header that marks a forwarded request: its receiver serves
 * it or refuses it, never passes it on again (no loops). */
#define FORWARD_HEADER "X-Percolator-Forwarded-By"
/* The reply header that names the leader a relayed answer came from: a
 * client that knows that member may ask it directly next time. */
#define FORWARD_LEADER_HEADER "X-Percolator-Leader"

typedef struct forwarder forwarder;

typedef struct {
    const char *self;             /* this member's name, sent in FORWARD_HEADER */
    unsigned connect_timeout_ms;  /* 0: 1000 */
    unsigned timeout_ms;          /* a whole request; 0: 30000 */
    size_t max_reply;             /* reply bytes relayed at most; more: 502 */
    unsigned max_conns;           /* connections to one target; more requests wait; 0: 64 */
    /* TLS towards an https:// target (files read at connect; NULL: none):
     * the CA that signed its certificate (NULL: the system's), and the
     * certificate this member shows when the target asks for one. */
    const char *ca_file, *cert_file, *key_file;
    /* Whether `target` is still where requests go; asked on the forwarding
     * thread every 100 ms for each request in flight: false gives the
     * request up (a leader that lost its lead, or went silent). */
    bool (*still_target)(const char *target, void *arg);
    void *arg;
    metrics_registry *metrics;    /* optional */
} forward_config;

/* Start the forwarding thread. NULL with a reason in err. */
forwarder *forward_start(const forward_config *cfg, char *err, size_t errlen);

/* Send the whole request `req` (its method, path, query, body,
 * Authorization and Content-Type) to `target` ("http[s]://host:port"),
 * and answer it with the reply. Call from httpd_config.forward: it defers
 * the request, or replies 503 when it cannot. */
void forward_request(forwarder *f, httpd_req *req, const char *target);

/* Count a request that came passed on by another member (it carries
 * FORWARD_HEADER): percolator_forwarded_requests_received_total. */
void forward_note_received(forwarder *f);

/* A graceful stop is coming: what is still in flight in ms from now is
 * given up (503), so that the stop is not held by a slow leader. */
void forward_drain(forwarder *f, unsigned ms);

/* Answer what is in flight with 503 and stop the thread; later requests
 * are answered 503 at once. Before httpd_stop, whose wait for deferred
 * requests this ends. NULL is fine. */
void forward_stop(forwarder *f);
/* After httpd_stop. NULL is fine. */
void forward_free(forwarder *f);

#endif
