/*
 * watch.c — the change feed's hub: capture, resolved timestamp, the ring of
 * recent changes, and filling each watcher (watch.h; docs/DESIGN.md §10).
 *
 * Why the capture is complete: the changes come from the batches the
 * replicator applies on this member (watch_applied), captured only while
 * it leads. When capture begins (or lost changes: an image, a full
 * capture buffer), the ring starts over at a timestamp t the oracle
 * handed out after that: every change above t is applied after the
 * capture began, so it is captured; every change at or below t is in the
 * store once the resolved timestamp passes t, and watchers behind the
 * ring read it there. A tick takes the captured changes at or below its
 * resolved timestamp R once every apply that began before R's lock scan
 * ended has ended too (the begin/end counts): an apply that committed
 * before the scan's snapshot began before that, so a commit the scan saw
 * done has been captured. docs/DESIGN.md §10 has the rules.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "follower_fence.h"
#include "keyspace.h"
#include "log.h"
#include "metrics.h"
#include "service.h"
#include "timeutil.h"
#include "watch.h"

#define TICK_MS 20                /* how often the resolved timestamp moves */
#define IDLE_MS 100               /* the thread's nap when nobody watches */
#define PROGRESS_MS 1000          /* a progress line at least this often */
#define OUT_MAX (256 * 1024)      /* bytes queued for one watcher before it must read */
#define PAGE 64                   /* changes a replay reads from the store at once */
#define PAGES_PER_TICK 4          /* replay pages one watcher gets per tick */
#define REPLAY_MS 20              /* replay work of all watchers in one tick, at most */
#define CAPTURE_MAX (64u << 20)   /* captured bytes not yet resolved; past it: lost */

/* A change captured from an applied batch, not yet resolved. */
typedef struct {
    uint64_t commit_ts, start_ts;
    uint8_t *key;                 /* the engine key */
    size_t klen, vlen;
    uint8_t *value;               /* the short value, or NULL */
    bool del, has_value;
} captured;

/* A resolved change in the ring: the user key, then the value; its line
 * as text and as base64 once a watcher asked for it (encoded once for
 * every watcher: fan-out costs a copy, not an encoding, per watcher). */
typedef struct {
    uint64_t commit_ts;
    uint8_t *bytes;
    size_t klen, vlen;
    bool del;
    char *line[2];                /* [ENC_TEXT], [ENC_BASE64]: "...\n", or NULL */
    size_t line_len[2];
} event;

struct watcher {
    watcher *next;                /* hub->watchers (under hub->mu) */
    pthread_mutex_t mu;           /* out, ending, gone, wake */
    buf out;                      /* queued lines; [off, len) not yet read */
    size_t off;
    bool ending;                  /* end the body once out is read */
    bool gone;                    /* watch_done ran: the hub frees it */
    void (*wake)(void *);
    void *wake_arg;
    uint64_t drained_ms;          /* when its queue was last under half full */

    /* The hub thread's alone. */
    char *start, *end;            /* user keys [start, end) */
    size_t slen, elen;
    codec_enc enc;
    uint64_t cursor;              /* every change at or below it is queued */
    uint64_t pinned;              /* the timestamp pinned against GC */
    uint64_t next_seq;            /* in the ring: the next event to look at */
    uint64_t ring_epoch;          /* the ring next_seq belongs to */
    uint64_t progress_ts, progress_ms; /* the last progress line */
};

struct watch_hub {
    struct svc *s;
    watch_config cfg;
    pthread_t thread;
    bool started;
    atomic_bool stop;

    pthread_mutex_t mu;           /* watchers, n; the capture below */
    watcher *watchers;
    uint64_t n;

    /* Capture (the applying thread appends, the hub thread takes). */
    pthread_mutex_t cap_mu;
    pthread_cond_t cap_cv;        /* applies finishing */
    bool capturing;
    uint64_t lost_seq;            /* bumped whenever captured changes were dropped */
    uint64_t apply_began, apply_ended;
    captured *cap;
    size_t ncap, capcap, cap_bytes;

    /* The ring (the hub thread's alone): events in (floor, ring_ts]. */
    event *ring;
    size_t rhead, rn, rcap;       /* live events: ring[rhead .. rhead+rn) */
    uint64_t ring_base;           /* the seq of ring[rhead] */
    uint64_t ring_bytes;
    uint64_t floor, ring_ts;
    bool ring_ready;
    uint64_t ring_epoch;
    uint64_t handled_seq;         /* the lost_seq the ring started after */
    uint64_t term;                /* the term the hub serves in (0: none) */

