/*
 * rollback.c — abort a transaction's keys: remove start_ts's lock and data
 * and leave a rollback record in the write column at start_ts (TiKV's
 * refinement, DESIGN §3.5), so that a prewrite of start_ts arriving
 * late finds the record and fails instead of locking the key again.
 */
#include "internal.h"

/* The rollback record of start_ts on key, and its data row gone. */
pc_rc pc_put_rollback_record(pc_session *s, pc_slice key, uint64_t start_ts)
{
    uint8_t vk[PC_VKEY_MAX];
    size_t vklen = pc_vkey(vk, key.data, key.len, start_ts);
    pc_write_rec w = {.type = PC_W_ROLLBACK, .start_ts = start_ts};
    pc_rc rc = pc_write_put(s, key, start_ts, &w);
    return rc != PC_OK ? rc : pc_cursor_del(s, s->data, vk, vklen);
}

typedef struct {
    const pc_slice *keys;
    size_t n;
    uint64_t start_ts;
} rollback_args;

/* Roll back one key (shared with check_txn_status). */
pc_rc pc_rollback_key(pc_session *s, pc_slice key, uint64_t start_ts)
{
    pc_lock_rec l;
    pc_write_rec w;
    uint64_t cts;
    pc_rc rc = pc_lock_load(s, key, &l);

    if (rc == PC_OK && l.start_ts == start_ts) {
        if ((rc = pc_cursor_del(s, s->lock, key.data, key.len)) != PC_OK)
            return rc;
        return pc_put_rollback_record(s, key, start_ts);
    }
    if (rc != PC_OK && rc != PC_NOT_FOUND)
        return rc;
    rc = pc_find_txn_write(s, key, start_ts, &w, &cts);
    if (rc == PC_OK)
        return w.type == PC_W_ROLLBACK ? PC_OK : PC_COMMITTED;
    if (rc != PC_NOT_FOUND)
        return rc;
    /* Never prewritten here (or not yet): the record stops it for good. */
    return pc_put_rollback_record(s, key, start_ts);
}

static pc_rc rollback_body(pc_session *s, void *arg)
{
    rollback_args *a = arg;
    pc_rc rc;

    for (size_t i = 0; i < a->n; i++)
        if ((rc = pc_rollback_key(s, a->keys[i], a->start_ts)) != PC_OK)
            return rc;
    return PC_OK;
}

pc_rc pc_rollback(pc_session *s, const pc_slice *keys, size_t n, uint64_t start_ts)
{
    rollback_args a = {keys, n, start_ts};

    if (start_ts == 0 || (keys == NULL && n > 0))
        return PC_INVALID;
    for (size_t i = 0; i < n; i++)
        if (!pc_key_ok(keys[i]))
            return PC_INVALID;
    pc_rc rc = pc_latch_keys(s, keys, n);
    return rc == PC_OK ? pc_run_txn(s, rollback_body, &a) : rc;
}
