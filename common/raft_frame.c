/*
 * raft_frame.c — see raft_frame.h.
 *
 * Every rule below names the libraft 0.15 code it protects (file:function
 * in libraft's src/). Each check reads only bytes that are in: a field not
 * yet in answers MORE, and a field that is in and wrong answers BAD at
 * once, so a prefix of a good frame is never BAD and a bad prefix never
 * becomes good.
 *
 * The assert()s in libraft that a peer reaches with the values it sends,
 * and the rule that keeps each away:
 *   uv_recv.c:uvServerReadCb        assert(type > 0)      type in 1..6
 *   recv_*.c:recv*                  assert(id > 0)        handshake id != 0
 *   log.c:logAppend                 assert(term > 0)      entry term != 0
 *   log.c:logRestore                assert(last_index > 0), assert(last_term > 0)
 *                                                         snapshot index, term != 0
 *   log.c:logTermOf                 assert(index > 0)     indexes <= 2^62, so
 *                                   replication.c:deleteConflictingEntries'
 *                                   prev_log_index + 1 + j cannot wrap to 0
 *   configuration.c:configurationAdd assert(id != 0)      conf server id != 0
 *   configuration.c:configurationDecode assert(buf->len > 0)  conf length >= 1
 * Those that depend on the receiver's state as well (e.g.
 * recv_request_vote_result.c: assert(!result->vote_granted) for a granted
 * pre-vote from a term past ours + 1, recv_append_entries.c:
 * assert(r->state == RAFT_FOLLOWER || ...) for an AppendEntries at a
 * leader's own term) cannot be decided from the bytes alone: the peer's
 * authentication (raft_transport.h) is what keeps them away.
 */
#include "raft_frame.h"

#include <string.h>

/* The largest term or index a message may carry. A member takes any
 * higher term it is sent (recv.c:recvBumpCurrentTerm) and adds 1 to terms
 * and indexes (election.c:electionStart current_term + 1, replication.c
 * prev_log_index + 1 + j): a peer that pushed a term to 2^64-1 left the
 * member showing -1 as its term, one election from wrapping to 0. 2^62 is
 * more than any group reaches (a new term every microsecond for 146,000
 * years) and far from wrapping. */
#define TERM_MAX ((uint64_t)1 << 62)

/* Exact header lengths libraft 0.15 writes (uv_encoding.c:sizeof*). */
#define H_REQUEST_VOTE 40        /* term, candidate, last index, last term, flags */
#define H_REQUEST_VOTE_V1 32     /* the same without flags (decodeRequestVote) */
#define H_REQUEST_VOTE_RESULT 24 /* term, granted, flags */
#define H_REQUEST_VOTE_RESULT_V1 16
#define H_APPEND_ENTRIES_RESULT 24 /* term, rejected, last index */
#define H_TIMEOUT_NOW 24           /* term, last index, last term */
/* sizeofAppendEntries counts six words, encodeAppendEntries writes five
 * (term, prev index, prev term, commit, n) then 16 per entry: the last 8
 * bytes are never written and never read. */
#define H_APPEND_ENTRIES_BASE 48
#define AE_N_OFFSET 32
#define AE_ENTRIES_OFFSET 40
#define ENTRY_HEADER 16
/* sizeofInstallSnapshot counts term, leader id, last index, last term,
 * conf index, conf length, the configuration, data length: 56 + C, but
 * encodeInstallSnapshot writes no leader id, so it is 40 bytes, C bytes
 * of configuration, the data length, and 8 bytes never written. */
#define H_INSTALL_SNAPSHOT_BASE 56
#define IS_CONF_OFFSET 40

/* libraft's entry types (raft.h enum raft_entry_type) and server roles. */
#define ENTRY_COMMAND 1
#define ENTRY_BARRIER 2
#define ENTRY_CHANGE 3
#define ROLE_MAX 2 /* RAFT_STANDBY 0, RAFT_VOTER 1, RAFT_SPARE 2 */
/* configuration.c: ENCODING_FORMAT. */
#define CONF_FORMAT 1
/* The longest encoding of a configuration: format byte, count, then per
 * server an id, an address of at most RAFT_FRAME_ADDRESS_MAX bytes with
 * its NUL, a role; padded to 8 (configuration.c:configurationEncodedSize). */
