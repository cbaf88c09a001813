/*
 * test_raft_frame.c — common/raft_frame.c, the check of what a Raft peer
 * sends before libraft 0.15 reads it.
 *
 * Frames are built here the way libraft 0.15 writes them (uv_encoding.c,
 * uv_tcp_connect.c, configuration.c), with the bytes libraft leaves
 * unwritten set to junk; the configuration encoder is compared with
 * libraft's own (raft_configuration_encode). Each good frame is OK with
 * the right lengths and MORE at every proper prefix; each bad one is BAD,
 * and never OK at a prefix. The last test runs a real libraft node over
 * its own TCP transport and passes everything it sends through the check.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "raft_frame.h"
#include "testlib.h"

#define JUNK 0xA5 /* bytes libraft mallocs and never writes */
#define TERM_MAX ((uint64_t)1 << 62)

/* ---- encoders, after libraft 0.15 ------------------------------------ */

typedef struct {
    uint8_t *b;
    size_t n, cap;
} frame;

static frame fnew(void)
{
    frame f = {.b = malloc(64 * 1024), .n = 0, .cap = 64 * 1024};
    assert_non_null(f.b);
    memset(f.b, JUNK, f.cap);
    return f;
}

static void put(frame *f, uint64_t v, int bytes) /* little endian (byte.h) */
{
    assert_true(f->n + (size_t)bytes <= f->cap);
    for (int i = 0; i < bytes; i++)
        f->b[f->n++] = (uint8_t)(v >> (8 * i));
}
static void p64(frame *f, uint64_t v) { put(f, v, 8); }
static void junk(frame *f, size_t n) { f->n += n; } /* left as JUNK */

