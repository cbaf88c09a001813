/*
 * bank.c — see bank.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bank.h"

long tl_bank_balance(json_t *item)
{
    const char *v = json_string_value(json_object_get(item, "value"));
    return v != NULL ? strtol(v, NULL, 10) : 0;
}

/* ,{"key":marker,"value":"x"} or nothing. */
static void marker_write(char *out, size_t len, const char *marker)
{
    if (marker != NULL)
        snprintf(out, len, ",{\"key\":\"%s\",\"value\":\"x\"}", marker);
    else
        out[0] = '\0';
}

static tl_transfer by_session(tl_stack *st, const char *a, const char *b, long amount,
                              const char *marker)
{
    char path[160], body[1024], id[64], mk[160];
    json_t *j;
    tl_transfer r = {0};

    if ((r.status = tl_try_call(st, "POST", "/v1/txns", NULL, &j)) != 201) {
        json_decref(j);
        return r;
    }
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/txns/%s/batch", id);
    snprintf(body, sizeof(body), "{\"reads\":[\"%s\",\"%s\"]}", a, b);
    if ((r.status = tl_try_call(st, "POST", path, body, &j)) != 200) {
        json_decref(j);
        goto give_up;
    }
    json_t *reads = json_object_get(j, "reads");
    long fa = tl_bank_balance(json_array_get(reads, 0)), tb = tl_bank_balance(json_array_get(reads, 1));
    json_decref(j);
    if (amount > fa)
        amount = fa;
    marker_write(mk, sizeof(mk), marker);
    snprintf(body, sizeof(body),
             "{\"writes\":[{\"key\":\"%s\",\"value\":\"%ld\"},{\"key\":\"%s\",\"value\":\"%ld\"}%s]}",
             a, fa - amount, b, tb + amount, mk);
    if ((r.status = tl_try_call(st, "POST", path, body, NULL)) != 200)
        goto give_up;
    snprintf(path, sizeof(path), "/v1/txns/%s/commit", id);
    r.committing = true;
    r.status = tl_try_call(st, "POST", path, NULL, NULL);
    return r;
give_up:
    /* Best effort: the session's lease ends it anyway. */
    snprintf(path, sizeof(path), "/v1/txns/%s/rollback", id);
    tl_try_call(st, "POST", path, NULL, NULL);
    return r;
}

static tl_transfer by_one_shot(tl_stack *st, const char *a, const char *b, long amount,
                               const char *marker)
{
    char body[1024], mk[160];
    json_t *j;
    tl_transfer r = {0};

    snprintf(body, sizeof(body), "{\"reads\":[\"%s\",\"%s\"]}", a, b);
    if ((r.status = tl_try_call(st, "POST", "/v1/txn", body, &j)) != 200) {
        json_decref(j);
        return r;
    }
    json_t *reads = json_object_get(j, "reads");
    json_t *ra = json_array_get(reads, 0), *rb = json_array_get(reads, 1);
    long fa = tl_bank_balance(ra), tb = tl_bank_balance(rb);
    long long ca = json_integer_value(json_object_get(ra, "commit_ts"));
    long long cb = json_integer_value(json_object_get(rb, "commit_ts"));
    json_decref(j);
    if (amount > fa)
        amount = fa;
    marker_write(mk, sizeof(mk), marker);
    snprintf(body, sizeof(body),
             "{\"conditions\":[{\"key\":\"%s\",\"commit_ts\":%lld},{\"key\":\"%s\","
             "\"commit_ts\":%lld}],\"writes\":[{\"key\":\"%s\",\"value\":\"%ld\"},{\"key\":"
             "\"%s\",\"value\":\"%ld\"}%s]}",
             a, ca, b, cb, a, fa - amount, b, tb + amount, mk);
    r.committing = true;
    r.status = tl_try_call(st, "POST", "/v1/txn", body, NULL);
    return r;
}

tl_transfer tl_bank_transfer(tl_stack *st, bool session, const char *a, const char *b,
                             long amount, const char *marker)
{
    return session ? by_session(st, a, b, amount, marker) : by_one_shot(st, a, b, amount, marker);
}
