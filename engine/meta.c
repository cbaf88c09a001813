/*
 * meta.c — named values kept with the replicated state (engine_replica.h):
 * rows of the meta table under "x/" + name, beside the applied index and
 * the safe point but apart from them. A batch's SET_META writes one
 * (apply.c), so every member holds the same value from the same index on;
 * an image carries them all as SET_META and replaces them all (image.c,
 * apply.c). The service keeps its region map here (docs/DESIGN.md §6.2).
 */
#include <string.h>

#include "engine_replica.h"
#include "internal.h"

#define PREFIX "x/"
#define PREFIX_LEN 2

/* "x/" + name into key (PREFIX_LEN + PC_META_NAME_MAX bytes). */
static size_t named_key(char *key, const void *name, size_t nlen)
{
    memcpy(key, PREFIX, PREFIX_LEN);
    memcpy(key + PREFIX_LEN, name, nlen);
    return PREFIX_LEN + nlen;
}

pc_rc pc_named_put(pc_session *s, const void *name, size_t nlen, const void *v, size_t vlen)
{
    char key[PREFIX_LEN + PC_META_NAME_MAX];
    if (nlen == 0 || nlen > PC_META_NAME_MAX)
        return PC_INVALID; /* pc_batch_next refused it: cannot happen */
    return pc_cursor_put(s, s->meta, key, named_key(key, name, nlen), v, vlen);
}

/* Each named row from the cursor's position on, to fn (its name and
 * value); a row is named while its key begins with the prefix. */
static pc_rc each_named(pc_session *s, pc_rc (*fn)(pc_session *s, WT_ITEM *k, WT_ITEM *v,
                                                   void *arg), void *arg)
{
    WT_CURSOR *c = s->meta;
    pc_rc rc = pc_cursor_seek_ge(s, c, PREFIX, PREFIX_LEN);
    int ret = 0;
    while (rc == PC_OK) {
        WT_ITEM k, v;
        if ((ret = c->get_key(c, &k)) != 0 || (ret = c->get_value(c, &v)) != 0)
            return pc_wt_error(s, ret, "cursor get");
        if (k.size <= PREFIX_LEN || memcmp(k.data, PREFIX, PREFIX_LEN) != 0)
            break;
        if ((rc = fn(s, &k, &v, arg)) != PC_OK)
            break;
        if ((ret = c->next(c)) != 0) {
            rc = ret == WT_NOTFOUND ? PC_OK : pc_wt_error(s, ret, "cursor next");
            break;
        }
    }
    if ((ret = c->reset(c)) != 0 && (rc == PC_OK || rc == PC_NOT_FOUND))
        rc = pc_wt_error(s, ret, "cursor reset");
    return rc == PC_NOT_FOUND ? PC_OK : rc; /* none at all */
}

static pc_rc image_one(pc_session *s, WT_ITEM *k, WT_ITEM *v, void *arg)
{
    (void)s;
    pc_buf *batch = arg;
    char name[PC_META_NAME_MAX + 1];
    size_t nlen = k->size - PREFIX_LEN;
    if (nlen > PC_META_NAME_MAX)
        return PC_ERROR; /* only pc_named_put writes these */
    memcpy(name, (const char *)k->data + PREFIX_LEN, nlen);
    name[nlen] = '\0';
    return pc_batch_set_meta(batch, name, v->data, v->size);
}

pc_rc pc_named_image(pc_session *s, pc_buf *batch)
{
    return each_named(s, image_one, batch);
}

static pc_rc remove_one(pc_session *s, WT_ITEM *k, WT_ITEM *v, void *arg)
{
    (void)k, (void)v, (void)arg;
    int ret = s->meta->remove(s->meta);
    return ret == 0 ? PC_OK : pc_wt_error(s, ret, "cursor remove");
}

pc_rc pc_named_empty(pc_session *s)
{
    return each_named(s, remove_one, NULL);
}

typedef struct {
    const char *name;
    pc_buf *out;
} get_args;

static pc_rc get_body(pc_session *s, void *arg)
{
    get_args *a = arg;
    char key[PREFIX_LEN + PC_META_NAME_MAX];
    WT_ITEM v;
    a->out->len = 0; /* a retried transaction starts over */
    pc_rc rc = pc_cursor_get(s, s->meta, key, named_key(key, a->name, strlen(a->name)), &v);
    if (rc == PC_OK && pc_buf_append(a->out, v.data, v.size) != PC_OK)
        rc = PC_NOMEM;
    return rc;
}

pc_rc pc_meta_get(pc_session *s, const char *name, pc_buf *out)
{
    size_t nlen = name != NULL ? strlen(name) : 0;
    if (nlen == 0 || nlen > PC_META_NAME_MAX || out == NULL)
        return PC_INVALID;
    get_args a = {name, out};
    return pc_run_txn(s, get_body, &a);
}

typedef struct {
    const char *name;
    size_t nlen;
    pc_slice *value;
    bool found;
} find_args;

static int find_one(void *arg, const pc_batch_op *o)
{
    find_args *f = arg;
    if (o->op == PC_BATCH_SET_META && o->klen == f->nlen && memcmp(o->key, f->name, f->nlen) == 0) {
        *f->value = (pc_slice){(const char *)o->val, o->vlen};
        f->found = true; /* on: the last one counts */
    }
    return 0;
}

pc_rc pc_batch_meta(const void *batch, size_t len, const char *name, pc_slice *value)
{
    find_args f = {name, name != NULL ? strlen(name) : 0, value, false};
    if (f.nlen == 0 || f.nlen > PC_META_NAME_MAX)
        return PC_INVALID;
    pc_rc rc = pc_batch_each(batch, len, find_one, &f);
    return rc != PC_OK ? rc : f.found ? PC_OK : PC_NOT_FOUND;
}
