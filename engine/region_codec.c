/*
 * region_codec.c — a region row's bytes (engine_replica.h, region_rows.c,
 * docs/DESIGN.md §6.5 step 6): the value of a region's row in the store
 * and of a batch's SET_REGION (batch.c).
 *
 * The epoch (u64), the start key (u32 length, bytes), then 1 and the end
 * key (u32 length, bytes), or 0 (to the end of the keyspace). Big-endian.
 * Decoding is strict, one encoding per region: every row and every
 * SET_REGION of a batch is a well-formed region (an id and an epoch,
 * keys of at most PC_KEY_MAX bytes, an end above its start), so the store
 * never holds one that is not.
 */
#include <string.h>

#include "engine_replica.h"
#include "internal.h"

bool pc_region_row_ok(const pc_region_row *r)
{
    if (r->id == 0 || r->epoch == 0 || r->start.len > PC_KEY_MAX ||
        (r->start.data == NULL && r->start.len > 0))
        return false;
    if (r->end.data == NULL)
        return true;
    return r->end.len > 0 && r->end.len <= PC_KEY_MAX &&
           pc_key_cmp(r->end.data, r->end.len, r->start.data, r->start.len) > 0;
}

pc_rc pc_region_row_encode(const pc_region_row *r, pc_buf *out)
{
    uint8_t head[8 + 4], len[4], bounded = r->end.data != NULL;
    if (!pc_region_row_ok(r))
        return PC_INVALID;
    pc_put_be64(head, r->epoch);
    pc_put_be32(head + 8, (uint32_t)r->start.len);
    if (pc_buf_append(out, head, sizeof head) != PC_OK ||
        pc_buf_append(out, r->start.data, r->start.len) != PC_OK ||
        pc_buf_append(out, &bounded, 1) != PC_OK)
        return PC_NOMEM;
    if (!bounded)
        return PC_OK;
    pc_put_be32(len, (uint32_t)r->end.len);
    if (pc_buf_append(out, len, 4) != PC_OK || pc_buf_append(out, r->end.data, r->end.len) != PC_OK)
        return PC_NOMEM;
    return PC_OK;
}

bool pc_region_row_decode(uint64_t id, const void *value, size_t len, pc_region_row *out)
{
    const uint8_t *p = value, *end = p + len;
    memset(out, 0, sizeof *out);
    out->id = id;
    if (len < 8 + 4 + 1)
        return false;
    out->epoch = pc_get_be64(p), p += 8;
    out->start.len = pc_get_be32(p), p += 4;
    if ((size_t)(end - p) < out->start.len + 1)
        return false;
    out->start.data = p, p += out->start.len;
    if (*p++ != 0) {
        if (p[-1] != 1 || end - p < 4)
            return false;
        out->end.len = pc_get_be32(p), p += 4;
        if ((size_t)(end - p) != out->end.len)
            return false;
        out->end.data = p, p += out->end.len;
    }
    return p == end && pc_region_row_ok(out);
}
