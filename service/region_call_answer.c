/*
 * region_call_answer.c — the answer to a region call as JSON
 * (region_call.h): the action's rc and what its kind returns, written by
 * the node that ran it and read back by the sender.
 */
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "region_call.h"

pc_rc act_rc_named(const char *name)
{
    for (int r = PC_OK; r <= PC_RETRY; r++)
        if (name != NULL && strcmp(pc_rc_name((pc_rc)r), name) == 0)
            return (pc_rc)r;
    return PC_ERROR;
}

static json_t *conflict_json(const pc_conflict *c)
{
    const pc_lock_view *l = &c->lock;
    return json_pack("{s:s,s:I,s:I,s:I,s:o,s:o,s:o,s:I,s:I,s:i}", "op",
                     l->op == PC_OP_DELETE ? "delete" : "put", "start_ts", (json_int_t)l->start_ts,
                     "wall_ms", (json_int_t)l->wall_ms, "ttl_ms", (json_int_t)l->ttl_ms, "key",
                     rcw_b64(l->key.data, l->key.len), "primary",
                     rcw_b64(l->primary.data, l->primary.len), "owner",
                     rcw_b64(l->owner.data, l->owner.len), "commit_ts", (json_int_t)c->commit_ts,
                     "in_flight_ts", (json_int_t)c->in_flight_ts, "in_flight_mode",
                     c->in_flight_mode);
}

