/*
 * notify.c — the notify column (seed 003 "通知"): a hint that an observed
 * key changed. A commit writes key -> commit_ts here, in the same
 * WiredTiger transaction as its write record, when the key is under a
 * prefix some observer watches. It is not Percolator state: observers
 * read it to find dirty keys without scanning the data, and clear it
 * after they acknowledge.
 */
#include <string.h>

#include "internal.h"

pc_rc pc_notify_set_prefixes(pc_engine *e, const pc_slice *prefixes, size_t n)
{
    pc_buf b = {0};

    for (size_t i = 0; i < n; i++) {
        uint8_t len[4] = {(uint8_t)(prefixes[i].len >> 24), (uint8_t)(prefixes[i].len >> 16),
                          (uint8_t)(prefixes[i].len >> 8), (uint8_t)prefixes[i].len};
        if (prefixes[i].len > PC_KEY_MAX || pc_buf_append(&b, len, 4) != PC_OK ||
            pc_buf_append(&b, prefixes[i].data, prefixes[i].len) != PC_OK) {
            pc_buf_free(&b);
            return prefixes[i].len > PC_KEY_MAX ? PC_INVALID : PC_NOMEM;
        }
    }
    pthread_rwlock_wrlock(&e->notify_mu);
    pc_buf_free(&e->notify_prefixes);
    e->notify_prefixes = b;
    e->notify_count = n;
    pthread_rwlock_unlock(&e->notify_mu);
    return PC_OK;
}

static bool observed(pc_engine *e, pc_slice key)
{
    const uint8_t *p = (const uint8_t *)e->notify_prefixes.data;
    size_t off = 0;

    for (size_t i = 0; i < e->notify_count; i++) {
        size_t len = (size_t)p[off] << 24 | (size_t)p[off + 1] << 16 |
                     (size_t)p[off + 2] << 8 | p[off + 3];
        off += 4;
        if (len <= key.len && memcmp(p + off, key.data, len) == 0)
            return true;
        off += len;
    }
    return false;
}

pc_rc pc_notify_mark(pc_session *s, pc_slice key, uint64_t commit_ts)
{
    pc_engine *e = s->e;
    uint8_t ts[8];
    bool mark;

    pthread_rwlock_rdlock(&e->notify_mu);
    mark = e->notify_count > 0 && observed(e, key);
    pthread_rwlock_unlock(&e->notify_mu);
    if (!mark)
        return PC_OK;
    for (int i = 7; i >= 0; i--, commit_ts >>= 8)
        ts[i] = (uint8_t)commit_ts;
    return pc_cursor_put(s, s->notify, key.data, key.len, ts, sizeof(ts));
}
