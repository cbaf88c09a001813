/*
 * readme.c — README.md's example answers (readme.h).
 */
#include "readme.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

json_t *tl_readme_example(const char *marker)
{
    char *text = tl_read_file("README.md", NULL);
    if (text == NULL)
        return NULL;
    json_t *j = NULL;
    char *at = strstr(text, marker);
    if (at != NULL) {
        char *eol = strchr(at, '\n');
        if (eol != NULL)
            *eol = '\0';
        char *json = strstr(at, "# {");
        if (json != NULL)
            j = json_loads(json + 2, 0, NULL);
    }
    free(text);
    return j;
}

static bool same_shape(const json_t *want, const json_t *got, const char *path, char *why,
                       size_t len)
{
    if (json_typeof(want) != json_typeof(got)) {
        snprintf(why, len, "%s: the README shows a JSON type %d, the answer has %d", path,
                 (int)json_typeof(want), (int)json_typeof(got));
        return false;
    }
    if (!json_is_object(want))
        return true;
    const char *key;
    json_t *v;
    char sub[256];
    json_object_foreach((json_t *)want, key, v) {
        snprintf(sub, sizeof sub, "%s.%s", path, key);
        json_t *g = json_object_get(got, key);
        if (g == NULL) {
            snprintf(why, len, "%s: in the README, not in the answer", sub);
            return false;
        }
        if (!same_shape(v, g, sub, why, len))
            return false;
    }
    json_object_foreach((json_t *)got, key, v) {
        if (json_object_get(want, key) == NULL) {
            snprintf(why, len, "%s.%s: in the answer, not in the README", path, key);
            return false;
        }
    }
    return true;
}

bool tl_json_same_shape(const json_t *example, const json_t *got, char *why, size_t len)
{
    return same_shape(example, got, "", why, len);
}
