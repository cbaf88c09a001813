/*
 * lease_keys.c — the leases' records as bytes (leases.h): a lease's key
 * 'l' id and an attachment's key 'm' id user-key, the id in 8 big-endian
 * bytes so that a lease's attachments are one range of keys; and a lease
 * id as the API writes it, in decimal.
 */
#include <string.h>

#include "keyspace.h"
#include "leases.h"

static void put_id(char *out, uint64_t id)
{
    for (int i = 7; i >= 0; i--, id >>= 8)
        out[i] = (char)(id & 0xff);
}

static uint64_t get_id(const char *in)
{
    uint64_t id = 0;
    for (int i = 0; i < 8; i++)
        id = id << 8 | (unsigned char)in[i];
    return id;
}

void lease_record_key(char *out, uint64_t id)
{
    out[0] = KS_LEASE;
    put_id(out + 1, id);
}

bool lease_record_parse(const void *k, size_t len, uint64_t *id)
{
    const char *p = k;
    if (len != LEASE_RECORD_KEY || p[0] != KS_LEASE)
        return false;
    *id = get_id(p + 1);
    return true;
}

size_t lease_attach_key(char *out, uint64_t id, const void *key, size_t klen)
{
    out[0] = KS_LEASE_KEY;
    put_id(out + 1, id);
    memcpy(out + LEASE_RECORD_KEY, key, klen);
    return LEASE_RECORD_KEY + klen;
}

void lease_attach_range(uint64_t id, char *start, char *end)
{
    start[0] = end[0] = KS_LEASE_KEY;
    put_id(start + 1, id);
    put_id(end + 1, id + 1);
}

bool lease_attach_parse(const void *k, size_t len, uint64_t *id, const char **user,
                        size_t *ulen)
{
    const char *p = k;
    if (len <= LEASE_RECORD_KEY || len > LEASE_ATTACH_MAX || p[0] != KS_LEASE_KEY)
        return false;
    *id = get_id(p + 1);
    *user = p + LEASE_RECORD_KEY;
    *ulen = len - LEASE_RECORD_KEY;
    return true;
}

bool lease_id_parse(const char *s, size_t len, uint64_t *id)
{
    uint64_t v = 0;
    /* 2^53 - 1 has 16 digits; a leading zero is not an id's. */
    if (len == 0 || len > 16 || s[0] == '0')
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v >= LEASE_ID_LIMIT)
        return false;
    *id = v;
    return true;
}
