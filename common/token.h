/*
 * token.h — the shared secret of bearer-token authentication (RFC 6750),
 * as both programs take it: --auth-token-file.
 *
 * A token file holds one token, optionally followed by a line end. The
 * token must be 16 to 4096 characters of RFC 6750's b64token alphabet
 * (letters, digits, - . _ ~ + /, then '=' padding): no NUL, no spaces, no
 * control characters, so that what the file says is exactly what a client
 * sends. `openssl rand -hex 32 > token` makes a good one.
 */
#ifndef PERCOLATOR_TOKEN_H
#define PERCOLATOR_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#define TOKEN_MIN 16
#define TOKEN_MAX 4096

typedef struct token {
    char *secret;             /* NUL-terminated, len bytes */
    size_t len;
} token;

/* Read and check the token in path. 0, or -1 with the reason in err. */
int token_load(const char *path, token *t, char *err, size_t errlen);
void token_free(token *t);

/* Whether an Authorization header value carries the token: the scheme
 * "Bearer" in any case, spaces, then the token. The comparison takes the
 * same time whatever the header holds (only the token's own length shows). */
bool token_matches(const token *t, const char *authorization);
/* Whether value is the token itself (a header that carries it bare), in
 * the same constant time. */
bool token_is(const token *t, const char *value);

#endif
