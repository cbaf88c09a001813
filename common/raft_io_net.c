/*
 * raft_io_net.c — see raft_io_net.h.
 */
#include "raft_io_net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "le.h"
#include "raft_codec.h"
#include "raft_conf_check.h"
#include "raft_identity.h"
#include "timeutil.h"

#define DEFAULT_MAX_INBOUND ((uint64_t)64 << 20)

/* A control record: six little-endian words (raft_io_net.h). */
enum { CTL_HELLO = 1, CTL_ANSWER = 2 };
#define CTL_WORDS 6
#define CTL_LEN (CTL_WORDS * 8)
#define SEEN_NOTE_MS 250

static raft_io_net *net_of(struct raft_io *inner)
{
    return inner->data;
}

/* ---- jobs on the loop ---- */

typedef struct {
    raft_io_net *n;
    struct raft_io_send *req;   /* a send's answer */
    raft_io_send_cb cb;
    int status;
    struct raft_message msg;    /* or a message received */
    size_t bytes;
    raft_net_lane lane;         /* it came on */
} job;

/* Everything posted ran and libraft's I/O closed: the close is answered. */
static void maybe_closed(raft_io_net *n)
{
    if (n->closing && n->inner_closed && atomic_load(&n->pending) == 0 && n->closed != NULL) {
        raft_io_close_cb cb = n->closed;
        n->closed = NULL;
        cb(&n->io);
    }
}

static void run_job(void *arg)
{
    job *j = arg;
    raft_io_net *n = j->n;
    if (j->cb != NULL) {
        j->cb(j->req, n->closing ? RAFT_CANCELED : j->status);
    } else {
        atomic_fetch_sub(&n->inbound_bytes[j->lane], j->bytes);
        raft_net_release(n->net, j->lane, j->bytes);
        if (n->closing || n->recv == NULL)
            raft_codec_free(&j->msg);
        else
            n->recv(&n->io, &j->msg); /* libraft owns what the message holds */
    }
    free(j);
    atomic_fetch_sub(&n->pending, 1);
    maybe_closed(n);
}

static int post(raft_io_net *n, job *j)
{
    atomic_fetch_add(&n->pending, 1);
    if (raft_loop_post(n->loop, run_job, j) != 0) {
        atomic_fetch_sub(&n->pending, 1);
        return -1;
    }
    return 0;
}

/* ---- receiving (a reader thread of the net) ---- */

/* A configuration every server of which is one of the group's peers at
 * its --raft-peers address (over the net no member is added elsewhere
 * yet; on loopback without peer TLS), no member twice, with a voter:
 * else it is forged. */
static bool conf_is_ours(const raft_io_net *n, const uint8_t *conf, size_t len)
{
    raft_member_rules rules = {n->peers, n->npeers, false, !raft_net_has_tls(n->net)};
    return raft_conf_is_ours(&rules, conf, len);
}

/* The configurations a decoded message carries are the group's (an
 * image's read from raw, the bytes it was decoded from). */
static bool confs_ours(const raft_io_net *n, const struct raft_message *m, const uint8_t *raw)
{
    if (m->type == RAFT_IO_APPEND_ENTRIES) {
        const struct raft_append_entries *a = &m->append_entries;
        for (unsigned i = 0; i < a->n_entries; i++) {
            const char *why;
            const struct raft_entry *e = &a->entries[i];
            if (e->type == RAFT_CHANGE &&
                (raft_frame_configuration(e->buf.base, e->buf.len, &why) != RAFT_FRAME_OK ||
                 !conf_is_ours(n, e->buf.base, e->buf.len)))
                return false;
        }
    }
    if (m->type == RAFT_IO_INSTALL_SNAPSHOT) { /* after the preamble: 4 words, C, conf */
        const uint8_t *h = raw + RAFT_FRAME_PREAMBLE;
        uint64_t clen = 0;
        for (int i = 7; i >= 0; i--)
            clen = clen << 8 | h[32 + i];
        return conf_is_ours(n, h + 40, (size_t)clen);
    }
    return true;
}

