/*
 * region_fill.c — a member that missed a split makes the new region's
 * replica from a peer's image (region_fill.h; docs/DESIGN.md §6.5 step
 * k). Why a peer's image is right: engine/region_fill.c.
 *
 * Bounds, since whoever reaches the node network may be hostile (though
 * only a node of this cluster, proved by its address or certificate,
 * gets a record through): an ask is at most two keys long, one is kept a
 * node (a newer one replaces it), an ask is answered with one image (the
 * hole's first region: the next ask gets the next), and at most
 * ANSWERS_PER_SECOND images are taken for asks; one image that came is
 * kept (held against the network's budget for images), the rest dropped.
 * The asker asks again while the hole stays, waiting twice as long each
 * time (1 s to 16 s: an image may take a while to come), and ends an ask
 * to a peer that cannot answer by asking the next.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "le.h"
#include "log.h"
#include "raft_net.h"
#include "region_fill.h"
#include "timeutil.h"

#define FILL_ASK 1 /* an ask's first byte; an image is a record of the images lane */

#define ASK_MAX (1 + 2 * (4 + PC_KEY_MAX) + 1)
#define ANSWERS_PER_SECOND 4
#define ASK_FIRST_MS 1000
#define ASK_MOST_MS 16000

typedef struct {
    bool asked;              /* under mu */
    pc_buf start, end;       /* the hole it asked about */
    bool bounded;            /* end is its end (else: to the end of the keyspace) */
} ask;

struct region_fill {
    raft_net *net;
    raft_peer peers[RAFT_PEERS_MAX]; /* the others */
    size_t npeers;
    unsigned me;
    void (*wake)(void *);
    void *arg;
    metrics_series *fills, *answers;
    /* the maker's own */
    size_t round;            /* asking rounds: gap g of round k asks peer k + g */
    uint64_t asked_ms, ask_every_ms, answered_ms, refused_logged_ms;
    unsigned answered;
    /* what reader threads keep for the maker */
    pthread_mutex_t mu;
    ask asks[RAFT_PEERS_MAX];        /* one a peer */
    uint8_t *image;                  /* one image that came (held on the images lane) */
    size_t image_len;
    unsigned image_from;
};

static int peer_of(const region_fill *f, const char *node)
{
    for (size_t i = 0; i < f->npeers; i++)
        if (strcmp(f->peers[i].raft, node) == 0)
            return (int)i;
    return -1;
}

/* ---- the records ---- */

static bool get_key(const uint8_t **p, const uint8_t *end, pc_buf *out)
{
    if (end - *p < 4)
        return false;
    uint32_t n = le_get32(*p);
    *p += 4;
    if (n > PC_KEY_MAX || (size_t)(end - *p) < n)
        return false;
    out->len = 0;
    if (pc_buf_append(out, *p, n) != PC_OK)
        return false;
    *p += n;
    return true;
}

static bool decode_ask(const uint8_t *msg, size_t len, ask *a)
{
    const uint8_t *p = msg + 1, *end = msg + len;
    if (!get_key(&p, end, &a->start) || p == end)
        return false;
    a->bounded = *p++ != 0;
    if (!get_key(&p, end, &a->end) || p != end)
        return false;
    /* an empty hole is no hole */
    return !a->bounded || pc_key_cmp(a->start.data, a->start.len, a->end.data, a->end.len) < 0;
}

static size_t put_key(uint8_t *p, const void *key, size_t len)
{
    le_put32(p, (uint32_t)len);
    if (len > 0)
        memcpy(p + 4, key, len);
    return 4 + len;
}

/* ---- a reader thread: keep what came, wake the maker ---- */

static void deliver(void *arg, uint64_t from, uint64_t to, const char *from_node,
                    raft_net_lane lane, uint8_t *msg, size_t len)
{
    region_fill *f = arg;
    (void)from;
    (void)to;
    int peer = peer_of(f, from_node);
    bool woke = false;
    if (peer >= 0 && len > 0 && msg[0] == FILL_ASK && lane == RAFT_NET_MESSAGES &&
        len <= ASK_MAX) {
        ask a = {0};
        if (decode_ask(msg, len, &a)) {
            pthread_mutex_lock(&f->mu);
            ask *kept = &f->asks[peer];
            pc_buf_free(&kept->start);
            pc_buf_free(&kept->end);
            *kept = a; /* the newer replaces the older */
            kept->asked = true;
            pthread_mutex_unlock(&f->mu);
            woke = true;
        } else {
            pc_buf_free(&a.start);
            pc_buf_free(&a.end);
        }
    } else if (peer >= 0 && len > 0 && lane == RAFT_NET_IMAGES) {
        pthread_mutex_lock(&f->mu);
        if (f->image == NULL && raft_net_hold(f->net, lane, len)) {
            f->image = msg;
            f->image_len = len;
            f->image_from = f->peers[peer].id;
            msg = NULL; /* kept */
            woke = true;
        }
        pthread_mutex_unlock(&f->mu);
    }
    free(msg);
    if (woke)
        f->wake(f->arg);
}