#define CONF_SERVER_MAX (8 + RAFT_FRAME_ADDRESS_MAX + 1)
#define CONF_ENCODED_MAX                                                                \
    (((1 + 8 + (uint64_t)RAFT_FRAME_CONF_SERVERS_MAX * CONF_SERVER_MAX) + 7) / 8 * 8)

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v; /* little endian: byte.h's bytePut64 on every host */
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static raft_frame_verdict bad(const char **why, const char *reason)
{
    if (why != NULL)
        *why = reason;
    return RAFT_FRAME_BAD;
}

/* Whether bytes [off, off+n) of a field are in. */
static int have(size_t avail, size_t off, size_t n)
{
    return avail >= off && avail - off >= n;
}

raft_frame_limits raft_frame_limits_or_default(const raft_frame_limits *lim)
{
    raft_frame_limits l = {0};
    if (lim != NULL)
        l = *lim;
    if (l.max_entries == 0)
        l.max_entries = RAFT_FRAME_DEFAULT_MAX_ENTRIES;
    if (l.max_entry_bytes == 0)
        l.max_entry_bytes = RAFT_FRAME_DEFAULT_MAX_ENTRY_BYTES;
    if (l.max_payload_bytes == 0)
        l.max_payload_bytes = RAFT_FRAME_DEFAULT_MAX_PAYLOAD_BYTES;
    if (l.max_snapshot_bytes == 0)
        l.max_snapshot_bytes = RAFT_FRAME_DEFAULT_MAX_SNAPSHOT_BYTES;
    return l;
}

/* Entries one AppendEntries may carry: the limit, and never more than
 * uvDecodeBatchHeader keeps (it casts the count to unsigned). */
static uint64_t entries_max(const raft_frame_limits *l)
{
    return l->max_entries < UINT32_MAX ? l->max_entries : UINT32_MAX;
}

/* The header length (after the preamble) of the largest message under l. */
static uint64_t header_max(const raft_frame_limits *l)
{
    uint64_t ae = H_APPEND_ENTRIES_BASE + ENTRY_HEADER * entries_max(l); /* < 2^37 */
    uint64_t is = H_INSTALL_SNAPSHOT_BASE + CONF_ENCODED_MAX;
    uint64_t m = ae > is ? ae : is;
    return m > H_REQUEST_VOTE ? m : H_REQUEST_VOTE;
}

size_t raft_frame_max_header(const raft_frame_limits *lim)
{
    raft_frame_limits l = raft_frame_limits_or_default(lim);
    uint64_t m = RAFT_FRAME_PREAMBLE + header_max(&l);
    return m > SIZE_MAX ? SIZE_MAX : (size_t)m; /* a 32-bit host caps it */
}

/* ---- handshake (uv_tcp_listen.c) ------------------------------------- */

/* An address byte libraft will print, compare and resolve: printable
 * ASCII (uv_tcp_listen.c hands it to accept_cb as a C string). */
static int addr_char(uint8_t c)
{
    return c >= 0x20 && c < 0x7f;
}