/* The group's member with raft id id's member number, or NULL. */
static const raft_peer *peer_of(const raft_io_net *n, uint64_t id)
{
    for (size_t q = 0; q < n->npeers; q++)
        if (n->peers[q].id == raft_member_of(id))
            return &n->peers[q];
    return NULL;
}

/* ---- hellos and answers (raft_identity.h's probes over the net) ---- */

/* This member's hello (type CTL_HELLO) or answer, with nonce, as raft id
 * self (read once: the record's sender too). */
static uint8_t *ctl_make(raft_io_net *n, uint64_t self, uint64_t type, uint64_t nonce)
{
    uint8_t *b = malloc(CTL_LEN);
    if (b == NULL)
        return NULL;
    uint64_t w[CTL_WORDS] = {type, atomic_load(&n->cluster), self, atomic_load(&n->has_state),
                             atomic_load(&n->last_index), nonce};
    for (int i = 0; i < CTL_WORDS; i++)
        le_put64(b + 8 * i, w[i]);
    return b;
}

static int ctl_send(raft_io_net *n, const raft_peer *to, uint64_t type, uint64_t nonce)
{
    uint64_t self = atomic_load(&n->self);
    uint8_t *b = ctl_make(n, self, type, nonce);
    if (b == NULL)
        return -1;
    return raft_net_send(n->net, n->group, self, 0, to->raft, RAFT_NET_MESSAGES, b, CTL_LEN);
}

/* A Raft message from raft id `from` of peer p says who it is too, as
 * every connection's hello does on a member's own transport: a member
 * that runs libraft, with state. A member removed that never learned it
 * (libraft sends it nothing more) is heard this way, and an operator may
 * add it back (raft_host.c). Noted at most every SEEN_NOTE_MS. */
static void heard(raft_io_net *n, const raft_peer *p, uint64_t from)
{
    size_t i = (size_t)(p - n->peers);
    uint64_t now = time_mono_ms();
    if (now - atomic_load(&n->seen[i].ms) < SEEN_NOTE_MS) /* without mu: a hot path */
        return;
    pthread_mutex_lock(&n->mu);
    raft_seen_note(&n->seen[i], from, true);
    pthread_mutex_unlock(&n->mu);
}

/* A control record from peer p (checked by deliver: at the node it came
 * from), sent as raft id from. A hello is noted and answered; an answer
 * ends the probe that waits for it. Anything else is dropped. */
static bool control(raft_io_net *n, const raft_peer *p, uint64_t from, raft_net_lane lane,
                    const uint8_t *msg, size_t len)
{
    uint64_t w[CTL_WORDS];
    if (lane != RAFT_NET_MESSAGES || len != CTL_LEN)
        return false;
    for (int i = 0; i < CTL_WORDS; i++)
        w[i] = le_get64(msg + 8 * i);
    uint64_t type = w[0], cluster = w[1], raft_id = w[2], state = w[3], nonce = w[5];
    /* the body speaks for the record's sender, no one else */
    if ((type != CTL_HELLO && type != CTL_ANSWER) || raft_id != from || state > 1 || nonce == 0)
        return false;
    raft_member_probe a = {.answered = true, .cluster = cluster, .raft_id = raft_id,
                           .has_state = state == 1, .last_index = w[4]};
    uint64_t mine = atomic_load(&n->cluster);
    pthread_mutex_lock(&n->mu);
    /* what a member of this group says it is now: the leader replaces a
     * new incarnation (raft_host.c), so only once both know the group */
    if (mine != 0 && cluster == mine)
        raft_seen_note(&n->seen[p - n->peers], raft_id, a.has_state);
    uint64_t waiting = 0; /* a probe of ours to p not answered yet */
    for (int i = 0; i < RAFT_IO_NET_PROBES; i++) {
        bool open = n->probes[i].nonce != 0 && n->probes[i].member == p->id &&
                    !n->probes[i].done;
        if (open && type == CTL_ANSWER && n->probes[i].nonce == nonce) {
            n->probes[i].answer = a;
            n->probes[i].done = true;
            pthread_cond_broadcast(&n->answered);
        } else if (open && type == CTL_HELLO) {
            waiting = n->probes[i].nonce;
        }
    }
    pthread_mutex_unlock(&n->mu);
    if (type == CTL_HELLO) {
        (void)ctl_send(n, p, CTL_ANSWER, nonce); /* lost with a full queue: asked again */
        if (waiting != 0) /* p is up now: ask again, the first ask was dropped */
            (void)ctl_send(n, p, CTL_HELLO, waiting);
    }
    return true;
}

