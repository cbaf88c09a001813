/*
 * region_call_wire.c — a region call as JSON (region_call.h): what a node
 * sends, and what the node that leads the region reads (every field
 * checked and bounded: it comes off the network). The answer:
 * region_call_answer.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "codec.h"
#include "region_call.h"

#define TS_LIMIT ((UINT64_C(1) << 53) - 1)

static const char *const names[ACT_COUNT] = {
    [ACT_PREWRITE] = "prewrite",         [ACT_COMMIT_PRIMARY] = "commit_primary",
    [ACT_COMMIT] = "commit",             [ACT_ROLLBACK] = "rollback",
    [ACT_HEARTBEAT] = "heartbeat",       [ACT_CHECK_TXN_STATUS] = "check_txn_status",
    [ACT_RESOLVE_LOCK] = "resolve_lock", [ACT_GET] = "get",
    [ACT_GET_LATEST] = "get_latest",     [ACT_NOTIFY_CLEAR] = "notify_clear",
    [ACT_SCAN] = "scan",                 [ACT_OLDEST_LOCK] = "oldest_lock",
    [ACT_GC] = "gc",                     [ACT_READ_INDEX] = "read_index",
};

const char *act_name(act_kind k)
{
    return k < ACT_COUNT ? names[k] : NULL;
}

act_kind act_kind_named(const char *name)
{
    for (int k = 0; k < ACT_COUNT; k++)
        if (name != NULL && strcmp(names[k], name) == 0)
            return (act_kind)k;
    return ACT_COUNT;
}

json_t *rcw_b64(const void *p, size_t len)
{
    return codec_to_json(p, len, ENC_BASE64);
}

int rcw_set(json_t *o, const char *k, json_t *v)
{
    return v != NULL ? json_object_set_new(o, k, v) : -1;
}

json_t *region_call_encode(const act_call *a, const char *run, uint64_t observers,
                           int owner_verdict)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)observers);
    json_t *o = json_object();
    json_t *list = json_array();
    int bad = o == NULL || list == NULL;
    const pc_txn_meta *t = &a->meta;
    bad |= rcw_set(o, "action", json_string(names[a->kind])) |
           rcw_set(o, "run", json_string(run)) |
           rcw_set(o, "observers", json_string(hex));
    if (owner_verdict != ACT_OWNER_UNKNOWN)
        bad |= rcw_set(o, "owner_alive", json_boolean(owner_verdict == ACT_OWNER_ALIVE));
    bad |= rcw_set(o, "start_ts", json_integer((json_int_t)t->start_ts)) |
           rcw_set(o, "primary", rcw_b64(t->primary.data, t->primary.len)) |
           rcw_set(o, "owner", rcw_b64(t->owner.data, t->owner.len)) |
           rcw_set(o, "wall_ms", json_integer((json_int_t)t->wall_ms)) |
           rcw_set(o, "ttl_ms", json_integer((json_int_t)t->ttl_ms)) |
           rcw_set(o, "ts", json_integer((json_int_t)a->ts));
    if (a->kind == ACT_GET_LATEST && a->step_over)
        bad |= rcw_set(o, "step_over", json_true());
    if (a->kind == ACT_SCAN)
        bad |= rcw_set(o, "limit", json_integer((json_int_t)a->limit)) |
               rcw_set(o, "max_bytes", json_integer((json_int_t)a->max_bytes));
    for (size_t i = 0; !bad && i < a->n; i++) {
        json_t *x;
        if (a->kind == ACT_PREWRITE) {
            const pc_mutation *m = &a->m[i];
            x = json_pack("{s:s,s:o,s:o}", "op", m->op == PC_OP_PUT ? "put" : "delete", "key",
                          rcw_b64(m->key.data, m->key.len), "value",
                          rcw_b64(m->value.data, m->op == PC_OP_PUT ? m->value.len : 0));
        } else {
            x = rcw_b64(a->keys[i].data, a->keys[i].len);
        }
        bad |= x == NULL || json_array_append_new(list, x) != 0;
    }
    if (list != NULL)
        bad |= rcw_set(o, a->kind == ACT_PREWRITE ? "mutations" : "keys", list);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

bool rcw_u64(json_t *o, const char *k, uint64_t *v)
{
    json_t *j = json_object_get(o, k);
    if (j == NULL) {
        *v = 0;
        return true;
    }
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return false;
    *v = (uint64_t)json_integer_value(j);
    return true;
}

/* Decode a base64 string into *at (advancing it), at most max bytes. */
bool rcw_take_b64(json_t *j, size_t max, unsigned char **at, pc_slice *out)
{
    if (!json_is_string(j))
        return false;
    size_t len = json_string_length(j);
    if (len / 4 * 3 > max + 2)
        return false;
    long n = b64_decode(json_string_value(j), len, *at);
    if (n < 0 || (size_t)n > max)
        return false;
    *out = (pc_slice){*at, (size_t)n};
    *at += n;
    return true;
}

