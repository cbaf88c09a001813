/*
 * raft_codec.c — see raft_codec.h. Offsets and lengths are raft_frame.c's
 * (libraft 0.15's src/uv_encoding.c): little-endian 64-bit words.
 */
#include "raft_codec.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "le.h"

#define PREAMBLE RAFT_FRAME_PREAMBLE
#define H_REQUEST_VOTE 40          /* term, candidate, last index, last term, flags */
#define H_REQUEST_VOTE_V1 32       /* without the flags */
#define H_REQUEST_VOTE_RESULT 24   /* term, granted, flags */
#define H_REQUEST_VOTE_RESULT_V1 16
#define H_APPEND_ENTRIES_RESULT 24 /* term, rejected, last index */
#define H_TIMEOUT_NOW 24           /* term, last index, last term */
/* AppendEntries: term, prev index, prev term, commit, n, 16 bytes an
 * entry, and 8 bytes libraft counts but never writes (zero here). */
#define H_APPEND_ENTRIES_BASE 48
#define AE_ENTRIES_OFFSET 40
/* InstallSnapshot: term, last index, last term, conf index, conf length,
 * the configuration, the image's length, and 8 bytes never written. */
#define H_INSTALL_SNAPSHOT_BASE 56
#define IS_CONF_OFFSET 40

#define VOTE_DISRUPT_LEADER 1u     /* RequestVote flags */
#define VOTE_PRE_VOTE 2u
#define RESULT_PRE_VOTE 1u         /* RequestVoteResult flags */

static int fail(const char **why, const char *reason)
{
    if (why != NULL)
        *why = reason;
    return -1;
}

/* ---- encode ---- */

/* The header's length and the payload's, for m; the configuration of an
 * InstallSnapshot encoded into *conf (raft_malloc'd). 0 or -1. */
static int sizes(const struct raft_message *m, size_t *header, size_t *payload,
                 struct raft_buffer *conf, const char **why)
{
    *payload = 0;
    switch (m->type) {
    case RAFT_IO_REQUEST_VOTE:
        *header = H_REQUEST_VOTE;
        return 0;
    case RAFT_IO_REQUEST_VOTE_RESULT:
        *header = H_REQUEST_VOTE_RESULT;
        return 0;
    case RAFT_IO_APPEND_ENTRIES_RESULT:
        *header = H_APPEND_ENTRIES_RESULT;
        return 0;
    case RAFT_IO_TIMEOUT_NOW:
        *header = H_TIMEOUT_NOW;
        return 0;
    case RAFT_IO_APPEND_ENTRIES: {
        const struct raft_append_entries *a = &m->append_entries;
        for (unsigned i = 0; i < a->n_entries; i++) {
            size_t len = a->entries[i].buf.len;
            /* The receiver steps over each entry padded to 8 while it
             * reads the unpadded sum (raft_frame.c): libraft writes only
             * lengths that are multiples of 8, never 0. */
            if (len == 0 || len % 8 != 0 || len > UINT32_MAX)
                return fail(why, "an entry empty, not a multiple of 8 bytes, or above 4 GiB");
            *payload += len;
        }
        *header = H_APPEND_ENTRIES_BASE + 16 * (size_t)a->n_entries;
        return 0;
    }
    case RAFT_IO_INSTALL_SNAPSHOT:
        if (m->install_snapshot.data.len == 0)
            return fail(why, "an empty image");
        if (m->install_snapshot.conf.n == 0) /* raft_configuration_encode asserts it */
            return fail(why, "an image without a configuration");
        if (raft_configuration_encode(&m->install_snapshot.conf, conf) != 0)
            return fail(why, "cannot encode the configuration");
        *header = H_INSTALL_SNAPSHOT_BASE + conf->len;
        *payload = m->install_snapshot.data.len;
        return 0;
    default:
        return fail(why, "an unknown message type");
    }
}

