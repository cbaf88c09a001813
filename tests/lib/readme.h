/*
 * readme.h — README.md's example answers, held against the real ones, so
 * that the README shows what the programs answer.
 */
#ifndef PC_TL_README_H
#define PC_TL_README_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The example answer on the first line of README.md (the tests run from
 * the repository's root) that holds marker: the JSON object after its
 * "# {". NULL when there is none or it is not JSON. The caller owns it. */
json_t *tl_readme_example(const char *marker);

/* Whether got has what example shows and nothing else: the same keys,
 * recursively, each with a value of the same JSON type. On a difference,
 * false and the first one in why. */
bool tl_json_same_shape(const json_t *example, const json_t *got, char *why, size_t len);

#endif
