/*
 * pd_map.h — the placement driver's replicated state (docs/DESIGN.md
 * §6.3): the service nodes of the cluster and the region map, kept by the
 * oracle group beside its timestamp mark, as TiKV's PD keeps them beside
 * its TSO.
 *
 * Every member applies the same commands in the same order (the oracle's
 * Raft log, oracle/raft_fsm.c), so every member holds the same map. The
 * commands:
 *
 *   node   "register the service node at this address": its id (the one
 *          it had if the address is known, else the next id);
 *   ids    "hand out n ids": the first of n fresh ids (region ids for
 *          splits); nodes and regions share the one counter, as in PD;
 *   regions "these regions, as their leaders saw them": each is taken if
 *          its epoch is newer than every region it overlaps, which are then
 *          dropped (PD's rule: a region's own log decides its range, the
 *          map only follows the newest report), else it is stale and left;
 *          the id counter passes every id taken.
 *
 * A command that does not decode, or breaks a limit below (PD_MAX_MAP_BYTES
 * is the whole map's), changes nothing
 * on any member (each sees the same bytes and the same state). A member
 * that runs out of memory applying one stops (abort) rather than differ. This file
 * knows nothing of Raft or HTTP: bytes in, state and bytes out.
 *
 * Threads: one writer (the loop thread, applying), readers on any thread
 * (the HTTP handlers); the map's rwlock keeps them apart.
 */
#ifndef PC_PD_MAP_H
#define PC_PD_MAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define PD_MAX_NODES 10000       /* service nodes */
#define PD_MAX_REGIONS 1000000   /* regions in the map */
#define PD_MAX_REPORT 10000      /* regions in one command */
#define PD_MAX_REPLICAS 7        /* replicas of one region */
#define PD_MAX_KEY 8192          /* bytes of a region bound: a node's own keys (the
                                    service's: a prefix byte and a user key of up to
                                    4,096 bytes), with room */
#define PD_ADDR_MAX 256          /* bytes of a node's address, NUL included */
#define PD_MAX_IDS 100000        /* ids handed out by one command */
#define PD_MAX_ID ((UINT64_C(1) << 53) - 1) /* JSON-safe */
#define PD_MAX_MAP_BYTES (UINT64_C(256) << 20) /* region bounds in the map, summed: 1,000,000
                                                  regions at 268 bytes a pair of bounds */

/* One region as the map holds it and commands carry it. end_len 0: the
 * region runs to the end of the keyspace. */
typedef struct {
    uint64_t id;
    uint64_t version;            /* bumped by every split (TiKV's epoch version) */
    uint64_t conf_ver;           /* bumped by every replica change (its conf_ver) */
    uint32_t start_len, end_len;
    uint32_t nreplicas;
    uint64_t replicas[PD_MAX_REPLICAS]; /* node ids */
    uint8_t *start, *end;        /* owned by the region */
} pd_region;

typedef struct {
    uint64_t id;
    char addr[PD_ADDR_MAX];
} pd_node;

typedef struct pd_map pd_map;

/* NULL when out of memory. */
pd_map *pd_map_new(void);
/* The same with another budget for the bounds than PD_MAX_MAP_BYTES (for
 * tests: every member of a group must apply the same limits). */
pd_map *pd_map_new_limited(uint64_t max_bound_bytes);
void pd_map_free(pd_map *m);

/* ---- commands (made by the leader, applied by every member) ---- */

/* The command bytes, appended to out after the caller's tag. 0, or -1
 * when out of memory or the input breaks a limit (the reason in err). */
int pd_cmd_node(buf *out, const char *addr, char *err, size_t errlen);
int pd_cmd_ids(buf *out, uint64_t count, char *err, size_t errlen);
int pd_cmd_regions(buf *out, const pd_region *regions, size_t n, char *err, size_t errlen);

/* What applying gave: node: its id; ids: the first; regions: how many it
 * took. 0: refused (malformed, a limit, out of memory) or, for regions,
 * nothing taken. Loop thread. */
uint64_t pd_apply_node(pd_map *m, const uint8_t *p, size_t len);
uint64_t pd_apply_ids(pd_map *m, const uint8_t *p, size_t len);
uint64_t pd_apply_regions(pd_map *m, const uint8_t *p, size_t len);
/* Whether applying a regions command (pd_cmd_regions' bytes) to the map
 * as it is now would take any of its regions: what the leader asks before
 * it spends a Raft round on a report (any thread; the map may change
 * before the command is applied, which decides). */
bool pd_map_would_take(pd_map *m, const uint8_t *p, size_t len);

/* ---- images ---- */

/* The whole map appended to out. 0 or -1 (out of memory). */
int pd_map_encode(pd_map *m, buf *out);
/* Replace the map by an image's. 0, or -1 when it does not decode (the
 * map is then unchanged). */
int pd_map_restore(pd_map *m, const uint8_t *p, size_t len);

/* ---- readers (any thread) ---- */

typedef struct {
    uint64_t next_id;
    size_t nodes, regions;
    uint64_t bound_bytes;        /* the regions' bounds, summed */
} pd_counts;
void pd_map_counts(pd_map *m, pd_counts *out);

/* The region holding key into out (a copy the caller frees with
 * pd_region_clear): 1, 0 when no region holds it, -1 out of memory. */
int pd_map_find(pd_map *m, const uint8_t *key, size_t len, pd_region *out);
/* Call fn on up to limit regions in key order, from the one holding from
 * (or the first after it), under the read lock (fn must be quick and must
 * not call the map). How many it called fn on. */
size_t pd_map_each(pd_map *m, const uint8_t *from, size_t len, size_t limit,
                   void (*fn)(void *arg, const pd_region *r), void *arg);
/* Call fn on every node, in id order, under the read lock. */
void pd_map_each_node(pd_map *m, void (*fn)(void *arg, const pd_node *n), void *arg);
/* Whether the node id is registered (its address into addr, if not NULL). */
bool pd_map_node(pd_map *m, uint64_t id, char addr[PD_ADDR_MAX]);
/* What the map makes of a reported region, without a Raft round. */
typedef enum {
    PD_HELD,     /* held exactly (same id, epoch, bounds and replicas): a
                    report that would change nothing, not proposed */
    PD_OUTDATED, /* its id held at its epoch or a newer one, otherwise: one
                    the map would not take (a stale report, or the same
                    epoch with other bounds or replicas), not proposed */
    PD_CHANGED,  /* anything else: proposed, unless pd_map_would_take says
                    the command takes none of them (the apply decides) */
} pd_verdict;
/* The verdict on each of rs[0..n) into out[0..n), all under one read
 * lock; how many are held. */
size_t pd_map_classify(pd_map *m, const pd_region *rs, size_t n, pd_verdict *out);
/* Whether the map holds r exactly (PD_HELD). */
bool pd_map_holds(pd_map *m, const pd_region *r);

/* Copy src into dst (bounds duplicated). 0 or -1 (out of memory). */
int pd_region_copy(pd_region *dst, const pd_region *src);
void pd_region_clear(pd_region *r);
/* Whether a and b are the same region: id, epoch, bounds and replicas. */
bool pd_region_equal(const pd_region *a, const pd_region *b);
/* Whether r is well formed: an id, start < end (or no end), bounds and
 * replicas within the limits. */
bool pd_region_valid(const pd_region *r);

#endif