int raft_codec_encode(const struct raft_message *m, uint8_t **out, size_t *len,
                      const char **why)
{
    size_t header, payload;
    struct raft_buffer conf = {NULL, 0};
    *out = NULL;
    if (sizes(m, &header, &payload, &conf, why) != 0)
        return -1;
    uint8_t *b = calloc(1, PREAMBLE + header + payload);
    if (b == NULL) {
        raft_free(conf.base);
        return fail(why, "out of memory");
    }
    le_put64(b, m->type);
    le_put64(b + 8, header);
    uint8_t *h = b + PREAMBLE, *p = h + header;
    switch (m->type) {
    case RAFT_IO_REQUEST_VOTE: {
        const struct raft_request_vote *v = &m->request_vote;
        le_put64(h, v->term);
        le_put64(h + 8, v->candidate_id);
        le_put64(h + 16, v->last_log_index);
        le_put64(h + 24, v->last_log_term);
        le_put64(h + 32, (v->disrupt_leader ? VOTE_DISRUPT_LEADER : 0) |
                          (v->pre_vote ? VOTE_PRE_VOTE : 0));
        break;
    }
    case RAFT_IO_REQUEST_VOTE_RESULT: {
        const struct raft_request_vote_result *v = &m->request_vote_result;
        le_put64(h, v->term);
        le_put64(h + 8, v->vote_granted ? 1 : 0);
        le_put64(h + 16, v->pre_vote == raft_tribool_true ? RESULT_PRE_VOTE : 0);
        break;
    }
    case RAFT_IO_APPEND_ENTRIES_RESULT: {
        const struct raft_append_entries_result *r = &m->append_entries_result;
        le_put64(h, r->term);
        le_put64(h + 8, r->rejected);
        le_put64(h + 16, r->last_log_index);
        break;
    }
    case RAFT_IO_TIMEOUT_NOW: {
        const struct raft_timeout_now *t = &m->timeout_now;
        le_put64(h, t->term);
        le_put64(h + 8, t->last_log_index);
        le_put64(h + 16, t->last_log_term);
        break;
    }
    case RAFT_IO_APPEND_ENTRIES: {
        const struct raft_append_entries *a = &m->append_entries;
        le_put64(h, a->term);
        le_put64(h + 8, a->prev_log_index);
        le_put64(h + 16, a->prev_log_term);
        le_put64(h + 24, a->leader_commit);
        le_put64(h + 32, a->n_entries);
        for (unsigned i = 0; i < a->n_entries; i++) {
            const struct raft_entry *e = &a->entries[i];
            uint8_t *eh = h + AE_ENTRIES_OFFSET + 16 * (size_t)i;
            le_put64(eh, e->term);
            eh[8] = (uint8_t)e->type;
            le_put32(eh + 12, (uint32_t)e->buf.len);
            memcpy(p, e->buf.base, e->buf.len);
            p += e->buf.len;
        }
        break;
    }
    case RAFT_IO_INSTALL_SNAPSHOT: {
        const struct raft_install_snapshot *s = &m->install_snapshot;
        le_put64(h, s->term);
        le_put64(h + 8, s->last_index);
        le_put64(h + 16, s->last_term);
        le_put64(h + 24, s->conf_index);
        le_put64(h + 32, conf.len);
        /* libraft pads the configuration to 8 bytes but leaves the
         * padding as raft_malloc gave it: zero it, so that no stale
         * memory goes on the wire. */
        size_t filled = 1 + 8; /* format, count */
        for (unsigned i = 0; i < s->conf.n; i++)
            filled += 8 + strlen(s->conf.servers[i].address) + 1 + 1; /* id, address, role */
        memcpy(h + IS_CONF_OFFSET, conf.base, filled < conf.len ? filled : conf.len);
        le_put64(h + IS_CONF_OFFSET + conf.len, s->data.len);
        memcpy(p, s->data.base, s->data.len);
        raft_free(conf.base);
        break;
    }
    }
    *out = b;
    *len = PREAMBLE + header + payload;
    return 0;
}

/* ---- decode ---- */

/* The configuration raft_frame_message checked inside an InstallSnapshot,
 * into c (raft_configuration_init'd), as libraft's configurationDecode
 * does it: server by server with raft_configuration_add, which refuses an
 * id or an address twice. 0, or -1 with why. */
static int decode_conf(const uint8_t *buf, size_t len, struct raft_configuration *c,
                       const char **why)
{
    raft_frame_server sv[RAFT_FRAME_CONF_SERVERS_MAX];
    size_t n = raft_frame_configuration_servers(buf, len, sv, RAFT_FRAME_CONF_SERVERS_MAX);
    if (n > RAFT_FRAME_CONF_SERVERS_MAX) /* the check refuses more */
        return fail(why, "a configuration of too many servers");
    for (size_t i = 0; i < n; i++) {
        int rv = raft_configuration_add(c, sv[i].id, sv[i].address, sv[i].role);
        if (rv != 0)
            return fail(why, rv == RAFT_NOMEM ? "out of memory"
                                              : "a configuration libraft refuses (a server "
                                                "twice, or a bad role)");
    }
    return 0;
}

/* The entries of a checked AppendEntries header h of n entries, their
 * data (payload bytes at p) copied into one batch. 0 or -1. */
static int decode_entries(const uint8_t *h, unsigned n, const uint8_t *p, size_t payload,
                          struct raft_append_entries *a)
{
    a->entries = NULL;
    a->n_entries = 0; /* until they are all there: raft_codec_free reads it */
    if (n == 0)
        return 0;
    struct raft_entry *es = raft_calloc(n, sizeof *es);
    uint8_t *batch = raft_malloc(payload);
    if (es == NULL || batch == NULL) {
        raft_free(es);
        raft_free(batch);
        return -1;
    }
    memcpy(batch, p, payload);
    size_t at = 0;
    for (unsigned i = 0; i < n; i++) {
        const uint8_t *eh = h + AE_ENTRIES_OFFSET + 16 * (size_t)i;
        es[i].term = le_get64(eh);
        es[i].type = eh[8];
        es[i].buf.len = le_get32(eh + 12);
        es[i].buf.base = batch + at; /* the check made every length a multiple of 8 */
        es[i].batch = batch;
        at += es[i].buf.len;
    }
    a->entries = es;
    a->n_entries = n;
    return 0;
}

