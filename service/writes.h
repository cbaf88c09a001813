/*
 * writes.h — the lists a request carries, parsed once: its writes
 *   [{"key": k, "value": v} | {"key": k, "delete": true}, ...]
 * and its keys to read [k, ...], as sent to POST /v1/txns/{id}/batch and
 * POST /v1/txn. Keys and values are decoded (text or base64) and checked
 * (sizes) here, and nowhere else; keys are stored back to back, so a list
 * costs what its keys weigh, not 4 KiB a key.
 */
#ifndef PC_WRITES_H
#define PC_WRITES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "codec.h"
#include "httpd.h"

typedef struct {
    size_t n;
    struct {
        size_t koff, klen;    /* the key: keys.data + koff, klen bytes */
        bool deleted;
    } *w;
    buf keys;                 /* decoded keys, back to back */
    buf *vals;                /* one per write (empty for a delete) */
    size_t cap;               /* slots of w and vals */
    size_t bytes;             /* sum of key and value lengths */
} write_list;

/* Parse arr (NULL: no writes) into out, at most max_items writes, each
 * value at most max_value bytes. false when it answered the error (400,
 * 413, 500); out is then to be freed all the same. */
bool writes_parse(httpd_req *req, json_t *arr, codec_enc enc, size_t max_items,
                  size_t max_value, write_list *out);
void writes_free(write_list *l);

static inline const char *writes_key(const write_list *l, size_t i)
{
    return l->keys.data + l->w[i].koff;
}

typedef struct {
    size_t n;
    size_t *off, *len;        /* key i: keys.data + off[i], len[i] bytes */
    buf keys;
} key_list;

/* Parse arr (NULL: none) of keys; `what` names it in errors. As above. */
bool keys_parse(httpd_req *req, json_t *arr, const char *what, codec_enc enc, size_t max_items,
                key_list *out);
void keys_free(key_list *l);

static inline const char *keys_at(const key_list *l, size_t i)
{
    return l->keys.data + l->off[i];
}

#endif
