/*
 * pd_live.c — see pd_live.h. One hash table type keyed by id (open
 * addressing, linear probing, at most half full), used twice: the region
 * hints and the node hints. Entries are overwritten, never removed one by
 * one: a region a split replaced keeps its last hint. When a table holds
 * its maximum and a new id comes, it is emptied: every hint is learned
 * again from the next round of heartbeats, and nothing but routing hints
 * depends on them.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pd_live.h"
#include "pd_map.h"

/* cap slots of size bytes each: an id (0: empty), then the value. */
typedef struct {
    char *slots;
    size_t size, cap, n, max;
} table;

struct pd_live {
    pthread_mutex_t mu;
    table regions, nodes;
};

pd_live *pd_live_new(void)
{
    pd_live *l = calloc(1, sizeof *l);
    if (l == NULL || pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        return NULL;
    }
    l->regions = (table){.size = sizeof(uint64_t) + sizeof(pd_live_region), .max = PD_MAX_REGIONS};
    l->nodes = (table){.size = sizeof(uint64_t) + sizeof(pd_live_node), .max = PD_MAX_NODES};
    return l;
}

void pd_live_free(pd_live *l)
{
    if (l == NULL)
        return;
    free(l->regions.slots);
    free(l->nodes.slots);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* The slot of id in t's slots (cap a power of two): its own, or the empty
 * one it would take. */
static char *find(char *slots, size_t size, size_t cap, uint64_t id)
{
    size_t s = (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
    for (;; s = (s + 1) & (cap - 1)) {
        char *at = slots + s * size;
        uint64_t got;
        memcpy(&got, at, sizeof got);
        if (got == id || got == 0)
            return at;
    }
}

/* Room for one more entry: the table doubled when half full, emptied when
 * it holds its maximum. false: out of memory. */
static bool make_room(table *t)
{
    if (t->n >= t->max) {
        memset(t->slots, 0, t->cap * t->size);
        t->n = 0;
    }
    if (2 * (t->n + 1) <= t->cap)
        return true;
    size_t cap = t->cap ? 2 * t->cap : 64;
    char *slots = calloc(cap, t->size);
    if (slots == NULL)
        return false;
    for (size_t i = 0; i < t->cap; i++) {
        char *old = t->slots + i * t->size;
        uint64_t id;
        memcpy(&id, old, sizeof id);
        if (id != 0)
            memcpy(find(slots, t->size, cap, id), old, t->size);
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return true;
}

/* Whether a region hint v may replace the one held. */
static bool region_newer(const void *held, const void *v)
{
    const pd_live_region *a = held, *b = v;
    return b->term >= a->term || b->leader == a->leader || b->at_ms > a->at_ms + PD_HINT_STALE_MS;
}

/* Set id's value to v, unless newer (when given) says the held one stays:
 * then true too, nothing changed. */
static bool table_set(pd_live *l, table *t, uint64_t id, const void *v,
                      bool (*newer)(const void *held, const void *v))
{
    if (id == 0)
        return false;
    pthread_mutex_lock(&l->mu);
    char *at = t->cap ? find(t->slots, t->size, t->cap, id) : NULL;
    uint64_t got = 0;
    if (at != NULL)
        memcpy(&got, at, sizeof got);
    bool ok = got == id; /* an existing entry is overwritten in place */
    if (ok && newer != NULL && !newer(at + sizeof id, v)) {
        pthread_mutex_unlock(&l->mu);
        return true;
    }
    if (!ok && make_room(t)) {
        at = find(t->slots, t->size, t->cap, id);
        memcpy(at, &id, sizeof id);
        t->n++;
        ok = true;
    }
    if (ok)
        memcpy(at + sizeof id, v, t->size - sizeof id);
    pthread_mutex_unlock(&l->mu);
    return ok;
}

static bool table_get(pd_live *l, table *t, uint64_t id, void *out)
{
    pthread_mutex_lock(&l->mu);
    char *at = t->cap && id ? find(t->slots, t->size, t->cap, id) : NULL;
    uint64_t got = 0;
    if (at != NULL)
        memcpy(&got, at, sizeof got);
    bool found = at != NULL && got == id;
    if (found)
        memcpy(out, at + sizeof id, t->size - sizeof id);
    pthread_mutex_unlock(&l->mu);
    return found;
}

bool pd_live_set_node(pd_live *l, uint64_t node, const pd_live_node *v)
{
    return table_set(l, &l->nodes, node, v, NULL);
}

bool pd_live_set_region(pd_live *l, uint64_t region, const pd_live_region *v)
{
    return table_set(l, &l->regions, region, v, region_newer);
}

bool pd_live_get_node(pd_live *l, uint64_t node, pd_live_node *out)
{
    return table_get(l, &l->nodes, node, out);
}

bool pd_live_get_region(pd_live *l, uint64_t region, pd_live_region *out)
{
    return table_get(l, &l->regions, region, out);
}

void pd_live_counts(pd_live *l, size_t *regions, size_t *nodes)
{
    pthread_mutex_lock(&l->mu);
    *regions = l->regions.n;
    *nodes = l->nodes.n;
    pthread_mutex_unlock(&l->mu);
}