    metrics_series *m_watchers, *m_changes, *m_replayed, *m_ring_bytes, *m_resolved, *m_cut;
};


/* ---- capture (the applying thread) ---- */

static void captured_free(captured *c)
{
    free(c->key);
    free(c->value);
}

/* Drop every captured change (cap_mu held): the ring starts again. */
static void capture_drop(watch_hub *h)
{
    for (size_t i = 0; i < h->ncap; i++)
        captured_free(&h->cap[i]);
    h->ncap = 0;
    h->cap_bytes = 0;
    h->lost_seq++;
}

static int capture_one(void *arg, const pc_change *c)
{
    watch_hub *h = arg;
    pc_slice user;
    if (!ks_is_user(c->key, &user))
        return 0; /* the service's own records */
    if (h->ncap == h->capcap) {
        size_t cap = h->capcap ? h->capcap * 2 : 256;
        captured *v = realloc(h->cap, cap * sizeof(*v));
        if (v == NULL) {
            capture_drop(h);
            return 1;
        }
        h->cap = v;
        h->capcap = cap;
    }
    captured *k = &h->cap[h->ncap];
    *k = (captured){c->commit_ts, c->start_ts, malloc(c->key.len ? c->key.len : 1), c->key.len,
                    c->has_value ? c->value.len : 0, NULL, c->op == PC_OP_DELETE,
                    c->has_value};
    if (c->has_value)
        k->value = malloc(c->value.len ? c->value.len : 1);
    if (k->key == NULL || (c->has_value && k->value == NULL) ||
        h->cap_bytes + c->key.len + k->vlen > CAPTURE_MAX) {
        captured_free(k);
        capture_drop(h); /* the ring starts again above what was lost */
        return 1;
    }
    memcpy(k->key, c->key.data, c->key.len);
    if (c->has_value)
        memcpy(k->value, c->value.data, c->value.len);
    h->cap_bytes += c->key.len + k->vlen;
    h->ncap++;
    return 0;
}

void watch_apply_begin(void *hub)
{
    watch_hub *h = hub;
    pthread_mutex_lock(&h->cap_mu);
    h->apply_began++;
    pthread_mutex_unlock(&h->cap_mu);
}

void watch_applied(void *hub, const void *batch, size_t len)
{
    watch_hub *h = hub;
    pthread_mutex_lock(&h->cap_mu);
    if (h->capturing && pc_batch_changes(batch, len, capture_one, h) != PC_OK)
        capture_drop(h); /* some of its changes may be missing */
    pthread_mutex_unlock(&h->cap_mu);
}

void watch_apply_end(void *hub)
{
    watch_hub *h = hub;
    pthread_mutex_lock(&h->cap_mu);
    h->apply_ended++;
    pthread_cond_broadcast(&h->cap_cv);
    pthread_mutex_unlock(&h->cap_mu);
}

void watch_lost(void *hub)
{
    watch_hub *h = hub;
    pthread_mutex_lock(&h->cap_mu);
    capture_drop(h);
    pthread_mutex_unlock(&h->cap_mu);
}

static void capture_set(watch_hub *h, bool on)
{
    pthread_mutex_lock(&h->cap_mu);
    if (h->capturing != on) {
        h->capturing = on;
        capture_drop(h); /* on: the ring starts after this; off: nothing kept */
    }
    pthread_mutex_unlock(&h->cap_mu);
}

/* ---- the ring (the hub thread) ---- */

static void event_free(event *e)
{
    free(e->bytes);
    free(e->line[0]);
    free(e->line[1]);
}

static void ring_clear(watch_hub *h)
{
    for (size_t i = 0; i < h->rn; i++)
        event_free(&h->ring[h->rhead + i]);
    h->ring_base += h->rn;
    h->rhead = h->rn = 0;
    h->ring_bytes = 0;
    h->ring_epoch++;
}

static bool ring_push(watch_hub *h, uint64_t commit_ts, const void *key, size_t klen,
                      const void *value, size_t vlen, bool del)
{
    if (h->rhead + h->rn == h->rcap) {
        if (h->rhead > 0) { /* slide the live part down */
            memmove(h->ring, h->ring + h->rhead, h->rn * sizeof(*h->ring));
            h->rhead = 0;
        }
        if (h->rn == h->rcap) {
            size_t cap = h->rcap ? h->rcap * 2 : 1024;
            event *v = realloc(h->ring, cap * sizeof(*v));
            if (v == NULL)
                return false;
            h->ring = v;
            h->rcap = cap;
        }
    }
    uint8_t *b = malloc(klen + vlen + 1);
    if (b == NULL)
        return false;
    memcpy(b, key, klen);
    if (vlen > 0)
        memcpy(b + klen, value, vlen);
    h->ring[h->rhead + h->rn++] = (event){commit_ts, b, klen, vlen, del, {NULL, NULL}, {0, 0}};
    h->ring_bytes += klen + vlen + sizeof(event);
    return true;
}

