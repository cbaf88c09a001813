/*
 * raft_frame.h — the check every byte from a Raft peer passes before
 * libraft reads it (docs/DESIGN.md §7.2).
 *
 * libraft 0.15 trusts its peers: a message header that claims 50 million
 * entries makes it read past its buffer, a handshake address without a
 * NUL runs strlen off the end. So the peer transport (raft_transport.c)
 * parses what a peer sends itself, in the layout libraft 0.15 writes
 * (src/uv_tcp_connect.c and src/uv_encoding.c of libraft; little endian
 * 64-bit words):
 *
 *   handshake   [protocol = 1][server id][address length L] then L bytes:
 *               the address, NUL-terminated, padded to 8
 *   message     [type][header length H] then H bytes of header, then a
 *               payload whose length the header gives (AppendEntries: the
 *               sum of its entries' sizes; InstallSnapshot: the image's)
 *
 * and passes a message on only when its type is known, its header has
 * exactly the length libraft writes for it, every count and length lies
 * within the limits below, and everything libraft will decode from it
 * (entry types, the configuration inside an InstallSnapshot) is well
 * formed. A frame that fails closes the connection: libraft never sees it.
 *
 * Pure functions on a buffer: no I/O, no allocation (the fuzz harness
 * fuzz/fuzz_raft_frame.c feeds them anything).
 */
#ifndef PC_RAFT_FRAME_H
#define PC_RAFT_FRAME_H

#include <stddef.h>
#include <stdint.h>

/* libraft 0.15's message types (enum raft_io_type in raft.h). */
#define RAFT_FRAME_APPEND_ENTRIES 1
#define RAFT_FRAME_APPEND_ENTRIES_RESULT 2
#define RAFT_FRAME_REQUEST_VOTE 3
#define RAFT_FRAME_REQUEST_VOTE_RESULT 4
#define RAFT_FRAME_INSTALL_SNAPSHOT 5
#define RAFT_FRAME_TIMEOUT_NOW 6

#define RAFT_FRAME_PREAMBLE 16           /* type, header length */
#define RAFT_FRAME_HANDSHAKE_FIXED 24    /* protocol, id, address length */
#define RAFT_FRAME_ADDRESS_MAX 256       /* a handshake's address buffer, padded */
#define RAFT_FRAME_CONF_SERVERS_MAX 64   /* servers in a snapshot's configuration */

/* What a message may carry. Each bound follows from the program's own
 * limits (raft_host.c sets them): no member of ours ever sends more. */
typedef struct {
    uint64_t max_entries;       /* entries in one AppendEntries */
    uint64_t max_entry_bytes;   /* one entry's data */
    uint64_t max_payload_bytes; /* all entries of one AppendEntries */
    uint64_t max_snapshot_bytes;/* an InstallSnapshot's image */
} raft_frame_limits;

/* Defaults for raft_frame_limits fields left 0. */
#define RAFT_FRAME_DEFAULT_MAX_ENTRIES 65536u
#define RAFT_FRAME_DEFAULT_MAX_ENTRY_BYTES ((uint64_t)64 << 20)
#define RAFT_FRAME_DEFAULT_MAX_PAYLOAD_BYTES ((uint64_t)256 << 20)
#define RAFT_FRAME_DEFAULT_MAX_SNAPSHOT_BYTES ((uint64_t)16 << 30)

typedef enum {
    RAFT_FRAME_MORE = 0, /* not enough bytes yet to decide */
    RAFT_FRAME_OK = 1,   /* a whole, good handshake or message header */
    RAFT_FRAME_BAD = -1, /* refuse: close the connection */
} raft_frame_verdict;

/* The handshake at buf[0..len): OK with *used (its length), *id and the
 * address copied NUL-terminated into addr (addrlen >= RAFT_FRAME_ADDRESS_MAX
 * + 1); MORE; or BAD with a reason in why (static text). */
raft_frame_verdict raft_frame_handshake(const uint8_t *buf, size_t len, size_t *used,
                                        uint64_t *id, char *addr, size_t addrlen,
                                        const char **why);

/* The message starting at buf[0..len): OK with *used (preamble and header,
 * to pass on now) and *payload (bytes that follow it, to pass on as they
 * come); MORE; or BAD with a reason in why (static text). A header longer
 * than raft_frame_max_header(lim) is BAD as soon as the preamble is in. */
raft_frame_verdict raft_frame_message(const uint8_t *buf, size_t len,
                                      const raft_frame_limits *lim, size_t *used,
                                      uint64_t *payload, const char **why);

/* A configuration as libraft 0.15 encodes it (configurationEncode), all
 * len bytes of it: OK, or BAD with a reason in why. raft_frame_message
 * checks the one inside an InstallSnapshot header; the data of a
 * RAFT_CHANGE entry (entry type 3: AppendEntries header byte 40 + 16 i + 8,
 * its length the u32 at 40 + 16 i + 12) is payload, which libraft decodes
 * the same way when it appends the entry (membershipUncommittedChange),
 * so the reader checks it with this once the entry's bytes are in. */
raft_frame_verdict raft_frame_configuration(const uint8_t *buf, size_t len,
                                            const char **why);

/* The servers of a configuration raft_frame_configuration passes (0
 * when it does not): how many there are, the first max of them in out,
 * their addresses pointing into buf. */
typedef struct {
    uint64_t id;
    const char *address;
    uint8_t role;           /* RAFT_STANDBY 0, RAFT_VOTER 1, RAFT_SPARE 2 */
} raft_frame_server;
size_t raft_frame_configuration_servers(const uint8_t *buf, size_t len,
                                        raft_frame_server *out, size_t max);

/* The longest preamble plus header a message may have under lim: the
 * buffer a reader needs. */
size_t raft_frame_max_header(const raft_frame_limits *lim);

/* lim with every 0 field set to its default. */
raft_frame_limits raft_frame_limits_or_default(const raft_frame_limits *lim);

#endif
