/*
 * fixture_raft.h — helpers for the tests that run libraft 0.15's in-memory
 * fixture (raft/fixture.h): the product's raft_io guard put between a
 * member and the fixture's I/O, a group bootstrapped and started, and a
 * look into a member's in-memory log.
 */
#ifndef PC_TL_FIXTURE_RAFT_H
#define PC_TL_FIXTURE_RAFT_H

#include <raft.h>
#include <raft/fixture.h>

#include "raft_io_guard.h"

/* Put guard between fixture member i's raft and its I/O, as the product
 * does (common/raft_io_guard.h; DESIGN §7.1). */
void tl_fixture_guard(struct raft_fixture *f, unsigned i, raft_io_guard *guard);

/* Bootstrap every member of f as voters of one configuration and start
 * them (the test fails if libraft refuses). */
void tl_fixture_start(struct raft_fixture *f);

/* Entry k of r's in-memory log; NULL when not there (or compacted). */
const struct raft_entry *tl_entry_at(struct raft *r, raft_index k);

#endif
