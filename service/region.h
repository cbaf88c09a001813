/*
 * region.h — regions and the router (docs/DESIGN.md §6.2).
 *
 * A region is a contiguous range of user keys, [start, end), with the
 * store its rows live in and the replicator that makes its writes
 * durable (replicator.h): a log of one on a single node, a Raft group on
 * a member. TiKV's regions have the same shape (a range, an epoch, a
 * Raft group), and many of them share one node's store, as they share
 * one RocksDB there.
 *
 * The router maps a key to the region that holds it. A service has one
 * region, every key from the empty key on, or the regions its
 * --region-split-keys cut (router_split); today they all share the node's
 * one replicator, and each batch (a prewrite, a commit, a rollback, a GC
 * part, a round of blind writes) is one region's (DESIGN §6.2).
 *
 * The map changes by splits (router_install): a split is a command in the
 * log (the whole new map, a named value of the store: engine_replica.h),
 * so every member installs it at the same index, and the store keeps it
 * across restarts and images (DESIGN §6.2). A region's range never
 * changes: a split puts new regions in the map (the left part keeps the
 * id, both parts get the next epoch) and retires the old one, which stays
 * allocated until router_free. So a region a lookup returned stays valid,
 * perhaps no longer in the map (a stale cut), and lookups hold the
 * router's lock only while they look: never while a caller waits.
 */
#ifndef PC_REGION_H
#define PC_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "replicator.h"

struct raft_group;

typedef struct region {
    uint64_t id;                 /* 1, 2, ...: never reused */
    uint64_t epoch;              /* raised by a change of its range (a split) */
    pc_buf start;                /* the first key in it (empty: the smallest) */
    pc_buf end;                  /* the first key past it; with unbounded, none */
    bool unbounded;              /* it runs to the end of the keyspace */
    pc_engine *engine;           /* the node's store, shared by its regions */
    replicator *repl;            /* how its writes become durable */
    struct raft_group *raft;     /* its Raft group; NULL: the local replicator */
    _Atomic uint64_t nbatches;   /* batches proposed to it (GET /v1/regions) */
    _Atomic uint64_t written;    /* their bytes since its last size check (splits.c) */
    _Atomic int64_t size;        /* its bytes at that check (-1: not measured yet) */
    struct metrics_series *batches; /* the same as a metric; NULL past the metric's series
                                     * limit (METRICS_MAX_SERIES) */
} region;

/* A region [start, end) (end NULL: to the end of the keyspace) with no
 * store or replicator yet; NULL if out of memory or end <= start. */
region *region_new(uint64_t id, const void *start, size_t start_len, const void *end,
                   size_t end_len);
void region_free(region *r);
/* A batch of bytes was proposed to r: counted (nbatches, written, and
 * the metric if any). */
void region_count_batch(region *r, size_t bytes);
/* Whether key is in [start, end). */
bool region_contains(const region *r, const void *key, size_t len);

typedef struct router router;

router *router_new(void);
/* Frees the regions it holds (not their store or replicator: whoever
 * started those stops them first). */
void router_free(router *rt);
/* Hand r to the router: 0, or -1 (r still the caller's) when it overlaps
 * a region held or memory ran out. */
int router_add(router *rt, region *r);
/* The region that holds key; NULL: none does (a gap between regions). */
region *router_find(const router *rt, const void *key, size_t len);
/* The region every key a write batch writes is in (pc_batch_keys): its
 * first key's. NULL when a key is in no region, the batch does not
 * decode, or its keys are in regions with other replicators. Keys of
 * several regions that share the first's replicator (a batch cut before a
 * split) are that region's, with *stale set (may be NULL). A batch that
 * writes no key (a safe point, a timestamp, a region map) is the first
 * region's. */
region *router_find_batch(const router *rt, const void *batch, size_t len, bool *stale);
/* Each region that holds a key of [start, end) (end NULL: to the end of
 * the keyspace), in key order, to fn, called without the router's lock
 * (it may wait); fn returns non-zero to stop. */
void router_each_overlapping(const router *rt, const void *start, size_t slen, const void *end,
                             size_t elen, int (*fn)(void *arg, region *r), void *arg);