/* ---- the maker's thread ---- */

/* The image that came, if any: installed where this node has a hole. */
static void install_image(region_fill *f, pc_session *ps)
{
    pthread_mutex_lock(&f->mu);
    uint8_t *msg = f->image;
    size_t len = f->image_len;
    unsigned from = f->image_from;
    f->image = NULL;
    pthread_mutex_unlock(&f->mu);
    if (msg == NULL)
        return;
    uint64_t id = 0;
    const char *why = NULL;
    pc_rc rc = pc_region_fill(ps, msg, len, &id, &why);
    /* Durable before the group starts: no log would bring it back. */
    if (rc == PC_OK)
        rc = pc_sync(ps);
    if (rc == PC_OK) {
        metrics_inc(f->fills, 1);
        f->ask_every_ms = ASK_FIRST_MS;
        log_warn("regions: this member missed the split that made region %llu (it caught up "
                 "by a later image); its replica made from member %u's image of the state "
                 "the split left", (unsigned long long)id, from);
    } else if (rc == PC_INVALID) {
        /* another peer's answer to the same hole, or the region's log
         * ran meanwhile: asked again while the hole stays */
        log_info("regions: member %u's image of region %llu not installed: %s", from,
                 (unsigned long long)id, why != NULL ? why : "refused");
    } else {
        log_error("regions: installing member %u's image of region %llu failed (%d)", from,
                  (unsigned long long)id, (int)rc);
    }
    free(msg);
    raft_net_release(f->net, RAFT_NET_IMAGES, len);
}

typedef struct {
    const ask *a;
    pc_region_row first; /* out: the region inside the hole with the lowest start */
    pc_buf mem;          /* its keys */
    bool found;
} first_args;

/* Whether r lies inside the hole a. */
static bool row_inside(const pc_region_row *r, const ask *a)
{
    if (pc_key_cmp(r->start.data, r->start.len, a->start.data, a->start.len) < 0)
        return false;
    if (!a->bounded)
        return true;
    return r->end.data != NULL && pc_key_cmp(r->end.data, r->end.len, a->end.data, a->end.len) <= 0;
}

static int first_inside(void *arg, const pc_region_row *r)
{
    first_args *fa = arg;
    if (!row_inside(r, fa->a) ||
        (fa->found &&
         pc_key_cmp(r->start.data, r->start.len, fa->first.start.data, fa->first.start.len) >= 0))
        return 0;
    pc_buf *m = &fa->mem;
    m->len = 0;
    if (pc_buf_append(m, r->start.data, r->start.len) != PC_OK ||
        (r->end.data != NULL && pc_buf_append(m, r->end.data, r->end.len) != PC_OK))
        return 1;
    fa->first = *r;
    fa->first.start = (pc_slice){m->data, r->start.len};
    fa->first.end = r->end.data != NULL ? (pc_slice){m->data + r->start.len, r->end.len}
                                        : (pc_slice){NULL, 0};
    fa->found = true;
    return 0;
}

/* Answer peer's ask: an image of the region here inside the hole with the
 * lowest start, if its own log applied nothing yet (else the asker could
 * not use it). The asker asks again for the rest of the hole. */
static void answer(region_fill *f, pc_session *ps, size_t peer, const ask *a)
{
    first_args fa = {.a = a};
    pc_buf image = {0};
    uint64_t applied = 0;
    pc_rc rc = pc_region_rows_each(ps, first_inside, &fa);
    if (rc == PC_OK && fa.found)
        rc = pc_region_image_take(ps, fa.first.id, fa.first.start, fa.first.end, &image,
                                  &applied);
    if (rc == PC_OK && fa.found && applied == 0) {
        size_t len = image.len;
        uint8_t *msg = (uint8_t *)image.data;
        image = (pc_buf){0}; /* the net's now */
        if (raft_net_send(f->net, FILL_GROUP, f->me, f->peers[peer].id, f->peers[peer].raft,
                          RAFT_NET_IMAGES, msg, len) == 0) {
            metrics_inc(f->answers, 1);
            log_info("regions: region %llu's image sent to member %u, which misses it",
                     (unsigned long long)fa.first.id, f->peers[peer].id);
        }
    }
    pc_buf_free(&image);
    pc_buf_free(&fa.mem);
}

void region_fill_serve(region_fill *f, pc_session *ps)
{
    install_image(f, ps);
    uint64_t now = time_mono_ms();
    if (now - f->answered_ms >= 1000) {
        f->answered_ms = now;
        f->answered = 0;
    }
    for (size_t i = 0; i < f->npeers && f->answered < ANSWERS_PER_SECOND; i++) {
        ask a = {0};
        pthread_mutex_lock(&f->mu);
        if (f->asks[i].asked) {
            a = f->asks[i];
            f->asks[i] = (ask){0};
        }
        pthread_mutex_unlock(&f->mu);
        if (a.asked) {
            f->answered++;
            answer(f, ps, i, &a);
        }
        pc_buf_free(&a.start);
        pc_buf_free(&a.end);
    }
}

