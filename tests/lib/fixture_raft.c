/*
 * fixture_raft.c — see fixture_raft.h.
 */
#include "fixture_raft.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

void tl_fixture_guard(struct raft_fixture *f, unsigned i, raft_io_guard *guard)
{
    struct raft *r = raft_fixture_get(f, i);
    raft_io_guard_init(guard, r->io);
    guard->io.data = r;
    r->io = &guard->io;
}

void tl_fixture_start(struct raft_fixture *f)
{
    struct raft_configuration conf;
    assert_int_equal(raft_fixture_configuration(f, raft_fixture_n(f), &conf), 0);
    assert_int_equal(raft_fixture_bootstrap(f, &conf), 0);
    raft_configuration_close(&conf);
    assert_int_equal(raft_fixture_start(f), 0);
}

const struct raft_entry *tl_entry_at(struct raft *r, raft_index k)
{
    struct raft_log *lg = &r->log;
    size_t n = lg->back >= lg->front ? lg->back - lg->front : lg->size - lg->front + lg->back;
    if (k <= lg->offset || k - lg->offset > n)
        return NULL;
    return &lg->entries[(lg->front + (k - lg->offset - 1)) % lg->size];
}
