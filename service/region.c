/*
 * region.c — regions and the router (region.h): a sorted array of
 * disjoint ranges, searched by binary search under a read lock; a split
 * installs a new map under the write lock (router_install), which no
 * holder of the read lock waits on anything while holding.
 */
#include "region.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "be.h"
#include "metrics.h"

struct router {
    pthread_rwlock_t mu;
    region **r;       /* sorted by start; disjoint */
    size_t n, cap;
    uint64_t next_id; /* the id the next split gives its right part */
    region **retired; /* out of the map, freed with the router */
    size_t nretired, capretired;
    pc_engine *engine; /* router_share_log: every region's, a split's too */
    replicator *repl;
    struct raft_group *raft;
    _Atomic uint64_t installs; /* maps installed (router_generation) */
};

#define RDLOCK(rt) pthread_rwlock_rdlock((pthread_rwlock_t *)&(rt)->mu)
#define UNLOCK(rt) pthread_rwlock_unlock((pthread_rwlock_t *)&(rt)->mu)

region *region_new(uint64_t id, const void *start, size_t start_len, const void *end,
                   size_t end_len)
{
    if (end != NULL && pc_key_cmp(end, end_len, start, start_len) <= 0)
        return NULL; /* an empty or reversed range */
    region *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->id = id;
    r->unbounded = end == NULL;
    atomic_init(&r->size, -1);
    if (pc_buf_append(&r->start, start, start_len) != PC_OK ||
        (end != NULL && pc_buf_append(&r->end, end, end_len) != PC_OK)) {
        region_free(r);
        return NULL;
    }
    return r;
}

void region_free(region *r)
{
    if (r == NULL)
        return;
    pc_buf_free(&r->start);
    pc_buf_free(&r->end);
    free(r);
}

void region_count_batch(region *r, size_t bytes)
{
    atomic_fetch_add(&r->nbatches, 1);
    atomic_fetch_add(&r->written, bytes);
    if (r->batches != NULL)
        metrics_inc(r->batches, 1);
}

/* key against r: -1 before its start, 0 in it, 1 at or past its end. */
static int place(const region *r, const void *key, size_t len)
{
    if (pc_key_cmp(key, len, r->start.data, r->start.len) < 0)
        return -1;
    if (!r->unbounded && pc_key_cmp(key, len, r->end.data, r->end.len) >= 0)
        return 1;
    return 0;
}

bool region_contains(const region *r, const void *key, size_t len)
{
    return place(r, key, len) == 0;
}

router *router_new(void)
{
    router *rt = calloc(1, sizeof(router));
    if (rt != NULL && pthread_rwlock_init(&rt->mu, NULL) != 0) {
        free(rt);
        return NULL;
    }
    if (rt != NULL)
        rt->next_id = 1;
    return rt;
}

void router_free(router *rt)
{
    if (rt == NULL)
        return;
    for (size_t i = 0; i < rt->n; i++)
        region_free(rt->r[i]);
    for (size_t i = 0; i < rt->nretired; i++)
        region_free(rt->retired[i]);
    free(rt->r);
    free(rt->retired);
    pthread_rwlock_destroy(&rt->mu);
    free(rt);
}

/* Whether a ends at or before b starts (a before b, b's start included). */
static bool ends_before(const region *a, const region *b)
{
    return !a->unbounded && pc_key_cmp(a->end.data, a->end.len, b->start.data, b->start.len) <= 0;
}

int router_add(router *rt, region *r)
{
    size_t at = 0;
    while (at < rt->n && pc_key_cmp(rt->r[at]->start.data, rt->r[at]->start.len, r->start.data,
                                    r->start.len) < 0)
        at++;
    /* Disjoint: the one before ends by r's start, r ends by the next's. */
    if ((at > 0 && !ends_before(rt->r[at - 1], r)) || (at < rt->n && !ends_before(r, rt->r[at])))
        return -1;
    if (rt->n == rt->cap) {
        size_t cap = rt->cap ? 2 * rt->cap : 4;
        region **grown = realloc(rt->r, cap * sizeof(*grown));
        if (grown == NULL)
            return -1;
        rt->r = grown;
        rt->cap = cap;
    }
    memmove(rt->r + at + 1, rt->r + at, (rt->n - at) * sizeof(*rt->r));
    rt->r[at] = r;
    rt->n++;
    if (r->id >= rt->next_id)
        rt->next_id = r->id + 1;
    return 0;
}