static size_t b64_room(json_t *j)
{
    return json_is_string(j) ? json_string_length(j) / 4 * 3 + 3 : 0;
}

void region_call_in_free(region_call_in *in)
{
    free(in->m);
    free(in->keys);
    free(in->bytes);
    in->m = NULL;
    in->keys = NULL;
    in->bytes = NULL;
}

bool region_call_decode(json_t *body, size_t max_value, region_call_in *in, char *why,
                        size_t whylen)
{
    memset(in, 0, sizeof *in);
    act_call *a = &in->a;
    json_t *run = json_object_get(body, "run");
    a->kind = act_kind_named(json_string_value(json_object_get(body, "action")));
    if (a->kind == ACT_COUNT) {
        int at = snprintf(why, whylen, "action must be one of");
        for (int k = 0; k < ACT_COUNT && at >= 0 && (size_t)at < whylen; k++)
            at += snprintf(why + at, whylen - (size_t)at, "%s %s", k > 0 ? "," : "", names[k]);
        return false;
    }
    if (!json_is_string(run) || json_string_length(run) == 0 ||
        json_string_length(run) >= sizeof in->run ||
        strlen(json_string_value(run)) != json_string_length(run)) {
        snprintf(why, whylen, "run must be the caller's run id (a string of 1 to %zu bytes)",
                 sizeof in->run - 1);
        return false;
    }
    memcpy(in->run, json_string_value(run), json_string_length(run) + 1);
    const char *hex = json_string_value(json_object_get(body, "observers"));
    char *end = NULL;
    if (hex == NULL || strlen(hex) != 16 || strspn(hex, "0123456789abcdef") != 16 ||
        (in->observers = strtoull(hex, &end, 16), *end != '\0')) {
        snprintf(why, whylen, "observers must be the digest of the caller's observed prefixes "
                              "(16 hex digits)");
        return false;
    }
    if (!rcw_u64(body, "start_ts", &a->meta.start_ts) ||
        !rcw_u64(body, "wall_ms", &a->meta.wall_ms) ||
        !rcw_u64(body, "ttl_ms", &a->meta.ttl_ms) || !rcw_u64(body, "ts", &a->ts) ||
        a->meta.start_ts > TS_LIMIT || a->meta.wall_ms > TS_LIMIT || a->meta.ttl_ms > TS_LIMIT ||
        a->ts > TS_LIMIT) {
        /* The oracle's timestamps are below 2^53 (as the API's): a record
         * past them would raise the store's floor beyond any it hands out. */
        snprintf(why, whylen, "start_ts, wall_ms, ttl_ms and ts must be integers from 0 to 2^53-1");
        return false;
    }
    json_t *primary = json_object_get(body, "primary"), *owner = json_object_get(body, "owner");
    json_t *verdict = json_object_get(body, "owner_alive");
    if (verdict != NULL && !json_is_boolean(verdict)) {
        snprintf(why, whylen, "owner_alive must be true or false");
        return false;
    }
    json_t *step = json_object_get(body, "step_over");
    if (step != NULL && !json_is_boolean(step)) {
        snprintf(why, whylen, "step_over must be true or false");
        return false;
    }
    a->step_over = json_is_true(step);
    a->owner_verdict = verdict == NULL        ? ACT_OWNER_UNKNOWN
                       : json_is_true(verdict) ? ACT_OWNER_ALIVE
                                               : ACT_OWNER_DEAD;
    json_t *list = json_object_get(body, a->kind == ACT_PREWRITE ? "mutations" : "keys");
    if (list != NULL && (!json_is_array(list) || json_array_size(list) > REGION_CALL_MAX_ITEMS)) {
        snprintf(why, whylen, "%s must be an array of at most %d items",
                 a->kind == ACT_PREWRITE ? "mutations" : "keys", REGION_CALL_MAX_ITEMS);
        return false;
    }
    /* One block for every decoded byte: its size from the strings' lengths. */
    size_t room = b64_room(primary) + b64_room(owner), n = json_array_size(list);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(list, i);
        room += a->kind == ACT_PREWRITE
                    ? b64_room(json_object_get(x, "key")) + b64_room(json_object_get(x, "value"))
                    : b64_room(x);
    }
    in->bytes = malloc(room + 1);
    in->m = a->kind == ACT_PREWRITE ? calloc(n + 1, sizeof *in->m) : NULL;
    in->keys = a->kind != ACT_PREWRITE ? calloc(n + 1, sizeof *in->keys) : NULL;
    if (in->bytes == NULL || (in->m == NULL && in->keys == NULL)) {
        snprintf(why, whylen, "out of memory");
        return false;
    }
    unsigned char *at = in->bytes;
    if ((primary != NULL && !rcw_take_b64(primary, PC_KEY_MAX, &at, &a->meta.primary)) ||
        (owner != NULL && !rcw_take_b64(owner, PC_OWNER_MAX, &at, &a->meta.owner))) {
        snprintf(why, whylen, "primary and owner must be base64, at most %d and %d bytes",
                 PC_KEY_MAX, PC_OWNER_MAX);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(list, i);
        bool ok;
        if (a->kind == ACT_PREWRITE) {
            const char *op = json_string_value(json_object_get(x, "op"));
            pc_mutation *m = &in->m[i];
            m->op = op != NULL && strcmp(op, "put") == 0      ? PC_OP_PUT
                    : op != NULL && strcmp(op, "delete") == 0 ? PC_OP_DELETE
                                                              : 0;
            ok = m->op != 0 && rcw_take_b64(json_object_get(x, "key"), PC_KEY_MAX, &at, &m->key) &&
                 rcw_take_b64(json_object_get(x, "value"), max_value, &at, &m->value);
        } else {
            ok = rcw_take_b64(x, PC_KEY_MAX, &at, &in->keys[i]);
        }
        if (!ok) {
            snprintf(why, whylen, "%s[%zu] must be %s", a->kind == ACT_PREWRITE ? "mutations" : "keys",
                     i,
                     a->kind == ACT_PREWRITE
                         ? "{\"op\": \"put\" or \"delete\", \"key\": base64, \"value\": base64}"
                         : "a key in base64");
            return false;
        }
    }
    a->m = in->m;
    a->keys = in->keys;
    a->n = n;
    /* What each kind needs; the engine checks the rest (PC_INVALID). */
    bool one_key = a->kind == ACT_COMMIT_PRIMARY || a->kind == ACT_RESOLVE_LOCK ||
                   a->kind == ACT_GET || a->kind == ACT_GET_LATEST ||
                   a->kind == ACT_NOTIFY_CLEAR || a->kind == ACT_OLDEST_LOCK ||
                   a->kind == ACT_GC || a->kind == ACT_READ_INDEX;
    bool keys = a->kind == ACT_COMMIT || a->kind == ACT_ROLLBACK;
    uint64_t limit = 0, max_bytes = 0;
    if (!rcw_u64(body, "limit", &limit) || !rcw_u64(body, "max_bytes", &max_bytes) ||
        (a->kind == ACT_SCAN && (n != 2 || limit < 1 || limit > REGION_CALL_MAX_SCAN ||
                                 max_bytes < 1 || max_bytes > ((uint64_t)1 << 40)))) {
        snprintf(why, whylen, "scan takes two keys (start, end: \"\" for none), limit 1 to %d "
                              "and max_bytes 1 to 2^40",
                 REGION_CALL_MAX_SCAN);
        return false;
    }
    a->limit = (size_t)limit;
    a->max_bytes = (size_t)max_bytes;
    if (a->kind == ACT_GC && a->ts == 0) {
        snprintf(why, whylen, "gc takes a safe point ts of 1 or more");
        return false;
    }
    if ((one_key && n != 1) || ((keys || a->kind == ACT_PREWRITE) && n == 0)) {
        snprintf(why, whylen, "%s takes %s", names[a->kind],
                 one_key ? "one key" : keys ? "one key or more" : "one mutation or more");
        return false;
    }
    return true;
}