raft_frame_verdict raft_frame_handshake(const uint8_t *buf, size_t len, size_t *used,
                                        uint64_t *id, char *addr, size_t addrlen,
                                        const char **why)
{
    /* uvTcpDecodePreamble: any other protocol is a peer we cannot speak to. */
    if (len >= 8 && get64(buf) != 1)
        return bad(why, "handshake: protocol is not 1");
    /* recv_*.c assert(id > 0) on the id the handshake gives every message. */
    if (len >= 16 && get64(buf + 8) == 0)
        return bad(why, "handshake: server id 0");
    if (len < RAFT_FRAME_HANDSHAKE_FIXED)
        return RAFT_FRAME_MORE;
    uint64_t alen = get64(buf + 16);
    /* uvTcpDecodePreamble mallocs this length: bounded, and not empty so
     * that the NUL fits (0 would also make that malloc(0)). */
    if (alen == 0)
        return bad(why, "handshake: empty address buffer");
    if (alen > RAFT_FRAME_ADDRESS_MAX)
        return bad(why, "handshake: address buffer too long");
    /* uvTcpEncodeHandshake pads the buffer to 8 (bytePad64). */
    if (alen % 8 != 0)
        return bad(why, "handshake: address buffer not padded to 8");

    /* uvTcpIncomingReadCbAddress passes the buffer on as a C string: its
     * NUL must lie inside the buffer, after a non-empty printable address. */
    const uint8_t *a = buf + RAFT_FRAME_HANDSHAKE_FIXED;
    size_t in = len - RAFT_FRAME_HANDSHAKE_FIXED;
    size_t n = 0;
    while (n < alen && n < in && a[n] != 0) {
        if (!addr_char(a[n]))
            return bad(why, "handshake: address not printable ASCII");
        n++;
    }
    if (n == alen)
        return bad(why, "handshake: address has no NUL");
    if (n < in && n == 0)
        return bad(why, "handshake: empty address");
    if (in < alen)
        return RAFT_FRAME_MORE; /* the rest, padding, may be anything */

    if (addr == NULL || addrlen <= n)
        return bad(why, "handshake: caller's address buffer too small");
    memcpy(addr, a, n);
    addr[n] = '\0';
    if (id != NULL)
        *id = get64(buf + 8);
    if (used != NULL)
        *used = RAFT_FRAME_HANDSHAKE_FIXED + (size_t)alen;
    return RAFT_FRAME_OK;
}

/* ---- configuration (configuration.c:configurationDecode) ------------- */

/* The configuration at c[0..clen), of which avail bytes are in: OK, MORE
 * or BAD. Read in the order configurationDecode reads it. */
static raft_frame_verdict conf_check(const uint8_t *c, size_t avail, size_t clen,
                                     const char **why)
{
    uint64_t ids[RAFT_FRAME_CONF_SERVERS_MAX];
    size_t addrs[RAFT_FRAME_CONF_SERVERS_MAX];

    /* configurationDecode: assert(buf->len > 0). */
    if (clen == 0)
        return bad(why, "configuration: empty");
    if (!have(avail, 0, 1))
        return RAFT_FRAME_MORE;
    /* configurationDecode: any other format is RAFT_MALFORMED. */
    if (c[0] != CONF_FORMAT)
        return bad(why, "configuration: format is not 1");
    /* configurationDecode reads the count without checking the length. */
    if (!have(clen, 1, 8))
        return bad(why, "configuration: cut short in its count");
    if (!have(avail, 1, 8))
        return RAFT_FRAME_MORE;
    uint64_t n = get64(c + 1);
    /* No leader sends an empty configuration (configurationEncode asserts
     * n > 0); a bounded count bounds the reallocs of configurationAdd. */
    if (n == 0)
        return bad(why, "configuration: no servers");
    if (n > RAFT_FRAME_CONF_SERVERS_MAX)
        return bad(why, "configuration: too many servers");

    size_t pos = 9;
    for (size_t i = 0; i < n; i++) {
        /* configurationDecode reads the id unchecked (byteGet64Unaligned),
         * and then computes len - pos, which wraps past the end. */
        if (!have(clen, pos, 8))
            return bad(why, "configuration: cut short in a server id");
        if (!have(avail, pos, 8))
            return RAFT_FRAME_MORE;
        uint64_t id = get64(c + pos);
        /* configurationAdd: assert(id != 0). */
        if (id == 0)
            return bad(why, "configuration: server id 0");
        pos += 8;

        /* byteGetString: a NUL within the configuration, after an address
         * that fits a handshake's buffer. */
        size_t start = pos, len = 0;
        for (;;) {
            if (pos >= clen)
                return bad(why, "configuration: address has no NUL");
            if (pos >= avail)
                return RAFT_FRAME_MORE;
            if (c[pos] == 0)
                break;
            if (!addr_char(c[pos]))
                return bad(why, "configuration: address not printable ASCII");
            if (++len >= RAFT_FRAME_ADDRESS_MAX)
                return bad(why, "configuration: address too long");
            pos++;
        }
        if (len == 0)
            return bad(why, "configuration: empty address");
        pos++; /* the NUL */

        /* configurationDecode reads the role byte unchecked. */
        if (!have(clen, pos, 1))
            return bad(why, "configuration: cut short in a role");
        if (!have(avail, pos, 1))
            return RAFT_FRAME_MORE;
        /* configurationAdd: any other role is RAFT_BADROLE. */
        if (c[pos] > ROLE_MAX)
            return bad(why, "configuration: unknown role");
        pos++;

        /* configurationAdd refuses a repeated id or address: the decode
         * fails, and a RAFT_CHANGE entry's change is silently lost. */
        for (size_t j = 0; j < i; j++) {
            if (ids[j] == id)
                return bad(why, "configuration: repeated server id");
            if (strcmp((const char *)c + addrs[j], (const char *)c + start) == 0)
                return bad(why, "configuration: repeated address");
        }
        ids[i] = id;
        addrs[i] = start;
    }
    /* configurationEncodedSize pads to 8 and no more: anything longer is
     * not libraft's (and would move InstallSnapshot's data length). */
    if ((pos + 7) / 8 * 8 != clen)
        return bad(why, "configuration: length is not its padded encoding");
    return RAFT_FRAME_OK;
}

