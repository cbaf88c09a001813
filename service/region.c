/*
 * region.c — regions and the router (region.h): a sorted array of
 * disjoint ranges, searched by binary search.
 */
#include "region.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "metrics.h"
#include <string.h>

struct router {
    region **r; /* sorted by start; disjoint */
    size_t n, cap;
};

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

void region_count_batch(region *r)
{
    atomic_fetch_add(&r->nbatches, 1);
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
    return calloc(1, sizeof(router));
}

void router_free(router *rt)
{
    if (rt == NULL)
        return;
    for (size_t i = 0; i < rt->n; i++)
        region_free(rt->r[i]);
    free(rt->r);
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

region *router_find(const router *rt, const void *key, size_t len)
{
    size_t i = first_ending_after(rt, key, len);
    return i < rt->n && place(rt->r[i], key, len) == 0 ? rt->r[i] : NULL;
}

void router_each_overlapping(const router *rt, const void *start, size_t slen, const void *end,
                             size_t elen, int (*fn)(void *arg, region *r), void *arg)
{
    /* From the first region ending past start, while they begin before end. */
    for (size_t i = first_ending_after(rt, start, slen); i < rt->n; i++) {
        region *r = rt->r[i];
        if (end != NULL && pc_key_cmp(r->start.data, r->start.len, end, elen) >= 0)
            break;
        if (fn(arg, r) != 0)
            break;
    }
}

typedef struct {
    const router *rt;
    region *found;
    bool mixed;
} batch_route;

static int route_key(void *arg, const void *key, size_t len)
{
    batch_route *b = arg;
    if (b->found != NULL && region_contains(b->found, key, len))
        return 0; /* the usual case: the region of the keys before */
    region *r = router_find(b->rt, key, len);
    if (r == NULL || b->found != NULL) {
        b->mixed = true;
        return 1;
    }
    b->found = r;
    return 0;
}

region *router_find_batch(const router *rt, const void *batch, size_t len)
{
    batch_route b = {rt, NULL, false};
    if (pc_batch_keys(batch, len, route_key, &b) != PC_OK || b.mixed)
        return NULL;
    return b.found != NULL ? b.found : rt->n > 0 ? rt->r[0] : NULL;
}

size_t router_count(const router *rt)
{
    return rt->n;
}

region *router_at(const router *rt, size_t i)
{
    return i < rt->n ? rt->r[i] : NULL;
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
    region *r = router_find(rt, m[0].key.data, m[0].key.len);
    if (r == NULL)
        return n;
    size_t k = 1;
    while (k < n && region_contains(r, m[k].key.data, m[k].key.len))
        k++;
    return k;
}