/* The regions of a keyspace cut before each of splits[0..n) (engine
 * keys, strictly increasing, none empty): n + 1 regions with ids 1..n+1,
 * the first from the empty key, the last to the end of the keyspace.
 * NULL: the splits are not in order, or memory ran out. */
router *router_split(const pc_buf *splits, size_t n);
/* How many of m[0..n), from m[0] on, lie in m[0]'s region: the longest
 * run a batch of one region may take. n when m[0] is in no region (the
 * batch is then refused as a whole), 0 when n is 0. */
size_t router_run(const router *rt, const pc_mutation *m, size_t n);
/* The regions in key order: count, and the i-th. */
size_t router_count(const router *rt);
region *router_at(const router *rt, size_t i);
/* Take the region with this id out of the map (a hole where it was): it
 * is the caller's (region_free); NULL: none has it. For a router not yet
 * installed (router_adopt's fresh): a lookup may hold a region of the map. */
region *router_take(router *rt, uint64_t id);
/* Whether a region of the map (not a retired one) has this id. */
bool router_has_id(const router *rt, uint64_t id);
/* The regions in key order as an array of their own (free it; the
 * regions stay the router's), in *out: their number, 0 and NULL when
 * memory ran out. */
size_t router_list(const router *rt, region ***out);

/* Every region's store and replicator, and those of each region a split
 * makes from now on (today a node's regions share its one log: DESIGN
 * §6.2); all NULL at stop, once the replicator stopped. */
void router_share_log(router *rt, pc_engine *e, replicator *repl, struct raft_group *raft);

/* ---- the region map: what a split proposes and the store keeps ----
 * Bytes: "pcR1", the next region id (u64), the number of regions (u32),
 * then per region in key order its id (u64), epoch (u64) and start key
 * (u32 length, bytes); each ends where the next starts, the last at the
 * end of the keyspace, the first starts at the empty key. Big-endian. */
#define ROUTER_MAP_NAME "regions"   /* its name among the store's named values */
#define ROUTER_MAX_REGIONS 4096
/* The router's map as bytes, into out (emptied first): 0, -1 no memory. */
int router_encode(const router *rt, pc_buf *out);
/* A router holding the map (new regions: no store or replicator yet);
 * NULL when the bytes are not a well-formed map (ids unique and below the
 * next id, epochs >= 1, starts increasing, at most ROUTER_MAX_REGIONS)
 * or memory ran out. */
router *router_decode(const void *map, size_t len);
/* The id the next split gives its right part unless told another: above
 * every id the map ever held. */
uint64_t router_next_id(const router *rt);
/* The map with the region holding key split before key, into out: the
 * left part keeps its id, the right gets new_id (at least
 * router_next_id: one the placement driver handed out) or, with 0, the
 * next id; both the next epoch. 0; -1 with why in err: key is empty or a
 * region's start already, the map is full, new_id is below the next id,
 * memory ran out. With out NULL, only whether the split would be made. */
int router_split_map(const router *rt, const void *key, size_t len, uint64_t new_id, pc_buf *out,
                     char *err,
                     size_t errlen);
/* Make the map rt's: its regions that are in rt already (same id, epoch
 * and range) stay; each other one is new, handed to made (to give it its
 * store and replicator) before it is put in; the regions no longer in the
 * map are retired (freed by router_free). The new regions carry the batch
 * counts of those with their id, and the shared log (router_share_log). 0; -1 (rt unchanged) when the map does
 * not decode or memory ran out. */
int router_install(router *rt, const void *map, size_t len, void (*made)(void *arg, region *r),
                   void *arg);
/* The same with the regions of fresh (a router of new regions, gaps
 * allowed; taken, and freed, whatever the outcome): a region that keeps
 * an id keeps its store, replicator and group (the left part of a split),
 * a new one keeps those it was given, or takes the shared log's. */
int router_adopt(router *rt, router *fresh, void (*made)(void *arg, region *r), void *arg);
/* How many maps were installed: it only grows, and changes with every
 * change of the map (a key may have moved to another region's log); an
 * install of the map it holds already does not count. */
uint64_t router_generation(const router *rt);

#endif
