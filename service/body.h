/*
 * body.h — JSON request bodies as the spec defines them: an object whose
 * fields are all known. A field the API does not have is refused (400,
 * naming it) rather than ignored: {"value":"x","ttl":5} must not look like
 * a key that expires.
 */
#ifndef PC_BODY_H
#define PC_BODY_H

#include <jansson.h>
#include <stdbool.h>

#include "httpd.h"

/* Whether every field of the object obj is one of fields (NULL-terminated);
 * otherwise answers 400 naming the first unknown one and what holds it
 * ("the body", "writes[3]"). */
bool body_fields_known(httpd_req *req, json_t *obj, const char *what, const char *const fields[]);

/* The request's body: a JSON object with only the given fields, or NULL
 * after answering 400 (not JSON, not an object, an unknown field). The
 * caller owns the result. */
json_t *body_object(httpd_req *req, const char *const fields[]);

#endif
