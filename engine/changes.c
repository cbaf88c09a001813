/*
 * changes.c — the committed changes of the store, for a change feed
 * (docs/DESIGN.md §10): the changes of a key range between two
 * timestamps read back from the write table, a long value, and the
 * resolved timestamp below which no change can still appear. What a
 * write batch commits is batch_changes.c's.
 *
 * A change is a put or a delete: a write record of type put or delete at
 * commit_ts (rollback records are not changes). Its value is in the write
 * record when it is short (TiKV's short value, DESIGN §3.1), else in the
 * data table at (key, start_ts), where pc_change_value finds it.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- a put's long value ---- */

typedef struct {
    pc_slice key;
    uint64_t start_ts;
    pc_buf *out;
} value_args;

static pc_rc value_body(pc_session *s, void *arg)
{
    value_args *a = arg;
    uint8_t vk[PC_VKEY_MAX];
    WT_ITEM v;
    size_t n = pc_vkey(vk, a->key.data, a->key.len, a->start_ts);
    pc_rc rc = pc_cursor_get(s, s->data, vk, n, &v);
    return rc == PC_OK ? pc_buf_append(a->out, v.data, v.size) : rc;
}

pc_rc pc_change_value(pc_session *s, pc_slice key, uint64_t start_ts, pc_buf *out)
{
    value_args a = {key, start_ts, out};
    if (!pc_key_ok(key))
        return PC_INVALID;
    return pc_run_txn(s, value_body, &a);
}

/* ---- the changes of a range between two timestamps ---- */

/* A change found by the scan: its bytes at offsets into the arena until
 * the answer is finished (the arena moves as it grows). */
typedef struct {
    uint64_t commit_ts, start_ts;
    size_t koff, klen, voff, vlen;
    pc_op op;
    bool has_value;
} found;

typedef struct {
    pc_slice start, end;
    uint64_t after, upto, asked;  /* upto: lowered by trims from asked */
    size_t limit;
    found *v;
    size_t n, cap;
    size_t kept;                  /* what the last trim kept */
    pc_buf arena;
} scan_args;

static int by_commit(const void *x, const void *y)
{
    const found *a = x, *b = y;
    return a->commit_ts < b->commit_ts ? -1 : a->commit_ts > b->commit_ts;
}

/* Keep the changes of the smallest commit timestamps: every change at or
 * below the limit-th smallest (a commit's changes are never split), and
 * lower upto to it; the arena is rebuilt with the kept bytes only. */
static pc_rc trim(scan_args *a)
{
    pc_buf arena = {0};
    qsort(a->v, a->n, sizeof(*a->v), by_commit);
    uint64_t cut = a->v[a->limit - 1].commit_ts;
    size_t k = a->limit;
    while (k < a->n && a->v[k].commit_ts == cut)
        k++;
    for (size_t i = 0; i < k; i++) {
        size_t koff = arena.len;
        if (pc_buf_append(&arena, a->arena.data + a->v[i].koff, a->v[i].klen) != PC_OK ||
            pc_buf_append(&arena, a->arena.data + a->v[i].voff, a->v[i].vlen) != PC_OK) {
            pc_buf_free(&arena);
            return PC_NOMEM;
        }
        a->v[i].koff = koff;
        a->v[i].voff = koff + a->v[i].klen;
    }
    pc_buf_free(&a->arena);
    a->arena = arena;
    a->n = a->kept = k;
    a->upto = cut;
    return PC_OK;
}

static pc_rc add_found(scan_args *a, const pc_change *c)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        found *v = realloc(a->v, cap * sizeof(*v));
        if (v == NULL)
            return PC_NOMEM;
        a->v = v;
        a->cap = cap;
    }
    found *f = &a->v[a->n];
    *f = (found){c->commit_ts, c->start_ts, a->arena.len, c->key.len, 0, 0, c->op,
                 c->has_value};
    if (pc_buf_append(&a->arena, c->key.data, c->key.len) != PC_OK)
        return PC_NOMEM;
    f->voff = a->arena.len;
    f->vlen = c->has_value ? c->value.len : 0;
    if (pc_buf_append(&a->arena, c->value.data, f->vlen) != PC_OK)
        return PC_NOMEM;
    a->n++;
    /* Twice the limit (and twice what the last trim had to keep): trim. */
    if (a->n >= 2 * a->limit && a->n >= 2 * a->kept)
        return trim(a);
    return PC_OK;
}