/* Evict the oldest commits until the ring fits; the floor rises to them
 * (they are in the store: a watcher that still needs them reads it). */
static void ring_evict(watch_hub *h)
{
    while (h->rn > 0 && h->ring_bytes > h->cfg.ring_bytes) {
        uint64_t ts = h->ring[h->rhead].commit_ts;
        while (h->rn > 0 && h->ring[h->rhead].commit_ts == ts) {
            event *e = &h->ring[h->rhead];
            h->ring_bytes -= e->klen + e->vlen + sizeof(event) + e->line_len[0] + e->line_len[1];
            event_free(e);
            h->rhead++;
            h->rn--;
            h->ring_base++;
        }
        h->floor = ts;
    }
}

/* The seq of the first event above ts. */
static uint64_t ring_seek(const watch_hub *h, uint64_t ts)
{
    size_t lo = 0, hi = h->rn;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h->ring[h->rhead + mid].commit_ts <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    return h->ring_base + lo;
}

static int by_commit_key(const void *x, const void *y)
{
    const captured *a = x, *b = y;
    if (a->commit_ts != b->commit_ts)
        return a->commit_ts < b->commit_ts ? -1 : 1;
    return pc_key_cmp(a->key, a->klen, b->key, b->klen);
}

/* ---- one tick: the resolved timestamp, and the ring up to it ---- */

/* Take the captured changes at or below r (they move to *out). */
static void capture_take(watch_hub *h, uint64_t r, captured **out, size_t *n)
{
    size_t k = 0, keep = 0;
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < h->ncap; i++)
        k += h->cap[i].commit_ts <= r;
    if (k == 0 || (*out = malloc(k * sizeof(**out))) == NULL) {
        if (k > 0)
            capture_drop(h);
        return;
    }
    for (size_t i = 0; i < h->ncap; i++) {
        if (h->cap[i].commit_ts <= r) {
            (*out)[(*n)++] = h->cap[i];
            h->cap_bytes -= h->cap[i].klen + h->cap[i].vlen;
        } else {
            h->cap[keep++] = h->cap[i];
        }
    }
    h->ncap = keep;
}

/* The ring starts over at t, a timestamp the oracle handed out after the
 * capture began (again): every change above t is applied after that, so
 * it is captured; every change at or below t is in the store once the
 * resolved timestamp reaches t, and only then is the ring ready. */
static void ring_restart(watch_hub *h, uint64_t t)
{
    ring_clear(h);
    h->floor = h->ring_ts = t;
    h->ring_ready = false;
}

/* Changes that cannot be told in order (memory, a value gone): drop the
 * capture, so that the next tick starts the ring again. */
static void capture_lost(watch_hub *h, const char *why)
{
    log_warn("watch: %s: the change feed starts again from the store", why);
    pthread_mutex_lock(&h->cap_mu);
    capture_drop(h);
    pthread_mutex_unlock(&h->cap_mu);
}

/* Sorted changes at or below r into the ring; false when they cannot be. */
static bool ring_take(watch_hub *h, pc_session *ps, captured *got, size_t ngot)
{
    if (ngot > 1)
        qsort(got, ngot, sizeof(*got), by_commit_key);
    for (size_t i = 0; i < ngot; i++) {
        captured *c = &got[i];
        if (c->commit_ts <= h->floor)
            continue; /* in the store, below the ring */
        if (c->commit_ts <= h->ring_ts) {
            log_error("watch: a change at %llu was captured after the resolved timestamp "
                      "%llu had passed it (a bug)",
                      (unsigned long long)c->commit_ts, (unsigned long long)h->ring_ts);
            return false;
        }
        pc_buf v = {0};
        pc_slice user, key = {c->key, c->klen};
        (void)ks_is_user(key, &user);
        bool ok = c->del || c->has_value || pc_change_value(ps, key, c->start_ts, &v) == PC_OK;
        ok = ok && ring_push(h, c->commit_ts, user.data, user.len,
                             c->has_value ? c->value : (uint8_t *)v.data,
                             c->has_value ? c->vlen : v.len, c->del);
        pc_buf_free(&v);
        if (!ok)
            return false;
        /* Keep within the bound as it fills: whole commits only. */
        if (i + 1 == ngot || got[i + 1].commit_ts != c->commit_ts)
            ring_evict(h);
    }
    return true;
}

