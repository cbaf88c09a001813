/*
 * key_range.c — a range of user keys over the four replicated tables, as a
 * region's image reads and replaces it (image.c, apply.c; docs/DESIGN.md
 * §6.5 step 3). The lock and notify tables are keyed by the user key
 * itself; data and write by its versioned encoding (keys.c), which sorts
 * like the user key and is no other's prefix: the rows of user keys in
 * [start, end) are those from the encoding of start up to, not including,
 * the encoding of end.
 */
#include "internal.h"

/* Whether table's row key (a user key, or a versioned one) is in r. */
bool pc_range_has(const pc_key_range *r, int table, const void *key, size_t len)
{
    uint8_t user[PC_KEY_MAX];
    uint64_t ts;
    if (table == PC_TABLE_DATA || table == PC_TABLE_WRITE) {
        if (pc_vkey_decode(key, len, user, &len, &ts) != 0)
            return false;
        key = user;
    }
    return pc_key_cmp(key, len, r->start.data, r->start.len) >= 0 &&
           (r->end.data == NULL || pc_key_cmp(key, len, r->end.data, r->end.len) < 0);
}

bool pc_range_ok(const pc_key_range *r)
{
    return r->start.len <= PC_KEY_MAX && (r->start.data != NULL || r->start.len == 0) &&
           (r->end.data == NULL || r->end.len <= PC_KEY_MAX);
}

pc_rc pc_range_seek(pc_session *s, WT_CURSOR *c, int table, const pc_key_range *r)
{
    uint8_t ek[PC_EKEY_MAX];
    int ret;
    if (table == PC_TABLE_DATA || table == PC_TABLE_WRITE)
        return pc_cursor_seek_ge(s, c, ek, pc_ekey(ek, r->start.data, r->start.len));
    if (r->start.len > 0)
        return pc_cursor_seek_ge(s, c, r->start.data, r->start.len);
    /* from the empty key, which WiredTiger does not search for: the first row */
    if ((ret = c->reset(c)) != 0 || (ret = c->next(c)) != 0)
        return pc_wt_error(s, ret, "cursor next");
    return PC_OK;
}
