/*
 * pd_live.h — what the placement driver's leader learns from heartbeats
 * and does not replicate (docs/DESIGN.md §6.3): which node leads each
 * region, its size, and when each node was last heard from. PD keeps
 * these in memory too: a new leader learns them again from the next round
 * of heartbeats, and nothing depends on them but routing hints, which the
 * region's own epoch and leadership checks correct.
 *
 * Any thread; one mutex. Bounded: entries only for registered nodes and
 * for regions the map holds (the caller checks); a table that reaches
 * PD_MAX_REGIONS (PD_MAX_NODES) entries is emptied and learned again.
 */
#ifndef PC_PD_LIVE_H
#define PC_PD_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pd_live pd_live;

typedef struct {
    uint64_t at_ms;      /* monotonic ms of the heartbeat (0: never heard from) */
    uint64_t leaders;    /* regions it reported leading */
    uint64_t bytes;      /* their bytes, as it measured them */
} pd_live_node;

typedef struct {
    uint64_t leader;     /* node id */
    uint64_t term;       /* the Raft term it led in (0: not said) */
    uint64_t bytes, keys;
    uint64_t at_ms;
} pd_live_region;

/* NULL when out of memory. */
pd_live *pd_live_new(void);
void pd_live_free(pd_live *l);

/* Record what a heartbeat said. false: id 0 or out of memory (the hint
 * is then missing; nothing else depends on it). */
bool pd_live_set_node(pd_live *l, uint64_t node, const pd_live_node *v);
/* A region's hint replaces the one held unless that one is of a higher
 * term, from another node, and younger than PD_HINT_STALE_MS: a deposed
 * leader's late heartbeat does not undo its successor's, while a group
 * whose terms started again (re-made, restored) or a node that sends no
 * term (an older version) is followed again after a while. */
#define PD_HINT_STALE_MS 60000
bool pd_live_set_region(pd_live *l, uint64_t region, const pd_live_region *v);

bool pd_live_get_node(pd_live *l, uint64_t node, pd_live_node *out);
bool pd_live_get_region(pd_live *l, uint64_t region, pd_live_region *out);

/* Hints held (regions, nodes). */
void pd_live_counts(pd_live *l, size_t *regions, size_t *nodes);

#endif
