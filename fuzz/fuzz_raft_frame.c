/*
 * fuzz_raft_frame.c — common/raft_frame.c, the check of a Raft peer's
 * bytes before libraft 0.15 reads them.
 *
 * Input: one mode byte (taken mod 3), then:
 *   0: bytes, checked as a handshake. OK: used is 24 + a padded address
 *      buffer of at most RAFT_FRAME_ADDRESS_MAX within the input, the id
 *      is not 0, the address is the bytes at 24, printable, non-empty and
 *      NUL-terminated inside that buffer. MORE: fewer bytes than the
 *      longest handshake.
 *   1: two bytes of limits (0xff 0xff: the defaults), then bytes checked
 *      as a message. OK: used is 16 + a header length libraft writes for
 *      the type, within the input and raft_frame_max_header; the payload
 *      is the sum of the entries' lengths (AppendEntries, each a
 *      non-zero multiple of 8 within the limit) or the snapshot's length,
 *      within the limits. MORE: fewer bytes than 16 + the header length,
 *      so fewer than raft_frame_max_header (a whole header always
 *      decides).
 *   2: bytes checked as a configuration; when it passes it is well formed
 *      as read here, and an InstallSnapshot carrying it passes too (and
 *      fails when it does not).
 *      A whole OK message also goes through common/raft_codec.c: it
 *      decodes, encodes back to as many bytes with the same
 *      type, header length, term and payload, and those bytes decode and
 *      encode again to themselves.
 * In modes 0 and 1 a few prefixes are checked again, each in a buffer of
 * exactly its size: a prefix of an OK frame shorter than used is MORE and
 * one at least as long is OK with the same answer; a prefix that is BAD
 * makes the whole input BAD (the check never takes back a refusal).
 */
#include <string.h>

#include "fuzz.h"
#include "raft_codec.h"
#include "raft_frame.h"

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The verdict on buf[0..k), read from a buffer of exactly k bytes. */
static raft_frame_verdict hs_at(const uint8_t *buf, size_t k, size_t *used, uint64_t *id,
                                char *addr)
{
    uint8_t *c = malloc(k ? k : 1);
    FUZZ_CHECK(c != NULL);
    memcpy(c, buf, k);
    const char *why = NULL;
    raft_frame_verdict v =
        raft_frame_handshake(c, k, used, id, addr, RAFT_FRAME_ADDRESS_MAX + 1, &why);
    FUZZ_CHECK(v != RAFT_FRAME_BAD || why != NULL);
    free(c);
    return v;
}

static raft_frame_verdict msg_at(const uint8_t *buf, size_t k, const raft_frame_limits *lim,
                                 size_t *used, uint64_t *payload)
{
    uint8_t *c = malloc(k ? k : 1);
    FUZZ_CHECK(c != NULL);
    memcpy(c, buf, k);
    const char *why = NULL;
    raft_frame_verdict v = raft_frame_message(c, k, lim, used, payload, &why);
    FUZZ_CHECK(v != RAFT_FRAME_BAD || why != NULL);
    free(c);
    return v;
}

/* A few prefix lengths: around the fixed fields, the end, and halfway. */
static size_t prefix(size_t i, size_t len, size_t used)
{
    static const size_t fixed[] = {0, 7, 8, 15, 16, 23, 24, 40, 56};
    if (i < sizeof fixed / sizeof fixed[0])
        return fixed[i] < len ? fixed[i] : len;
    switch (i - sizeof fixed / sizeof fixed[0]) {
    case 0: return used > 0 ? used - 1 : 0;
    case 1: return used / 2;
    case 2: return used;
    default: return len / 2;
    }
}
#define PREFIXES 13

static void handshake(const uint8_t *p, size_t len)
{
    char *addr = malloc(RAFT_FRAME_ADDRESS_MAX + 1); /* exactly what the API asks */
    FUZZ_CHECK(addr != NULL);
    size_t used = 0;
    uint64_t id = 0;
    raft_frame_verdict v = hs_at(p, len, &used, &id, addr);
    if (v == RAFT_FRAME_OK) {
        size_t alen = used - RAFT_FRAME_HANDSHAKE_FIXED;
        FUZZ_CHECK(used >= 32 && used <= len);
        FUZZ_CHECK(alen % 8 == 0 && alen <= RAFT_FRAME_ADDRESS_MAX);
        FUZZ_CHECK(le64(p) == 1 && id != 0 && id == le64(p + 8) && le64(p + 16) == alen);
        size_t n = strnlen(addr, RAFT_FRAME_ADDRESS_MAX + 1);
        FUZZ_CHECK(n >= 1 && n < alen);
        FUZZ_CHECK(memcmp(addr, p + 24, n) == 0 && p[24 + n] == 0);
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(addr[i] >= 0x20 && addr[i] < 0x7f);
    } else if (v == RAFT_FRAME_MORE) {
        FUZZ_CHECK(len < RAFT_FRAME_HANDSHAKE_FIXED + RAFT_FRAME_ADDRESS_MAX);
    }
    for (size_t i = 0; i < PREFIXES; i++) {
        size_t k = prefix(i, len, used), u = 0;
        uint64_t pid = 0;
        raft_frame_verdict pv = hs_at(p, k, &u, &pid, addr);
        if (v == RAFT_FRAME_OK)
            FUZZ_CHECK(k < used ? pv == RAFT_FRAME_MORE
                                : pv == RAFT_FRAME_OK && u == used && pid == id);
        if (pv == RAFT_FRAME_BAD)
            FUZZ_CHECK(v == RAFT_FRAME_BAD);
    }
    free(addr);
}

