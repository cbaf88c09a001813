/*
 * codec.h — keys and values between HTTP/JSON and bytes (DESIGN §2):
 * UTF-8 text by default, standard base64 with ?encoding=base64, and the
 * checks on their sizes. Every function that takes the request answers
 * 400 itself when the input is bad and then returns false.
 */
#ifndef PC_CODEC_H
#define PC_CODEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "httpd.h"

typedef enum { ENC_TEXT, ENC_BASE64 } codec_enc;

bool codec_encoding(httpd_req *req, codec_enc *enc);

/* The key in path parameter `param`, 1..4096 bytes, into out (4096 bytes). */
bool codec_path_key(httpd_req *req, const char *param, codec_enc enc, char *out, size_t *len);

/* A key from a JSON string (`what` names it in the error message). */
bool codec_json_key(httpd_req *req, json_t *j, const char *what, codec_enc enc, char *out,
                    size_t *len);

/* A key from a query parameter; absent gives len 0 and true. */
bool codec_query_key(httpd_req *req, const char *name, codec_enc enc, char *out, size_t *len);

/* A value from a JSON string, at most max bytes (413 beyond), into out. */
bool codec_json_value(httpd_req *req, json_t *j, const char *what, codec_enc enc, size_t max,
                      buf *out);

/* Bytes as a JSON string; NULL when text mode meets bytes that are not
 * UTF-8 (the caller answers 400 suggesting base64) or memory is short. */
json_t *codec_to_json(const void *p, size_t len, codec_enc enc);

/* The same, but in text mode bytes that are not UTF-8 come as base64 and
 * *b64 says so (the caller marks the field, e.g. "key_encoding":"base64",
 * so that someone else's binary key never fails a whole answer). NULL
 * only when memory is short. */
json_t *codec_to_json_marked(const void *p, size_t len, codec_enc enc, bool *b64);

/* An unsigned integer query parameter; absent gives def. */
bool codec_query_u64(httpd_req *req, const char *name, uint64_t def, uint64_t min,
                     uint64_t max, uint64_t *out);

bool codec_utf8_valid(const void *p, size_t len);

/* Answer 400: a stored key or value cannot be shown as UTF-8 text. */
void codec_reply_not_text(httpd_req *req);

#endif