static void tick(watch_hub *h, pc_session *ps)
{
    svc *s = h->s;
    uint64_t t, r;

    pthread_mutex_lock(&h->cap_mu);
    uint64_t seq0 = h->lost_seq;
    pthread_mutex_unlock(&h->cap_mu);
    const pc_slice all = {"", 0}, to_end = {NULL, 0}; /* the feed is of every key */
    uint64_t epoch = svc_read_epoch_range(s, all, to_end); /* see the fence below */
    /* A timestamp from the oracle bounds what is not yet committed: a
     * transaction still to ask for its commit timestamp gets one above. */
    if (!svc_timestamp(s, &t))
        return;
    /* Regions another node leads (--region-logs): this node's copy holds
     * everything committed there before the fence, their leaders' read
     * index applied here, before the lock scan below reads it: a commit
     * below t committed there later left its lock here (its prewrite
     * came before its commit timestamp, so before t and the fence). */
    follower_fence ff = {.floor = UINT64_MAX};
    if ((s->cfg.region_logs && follower_fence_begin(s, ps, &ff) != PC_OK) ||
        pc_resolved_ts(ps, t, &r) != PC_OK) {
        follower_fence_free(&ff);
        return;
    }
    if (ff.floor < r)
        r = ff.floor; /* their leaders' commits in flight (rule 2, on those nodes) */
    /* Every apply that committed before the lock scan's snapshot began
     * before this point: once they have all ended, their changes are
     * captured (a commit the scan saw done is in hand). */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    captured *got = NULL;
    size_t ngot = 0;
    pthread_mutex_lock(&h->cap_mu);
    uint64_t began = h->apply_began;
    while (h->apply_ended < began &&
           pthread_cond_timedwait(&h->cap_cv, &h->cap_mu, &until) != ETIMEDOUT)
        ;
    if (h->apply_ended >= began && h->lost_seq == seq0)
        capture_take(h, r, &got, &ngot);
    bool whole = h->apply_ended >= began && h->lost_seq == seq0; /* the take may drop */
    pthread_mutex_unlock(&h->cap_mu);
    /* Still the leader, with everything committed before now applied: a
     * member deposed meanwhile may have let go of commits in flight that
     * a new leader applies, so it publishes nothing; nor when a proposal
     * failed since the round began (svc_read_epoch: the capture may have
     * missed a commit let go that the next leader commits below r). */
    pc_rc fenced = !whole               ? PC_UNAVAILABLE
                   : s->cfg.region_logs ? svc_read_fence_all_but(s, follower_fence_vouches, &ff)
                                        : svc_read_fence_all(s); /* the feed is of every key */
    follower_fence_free(&ff);
    bool leads = whole && fenced == PC_OK && svc_read_epoch_range(s, all, to_end) == epoch;
    if (!whole || !leads) {
        if (whole)
            capture_lost(h, "this member could not confirm it leads");
    } else if (h->handled_seq != seq0) {
        ring_restart(h, t); /* t was handed out after the capture began (seq0) */
        h->handled_seq = seq0;
    } else if (r > h->ring_ts) {
        if (ring_take(h, ps, got, ngot)) {
            h->ring_ts = r;
            h->ring_ready = true;
            metrics_set(h->m_resolved, (int64_t)r);
        } else {
            capture_lost(h, "changes could not be held in order (memory, or a value gone)");
        }
        metrics_set(h->m_ring_bytes, (int64_t)h->ring_bytes);
    }
    for (size_t i = 0; i < ngot; i++)
        captured_free(&got[i]);
    free(got);
}

/* ---- filling a watcher (the hub thread) ---- */

static bool in_range(const watcher *w, const void *key, size_t klen)
{
    if (pc_key_cmp(key, klen, w->start, w->slen) < 0)
        return false;
    return w->elen == 0 || pc_key_cmp(key, klen, w->end, w->elen) < 0;
}

/* Append one line (a JSON object, taken) to w's output. */
static bool queue_line(watcher *w, json_t *line)
{
    char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    if (text == NULL)
        return false;
    pthread_mutex_lock(&w->mu);
    bool ok = buf_append(&w->out, text, strlen(text)) == 0 && buf_append(&w->out, "\n", 1) == 0;
    pthread_mutex_unlock(&w->mu);
    free(text);
    return ok;
}

