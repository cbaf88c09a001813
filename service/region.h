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
 * Lifecycle: regions are made and added at start (svc_open) and freed by
 * router_free at stop; between the two the set does not change (splits,
 * which would change it under a lock, do not exist yet), so lookups take
 * no lock.
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
    uint64_t epoch;              /* raised by a change of its range (none yet) */
    pc_buf start;                /* the first key in it (empty: the smallest) */
    pc_buf end;                  /* the first key past it; with unbounded, none */
    bool unbounded;              /* it runs to the end of the keyspace */
    pc_engine *engine;           /* the node's store, shared by its regions */
    replicator *repl;            /* how its writes become durable */
    struct raft_group *raft;     /* its Raft group; NULL: the local replicator */
    _Atomic uint64_t nbatches;   /* batches proposed to it (GET /v1/regions) */
    struct metrics_series *batches; /* the same as a metric; NULL past the metric's series
                                     * limit (METRICS_MAX_SERIES) */
} region;

/* A region [start, end) (end NULL: to the end of the keyspace) with no
 * store or replicator yet; NULL if out of memory or end <= start. */
region *region_new(uint64_t id, const void *start, size_t start_len, const void *end,
                   size_t end_len);
void region_free(region *r);
/* A batch was proposed to r: counted (nbatches, and the metric if any). */
void region_count_batch(region *r);
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
/* The region every key a write batch writes is in (pc_batch_keys); NULL
 * when they are in more than one region, in none, or the batch does not
 * decode. A batch that writes no key (a safe point, a timestamp) is the
 * first region's. */
region *router_find_batch(const router *rt, const void *batch, size_t len);
/* Each region that holds a key of [start, end) (end NULL: to the end of
 * the keyspace), in key order, to fn; fn returns non-zero to stop. */
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

#endif