static void deliver(void *arg, uint64_t from, uint64_t to, const char *from_node,
                    raft_net_lane lane, uint8_t *msg, size_t len)
{
    raft_io_net *n = arg;
    const raft_peer *sender = peer_of(n, from);
    job *j = NULL;
    const char *why;
    uint64_t self = atomic_load(&n->self);
    /* From a peer at the node it came from, not from itself: a control
     * record (to 0), or a message for this incarnation of this member
     * (which says who sent it: heard, even before libraft runs); then
     * room (this member's share, then the node's: each takes one message
     * when empty), then the frame check and the configurations. */
    bool known = sender != NULL && raft_member_of(from) != raft_member_of(self) &&
                 strcmp(sender->raft, from_node) == 0;
    if (known && to == 0) {
        if (!control(n, sender, from, lane, msg, len))
            atomic_fetch_add(&n->dropped, 1);
        free(msg);
        return;
    }
    if (known && to == self)
        heard(n, sender, from);
    /* before libraft starts nothing is posted: a member still deciding
     * may stop, and free n, with no job of ours left on its loop */
    bool ok = known && to == self && atomic_load(&n->started);
    bool mine = ok && raft_net_budget_take(&n->inbound_bytes[lane], n->max_inbound_bytes, len);
    bool node = mine && raft_net_hold(n->net, lane, len);
    ok = node && (j = calloc(1, sizeof *j)) != NULL &&
         raft_codec_decode(msg, len, &n->lim, &j->msg, &why) == 0;
    if (ok && !confs_ours(n, &j->msg, msg)) {
        raft_codec_free(&j->msg);
        ok = false;
    }
    free(msg);
    if (ok) {
        j->n = n;
        j->msg.server_id = from;
        j->msg.server_address = sender->raft; /* the peers outlive the member */
        j->bytes = len;
        j->lane = lane;
        if (post(n, j) == 0)
            return;
        raft_codec_free(&j->msg);
    }
    free(j);
    if (node)
        raft_net_release(n->net, lane, len);
    if (mine)
        atomic_fetch_sub(&n->inbound_bytes[lane], len);
    atomic_fetch_add(&n->dropped, 1);
}

/* ---- the raft_io methods ---- */

/* rv from libraft's I/O, its message copied up to where libraft reads
 * it (the guard's io, then ours). */
static int passed(raft_io_net *n, int rv)
{
    if (rv != 0)
        snprintf(n->io.errmsg, sizeof n->io.errmsg, "%s", n->inner->errmsg);
    return rv;
}

