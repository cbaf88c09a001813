/*
 * range_size.c — how many bytes the rows of a range of user keys take in
 * the versioned tables, and a key near their middle: what decides a
 * region's split (docs/DESIGN.md §6.2; TiKV's split check scans a region
 * for its size and its middle key the same way). Keys and values of the
 * data and write tables count; the lock and notify tables hold transient
 * rows and do not. One snapshot, read only: two walks of the write table
 * (the total, then the key at half of it) and one of the data table.
 */
#include <string.h>

#include "engine_admin.h"
#include "internal.h"

typedef struct {
    pc_slice start, end;      /* end.data NULL: to the end */
    pc_range_stats *st;
} size_args;

/* One table's walk over the range by user key: the key its cursor is on
 * (live false: past the range's end, or the table's). */
typedef struct {
    WT_CURSOR *c;
    bool live;
    uint8_t key[PC_KEY_MAX];
    size_t len;
} side;

/* The user key of the row s->c is on into sd, or not live (rc PC_NOT_FOUND
 * from the cursor's move: the table's end). */
static pc_rc side_at(pc_session *s, size_args *a, side *sd, pc_rc moved)
{
    WT_ITEM k;
    uint64_t ts;
    int ret;
    sd->live = false;
    if (moved != PC_OK)
        return moved == PC_NOT_FOUND ? PC_OK : moved;
    if ((ret = sd->c->get_key(sd->c, &k)) != 0)
        return pc_wt_error(s, ret, "get_key");
    if (pc_vkey_decode(k.data, k.size, sd->key, &sd->len, &ts) != 0)
        return PC_ERROR;
    sd->live = a->end.data == NULL || pc_key_cmp(sd->key, sd->len, a->end.data, a->end.len) < 0;
    return PC_OK;
}

static pc_rc side_start(pc_session *s, size_args *a, side *sd, WT_CURSOR *c)
{
    uint8_t ek[PC_EKEY_MAX];
    sd->c = c;
    return side_at(s, a, sd, pc_cursor_seek_ge(s, c, ek, pc_ekey(ek, a->start.data, a->start.len)));
}

/* The bytes of sd's rows of its key (key and value), added to *bytes;
 * sd is then on the next key. */
static pc_rc side_take(pc_session *s, size_args *a, side *sd, uint64_t *bytes)
{
    uint8_t key[PC_KEY_MAX];
    size_t len = sd->len;
    memcpy(key, sd->key, len);
    while (sd->live && pc_key_cmp(sd->key, sd->len, key, len) == 0) {
        WT_ITEM k, v;
        int ret;
        if ((ret = sd->c->get_key(sd->c, &k)) != 0 || (ret = sd->c->get_value(sd->c, &v)) != 0)
            return pc_wt_error(s, ret, "cursor get");
        *bytes += k.size + v.size;
        ret = sd->c->next(sd->c);
        pc_rc rc = side_at(s, a, sd, ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next"));
        if (rc != PC_OK)
            return rc;
    }
    return PC_OK;
}

/* Both tables in key order, a user key at a time: each key's bytes from
 * both, counted. With half > 0 it stops at the key whose rows take the
 * count past half (or the one after, when that is the range's first key),
 * into st->middle: the right part of a split starts there. */
static pc_rc walk(pc_session *s, size_args *a, uint64_t half)
{
    pc_range_stats *st = a->st;
    side w, d;
    uint8_t key[PC_KEY_MAX];
    pc_rc rc = side_start(s, a, &w, s->write);
    if (rc == PC_OK)
        rc = side_start(s, a, &d, s->data);
    uint64_t bytes = 0, keys = 0;
    bool next_is_it = false;
    while (rc == PC_OK && (w.live || d.live)) {
        /* The smaller key of the two sides; both take it if both are on it. */
        int c = !w.live ? 1 : !d.live ? -1 : pc_key_cmp(w.key, w.len, d.key, d.len);
        side *at = c <= 0 ? &w : &d;
        size_t len = at->len;
        memcpy(key, at->key, len);
        if (next_is_it)
            return pc_buf_append(&st->middle, key, len) == PC_OK ? PC_OK : PC_NOMEM;
        uint64_t before = keys;
        keys += c <= 0; /* a key with a write row: committed */
        if (c <= 0)
            rc = side_take(s, a, &w, &bytes);
        if (rc == PC_OK && c >= 0)
            rc = side_take(s, a, &d, &bytes);
        if (rc == PC_OK && half > 0 && bytes > half) {
            if (before == 0) {
                next_is_it = true; /* the first key alone: split after it */
                continue;
            }
            return pc_buf_append(&st->middle, key, len) == PC_OK ? PC_OK : PC_NOMEM;
        }
    }
    if (half == 0) {
        st->bytes = bytes;
        st->keys = keys;
    }
    return rc;
}

static pc_rc size_body(pc_session *s, void *arg)
{
    size_args *a = arg;
    pc_range_stats *st = a->st;
    st->bytes = st->keys = 0; /* a retried transaction starts over */
    st->middle.len = 0;
    pc_rc rc = walk(s, a, 0);
    if (rc == PC_OK && st->keys > 1)
        rc = walk(s, a, st->bytes / 2);
    WT_CURSOR *used[] = {s->write, s->data};
    for (size_t i = 0; i < 2; i++) {
        int ret = used[i]->reset(used[i]);
        if (ret != 0 && rc == PC_OK)
            rc = pc_wt_error(s, ret, "cursor reset");
    }
    return rc;
}

pc_rc pc_range_size(pc_session *s, pc_slice start, pc_slice end, pc_range_stats *st)
{
    if (st == NULL || (start.data == NULL && start.len > 0) || s->propose != NULL)
        return PC_INVALID;
    size_args a = {start.data != NULL ? start : (pc_slice){"", 0}, end, st};
    return pc_run_txn(s, size_body, &a);
}
