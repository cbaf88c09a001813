/*
 * one_shot_parse.c — the JSON of a one-shot transaction (POST /v1/txn,
 * PUT or DELETE /v1/kv/{key}) into a one_shot (one_shot.h): part of the
 * HTTP layer, so it answers what is wrong with a request itself (400 with
 * what and where, 413, 500 out of memory), like writes.c and body.c; the
 * run (one_shot.c) answers nothing and returns its outcome.
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "keyspace.h"
#include "one_shot.h"

#define MAX_ITEMS 1000 /* per list of /v1/txn */

static int cmp_mutation(const void *a, const void *b)
{
    const pc_mutation *x = a, *y = b;
    return pc_key_cmp(x->key.data, x->key.len, y->key.data, y->key.len);
}

/* The writes as engine mutations, sorted by key (the engine takes them in
 * key order). A key written twice in one request is refused: which write
 * should win is not obvious, and it is most likely a client's mistake. */
static bool build_mutations(httpd_req *req, one_shot *o)
{
    const write_list *wl = &o->wl;
    size_t n = wl->n, off = 0;
    /* With a lease, each put also writes its attachment (leases.h). */
    size_t most = o->lease ? 2 * n : n;

    o->writes = calloc(most ? most : 1, sizeof(*o->writes));
    o->ekeys = malloc(wl->keys.len + n + 1 + (o->lease ? wl->keys.len + 9 * n : 0));
    if (o->writes == NULL || o->ekeys == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        size_t kn = ks_user(o->ekeys + off, writes_key(wl, i), wl->w[i].klen);
        o->writes[i] = (pc_mutation){
            .op = wl->w[i].deleted ? PC_OP_DELETE : PC_OP_PUT,
            .key = {o->ekeys + off, kn},
            .value = {wl->vals[i].data, wl->vals[i].len},
        };
        off += kn;
    }
    for (size_t i = 0; o->lease && i < wl->n; i++) {
        if (wl->w[i].deleted)
            continue;
        size_t kn = lease_attach_key(o->ekeys + off, o->lease, writes_key(wl, i), wl->w[i].klen);
        o->writes[n++] = (pc_mutation){.op = PC_OP_PUT, .key = {o->ekeys + off, kn}};
        off += kn;
        o->nputs++;
    }
    o->nwrites = n;
    qsort(o->writes, n, sizeof(*o->writes), cmp_mutation);
    for (size_t i = 1; i < n; i++) {
        if (cmp_mutation(&o->writes[i - 1], &o->writes[i]) == 0) {
            httpd_reply_error(req, 400, "bad_request", NULL, "a key is written twice");
            return false;
        }
    }
    return true;
}

static bool bad_condition(httpd_req *req)
{
    if (!httpd_replied(req))
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "each condition is {\"key\"} with exactly one of \"commit_ts\", "
                          "\"exists\" or \"value\"");
    return false;
}

/* One condition's kind and operand (its key is parsed with the others). */
static bool parse_condition(httpd_req *req, svc *s, json_t *it, codec_enc enc, condition *c)
{
    json_t *ts = json_object_get(it, "commit_ts"), *ex = json_object_get(it, "exists"),
           *v = json_object_get(it, "value");
    if ((ts != NULL) + (ex != NULL) + (v != NULL) != 1)
        return bad_condition(req);
    if (ts != NULL) {
        if (!json_is_integer(ts) || json_integer_value(ts) < 0)
            return bad_condition(req);
        c->kind = COND_COMMIT_TS;
        c->commit_ts = (uint64_t)json_integer_value(ts);
    } else if (ex != NULL) {
        if (!json_is_boolean(ex))
            return bad_condition(req);
        c->kind = COND_EXISTS;
        c->exists = json_is_true(ex);
    } else {
        c->kind = COND_VALUE;
        if (!codec_json_value(req, v, "conditions[].value", enc, s->cfg.max_value_bytes,
                              &c->value))
            return false;
    }
    return true;
}

