/*
 * raft_wire.h — a small client of libraft 0.15's TCP wire format, for
 * tests that play a stranger (or a member with a stolen certificate) on a
 * Raft group's peer ports.
 *
 * The layout is the one libraft 0.15 writes (src/uv_tcp_connect.c,
 * src/uv_encoding.c, src/configuration.c; read by src/uv_tcp_listen.c and
 * src/uv_recv.c). Every integer is a little-endian u64 unless said:
 *
 *   (hello)          ours, not libraft's: 32 bytes each way before the
 *                    handshake ("pcRH", version 1, kind, flags, 0, group
 *                    id, raft id, last index): rw_hello
 *   handshake        [protocol = 1][server id][L] then L bytes: the
 *                    address, NUL-terminated, zero-padded to a multiple of 8
 *   message          [type][H] then H bytes of header, then the payload
 *   AppendEntries    header: [term][prev index][prev term][commit][n]
 *                    then n entry headers of 16 bytes ([term][u8 type]
 *                    [3 unused][u32 data length]), then 8 unused bytes
 *                    (libraft counts a "leader id" word it never writes):
 *                    H = 48 + 16 n; payload: each entry's data in turn
 *   RequestVote      [term][candidate id][last index][last term][flags]
 *                    (flags: 1 disrupt leader, 2 pre-vote): H = 40
 *   TimeoutNow       [term][last index][last term]: H = 24
 *   InstallSnapshot  [term][last index][last term][conf index][C] then C
 *                    bytes of configuration ([u8 format = 1][n], per
 *                    server [id][address NUL-terminated][u8 role], zero-
 *                    padded to 8; the words unaligned), then [data length],
 *                    then 8 unused bytes: H = 56 + C; payload: the data
 *
 * A connection carries one direction: the member that accepted it only
 * reads, so anything it sends back (TLS alerts) means it is refusing.
 *
 * Everything is bounded: connect, TLS handshake, sends and the closed-by-
 * peer probe take a timeout. Test code only: no attempt at speed.
 */
#ifndef PC_TL_RAFT_WIRE_H
#define PC_TL_RAFT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* libraft 0.15's message types (enum raft_io_type). */
#define RW_APPEND_ENTRIES 1
#define RW_REQUEST_VOTE 3
#define RW_INSTALL_SNAPSHOT 5
#define RW_TIMEOUT_NOW 6

/* Entry types (enum raft_entry_type). */
#define RW_ENTRY_COMMAND 1
#define RW_ENTRY_BARRIER 2
#define RW_ENTRY_CHANGE 3

/* RequestVote flags. */
#define RW_VOTE_DISRUPT_LEADER 1
#define RW_VOTE_PRE_VOTE 2

/* ---- a growing byte buffer the encoders append to ---- */

typedef struct {
    uint8_t *data;
    size_t len, cap;
    bool failed;        /* an allocation failed: the contents are incomplete */
} rw_buf;

void rw_buf_free(rw_buf *b);               /* and back to empty */
void rw_put64(rw_buf *b, uint64_t v);      /* little endian */
void rw_put_bytes(rw_buf *b, const void *p, size_t n);
void rw_put_zeros(rw_buf *b, size_t n);

/* ---- encoders: each appends one whole handshake or message to b ---- */

/* The handshake a connecting member sends first (protocol 1). */
void rw_enc_handshake(rw_buf *b, uint64_t id, const char *address);

/* The hello a node sends first on the node network (common/raft_net.h:
 * "pcRN", version 2, lane, the address's length as a u16, realm, the
 * address), claiming address `claim`. */
void rw_enc_net_hello(rw_buf *b, unsigned lane, uint64_t realm, const char *claim);

typedef struct {
    uint64_t term;
    uint8_t type;       /* RW_ENTRY_* (anything, to send a bad one) */
    const void *data;   /* sent as is: libraft's reader expects a length
                         * that is a multiple of 8 (it pads when decoding) */
    uint32_t len;
} rw_entry;

typedef struct {
    uint64_t term, prev_index, prev_term, commit;
    const rw_entry *entries;
    size_t n_entries;
    /* != 0: the header claims this many entries but carries none of their
     * headers nor data: H = 48, a 64-byte frame with the preamble (what
     * libraft 0.15 decodes past its buffer). entries is then ignored. */
    uint64_t claimed_entries;
} rw_append_entries;

void rw_enc_append_entries(rw_buf *b, const rw_append_entries *m);
void rw_enc_request_vote(rw_buf *b, uint64_t term, uint64_t candidate, uint64_t last_index,
                         uint64_t last_term, uint64_t flags);
void rw_enc_timeout_now(rw_buf *b, uint64_t term, uint64_t last_index, uint64_t last_term);

typedef struct {
    uint64_t id;
    const char *address;
    uint8_t role;       /* 1: voter (RAFT_VOTER) */
} rw_server;

typedef struct {
    uint64_t term, last_index, last_term, conf_index;
    const rw_server *servers;   /* the snapshot's configuration */
    size_t n_servers;
    const void *data;           /* the image, sent as the payload */
    uint64_t len;
} rw_install_snapshot;

void rw_enc_install_snapshot(rw_buf *b, const rw_install_snapshot *m);

/* ---- connections ---- */

typedef struct {
    const char *cert_file, *key_file;   /* the client certificate; NULL: none */
    const char *ca_file;                /* verify the member's certificate
                                         * (chain and IP SAN = the dialled
                                         * host) against it; NULL: no check */
    /* After our side of the handshake is done, wait this long (ms) for the
     * member to refuse it (an alert or a close): under TLS 1.3 a server
     * checks the client's certificate after the client has finished. 0:
     * do not wait. */
    int confirm_ms;
} rw_tls;

typedef struct {
    int fd;             /* -1: not connected */
    char host[64];      /* where rw_connect went, for rw_hello's probe */
    int port;
    rw_tls tls;
    bool has_tls;
    void *session;      /* gnutls_session_t, NULL for plain TCP */
    void *cred;         /* gnutls_certificate_credentials_t */
    char err[256];      /* why the last call failed */
} rw_conn;

/* Connect to host:port (an IPv4 literal) within timeout_ms, then with tls
 * != NULL run a TLS client handshake (within the same time). 0, or -1 with
 * c->err set and nothing left open (a failed TLS handshake included). */
int rw_connect(rw_conn *c, const char *host, int port, const rw_tls *tls, int timeout_ms);

/* Send n bytes (through TLS when on), within timeout_ms. 0 or -1. */
int rw_send_raw(rw_conn *c, const void *p, size_t n, int timeout_ms);

/* Send what b holds (-1 if an encoder's allocation failed), then empty b. */
int rw_send_buf(rw_conn *c, rw_buf *b, int timeout_ms);

/* The percolator hello a raft connection starts with, before libraft's
 * handshake (common/raft_transport.h): learn the group's id with a probe
 * (a second connection, same TLS) claiming raft id id, then send a raft
 * hello claiming id in that group on c and read the member's answer.
 * 0, or -1 (the member refused or closed). */
int rw_hello(rw_conn *c, uint64_t id, int timeout_ms);

/* rw_hello, then encode and send a handshake (rw_enc_handshake): 0 or -1. */
int rw_send_handshake(rw_conn *c, uint64_t id, const char *address, int timeout_ms);

/* Whether the member closes the connection (EOF, reset, a TLS alert or
 * close) within ms; bytes it sends meanwhile are read and dropped. */
bool rw_closed_by_peer(rw_conn *c, int ms);

/* Close (no TLS goodbye: a stranger just hangs up) and reset c. */
void rw_close(rw_conn *c);

#endif
