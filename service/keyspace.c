/*
 * keyspace.c — user keys live under the prefix byte KS_USER in the engine.
 */
#include <string.h>

#include "keyspace.h"

size_t ks_user(char *out, const void *key, size_t len)
{
    out[0] = KS_USER;
    memcpy(out + 1, key, len);
    return len + 1;
}

bool ks_is_user(pc_slice k, pc_slice *user)
{
    if (k.len < 1 || ((const char *)k.data)[0] != KS_USER)
        return false;
    user->data = (const char *)k.data + 1;
    user->len = k.len - 1;
    return true;
}

bool ks_prefix_end(char *p, size_t *len)
{
    while (*len > 0) {
        unsigned char *last = (unsigned char *)&p[*len - 1];
        if (*last != 0xFF) {
            (*last)++;
            return true;
        }
        (*len)--;
    }
    return false;
}

void ks_user_range(const void *start, size_t slen, const void *end, size_t elen, char *sbuf,
                   pc_slice *s, char *ebuf, pc_slice *e)
{
    s->data = sbuf;
    s->len = ks_user(sbuf, start, slen);
    e->data = ebuf;
    if (elen > 0) {
        e->len = ks_user(ebuf, end, elen);
    } else {
        ebuf[0] = KS_USER + 1; /* just past every user key */
        e->len = 1;
    }
}