int raft_codec_decode(const uint8_t *buf, size_t len, const raft_frame_limits *lim,
                      struct raft_message *m, const char **why)
{
    size_t used = 0;
    uint64_t payload = 0;
    const char *reason = NULL;
    raft_frame_limits l = raft_frame_limits_or_default(lim);
    memset(m, 0, sizeof *m);
    raft_frame_verdict v = raft_frame_message(buf, len, &l, &used, &payload, &reason);
    if (v == RAFT_FRAME_BAD)
        return fail(why, reason);
    if (v != RAFT_FRAME_OK || payload > len - used || used + payload != len)
        return fail(why, "not exactly one message");
    const uint8_t *h = buf + PREAMBLE, *p = buf + used;
    size_t H = used - PREAMBLE;
    m->type = (unsigned short)le_get64(buf);
    switch (m->type) {
    case RAFT_IO_REQUEST_VOTE: {
        struct raft_request_vote *rv = &m->request_vote;
        rv->term = le_get64(h);
        rv->candidate_id = le_get64(h + 8);
        rv->last_log_index = le_get64(h + 16);
        rv->last_log_term = le_get64(h + 24);
        uint64_t flags = H == H_REQUEST_VOTE ? le_get64(h + 32) : 0; /* V1: none */
        rv->disrupt_leader = (flags & VOTE_DISRUPT_LEADER) != 0;
        rv->pre_vote = (flags & VOTE_PRE_VOTE) != 0;
        return 0;
    }
    case RAFT_IO_REQUEST_VOTE_RESULT: {
        struct raft_request_vote_result *r = &m->request_vote_result;
        r->term = le_get64(h);
        r->vote_granted = le_get64(h + 8) != 0;
        r->pre_vote = H == H_REQUEST_VOTE_RESULT_V1 ? raft_tribool_unknown
                      : (le_get64(h + 16) & RESULT_PRE_VOTE) ? raft_tribool_true
                                                          : raft_tribool_false;
        return 0;
    }
    case RAFT_IO_APPEND_ENTRIES_RESULT:
        m->append_entries_result.term = le_get64(h);
        m->append_entries_result.rejected = le_get64(h + 8);
        m->append_entries_result.last_log_index = le_get64(h + 16);
        return 0;
    case RAFT_IO_TIMEOUT_NOW:
        m->timeout_now.term = le_get64(h);
        m->timeout_now.last_log_index = le_get64(h + 8);
        m->timeout_now.last_log_term = le_get64(h + 16);
        return 0;
    case RAFT_IO_APPEND_ENTRIES: {
        struct raft_append_entries *a = &m->append_entries;
        a->term = le_get64(h);
        a->prev_log_index = le_get64(h + 8);
        a->prev_log_term = le_get64(h + 16);
        a->leader_commit = le_get64(h + 24);
        if (decode_entries(h, (unsigned)le_get64(h + 32), p, (size_t)payload, a) != 0)
            return fail(why, "out of memory");
        return 0;
    }
    case RAFT_IO_INSTALL_SNAPSHOT: {
        struct raft_install_snapshot *s = &m->install_snapshot;
        size_t clen = (size_t)le_get64(h + 32);
        s->term = le_get64(h);
        s->last_index = le_get64(h + 8);
        s->last_term = le_get64(h + 16);
        s->conf_index = le_get64(h + 24);
        raft_configuration_init(&s->conf);
        s->data.len = (size_t)payload;
        s->data.base = raft_malloc(s->data.len);
        if (s->data.base == NULL) {
            raft_codec_free(m);
            return fail(why, "out of memory");
        }
        if (decode_conf(h + IS_CONF_OFFSET, clen, &s->conf, why) != 0) {
            raft_codec_free(m);
            return -1;
        }
        memcpy(s->data.base, p, s->data.len);
        return 0;
    }
    }
    return fail(why, "an unknown message type"); /* the check passes none */
}

void raft_codec_free(struct raft_message *m)
{
    if (m->type == RAFT_IO_APPEND_ENTRIES && m->append_entries.n_entries > 0) {
        raft_free(m->append_entries.entries[0].batch);
        raft_free(m->append_entries.entries);
    } else if (m->type == RAFT_IO_INSTALL_SNAPSHOT) {
        raft_configuration_close(&m->install_snapshot.conf);
        raft_free(m->install_snapshot.data.base);
    }
    memset(m, 0, sizeof *m);
}