json_t *region_answer_encode(pc_rc rc, const act_call *a, const act_answer *out)
{
    json_t *o = json_pack("{s:s}", "rc", pc_rc_name(rc));
    int bad = o == NULL;
    if (!bad && out->c != NULL && (rc == PC_LOCKED || rc == PC_WRITE_CONFLICT))
        bad |= rcw_set(o, "conflict", conflict_json(out->c));
    if (!bad && a->kind == ACT_CHECK_TXN_STATUS && rc == PC_OK)
        bad |= rcw_set(o, "status", json_pack("{s:i,s:I,s:i,s:I,s:I}", "state", (int)out->st->state,
                                          "commit_ts", (json_int_t)out->st->commit_ts,
                                          "rolled_back_now", out->st->rolled_back_now, "wall_ms",
                                          (json_int_t)out->st->wall_ms, "ttl_ms",
                                          (json_int_t)out->st->ttl_ms));
    if (!bad && (a->kind == ACT_GET || a->kind == ACT_GET_LATEST) && rc == PC_OK)
        bad |= rcw_set(o, "value", rcw_b64(out->value->data, out->value->len)) |
               rcw_set(o, "commit_ts", json_integer((json_int_t)*out->commit_ts));
    if (!bad && a->kind == ACT_SCAN && rc == PC_OK) {
        json_t *list = json_array();
        bad |= list == NULL;
        for (size_t i = 0; !bad && i < out->items->n; i++) {
            const pc_item *it = &out->items->items[i];
            json_t *x = json_pack("{s:o,s:o,s:I}", "key", rcw_b64(it->key.data, it->key.len),
                                  "value", rcw_b64(it->value.data, it->value.len), "commit_ts",
                                  (json_int_t)it->commit_ts);
            bad |= x == NULL || json_array_append_new(list, x) != 0;
        }
        bad |= rcw_set(o, "items", list) | rcw_set(o, "more", json_boolean(out->items->more));
    }
    if (!bad && (a->kind == ACT_OLDEST_LOCK || a->kind == ACT_GC) && rc == PC_OK)
        bad |= rcw_set(o, "next", rcw_b64(out->next->data, out->next->len)) |
               rcw_set(o, "last", json_boolean(*out->last));
    if (!bad && a->kind == ACT_OLDEST_LOCK && rc == PC_OK)
        bad |= rcw_set(o, "oldest", json_integer((json_int_t)*out->commit_ts));
    if (!bad && a->kind == ACT_READ_INDEX && rc == PC_OK)
        bad |= rcw_set(o, "index", json_integer((json_int_t)out->ri->index)) |
               rcw_set(o, "region", json_integer((json_int_t)out->ri->region)) |
               (out->ri->floor != UINT64_MAX
                    ? rcw_set(o, "floor", json_integer((json_int_t)out->ri->floor))
                    : 0);
    if (!bad && a->kind == ACT_GC && rc == PC_OK)
        bad |= rcw_set(o, "gc", json_pack("{s:I,s:I,s:I,s:I}", "keys", (json_int_t)out->gc->keys,
                                          "versions", (json_int_t)out->gc->versions, "removed",
                                          (json_int_t)out->gc->versions_removed, "data_removed",
                                          (json_int_t)out->gc->data_removed));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A scan's items from its answer into out (empty first); false: garbled. */
static bool items_decode(json_t *o, pc_items *out)
{
    json_t *list = json_object_get(o, "items"), *x;
    size_t i;
    bool ok = json_is_array(list);
    pc_items_free(out);
    json_array_foreach(list, i, x) {
        json_t *k = json_object_get(x, "key"), *v = json_object_get(x, "value");
        size_t room = json_string_length(k) / 4 * 3 + json_string_length(v) / 4 * 3 + 8;
        unsigned char *tmp = ok ? malloc(room) : NULL, *at = tmp;
        pc_slice key, value;
        uint64_t cts;
        ok = tmp != NULL && rcw_take_b64(k, PC_KEY_MAX, &at, &key) &&
             rcw_take_b64(v, room, &at, &value) && rcw_u64(x, "commit_ts", &cts) &&
             pc_items_add(out, key, value, cts) == PC_OK;
        free(tmp);
        if (!ok)
            break;
    }
    pc_items_finish(out);
    out->more = json_is_true(json_object_get(o, "more"));
    if (!ok)
        pc_items_free(out);
    return ok;
}

/* Where a walk over the regions goes next, and a GC part's counts (added
 * to the caller's) or the oldest lock; false: garbled. */
static bool walk_decode(json_t *o, const act_call *a, act_answer *out)
{
    unsigned char key[PC_KEY_MAX + 3], *at = key;
    pc_slice next;
    json_t *last = json_object_get(o, "last"), *gc = json_object_get(o, "gc");
    if (!rcw_take_b64(json_object_get(o, "next"), PC_KEY_MAX, &at, &next) ||
        !json_is_boolean(last))
        return false;
    *out->last = json_is_true(last);
    out->next->len = 0;
    if (pc_buf_append(out->next, next.data, next.len) != PC_OK)
        return false;
    /* Each count there, not taken as 0 when missing: an answer without
     * "oldest" would say "no lock" and raise the safe point past one. */
    const char *need[] = {"keys", "versions", "removed", "data_removed"};
    for (size_t i = 0; a->kind == ACT_GC && i < 4; i++)
        if (!json_is_integer(json_object_get(gc, need[i])))
            return false;
    if (a->kind == ACT_OLDEST_LOCK)
        return json_is_integer(json_object_get(o, "oldest")) &&
               rcw_u64(o, "oldest", out->commit_ts);
    uint64_t keys, versions, removed, data;
    if (!rcw_u64(gc, "keys", &keys) || !rcw_u64(gc, "versions", &versions) ||
        !rcw_u64(gc, "removed", &removed) || !rcw_u64(gc, "data_removed", &data))
        return false;
    out->gc->keys += keys;
    out->gc->versions += versions;
    out->gc->versions_removed += removed;
    out->gc->data_removed += data;
    return true;
}

/* The caller's out from an answer; the rc it names (PC_ERROR: garbled). */
pc_rc region_answer_decode(json_t *o, const act_call *a, act_answer *out)
{
    pc_rc rc = act_rc_named(json_string_value(json_object_get(o, "rc")));
    json_t *c = json_object_get(o, "conflict");
    if (out->c != NULL && c != NULL) {
        unsigned char buf[PC_KEY_MAX * 2 + PC_OWNER_MAX + 16], *at = buf;
        pc_lock_view v = {0};
        uint64_t cts, ift, mode;
        const char *op = json_string_value(json_object_get(c, "op"));
        if (!rcw_take_b64(json_object_get(c, "key"), PC_KEY_MAX, &at, &v.key) ||
            !rcw_take_b64(json_object_get(c, "primary"), PC_KEY_MAX, &at, &v.primary) ||
            !rcw_take_b64(json_object_get(c, "owner"), PC_OWNER_MAX, &at, &v.owner) ||
            !rcw_u64(c, "start_ts", &v.start_ts) || !rcw_u64(c, "wall_ms", &v.wall_ms) ||
            !rcw_u64(c, "ttl_ms", &v.ttl_ms) || !rcw_u64(c, "commit_ts", &cts) ||
            !rcw_u64(c, "in_flight_ts", &ift) || !rcw_u64(c, "in_flight_mode", &mode))
            return PC_ERROR;
        v.op = op != NULL && strcmp(op, "delete") == 0 ? PC_OP_DELETE : PC_OP_PUT;
        pc_lock_copy(out->c, &v);
        out->c->commit_ts = cts;
        /* A commit in flight there is that node's to wait for (its memory):
         * nothing here could (pc_lock_copy left these 0). */
        (void)ift;
        (void)mode;
    }
    if (a->kind == ACT_CHECK_TXN_STATUS && rc == PC_OK) {
        json_t *st = json_object_get(o, "status");
        uint64_t state, now, wall, ttl;
        if (!rcw_u64(st, "state", &state) || state < PC_TXN_LOCKED ||
            state > PC_TXN_ROLLED_BACK || !rcw_u64(st, "commit_ts", &out->st->commit_ts) ||
            !rcw_u64(st, "rolled_back_now", &now) || !rcw_u64(st, "wall_ms", &wall) ||
            !rcw_u64(st, "ttl_ms", &ttl) || st == NULL)
            return PC_ERROR;
        out->st->state = (pc_txn_state)state;
        out->st->rolled_back_now = now != 0;
        out->st->wall_ms = wall;
        out->st->ttl_ms = ttl;
    }
    if (a->kind == ACT_SCAN && rc == PC_OK && !items_decode(o, out->items))
        return PC_ERROR;
    if ((a->kind == ACT_OLDEST_LOCK || a->kind == ACT_GC) && rc == PC_OK &&
        !walk_decode(o, a, out))
        return PC_ERROR;
    if (a->kind == ACT_READ_INDEX && rc == PC_OK) {
        json_t *floor = json_object_get(o, "floor");
        out->ri->floor = UINT64_MAX; /* no commit in flight there */
        if (!json_is_integer(json_object_get(o, "index")) ||
            !json_is_integer(json_object_get(o, "region")) ||
            !rcw_u64(o, "index", &out->ri->index) || !rcw_u64(o, "region", &out->ri->region) ||
            (floor != NULL && (!json_is_integer(floor) || !rcw_u64(o, "floor", &out->ri->floor))))
            return PC_ERROR;
    }
    if ((a->kind == ACT_GET || a->kind == ACT_GET_LATEST) && rc == PC_OK) {
        json_t *v = json_object_get(o, "value");
        size_t len = json_string_length(v);
        unsigned char *tmp = json_is_string(v) ? malloc(len / 4 * 3 + 3) : NULL;
        long n = tmp != NULL ? b64_decode(json_string_value(v), len, tmp) : -1;
        out->value->len = 0;
        bool ok = n >= 0 && rcw_u64(o, "commit_ts", out->commit_ts) &&
                  pc_buf_append(out->value, tmp, (size_t)n) == PC_OK;
        free(tmp);
        if (!ok)
            return PC_ERROR;
    }
    return rc;
}

