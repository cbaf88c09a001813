/*
 * fuzz_writes.c — service/writes.c's request lists: writes_parse (the
 * "writes" of a batch or a one-shot transaction) and keys_parse (keys to
 * read), on any JSON.
 *
 * Input: one mode byte, then JSON text. The mode byte picks the encoding
 * (bit 0: base64), the list (bit 1: keys), the item limit (bits 2-3) and
 * the value limit (bits 4-5). The parsers run on a detached request
 * (httpd_req_detached), so their error replies are the real ones.
 * Properties: a parser returns false exactly when it answered, and then
 * with 400, 413 or 500 and the error envelope whose code goes with the
 * status; on true, every key is 1..4096 bytes and is the JSON string
 * decoded (the text itself, or its base64), every value is within the
 * limit, deletes are the items with "delete": true, and the byte count
 * adds up. The lists are freed either way (ASan/LSan check the owners).
 */
#include <string.h>

#include "base64.h"
#include "fuzz.h"
#include "service.h"
#include "writes.h"

static const size_t item_limits[] = {0, 1, 4, 1000};
static const size_t value_limits[] = {0, 16, 255, 1 << 20};

/* The reply of a parser that said false: a 4xx/500 error envelope. */
static void check_error(httpd_req *req)
{
    const char *body = NULL;
    size_t len = 0;
    unsigned status = httpd_reply_status(req, &body, &len);
    FUZZ_CHECK(status == 400 || status == 413 || status == 500);
    json_t *j = json_loadb(body, len, 0, NULL);
    FUZZ_CHECK(j != NULL);
    const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    FUZZ_CHECK(code != NULL && msg != NULL && msg[0] != '\0');
    FUZZ_CHECK(strcmp(code, status == 400   ? "bad_request"
                            : status == 413 ? "payload_too_large"
                                            : "internal") == 0);
    json_decref(j);
}

/* The bytes decoded from JSON string s are exactly p[0..len): the text
 * itself, or what its base64 decodes to. */
static bool decodes_to(json_t *s, codec_enc enc, const char *p, size_t len)
{
    if (!json_is_string(s))
        return false;
    const char *t = json_string_value(s);
    size_t tlen = json_string_length(s);
    if (enc == ENC_TEXT)
        return tlen == len && memcmp(t, p, len) == 0;
    unsigned char *raw = malloc(tlen / 4 * 3 + 1);
    FUZZ_CHECK(raw != NULL);
    long n = b64_decode(t, tlen, raw);
    bool eq = n == (long)len && memcmp(raw, p, len) == 0;
    free(raw);
    return eq;
}

static void check_writes(json_t *arr, const write_list *l, codec_enc enc, size_t max_items,
                         size_t max_value)
{
    size_t bytes = 0;
    FUZZ_CHECK(l->n == json_array_size(arr) && l->n <= max_items);
    for (size_t i = 0; i < l->n; i++) {
        json_t *it = json_array_get(arr, i), *del = json_object_get(it, "delete");
        size_t klen = l->w[i].klen;
        FUZZ_CHECK(klen >= 1 && klen <= SVC_MAX_KEY);
        FUZZ_CHECK(l->w[i].koff + klen <= l->keys.len);
        FUZZ_CHECK(decodes_to(json_object_get(it, "key"), enc, writes_key(l, i), klen));
        FUZZ_CHECK(l->w[i].deleted == json_is_true(del));
        if (l->w[i].deleted) {
            FUZZ_CHECK(l->vals[i].len == 0);
        } else {
            FUZZ_CHECK(l->vals[i].len <= max_value);
            FUZZ_CHECK(decodes_to(json_object_get(it, "value"), enc, l->vals[i].data,
                                  l->vals[i].len));
        }
        bytes += klen + l->vals[i].len;
    }
    FUZZ_CHECK(l->bytes == bytes);
}

static void check_keys(json_t *arr, const key_list *l, codec_enc enc, size_t max_items)
{
    FUZZ_CHECK(l->n == json_array_size(arr) && l->n <= max_items);
    for (size_t i = 0; i < l->n; i++) {
        FUZZ_CHECK(l->len[i] >= 1 && l->len[i] <= SVC_MAX_KEY);
        FUZZ_CHECK(l->off[i] + l->len[i] <= l->keys.len);
        FUZZ_CHECK(decodes_to(json_array_get(arr, i), enc, keys_at(l, i), l->len[i]));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    codec_enc enc = mode & 1 ? ENC_BASE64 : ENC_TEXT;
    size_t max_items = item_limits[(mode >> 2) & 3], max_value = value_limits[(mode >> 4) & 3];

    json_t *arr = json_loadb((const char *)data + 1, size - 1, JSON_ALLOW_NUL | JSON_DECODE_ANY,
                             NULL);
    if (arr == NULL)
        return 0;
    httpd_req *req = httpd_req_detached();
    FUZZ_CHECK(req != NULL);
    bool ok;
    if (mode & 2) {
        key_list l;
        ok = keys_parse(req, arr, "keys", enc, max_items, &l);
        if (ok)
            check_keys(arr, &l, enc, max_items);
        keys_free(&l);
    } else {
        write_list l;
        ok = writes_parse(req, arr, enc, max_items, max_value, &l);
        if (ok)
            check_writes(arr, &l, enc, max_items, max_value);
        writes_free(&l);
    }
    FUZZ_CHECK(httpd_replied(req) == !ok);
    if (!ok)
        check_error(req);
    httpd_req_free_detached(req);
    json_decref(arr);
    return 0;
}