/* Ask peer about the hole [start, end) (bounded: else to the end of the
 * keyspace). */
static void ask_about(region_fill *f, size_t peer, const void *start, size_t slen,
                      const void *end, size_t elen, bool bounded)
{
    size_t len = 1 + 4 + slen + 1 + 4 + elen;
    uint8_t *msg = malloc(len);
    if (msg == NULL)
        return;
    size_t n = 0;
    msg[n++] = FILL_ASK;
    n += put_key(msg + n, start, slen);
    msg[n++] = bounded;
    n += put_key(msg + n, end, elen);
    if (raft_net_send(f->net, FILL_GROUP, f->me, f->peers[peer].id, f->peers[peer].raft,
                      RAFT_NET_MESSAGES, msg, n) != 0)
        return;
    uint64_t now = time_mono_ms();
    if (now - f->refused_logged_ms >= 60000) { /* asked every second */
        f->refused_logged_ms = now;
        log_warn("regions: no region of this member holds keys from '%.*s' (a split it missed); "
                 "asked member %u for its image (again while it lacks it, logged once a "
                 "minute)",
                 (int)(slen < 64 ? slen : 64), (const char *)start, f->peers[peer].id);
    }
}

bool region_fill_holes(region_fill *f, const router *rows)
{
    size_t n = router_count(rows), gaps = 0;
    uint64_t now = time_mono_ms();
    bool ask_now = f->npeers > 0 && now - f->asked_ms >= f->ask_every_ms;
    const void *from = "";
    size_t from_len = 0;
    bool open = true; /* keys from `from` on are not covered yet */
    for (size_t i = 0; i <= n; i++) {
        const region *r = i < n ? router_at(rows, i) : NULL;
        bool gap = r == NULL ? open
                             : open && pc_key_cmp(from, from_len, r->start.data, r->start.len) < 0;
        if (gap && ask_now)
            ask_about(f, (f->round + gaps) % f->npeers, from, from_len,
                      r != NULL ? r->start.data : NULL, r != NULL ? r->start.len : 0, r != NULL);
        gaps += gap;
        if (r == NULL)
            break;
        open = !r->unbounded;
        from = r->end.data;
        from_len = r->end.len;
    }
    if (gaps == 0)
        f->ask_every_ms = ASK_FIRST_MS;
    else if (ask_now) {
        f->asked_ms = now;
        f->round++;
        if (f->ask_every_ms < ASK_MOST_MS)
            f->ask_every_ms *= 2; /* an image may be on its way */
    }
    return gaps > 0;
}

/* ---- start, stop ---- */

region_fill *region_fill_start(struct raft_net *net, const raft_peer *peers, size_t npeers,
                               unsigned me, metrics_registry *metrics, void (*wake)(void *),
                               void *arg, char *err, size_t errlen)
{
    region_fill *f = calloc(1, sizeof *f);
    if (f == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    *f = (region_fill){.net = net, .me = me, .wake = wake, .arg = arg,
                       .ask_every_ms = ASK_FIRST_MS};
    const char *nodes[RAFT_PEERS_MAX];
    for (size_t i = 0; i < npeers && i < RAFT_PEERS_MAX; i++) {
        if (peers[i].id == me)
            continue;
        f->peers[f->npeers] = peers[i];
        nodes[f->npeers] = f->peers[f->npeers].raft;
        f->npeers++;
    }
    pthread_mutex_init(&f->mu, NULL);
    f->fills = metrics_counter1(metrics, "percolator_region_fills_total",
                                "New regions' replicas this member made from a peer's image, "
                                "having missed the split that made them.");
    f->answers = metrics_counter1(metrics, "percolator_region_fill_answers_total",
                                  "Images of new regions sent to a member that missed their split.");
    if (raft_net_join(net, FILL_GROUP, nodes, f->npeers, deliver, f) != 0) {
        snprintf(err, errlen, "cannot join the node network's group of fills");
        pthread_mutex_destroy(&f->mu);
        free(f);
        return NULL;
    }
    return f;
}

void region_fill_stop(region_fill *f)
{
    if (f == NULL)
        return;
    raft_net_leave(f->net, FILL_GROUP);
    for (size_t i = 0; i < RAFT_PEERS_MAX; i++) {
        pc_buf_free(&f->asks[i].start);
        pc_buf_free(&f->asks[i].end);
    }
    if (f->image != NULL) {
        free(f->image);
        raft_net_release(f->net, RAFT_NET_IMAGES, f->image_len);
    }
    pthread_mutex_destroy(&f->mu);
    free(f);
}