static bool parse_conditions(httpd_req *req, svc *s, json_t *conds, one_shot *o)
{
    size_t n = json_array_size(conds), i;
    json_t *it, *keys;

    if (conds != NULL && !json_is_array(conds)) {
        httpd_reply_error(req, 400, "bad_request", NULL, "\"conditions\" must be an array");
        return false;
    }
    if (n > MAX_ITEMS) {
        httpd_reply_error(req, 400, "bad_request", NULL, "at most %d conditions", MAX_ITEMS);
        return false;
    }
    /* The keys as a list of their own, parsed like any list of keys. */
    if ((keys = json_array()) == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    json_array_foreach(conds, i, it) {
        static const char *const fields[] = {"key", "commit_ts", "exists", "value", NULL};
        json_t *k = json_object_get(it, "key");
        if (!json_is_object(it) || k == NULL) {
            json_decref(keys);
            return bad_condition(req);
        }
        char what[48];
        snprintf(what, sizeof what, "conditions[%zu]", i);
        if (!body_fields_known(req, it, what, fields)) {
            json_decref(keys);
            return false;
        }
        json_array_append(keys, k);
    }
    bool ok = keys_parse(req, keys, "conditions[].key", o->enc, MAX_ITEMS, &o->ckeys);
    json_decref(keys);
    if (!ok)
        return false;
    if ((o->conds = calloc(n ? n : 1, sizeof(*o->conds))) == NULL) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    json_array_foreach(conds, i, it) {
        if (!parse_condition(req, s, it, o->enc, &o->conds[i]))
            return false;
    }
    return true;
}

/* "lease": a lease id, or absent (0). false when it answered. */
static bool parse_lease(httpd_req *req, json_t *body, one_shot *o)
{
    json_t *l = json_object_get(body, "lease");
    if (l == NULL)
        return true;
    if (!json_is_integer(l) || json_integer_value(l) <= 0) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "\"lease\" must be a lease id (a positive integer from POST /v1/leases)");
        return false;
    }
    o->lease = (uint64_t)json_integer_value(l);
    return true;
}

bool one_shot_parse_txn(httpd_req *req, svc *s, json_t *body, one_shot *o)
{
    static const char *const fields[] = {"conditions", "reads", "writes", "lease", NULL};
    if (!json_is_object(body)) {
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "the body must be {\"conditions\":[...],\"reads\":[...],\"writes\":[...]}");
        return false;
    }
    if (!body_fields_known(req, body, "the body", fields))
        return false;
    return parse_lease(req, body, o) &&
           parse_conditions(req, s, json_object_get(body, "conditions"), o) &&
           keys_parse(req, json_object_get(body, "reads"), "reads", o->enc, MAX_ITEMS,
                      &o->reads) &&
           writes_parse(req, json_object_get(body, "writes"), o->enc, MAX_ITEMS,
                        s->cfg.max_value_bytes, &o->wl) &&
           build_mutations(req, o);
}

/* The one write of a single request as a write list. */
static bool single_write_list(httpd_req *req, write_list *wl, const char *key, size_t klen,
                              bool del)
{
    wl->w = calloc(1, sizeof(*wl->w));
    wl->vals = calloc(1, sizeof(*wl->vals));
    wl->cap = 1;
    if (wl->w == NULL || wl->vals == NULL || buf_append(&wl->keys, key, klen) != 0) {
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return false;
    }
    wl->w[0].klen = klen;
    wl->w[0].deleted = del;
    wl->n = 1;
    return true;
}

bool one_shot_parse_single(httpd_req *req, svc *s, bool del, one_shot *o)
{
    char key[SVC_MAX_KEY];
    size_t klen;
    json_t *body = NULL, *v = NULL, *cas = NULL;
    bool ok = false;

    if (!codec_encoding(req, &o->enc) || !codec_path_key(req, "key", o->enc, key, &klen))
        return false;
    if (!del || httpd_body(req, NULL)[0] != '\0') {
        static const char *const put_fields[] = {"value", "if_commit_ts", "lease", NULL};
        static const char *const del_fields[] = {"if_commit_ts", NULL};
        if ((body = body_object(req, del ? del_fields : put_fields)) == NULL)
            return false;
        v = json_object_get(body, "value");
        cas = json_object_get(body, "if_commit_ts");
        if (!json_is_object(body) || (!del && v == NULL) || (del && v != NULL) ||
            (cas != NULL && (!json_is_integer(cas) || json_integer_value(cas) < 0))) {
            httpd_reply_error(req, 400, "bad_request", NULL,
                              del ? "the body may only hold {\"if_commit_ts\": C}"
                                  : "the body must be {\"value\": ..., \"if_commit_ts\"?: C, "
                                    "\"lease\"?: ID}");
            goto out;
        }
        if (!parse_lease(req, body, o))
            goto out;
    }
    if (!single_write_list(req, &o->wl, key, klen, del) ||
        (v != NULL &&
         !codec_json_value(req, v, "value", o->enc, s->cfg.max_value_bytes, &o->wl.vals[0])))
        goto out;
    o->wl.bytes = klen + o->wl.vals[0].len;
    if (cas != NULL) {
        /* if_commit_ts: a condition on the key's latest commit_ts. */
        o->conds = calloc(1, sizeof(*o->conds));
        o->ckeys.off = calloc(1, sizeof(size_t));
        o->ckeys.len = calloc(1, sizeof(size_t));
        if (o->conds == NULL || o->ckeys.off == NULL || o->ckeys.len == NULL ||
            buf_append(&o->ckeys.keys, key, klen) != 0) {
            httpd_reply_error(req, 500, "internal", NULL, "out of memory");
            goto out;
        }
        o->ckeys.len[0] = klen;
        o->ckeys.n = 1;
        o->conds[0] = (condition){.kind = COND_COMMIT_TS,
                                  .commit_ts = (uint64_t)json_integer_value(cas)};
    }
    ok = build_mutations(req, o);
out:
    json_decref(body);
    return ok;
}