raft_frame_verdict raft_frame_configuration(const uint8_t *buf, size_t len, const char **why)
{
    if (buf == NULL && len > 0)
        return bad(why, "configuration: no buffer");
    return conf_check(buf, len, len, why);
}

size_t raft_frame_configuration_servers(const uint8_t *buf, size_t len,
                                        raft_frame_server *out, size_t max)
{
    const char *why;
    if (raft_frame_configuration(buf, len, &why) != RAFT_FRAME_OK)
        return 0;
    /* Checked: every field lies inside, every address ends in a NUL. */
    size_t n = (size_t)get64(buf + 1), pos = 9;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = get64(buf + pos);
        const char *addr = (const char *)buf + pos + 8;
        pos += 8 + strlen(addr) + 1;
        if (i < max)
            out[i] = (raft_frame_server){.id = id, .address = addr, .role = buf[pos]};
        pos++;
    }
    return n;
}

/* ---- message headers (uv_encoding.c:uvDecodeMessage) ----------------- */

/* A term a message may carry: libraft's handlers compare it with their
 * own and take it (recv.c:recvBumpCurrentTerm); no member sends term 0
 * (a member's first election already makes its term 1). */
static int term_ok(uint64_t t)
{
    return t != 0 && t <= TERM_MAX;
}

/* A header being checked: h holds avail of its H bytes. The checkers per
 * type answer BAD, or OK for "nothing wrong in what is in" (the caller
 * makes that MORE until all H bytes are). */
typedef struct {
    const uint8_t *h;
    size_t avail;
    uint64_t H;
    const raft_frame_limits *lim;
    uint64_t payload;
} hdr;

/* Field [off, off+n) of the header is in. */
#define IN(x, off, n) have((x)->avail, (off), (n))

/* Whether the term at off is in and not one a member sends. */
static int bad_term(const hdr *x, size_t off)
{
    return IN(x, off, 8) && !term_ok(get64(x->h + off));
}

/* Whether the index or term at off (0 allowed: an empty log) is in and
 * so large that libraft's + 1 on it could wrap. */
static int bad_bound(const hdr *x, size_t off)
{
    return IN(x, off, 8) && get64(x->h + off) > TERM_MAX;
}

/* Whether the word at off is a term above the message's own (at 0): no
 * member sends one (its log holds no entry of a term it has not reached),
 * and libraft stores such an entry as is (replication.c asserts it does
 * not, in a build without NDEBUG). */
static int after_own_term(const hdr *x, size_t off)
{
    return IN(x, 0, 8) && IN(x, off, 8) && get64(x->h + off) > get64(x->h);
}