static void set64(frame *f, size_t off, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        f->b[off + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static uint64_t pad8(uint64_t n) { return (n + 7) / 8 * 8; }

/* uv_tcp_connect.c:uvTcpEncodeHandshake with an address buffer of alen
 * bytes (the address and its NUL cut to fit, the rest left as junk). */
static frame handshake_len(uint64_t proto, uint64_t id, const char *addr, uint64_t alen)
{
    frame f = fnew();
    size_t slen = strlen(addr);
    p64(&f, proto);
    p64(&f, id);
    p64(&f, alen);
    if (alen > f.cap - f.n)
        return f; /* only the fixed part: the length alone is refused */
    memcpy(f.b + f.n, addr, slen + 1 <= alen ? slen + 1 : (size_t)alen);
    f.n += (size_t)alen;
    return f;
}

/* As libraft writes it: the buffer is the address and NUL, padded to 8. */
static frame handshake(uint64_t proto, uint64_t id, const char *addr)
{
    return handshake_len(proto, id, addr, pad8(strlen(addr) + 1));
}

/* The preamble with H filled in by done(). */
static frame msg(uint64_t type)
{
    frame f = fnew();
    p64(&f, type);
    p64(&f, 0);
    return f;
}
static frame done(frame f)
{
    set64(&f, 8, f.n - 16);
    return f;
}

static frame request_vote(uint64_t term, uint64_t cand, uint64_t lli, uint64_t llt, int v1)
{
    frame f = msg(RAFT_FRAME_REQUEST_VOTE);
    p64(&f, term);
    p64(&f, cand);
    p64(&f, lli);
    p64(&f, llt);
    if (!v1)
        p64(&f, 2); /* flags: pre_vote */
    return done(f);
}

/* v1: the legacy form without flags; else flags with pre_vote (bit 0). */
static frame request_vote_result(uint64_t term, uint64_t granted, int v1, int pre)
{
    frame f = msg(RAFT_FRAME_REQUEST_VOTE_RESULT);
    p64(&f, term);
    p64(&f, granted);
    if (!v1)
        p64(&f, pre ? 1 : 0);
    return done(f);
}

static frame append_entries_result(uint64_t term, uint64_t rejected, uint64_t lli)
{
    frame f = msg(RAFT_FRAME_APPEND_ENTRIES_RESULT);
    p64(&f, term);
    p64(&f, rejected);
    p64(&f, lli);
    return done(f);
}

static frame timeout_now(uint64_t term, uint64_t lli, uint64_t llt)
{
    frame f = msg(RAFT_FRAME_TIMEOUT_NOW);
    p64(&f, term);
    p64(&f, lli);
    p64(&f, llt);
    return done(f);
}

typedef struct {
    uint64_t term;
    uint8_t type;
    uint32_t len;
} entry;

/* encodeAppendEntries + uvEncodeBatchHeader, in the sizeofAppendEntries
 * buffer (8 bytes more than written). */
static frame append_entries(uint64_t term, uint64_t prev, const entry *e, size_t n)
{
    frame f = msg(RAFT_FRAME_APPEND_ENTRIES);
    p64(&f, term);
    p64(&f, prev);
    p64(&f, prev ? term : 0);
    p64(&f, prev);
    p64(&f, n);
    for (size_t i = 0; i < n; i++) {
        p64(&f, e[i].term);
        put(&f, e[i].type, 1);
        junk(&f, 3);
        put(&f, e[i].len, 4);
    }
    junk(&f, 8);
    return done(f);
}

typedef struct {
    uint64_t id;
    const char *addr;
    uint8_t role;
} server;

/* configuration.c:configurationEncodeToBuf into c; its padded length. */
static size_t conf_encode(uint8_t *c, const server *s, size_t n)
{
    size_t pos = 0;
    c[pos++] = 1; /* ENCODING_FORMAT */
    for (int i = 0; i < 8; i++)
        c[pos++] = (uint8_t)((uint64_t)n >> (8 * i));
    for (size_t k = 0; k < n; k++) {
        for (int i = 0; i < 8; i++)
            c[pos++] = (uint8_t)(s[k].id >> (8 * i));
        size_t l = strlen(s[k].addr) + 1;
        memcpy(c + pos, s[k].addr, l);
        pos += l;
        c[pos++] = s[k].role;
    }
    return (size_t)pad8(pos);
}

static const server three[] = {
    {1, "10.0.0.1:7001", 1}, {2, "10.0.0.2:7001", 1}, {3, "10.0.0.3:7001", 0}};

/* encodeInstallSnapshot with conf c[0..clen) in the sizeofInstallSnapshot
 * buffer (8 bytes more than written). */
static frame install_snapshot_conf(uint64_t term, uint64_t li, uint64_t lt, const uint8_t *c,
                                   size_t clen, uint64_t dlen)
{
    frame f = msg(RAFT_FRAME_INSTALL_SNAPSHOT);
    p64(&f, term);
    p64(&f, li);
    p64(&f, lt);
    p64(&f, 1);
    p64(&f, clen);
    memcpy(f.b + f.n, c, clen);
    f.n += clen;
    p64(&f, dlen);
    junk(&f, 8);
    return done(f);
}

static frame install_snapshot(uint64_t term, uint64_t dlen)
{
    uint8_t c[4096];
    memset(c, JUNK, sizeof c);
    size_t clen = conf_encode(c, three, 3);
    return install_snapshot_conf(term, 100, term, c, clen, dlen);
}

/* ---- checks ------------------------------------------------------------ */

static const raft_frame_limits small = {
    .max_entries = 4, .max_entry_bytes = 64, .max_payload_bytes = 128,
    .max_snapshot_bytes = 4096};

/* f is OK with used and payload; MORE at every proper prefix; OK with the
 * same answer when more bytes follow. */
static void ok_msg(frame f, const raft_frame_limits *lim, size_t used, uint64_t payload)
{
    size_t u = 0;
    uint64_t pl = 0;
    const char *why = NULL;
    raft_frame_verdict v = raft_frame_message(f.b, f.n, lim, &u, &pl, &why);
    if (v != RAFT_FRAME_OK)
        fail_msg("expected OK, got %d (%s)", v, why ? why : "");
    assert_int_equal(u, used);
    assert_int_equal(pl, payload);
    for (size_t k = 0; k < f.n; k++)
        if (raft_frame_message(f.b, k, lim, &u, &pl, &why) != RAFT_FRAME_MORE)
            fail_msg("prefix of %zu of %zu bytes is not MORE", k, f.n);
    assert_int_equal(raft_frame_message(f.b, f.n + 100, lim, &u, &pl, &why), RAFT_FRAME_OK);
    assert_int_equal(u, used);
    free(f.b);
}

/* f is BAD, with a reason containing what (when given); no prefix is OK. */
static void bad_msg(frame f, const raft_frame_limits *lim, const char *what)
{
    size_t u = 0;
    uint64_t pl = 0;
    const char *why = NULL;
    raft_frame_verdict v = raft_frame_message(f.b, f.n, lim, &u, &pl, &why);
    if (v != RAFT_FRAME_BAD)
        fail_msg("expected BAD (%s), got %d", what ? what : "", v);
    assert_non_null(why);
    if (what != NULL && strstr(why, what) == NULL)
        fail_msg("reason '%s' does not say '%s'", why, what);
    for (size_t k = 0; k < f.n; k++)
        if (raft_frame_message(f.b, k, lim, &u, &pl, &why) == RAFT_FRAME_OK)
            fail_msg("prefix of %zu of %zu bytes of a bad frame is OK", k, f.n);
    free(f.b);
}

/* f is already BAD with only its first k bytes. */
static void bad_at(frame f, size_t k, const raft_frame_limits *lim)
{
    const char *why = NULL;
    size_t u;
    uint64_t pl;
    assert_int_equal(raft_frame_message(f.b, k, lim, &u, &pl, &why), RAFT_FRAME_BAD);
    free(f.b);
}

static raft_frame_verdict hs(frame f, size_t len, size_t *used, uint64_t *id, char *addr,
                             const char **why)
{
    return raft_frame_handshake(f.b, len, used, id, addr, RAFT_FRAME_ADDRESS_MAX + 1, why);
}

static void bad_hs(frame f, const char *what)
{
    size_t u;
    uint64_t id;
    char addr[RAFT_FRAME_ADDRESS_MAX + 1];
    const char *why = NULL;
    raft_frame_verdict v = hs(f, f.n, &u, &id, addr, &why);
    if (v != RAFT_FRAME_BAD)
        fail_msg("handshake expected BAD (%s), got %d", what, v);
    if (strstr(why, what) == NULL)
        fail_msg("reason '%s' does not say '%s'", why, what);
    for (size_t k = 0; k < f.n; k++)
        assert_int_not_equal(hs(f, k, &u, &id, addr, &why), RAFT_FRAME_OK);
    free(f.b);
}

/* ---- tests ------------------------------------------------------------ */

static void test_limits_and_max_header(void **state)
{
    (void)state;
    raft_frame_limits d = raft_frame_limits_or_default(NULL);
    assert_true(d.max_entries == RAFT_FRAME_DEFAULT_MAX_ENTRIES);
    assert_true(d.max_entry_bytes == RAFT_FRAME_DEFAULT_MAX_ENTRY_BYTES);
    assert_true(d.max_payload_bytes == RAFT_FRAME_DEFAULT_MAX_PAYLOAD_BYTES);
    assert_true(d.max_snapshot_bytes == RAFT_FRAME_DEFAULT_MAX_SNAPSHOT_BYTES);
    raft_frame_limits some = {.max_entries = 7, .max_snapshot_bytes = 9};
    raft_frame_limits l = raft_frame_limits_or_default(&some);
    assert_true(l.max_entries == 7 && l.max_snapshot_bytes == 9);
    assert_true(l.max_entry_bytes == RAFT_FRAME_DEFAULT_MAX_ENTRY_BYTES);
    assert_true(l.max_payload_bytes == RAFT_FRAME_DEFAULT_MAX_PAYLOAD_BYTES);

    /* Default: the AppendEntries with 65536 entry headers is the longest. */
    assert_int_equal(raft_frame_max_header(NULL), 16 + 48 + 16 * 65536);
    raft_frame_limits zero = {0};
    assert_int_equal(raft_frame_max_header(&zero), 16 + 48 + 16 * 65536);
    /* Few entries: the InstallSnapshot with the largest configuration,
     * 64 servers of 8 + 256 + 1 bytes after 9, padded to 8. */
    assert_int_equal(raft_frame_max_header(&small), 16 + 56 + pad8(9 + 64 * 265));
    /* A count libraft would truncate (it keeps an unsigned) is capped. */
    raft_frame_limits huge = {.max_entries = UINT64_MAX};
    assert_int_equal(raft_frame_max_header(&huge), 16 + 48 + 16 * (uint64_t)UINT32_MAX);
}

static void test_handshake_as_libraft_writes_it(void **state)
{
    (void)state;
    frame f = handshake(1, 3, "127.0.0.1:9003"); /* 15 bytes: buffer of 16 */
    size_t u = 0;
    uint64_t id = 0;
    char addr[RAFT_FRAME_ADDRESS_MAX + 1];
    const char *why = NULL;
    assert_int_equal(f.n, 24 + 16);
    assert_int_equal(hs(f, f.n, &u, &id, addr, &why), RAFT_FRAME_OK);
    assert_int_equal(u, 40);
    assert_true(id == 3);
    assert_string_equal(addr, "127.0.0.1:9003");
    for (size_t k = 0; k < f.n; k++)
        if (hs(f, k, &u, &id, addr, &why) != RAFT_FRAME_MORE)
            fail_msg("handshake prefix %zu not MORE", k);
    /* What follows the handshake (the first message) is not its business. */
    assert_int_equal(hs(f, f.n + 50, &u, &id, addr, &why), RAFT_FRAME_OK);
    assert_int_equal(u, 40);
    free(f.b);

    /* An address filling the largest buffer: 255 characters and the NUL. */
    char longest[RAFT_FRAME_ADDRESS_MAX];
    memset(longest, 'a', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    f = handshake(1, 1, longest);
    assert_int_equal(hs(f, f.n, &u, &id, addr, &why), RAFT_FRAME_OK);
    assert_int_equal(u, 24 + RAFT_FRAME_ADDRESS_MAX);
    assert_string_equal(addr, longest);
    free(f.b);

    /* A NUL early in a longer buffer is still within it. */
    f = handshake_len(1, 1, "h:1", 64);
    assert_int_equal(hs(f, f.n, &u, &id, addr, &why), RAFT_FRAME_OK);
    assert_int_equal(u, 24 + 64);
    assert_string_equal(addr, "h:1");
    free(f.b);
}


static void test_bad_handshakes(void **state)
{
    (void)state;
    bad_hs(handshake(2, 1, "127.0.0.1:1"), "protocol");
    bad_hs(handshake(0, 1, "127.0.0.1:1"), "protocol");
    bad_hs(handshake(1, 0, "127.0.0.1:1"), "id 0");
    bad_hs(handshake_len(1, 1, "0123456789abcdef", 16), "no NUL"); /* exactly fills it */
    bad_hs(handshake_len(1, 1, "127.0.0.1:1", 0), "empty address buffer");
    bad_hs(handshake_len(1, 1, "127.0.0.1:1", 12), "padded");
    bad_hs(handshake_len(1, 1, "127.0.0.1:1", RAFT_FRAME_ADDRESS_MAX + 8), "too long");
    bad_hs(handshake_len(1, 1, "127.0.0.1:1", UINT64_MAX - 7), "too long");
    bad_hs(handshake(1, 1, ""), "empty address");
    bad_hs(handshake(1, 1, "127.0.0.1\n:1"), "printable");
    bad_hs(handshake(1, 1, "h\xc3\xa9:1"), "printable");
    /* 256 characters need a buffer of 264: over the limit. */
    char over[RAFT_FRAME_ADDRESS_MAX + 1];
    memset(over, 'a', sizeof over - 1);
    over[sizeof over - 1] = '\0';
    bad_hs(handshake(1, 1, over), "too long");

    /* Decided as soon as the field that proves it is in. */
    size_t u;
    uint64_t id;
    char addr[RAFT_FRAME_ADDRESS_MAX + 1];
    const char *why;
    frame f = handshake(2, 1, "a:1");
    assert_int_equal(hs(f, 8, &u, &id, addr, &why), RAFT_FRAME_BAD);
    assert_int_equal(hs(f, 7, &u, &id, addr, &why), RAFT_FRAME_MORE);
    free(f.b);
    f = handshake(1, 0, "a:1");
    assert_int_equal(hs(f, 16, &u, &id, addr, &why), RAFT_FRAME_BAD);
    free(f.b);
    f = handshake_len(1, 1, "a:1", 1u << 30);
    assert_int_equal(hs(f, 24, &u, &id, addr, &why), RAFT_FRAME_BAD);
    free(f.b);
    f = handshake(1, 1, "a\x01:1");
    assert_int_equal(hs(f, 26, &u, &id, addr, &why), RAFT_FRAME_BAD);
    free(f.b);

    /* A caller's buffer too small for the address is refused, not overrun. */
    f = handshake(1, 1, "127.0.0.1:9003");
    assert_int_equal(raft_frame_handshake(f.b, f.n, &u, &id, addr, 8, &why), RAFT_FRAME_BAD);
    free(f.b);
}

static void test_fixed_messages_as_libraft_writes_them(void **state)
{
    (void)state;
    ok_msg(request_vote(5, 2, 10, 4, 0), NULL, 16 + 40, 0);
    ok_msg(request_vote(5, 2, 10, 4, 1), NULL, 16 + 32, 0); /* legacy */
    ok_msg(request_vote(1, 2, 0, 0, 0), NULL, 16 + 40, 0);  /* empty log */
    ok_msg(request_vote_result(5, 1, 0, 1), NULL, 16 + 24, 0);
    ok_msg(request_vote_result(5, 0, 1, 0), NULL, 16 + 16, 0); /* legacy */
    ok_msg(append_entries_result(5, 0, 12), NULL, 16 + 24, 0);
    ok_msg(append_entries_result(5, 12, 0), NULL, 16 + 24, 0);
    ok_msg(timeout_now(5, 12, 5), NULL, 16 + 24, 0);
    /* The bound itself passes. */
    ok_msg(request_vote(TERM_MAX, 2, TERM_MAX, TERM_MAX, 0), NULL, 16 + 40, 0);
}

static void test_append_entries_as_libraft_writes_it(void **state)
{
    (void)state;
    entry two[] = {{5, 1, 16}, {5, 3, 8}}; /* prev term 5: terms never go down */
    ok_msg(append_entries(5, 9, two, 2), NULL, 16 + 48 + 32, 24);
    ok_msg(append_entries(5, 9, NULL, 0), NULL, 16 + 48, 0); /* heartbeat */
    entry barrier[] = {{5, 2, 8}};
    ok_msg(append_entries(5, 0, barrier, 1), NULL, 16 + 48 + 16, 8);
    /* At the limits: 4 entries of 32, 128 bytes in all. */
    entry full[] = {{1, 1, 32}, {1, 1, 32}, {1, 1, 32}, {1, 1, 32}};
    ok_msg(append_entries(5, 0, full, 4), &small, 16 + 48 + 64, 128);
    entry big[] = {{1, 1, 64}};
    ok_msg(append_entries(5, 0, big, 1), &small, 16 + 48 + 16, 64);
}

static void test_install_snapshot_as_libraft_writes_it(void **state)
{
    (void)state;
    uint8_t c[256];
    size_t clen = conf_encode(c, three, 3);
    assert_int_equal(clen, pad8(9 + 3 * (8 + 14 + 1)));
    ok_msg(install_snapshot(7, 1000), NULL, 16 + 56 + clen, 1000);
    ok_msg(install_snapshot(7, 4096), &small, 16 + 56 + clen, 4096);
    /* One server, one-character address: the shortest configuration. */
    const server one[] = {{9, "a", 2}};
    uint8_t c1[64];
    size_t c1len = conf_encode(c1, one, 1);
    assert_int_equal(c1len, 24);
    ok_msg(install_snapshot_conf(7, 3, 7, c1, c1len, 1), NULL, 16 + 56 + 24, 1);
}

/* The configuration encoder above is libraft's: the same bytes as
 * raft_configuration_encode, and raft_frame_configuration takes both. */
static void test_configuration_matches_libraft(void **state)
{
    (void)state;
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(raft_configuration_add(&conf, three[i].id, three[i].addr, three[i].role), 0);
    struct raft_buffer lb;
    assert_int_equal(raft_configuration_encode(&conf, &lb), 0);
    uint8_t mine[256];
    size_t mlen = conf_encode(mine, three, 3);
    size_t written = 9 + 3 * (8 + 14 + 1);
    assert_int_equal(lb.len, mlen);
    assert_memory_equal(lb.base, mine, written); /* the padding is libraft's junk */
    const char *why = NULL;
    assert_int_equal(raft_frame_configuration(lb.base, lb.len, &why), RAFT_FRAME_OK);
    assert_int_equal(raft_frame_configuration(mine, mlen, &why), RAFT_FRAME_OK);
    /* Cut anywhere, it is refused (a RAFT_CHANGE entry is checked whole). */
    for (size_t k = 0; k < lb.len; k++)
        assert_int_equal(raft_frame_configuration(lb.base, k, &why), RAFT_FRAME_BAD);
    raft_free(lb.base);
    raft_configuration_close(&conf);

    /* The largest: 64 servers with 255-character addresses. */
    static char addrs[RAFT_FRAME_CONF_SERVERS_MAX][RAFT_FRAME_ADDRESS_MAX];
    server many[RAFT_FRAME_CONF_SERVERS_MAX + 1];
    for (size_t i = 0; i <= RAFT_FRAME_CONF_SERVERS_MAX; i++) {
        size_t k = i % RAFT_FRAME_CONF_SERVERS_MAX;
        memset(addrs[k], 'a', RAFT_FRAME_ADDRESS_MAX - 1);
        snprintf(addrs[k], 8, "%06zu", i);
        addrs[k][6] = 'a';
        addrs[k][RAFT_FRAME_ADDRESS_MAX - 1] = '\0';
        many[i] = (server){i + 1, addrs[k], 1};
    }
    uint8_t *big = malloc(32 * 1024);
    assert_non_null(big);
    size_t blen = conf_encode(big, many, RAFT_FRAME_CONF_SERVERS_MAX);
    assert_int_equal(raft_frame_configuration(big, blen, &why), RAFT_FRAME_OK);
    ok_msg(install_snapshot_conf(7, 3, 7, big, blen, 1), &small, raft_frame_max_header(&small), 1);
    /* One more server is too many, however it is sent. */
    server extra[RAFT_FRAME_CONF_SERVERS_MAX + 1];
    memcpy(extra, many, sizeof extra);
    extra[RAFT_FRAME_CONF_SERVERS_MAX].addr = "z:1";
    blen = conf_encode(big, extra, RAFT_FRAME_CONF_SERVERS_MAX + 1);
    assert_int_equal(raft_frame_configuration(big, blen, &why), RAFT_FRAME_BAD);
    assert_non_null(strstr(why, "too many servers"));
    free(big);
}

static void test_unknown_types_and_wrong_lengths(void **state)
{
    (void)state;
    frame f = request_vote(5, 2, 1, 1, 0);
    set64(&f, 0, 0);
    bad_at(f, 8, NULL); /* type 0: libraft's assert(type > 0) */
    f = request_vote(5, 2, 1, 1, 0);
    set64(&f, 0, 7);
    bad_at(f, 8, NULL);
    f = request_vote(5, 2, 1, 1, 0);
    set64(&f, 0, 65536 + 1); /* libraft keeps it as an unsigned short: 1 */
    bad_msg(f, NULL, "unknown message type");

    static const struct {
        uint64_t type, H;
    } wrong[] = {
        {RAFT_FRAME_REQUEST_VOTE, 0},         {RAFT_FRAME_REQUEST_VOTE, 24},
        {RAFT_FRAME_REQUEST_VOTE, 36},        {RAFT_FRAME_REQUEST_VOTE, 48},
        {RAFT_FRAME_REQUEST_VOTE_RESULT, 8},  {RAFT_FRAME_REQUEST_VOTE_RESULT, 20},
        {RAFT_FRAME_REQUEST_VOTE_RESULT, 32}, {RAFT_FRAME_APPEND_ENTRIES_RESULT, 16},
        {RAFT_FRAME_APPEND_ENTRIES_RESULT, 32}, {RAFT_FRAME_TIMEOUT_NOW, 16},
        {RAFT_FRAME_TIMEOUT_NOW, 32},         {RAFT_FRAME_APPEND_ENTRIES, 0},
        {RAFT_FRAME_APPEND_ENTRIES, 40},      {RAFT_FRAME_APPEND_ENTRIES, 47},
        {RAFT_FRAME_APPEND_ENTRIES, 56},      {RAFT_FRAME_APPEND_ENTRIES, 72},
        {RAFT_FRAME_INSTALL_SNAPSHOT, 0},     {RAFT_FRAME_INSTALL_SNAPSHOT, 48},
        {RAFT_FRAME_INSTALL_SNAPSHOT, 56},    {RAFT_FRAME_INSTALL_SNAPSHOT, 100},
        {RAFT_FRAME_REQUEST_VOTE, UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        f = msg(wrong[i].type);
        set64(&f, 8, wrong[i].H);
        f.n = 16 + (wrong[i].H < 200 ? (size_t)wrong[i].H : 0);
        const char *why = NULL;
        size_t u;
        uint64_t pl;
        /* Refused on the preamble alone. */
        if (raft_frame_message(f.b, 16, NULL, &u, &pl, &why) != RAFT_FRAME_BAD)
            fail_msg("type %llu with header length %llu not refused",
                     (unsigned long long)wrong[i].type, (unsigned long long)wrong[i].H);
        free(f.b);
    }

    /* The right length for another type is still wrong. */
    f = timeout_now(5, 1, 1);
    set64(&f, 0, RAFT_FRAME_REQUEST_VOTE);
    bad_msg(f, NULL, "RequestVote: header length");
}

static void test_entry_counts_are_bounded(void **state)
{
    (void)state;
    /* The attack: a 64-byte header (room for one entry) claiming 50
     * million: libraft would read 800 MB of entry headers past it. */
    entry one[] = {{5, 1, 8}};
    frame f = append_entries(5, 0, one, 1);
    assert_int_equal(f.n, 16 + 64);
    set64(&f, 16 + 32, 50000000);
    bad_msg(f, NULL, "entry count");
    f = append_entries(5, 0, one, 1);
    set64(&f, 16 + 32, 50000000);
    bad_at(f, 16 + 40, NULL); /* as soon as the count is in */
    f = append_entries(5, 0, one, 1);
    set64(&f, 16 + 32, 0);
    bad_msg(f, NULL, "entry count");

    /* A header sized for 50 million entries is refused on its preamble. */
    f = msg(RAFT_FRAME_APPEND_ENTRIES);
    set64(&f, 8, 48 + 16 * (uint64_t)50000000);
    bad_at(f, 16, NULL);
    /* One more than the limit, likewise; the limit itself passes. */
    entry five[] = {{1, 1, 8}, {1, 1, 8}, {1, 1, 8}, {1, 1, 8}, {1, 1, 8}};
    f = append_entries(5, 0, five, 5);
    bad_at(f, 16, &small);
    f = append_entries(5, 0, five, 5);
    bad_msg(f, &small, "more entries than the limit");
    ok_msg(append_entries(5, 0, five, 4), &small, 16 + 48 + 64, 32);
    /* Sizes that would wrap 48 + 16 n. */
    f = msg(RAFT_FRAME_APPEND_ENTRIES);
    set64(&f, 8, 48 + 16 * ((UINT64_MAX - 48) / 16));
    bad_at(f, 16, NULL);
}

static void test_bad_entries(void **state)
{
    (void)state;
    entry e[] = {{4, 1, 16}, {5, 1, 12}};
    bad_msg(append_entries(5, 0, e, 2), NULL, "multiple of 8");
    e[1].len = 0;
    bad_msg(append_entries(5, 0, e, 2), NULL, "empty entry");
    e[1].len = 8;
    e[1].type = 0;
    bad_msg(append_entries(5, 0, e, 2), NULL, "entry type");
    e[1].type = 4;
    bad_msg(append_entries(5, 0, e, 2), NULL, "entry type");
    e[1].type = 255;
    bad_msg(append_entries(5, 0, e, 2), NULL, "entry type");
    e[1].type = 3;
    e[1].term = 0; /* logAppend: assert(term > 0) */
    bad_msg(append_entries(5, 0, e, 2), NULL, "entry term");
    e[1].term = TERM_MAX + 1;
    bad_msg(append_entries(5, 0, e, 2), NULL, "entry term");
    e[1].term = 5;
    ok_msg(append_entries(5, 0, e, 2), NULL, 16 + 48 + 32, 24);

    /* Over the limits: one entry, or all of them. */
    entry one[] = {{5, 1, 72}};
    bad_msg(append_entries(5, 0, one, 1), &small, "entry above the limit");
    entry three_e[] = {{5, 1, 64}, {5, 1, 64}, {5, 1, 8}};
    bad_msg(append_entries(5, 0, three_e, 3), &small, "entries above the limit");
    entry huge[] = {{5, 1, UINT32_MAX - 7}}; /* a multiple of 8 */
    bad_msg(append_entries(5, 0, huge, 1), NULL, "entry above the limit");
    raft_frame_limits roomy = {.max_entry_bytes = UINT32_MAX, .max_payload_bytes = UINT64_MAX};
    ok_msg(append_entries(5, 0, huge, 1), &roomy, 16 + 48 + 16, UINT32_MAX - 7);

    /* Decided on the entry header that proves it, before the rest is in. */
    entry e2[] = {{5, 4, 8}, {5, 1, 8}};
    bad_at(append_entries(5, 0, e2, 2), 16 + 40 + 9, NULL);
}

static void test_terms_and_indexes(void **state)
{
    (void)state;
    /* A term 0 or beyond 2^62, in every message that has one. */
    static const uint64_t terms[] = {0, TERM_MAX + 1, UINT64_MAX};
    for (size_t i = 0; i < 3; i++) {
        uint64_t t = terms[i];
        bad_msg(request_vote(t, 2, 1, 1, 0), NULL, "term");
        bad_msg(request_vote(t, 2, 1, 1, 1), NULL, "term");
        bad_msg(request_vote_result(t, 1, 0, 0), NULL, "term");
        bad_msg(append_entries_result(t, 0, 1), NULL, "term");
        bad_msg(timeout_now(t, 1, 1), NULL, "term");
        bad_msg(append_entries(t, 0, NULL, 0), NULL, "term");
        bad_msg(install_snapshot(t, 10), NULL, "term");
        /* As soon as the term is in. */
        bad_at(timeout_now(t, 1, 1), 16 + 8, NULL);
    }
    /* Indexes and other terms: 0 is an empty log, 2^62 + 1 is refused. */
    uint64_t big = TERM_MAX + 1;
    bad_msg(request_vote(5, 2, big, 1, 0), NULL, "above 2^62");
    bad_msg(request_vote(5, 2, 1, big, 0), NULL, "above 2^62");
    bad_msg(append_entries_result(5, big, 1), NULL, "above 2^62");
    bad_msg(append_entries_result(5, 0, UINT64_MAX), NULL, "above 2^62");
    bad_msg(timeout_now(5, UINT64_MAX, 1), NULL, "above 2^62");
    bad_msg(timeout_now(5, 1, big), NULL, "above 2^62");
    bad_msg(append_entries(5, UINT64_MAX, NULL, 0), NULL, "above 2^62"); /* prev + 1 wraps */
    frame f = append_entries(5, 3, NULL, 0);
    set64(&f, 16 + 24, UINT64_MAX); /* leader commit */
    bad_msg(f, NULL, "above 2^62");
    bad_msg(request_vote(5, 0, 1, 1, 0), NULL, "candidate id 0");
    bad_msg(request_vote_result(5, 2, 0, 0), NULL, "vote_granted");
}

/* No member sends a term above the message's own: its log holds no entry
 * of a term it has not reached. */
static void test_no_term_after_the_messages_own(void **state)
{
    (void)state;
    bad_msg(request_vote(5, 2, 1, 6, 0), NULL, "last log term above the term");
    bad_msg(timeout_now(5, 1, 6), NULL, "last log term above the term");
    frame f = append_entries(5, 3, NULL, 0);
    set64(&f, 16 + 16, 6); /* prev log term */
    bad_msg(f, NULL, "previous log term above the term");
    entry later[] = {{5, 1, 8}, {6, 1, 8}};
    bad_msg(append_entries(5, 3, later, 2), NULL, "entry term above the term");
    uint8_t c[4096];
    size_t clen = conf_encode(c, three, 3);
    bad_msg(install_snapshot_conf(5, 100, 6, c, clen, 8), NULL, "last term above the term");
    /* Equal is what libraft sends. */
    ok_msg(request_vote(5, 2, 1, 5, 0), NULL, 16 + 40, 0);
    ok_msg(timeout_now(5, 1, 5), NULL, 16 + 24, 0);
    entry same[] = {{5, 1, 8}, {5, 1, 8}};
    ok_msg(append_entries(5, 3, same, 2), NULL, 16 + 48 + 32, 16);
    /* Terms never go down along a log, from the previous entry's on. */
    entry down[] = {{5, 1, 8}, {4, 1, 8}};
    bad_msg(append_entries(5, 3, down, 2), NULL, "entry terms go down");
    entry below_prev[] = {{4, 1, 8}};
    bad_msg(append_entries(5, 3, below_prev, 1), NULL, "entry terms go down"); /* prev term 5 */
    entry up[] = {{1, 1, 8}, {3, 1, 8}};
    ok_msg(append_entries(5, 0, up, 2), NULL, 16 + 48 + 32, 16); /* prev 0: term 0 */
}

/* The servers of a checked configuration, as libraft encodes them. */
static void test_configuration_servers(void **state)
{
    (void)state;
    uint8_t c[4096];
    size_t clen = conf_encode(c, three, 3);
    raft_frame_server sv[4];
    assert_int_equal(raft_frame_configuration_servers(c, clen, sv, 4), 3);
    for (int i = 0; i < 3; i++) {
        assert_true(sv[i].id == three[i].id);
        assert_string_equal(sv[i].address, three[i].addr);
        assert_int_equal(sv[i].role, three[i].role);
    }
    assert_int_equal(raft_frame_configuration_servers(c, clen, sv, 1), 3); /* counts all */
    c[0] = 2; /* not format 1: refused, no servers */
    assert_int_equal(raft_frame_configuration_servers(c, clen, sv, 4), 0);
}

static void test_bad_snapshots(void **state)
{
    (void)state;
    uint8_t c[256];
    memset(c, JUNK, sizeof c);
    size_t clen = conf_encode(c, three, 3);

    /* The header's configuration length against H. */
    frame f = install_snapshot(7, 10);
    set64(&f, 16 + 32, clen + 8); /* conf_len > what H holds */
    bad_msg(f, NULL, "configuration length");
    f = install_snapshot(7, 10);
    set64(&f, 16 + 32, UINT64_MAX);
    bad_at(f, 16 + 40, NULL);
    f = install_snapshot(7, 10);
    set64(&f, 16 + 32, clen - 8);
    bad_msg(f, NULL, "configuration length");

    /* The snapshot's own fields (log.c:logRestore asserts both > 0). */
    bad_msg(install_snapshot_conf(7, 0, 7, c, clen, 10), NULL, "last index 0");
    bad_msg(install_snapshot_conf(7, 3, 0, c, clen, 10), NULL, "last term 0");
    bad_msg(install_snapshot(7, 0), NULL, "empty snapshot");
    bad_msg(install_snapshot(7, 4097), &small, "snapshot above the limit");
    bad_msg(install_snapshot(7, UINT64_MAX), NULL, "snapshot above the limit");

    /* Configurations libraft would read past, assert on, or refuse. */
    uint8_t d[256];
#define CONF_BAD(mutate, what)                                                          \
    do {                                                                                \
        memcpy(d, c, sizeof d);                                                         \
        size_t dlen = clen;                                                             \
        mutate;                                                                         \
        bad_msg(install_snapshot_conf(7, 3, 7, d, dlen, 10), NULL, what);               \
        const char *w = NULL;                                                           \
        assert_int_equal(raft_frame_configuration(d, dlen, &w), RAFT_FRAME_BAD);        \
    } while (0)
    /* The three-server encoding: format 0, count 1..8, then per server an
     * id, 13 characters and a NUL, a role: ids at 9, 32, 55, addresses at
     * 17, 40, 63, NULs at 30, 53, 76, roles at 31, 54, 77; padded to 80. */
    assert_int_equal(clen, 80);
    CONF_BAD(d[0] = 2, "format");
    CONF_BAD(d[1] = 0, "no servers");
    CONF_BAD(d[1] = 65, "too many servers");
    CONF_BAD(d[8] = 1, "too many servers"); /* 2^56 + 3 */
    CONF_BAD(d[1] = 4, "cut short in a server id");
    CONF_BAD(memset(d + 9, 0, 8), "server id 0"); /* configurationAdd: assert(id != 0) */
    CONF_BAD(d[32] = 1, "repeated server id");
    CONF_BAD(d[40 + 7] = '1', "repeated address");
    CONF_BAD(d[17] = 0x07, "printable");
    CONF_BAD(d[63] = (char)0x80, "printable");
    CONF_BAD(d[31] = 3, "unknown role");
    CONF_BAD(d[77] = 0xff, "unknown role");
    CONF_BAD(memset(d + 76, 'x', 4), "no NUL");  /* runs to the end */
    CONF_BAD(dlen = 72, "no NUL");               /* cut in the last address */
    CONF_BAD(dlen = clen + 8, "padded encoding"); /* longer than libraft's */
    CONF_BAD((d[1] = 1, dlen = 8), "cut short in its count");
    CONF_BAD((d[1] = 1, dlen = 16), "cut short in a server id");
    CONF_BAD((d[1] = 1, d[30] = 'x', d[31] = 0, dlen = 32), "cut short in a role");
#undef CONF_BAD

    /* An empty address, and one too long for a handshake's buffer. */
    const server empty[] = {{1, "", 1}};
    uint8_t *e = malloc(1024);
    assert_non_null(e);
    size_t elen = conf_encode(e, empty, 1);
    bad_msg(install_snapshot_conf(7, 3, 7, e, elen, 10), NULL, "empty address");
    char longa[RAFT_FRAME_ADDRESS_MAX + 1];
    memset(longa, 'a', RAFT_FRAME_ADDRESS_MAX);
    longa[RAFT_FRAME_ADDRESS_MAX] = '\0';
    const server toolong[] = {{1, longa, 1}};
    elen = conf_encode(e, toolong, 1);
    bad_msg(install_snapshot_conf(7, 3, 7, e, elen, 10), NULL, "address too long");
    longa[RAFT_FRAME_ADDRESS_MAX - 1] = '\0'; /* 255: the longest */
    elen = conf_encode(e, toolong, 1);
    ok_msg(install_snapshot_conf(7, 3, 7, e, elen, 10), NULL, 16 + 56 + elen, 10);
    free(e);

    /* An early byte of the configuration decides before the rest is in. */
    f = install_snapshot(7, 10);
    f.b[16 + 40] = 9;
    bad_at(f, 16 + 41, NULL);
}

/* ---- a real libraft node ----------------------------------------------
 *
 * Node 1 is libraft 0.15 with its own TCP transport, bootstrapped with
 * voters 1, 2 and 3; 2 and 3 are played here, on two listeners, each
 * answering over its own connection to node 1 (handshake first, as
 * libraft does). Everything node 1 sends passes through the check: the
 * handshakes, RequestVote (2 grants its vote), AppendEntries with the
 * RAFT_CHANGE entry of the bootstrap configuration and a command (2
 * acknowledges, so node 1 commits and snapshots with no entries kept),
 * InstallSnapshot (3 answers only after that snapshot, with an empty
 * log), and TimeoutNow (a leadership transfer to 2). What is played here
 * is checked too before it is sent, and node 1 acting on it (electing
 * itself, committing) shows libraft reads these encoders as its own. */

typedef struct live live;

typedef struct {
    uv_tcp_t tcp;
    live *L;
    int who; /* 0: plays node 2, 1: node 3 */
    uint8_t *rx;
    size_t n, cap, pos;
    int shaken; /* the handshake passed */
} conn;

typedef struct {
    uv_tcp_t tcp;
    uv_connect_t req;
    int state; /* 0 none, 1 connecting, 2 connected */
} out_conn;

struct live {
    uv_loop_t loop;
    struct raft_uv_transport transport;
    struct raft_io io;
    struct raft_fsm fsm;
    struct raft raft;
    struct raft_apply apply;
    struct raft_transfer transfer;
    uv_tcp_t listener[2];
    out_conn out[2];
    uv_timer_t tick;
    char addr[3][32];
    int port[3];
    uint64_t last[2];   /* the log each played node claims */
    int applied, transferring, snap_ready, installed, stopping, raft_closed;
    int seen[7];        /* messages of each type that passed */
    int changes_checked;/* RAFT_CHANGE entries whose data passed */
    long ticks;
    char fail[512];
};

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void live_fail(live *L, const char *fmt, const char *detail)
{
    if (L->fail[0] == '\0')
        snprintf(L->fail, sizeof L->fail, fmt, detail ? detail : "");
}

typedef struct {
    uv_write_t req;
    frame f;
} wreq;

static void on_written(uv_write_t *req, int status)
{
    (void)status;
    wreq *w = (wreq *)req;
    free(w->f.b);
    free(w);
}

/* Send f from played node who, if its connection to node 1 is up. */
static void send_as(live *L, int who, frame f, int is_handshake)
{
    const char *why = NULL;
    size_t u;
    uint64_t pl, id;
    char a[RAFT_FRAME_ADDRESS_MAX + 1];
    raft_frame_verdict v = is_handshake
        ? raft_frame_handshake(f.b, f.n, &u, &id, a, sizeof a, &why)
        : raft_frame_message(f.b, f.n, NULL, &u, &pl, &why);
    if (v != RAFT_FRAME_OK)
        live_fail(L, "our own frame is refused: %s", why);
    if (L->out[who].state != 2 || L->stopping) {
        free(f.b);
        return; /* libraft resends: heartbeats, elections */
    }
    wreq *w = calloc(1, sizeof *w);
    w->f = f;
    uv_buf_t b = uv_buf_init((char *)f.b, (unsigned)f.n);
    if (uv_write(&w->req, (uv_stream_t *)&L->out[who].tcp, &b, 1, on_written) != 0) {
        free(f.b);
        free(w);
    }
}

static void on_out_connected(uv_connect_t *req, int status)
{
    out_conn *o = req->data;
    live *L = o->tcp.data;
    int who = o == &L->out[0] ? 0 : 1;
    if (status != 0) {
        uv_close((uv_handle_t *)&o->tcp, NULL);
        o->state = -1; /* reset to 0 once closed (tick) */
        return;
    }
    o->state = 2;
    send_as(L, who, handshake(1, (uint64_t)who + 2, L->addr[who + 1]), 1);
}

/* Act on one message node 1 sent to played node c->who. */
static void handle(live *L, conn *c, const uint8_t *m, size_t used, uint64_t payload)
{
    uint64_t type = le64(m), H = le64(m + 8);
    const uint8_t *h = m + 16, *pl = m + used;
    uint64_t term = le64(h);
    int who = c->who;
    L->seen[type]++;
    switch (type) {
    case RAFT_FRAME_REQUEST_VOTE: {
        int pre = H == 40 && (le64(h + 32) & 2) != 0;
        if (who == 0) /* 2 votes for 1; 3 stays silent */
            send_as(L, 0, request_vote_result(term, 1, 0, pre), 0);
        break;
    }
    case RAFT_FRAME_APPEND_ENTRIES: {
        uint64_t prev = le64(h + 8), n = le64(h + 32), off = 0;
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *e = h + 40 + 16 * i;
            uint32_t len = (uint32_t)e[12] | (uint32_t)e[13] << 8 |
                           (uint32_t)e[14] << 16 | (uint32_t)e[15] << 24;
            if (e[8] == 3) {
                const char *why = NULL;
                if (raft_frame_configuration(pl + off, len, &why) != RAFT_FRAME_OK)
                    live_fail(L, "libraft's RAFT_CHANGE entry refused: %s", why);
                L->changes_checked++;
            }
            off += len;
        }
        if (off != payload)
            live_fail(L, "%s", "entry lengths do not add up to the payload");
        if (who == 1 && (!L->snap_ready || !L->installed)) {
            /* 3 has nothing: it answers only once node 1 has compacted
             * its log, to be sent the snapshot. */
            if (L->snap_ready && prev > 0)
                send_as(L, 1, append_entries_result(term, prev, 0), 0);
            break;
        }
        if (prev > L->last[who]) {
            send_as(L, who, append_entries_result(term, prev, L->last[who]), 0);
        } else {
            L->last[who] = prev + n;
            send_as(L, who, append_entries_result(term, 0, L->last[who]), 0);
        }
        break;
    }
    case RAFT_FRAME_INSTALL_SNAPSHOT: {
        uint64_t li = le64(h + 8);
        if (payload == 0)
            live_fail(L, "%s", "empty snapshot from libraft");
        L->installed = 1;
        L->last[who] = li;
        send_as(L, who, append_entries_result(term, 0, li), 0);
        break;
    }
    default:
        break;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn *c = h->data;
    if (c->cap - c->n < suggested) {
        c->cap = c->cap * 2 + suggested;
        c->rx = realloc(c->rx, c->cap);
    }
    *buf = uv_buf_init((char *)c->rx + c->n, (unsigned)(c->cap - c->n));
}

static void on_conn_closed(uv_handle_t *h)
{
    conn *c = h->data;
    free(c->rx);
    free(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    conn *c = s->data;
    live *L = c->L;
    if (nread < 0) {
        uv_close((uv_handle_t *)s, on_conn_closed);
        return;
    }
    c->n += (size_t)nread;
    for (;;) {
        const uint8_t *p = c->rx + c->pos;
        size_t avail = c->n - c->pos, used = 0;
        uint64_t payload = 0;
        const char *why = NULL;
        raft_frame_verdict v;
        if (!c->shaken) {
            uint64_t id = 0;
            char addr[RAFT_FRAME_ADDRESS_MAX + 1];
            v = raft_frame_handshake(p, avail, &used, &id, addr, sizeof addr, &why);
            if (v == RAFT_FRAME_OK && (id != 1 || strcmp(addr, L->addr[0]) != 0))
                live_fail(L, "handshake names someone else: %s", addr);
        } else {
            v = raft_frame_message(p, avail, NULL, &used, &payload, &why);
        }
        if (v == RAFT_FRAME_BAD) {
            live_fail(L, "libraft's own bytes refused: %s", why);
            uv_close((uv_handle_t *)s, on_conn_closed);
            return;
        }
        if (v == RAFT_FRAME_MORE)
            return;
        if (!c->shaken) {
            c->shaken = 1;
            c->pos += used;
            continue;
        }
        if (avail - used < payload)
            return; /* the payload is still coming */
        handle(L, c, p, used, payload);
        c->pos += used + (size_t)payload;
    }
}

static void on_accept(uv_stream_t *server, int status)
{
    live *L = server->data;
    if (status != 0)
        return;
    conn *c = calloc(1, sizeof *c);
    c->L = L;
    c->who = server == (uv_stream_t *)&L->listener[0] ? 0 : 1;
    uv_tcp_init(&L->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    (void)fsm, (void)buf;
    *result = NULL;
    return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    (void)fsm;
    *bufs = raft_malloc(sizeof **bufs);
    (*bufs)[0].base = raft_malloc(8);
    (*bufs)[0].len = 8;
    memcpy((*bufs)[0].base, "snapshot", 8);
    *n = 1;
    return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    (void)fsm;
    raft_free(buf->base);
    return 0;
}

static void on_applied(struct raft_apply *req, int status, void *result)
{
    (void)req, (void)status, (void)result;
}

static void on_transferred(struct raft_transfer *req)
{
    (void)req;
}

static void on_raft_closed(struct raft *r)
{
    live *L = r->data;
    raft_uv_close(&L->io);
    L->raft_closed = 1;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h) && h->type != UV_TCP) /* ours are closed by tick */
        uv_close(h, NULL);
}

static void stop(live *L)
{
    if (L->stopping)
        return;
    L->stopping = 1;
    uv_timer_stop(&L->tick);
    uv_close((uv_handle_t *)&L->tick, NULL);
    for (int i = 0; i < 2; i++) {
        uv_close((uv_handle_t *)&L->listener[i], NULL);
        if (L->out[i].state > 0)
            uv_close((uv_handle_t *)&L->out[i].tcp, NULL);
    }
    raft_close(&L->raft, on_raft_closed);
}

static void on_tick(uv_timer_t *t)
{
    live *L = t->data;
    L->ticks++;
    for (int i = 0; i < 2; i++) {
        out_conn *o = &L->out[i];
        if (o->state == -1 && uv_is_closing((uv_handle_t *)&o->tcp))
            continue;
        if (o->state == -1)
            o->state = 0;
        if (o->state == 0) {
            struct sockaddr_in sa;
            uv_ip4_addr("127.0.0.1", L->port[0], &sa);
            uv_tcp_init(&L->loop, &o->tcp);
            o->tcp.data = L;
            o->req.data = o;
            o->state = 1;
            if (uv_tcp_connect(&o->req, &o->tcp, (const struct sockaddr *)&sa,
                               on_out_connected) != 0) {
                uv_close((uv_handle_t *)&o->tcp, NULL);
                o->state = -1;
            }
        }
    }
    struct raft *r = &L->raft;
    if (raft_state(r) == RAFT_LEADER && !L->applied) {
        struct raft_buffer b = {.base = raft_malloc(8), .len = 8};
        memcpy(b.base, "command!", 8);
        if (raft_apply(r, &L->apply, &b, 1, on_applied) == 0)
            L->applied = 1;
        else
            raft_free(b.base);
    }
    /* Applied both entries and kept none: 3 can only be sent a snapshot. */
    if (r->log.snapshot.last_index >= 2)
        L->snap_ready = 1;
    if (L->installed && !L->transferring && raft_state(r) == RAFT_LEADER &&
        raft_transfer(r, &L->transfer, 2, on_transferred) == 0)
        L->transferring = 1;
    int all = L->seen[RAFT_FRAME_REQUEST_VOTE] && L->seen[RAFT_FRAME_APPEND_ENTRIES] &&
              L->changes_checked && L->seen[RAFT_FRAME_INSTALL_SNAPSHOT] &&
              L->seen[RAFT_FRAME_TIMEOUT_NOW];
    if (all || L->fail[0] != '\0')
        stop(L);
    else if (L->ticks > 2000) { /* 20 s */
        char what[128];
        snprintf(what, sizeof what, "RV %d AE %d change %d IS %d TN %d",
                 L->seen[3], L->seen[1], L->changes_checked, L->seen[5], L->seen[6]);
        live_fail(L, "timed out; seen %s", what);
        stop(L);
    }
}

static void test_a_real_libraft_node_passes(void **state)
{
    (void)state;
    live *L = calloc(1, sizeof *L);
    assert_non_null(L);
    char *dir = tl_mkdtemp("raft_frame");
    assert_non_null(dir);
    for (int i = 0; i < 3; i++) {
        L->port[i] = tl_free_port();
        assert_true(L->port[i] > 0);
        snprintf(L->addr[i], sizeof L->addr[i], "127.0.0.1:%d", L->port[i]);
    }
    assert_int_equal(uv_loop_init(&L->loop), 0);
    for (int i = 0; i < 2; i++) {
        struct sockaddr_in sa;
        uv_ip4_addr("127.0.0.1", L->port[i + 1], &sa);
        uv_tcp_init(&L->loop, &L->listener[i]);
        L->listener[i].data = L;
        assert_int_equal(uv_tcp_bind(&L->listener[i], (const struct sockaddr *)&sa, 0), 0);
        assert_int_equal(uv_listen((uv_stream_t *)&L->listener[i], 8, on_accept), 0);
    }

    assert_int_equal(raft_uv_tcp_init(&L->transport, &L->loop), 0);
    assert_int_equal(raft_uv_init(&L->io, &L->loop, dir, &L->transport), 0);
    raft_uv_set_connect_retry_delay(&L->io, 50);
    L->fsm = (struct raft_fsm){.version = 1, .apply = fsm_apply, .snapshot = fsm_snapshot,
                               .restore = fsm_restore};
    assert_int_equal(raft_init(&L->raft, &L->io, &L->fsm, 1, L->addr[0]), 0);
    L->raft.data = L;
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    for (int i = 0; i < 3; i++)
        assert_int_equal(raft_configuration_add(&conf, (raft_id)i + 1, L->addr[i], RAFT_VOTER), 0);
    assert_int_equal(raft_bootstrap(&L->raft, &conf), 0);
    raft_configuration_close(&conf);
    raft_set_election_timeout(&L->raft, 150);
    raft_set_heartbeat_timeout(&L->raft, 30);
    raft_set_snapshot_threshold(&L->raft, 2);
    raft_set_snapshot_trailing(&L->raft, 0);
    assert_int_equal(raft_start(&L->raft), 0);

    uv_timer_init(&L->loop, &L->tick);
    L->tick.data = L;
    uv_timer_start(&L->tick, on_tick, 10, 10);
    uv_run(&L->loop, UV_RUN_DEFAULT);
    raft_uv_tcp_close(&L->transport);
    uv_walk(&L->loop, close_walk, NULL);
    uv_run(&L->loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(&L->loop);

    tl_rmtree(dir);
    free(dir);
    if (L->fail[0] != '\0')
        fail_msg("%s", L->fail);
    assert_true(L->raft_closed);
    assert_int_equal(rc, 0);
    print_message("libraft sent: RequestVote %d, AppendEntries %d (RAFT_CHANGE %d), "
                  "InstallSnapshot %d, TimeoutNow %d; all passed\n",
                  L->seen[3], L->seen[1], L->changes_checked, L->seen[5], L->seen[6]);
    free(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits_and_max_header),
        cmocka_unit_test(test_handshake_as_libraft_writes_it),
        cmocka_unit_test(test_bad_handshakes),
        cmocka_unit_test(test_fixed_messages_as_libraft_writes_them),
        cmocka_unit_test(test_append_entries_as_libraft_writes_it),
        cmocka_unit_test(test_install_snapshot_as_libraft_writes_it),
        cmocka_unit_test(test_configuration_matches_libraft),
        cmocka_unit_test(test_unknown_types_and_wrong_lengths),
        cmocka_unit_test(test_entry_counts_are_bounded),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_terms_and_indexes),
        cmocka_unit_test(test_bad_snapshots),
        cmocka_unit_test(test_no_term_after_the_messages_own),
        cmocka_unit_test(test_configuration_servers),
        cmocka_unit_test(test_a_real_libraft_node_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
