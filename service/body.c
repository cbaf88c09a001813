/*
 * body.c — JSON request bodies with known fields only (see body.h).
 */
#include <string.h>

#include "body.h"

/* "a, b, c" into out. */
static void list(const char *const fields[], char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; fields[i] != NULL && n < cap; i++) {
        int k = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", fields[i]);
        if (k < 0)
            break;
        n += (size_t)k;
    }
}

bool body_fields_known(httpd_req *req, json_t *obj, const char *what, const char *const fields[])
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        bool known = false;
        for (int i = 0; fields[i] != NULL && !known; i++)
            known = strcmp(k, fields[i]) == 0;
        if (!known) {
            char names[256];
            list(fields, names, sizeof names);
            httpd_reply_error(req, 400, "bad_request", NULL,
                              "%s has a field this API does not know: \"%.64s\" (it takes: %s)",
                              what, k, names);
            return false;
        }
    }
    return true;
}

json_t *body_object(httpd_req *req, const char *const fields[])
{
    json_t *body = httpd_body_json(req);
    if (body == NULL)
        return NULL;
    if (!json_is_object(body)) {
        char names[256];
        list(fields, names, sizeof names);
        httpd_reply_error(req, 400, "bad_request", NULL,
                          "the body must be a JSON object (with: %s)", names);
    } else if (body_fields_known(req, body, "the body", fields)) {
        return body;
    }
    json_decref(body);
    return NULL;
}
