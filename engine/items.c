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