static pc_rc changes_body(pc_session *s, void *arg)
{
    scan_args *a = arg;
    static _Thread_local uint8_t key[PC_KEY_MAX];
    uint8_t ek[PC_EKEY_MAX];
    WT_CURSOR *c = s->write;
    WT_ITEM k, v;
    int ret;

    a->n = a->kept = 0; /* a retried transaction starts over */
    a->arena.len = 0;
    a->upto = a->asked;
    pc_rc rc = pc_cursor_seek_ge(s, c, ek, pc_ekey(ek, a->start.data, a->start.len));
    while (rc == PC_OK) {
        pc_change ch;
        if ((ret = c->get_key(c, &k)) != 0 || (ret = c->get_value(c, &v)) != 0)
            return pc_wt_error(s, ret, "write cursor");
        int is_change = pc_change_of(k.data, k.size, v.data, v.size, key, &ch);
        if (is_change < 0) {
            pc_log(s->e, PC_LOG_ERROR, "corrupt write record (%zu bytes)", v.size);
            return PC_ERROR;
        }
        if (a->end.len > 0 && pc_key_cmp(ch.key.data, ch.key.len, a->end.data, a->end.len) >= 0)
            break;
        if (is_change == 1 && ch.commit_ts > a->after && ch.commit_ts <= a->upto &&
            (rc = add_found(a, &ch)) != PC_OK)
            return rc;
        ret = c->next(c);
        rc = ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor next");
    }
    return rc == PC_NOT_FOUND ? PC_OK : rc;
}

void pc_changes_free(pc_changes *out)
{
    free(out->v);
    out->v = NULL;
    out->n = 0;
    pc_buf_free(&out->arena);
}

pc_rc pc_changes_scan(pc_session *s, pc_slice start, pc_slice end, uint64_t after,
                      uint64_t upto, size_t limit, pc_changes *out)
{
    scan_args a = {start, end, after, upto, upto, limit, NULL, 0, 0, 0, {0}};
    pc_rc rc;

    *out = (pc_changes){0};
    if (limit == 0 || start.len > PC_KEY_MAX || end.len > PC_KEY_MAX)
        return PC_INVALID;
    if (after >= upto) {
        out->upto = upto;
        return PC_OK;
    }
    if ((rc = pc_run_txn(s, changes_body, &a)) == PC_OK && a.n > limit)
        rc = trim(&a);
    if (rc != PC_OK) {
        free(a.v);
        pc_buf_free(&a.arena);
        return rc;
    }
    /* Commit order; within a commit, key order (qsort is not stable). */
    if (a.n > 1)
        qsort(a.v, a.n, sizeof(*a.v), by_commit);
    if ((out->v = calloc(a.n ? a.n : 1, sizeof(*out->v))) == NULL) {
        free(a.v);
        pc_buf_free(&a.arena);
        return PC_NOMEM;
    }
    out->arena = a.arena;
    for (size_t i = 0; i < a.n; i++) {
        const found *f = &a.v[i];
        out->v[i] = (pc_change){
            .key = {out->arena.data + f->koff, f->klen},
            .commit_ts = f->commit_ts,
            .start_ts = f->start_ts,
            .op = f->op,
            .has_value = f->has_value,
            .value = {out->arena.data + f->voff, f->vlen},
        };
    }
    for (size_t i = 1; i < a.n; i++) { /* insertion: runs of one commit are short */
        pc_change x = out->v[i];
        size_t j = i;
        while (j > 0 && out->v[j - 1].commit_ts == x.commit_ts &&
               pc_key_cmp(out->v[j - 1].key.data, out->v[j - 1].key.len, x.key.data,
                          x.key.len) > 0) {
            out->v[j] = out->v[j - 1];
            j--;
        }
        out->v[j] = x;
    }
    out->n = a.n;
    out->upto = a.upto;
    free(a.v);
    return PC_OK;
}

/* ---- the resolved timestamp ---- */

typedef struct {
    uint64_t resolved;
} resolved_args;

static pc_rc resolved_body(pc_session *s, void *arg)
{
    resolved_args *a = arg;
    WT_CURSOR *c = s->lock;
    WT_ITEM v;
    pc_lock_rec l;
    int ret;

    while ((ret = c->next(c)) == 0) {
        if ((ret = c->get_value(c, &v)) != 0)
            return pc_wt_error(s, ret, "lock cursor");
        if (pc_lock_decode(v.data, v.size, &l) != PC_OK)
            return PC_ERROR;
        /* Percolator: a transaction commits above its start_ts, so a lock
         * keeps changes at or above start_ts possible. */
        if (l.start_ts > 0 && l.start_ts - 1 < a->resolved)
            a->resolved = l.start_ts - 1;
    }
    return ret == WT_NOTFOUND ? PC_OK : pc_wt_error(s, ret, "cursor next");
}

uint64_t pc_in_flight_floor(pc_engine *e)
{
    return pc_memlock_resolved(e->memlocks, UINT64_MAX);
}

pc_rc pc_resolved_ts(pc_session *s, uint64_t upto, uint64_t *resolved)
{
    resolved_args a = {upto};
    pc_rc rc = pc_run_txn(s, resolved_body, &a);
    if (rc != PC_OK)
        return rc;
    /* After the locks: a commit in flight that the lock scan saw as
     * committed is either still in the table of commits in flight, or
     * applied (and so captured by whoever watches the applies). */
    *resolved = pc_memlock_resolved(s->e->memlocks, a.resolved);
    return PC_OK;
}
