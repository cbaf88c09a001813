/*
 * fuzz_batch.c — engine/batch.c's write batch format (DESIGN §4.10).
 *
 * The input is a batch. If pc_batch_check accepts it, walking it with
 * pc_batch_next visits exactly the count the header gives and ends at its
 * end, every operation is on a data table, and encoding the same
 * operations again gives the same bytes (one encoding per batch: the
 * checker accepts nothing the encoder cannot write); and the batch joined
 * to itself (pc_batch_join) is a batch of twice the count. The change
 * feed's decoder (pc_batch_changes, engine/changes.c) reads every batch
 * without a crash or an overread; on a checked one it tells at most one
 * change per write-table PUT, each a put or delete with a key inside
 * PC_KEY_MAX and a short value only on a put. A region row (SET_REGION)
 * decodes to a well-formed region and encodes back to its bytes. The
 * router's decoder
 * (pc_batch_keys, engine/batch_keys.c) likewise: at most one key per PUT
 * or DEL, each inside PC_KEY_MAX, and PC_INVALID for what the checker
 * refuses.
 */
#include <string.h>

#include "fuzz.h"
#include "engine_replica.h"
#include "internal.h"

/* The batch header's operation count (big-endian, after the magic). */
static uint32_t header_count(const void *batch)
{
    const uint8_t *b = batch; /* pc_buf holds char: read bytes unsigned */
    return (uint32_t)b[4] << 24 | (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];
}

static int count_key(void *arg, const void *key, size_t len)
{
    FUZZ_CHECK(key != NULL || len == 0);
    FUZZ_CHECK(len <= PC_KEY_MAX);
    (*(uint32_t *)arg)++;
    return 0;
}

static int count_change(void *arg, const pc_change *c)
{
    FUZZ_CHECK(c->key.len <= PC_KEY_MAX);
    FUZZ_CHECK(c->op == PC_OP_PUT || c->op == PC_OP_DELETE);
    FUZZ_CHECK(!c->has_value || c->op == PC_OP_PUT);
    FUZZ_CHECK(!c->has_value || c->value.len <= PC_SHORT_VALUE_MAX);
    (*(uint32_t *)arg)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1); /* exactly size bytes: overreads are caught */
    FUZZ_CHECK(copy != NULL);
    memcpy(copy, data, size);
    if (pc_batch_check(copy, size) == PC_OK) {
        const uint8_t *p = copy + PC_BATCH_HEADER, *end = copy + size;
        uint32_t count = header_count(copy);
        pc_buf again = {0};
        pc_batch_op o;
        uint32_t seen = 0, write_puts = 0, changes = 0, keys = 0, key_ops = 0;
        (void)pc_batch_changes(copy, size, count_change, &changes);
        (void)pc_batch_keys(copy, size, count_key, &keys);
        while (p < end) {
            FUZZ_CHECK(pc_batch_next(&p, end, &o));
            seen++;
            write_puts += o.op == PC_BATCH_PUT && o.table == 2;
            key_ops += o.op == PC_BATCH_PUT || o.op == PC_BATCH_DEL;
            if (o.op == PC_BATCH_RAISE_TS) {
                FUZZ_CHECK(pc_batch_raise_ts(&again, o.ts) == PC_OK);
                continue;
            }
            if (o.op == PC_BATCH_RAISE_SAFE_POINT) {
                FUZZ_CHECK(pc_batch_raise_safe_point(&again, o.ts) == PC_OK);
                continue;
            }
            if (o.op == PC_BATCH_SET_META) {
                char name[PC_META_NAME_MAX + 1];
                FUZZ_CHECK(o.klen > 0 && o.klen <= PC_META_NAME_MAX);
                memcpy(name, o.key, o.klen);
                name[o.klen] = '\0';
                FUZZ_CHECK(strlen(name) == o.klen); /* no NUL in a name */
                FUZZ_CHECK(pc_batch_set_meta(&again, name, o.val, o.vlen) == PC_OK);
                continue;
            }
            if (o.op == PC_BATCH_SET_REGION) {
                pc_region_row r;
                FUZZ_CHECK(o.klen == 8);
                FUZZ_CHECK(pc_region_row_decode(pc_get_be64(o.key), o.val, o.vlen, &r));
                FUZZ_CHECK(pc_region_row_ok(&r));
                FUZZ_CHECK(pc_batch_set_region(&again, &r) == PC_OK);
                continue;
            }
            FUZZ_CHECK(o.table < 4 && o.klen > 0);
            FUZZ_CHECK((o.op == PC_BATCH_PUT ? pc_batch_put(&again, o.table, o.key, o.klen, o.val,
                                                            o.vlen)
                                             : pc_batch_del(&again, o.table, o.key, o.klen)) ==
                       PC_OK);
        }
        FUZZ_CHECK(p == end && seen == count);
        FUZZ_CHECK(changes <= write_puts);
        FUZZ_CHECK(keys <= key_ops);
        FUZZ_CHECK(seen == 0 ? again.len == 0
                             : again.len == size && memcmp(again.data, copy, size) == 0);
        pc_buf joined = {0};
        FUZZ_CHECK(pc_batch_join(&joined, copy, size) == PC_OK);
        FUZZ_CHECK(pc_batch_join(&joined, copy, size) == PC_OK);
        FUZZ_CHECK(joined.len == 2 * size - PC_BATCH_HEADER);
        FUZZ_CHECK(pc_batch_check(joined.data, joined.len) == PC_OK);
        FUZZ_CHECK(header_count(joined.data) == 2 * count);
        pc_buf_free(&joined);
        pc_buf_free(&again);
    } else {
        uint32_t changes = 0;
        FUZZ_CHECK(pc_batch_changes(copy, size, count_change, &changes) == PC_INVALID);
        FUZZ_CHECK(pc_batch_keys(copy, size, count_key, &changes) == PC_INVALID);
    }
    free(copy);
    return 0;
}