/* What an OK message's header must be, read here on its own. */
static void check_ok_message(const uint8_t *p, size_t len, const raft_frame_limits *lim,
                             size_t used, uint64_t payload)
{
    raft_frame_limits l = raft_frame_limits_or_default(lim);
    uint64_t type = le64(p), H = le64(p + 8);
    const uint8_t *h = p + 16;
    FUZZ_CHECK(used >= RAFT_FRAME_PREAMBLE && used <= len && used == 16 + H);
    FUZZ_CHECK(used <= raft_frame_max_header(lim));
    FUZZ_CHECK(le64(h) != 0 && le64(h) <= (uint64_t)1 << 62); /* term */
    switch (type) {
    case RAFT_FRAME_REQUEST_VOTE:
        FUZZ_CHECK((H == 40 || H == 32) && payload == 0);
        break;
    case RAFT_FRAME_REQUEST_VOTE_RESULT:
        FUZZ_CHECK((H == 24 || H == 16) && payload == 0);
        break;
    case RAFT_FRAME_APPEND_ENTRIES_RESULT:
    case RAFT_FRAME_TIMEOUT_NOW:
        FUZZ_CHECK(H == 24 && payload == 0);
        break;
    case RAFT_FRAME_APPEND_ENTRIES: {
        uint64_t n = le64(h + 32), sum = 0;
        FUZZ_CHECK(n <= l.max_entries && H == 48 + 16 * n);
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *e = h + 40 + 16 * i;
            uint64_t elen = (uint64_t)e[12] | (uint64_t)e[13] << 8 | (uint64_t)e[14] << 16 |
                            (uint64_t)e[15] << 24;
            FUZZ_CHECK(le64(e) != 0 && e[8] >= 1 && e[8] <= 3);
            FUZZ_CHECK(elen > 0 && elen % 8 == 0 && elen <= l.max_entry_bytes);
            sum += elen;
        }
        FUZZ_CHECK(payload == sum && sum <= l.max_payload_bytes);
        break;
    }
    case RAFT_FRAME_INSTALL_SNAPSHOT: {
        uint64_t clen = le64(h + 32);
        FUZZ_CHECK(H == 56 + clen && clen % 8 == 0);
        const char *why = NULL;
        FUZZ_CHECK(raft_frame_configuration(h + 40, (size_t)clen, &why) == RAFT_FRAME_OK);
        FUZZ_CHECK(payload == le64(h + 40 + clen));
        FUZZ_CHECK(payload >= 1 && payload <= l.max_snapshot_bytes);
        break;
    }
    default:
        FUZZ_CHECK(0);
    }
}

/* The codec on a whole message the check passed (above). */
static void round_trip(const uint8_t *p, size_t len, const raft_frame_limits *lim, size_t used)
{
    struct raft_message m;
    const char *why = NULL;
    FUZZ_CHECK(raft_codec_decode(p, len, lim, &m, &why) == 0);
    uint8_t *y = NULL, *z = NULL;
    size_t ylen = 0, zlen = 0;
    FUZZ_CHECK(raft_codec_encode(&m, &y, &ylen, &why) == 0);
    /* A vote or its result of the older layout (no flags word) comes back
     * in the current one, 8 bytes longer. */
    uint64_t type = le64(p), H = le64(p + 8);
    size_t grown = (type == RAFT_FRAME_REQUEST_VOTE && H == 32) ||
                           (type == RAFT_FRAME_REQUEST_VOTE_RESULT && H == 16)
                       ? 8
                       : 0;
    FUZZ_CHECK(ylen == len + grown);
    FUZZ_CHECK(memcmp(y, p, 8) == 0 && le64(y + 8) == H + grown); /* type, H */
    FUZZ_CHECK(memcmp(y + 16, p + 16, 8) == 0);                   /* term */
    FUZZ_CHECK(memcmp(y + used + grown, p + used, len - used) == 0); /* the payload */
    raft_codec_free(&m);
    FUZZ_CHECK(raft_codec_decode(y, ylen, lim, &m, &why) == 0);
    FUZZ_CHECK(raft_codec_encode(&m, &z, &zlen, &why) == 0);
    FUZZ_CHECK(zlen == ylen && memcmp(z, y, ylen) == 0);
    raft_codec_free(&m);
    free(y);
    free(z);
}