/* The index of the first region whose end is past key (n: none). Ends
 * are in order too, since the regions are sorted and disjoint. */
static size_t first_ending_after(const router *rt, const void *key, size_t len)
{
    size_t lo = 0, hi = rt->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (place(rt->r[mid], key, len) > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Under the read lock. */
static region *find(const router *rt, const void *key, size_t len)
{
    size_t i = first_ending_after(rt, key, len);
    return i < rt->n && place(rt->r[i], key, len) == 0 ? rt->r[i] : NULL;
}

region *router_find(const router *rt, const void *key, size_t len)
{
    RDLOCK(rt);
    region *r = find(rt, key, len);
    UNLOCK(rt);
    return r;
}

#define OVERLAP_CHUNK 16

void router_each_overlapping(const router *rt, const void *start, size_t slen, const void *end,
                             size_t elen, int (*fn)(void *arg, region *r), void *arg)
{
    /* From the first region ending past start, while they begin before
     * end: a chunk of them taken under the lock, then handed to fn
     * without it (fn may wait on the replicator, whose thread installs
     * splits), then the next chunk from where the last one ended. The
     * regions stay valid (retired, not freed), so a split meanwhile shows
     * in the next chunk at the worst. */
    region *chunk[OVERLAP_CHUNK];
    pc_buf from = {0};
    const void *at = start;
    size_t atlen = slen;
    for (bool more = true; more;) {
        size_t k = 0;
        RDLOCK(rt);
        for (size_t i = first_ending_after(rt, at, atlen); i < rt->n && k < OVERLAP_CHUNK; i++) {
            region *r = rt->r[i];
            if (end != NULL && pc_key_cmp(r->start.data, r->start.len, end, elen) >= 0)
                break;
            chunk[k++] = r;
        }
        UNLOCK(rt);
        more = k == OVERLAP_CHUNK && !chunk[k - 1]->unbounded;
        for (size_t i = 0; i < k; i++)
            if (fn(arg, chunk[i]) != 0)
                more = false, i = k;
        if (more) { /* on from the end of the last region handed on */
            from.len = 0;
            if (pc_buf_append(&from, chunk[k - 1]->end.data, chunk[k - 1]->end.len) != PC_OK)
                break; /* no memory: fn saw what it could */
            at = from.data, atlen = from.len;
        }
    }
    pc_buf_free(&from);
}

typedef struct {
    const router *rt;
    region *found;
    bool mixed, other_log;
} batch_route;

static int route_key(void *arg, const void *key, size_t len)
{
    batch_route *b = arg;
    if (b->found != NULL && region_contains(b->found, key, len))
        return 0; /* the usual case: the region of the keys before */
    region *r = find(b->rt, key, len);
    if (r == NULL || (b->found != NULL && r->repl != b->found->repl)) {
        b->other_log = true;
        return 1;
    }
    if (b->found != NULL)
        b->mixed = true; /* another region, on the same log: go on */
    else
        b->found = r;
    return 0;
}

region *router_find_batch(const router *rt, const void *batch, size_t len, bool *stale)
{
    batch_route b = {rt, NULL, false, false};
    RDLOCK(rt);
    pc_rc rc = pc_batch_keys(batch, len, route_key, &b);
    region *r = rc != PC_OK || b.other_log ? NULL : b.found != NULL ? b.found
                : rt->n > 0 ? rt->r[0] : NULL;
    UNLOCK(rt);
    if (stale != NULL)
        *stale = r != NULL && b.mixed;
    return r;
}

size_t router_count(const router *rt)
{
    RDLOCK(rt);
    size_t n = rt->n;
    UNLOCK(rt);
    return n;
}

region *router_at(const router *rt, size_t i)
{
    RDLOCK(rt);
    region *r = i < rt->n ? rt->r[i] : NULL;
    UNLOCK(rt);
    return r;
}

region *router_take(router *rt, uint64_t id)
{
    region *r = NULL;
    pthread_rwlock_wrlock(&rt->mu);
    for (size_t i = 0; i < rt->n && r == NULL; i++) {
        if (rt->r[i]->id != id)
            continue;
        r = rt->r[i];
        memmove(rt->r + i, rt->r + i + 1, (rt->n - i - 1) * sizeof(*rt->r));
        rt->n--;
    }
    pthread_rwlock_unlock(&rt->mu);
    return r;
}

bool router_has_id(const router *rt, uint64_t id)
{
    bool has = false;
    RDLOCK(rt);
    for (size_t i = 0; i < rt->n && !has; i++)
        has = rt->r[i]->id == id;
    UNLOCK(rt);
    return has;
}

size_t router_list(const router *rt, region ***out)
{
    RDLOCK(rt);
    size_t n = rt->n;
    *out = malloc((n ? n : 1) * sizeof(**out));
    if (*out != NULL)
        memcpy(*out, rt->r, n * sizeof(**out));
    UNLOCK(rt);
    return *out != NULL ? n : 0;
}

router *router_split(const pc_buf *splits, size_t n)
{
    router *rt = router_new();
    for (size_t i = 0; rt != NULL && i <= n; i++) {
        const pc_buf *from = i > 0 ? &splits[i - 1] : NULL, *to = i < n ? &splits[i] : NULL;
        if ((from != NULL && from->len == 0) || (to != NULL && to->len == 0)) {
            router_free(rt);
            return NULL;
        }
        region *r = region_new(i + 1, from ? from->data : "", from ? from->len : 0,
                               to ? to->data : NULL, to ? to->len : 0);
        if (r == NULL || router_add(rt, r) != 0) {
            region_free(r); /* out of order (region_new refused it) or no memory */
            router_free(rt);
            return NULL;
        }
        r->epoch = 1;
    }
    return rt;
}

size_t router_run(const router *rt, const pc_mutation *m, size_t n)
{
    if (n == 0)
        return 0;
    /* A region's range never changes: no lock past the lookup. */
    region *r = router_find(rt, m[0].key.data, m[0].key.len);
    if (r == NULL)
        return n;
    size_t k = 1;
    while (k < n && region_contains(r, m[k].key.data, m[k].key.len))
        k++;
    return k;
}

/* ---- the region map ---- */

#define MAP_MAGIC "pcR1"
#define MAP_HEADER 16 /* magic, next id, count */

/* One region's entry: id, epoch, start. */
static int put_entry(pc_buf *out, uint64_t id, uint64_t epoch, const void *start, size_t len)
{
    uint8_t h[20];
    be_put64(h, id);
    be_put64(h + 8, epoch);
    be_put32(h + 16, (uint32_t)len);
    return pc_buf_append(out, h, sizeof h) == PC_OK && pc_buf_append(out, start, len) == PC_OK
               ? 0 : -1;
}

static int put_header(pc_buf *out, uint64_t next_id, size_t count)
{
    uint8_t h[MAP_HEADER];
    memcpy(h, MAP_MAGIC, 4);
    be_put64(h + 4, next_id);
    be_put32(h + 12, (uint32_t)count);
    out->len = 0;
    return pc_buf_append(out, h, sizeof h) == PC_OK ? 0 : -1;
}

int router_encode(const router *rt, pc_buf *out)
{
    RDLOCK(rt);
    int rc = put_header(out, rt->next_id, rt->n);
    for (size_t i = 0; rc == 0 && i < rt->n; i++)
        rc = put_entry(out, rt->r[i]->id, rt->r[i]->epoch, rt->r[i]->start.data,
                       rt->r[i]->start.len);
    UNLOCK(rt);
    return rc;
}

/* The i-th entry from *p (end: the map's end): false if it does not fit. */
static bool take_entry(const uint8_t **p, const uint8_t *end, uint64_t *id, uint64_t *epoch,
                       pc_slice *start)
{
    if (end - *p < 20)
        return false;
    *id = be_get64(*p), *epoch = be_get64(*p + 8);
    size_t len = be_get32(*p + 16);
    *p += 20;
    if (len > PC_KEY_MAX || (size_t)(end - *p) < len)
        return false;
    *start = (pc_slice){*p, len};
    *p += len;
    return true;
}

typedef struct {
    uint64_t id, epoch;
    pc_slice start;
} map_entry;

/* The map's entries, checked (region.h), into a new array *e; its count,
 * 0 when the bytes are not a well-formed map or memory ran out. */
static size_t parse_map(const void *map, size_t len, uint64_t *next_id, map_entry **e)
{
    const uint8_t *p = map, *end = p + len;
    *e = NULL;
    if (len < MAP_HEADER || memcmp(p, MAP_MAGIC, 4) != 0)
        return 0;
    *next_id = be_get64(p + 4);
    uint32_t count = be_get32(p + 12);
    if (count == 0 || count > ROUTER_MAX_REGIONS || (*e = calloc(count, sizeof(**e))) == NULL)
        return 0;
    p += MAP_HEADER;
    bool ok = true;
    for (uint32_t i = 0; ok && i < count; i++) {
        map_entry *x = &(*e)[i];
        ok = take_entry(&p, end, &x->id, &x->epoch, &x->start) && x->id != 0 &&
             x->id < *next_id && x->epoch != 0 &&
             (i == 0 ? x->start.len == 0
                     : pc_key_cmp(x->start.data, x->start.len, (*e)[i - 1].start.data,
                                  (*e)[i - 1].start.len) > 0);
        for (uint32_t j = 0; ok && j < i; j++)
            ok = (*e)[j].id != x->id;
    }
    if (!ok || p != end) {
        free(*e);
        *e = NULL;
        return 0;
    }
    return count;
}

/* entries e[0..n) (checked: in key order) as regions of a new router,
 * their ends the next's start. */
static router *router_of(const map_entry *e, size_t n, uint64_t next_id)
{
    router *rt = router_new();
    if (rt == NULL || (rt->r = calloc(n, sizeof(*rt->r))) == NULL) {
        router_free(rt);
        return NULL;
    }
    rt->cap = n;
    for (size_t i = 0; i < n; i++) {
        bool last = i + 1 == n;
        region *r = region_new(e[i].id, e[i].start.data, e[i].start.len,
                               last ? NULL : e[i + 1].start.data, last ? 0 : e[i + 1].start.len);
        if (r == NULL) {
            router_free(rt);
            return NULL;
        }
        r->epoch = e[i].epoch;
        rt->r[rt->n++] = r;
    }
    rt->next_id = next_id;
    return rt;
}

router *router_decode(const void *map, size_t len)
{
    map_entry *e;
    uint64_t next_id;
    size_t n = parse_map(map, len, &next_id, &e);
    router *rt = n > 0 ? router_of(e, n, next_id) : NULL;
    free(e);
    return rt;
}

uint64_t router_next_id(const router *rt)
{
    RDLOCK(rt);
    uint64_t id = rt->next_id;
    UNLOCK(rt);
    return id;
}

int router_split_map(const router *rt, const void *key, size_t len, uint64_t new_id, pc_buf *out,
                     char *err, size_t errlen)
{
    int rc = -1;
    RDLOCK(rt);
    uint64_t id = new_id != 0 ? new_id : rt->next_id;
    size_t at = first_ending_after(rt, key, len);
    region *r = at < rt->n ? rt->r[at] : NULL;
    if (len == 0 || r == NULL || place(r, key, len) != 0)
        snprintf(err, errlen, "no region holds that key");
    else if (pc_key_cmp(r->start.data, r->start.len, key, len) == 0)
        snprintf(err, errlen, "region %llu starts at that key already", (unsigned long long)r->id);
    else if (rt->n >= ROUTER_MAX_REGIONS)
        snprintf(err, errlen, "the keyspace has %d regions, the most there may be",
                 ROUTER_MAX_REGIONS);
    else if (id < rt->next_id || id == UINT64_MAX)
        snprintf(err, errlen, "region id %llu is below the map's next id %llu",
                 (unsigned long long)id, (unsigned long long)rt->next_id);
    else if (out == NULL)
        rc = 0;
    else if ((rc = put_header(out, id + 1, rt->n + 1)) != 0)
        snprintf(err, errlen, "out of memory");
    for (size_t i = 0; rc == 0 && out != NULL && i < rt->n; i++) {
        const region *x = rt->r[i];
        uint64_t epoch = i == at ? x->epoch + 1 : x->epoch;
        rc = put_entry(out, x->id, epoch, x->start.data, x->start.len);
        if (rc == 0 && i == at) /* the right part: a new id, the same new epoch */
            rc = put_entry(out, id, epoch, key, len);
        if (rc != 0)
            snprintf(err, errlen, "out of memory");
    }
    UNLOCK(rt);
    return rc;
}

static bool same_range(const region *a, const region *b)
{
    return pc_key_cmp(a->start.data, a->start.len, b->start.data, b->start.len) == 0 &&
           a->unbounded == b->unbounded &&
           (a->unbounded || pc_key_cmp(a->end.data, a->end.len, b->end.data, b->end.len) == 0);
}

/* The index of rt's region that starts where r does; rt->n: none (under
 * the lock). A split keeps the left part's id and start, so this finds
 * the region a new one replaces or keeps. */
static size_t same_start(const router *rt, const region *r)
{
    size_t i = first_ending_after(rt, r->start.data, r->start.len);
    return i < rt->n && pc_key_cmp(rt->r[i]->start.data, rt->r[i]->start.len, r->start.data,
                                   r->start.len) == 0 ? i : rt->n;
}

int router_install(router *rt, const void *map, size_t len, void (*made)(void *arg, region *r),
                   void *arg)
{
    router *fresh = router_decode(map, len);
    return fresh != NULL ? router_adopt(rt, fresh, made, arg) : -1;
}

int router_adopt(router *rt, router *fresh, void (*made)(void *arg, region *r), void *arg)
{
    pthread_rwlock_wrlock(&rt->mu);
    /* Room first, so that nothing below can fail halfway. */
    size_t need = rt->nretired + rt->n;
    bool *kept = calloc(rt->n ? rt->n : 1, sizeof(*kept));
    if (kept == NULL || need > rt->capretired) {
        region **grown = kept != NULL ? realloc(rt->retired, need * sizeof(*grown)) : NULL;
        if (grown == NULL) {
            pthread_rwlock_unlock(&rt->mu);
            free(kept);
            router_free(fresh);
            return -1;
        }
        rt->retired = grown;
        rt->capretired = need;
    }
    size_t nkept = 0;
    for (size_t i = 0; i < fresh->n; i++) {
        region *now = fresh->r[i];
        size_t j = same_start(rt, now);
        region *had = j < rt->n && rt->r[j]->id == now->id ? rt->r[j] : NULL;
        if (had != NULL && had->epoch == now->epoch && same_range(had, now)) {
            fresh->r[i] = had; /* unchanged: kept, with its counts */
            kept[j] = true;
            nkept++;
            region_free(now);
            continue;
        }
        if (had != NULL) { /* the left part of a split: the same region, counted on */
            atomic_store(&now->nbatches, atomic_load(&had->nbatches));
            now->engine = had->engine, now->repl = had->repl, now->raft = had->raft;
        } else if (now->repl == NULL) {
            now->engine = rt->engine, now->repl = rt->repl, now->raft = rt->raft;
        }
        if (made != NULL)
            made(arg, now);
    }
    /* The same map again moved no key: reads need not fence anew. */
    bool changed = nkept != fresh->n || rt->n != fresh->n;
    for (size_t j = 0; j < rt->n; j++)
        if (!kept[j])
            rt->retired[rt->nretired++] = rt->r[j];
    free(kept);
    /* fresh's array becomes rt's; fresh goes, holding nothing. */
    free(rt->r);
    rt->r = fresh->r, rt->n = fresh->n, rt->cap = fresh->cap;
    if (fresh->next_id > rt->next_id)
        rt->next_id = fresh->next_id;
    if (changed)
        atomic_fetch_add(&rt->installs, 1);
    pthread_rwlock_unlock(&rt->mu);
    fresh->r = NULL, fresh->n = fresh->cap = 0;
    router_free(fresh);
    return 0;
}

uint64_t router_generation(const router *rt)
{
    return atomic_load(&((router *)rt)->installs);
}

void router_share_log(router *rt, pc_engine *e, replicator *repl, struct raft_group *raft)
{
    pthread_rwlock_wrlock(&rt->mu);
    rt->engine = e, rt->repl = repl, rt->raft = raft;
    for (size_t i = 0; i < rt->n; i++)
        rt->r[i]->engine = e, rt->r[i]->repl = repl, rt->r[i]->raft = raft;
    pthread_rwlock_unlock(&rt->mu);
}
