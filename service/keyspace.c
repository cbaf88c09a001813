/*
 * keyspace.c — user keys live under the prefix byte KS_USER in the engine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd.h"
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

static void free_splits(pc_buf *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pc_buf_free(&keys[i]);
    free(keys);
}

int ks_split_keys(const char *spec, pc_buf **out, size_t *n, char *err, size_t errlen)
{
    pc_buf *keys = NULL;
    size_t k = 0;
    char dec[SVC_MAX_KEY * 3 + 2]; /* a prefix byte, the key, the decoder's NUL */

    *out = NULL;
    *n = 0;
    for (const char *p = spec; spec != NULL && *spec != '\0';) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        /* Room for the decoded key (never longer than its text). */
        long dlen = len <= SVC_MAX_KEY * 3 ? httpd_percent_decode(p, len, dec + 1, false) : -2;
        const char *why = dlen == -2 ? "is too long"
                          : dlen < 0 ? "has a malformed %-escape"
                          : dlen == 0 ? "is empty"
                          : dlen > SVC_MAX_KEY ? "is longer than 4096 bytes"
                          : k == KS_MAX_SPLITS ? "is one too many (at most 1024 split keys)"
                                               : NULL;
        if (why == NULL) {
            dec[0] = KS_USER;
            if (k > 0 && pc_key_cmp(dec, (size_t)dlen + 1, keys[k - 1].data, keys[k - 1].len) <= 0)
                why = "is not above the key before it (they must be in increasing order)";
        }
        if (why != NULL) {
            snprintf(err, errlen, "--region-split-keys: key %zu (\"%.*s\") %s", k + 1,
                     (int)(len < 64 ? len : 64), p, why);
            free_splits(keys, k);
            return -1;
        }
        pc_buf *grown = realloc(keys, (k + 1) * sizeof(*grown));
        if (grown != NULL) {
            keys = grown;
            keys[k++] = (pc_buf){0};
        }
        if (grown == NULL || pc_buf_append(&keys[k - 1], dec, (size_t)dlen + 1) != PC_OK) {
            snprintf(err, errlen, "--region-split-keys: out of memory");
            free_splits(keys, k);
            return -1;
        }
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    *out = keys;
    *n = k;
    return 0;
}
