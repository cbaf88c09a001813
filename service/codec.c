/*
 * codec.c — UTF-8 and base64 for keys and values (DESIGN §2).
 */
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "codec.h"
#include "utf8.h"
#include "service.h"

bool codec_utf8_valid(const void *p, size_t len)
{
    return utf8_valid(p, len);
}

bool codec_encoding(httpd_req *req, codec_enc *enc)
{
    const char *e = httpd_query(req, "encoding", NULL);

    *enc = ENC_TEXT;
    if (e == NULL || strcmp(e, "utf-8") == 0 || strcmp(e, "text") == 0)
        return true;
    if (strcmp(e, "base64") == 0) {
        *enc = ENC_BASE64;
        return true;
    }
    httpd_reply_error(req, 400, "bad_request", NULL,
                      "encoding must be base64 (or absent for UTF-8 text), not '%.40s'", e);
    return false;
}

/* Decode raw (already percent-decoded or JSON-decoded) text into bytes. */
static bool decode(httpd_req *req, const char *what, const char *raw, size_t rlen,
                   codec_enc enc, unsigned char *out, size_t max, size_t *len, bool is_key)
{
    if (enc == ENC_BASE64) {
        if (rlen / 4 * 3 > max + 2) {
            goto too_long;
        }
        unsigned char *tmp = malloc(rlen / 4 * 3 + 3);
        if (tmp == NULL) {
            httpd_reply_error(req, 500, "internal", NULL, "out of memory");
            return false;
        }
        long n = b64_decode(raw, rlen, tmp);
        if (n < 0) {
            free(tmp);
            httpd_reply_error(req, 400, "bad_request", NULL, "%s is not valid base64", what);
            return false;
        }
        if ((size_t)n > max) {
            free(tmp);
            goto too_long;
        }
        memcpy(out, tmp, (size_t)n);
        free(tmp);
        *len = (size_t)n;
    } else {
        if (rlen > max)
            goto too_long;
        if (!codec_utf8_valid(raw, rlen)) {
            httpd_reply_error(req, 400, "bad_request", NULL,
                              "%s is not valid UTF-8 (send binary data with ?encoding=base64)",
                              what);
            return false;
        }
        memcpy(out, raw, rlen);
        *len = rlen;
    }
    if (is_key && *len == 0) {
        httpd_reply_error(req, 400, "bad_request", NULL, "%s must not be empty", what);
        return false;
    }
    return true;
too_long:
    if (is_key)
        httpd_reply_error(req, 400, "bad_request", NULL, "%s is longer than %d bytes", what,
                          SVC_MAX_KEY);
    else
        httpd_reply_error(req, 413, "payload_too_large", NULL, "%s is longer than %zu bytes",
                          what, max);
    return false;
}

bool codec_path_key(httpd_req *req, const char *param, codec_enc enc, char *out, size_t *len)
{
    size_t rlen = 0;
    const char *raw = httpd_param(req, param, &rlen);

    if (raw == NULL) {
        httpd_reply_error(req, 400, "bad_request", NULL, "missing key");
        return false;
    }
    return decode(req, "key", raw, rlen, enc, (unsigned char *)out, SVC_MAX_KEY, len, true);
}

bool codec_query_key(httpd_req *req, const char *name, codec_enc enc, char *out, size_t *len)
{
    size_t rlen = 0;
    const char *raw = httpd_query(req, name, &rlen);

    *len = 0;
    if (raw == NULL || rlen == 0)
        return true;
    return decode(req, name, raw, rlen, enc, (unsigned char *)out, SVC_MAX_KEY, len, false);
}

bool codec_json_key(httpd_req *req, json_t *j, const char *what, codec_enc enc, char *out,
                    size_t *len)
{
    if (!json_is_string(j)) {
        httpd_reply_error(req, 400, "bad_request", NULL, "%s must be a string", what);
        return false;
    }
    return decode(req, what, json_string_value(j), json_string_length(j), enc,
                  (unsigned char *)out, SVC_MAX_KEY, len, true);
}

bool codec_json_value(httpd_req *req, json_t *j, const char *what, codec_enc enc, size_t max,
                      buf *out)
{
    size_t rlen, len = 0;

    if (!json_is_string(j)) {
        httpd_reply_error(req, 400, "bad_request", NULL, "%s must be a string", what);
        return false;
    }
    rlen = json_string_length(j);
    buf_reset(out);
    if (buf_reserve(out, rlen + 1) != 0) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    if (!decode(req, what, json_string_value(j), rlen, enc, (unsigned char *)out->data, max,
                &len, false))
        return false;
    out->len = len;
    out->data[len] = '\0';
    return true;
}

json_t *codec_to_json(const void *p, size_t len, codec_enc enc)
{
    if (enc == ENC_TEXT)
        return codec_utf8_valid(p, len) ? json_stringn(p, len) : NULL;
    char *tmp = malloc(4 * ((len + 2) / 3) + 1);
    if (tmp == NULL)
        return NULL;
    size_t n = b64_encode(p, len, tmp);
    json_t *j = json_stringn(tmp, n);
    free(tmp);
    return j;
}

json_t *codec_to_json_marked(const void *p, size_t len, codec_enc enc, bool *b64)
{
    *b64 = enc == ENC_TEXT && !codec_utf8_valid(p, len);
    return codec_to_json(p, len, *b64 ? ENC_BASE64 : enc);
}

void codec_reply_not_text(httpd_req *req)
{
    httpd_reply_error(req, 400, "bad_request", NULL,
                      "a stored key or value is not UTF-8 text; ask with ?encoding=base64");
}

bool codec_query_u64(httpd_req *req, const char *name, uint64_t def, uint64_t min,
                     uint64_t max, uint64_t *out)
{
    const char *v = httpd_query(req, name, NULL);
    char *end;

    *out = def;
    if (v == NULL)
        return true;
    unsigned long long x = strtoull(v, &end, 10);
    if (v[0] == '\0' || v[0] == '-' || v[0] == '+' || *end != '\0' || x < min || x > max) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "%s must be an integer from %llu to %llu", name,
                          (unsigned long long)min, (unsigned long long)max);
        return false;
    }
    *out = x;
    return true;
}
