/*
 * region_fill.h — a member that missed a split makes the new region's
 * replica from a peer's image (--region-logs; docs/DESIGN.md §6.5 step
 * k; the engine's half: pc_region_fill, engine_replica.h).
 *
 * The region maker finds a hole in the store's rows (keys no row covers:
 * this node caught up with a split region's log by an image taken after
 * the split) and asks a peer, over the node network, for the regions in
 * it. The peer answers with an image of the hole's first region if that
 * region's own log applied nothing yet (the state the split left, which
 * every replica's log starts from); the maker installs it, makes it
 * durable, and the next pass starts the region's group as for any split.
 * Both sides' work runs on the maker's thread: a reader thread of the
 * network only keeps what came (one ask a node, one image) and wakes the
 * maker.
 *
 * On the network: records of the group FILL_GROUP, no region's.
 *   ask    on the messages lane: 1, then the hole's start (u32 length,
 *          bytes), whether it has an end (u8), its end (u32 length,
 *          bytes): little-endian
 *   image  on the images lane: a region's image (engine_replica.h)
 */
#ifndef PC_REGION_FILL_H
#define PC_REGION_FILL_H

#include <stdbool.h>
#include <stdint.h>

#include "engine_replica.h"
#include "metrics.h"
#include "raft_group.h"
#include "region.h"

#define FILL_GROUP UINT64_MAX /* the node network's group of fills: no region's id */

typedef struct region_fill region_fill;

/* Join the node network's fill group as member me (one of peers, npeers
 * of them); wake(arg) wakes the maker, from a reader thread. NULL, with
 * why in err. */
region_fill *region_fill_start(struct raft_net *net, const raft_peer *peers, size_t npeers,
                               unsigned me, metrics_registry *metrics, void (*wake)(void *),
                               void *arg, char *err, size_t errlen);
/* Leave the group (no record comes any more) and free what waits. */
void region_fill_stop(region_fill *f);
/* On the maker's thread: install the image that came, if any (logged),
 * and answer each ask that came with images from ps's store. */
void region_fill_serve(region_fill *f, pc_session *ps);
/* On the maker's thread: whether rows, the store's (a router of them),
 * has a hole; if so, a peer is asked about each (the next peer each
 * round; a second after the first round, then twice as long each round,
 * up to 16 s, while a hole stays). */
bool region_fill_holes(region_fill *f, const router *rows);

#endif