static int n_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                  raft_io_send_cb cb)
{
    raft_io_net *n = io->impl;
    uint8_t *buf;
    size_t len;
    const char *why;
    job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return RAFT_NOMEM;
    j->n = n;
    j->req = req;
    j->cb = cb;
    /* To the node the group's peers put the member at: over the net every
     * member is at its --raft-peers address (confs_ours), whatever else a
     * configuration's address carries (a URL, raft_peers.h). */
    const raft_peer *to = peer_of(n, m->server_id);
    if (to == NULL || raft_codec_encode(m, &buf, &len, &why) != 0)
        j->status = RAFT_NOCONNECTION; /* a message that could not go: lost */
    else if (raft_net_send(n->net, n->group, atomic_load(&n->self), m->server_id, to->raft,
                           m->type == RAFT_IO_INSTALL_SNAPSHOT ? RAFT_NET_IMAGES
                                                               : RAFT_NET_MESSAGES,
                           buf, len) != 0)
        j->status = RAFT_NOCONNECTION;
    if (post(n, j) != 0) {
        free(j);
        return RAFT_NOMEM;
    }
    return 0;
}

/* libraft's I/O ticks with itself; the guard above looks itself up in
 * the io it is called with: ours. */
static void on_inner_tick(struct raft_io *inner)
{
    raft_io_net *n = net_of(inner);
    n->tick(&n->io);
}

static void on_inner_recv(struct raft_io *inner, struct raft_message *m)
{
    (void)inner; /* the null transport accepts nothing: never called */
    raft_codec_free(m);
}

static int n_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv)
{
    raft_io_net *n = io->impl;
    n->recv = recv;
    n->tick = tick;
    int rv = passed(n, n->inner->start(n->inner, msecs, on_inner_tick, on_inner_recv));
    if (rv == 0) /* from now on libraft's close waits for what is posted */
        atomic_store(&n->started, true);
    return rv;
}

static void on_inner_closed(struct raft_io *inner)
{
    raft_io_net *n = net_of(inner);
    n->inner_closed = true;
    maybe_closed(n);
}

static void n_close(struct raft_io *io, raft_io_close_cb cb)
{
    raft_io_net *n = io->impl;
    n->closed = cb;
    n->closing = true;
    if (n->joined) /* no delivery runs or starts after this */
        raft_net_leave(n->net, n->group);
    n->joined = false;
    n->inner->close(n->inner, on_inner_closed);
}

static int n_init(struct raft_io *io, raft_id id, const char *address)
{
    raft_io_net *n = io->impl;
    atomic_store(&n->self, id);
    return passed(n, n->inner->init(n->inner, id, address));
}

static int n_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                  struct raft_snapshot **snapshot, raft_index *start_index,
                  struct raft_entry *entries[], size_t *n_entries)
{
    raft_io_net *n = io->impl;
    return passed(n, n->inner->load(n->inner, term, voted_for, snapshot, start_index, entries, n_entries));
}

static int n_bootstrap(struct raft_io *io, const struct raft_configuration *conf)
{
    raft_io_net *n = io->impl;
    return passed(n, n->inner->bootstrap(n->inner, conf));
}

static int n_recover(struct raft_io *io, const struct raft_configuration *conf)
{
    raft_io_net *n = io->impl;
    return passed(n, n->inner->recover(n->inner, conf));
}

static int n_set_term(struct raft_io *io, raft_term term)
{
    raft_io_net *n = io->impl;
    return passed(n, n->inner->set_term(n->inner, term));
}

static int n_set_vote(struct raft_io *io, raft_id server_id)
{
    raft_io_net *n = io->impl;
    return passed(n, n->inner->set_vote(n->inner, server_id));
}

static int n_append(struct raft_io *io, struct raft_io_append *req,
                    const struct raft_entry entries[], unsigned k, raft_io_append_cb cb)
{
    raft_io_net *n = io->impl;
    return passed(n, n->inner->append(n->inner, req, entries, k, cb));
}

static int n_truncate(struct raft_io *io, raft_index index)
{
    raft_io_net *n = io->impl;
    return passed(n, n->inner->truncate(n->inner, index));
}

static int n_snapshot_put(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
                          const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
    raft_io_net *n = io->impl;
    return passed(n, n->inner->snapshot_put(n->inner, trailing, req, snapshot, cb));
}

