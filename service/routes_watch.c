/*
 * routes_watch.c — GET /v1/watch: a stream of every committed change of a
 * key or a prefix, in commit_ts order, from a timestamp on (watch.h;
 * docs/DESIGN.md §10). The stream is newline-delimited JSON, one object a
 * line: "put" and "delete" changes, "progress" lines with a resolved
 * timestamp, and at the end an "error" line with the timestamp to resume
 * from.
 */
#include <string.h>

#include "keyspace.h"
#include "respond.h"
#include "watch.h"

static void wake_feed(void *feed)
{
    httpd_feed_wake(feed);
}

/* The range asked for, in user keys: ?key= (that key), ?prefix= (every
 * key that begins with it; none: every key). false when answered. */
static bool watch_range(httpd_req *req, codec_enc enc, char *start, size_t *slen, char *end,
                        size_t *elen)
{
    bool has_key = httpd_query(req, "key", NULL) != NULL;
    bool has_prefix = httpd_query(req, "prefix", NULL) != NULL;
    if (has_key && has_prefix) {
        httpd_reply_error(req, 400, "bad_request", NULL, "give key or prefix, not both");
        return false;
    }
    if (!codec_query_key(req, has_key ? "key" : "prefix", enc, start, slen))
        return false;
    if (has_key && *slen == 0) {
        httpd_reply_error(req, 400, "bad_request", NULL, "key must be 1..%d bytes", SVC_MAX_KEY);
        return false;
    }
    memcpy(end, start, *slen);
    *elen = *slen;
    if (has_key) { /* [key, key + "\0"): the key alone */
        end[(*elen)++] = '\0';
    } else if (*elen == 0 || !ks_prefix_end(end, elen)) {
        *elen = 0; /* to the last key */
    }
    return true;
}

static void h_watch(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    codec_enc enc;
    char start[SVC_MAX_KEY + 1], end[SVC_MAX_KEY + 1];
    size_t slen = 0, elen = 0;
    uint64_t after = 0, safe_point = 0;
    watch_refusal why;

    if (!codec_encoding(req, &enc) || !watch_range(req, enc, start, &slen, end, &elen) ||
        !codec_query_u64(req, "start_ts", 0, 0, SVC_TS_LIMIT, &after))
        return;
    /* The leader serves watches (a follower sends the client there with a
     * 307): it alone knows the commits in flight. */
    if (svc_leadership_of(s, NULL) != SVC_LEADS) {
        reply_not_leader(req);
        return;
    }
    /* No start: from now on. */
    if (httpd_query(req, "start_ts", NULL) == NULL && !svc_timestamp(s, &after)) {
        reply_oracle_unavailable(req, s);
        return;
    }
    watch_spec spec = {start, end, slen, elen, enc, after};
    watcher *w = watch_open(s->watch, &spec, &why, &safe_point);
    switch (why) {
    case WATCH_OK:
        break;
    case WATCH_COMPACTED:
        httpd_reply_error(req, 410, "compacted", json_pack("{s:I}", "safe_point",
                                                           (json_int_t)safe_point),
                          "start_ts %llu is below the GC safe point %llu: changes there may be "
                          "gone; read a snapshot at or above it (GET /v1/kv?ts=) and watch "
                          "from that timestamp",
                          (unsigned long long)after, (unsigned long long)safe_point);
        return;
    case WATCH_TOO_MANY:
        httpd_add_header(req, "Retry-After", "1");
        httpd_reply_error(req, 503, "too_many_watchers",
                          json_pack("{s:i}", "retry_after_ms", 1000),
                          "%llu watchers are connected (--watch-max): retry later",
                          (unsigned long long)s->cfg.watch_max);
        return;
    case WATCH_NOMEM:
        httpd_add_header(req, "Retry-After", "1");
        httpd_reply_error(req, 503, "busy", NULL, "no memory for a watcher: retry");
        return;
    }
    httpd_add_header(req, "Cache-Control", "no-store");
    httpd_feed *f = httpd_reply_feed(req, 200, "application/x-ndjson", watch_read, watch_done, w);
    if (f != NULL)
        watch_attach(w, wake_feed, f);
}

const httpd_route watch_routes[] = {
    /* It asks the oracle and pins a timestamp: on a worker. */
    {.method = "GET", .pattern = "/v1/watch", .handler = h_watch, .blocking = true},
};
const size_t watch_routes_n = sizeof(watch_routes) / sizeof(watch_routes[0]);
