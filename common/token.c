/*
 * token.c — load and check a bearer token (see token.h).
 */
#include "token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* RFC 6750 §2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
static bool b64token(const char *s, size_t len)
{
    size_t i = 0;
    for (; i < len && s[i] != '='; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c != '\0' && strchr("-._~+/", c) != NULL)))
            return false;
    }
    if (i == 0)
        return false;
    for (; i < len; i++)
        if (s[i] != '=')
            return false;
    return true;
}

int token_load(const char *path, token *t, char *err, size_t errlen)
{
    t->secret = NULL;
    t->len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open %s", path);
        return -1;
    }
    char *data = malloc(TOKEN_MAX + 3);
    size_t len = data ? fread(data, 1, TOKEN_MAX + 3, f) : 0;
    bool failed = data == NULL || ferror(f);
    fclose(f);
    if (failed) {
        free(data);
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    /* One line end ("\n" or "\r\n") may follow the token. */
    if (len > 0 && data[len - 1] == '\n')
        len--;
    if (len > 0 && data[len - 1] == '\r')
        len--;
    const char *why = NULL;
    if (len > TOKEN_MAX)
        why = "is longer than 4096 characters";
    else if (len < TOKEN_MIN)
        why = "is shorter than 16 characters";
    else if (!b64token(data, len))
        why = "has a character that a bearer token may not hold (a NUL, a space, a control "
              "character, more than one line...)";
    if (why != NULL) {
        free(data);
        snprintf(err, errlen, "the token in %s %s; make one with: openssl rand -hex 32", path, why);
        return -1;
    }
    data[len] = '\0';
    t->secret = data;
    t->len = len;
    return 0;
}

void token_free(token *t)
{
    free(t->secret);
    t->secret = NULL;
    t->len = 0;
}

bool token_matches(const token *t, const char *authorization)
{
    if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
        return false;
    const char *given = authorization + 7;
    while (*given == ' ')
        given++;
    return token_is(t, given);
}

bool token_is(const token *t, const char *given)
{
    if (given == NULL)
        return false;
    size_t glen = strlen(given);
    /* Every byte of the token is compared whatever the first difference,
     * and a shorter or longer answer costs the same: no timing hint. */
    unsigned diff = glen != t->len;
    for (size_t i = 0; i < t->len; i++)
        diff |= (unsigned char)t->secret[i] ^ (unsigned char)(i < glen ? given[i] : 0);
    return diff == 0;
}
