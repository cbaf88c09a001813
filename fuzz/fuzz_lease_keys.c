/*
 * fuzz_lease_keys.c — service/lease_keys.c: the leases' records as bytes
 * and a lease id as text (leases.h).
 *
 * Input: one mode byte, then the rest.
 *   mode 0: the rest is a path segment: lease_id_parse agrees with a
 *           reference (strtoull on the same digits, with the API's rules:
 *           1..2^53-1, digits only, no leading zero, at most 16 digits).
 *   mode 1: the rest is an engine key: lease_attach_parse and
 *           lease_record_parse accept only keys of their own shape, and
 *           what they accept encodes back to the same bytes.
 *   mode 2: 8 bytes of id, then a user key: encoded and parsed back, the
 *           same id and key; the key lies inside its lease's range and
 *           outside every other lease's.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "keyspace.h"
#include "leases.h"

static bool reference_id(const char *s, size_t len, uint64_t *id)
{
    char buf[32];
    if (len == 0 || len > 16 || s[0] == '0')
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    unsigned long long v = strtoull(buf, NULL, 10);
    if (errno != 0 || v == 0 || v >= LEASE_ID_LIMIT)
        return false;
    *id = v;
    return true;
}

static int cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c != 0 ? c : (alen > blen) - (alen < blen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned mode = data[0] % 3;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    if (mode == 0) {
        uint64_t got = 0, want = 0;
        bool ok = lease_id_parse(p, n, &got), ref = reference_id(p, n, &want);
        FUZZ_CHECK(ok == ref);
        FUZZ_CHECK(!ok || (got == want && got > 0 && got < LEASE_ID_LIMIT));
        return 0;
    }
    if (mode == 1) {
        uint64_t id;
        const char *user;
        size_t ulen;
        char out[LEASE_ATTACH_MAX];
        if (lease_attach_parse(p, n, &id, &user, &ulen)) {
            FUZZ_CHECK(n > LEASE_RECORD_KEY && n <= LEASE_ATTACH_MAX && p[0] == KS_LEASE_KEY);
            FUZZ_CHECK(ulen >= 1 && ulen <= SVC_MAX_KEY && user == p + LEASE_RECORD_KEY);
            FUZZ_CHECK(lease_attach_key(out, id, user, ulen) == n && memcmp(out, p, n) == 0);
        } else {
            FUZZ_CHECK(n <= LEASE_RECORD_KEY || n > LEASE_ATTACH_MAX || p[0] != KS_LEASE_KEY);
        }
        if (lease_record_parse(p, n, &id)) {
            FUZZ_CHECK(n == LEASE_RECORD_KEY && p[0] == KS_LEASE);
            lease_record_key(out, id);
            FUZZ_CHECK(memcmp(out, p, n) == 0);
        } else {
            FUZZ_CHECK(n != LEASE_RECORD_KEY || p[0] != KS_LEASE);
        }
        return 0;
    }
    const uint8_t *q = data + 1;
    size_t left = n;
    uint64_t id = fuzz_take(&q, &left, 8) % (LEASE_ID_LIMIT - 1) + 1, back;
    if (left == 0 || left > SVC_MAX_KEY)
        return 0;
    char key[LEASE_ATTACH_MAX], start[LEASE_RECORD_KEY], end[LEASE_RECORD_KEY];
    const char *user;
    size_t ulen, kn = lease_attach_key(key, id, q, left);
    FUZZ_CHECK(lease_attach_parse(key, kn, &back, &user, &ulen));
    FUZZ_CHECK(back == id && ulen == left && memcmp(user, q, left) == 0);
    lease_attach_range(id, start, end);
    FUZZ_CHECK(cmp(start, sizeof start, key, kn) < 0 && cmp(key, kn, end, sizeof end) < 0);
    lease_attach_range(id + 1, start, end); /* the next lease's range starts above it */
    FUZZ_CHECK(cmp(key, kn, start, sizeof start) < 0);
    return 0;
}