static int n_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                          raft_io_snapshot_get_cb cb)
{
    raft_io_net *n = io->impl;
    return passed(n, n->inner->snapshot_get(n->inner, req, cb));
}

static raft_time n_time(struct raft_io *io)
{
    raft_io_net *n = io->impl;
    return n->inner->time(n->inner);
}

static int n_random(struct raft_io *io, int min, int max)
{
    raft_io_net *n = io->impl;
    return n->inner->random(n->inner, min, max);
}

static int n_async_work(struct raft_io *io, struct raft_io_async_work *req,
                        raft_io_async_work_cb cb)
{
    raft_io_net *n = io->impl;
    return passed(n, n->inner->async_work(n->inner, req, cb));
}

/* n's lock, and the condition a probe waits on, on the monotonic clock
 * as its deadline is (time_deadline). 0, or -1 with neither taken. */
static int sync_init(raft_io_net *n)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&n->answered, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        return -1;
    if (pthread_mutex_init(&n->mu, NULL) != 0) {
        pthread_cond_destroy(&n->answered);
        return -1;
    }
    return 0;
}

int raft_io_net_init(raft_io_net *n, raft_net *net, raft_loop *loop, uint64_t group,
                     const raft_peer *peers, size_t npeers, const raft_frame_limits *lim,
                     const char **why)
{
    memset(n, 0, sizeof *n);
    if (npeers > RAFT_PEERS_MAX) {
        *why = "too many peers";
        return -1;
    }
    n->net = net;
    n->loop = loop;
    n->group = group;
    n->lim = raft_frame_limits_or_default(lim);
    memcpy(n->peers, peers, npeers * sizeof *peers);
    n->npeers = npeers;
    /* an image travels as one record, on the images lane (DESIGN §6.5) */
    uint64_t image_max = raft_net_max_message(net, RAFT_NET_IMAGES) - raft_frame_max_header(&n->lim);
    if (n->lim.max_snapshot_bytes > image_max)
        n->lim.max_snapshot_bytes = image_max; /* with its header, within a record */
    n->max_inbound_bytes = DEFAULT_MAX_INBOUND; /* or one message (raft_net_budget_take) */
    atomic_store(&n->last_index, UINT64_MAX);
    /* random nonces: an answer meant for an earlier run of this member (a
     * restart within its peer's queue) matches no probe, and none can be
     * guessed by a node that was not asked */
    if (getrandom(&n->next_nonce, sizeof n->next_nonce, 0) != (ssize_t)sizeof n->next_nonce)
        n->next_nonce = (uint64_t)time(NULL) << 32 ^ (uint64_t)time_mono_ns();
    n->next_nonce |= 1; /* never 0, which marks a free slot */
    if (sync_init(n) != 0) {
        *why = "cannot set up its lock and condition variable";
        return -1;
    }
    const char *nodes[RAFT_PEERS_MAX];
    for (size_t q = 0; q < n->npeers; q++)
        nodes[q] = n->peers[q].raft;
    if (raft_net_join(n->net, n->group, nodes, n->npeers, deliver, n) != 0) {
        pthread_cond_destroy(&n->answered);
        pthread_mutex_destroy(&n->mu);
        *why = "the group is on this node already";
        return -1;
    }
    n->joined = true;
    return 0;
}

void raft_io_net_wrap(raft_io_net *n, struct raft_io *inner)
{
    n->inner = inner;
    inner->data = n;
    memset(&n->io, 0, sizeof n->io);
    n->io.version = inner->version;
    n->io.impl = n;
    n->io.init = n_init;
    n->io.close = n_close;
    n->io.load = n_load;
    n->io.start = n_start;
    n->io.bootstrap = n_bootstrap;
    n->io.recover = n_recover;
    n->io.set_term = n_set_term;
    n->io.set_vote = n_set_vote;
    n->io.send = n_send;
    n->io.append = n_append;
    n->io.truncate = n_truncate;
    n->io.snapshot_put = n_snapshot_put;
    n->io.snapshot_get = n_snapshot_get;
    n->io.time = n_time;
    n->io.random = n_random;
    n->io.async_work = inner->async_work != NULL ? n_async_work : NULL;
}