static void message(const uint8_t *p, size_t left)
{
    if (left < 2)
        return;
    raft_frame_limits small = {
        .max_entries = 1 + (p[0] & 7),
        .max_entry_bytes = 8 * (1 + (uint64_t)(p[0] >> 3)),
        .max_payload_bytes = 8 * (1 + (uint64_t)p[1]),
        .max_snapshot_bytes = 1 + (uint64_t)p[1] * 64,
    };
    const raft_frame_limits *lim = p[0] == 0xff && p[1] == 0xff ? NULL : &small;
    p += 2;
    left -= 2;

    size_t used = 0;
    uint64_t payload = 0;
    raft_frame_verdict v = msg_at(p, left, lim, &used, &payload);
    if (v == RAFT_FRAME_OK) {
        check_ok_message(p, left, lim, used, payload);
        if (payload <= left - used)
            round_trip(p, used + (size_t)payload, lim, used);
    } else if (v == RAFT_FRAME_MORE) {
        FUZZ_CHECK(left < raft_frame_max_header(lim));
        if (left >= RAFT_FRAME_PREAMBLE)
            FUZZ_CHECK(left - RAFT_FRAME_PREAMBLE < le64(p + 8));
    }
    for (size_t i = 0; i < PREFIXES; i++) {
        size_t k = prefix(i, left, used), u = 0;
        uint64_t pl = 0;
        raft_frame_verdict pv = msg_at(p, k, lim, &u, &pl);
        if (v == RAFT_FRAME_OK)
            FUZZ_CHECK(k < used ? pv == RAFT_FRAME_MORE
                                : pv == RAFT_FRAME_OK && u == used && pl == payload);
        if (pv == RAFT_FRAME_BAD)
            FUZZ_CHECK(v == RAFT_FRAME_BAD);
    }
}

static void configuration(const uint8_t *p, size_t len)
{
    uint8_t *c = malloc(len ? len : 1);
    FUZZ_CHECK(c != NULL);
    memcpy(c, p, len);
    const char *why = NULL;
    raft_frame_verdict v = raft_frame_configuration(c, len, &why);
    FUZZ_CHECK(v == RAFT_FRAME_OK || (v == RAFT_FRAME_BAD && why != NULL));
    if (v == RAFT_FRAME_OK) {
        /* Walk it as configurationDecode does, with bounds of our own. */
        FUZZ_CHECK(len % 8 == 0 && c[0] == 1);
        uint64_t n = le64(c + 1);
        FUZZ_CHECK(n >= 1 && n <= RAFT_FRAME_CONF_SERVERS_MAX);
        size_t pos = 9;
        for (uint64_t i = 0; i < n; i++) {
            FUZZ_CHECK(pos + 8 <= len && le64(c + pos) != 0);
            pos += 8;
            size_t s = strnlen((const char *)c + pos, len - pos);
            FUZZ_CHECK(s >= 1 && s < RAFT_FRAME_ADDRESS_MAX && pos + s < len);
            pos += s + 1;
            FUZZ_CHECK(pos < len && c[pos] <= 2);
            pos++;
        }
        FUZZ_CHECK(pos <= len && len - pos < 8);
    }

    /* The same bytes inside an InstallSnapshot: the verdicts agree. */
    if (len % 8 == 0 && len >= 8 && len <= 4096) {
        size_t H = 56 + len, n = 16 + H;
        uint8_t *m = calloc(1, n);
        FUZZ_CHECK(m != NULL);
        const uint64_t words[] = {RAFT_FRAME_INSTALL_SNAPSHOT, H, 3, 10, 2, 1, len};
        for (size_t w = 0; w < 7; w++)
            for (int b = 0; b < 8; b++)
                m[8 * w + (size_t)b] = (uint8_t)(words[w] >> (8 * b));
        memcpy(m + 56, c, len);
        m[56 + len] = 1; /* data length 1 */
        size_t used = 0;
        uint64_t payload = 0;
        raft_frame_verdict mv = raft_frame_message(m, n, NULL, &used, &payload, &why);
        FUZZ_CHECK(mv == v);
        if (mv == RAFT_FRAME_OK)
            FUZZ_CHECK(used == n && payload == 1);
        free(m);
    }
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0: handshake(data + 1, size - 1); break;
    case 1: message(data + 1, size - 1); break;
    default: configuration(data + 1, size - 1); break;
    }
    return 0;
}