static raft_frame_verdict request_vote(hdr *x, const char **why)
{
    if (bad_term(x, 0))
        return bad(why, "RequestVote: term 0 or above 2^62");
    /* election.c:electionVote records candidate_id as voted_for, where 0
     * means "no vote": a vote for 0 could be granted twice in a term. */
    if (IN(x, 8, 8) && get64(x->h + 8) == 0)
        return bad(why, "RequestVote: candidate id 0");
    if (bad_bound(x, 16) || bad_bound(x, 24))
        return bad(why, "RequestVote: last log index or term above 2^62");
    if (after_own_term(x, 24))
        return bad(why, "RequestVote: last log term above the term");
    return RAFT_FRAME_OK;
}

static raft_frame_verdict request_vote_result(hdr *x, const char **why)
{
    if (bad_term(x, 0))
        return bad(why, "RequestVoteResult: term 0 or above 2^62");
    /* encodeRequestVoteResult writes a bool. */
    if (IN(x, 8, 8) && get64(x->h + 8) > 1)
        return bad(why, "RequestVoteResult: vote_granted not 0 or 1");
    return RAFT_FRAME_OK;
}

static raft_frame_verdict append_entries_result(hdr *x, const char **why)
{
    if (bad_term(x, 0))
        return bad(why, "AppendEntriesResult: term 0 or above 2^62");
    if (bad_bound(x, 8) || bad_bound(x, 16))
        return bad(why, "AppendEntriesResult: rejected or last log index above 2^62");
    return RAFT_FRAME_OK;
}

static raft_frame_verdict timeout_now(hdr *x, const char **why)
{
    if (bad_term(x, 0))
        return bad(why, "TimeoutNow: term 0 or above 2^62");
    if (bad_bound(x, 8) || bad_bound(x, 16))
        return bad(why, "TimeoutNow: last log index or term above 2^62");
    if (after_own_term(x, 16))
        return bad(why, "TimeoutNow: last log term above the term");
    return RAFT_FRAME_OK;
}

static raft_frame_verdict append_entries(hdr *x, const char **why)
{
    /* The preamble checked H = 48 + 16 n for n within the limits. */
    uint64_t n = (x->H - H_APPEND_ENTRIES_BASE) / ENTRY_HEADER;
    if (bad_term(x, 0))
        return bad(why, "AppendEntries: term 0 or above 2^62");
    /* prev log index, prev log term, leader commit; replication.c adds
     * prev_log_index + 1 + j, which must not wrap to logTermOf's 0. */
    if (bad_bound(x, 8) || bad_bound(x, 16) || bad_bound(x, 24))
        return bad(why, "AppendEntries: index or term above 2^62");
    if (after_own_term(x, 16))
        return bad(why, "AppendEntries: previous log term above the term");
    /* uvDecodeBatchHeader mallocs and reads this many entry headers from
     * the header buffer: it must be the count H was sized for. */
    if (IN(x, AE_N_OFFSET, 8) && get64(x->h + AE_N_OFFSET) != n)
        return bad(why, "AppendEntries: entry count does not match header length");

    uint64_t sum = 0, last_term = IN(x, 16, 8) ? get64(x->h + 16) : 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t off = AE_ENTRIES_OFFSET + (size_t)i * ENTRY_HEADER;
        if (!IN(x, off, 8))
            break;
        /* log.c:logAppend: assert(term > 0). */
        if (!term_ok(get64(x->h + off)))
            return bad(why, "AppendEntries: entry term 0 or above 2^62");
        /* A Raft log's terms never go down along it, from the previous
         * entry's on: libraft stores such entries as they come, and one
         * such message after a forged snapshot made it free a buffer twice
         * (the fuzz run of test_raft_peer_security). */
        if (get64(x->h + off) < last_term)
            return bad(why, "AppendEntries: entry terms go down");
        last_term = get64(x->h + off);
        if (after_own_term(x, off))
            return bad(why, "AppendEntries: entry term above the term");
        if (!IN(x, off + 8, 1))
            break;
        /* uvDecodeBatchHeader refuses other types, logAppend asserts them. */
        uint8_t type = x->h[off + 8];
        if (type != ENTRY_COMMAND && type != ENTRY_BARRIER && type != ENTRY_CHANGE)
            return bad(why, "AppendEntries: unknown entry type");
        if (!IN(x, off + 12, 4))
            break; /* off + 9..11 are unused: libraft leaves them unwritten */
        uint64_t elen = get32(x->h + off + 12);
        /* uvDecodeEntriesBatch steps over each entry padded to 8 while the
         * payload read is the sum of the unpadded lengths: a length not a
         * multiple of 8 makes it point past the payload buffer. libraft
         * writes none (barriers are 8 bytes, configurations padded). */
        if (elen % 8 != 0)
            return bad(why, "AppendEntries: entry length not a multiple of 8");
        /* An AppendEntries whose entries are all empty has payload 0, so
         * uv_recv.c fires it without uvDecodeEntriesBatch and
         * recvAppendEntries frees entries[0].batch, never set. libraft
         * writes no empty entry. */
        if (elen == 0)
            return bad(why, "AppendEntries: empty entry");
        if (elen > x->lim->max_entry_bytes)
            return bad(why, "AppendEntries: entry above the limit");
        /* uvServerAllocCb mallocs the sum in one buffer. */
        sum += elen; /* n < 2^32 entries of < 2^32 bytes: no wrap */
        if (sum > x->lim->max_payload_bytes)
            return bad(why, "AppendEntries: entries above the limit");
    }
    x->payload = sum;
    return RAFT_FRAME_OK;
}

