/*
 * base64.h — standard base64 with padding (RFC 4648 section 4): how the
 * service's API carries binary keys and values (docs/DESIGN.md section 2)
 * and the placement driver carries region bounds (section 6.3).
 */
#ifndef PC_BASE64_H
#define PC_BASE64_H

#include <stddef.h>

/* Encode len bytes: dst needs 4 * ((len + 2) / 3) + 1 bytes (NUL-ended);
 * the encoded length. */
size_t b64_encode(const void *src, size_t len, char *dst);
/* Decode: -1 when malformed (a length not a multiple of 4, a character
 * outside the alphabet, padding not at the end), else the length; dst
 * needs (len / 4) * 3 bytes. */
long b64_decode(const char *src, size_t len, unsigned char *dst);

#endif
