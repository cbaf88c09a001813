/*
 * batch_changes.c — the changes a write batch commits (docs/DESIGN.md
 * §10): its write-table PUTs of put and delete records, decoded for the
 * change feed, which captures them from every batch applied. Also used
 * by changes.c to decode the write table's rows. Pure decoding: fuzzed
 * with the batch format (fuzz/fuzz_batch.c).
 */
#include "internal.h"

#define WRITE_TABLE 2 /* the batch's table numbers: data lock write notify */

int pc_change_of(const uint8_t *vk, size_t vklen, const void *rec, size_t rlen, uint8_t *keybuf,
                 pc_change *c)
{
    size_t klen;
    pc_write_rec w;
    if (pc_vkey_decode(vk, vklen, keybuf, &klen, &c->commit_ts) != 0 ||
        pc_write_decode(rec, rlen, &w) != PC_OK)
        return -1;
    c->key = (pc_slice){keybuf, klen};
    c->start_ts = w.start_ts;
    c->op = w.type == PC_W_DELETE ? PC_OP_DELETE : PC_OP_PUT;
    c->has_value = w.type == PC_W_PUT && w.has_value;
    c->value = c->has_value ? w.value : (pc_slice){NULL, 0};
    return w.type == PC_W_PUT || w.type == PC_W_DELETE;
}

typedef struct {
    int (*fn)(void *arg, const pc_change *c);
    void *arg;
} changes_args;

static int change_of_op(void *arg, const pc_batch_op *o)
{
    static _Thread_local uint8_t key[PC_KEY_MAX];
    changes_args *a = arg;
    pc_change c;
    if (o->op != PC_BATCH_PUT || o->table != WRITE_TABLE)
        return 0;
    int is = pc_change_of(o->key, o->klen, o->val, o->vlen, key, &c);
    if (is <= 0)
        return is; /* -1: a record that does not decode; 0: a rollback */
    return a->fn(a->arg, &c) != 0;
}

pc_rc pc_batch_changes(const void *batch, size_t len,
                       int (*fn)(void *arg, const pc_change *c), void *arg)
{
    changes_args a = {fn, arg};
    return pc_batch_each(batch, len, change_of_op, &a);
}
