/*
 * read_index.h — a region's read index (Raft's ReadIndex, as TiKV's
 * follower reads use it): the leader confirms it leads (a read barrier)
 * and names how far its store has applied the region's log; a follower
 * whose store has applied the region's log that far holds everything the
 * region committed before it asked. With it comes the floor of the
 * leader's commits in flight, which no copy holds yet. The change feed's
 * fence of regions led by other nodes (follower_fence.h; DESIGN §10).
 */
#ifndef PC_READ_INDEX_H
#define PC_READ_INDEX_H

#include "actions.h"

/* As the leader of key's region (actions.h ACT_READ_INDEX): fenced, then
 * the floor of this node's commits in flight, then its store's applied
 * index of the region's log (in that order: a commit let go of in between
 * was applied before the index was read). PC_NOT_LEADER when this node
 * does not lead it (ready). */
pc_rc read_index_here(svc *s, pc_session *ps, pc_slice key, act_read_index *out);

/* Wait until this store has applied region r's log up to index, at most
 * wait_ms: PC_OK, or PC_UNAVAILABLE (it lags). */
pc_rc read_index_wait(pc_session *ps, const region *r, uint64_t index, unsigned wait_ms);

#endif
