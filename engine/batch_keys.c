/*
 * batch_keys.c — the user keys a write batch writes, decoded from each
 * table's row key (a versioned key in the data and write tables, the key
 * itself in the lock and notify tables). A router needs them to tell which
 * region a batch is for (service/region.h): every key of one batch must
 * be in one region, whose log it goes to. Pure decoding, fuzzed with the
 * batch format (fuzz/fuzz_batch.c).
 */
#include "internal.h"

enum { DATA_TABLE = 0, WRITE_TABLE = 2 }; /* the batch's table numbers */

typedef struct {
    int (*fn)(void *arg, const void *key, size_t klen);
    void *arg;
} keys_args;

static int key_of_op(void *arg, const pc_batch_op *o)
{
    static _Thread_local uint8_t key[PC_KEY_MAX];
    keys_args *a = arg;
    if (o->op != PC_BATCH_PUT && o->op != PC_BATCH_DEL)
        return 0; /* a timestamp or safe point: no key */
    bool versioned = o->table == DATA_TABLE || o->table == WRITE_TABLE;
    size_t klen;
    uint64_t ts;
    if (versioned && pc_vkey_decode(o->key, o->klen, key, &klen, &ts) != 0)
        return -1;
    return a->fn(a->arg, versioned ? key : o->key, versioned ? klen : o->klen) != 0;
}

pc_rc pc_batch_keys(const void *batch, size_t len,
                    int (*fn)(void *arg, const void *key, size_t klen), void *arg)
{
    keys_args a = {fn, arg};
    return pc_batch_each(batch, len, key_of_op, &a);
}