static raft_frame_verdict install_snapshot(hdr *x, const char **why)
{
    uint64_t clen = x->H - H_INSTALL_SNAPSHOT_BASE; /* the preamble checked H >= 56 */
    if (bad_term(x, 0))
        return bad(why, "InstallSnapshot: term 0 or above 2^62");
    /* log.c:logRestore: assert(last_index > 0), assert(last_term > 0). */
    if (IN(x, 8, 8) && (get64(x->h + 8) == 0 || get64(x->h + 8) > TERM_MAX))
        return bad(why, "InstallSnapshot: last index 0 or above 2^62");
    if (IN(x, 16, 8) && !term_ok(get64(x->h + 16)))
        return bad(why, "InstallSnapshot: last term 0 or above 2^62");
    if (after_own_term(x, 16))
        return bad(why, "InstallSnapshot: last term above the term");
    if (bad_bound(x, 24))
        return bad(why, "InstallSnapshot: configuration index above 2^62");
    /* decodeInstallSnapshot trusts this length for the configuration and
     * for where the data length is: it must be what H was sized for. */
    if (IN(x, 32, 8) && get64(x->h + 32) != clen)
        return bad(why, "InstallSnapshot: configuration length does not match header length");
    if (!IN(x, 32, 8))
        return RAFT_FRAME_OK;

    size_t conf_in = x->avail > IS_CONF_OFFSET ? x->avail - IS_CONF_OFFSET : 0;
    if (conf_check(x->h + IS_CONF_OFFSET, conf_in, (size_t)clen, why) == RAFT_FRAME_BAD)
        return RAFT_FRAME_BAD;

    size_t doff = IS_CONF_OFFSET + (size_t)clen;
    if (IN(x, doff, 8)) {
        uint64_t dlen = get64(x->h + doff);
        /* With no payload uv_recv.c fires the message without setting
         * data.base, which libraft later frees and writes as the image:
         * an empty snapshot is refused (libraft never sends one, every
         * snapshot holds at least the FSM's own header). */
        if (dlen == 0)
            return bad(why, "InstallSnapshot: empty snapshot");
        /* uvServerAllocCb mallocs it whole. */
        if (dlen > x->lim->max_snapshot_bytes)
            return bad(why, "InstallSnapshot: snapshot above the limit");
        x->payload = dlen;
    }
    return RAFT_FRAME_OK;
}

