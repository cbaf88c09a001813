/*
 * fuzz_region_call.c — service/region_call_wire.c: a region call's body,
 * as another node (or anyone who reaches the port) sends it, on any
 * bytes.
 *
 * Input: the bytes as JSON (what json_loadb makes of them). A body the
 * decoder takes must hold what its kind needs (one key for a read, one
 * mutation or more for a prewrite), every key within PC_KEY_MAX and every
 * value within the bound given; written again with region_call_encode and
 * decoded, it is the same call: kind, meta, timestamp, keys and values.
 */
#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "region_call.h"

#define MAX_VALUE 4096

static int same(pc_slice a, pc_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

static void check_same(const region_call_in *x, const region_call_in *y)
{
    const act_call *a = &x->a, *b = &y->a;
    FUZZ_CHECK(a->kind == b->kind && a->n == b->n && a->ts == b->ts);
    FUZZ_CHECK(a->kind != ACT_SCAN || (a->limit == b->limit && a->max_bytes == b->max_bytes));
    FUZZ_CHECK(a->kind != ACT_GET_LATEST || a->step_over == b->step_over);
    FUZZ_CHECK(a->meta.start_ts < (UINT64_C(1) << 53) && a->ts < (UINT64_C(1) << 53));
    FUZZ_CHECK(a->meta.start_ts == b->meta.start_ts && a->meta.wall_ms == b->meta.wall_ms &&
               a->meta.ttl_ms == b->meta.ttl_ms);
    FUZZ_CHECK(same(a->meta.primary, b->meta.primary) && same(a->meta.owner, b->meta.owner));
    FUZZ_CHECK(a->owner_verdict == b->owner_verdict && x->observers == y->observers);
    FUZZ_CHECK(strcmp(x->run, y->run) == 0);
    for (size_t i = 0; i < a->n; i++) {
        if (a->kind == ACT_PREWRITE) {
            FUZZ_CHECK(a->m[i].op == b->m[i].op && same(a->m[i].key, b->m[i].key));
            FUZZ_CHECK(a->m[i].op != PC_OP_PUT || same(a->m[i].value, b->m[i].value));
            FUZZ_CHECK(a->m[i].key.len <= PC_KEY_MAX && a->m[i].value.len <= MAX_VALUE);
        } else {
            FUZZ_CHECK(same(a->keys[i], b->keys[i]) && a->keys[i].len <= PC_KEY_MAX);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *body = json_loadb((const char *)data, size, 0, &jerr);
    region_call_in in, again = {0};
    char why[256];
    if (body == NULL)
        return 0;
    if (!region_call_decode(body, MAX_VALUE, &in, why, sizeof why)) {
        FUZZ_CHECK(why[0] != '\0');
        region_call_in_free(&in);
        json_decref(body);
        return 0;
    }
    bool one = in.a.kind == ACT_GET || in.a.kind == ACT_GET_LATEST ||
               in.a.kind == ACT_COMMIT_PRIMARY || in.a.kind == ACT_RESOLVE_LOCK ||
               in.a.kind == ACT_NOTIFY_CLEAR || in.a.kind == ACT_OLDEST_LOCK ||
               in.a.kind == ACT_GC || in.a.kind == ACT_READ_INDEX;
    FUZZ_CHECK(!one || in.a.n == 1);
    FUZZ_CHECK(in.a.kind != ACT_PREWRITE || in.a.n >= 1);
    FUZZ_CHECK(in.a.kind != ACT_GC || in.a.ts >= 1);
    FUZZ_CHECK(in.a.kind != ACT_SCAN || (in.a.n == 2 && in.a.limit >= 1 &&
                                         in.a.limit <= REGION_CALL_MAX_SCAN && in.a.max_bytes >= 1));
    FUZZ_CHECK(in.a.n <= REGION_CALL_MAX_ITEMS);
    json_t *out = region_call_encode(&in.a, in.run, in.observers, in.a.owner_verdict);
    FUZZ_CHECK(out != NULL);
    FUZZ_CHECK(region_call_decode(out, MAX_VALUE, &again, why, sizeof why));
    check_same(&in, &again);
    region_call_in_free(&again);
    json_decref(out);
    region_call_in_free(&in);
    json_decref(body);
    return 0;
}