void raft_io_net_free(raft_io_net *n)
{
    if (n->joined)
        raft_net_leave(n->net, n->group);
    n->joined = false;
    pthread_cond_destroy(&n->answered);
    pthread_mutex_destroy(&n->mu);
}

void raft_io_net_set_self(raft_io_net *n, uint64_t cluster, uint64_t raft_id, bool has_state)
{
    atomic_store(&n->cluster, cluster);
    atomic_store(&n->self, raft_id);
    atomic_store(&n->has_state, has_state);
}

void raft_io_net_set_last_index(raft_io_net *n, uint64_t index)
{
    atomic_store(&n->last_index, index);
}

int raft_io_net_probe(raft_io_net *n, const raft_peer *peer, raft_member_probe *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&n->mu);
    int slot = 0;
    while (slot < RAFT_IO_NET_PROBES && n->probes[slot].nonce != 0)
        slot++;
    if (slot == RAFT_IO_NET_PROBES) {
        pthread_mutex_unlock(&n->mu);
        return -1;
    }
    uint64_t nonce = n->next_nonce;
    n->next_nonce += 2; /* odd: never 0 */
    n->probes[slot].nonce = nonce;
    n->probes[slot].member = peer->id;
    n->probes[slot].done = false;
    pthread_mutex_unlock(&n->mu);
    int rc = ctl_send(n, peer, CTL_HELLO, nonce);
    struct timespec until = time_deadline(CLOCK_MONOTONIC, RAFT_IO_NET_PROBE_MS);
    pthread_mutex_lock(&n->mu);
    while (rc == 0 && !n->probes[slot].done)
        if (pthread_cond_timedwait(&n->answered, &n->mu, &until) != 0)
            break; /* timed out: not answered */
    if (n->probes[slot].done)
        *out = n->probes[slot].answer;
    n->probes[slot].nonce = 0;
    pthread_mutex_unlock(&n->mu);
    return out->answered ? 0 : -1;
}

bool raft_io_net_seen(raft_io_net *n, unsigned member, uint64_t max_age_ms, uint64_t *raft_id,
                      bool *has_state, uint64_t *at_ms)
{
    size_t i = 0;
    while (i < n->npeers && n->peers[i].id != member)
        i++;
    pthread_mutex_lock(&n->mu);
    bool fresh = raft_seen_get(i < n->npeers ? &n->seen[i] : NULL, max_age_ms, raft_id,
                               has_state, at_ms);
    pthread_mutex_unlock(&n->mu);
    return fresh;
}

/* ---- the transport libraft's I/O is given ---- */

typedef struct {
    struct raft_uv_transport *t;
    raft_uv_transport_close_cb cb;
} null_close;

static int t_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    (void)t, (void)id, (void)address;
    return 0;
}

static int t_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    (void)t, (void)cb;
    return 0;
}

static int t_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
                     const char *address, raft_uv_connect_cb cb)
{
    (void)t, (void)req, (void)id, (void)address, (void)cb;
    return RAFT_NOCONNECTION;
}

static void closed_later(void *arg)
{
    null_close *c = arg;
    c->cb(c->t);
    free(c);
}

static void t_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    null_close *c = malloc(sizeof *c);
    if (c != NULL) {
        *c = (null_close){t, cb};
        if (raft_loop_post(t->impl, closed_later, c) == 0)
            return;
        free(c);
    }
    cb(t); /* out of memory: answer now */
}

void raft_io_net_null_transport(struct raft_uv_transport *t, raft_loop *loop)
{
    memset(t, 0, sizeof *t);
    t->impl = loop;
    t->init = t_init;
    t->listen = t_listen;
    t->connect = t_connect;
    t->close = t_close;
}
