/*
 * items.c — building a pc_items answer (scans, notify scans): items keep
 * arena offsets while the arena grows, and become pointers at the end.
 */
#include <stdlib.h>

#include "internal.h"

void pc_items_free(pc_items *it)
{
    free(it->items);
    it->items = NULL;
    it->n = it->cap = 0;
    pc_buf_free(&it->arena);
    it->more = 0;
}

pc_rc pc_items_push(pc_items *out, const void *key, size_t klen, size_t voff, uint64_t ts)
{
    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 16;
        pc_item *v = realloc(out->items, cap * sizeof(*v));
        if (v == NULL)
            return PC_NOMEM;
        out->items = v;
        out->cap = cap;
    }
    size_t koff = out->arena.len;
    if (pc_buf_append(&out->arena, key, klen) != PC_OK)
        return PC_NOMEM;
    pc_item *it = &out->items[out->n++];
    it->key = (pc_slice){(const void *)(uintptr_t)koff, klen};
    it->value = (pc_slice){(const void *)(uintptr_t)voff, koff - voff};
    it->commit_ts = ts;
    return PC_OK;
}

void pc_items_finish(pc_items *out)
{
    for (size_t i = 0; i < out->n; i++) {
        out->items[i].key.data = out->arena.data + (uintptr_t)out->items[i].key.data;
        out->items[i].value.data = out->arena.data + (uintptr_t)out->items[i].value.data;
    }
}

pc_rc pc_items_add(pc_items *out, pc_slice key, pc_slice value, uint64_t commit_ts)
{
    size_t voff = out->arena.len;
    pc_rc rc = pc_buf_append(&out->arena, value.data, value.len);
    return rc == PC_OK ? pc_items_push(out, key.data, key.len, voff, commit_ts) : rc;
}

pc_rc pc_items_append(pc_items *dst, const pc_items *src)
{
    pc_rc rc = PC_OK;
    /* Back to offsets: the arena may move while it grows. */
    for (size_t i = 0; i < dst->n; i++) {
        dst->items[i].key.data = (const void *)(uintptr_t)((const char *)dst->items[i].key.data -
                                                           dst->arena.data);
        dst->items[i].value.data = (const void *)(uintptr_t)(
            (const char *)dst->items[i].value.data - dst->arena.data);
    }
    for (size_t i = 0; i < src->n && rc == PC_OK; i++)
        rc = pc_items_add(dst, src->items[i].key, src->items[i].value, src->items[i].commit_ts);
    pc_items_finish(dst);
    return rc;
}
