/*
 * pd_live.c — see pd_live.h. Two hash tables by id (open addressing,
 * linear probing; entries are never removed, only overwritten: a region a
 * split replaced keeps its last hint until the process stops, bounded by
 * PD_MAX_REGIONS).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pd_live.h"
#include "pd_map.h"

typedef struct {
    uint64_t id; /* 0: empty */
    pd_live_region v;
} region_slot;

typedef struct {
    uint64_t id;
    pd_live_node v;
} node_slot;

struct pd_live {
    pthread_mutex_t mu;
    region_slot *regions;
    size_t rcap, rn;
    node_slot *nodes;
    size_t ncap, nn;
};

pd_live *pd_live_new(void)
{
    pd_live *l = calloc(1, sizeof *l);
    if (l == NULL || pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        return NULL;
    }
    return l;
}

void pd_live_free(pd_live *l)
{
    if (l == NULL)
        return;
    free(l->regions);
    free(l->nodes);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static size_t slot_of(uint64_t id, size_t cap)
{
    return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
}

/* The slot of id in a table of cap slots of size bytes each, whose first
 * field is the id: its own, or the empty one it would take. */
static void *find(void *table, size_t size, size_t cap, uint64_t id)
{
    for (size_t s = slot_of(id, cap);; s = (s + 1) & (cap - 1)) {
        uint64_t *at = (uint64_t *)((char *)table + s * size);
        if (*at == id || *at == 0)
            return at;
    }
}

/* Room for one more entry (at most half full), up to max entries. */
static bool room(void **table, size_t size, size_t *cap, size_t n, size_t max)
{
    if (2 * (n + 1) <= *cap)
        return true;
    if (n >= max)
        return false;
    size_t c = *cap ? 2 * *cap : 64;
    char *t = calloc(c, size);
    if (t == NULL)
        return false;
    for (size_t i = 0; i < *cap; i++) {
        uint64_t *old = (uint64_t *)((char *)*table + i * size);
        if (*old != 0)
            memcpy(find(t, size, c, *old), old, size);
    }
    free(*table);
    *table = t;
    *cap = c;
    return true;
}

bool pd_live_set_node(pd_live *l, uint64_t node, const pd_live_node *v)
{
    pthread_mutex_lock(&l->mu);
    bool ok = node != 0 && room((void **)&l->nodes, sizeof(node_slot), &l->ncap, l->nn,
                                PD_MAX_NODES);
    if (ok) {
        node_slot *s = find(l->nodes, sizeof *s, l->ncap, node);
        l->nn += s->id == 0;
        *s = (node_slot){.id = node, .v = *v};
    }
    pthread_mutex_unlock(&l->mu);
    return ok;
}

bool pd_live_set_region(pd_live *l, uint64_t region, const pd_live_region *v)
{
    pthread_mutex_lock(&l->mu);
    bool ok = region != 0 && room((void **)&l->regions, sizeof(region_slot), &l->rcap, l->rn,
                                  PD_MAX_REGIONS);
    if (ok) {
        region_slot *s = find(l->regions, sizeof *s, l->rcap, region);
        l->rn += s->id == 0;
        *s = (region_slot){.id = region, .v = *v};
    }
    pthread_mutex_unlock(&l->mu);
    return ok;
}

bool pd_live_get_node(pd_live *l, uint64_t node, pd_live_node *out)
{
    pthread_mutex_lock(&l->mu);
    node_slot *s = l->ncap && node ? find(l->nodes, sizeof *s, l->ncap, node) : NULL;
    bool found = s != NULL && s->id == node;
    if (found)
        *out = s->v;
    pthread_mutex_unlock(&l->mu);
    return found;
}

bool pd_live_get_region(pd_live *l, uint64_t region, pd_live_region *out)
{
    pthread_mutex_lock(&l->mu);
    region_slot *s = l->rcap && region ? find(l->regions, sizeof *s, l->rcap, region) : NULL;
    bool found = s != NULL && s->id == region;
    if (found)
        *out = s->v;
    pthread_mutex_unlock(&l->mu);
    return found;
}

void pd_live_counts(pd_live *l, size_t *regions, size_t *nodes)
{
    pthread_mutex_lock(&l->mu);
    *regions = l->rn;
    *nodes = l->nn;
    pthread_mutex_unlock(&l->mu);
}