/* Whether header length H is one libraft writes for type, under l. */
static const char *bad_length(uint64_t type, uint64_t H, const raft_frame_limits *l)
{
    switch (type) {
    case RAFT_FRAME_REQUEST_VOTE:
        return H == H_REQUEST_VOTE || H == H_REQUEST_VOTE_V1
                   ? NULL
                   : "RequestVote: header length not 40 (or 32)";
    case RAFT_FRAME_REQUEST_VOTE_RESULT:
        return H == H_REQUEST_VOTE_RESULT || H == H_REQUEST_VOTE_RESULT_V1
                   ? NULL
                   : "RequestVoteResult: header length not 24 (or 16)";
    case RAFT_FRAME_APPEND_ENTRIES_RESULT:
        return H == H_APPEND_ENTRIES_RESULT ? NULL
                                            : "AppendEntriesResult: header length not 24";
    case RAFT_FRAME_TIMEOUT_NOW:
        return H == H_TIMEOUT_NOW ? NULL : "TimeoutNow: header length not 24";
    case RAFT_FRAME_APPEND_ENTRIES:
        /* 48 + 16 n; the count is taken from H by division, so no product
         * of an untrusted count is ever formed. */
        if (H < H_APPEND_ENTRIES_BASE || (H - H_APPEND_ENTRIES_BASE) % ENTRY_HEADER != 0)
            return "AppendEntries: header length not 48 + 16 n";
        if ((H - H_APPEND_ENTRIES_BASE) / ENTRY_HEADER > entries_max(l))
            return "AppendEntries: more entries than the limit";
        return NULL;
    case RAFT_FRAME_INSTALL_SNAPSHOT:
        /* 56 + C, C a padded configuration of at most the largest size. */
        if (H < H_INSTALL_SNAPSHOT_BASE + 8 || (H - H_INSTALL_SNAPSHOT_BASE) % 8 != 0)
            return "InstallSnapshot: header length not 56 + a padded configuration";
        if (H - H_INSTALL_SNAPSHOT_BASE > CONF_ENCODED_MAX)
            return "InstallSnapshot: configuration longer than the limit";
        return NULL;
    default:
        return "unknown message type";
    }
}

raft_frame_verdict raft_frame_message(const uint8_t *buf, size_t len,
                                      const raft_frame_limits *lim, size_t *used,
                                      uint64_t *payload, const char **why)
{
    raft_frame_limits l = raft_frame_limits_or_default(lim);
    /* uv_recv.c: assert(type > 0); uvDecodeMessage refuses other types. */
    if (len >= 8 && (get64(buf) < RAFT_FRAME_APPEND_ENTRIES ||
                     get64(buf) > RAFT_FRAME_TIMEOUT_NOW))
        return bad(why, "unknown message type");
    if (len < RAFT_FRAME_PREAMBLE)
        return RAFT_FRAME_MORE;
    uint64_t type = get64(buf);
    uint64_t H = get64(buf + 8);
    /* uvServerAllocCb mallocs H and the decoders read their fields from
     * it without checking its length: it must be exactly libraft's. */
    const char *r = bad_length(type, H, &l);
    if (r != NULL)
        return bad(why, r);

    hdr x = {
        .h = buf + RAFT_FRAME_PREAMBLE,
        .avail = len - RAFT_FRAME_PREAMBLE < H ? len - RAFT_FRAME_PREAMBLE : (size_t)H,
        .H = H,
        .lim = &l,
        .payload = 0,
    };
    raft_frame_verdict v;
    switch (type) {
    case RAFT_FRAME_REQUEST_VOTE: v = request_vote(&x, why); break;
    case RAFT_FRAME_REQUEST_VOTE_RESULT: v = request_vote_result(&x, why); break;
    case RAFT_FRAME_APPEND_ENTRIES_RESULT: v = append_entries_result(&x, why); break;
    case RAFT_FRAME_TIMEOUT_NOW: v = timeout_now(&x, why); break;
    case RAFT_FRAME_APPEND_ENTRIES: v = append_entries(&x, why); break;
    default: v = install_snapshot(&x, why); break;
    }
    if (v == RAFT_FRAME_BAD)
        return RAFT_FRAME_BAD;
    if (x.avail < H)
        return RAFT_FRAME_MORE;
    if (used != NULL)
        *used = RAFT_FRAME_PREAMBLE + (size_t)H;
    if (payload != NULL)
        *payload = x.payload;
    return RAFT_FRAME_OK;
}
