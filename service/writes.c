/*
 * writes.c — see writes.h.
 */
#include <stdlib.h>

#include "body.h"
#include "service.h"
#include "writes.h"

static bool bad_write(httpd_req *req)
{
    if (!httpd_replied(req))
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "each write is {\"key\",\"value\"} or {\"key\",\"delete\":true}");
    return false;
}

bool writes_parse(httpd_req *req, json_t *arr, codec_enc enc, size_t max_items,
                  size_t max_value, write_list *out)
{
    size_t n = json_array_size(arr), i;
    json_t *it;
    char key[SVC_MAX_KEY];
    size_t klen;

    *out = (write_list){0};
    if (arr != NULL && !json_is_array(arr)) {
        httpd_reply_error(req, 400, "bad_request", NULL, "\"writes\" must be an array");
        return false;
    }
    if (n > max_items) {
        httpd_reply_error(req, 400, "bad_request", NULL, "at most %zu writes", max_items);
        return false;
    }
    out->w = calloc(n ? n : 1, sizeof(*out->w));
    out->vals = calloc(n ? n : 1, sizeof(*out->vals));
    out->cap = n ? n : 1;
    if (out->w == NULL || out->vals == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    json_array_foreach(arr, i, it) {
        static const char *const fields[] = {"key", "value", "delete", NULL};
        json_t *del = json_object_get(it, "delete"), *v = json_object_get(it, "value");
        char what[40];
        snprintf(what, sizeof what, "writes[%zu]", i);
        if (json_is_object(it) && !body_fields_known(req, it, what, fields))
            return false;
        if (!json_is_object(it) ||
            !codec_json_key(req, json_object_get(it, "key"), "writes[].key", enc, key, &klen))
            return bad_write(req);
        if ((del != NULL && !json_is_boolean(del)) || (json_is_true(del) ? v != NULL : v == NULL))
            return bad_write(req);
        if (v != NULL &&
            !codec_json_value(req, v, "writes[].value", enc, max_value, &out->vals[i]))
            return false;
        out->w[i].koff = out->keys.len;
        out->w[i].klen = klen;
        out->w[i].deleted = json_is_true(del);
        if (buf_append(&out->keys, key, klen) != 0) {
            httpd_reply_error(req, 500, "internal", NULL, "out of memory");
            return false;
        }
        out->bytes += klen + out->vals[i].len;
        out->n++;
    }
    return true;
}

void writes_free(write_list *l)
{
    for (size_t i = 0; l->vals != NULL && i < l->cap; i++)
        buf_free(&l->vals[i]);
    free(l->vals);
    free(l->w);
    buf_free(&l->keys);
    *l = (write_list){0};
}

bool keys_parse(httpd_req *req, json_t *arr, const char *what, codec_enc enc, size_t max_items,
                key_list *out)
{
    size_t n = json_array_size(arr), i;
    json_t *it;
    char key[SVC_MAX_KEY];
    size_t klen;

    *out = (key_list){0};
    if (arr != NULL && !json_is_array(arr)) {
        httpd_reply_error(req, 400, "bad_request", NULL, "\"%s\" must be an array of keys", what);
        return false;
    }
    if (n > max_items) {
        httpd_reply_error(req, 400, "bad_request", NULL, "at most %zu %s", max_items, what);
        return false;
    }
    out->off = calloc(n ? n : 1, sizeof(*out->off));
    out->len = calloc(n ? n : 1, sizeof(*out->len));
    if (out->off == NULL || out->len == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    json_array_foreach(arr, i, it) {
        if (!codec_json_key(req, it, what, enc, key, &klen))
            return false;
        out->off[i] = out->keys.len;
        out->len[i] = klen;
        if (buf_append(&out->keys, key, klen) != 0) {
            httpd_reply_error(req, 500, "internal", NULL, "out of memory");
            return false;
        }
        out->n++;
    }
    return true;
}

void keys_free(key_list *l)
{
    free(l->off);
    free(l->len);
    buf_free(&l->keys);
    *l = (key_list){0};
}