static json_t *bytes_field(json_t *o, const char *name, const char *enc_name, const void *p,
                           size_t len, codec_enc enc)
{
    bool b64 = false;
    if (o == NULL)
        return NULL;
    json_t *v = codec_to_json_marked(p, len, enc, &b64);
    if (v == NULL || json_object_set_new(o, name, v) != 0) { /* set_new took v */
        json_decref(o);
        return NULL;
    }
    if (b64 && json_object_set_new(o, enc_name, json_string("base64")) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A change's line, "{...}\n" (malloc'd; *len its length), or NULL. */
static char *change_line(codec_enc enc, uint64_t commit_ts, const void *key, size_t klen,
                         const void *value, size_t vlen, bool del, size_t *len)
{
    json_t *o = json_pack("{s:s,s:I}", "type", del ? "delete" : "put", "commit_ts",
                          (json_int_t)commit_ts);
    o = bytes_field(o, "key", "key_encoding", key, klen, enc);
    if (!del)
        o = bytes_field(o, "value", "value_encoding", value, vlen, enc);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text == NULL)
        return NULL;
    size_t n = strlen(text);
    char *line = realloc(text, n + 2);
    if (line == NULL) {
        free(text);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    *len = n + 1;
    return line;
}

static bool queue_raw(watcher *w, const char *p, size_t len)
{
    pthread_mutex_lock(&w->mu);
    bool ok = buf_append(&w->out, p, len) == 0;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

static bool queue_change(watcher *w, uint64_t commit_ts, const void *key, size_t klen,
                         const void *value, size_t vlen, bool del)
{
    size_t len;
    char *line = change_line(w->enc, commit_ts, key, klen, value, vlen, del, &len);
    bool ok = line != NULL && queue_raw(w, line, len);
    free(line);
    return ok;
}

/* A ring event's line in w's encoding, made the first time one is asked. */
static bool queue_event(watch_hub *h, watcher *w, event *e)
{
    int i = w->enc == ENC_BASE64;
    if (e->line[i] == NULL) {
        e->line[i] = change_line(w->enc, e->commit_ts, e->bytes, e->klen, e->bytes + e->klen,
                                 e->vlen, e->del, &e->line_len[i]);
        if (e->line[i] == NULL)
            return false;
        h->ring_bytes += e->line_len[i];
    }
    return queue_raw(w, e->line[i], e->line_len[i]);
}

static void queue_progress(watcher *w, uint64_t ts)
{
    if (queue_line(w, json_pack("{s:s,s:I}", "type", "progress", "resolved_ts", (json_int_t)ts))) {
        w->progress_ts = ts;
        w->progress_ms = time_mono_ms();
    }
}

/* End w's body with an error line saying where to resume from. */
static void queue_end(watcher *w, const char *code, const char *message)
{
    (void)queue_line(w, json_pack("{s:s,s:{s:s,s:s,s:I}}", "type", "error", "error", "code", code,
                                  "message", message, "resume_ts", (json_int_t)w->cursor));
    pthread_mutex_lock(&w->mu);
    w->ending = true;
    pthread_mutex_unlock(&w->mu);
}

static size_t pending(watcher *w)
{
    pthread_mutex_lock(&w->mu);
    size_t n = w->out.len - w->off;
    pthread_mutex_unlock(&w->mu);
    return n;
}

/* Move w's GC pin up to its cursor. */
static void repin(watch_hub *h, watcher *w)
{
    if (w->cursor <= w->pinned || pc_snapshot_pin(h->s->engine, w->cursor) != PC_OK)
        return;
    pc_snapshot_unpin(h->s->engine, w->pinned);
    w->pinned = w->cursor;
}

/* One page of w's changes from the store, up to the ring's floor. */
static bool replay_page(watch_hub *h, pc_session *ps, watcher *w)
{
    char sb[KS_MAX + 1], eb[KS_MAX + 1];
    pc_slice start, end;
    pc_changes page;
    ks_user_range(w->start, w->slen, w->end, w->elen, sb, &start, eb, &end);
    if (pc_changes_scan(ps, start, end, w->cursor, h->floor, PAGE, &page) != PC_OK)
        return false;
    bool ok = true;
    uint64_t upto = page.upto;
    for (size_t i = 0; i < page.n && ok; i++) {
        const pc_change *c = &page.v[i];
        pc_buf v = {0};
        pc_slice user;
        /* Between two commits, a full output stops the page: the cursor
         * stays after the last whole commit queued. */
        if (i > 0 && c->commit_ts != page.v[i - 1].commit_ts && pending(w) >= OUT_MAX) {
            upto = page.v[i - 1].commit_ts;
            break;
        }
        if (!ks_is_user(c->key, &user))
            continue;
        if (c->op == PC_OP_PUT && !c->has_value &&
            pc_change_value(ps, c->key, c->start_ts, &v) != PC_OK) {
            ok = false;
        } else {
            const void *val = c->has_value ? c->value.data : v.data;
            size_t vlen = c->has_value ? c->value.len : v.len;
            ok = queue_change(w, c->commit_ts, user.data, user.len, val, vlen,
                              c->op == PC_OP_DELETE);
            metrics_inc(h->m_replayed, 1);
        }
        pc_buf_free(&v);
    }
    if (ok)
        w->cursor = upto;
    pc_changes_free(&page);
    return ok;
}

/* Queue what w has not seen, as far as its output allows; whether a line
 * was queued. */
static bool fill(watch_hub *h, pc_session *ps, watcher *w, uint64_t replay_until_ms)
{
    size_t before = pending(w);
    bool sent;
    for (int pages = 0; w->cursor < h->floor && pages < PAGES_PER_TICK; pages++) {
        if (pending(w) >= OUT_MAX || time_mono_ms() >= replay_until_ms)
            break;
        if (!replay_page(h, ps, w)) {
            queue_end(w, "watch_failed", "the store's changes could not be read: resume");
            return true;
        }
    }
    if (w->cursor >= h->floor) {
        if (w->ring_epoch != h->ring_epoch || w->next_seq < h->ring_base) {
            w->next_seq = ring_seek(h, w->cursor);
            w->ring_epoch = h->ring_epoch;
        }
        uint64_t end = h->ring_base + h->rn, group = 0;
        while (w->next_seq < end) {
            event *e = &h->ring[h->rhead + (w->next_seq - h->ring_base)];
            if (e->commit_ts != group) {
                /* A commit's changes go together: stop only between
                 * commits; the cursor passes a commit once all of its
                 * changes are queued (the ring holds whole commits). */
                if (group > w->cursor)
                    w->cursor = group;
                if (pending(w) >= OUT_MAX)
                    break;
                group = e->commit_ts;
            }
            if (e->commit_ts > w->cursor && in_range(w, e->bytes, e->klen) &&
                !queue_event(h, w, e)) {
                queue_end(w, "watch_failed", "out of memory: resume");
                return true;
            }
            if (e->commit_ts > w->cursor && in_range(w, e->bytes, e->klen))
                metrics_inc(h->m_changes, 1);
            w->next_seq++;
        }
        if (w->next_seq == end && h->ring_ts > w->cursor)
            w->cursor = h->ring_ts; /* every commit up to it is out */
        else if (group > w->cursor && w->next_seq == end)
            w->cursor = group;
    }
    sent = pending(w) > before;
    repin(h, w);
    /* A progress line after changes, and at least every PROGRESS_MS: it
     * says everything up to it is out (or, behind, that the stream lives). */
    bool caught_up = w->cursor >= h->ring_ts;
    bool due = time_mono_ms() - w->progress_ms >= PROGRESS_MS;
    if (caught_up && w->cursor > w->progress_ts && (sent || due))
        queue_progress(w, w->cursor);
    else if (due)
        queue_progress(w, w->progress_ts);
    return pending(w) > before;
}

static void wake(watcher *w)
{
    pthread_mutex_lock(&w->mu);
    if (w->wake != NULL && !w->gone)
        w->wake(w->wake_arg);
    pthread_mutex_unlock(&w->mu);
}

/* A listed watcher: its pin goes with it. */
static void watcher_free(watch_hub *h, watcher *w)
{
    pc_snapshot_unpin(h->s->engine, w->pinned);
    buf_free(&w->out);
    pthread_mutex_destroy(&w->mu);
    free(w->start);
    free(w->end);
    free(w);
}

/* Free the watchers whose reply is over; the rest, as a list to fill
 * (their next links are stable: only this thread unlinks). */
static watcher *sweep(watch_hub *h)
{
    pthread_mutex_lock(&h->mu);
    for (watcher **p = &h->watchers; *p != NULL;) {
        watcher *w = *p;
        pthread_mutex_lock(&w->mu);
        bool gone = w->gone;
        pthread_mutex_unlock(&w->mu);
        if (gone) {
            *p = w->next;
            h->n--;
            metrics_set(h->m_watchers, (int64_t)h->n);
            watcher_free(h, w);
        } else {
            p = &w->next;
        }
    }
    watcher *first = h->watchers;
    pthread_mutex_unlock(&h->mu);
    return first;
}

/* End every watcher with an error line (a lost lead, a stop). */
static void end_all(watch_hub *h, const char *code, const char *message)
{
    pthread_mutex_lock(&h->mu);
    for (watcher *w = h->watchers; w != NULL; w = w->next) {
        pthread_mutex_lock(&w->mu);
        bool done = w->ending || w->gone;
        pthread_mutex_unlock(&w->mu);
        if (!done) {
            queue_end(w, code, message);
            wake(w);
        }
    }
    pthread_mutex_unlock(&h->mu);
}

static void serve(watch_hub *h, pc_session *ps, watcher *first)
{
    uint64_t replay_until = time_mono_ms() + REPLAY_MS;
    for (watcher *w = first; w != NULL; w = w->next) {
        pthread_mutex_lock(&w->mu);
        bool skip = w->ending || w->gone;
        uint64_t drained_ms = w->drained_ms;
        pthread_mutex_unlock(&w->mu);
        if (skip)
            continue;
        /* A client that does not keep up holds back GC (its place is
         * pinned): one whose queue has not been under half full for the
         * GC's retention is cut, even if it reads a byte now and then; it
         * resumes from resume_ts. */
        if (pending(w) >= OUT_MAX && drained_ms + h->cfg.slow_ms < time_mono_ms()) {
            metrics_inc(h->m_cut, 1);
            queue_end(w, "watch_too_slow", "the client did not keep up for too long: resume");
            wake(w);
            continue;
        }
        bool queued;
        if (h->ring_ready) {
            queued = fill(h, ps, w, replay_until);
        } else { /* the feed (re)starts: say the stream lives */
            size_t before = pending(w);
            if (time_mono_ms() - w->progress_ms >= PROGRESS_MS)
                queue_progress(w, w->progress_ts);
            queued = pending(w) > before;
        }
        if (queued)
            wake(w);
    }
}

static void *hub_main(void *arg)
{
    watch_hub *h = arg;
    svc *s = h->s;
    while (!atomic_load(&h->stop)) {
        watcher *first = sweep(h);
        if (first == NULL) { /* nobody watches: capture nothing */
            capture_set(h, false);
            h->ring_ready = false;
            ring_clear(h);
            time_sleep_ms(IDLE_MS);
            continue;
        }
        pc_session *ps = svc_engine_session(s);
        uint64_t term = svc_leadership_of(s, NULL) == SVC_LEADS ? svc_leader_term(s) : 0;
        if (ps == NULL || term == 0 || term != h->term) {
            /* Not leading any more, or leading in a new term: the stream
             * goes on from the member that leads. */
            if (term == 0 || ps == NULL || h->term != 0) /* not the first term it serves */
                end_all(h, "not_leader",
                        "this member does not lead any more: resume from another member");
            capture_set(h, false);
            h->ring_ready = false;
            ring_clear(h);
            h->term = term;
            if (term == 0 || ps == NULL) {
                time_sleep_ms(TICK_MS);
                continue;
            }
        }
        capture_set(h, true);
        tick(h, ps);
        serve(h, ps, first);
        time_sleep_ms(TICK_MS);
    }
    return NULL;
}

/* ---- the hub ---- */

watch_hub *watch_hub_new(struct svc *s, const watch_config *cfg)
{
    watch_hub *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->s = s;
    h->cfg = *cfg;
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->cap_mu, NULL);
    pthread_cond_init(&h->cap_cv, NULL);
    atomic_init(&h->stop, false);
    metrics_registry *m = s->metrics;
    h->m_watchers = metrics_gauge1(m, "percolator_watchers",
                                   "Watchers connected (GET /v1/watch), against --watch-max.");
    h->m_changes = metrics_counter1(m, "percolator_watch_changes_sent_total",
                                    "Changes queued to watchers from the ring of recent changes.");
    h->m_replayed = metrics_counter1(m, "percolator_watch_changes_replayed_total",
                                     "Changes queued to watchers read back from the store (a "
                                     "watcher behind the ring).");
    h->m_ring_bytes = metrics_gauge1(m, "percolator_watch_ring_bytes",
                                     "Bytes of recent changes held for watchers, against "
                                     "--watch-buffer-bytes.");
    h->m_resolved = metrics_gauge1(m, "percolator_watch_resolved_ts",
                                   "The change feed's resolved timestamp: no change at or "
                                   "below it can still come.");
    h->m_cut = metrics_counter1(m, "percolator_watchers_cut_total",
                                "Watchers ended because they did not keep up for "
                                "--gc-retention-ms.");
    return h;
}

int watch_hub_start(watch_hub *h)
{
    if (pthread_create(&h->thread, NULL, hub_main, h) != 0)
        return -1;
    h->started = true;
    return 0;
}

void watch_hub_stop(watch_hub *h)
{
    if (h == NULL || !h->started)
        return;
    atomic_store(&h->stop, true);
    pthread_join(h->thread, NULL);
    h->started = false;
    end_all(h, "shutting_down", "the service is stopping: resume from another member or later");
}

void watch_hub_free(watch_hub *h)
{
    if (h == NULL)
        return;
    watch_hub_stop(h);
    for (watcher *w = h->watchers, *next; w != NULL; w = next) {
        next = w->next;
        watcher_free(h, w);
    }
    pthread_mutex_lock(&h->cap_mu);
    capture_drop(h);
    pthread_mutex_unlock(&h->cap_mu);
    free(h->cap);
    ring_clear(h);
    free(h->ring);
    pthread_cond_destroy(&h->cap_cv);
    pthread_mutex_destroy(&h->cap_mu);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

uint64_t watch_count(watch_hub *h)
{
    pthread_mutex_lock(&h->mu);
    uint64_t n = h->n;
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* ---- a watcher's life ---- */

static char *copy_bytes(const void *p, size_t len)
{
    char *c = malloc(len + 1);
    if (c != NULL && len > 0)
        memcpy(c, p, len);
    return c;
}

watcher *watch_open(watch_hub *h, const watch_spec *spec, watch_refusal *why,
                    uint64_t *safe_point)
{
    watcher *w = calloc(1, sizeof(*w));
    *why = WATCH_NOMEM;
    if (w == NULL || (w->start = copy_bytes(spec->start, spec->slen)) == NULL ||
        (w->end = copy_bytes(spec->end, spec->elen)) == NULL) {
        if (w != NULL) {
            free(w->start);
            free(w);
        }
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    w->slen = spec->slen;
    w->elen = spec->elen;
    w->enc = spec->enc;
    w->cursor = w->progress_ts = spec->after;
    w->pinned = spec->after > 0 ? spec->after : 1; /* the engine pins no 0 */
    w->drained_ms = time_mono_ms();
    /* The first line: a progress line at the stream's start, so a client
     * knows where to resume from before anything else comes. */
    queue_progress(w, spec->after);
    pthread_mutex_lock(&h->mu);
    bool full = h->n >= h->cfg.max_watchers;
    /* Pinned before it is listed: GC cannot pass its start meanwhile. */
    bool pinned = !full && spec->after >= pc_gc_safe_point(h->s->engine) &&
                  pc_snapshot_pin(h->s->engine, w->pinned) == PC_OK;
    if (pinned) {
        w->next = h->watchers;
        h->watchers = w;
        h->n++;
        metrics_set(h->m_watchers, (int64_t)h->n);
    }
    pthread_mutex_unlock(&h->mu);
    if (!pinned) {
        *why = full ? WATCH_TOO_MANY : WATCH_COMPACTED;
        *safe_point = pc_gc_safe_point(h->s->engine);
        buf_free(&w->out);
        pthread_mutex_destroy(&w->mu);
        free(w->start);
        free(w->end);
        free(w);
        return NULL;
    }
    *why = WATCH_OK;
    return w;
}

void watch_attach(watcher *w, void (*wake_fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&w->mu);
    if (!w->gone) {
        w->wake = wake_fn;
        w->wake_arg = arg;
    }
    pthread_mutex_unlock(&w->mu);
}

long watch_read(void *p, char *buf, size_t max)
{
    watcher *w = p;
    long n;
    pthread_mutex_lock(&w->mu);
    size_t have = w->out.len - w->off;
    if (have > 0) {
        n = (long)(have < max ? have : max);
        memcpy(buf, w->out.data + w->off, (size_t)n);
        w->off += (size_t)n;
        if (w->off == w->out.len)
            w->out.len = w->off = 0;
        else if (w->off > OUT_MAX) { /* keep the buffer from creeping */
            memmove(w->out.data, w->out.data + w->off, w->out.len - w->off);
            w->out.len -= w->off;
            w->off = 0;
        }
        if (w->out.len - w->off < OUT_MAX / 2)
            w->drained_ms = time_mono_ms();
    } else {
        n = w->ending ? -1 : 0;
    }
    pthread_mutex_unlock(&w->mu);
    return n;
}

void watch_done(void *p)
{
    watcher *w = p;
    pthread_mutex_lock(&w->mu);
    w->gone = true;
    w->wake = NULL;
    pthread_mutex_unlock(&w->mu);
}
