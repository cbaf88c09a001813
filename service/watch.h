/*
 * watch.h — the change feed (docs/DESIGN.md §10): every committed put and
 * delete of a key range, in commit_ts order, exactly once, from any
 * timestamp at or above the GC safe point, with progress lines that carry
 * a resolved timestamp (no change at or below it can come later).
 *
 * One hub per service, served by the leader (a single node always). Its
 * thread computes the resolved timestamp (pc_resolved_ts) every tick,
 * turns the changes applied up to it — gathered from the applied batches
 * themselves (watch_applied), so nothing scans the store per watcher — into
 * one ring of recent changes that every watcher reads (fan-out), and
 * fills each watcher's bounded output. A watcher behind the ring (a start
 * in the past, or a slow reader whose place was evicted) reads the store's
 * write table instead (pc_changes_scan), a page at a time, until it is
 * back in the ring. A watcher's place is pinned against GC.
 *
 * The life of a watcher: watch_open (a request's worker) registers it;
 * the route hands it to httpd_reply_feed with watch_read and watch_done;
 * the hub thread fills it and wakes the feed; watch_read (the event
 * thread) takes what is queued; watch_done (the reply is over) marks it
 * gone, and the hub thread frees it. watch_hub_stop ends every watcher's
 * body before the server stops.
 */
#ifndef PC_WATCH_H
#define PC_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"

struct svc;
typedef struct watch_hub watch_hub;
typedef struct watcher watcher;

typedef struct {
    uint64_t max_watchers;        /* --watch-max */
    uint64_t ring_bytes;          /* --watch-buffer-bytes: the ring of recent changes */
    uint64_t slow_ms;             /* a watcher that read nothing this long is cut */
} watch_config;

/* The hub (its thread starts with watch_hub_start, once the replicator
 * exists: it asks it who leads). NULL when out of memory. */
watch_hub *watch_hub_new(struct svc *s, const watch_config *cfg);
int watch_hub_start(watch_hub *h);
/* End every watcher (an error line saying the service stops) and stop
 * the thread; before the HTTP server stops. NULL is fine. */
void watch_hub_stop(watch_hub *h);
/* After the HTTP server stopped (every watch_done has run). */
void watch_hub_free(watch_hub *h);

/* The replicator's applying thread, around each apply (begin, each batch
 * applied, end), and when an image replaced the store (lost). */
void watch_apply_begin(void *hub);
void watch_applied(void *hub, const void *batch, size_t len);
void watch_apply_end(void *hub);
void watch_lost(void *hub);

/* What a watcher follows: user keys in [start, end) (elen 0: no end). */
typedef struct {
    const char *start, *end;
    size_t slen, elen;
    codec_enc enc;
    uint64_t after;               /* changes with commit_ts above it */
} watch_spec;

typedef enum {
    WATCH_OK,
    WATCH_COMPACTED,              /* after is below the GC safe point */
    WATCH_TOO_MANY,               /* --watch-max watchers are connected */
    WATCH_NOMEM,
} watch_refusal;

/* A new watcher, or NULL and why (*safe_point: the safe point for
 * WATCH_COMPACTED). */
watcher *watch_open(watch_hub *h, const watch_spec *spec, watch_refusal *why,
                    uint64_t *safe_point);
/* Its feed's wake-up (httpd_feed_wake and the feed), once the reply is made. */
void watch_attach(watcher *w, void (*wake)(void *arg), void *arg);
/* httpd_reply_feed's read and done. */
long watch_read(void *w, char *buf, size_t max);
void watch_done(void *w);
/* Watchers connected now (/v1/health, metrics). */
uint64_t watch_count(watch_hub *h);

#endif
