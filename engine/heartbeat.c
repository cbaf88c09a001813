/*
 * heartbeat.c — a long commit refreshes the wall time (and TTL) of its
 * primary lock, so that cleaners do not mistake it for a stuck worker
 * (the paper: "the worker periodically updates the wall time").
 */
#include "internal.h"

typedef struct {
    pc_slice primary;
    uint64_t start_ts, wall_ms, ttl_ms;
} heartbeat_args;

static pc_rc heartbeat_body(pc_session *s, void *arg)
{
    heartbeat_args *a = arg;
    pc_lock_rec l;
    pc_write_rec w;
    uint64_t cts;
    pc_rc rc = pc_lock_load(s, a->primary, &l);

    if (rc == PC_OK && l.start_ts == a->start_ts) {
        l.wall_ms = a->wall_ms;
        l.ttl_ms = a->ttl_ms;
        s->scratch.len = 0;
        if ((rc = pc_lock_encode(&s->scratch, &l)) != PC_OK)
            return rc;
        return pc_cursor_put(s, s->lock, a->primary.data, a->primary.len, s->scratch.data,
                             s->scratch.len);
    }
    if (rc != PC_OK && rc != PC_NOT_FOUND)
        return rc;
    rc = pc_find_txn_write(s, a->primary, a->start_ts, &w, &cts);
    if (rc == PC_OK)
        return w.type == PC_W_ROLLBACK ? PC_ROLLED_BACK : PC_COMMITTED;
    return rc == PC_NOT_FOUND ? PC_LOCK_MISSING : rc;
}

pc_rc pc_heartbeat(pc_session *s, pc_slice primary, uint64_t start_ts, uint64_t wall_ms,
                   uint64_t ttl_ms)
{
    heartbeat_args a = {primary, start_ts, wall_ms, ttl_ms};

    if (!pc_key_ok(primary) || start_ts == 0)
        return PC_INVALID;
    pc_rc rc = pc_latch_keys(s, &primary, 1);
    return rc == PC_OK ? pc_run_txn(s, heartbeat_body, &a) : rc;
}
