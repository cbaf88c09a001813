/*
 * raft_host.c — see raft_host.h.
 */
#include "raft_host.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <raft/uv.h>
#include <uv.h>

#include "log.h"
#include "raft_io_guard.h"
#include "raft_io_net.h"
#include "raft_loop.h"
#include "raft_identity.h"
#include "raft_transport.h"
#include "timeutil.h"

/* A peer's hello within this long counts as what it is now (ms); a
 * joining member says hello to every member once a second (prober_main). */
#define SEEN_MS 3000

/* What raft_host_view is made of, but for the time that passes (a
 * member heard lately, one that answers): a view is made again when one
 * of these changed, else every VIEW_MS. */
typedef struct {
    raft_term term;
    raft_index commit, last, conf, conf_uncommitted;
    raft_id leader;
    int state;
    unsigned n;
} view_key;
/* Compared with memcmp: no padding, so no byte of it is left unset. */
_Static_assert(sizeof(view_key) == 6 * sizeof(uint64_t) + sizeof(int) + sizeof(unsigned),
               "view_key has padding");

#define VIEW_MS 250

/* A quiet follower's tick does its work once in this many (on_tick). */
#define QUIET_TICKS 5

/* How often a leader looks for members back as new incarnations, or
 * waiting to be added (replace_incarnations): a hello is good for
 * SEEN_MS, and each change is tried at most once a second anyway. */
#define INCARNATIONS_MS 250

struct raft_host {
    raft_host_config cfg;
    raft_peer peers[RAFT_PEERS_MAX];
    raft_loop *rl;              /* the loop it runs on (raft_loop.h) */
    bool own_loop;              /* started for this member alone */
    bool posted;                /* its setup was posted to the loop */
    uv_loop_t *loop;            /* raft_loop_uv(rl) */
    /* A wake is a job posted to the loop (raft_host_wake), one at a time:
     * not a libuv async handle of its own, which libuv would check, every
     * member's, each time anything wakes the loop (DESIGN §6.5, step 5). */
    pthread_mutex_t wake_mu;
    bool wake_posted;           /* under wake_mu: a wake job is queued */
    bool wakes_over;            /* under wake_mu: closed; the queued job ends it */
    bool ticking;               /* loop thread: on the loop's shared tick */
    bool closing;               /* loop thread: libraft or the setup is being closed */
    struct raft_uv_transport transport; /* ours: TLS and the frame check (raft_transport.h);
                                         * with cfg.net, one that never connects */
    raft_io_net netio;          /* with cfg.net: messages, hellos and probes through the
                                 * node's network, from the member's setup */
    bool netio_ready;           /* loop thread: netio joined, and not freed yet */
    struct raft_io io;          /* libraft's on-disk log, over that transport */
    raft_io_guard guard;        /* between libraft and io (docs/DESIGN.md §7.1) */
    struct raft raft;
    bool raft_started;

    /* What the tick last did (loop thread): an idle member's tick redoes
     * nothing that did not change (on_tick). */
    view_key viewed;            /* what refresh_view last read */
    view_key ticked;            /* what the last whole tick read (on_tick) */
    bool ticked_heard;          /* and whether its leader was heard lately then */
    unsigned quiet;             /* ticks skipped since (a quiet follower's) */
    uint64_t viewed_ms;
    uint64_t incarnations_ms;   /* when replace_incarnations last looked */
    /* The leader's URL as leader_url last made it, and the configuration
     * address it was made from (loop thread): the proposer asks on every
     * tick. */
    unsigned url_member;
    char url_from[RAFT_PEER_CONF_ADDR_MAX];
    bool url_made, url_ok;
    char url[RAFT_PEER_ADDR_MAX];

    metrics_series *m_dropped;  /* the guard's drops, counted on the loop's tick */
    uint64_t seen_dropped;
    metrics_series *m_trimmed;  /* the guard's AppendEntries started after the image */
    uint64_t seen_trimmed;
    /* What raft_host_log_changes last logged (loop thread). */
    raft_term logged_term;
    raft_id logged_leader;
    int logged_state;

    raft_member_identity me;    /* raft_identity.h */
    struct raft_change change;  /* the membership change in flight (loop thread) */
    bool changing;
    /* The member's proposer (raft_proposer.h), stepped before every
     * serve; its barrier of the term also gates membership (term_ready). */
    raft_proposer *prop;
    uint64_t change_tried_ms;
    bool first_image_pending;   /* image_first: until libraft took its first snapshot */
    uint64_t staggered_at;      /* the snapshot index the threshold was last set after */
    bool staggered;             /* set at all yet (from the start: the first snapshot too) */
    uint64_t removed_ms[RAFT_PEERS_MAX]; /* when this leader last removed each peer */
    /* A member on an address of its own (not a --raft-peers one) whose old
     * incarnation this leader removed: added back like a --raft-peers one
     * (replace_incarnations), at this configuration address. */
    raft_peer readd;
    uint64_t readd_ms;
    pthread_t prober;           /* a joining member's hellos (prober_main) */
    bool prober_started;        /* under mu: started and not joined yet; whoever clears it
                                 * joins it (the loop once it ended, or raft_host_stop) */
    bool prober_done;           /* under mu */

    /* An empty data dir: the decider thread asks the other members until
     * it can tell (raft_identity.h); libraft starts after that, on the loop. */
    pthread_t decider;
    bool deciding;              /* loop thread */
    bool decider_running;       /* under mu: not joined yet (as prober_started) */
    bool decided, decide_failed;/* under mu */
    int decided_mode;
    const char *membership;     /* under mu: raft_host_membership */
    raft_host_view view;        /* under mu: raft_host_view_get */

    /* An operator's change (raft_host_change): callers take admin_mu one
     * at a time; the rest is under mu. */
    pthread_mutex_t admin_mu;
    pthread_cond_t admin_cv;
    bool admin_pending, admin_running, admin_done;
    raft_host_op admin_op;
    unsigned admin_member;
    raft_peer admin_where;      /* an add on an address of its own (admin_where.raft[0]) */
    uint64_t admin_hello_until; /* loop thread: an add waits for the member's hello */
    raft_host_result admin_result;
    char admin_err[256];
    struct raft_change admin_change;   /* loop thread */
    struct raft_transfer admin_transfer;
    bool transfer_ended;        /* loop thread: finish_transfer answers it */
    unsigned transfer_to;

    pthread_mutex_t mu;
    pthread_cond_t cv;          /* the loop is set up, or failed to */
    bool stopping, loop_ready, loop_failed;
    bool quit;                  /* the decider and prober are to end (raft_host_stop joins
                                 * them before it sets stopping) */
    bool closed;                /* everything of this member on the loop is closed */
    char loop_err[512];
};

/* Nothing of the member is left on the loop: raft_host_start or
 * raft_host_stop, waiting for it, may free it (the caller touches h no
 * more). */
static void host_closed(raft_host *h)
{
    pthread_mutex_lock(&h->mu);
    h->closed = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void on_wake(raft_host *h);
static bool post_wake(raft_host *h);

/* The loop runs a posted wake: the member's step, or (its wakes over)
 * the end of the member on the loop. */
static void wake_job(void *arg)
{
    raft_host *h = arg;
    pthread_mutex_lock(&h->wake_mu);
    h->wake_posted = false;
    bool over = h->wakes_over;
    pthread_mutex_unlock(&h->wake_mu);
    if (over)
        host_closed(h);
    else
        on_wake(h);
}

/* Everything of the member on the loop is closed: no more wakes. The last
 * job of the member, queued behind any wake posted before (the loop runs
 * its jobs in order, a loop iteration after the close callbacks of this
 * one), says it is off the loop; raft_host_stop may then free it. */
static void wakes_end(raft_host *h)
{
    pthread_mutex_lock(&h->wake_mu);
    h->wakes_over = true;
    if (!h->wake_posted)
        h->wake_posted = raft_loop_post(h->rl, wake_job, h) == 0;
    bool posted = h->wake_posted;
    pthread_mutex_unlock(&h->wake_mu);
    if (!posted) /* out of memory: nothing of it is queued either */
        host_closed(h);
}

static void tick_off(raft_host *h)
{
    if (h->ticking)
        raft_loop_tick_remove(h->rl, h);
    h->ticking = false;
}

/* Free the member's transport (its own, or its place on the node's
 * network), which libraft closed or never took. */
static void free_transport(raft_host *h)
{
    if (h->cfg.net == NULL)
        raft_transport_free(&h->transport);
    else if (h->netio_ready)
        raft_io_net_free(&h->netio);
    h->netio_ready = false;
}

/* What the member's hellos say and what it asks the others
 * (raft_identity.h): on its transport, or over the node's network. */
static void say_self(raft_host *h, uint64_t cluster, uint64_t raft_id, bool has_state)
{
    if (h->cfg.net == NULL)
        raft_transport_set_self(&h->transport, cluster, raft_id, has_state);
    else
        raft_io_net_set_self(&h->netio, cluster, raft_id, has_state);
}

static void say_last_index(raft_host *h, uint64_t last)
{
    if (h->cfg.net == NULL)
        raft_transport_set_last_index(&h->transport, last);
    else
        raft_io_net_set_last_index(&h->netio, last);
}

static void ask(raft_host *h, const raft_peer *p, raft_member_probe *a)
{
    if (h->cfg.net == NULL)
        raft_transport_probe(&h->transport, p, a);
    else
        raft_io_net_probe(&h->netio, p, a);
}

/* The last index this member's hellos say: its log's, but at least 2
 * once it appended past its bootstrap entry or entered a term past the
 * bootstrap's 1 (term: one being entered, 0 for none), so that a member
 * that lost its data never takes one that just voted or acknowledged an
 * entry for a member of a group being made (raft_identity.h decides on
 * "nothing past the bootstrap entry"). */
static uint64_t said_last_index(raft_host *h, raft_term term)
{
    uint64_t last = raft_last_index(&h->raft);
    if (term < h->raft.current_term)
        term = h->raft.current_term;
    return term > 1 && last < 2 ? 2 : last;
}

/* The guard's grew: libraft appends or enters a term now, before its I/O
 * runs; a hello answered later must not say less (the tick's 50 ms would
 * leave a window in which a wiped member takes a group that just elected
 * for a new one). */
static void on_grew(void *arg, raft_term term)
{
    raft_host *h = arg;
    say_last_index(h, said_last_index(h, term));
}

static bool seen_lately(raft_host *h, unsigned member, uint64_t *raft_id, bool *has_state,
                        uint64_t *at)
{
    if (h->cfg.net == NULL)
        return raft_transport_seen(&h->transport, member, SEEN_MS, raft_id, has_state, at);
    return raft_io_net_seen(&h->netio, member, SEEN_MS, raft_id, has_state, at);
}

/* libraft is closed (its I/O and our transport with it): close the wake;
 * the member is then off the loop. */
static void on_raft_closed(struct raft *r)
{
    raft_host *h = r->data;
    raft_uv_close(&h->io);
    free_transport(h);
    tick_off(h);
    wakes_end(h);
}

static int start_raft(raft_host *h, int mode);
static int setup_failed(raft_host *h, bool transport, bool io);
static void serve_admin(raft_host *h);
static bool term_ready(raft_host *h);
static void finish_transfer(raft_host *h);
static bool leader_url(void *arg, uint64_t raft_id, char *out, size_t len);
static void wake_loop(void *arg);
static uint64_t loop_now_ms(void *arg);
static void refresh_view(raft_host *h, bool always);
static void tend_prober(raft_host *h, bool stopping);

/* The decider is done, or the host stops while it asks: join it; start
 * libraft with what it decided. */
static void after_deciding(raft_host *h, bool stopping)
{
    pthread_mutex_lock(&h->mu);
    bool decided = h->decided, failed = h->decide_failed, quit = h->quit;
    int mode = h->decided_mode;
    pthread_mutex_unlock(&h->mu);
    if (!decided && !stopping)
        return;
    pthread_mutex_lock(&h->mu);
    bool join = h->decider_running; /* raft_host_stop may have joined it */
    h->decider_running = false;
    pthread_mutex_unlock(&h->mu);
    if (join)
        pthread_join(h->decider, NULL);
    h->deciding = false;
    if (stopping || quit) /* a stop under way: its wake closes what runs */
        return;
    if (failed || start_raft(h, mode) != 0) {
        log_error("%s raft: %s", h->cfg.kind, h->loop_err);
        _exit(1);
    }
}

static void on_wake(raft_host *h)
{
    if (h->closing)
        return;
    pthread_mutex_lock(&h->mu);
    bool stopping = h->stopping;
    pthread_mutex_unlock(&h->mu);
    if (h->deciding)
        after_deciding(h, stopping);
    if (h->raft_started) {
        rp_step(h->prop, &h->raft);
        serve_admin(h);
        h->cfg.serve(h->cfg.arg);
        finish_transfer(h);
    }
    if (!stopping)
        return;
    /* Stop: the owner failed what it had queued; libraft fails what is in
     * flight as it closes. */
    tick_off(h);
    tend_prober(h, true); /* before the transport it probes through closes */
    if (h->raft_started) {
        h->closing = true;
        raft_close(&h->raft, on_raft_closed);
    } else
        setup_failed(h, true, false); /* still deciding: only the transport runs */
}

/* libraft 0.15 shuts a member down for good (RAFT_UNAVAILABLE) when its
 * disk fails under it, or a message leaves its log in a state it cannot
 * go on from (a leader's entry that conflicts with a committed one). Such
 * a member neither votes nor applies, so it must not go on answering
 * health: it stops at once, and the supervisor starts it again from its
 * log and store (docs/DESIGN.md §7.2). */
static void check_alive(raft_host *h)
{
    if (!h->raft_started || raft_state(&h->raft) != RAFT_UNAVAILABLE)
        return;
    pthread_mutex_lock(&h->mu);
    bool stopping = h->stopping;
    pthread_mutex_unlock(&h->mu);
    if (stopping)
        return;
    log_error("raft: libraft shut this member down (%s): stopping at once; start it again "
              "(its log and store are on disk)", raft_errmsg(&h->raft));
    _exit(RAFT_HOST_EXIT_UNAVAILABLE);
}

static void on_changed(struct raft_change *req, int status)
{
    raft_host *h = req->data;
    h->changing = false;
    if (status == 0) {
        h->change_tried_ms = 0; /* the next step may follow at once; a failure waits 1 s */
        log_info("%s raft: the membership change is committed (%u members now)", h->cfg.kind,
                 h->raft.configuration.n);
    }
    if (status != 0)
        log_warn("%s raft: a membership change failed: %s", h->cfg.kind, raft_strerror(status));
}

static const struct raft_server *server_of(const struct raft *r, unsigned member)
{
    for (unsigned i = 0; i < r->configuration.n; i++)
        if (raft_member_of(r->configuration.servers[i].id) == member)
            return &r->configuration.servers[i];
    return NULL;
}

static void set_membership(raft_host *h, const char *m)
{
    if (h->membership == m)
        return; /* the loop thread is its only writer: read without the lock */
    pthread_mutex_lock(&h->mu);
    h->membership = m;
    pthread_mutex_unlock(&h->mu);
}

/* What this member is in its group's configuration, for health. */
static const char *membership_of(raft_host *h)
{
    const struct raft_server *s = server_of(&h->raft, h->cfg.id);
    if (s == NULL || s->id != h->me.raft_id)
        return "joining";
    return s->role == RAFT_VOTER ? "voter" : s->role == RAFT_STANDBY ? "standby" : "spare";
}

/* A setup that failed before libraft started: close what was opened; the
 * member is then off the loop. */
static int setup_failed(raft_host *h, bool transport, bool io)
{
    if (io)
        raft_uv_close(&h->io);
    if (transport)
        free_transport(h);
    h->closing = true;
    wakes_end(h);
    return -1;
}

/* The leader puts a member that came back as a new incarnation (its hello
 * gives another raft id than the configuration's and no state:
 * raft_identity.h) in the old one's place, one libraft change at a time:
 * remove the old raft id, add the new one as a spare, promote it to voter
 * (libraft promotes once it has caught up). A member with state is never
 * removed or added here: only a member that lost its data is replaced. */
static void replace_incarnations(raft_host *h)
{
    struct raft *r = &h->raft;
    uint64_t now = time_mono_ms();
    if (!term_ready(h) || h->changing || now - h->change_tried_ms < 1000 ||
        now - h->incarnations_ms < INCARNATIONS_MS)
        return;
    h->incarnations_ms = now;
    for (unsigned i = 0; i < r->configuration.n; i++) {
        const struct raft_server *s = &r->configuration.servers[i];
        unsigned member = raft_member_of(s->id);
        uint64_t seen, at;
        bool state;
        if (member == h->cfg.id ||
            !seen_lately(h, member, &seen, &state, &at) ||
            (s->id == seen && s->role == RAFT_VOTER) || (s->id != seen && state))
            continue;
        int rv;
        h->change.data = h;
        h->change_tried_ms = now;
        if (s->id != seen) {
            log_info("%s raft: member %u came back as raft id %llu (it lost its data): "
                     "removing raft id %llu from the group", h->cfg.kind, member,
                     (unsigned long long)seen, (unsigned long long)s->id);
            raft_peer *p = raft_peers_find(h->peers, h->cfg.npeers, member);
            const char *why;
            if (p != NULL) {
                h->removed_ms[p - h->peers] = now;
            } else if (raft_peers_from_conf_address(s->address, &h->readd, &why) == 0) {
                h->readd.id = member; /* not a --raft-peers member: remember where it is */
                h->readd_ms = now;
            }
            rv = raft_remove(r, &h->change, s->id, on_changed);
        } else {
            log_info("%s raft: promoting member %u (raft id %llu) to voter once it has caught "
                     "up", h->cfg.kind, member, (unsigned long long)seen);
            rv = raft_assign(r, &h->change, seen, RAFT_VOTER, on_changed);
        }
        if (rv != 0)
            log_warn("%s raft: membership change for member %u: %s", h->cfg.kind, member,
                     raft_errmsg(r));
        h->changing = rv == 0;
        return;
    }
    /* A configured member in no configuration, that says it has no state in
     * a hello since this leader last removed it: a replacement whose old
     * raft id was removed above, a member that joins later
     * (--raft-initial-members), or a removed one back on an empty dir. */
    for (size_t i = 0; i <= h->cfg.npeers; i++) {
        const raft_peer *p = i < h->cfg.npeers ? &h->peers[i] : &h->readd;
        uint64_t removed = i < h->cfg.npeers ? h->removed_ms[i] : h->readd_ms;
        uint64_t seen, at;
        bool state;
        if (p->id == 0 || p->id == h->cfg.id || server_of(r, p->id) != NULL ||
            !seen_lately(h, p->id, &seen, &state, &at) || state ||
            at <= removed)
            continue;
        h->change.data = h;
        h->change_tried_ms = now;
        char where[RAFT_PEER_CONF_ADDR_MAX];
        raft_peers_conf_address(p, p == &h->readd, where, sizeof where);
        log_info("%s raft: adding member %u (raft id %llu) at %s as a spare", h->cfg.kind, p->id,
                 (unsigned long long)seen, where);
        int rv = raft_add(r, &h->change, seen, where, on_changed);
        if (rv == 0 && p == &h->readd)
            h->readd.id = 0;
        if (rv != 0)
            log_warn("%s raft: membership change for member %u: %s", h->cfg.kind, p->id,
                     raft_errmsg(r));
        h->changing = rv == 0;
        return;
    }
}

/* A leader changes the membership only once the first barrier of its term
 * committed (the proposer appends it: raft_proposer.h). Before it, the
 * leader may not yet hold a configuration change another leader committed
 * in a term between: a change it made on top of the older configuration
 * could then let two majorities that do not overlap each commit at one
 * index (the single-server change bug Ongaro reported on raft-dev in
 * 2015; his fix is this rule, DESIGN §7.3). libraft 0.15 allows such a
 * change, and also answers one committed when the leader merely applied
 * an older configuration entry; tests/unit/test_raft_membership_fsm.c
 * replays both without this rule and finds neither with it. */
static bool term_ready(raft_host *h)
{
    return rp_ready(h->prop, &h->raft);
}

/* For the decider and the prober: time to end. */
static bool stop_asked(raft_host *h)
{
    pthread_mutex_lock(&h->mu);
    bool quit = h->quit;
    pthread_mutex_unlock(&h->mu);
    return quit;
}

/* Whether this member says hello once a second (prober_main): while it is
 * in no configuration of its own (joining, or removed), and while it is a
 * spare. The leader adds a new incarnation and promotes a spare only on a
 * recent hello (SEEN_MS), and an operator's add needs one too. A spare
 * whose promotion failed (libraft gives up on one that stops answering
 * for 5 s, or catches up too slowly) keeps its connections, which said
 * their hellos long ago: without its own it would stay a spare. */
static bool probes(const char *membership)
{
    return membership != NULL &&
           (strcmp(membership, "joining") == 0 || strcmp(membership, "spare") == 0);
}


static void *prober_main(void *arg)
{
    raft_host *h = arg;
    for (;;) {
        pthread_mutex_lock(&h->mu);
        bool go = !h->quit && probes(h->membership);
        if (!go)
            h->prober_done = true;
        pthread_mutex_unlock(&h->mu);
        if (!go)
            return NULL;
        for (size_t i = 0; i < h->cfg.npeers && !stop_asked(h); i++) {
            raft_member_probe a;
            if (h->peers[i].id != h->cfg.id)
                ask(h, &h->peers[i], &a);
        }
        for (int k = 0; k < 10 && !stop_asked(h); k++)
            time_sleep_ms(100);
    }
}

/* Start the prober while this member is joining or a spare; reap it once
 * it ended (loop thread). A stopping member's prober is joined by
 * raft_host_stop, off the loop: a probe under way takes seconds, and other
 * groups may share the loop. */
static void tend_prober(raft_host *h, bool stopping)
{
    pthread_mutex_lock(&h->mu);
    stopping = stopping || h->stopping;
    bool join = h->prober_started && h->prober_done, joining = probes(h->membership);
    if (join) { /* it ended: at once */
        h->prober_started = false;
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->prober, NULL);
        pthread_mutex_lock(&h->mu);
    }
    if (!h->prober_started && joining && !stopping && !h->quit) {
        h->prober_done = false;
        h->prober_started = pthread_create(&h->prober, NULL, prober_main, h) == 0;
    }
    pthread_mutex_unlock(&h->mu);
}

/* ---- an operator's membership change (raft_host_change) ---- */

static void admin_finish(raft_host *h, raft_host_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void admin_finish(raft_host *h, raft_host_result r, const char *fmt, ...)
{
    pthread_mutex_lock(&h->mu);
    h->admin_result = r;
    h->admin_err[0] = '\0';
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(h->admin_err, sizeof h->admin_err, fmt, ap);
        va_end(ap);
    }
    h->admin_running = false;
    h->admin_done = true;
    pthread_cond_broadcast(&h->admin_cv);
    pthread_mutex_unlock(&h->mu);
}

static void on_admin_changed(struct raft_change *req, int status)
{
    raft_host *h = req->data;
    h->changing = false;
    h->change_tried_ms = 0;
    refresh_view(h, true); /* a list right after the answer shows the change */
    if (status == 0)
        log_info("%s raft: the membership change is committed (%u members now)", h->cfg.kind,
                 h->raft.configuration.n);
    if (status == 0)
        admin_finish(h, RAFT_HOST_DONE, NULL);
    else
        admin_finish(h, RAFT_HOST_REFUSED, "libraft: %s", raft_strerror(status));
}

/* The transfer ended: answered once the owner's serve ran after it
 * (finish_transfer), so that what the owner reports (its role in health,
 * readiness, where it sends clients) no longer says it leads when the
 * operator hears that the lead moved. */
static void on_admin_transferred(struct raft_transfer *req)
{
    raft_host *h = req->data;
    h->transfer_ended = true;
    h->transfer_to = raft_member_of(req->id);
    raft_host_wake(h);
}

static void finish_transfer(raft_host *h)
{
    if (!h->transfer_ended)
        return;
    h->transfer_ended = false;
    refresh_view(h, true);
    if (raft_state(&h->raft) != RAFT_LEADER) /* stepped down for it */
        admin_finish(h, RAFT_HOST_DONE, NULL);
    else
        admin_finish(h, RAFT_HOST_REFUSED, "member %u did not take the lead in time",
                     h->transfer_to);
}

/* Whether this leader heard from server i lately (within two election
 * timeouts: a follower answers every heartbeat, so one silent that long
 * is down or cut off, not slow), itself included. */
static bool answers(raft_host *h, unsigned i)
{
    const struct raft_server *s = &h->raft.configuration.servers[i];
    uint64_t heard = raft_io_guard_heard_ms(&h->guard, s->id);
    unsigned e = h->cfg.election_ms ? h->cfg.election_ms : 1000;
    return s->id == h->raft.id || (heard != 0 && time_mono_ms() - heard <= 2 * (uint64_t)e);
}

/* Removing member m leaves a quorum that answers. NULL, or why not. */
static const char *remove_keeps_quorum(raft_host *h, raft_id gone, char *why, size_t len)
{
    const struct raft_configuration *c = &h->raft.configuration;
    unsigned voters = 0, live = 0;
    for (unsigned i = 0; i < c->n; i++) {
        if (c->servers[i].id == gone || c->servers[i].role != RAFT_VOTER)
            continue;
        voters++;
        live += answers(h, i);
    }
    if (voters == 0)
        return "it is the last voter";
    if (live < voters / 2 + 1) {
        snprintf(why, len, "the %u voters left would have %u that answer, short of a quorum of "
                 "%u: bring a member back first", voters, live, voters / 2 + 1);
        return why;
    }
    return NULL;
}

/* An operator's add (docs/DESIGN.md 7.3): a --raft-peers member at its
 * address there, or another member at the address the operator gives
 * (admin_where), which the configuration then carries with its URL. It
 * waits up to SEEN_MS for the member's hello (a member just started may
 * not have said it yet): wait_for_hello finishes it. */
static void start_add(raft_host *h, unsigned member, const raft_peer *p,
                      const struct raft_server *s)
{
    raft_peer *w = &h->admin_where;
    if (s != NULL) {
        admin_finish(h, RAFT_HOST_REFUSED, "member %u is in the group already", member);
        return;
    }
    if (p != NULL && w->raft[0] != '\0' && strcmp(w->raft, p->raft) != 0) {
        admin_finish(h, RAFT_HOST_REFUSED, "member %u is at %s by --raft-peers, not at %s",
                     member, p->raft, w->raft);
        return;
    }
    if (p == NULL && w->raft[0] == '\0') {
        admin_finish(h, RAFT_HOST_REFUSED, "member %u is not one of --raft-peers: give the "
                     "address it listens on for raft (and its URL)", member);
        return;
    }
    if (p != NULL)
        *w = *p; /* where --raft-peers says; its URL comes from the flags */
    else
        w->id = member;
    h->admin_hello_until = time_mono_ms() + SEEN_MS;
}

static void wait_for_hello(raft_host *h)
{
    if (h->admin_hello_until == 0)
        return;
    struct raft *r = &h->raft;
    raft_peer *w = &h->admin_where;
    uint64_t seen, at;
    bool state;
    if (!seen_lately(h, w->id, &seen, &state, &at)) {
        if (time_mono_ms() < h->admin_hello_until)
            return;
        h->admin_hello_until = 0;
        admin_finish(h, RAFT_HOST_REFUSED, "member %u has not been heard from lately: start it "
                     "(on an empty data dir, or its own) first, with --raft-peers listing the "
                     "members and itself at %s", w->id, w->raft);
        return;
    }
    h->admin_hello_until = 0;
    if (!term_ready(h) || h->changing || server_of(r, w->id) != NULL) {
        admin_finish(h, RAFT_HOST_REFUSED, "the group changed meanwhile (a new leader, or "
                     "another change): ask again");
        return;
    }
    char where[RAFT_PEER_CONF_ADDR_MAX];
    bool own = raft_peers_find(h->peers, h->cfg.npeers, w->id) == NULL;
    raft_peers_conf_address(w, own, where, sizeof where);
    log_info("%s raft: adding member %u (raft id %llu) at %s as a spare, as asked", h->cfg.kind,
             w->id, (unsigned long long)seen, where);
    h->admin_change.data = h;
    if (raft_add(r, &h->admin_change, seen, where, on_admin_changed) != 0)
        admin_finish(h, RAFT_HOST_REFUSED, "libraft: %s", raft_errmsg(r));
    else
        h->changing = true;
}

static void serve_admin(raft_host *h)
{
    wait_for_hello(h);
    /* A membership change waits for this leader's barrier (term_ready),
     * within the caller's deadline; a transfer does not need it. */
    bool ready = raft_state(&h->raft) != RAFT_LEADER || term_ready(h);
    pthread_mutex_lock(&h->mu);
    raft_host_op op = h->admin_op;
    unsigned member = h->admin_member;
    bool go = h->admin_pending && !h->admin_running && (ready || op == RAFT_HOST_LEAD);
    if (go) {
        h->admin_pending = false;
        h->admin_running = true;
    }
    pthread_mutex_unlock(&h->mu);
    if (!go)
        return;
    struct raft *r = &h->raft;
    if (raft_state(r) != RAFT_LEADER) {
        admin_finish(h, RAFT_HOST_NOT_LEADER, "this member does not lead");
        return;
    }
    if (h->changing) {
        admin_finish(h, RAFT_HOST_REFUSED, "another membership change is in progress: try "
                     "again in a moment");
        return;
    }
    const raft_peer *p = raft_peers_find(h->peers, h->cfg.npeers, member);
    const struct raft_server *s = server_of(r, member);
    char why[200];
    const char *no;
    int rv = 0;
    switch (op) {
    case RAFT_HOST_ADD:
        start_add(h, member, p, s);
        return;
    case RAFT_HOST_REMOVE:
        if (s == NULL) {
            admin_finish(h, RAFT_HOST_REFUSED, "member %u is not in the group", member);
            return;
        }
        if (s->id == r->id) {
            admin_finish(h, RAFT_HOST_REFUSED, "member %u leads: hand the lead to another "
                         "member first", member);
            return;
        }
        if ((no = remove_keeps_quorum(h, s->id, why, sizeof why)) != NULL) {
            admin_finish(h, RAFT_HOST_REFUSED, "removing member %u: %s", member, no);
            return;
        }
        log_info("%s raft: removing member %u (raft id %llu), as asked", h->cfg.kind, member,
                 (unsigned long long)s->id);
        h->admin_change.data = h;
        rv = raft_remove(r, &h->admin_change, s->id, on_admin_changed);
        if (p != NULL)
            h->removed_ms[p - h->peers] = time_mono_ms();
        break;
    case RAFT_HOST_LEAD:
        if (s == NULL || s->role != RAFT_VOTER) {
            admin_finish(h, RAFT_HOST_REFUSED, "member %u is not a voter", member);
            return;
        }
        if (s->id == r->id) {
            admin_finish(h, RAFT_HOST_DONE, NULL);
            return;
        }
        log_info("%s raft: handing the lead to member %u, as asked", h->cfg.kind, member);
        rp_end_lease(h->prop, r); /* the target's election disrupts on purpose */
        h->admin_transfer.data = h;
        rv = raft_transfer(r, &h->admin_transfer, s->id, on_admin_transferred);
        if (rv != 0)
            admin_finish(h, RAFT_HOST_REFUSED, "libraft: %s", raft_errmsg(r));
        return;
    }
    if (rv != 0)
        admin_finish(h, RAFT_HOST_REFUSED, "libraft: %s", raft_errmsg(r));
    else
        h->changing = true;
}

static const char *role_name(int role)
{
    return role == RAFT_VOTER ? "voter" : role == RAFT_STANDBY ? "standby" : "spare";
}

/* What the view is made of now. */
static view_key view_key_of(raft_host *h)
{
    struct raft *r = &h->raft;
    view_key k = {.state = raft_state(r), .term = r->current_term, .commit = r->commit_index,
                  .last = raft_last_index(r), .conf = r->configuration_index,
                  .conf_uncommitted = r->configuration_uncommitted_index,
                  .n = r->configuration.n};
    const char *addr;
    raft_leader(r, &k.leader, &addr);
    return k;
}

/* The configuration and the leader's view of each member, for
 * raft_host_view_get. The tick's (always false) makes it again only when
 * what it shows changed, or VIEW_MS passed (who was heard lately changes
 * with time alone): an idle member's tick is then mostly this comparison
 * (DESIGN §6.5, step 5). */
static void refresh_view(raft_host *h, bool always)
{
    view_key k = view_key_of(h);
    uint64_t now = time_mono_ms();
    if (!always && memcmp(&k, &h->viewed, sizeof k) == 0 && now - h->viewed_ms < VIEW_MS)
        return;
    h->viewed = k;
    h->viewed_ms = now;
    struct raft *r = &h->raft;
    raft_host_view v = {.leads = raft_state(r) == RAFT_LEADER, .term = r->current_term,
                        .commit_index = r->commit_index, .last_index = raft_last_index(r)};
    raft_id lid = 0;
    const char *laddr = NULL;
    raft_leader(r, &lid, &laddr);
    for (unsigned i = 0; i < r->configuration.n && v.n < RAFT_PEERS_MAX; i++) {
        const struct raft_server *s = &r->configuration.servers[i];
        raft_host_member *m = &v.members[v.n++];
        m->member = raft_member_of(s->id);
        m->raft_id = s->id;
        raft_peer where;
        const char *why;
        if (raft_peers_from_conf_address(s->address, &where, &why) != 0)
            snprintf(where.raft, sizeof where.raft, "%.*s", (int)strcspn(s->address, " "),
                     s->address);
        snprintf(m->address, sizeof m->address, "%s", where.raft);
        raft_host_member_url(h, m->member, m->url, sizeof m->url);
        m->role = role_name(s->role);
        m->leader = s->id == lid && raft_host_heard_lately(h, lid);
        m->match_index = -1;
        if (v.leads) {
            m->match_index = s->id == r->id ? (int64_t)v.last_index
                                            : (int64_t)r->leader_state.progress[i].match_index;
            m->reachable = answers(h, i);
        }
    }
    pthread_mutex_lock(&h->mu);
    h->view = v;
    pthread_mutex_unlock(&h->mu);
}

/* libraft takes a snapshot once `threshold` entries were applied past the
 * last one, so members that applied the same entries take theirs at the
 * same index, together: three copies of the store read, compressed and
 * written at once, on machines that may share CPUs and disks, and the
 * leader's quorum round waits behind them (bench/RESULTS.md, "The soak").
 * Staggered, member i aims each snapshot at the next index that is
 * i/3 of a period past a multiple of the period (and at least half a
 * period after its last one), so at most one member of three is taking
 * one at a time; on average each still takes one a period. Set again
 * after every snapshot, taken or installed. */
static void stagger(raft_host *h)
{
    uint64_t last = h->raft.log.snapshot.last_index, every = h->cfg.snapshot_threshold;
    if (!h->cfg.stagger_snapshots || every < 3 || h->first_image_pending ||
        (h->staggered && last == h->staggered_at))
        return;
    h->staggered_at = last;
    h->staggered = true;
    uint64_t phase = (h->cfg.id % 3) * (every / 3);
    uint64_t next = (last / every) * every + phase; /* below or near last: moved on */
    while (next < last + every / 2)
        next += every;
    raft_set_snapshot_threshold(&h->raft, (unsigned)(next - last));
}

/* After an image was taken or installed (the guard's imaged, at once)
 * and on every whole tick: the first image ends image_first's threshold
 * of 1, and the next image is aimed (stagger). At once, not only on the
 * tick: entries applied faster than a tick would cross the threshold
 * aimed from the image before (test_service_raft
 * images_are_taken_one_member_at_a_time saw two members at one index). */
static void images_follow(raft_host *h)
{
    if (h->closing)
        return;
    if (h->first_image_pending && h->raft.log.snapshot.last_index > 0) {
        raft_set_snapshot_threshold(&h->raft, h->cfg.snapshot_threshold);
        raft_set_snapshot_trailing(&h->raft, h->cfg.snapshot_trailing);
        h->first_image_pending = false;
        log_info("%s raft: the first image is taken (index %llu): members that catch up "
                 "install it", h->cfg.kind, (unsigned long long)h->raft.log.snapshot.last_index);
    }
    stagger(h);
}

static void on_imaged(void *arg)
{
    images_follow(arg);
}

/* Every RAFT_LOOP_TICK_MS, with the other groups of the loop. */
static void on_tick(void *arg)
{
    raft_host *h = arg;
    /* A follower that nothing happened to since its last whole tick (no
     * entry, no new term, leader or configuration: an idle region's
     * follower) does the rest once in QUIET_TICKS ticks only (250 ms):
     * it would redo what is done already, and what asks for a step (a
     * proposal, an operator's change, a transfer, a decider) wakes the
     * loop (raft_host_wake). Leaders and candidates tick every time, and
     * so does a follower whose leader was heard lately no more (its
     * status stops sending clients there at once, as before). The first
     * cost of many idle members on a node (DESIGN §6.5, step 5). */
    view_key k = view_key_of(h);
    bool heard = k.leader != 0 && raft_host_heard_lately(h, k.leader);
    if (k.state == RAFT_FOLLOWER && h->quiet + 1 < QUIET_TICKS &&
        memcmp(&k, &h->ticked, sizeof k) == 0 && heard == h->ticked_heard) {
        h->quiet++;
        return;
    }
    h->quiet = 0;
    h->ticked = k;
    h->ticked_heard = heard;
    check_alive(h);
    images_follow(h);
    uint64_t last = raft_last_index(&h->raft);
    say_last_index(h, said_last_index(h, 0));
    say_self(h, h->me.cluster, h->me.raft_id, last > 0);
    rp_step(h->prop, &h->raft);
    serve_admin(h);
    replace_incarnations(h);
    set_membership(h, membership_of(h));
    tend_prober(h, false);
    refresh_view(h, false);
    if (h->guard.dropped != h->seen_dropped)
        metrics_inc(h->m_dropped, h->guard.dropped - h->seen_dropped);
    h->seen_dropped = h->guard.dropped;
    if (h->guard.trimmed != h->seen_trimmed)
        metrics_inc(h->m_trimmed, h->guard.trimmed - h->seen_trimmed);
    h->seen_trimmed = h->guard.trimmed;
    h->cfg.serve(h->cfg.arg);
    finish_transfer(h);
}

/* What a peer's message may carry (raft_frame.h): libraft 0.15 sends a
 * follower every entry from the one it needs to the last in one
 * AppendEntries, and its log holds at most a snapshot's worth plus the
 * trailing entries (more while a snapshot is taken): twice that, and
 * room for a burst, is more than any member of ours sends. */
static raft_frame_limits frame_limits(const raft_host_config *cfg)
{
    uint64_t log_max = (uint64_t)cfg->snapshot_threshold + cfg->snapshot_trailing;
    return (raft_frame_limits){.max_entries = 2 * log_max + 1024,
                               .max_entry_bytes = cfg->max_entry_bytes};
}

/* Ten election timeouts, and at least 10 s: long enough for an image of
 * hundreds of MB to be read, sent and installed on one machine's loopback
 * (bench/catchup.sh), so that a large one is seldom sent twice (each
 * resend reads the whole image into the leader's memory again). */
static unsigned install_timeout_ms(const raft_host_config *cfg)
{
    unsigned ten = 10 * (cfg->election_ms ? cfg->election_ms : 1000);
    return ten > 10000 ? ten : 10000;
}

/* The first members of a group bootstrap the same configuration: every
 * member at incarnation 0 (raft_identity.h). */
static int bootstrap(raft_host *h)
{
    struct raft_configuration conf;
    int rv = 0;
    raft_configuration_init(&conf);
    for (size_t i = 0; i < h->cfg.npeers && rv == 0; i++)
        if (!h->peers[i].later)
            rv = raft_configuration_add(&conf, h->peers[i].id, h->peers[i].raft, RAFT_VOTER);
    if (rv == 0)
        rv = raft_bootstrap(&h->raft, &conf);
    raft_configuration_close(&conf);
    return rv;
}


typedef enum { START_RUN, START_BOOTSTRAP, START_JOIN } start_mode;

/* Who this member is (raft_identity.h): its member file; a data dir from
 * before that file is incarnation 0. 1 known, 0 the dir is empty (ask the
 * others: decide), -1 with h->loop_err. */
static int known_identity(raft_host *h)
{
    char err[300];
    uint64_t own = raft_member_cluster_id(h->cfg.kind, h->peers, h->cfg.npeers);
    int rc = raft_member_load(h->cfg.dir, &h->me, err, sizeof err);
    if (rc < 0) {
        snprintf(h->loop_err, sizeof h->loop_err, "%s", err);
        return -1;
    }
    bool state = raft_member_has_state(h->cfg.dir);
    if (rc == 1 && raft_member_of(h->me.raft_id) != h->cfg.id) {
        snprintf(h->loop_err, sizeof h->loop_err, "the data dir %s is member %u's, not member "
                 "%u's", h->cfg.dir, raft_member_of(h->me.raft_id), h->cfg.id);
        return -1;
    }
    if (rc == 1 && !state) {
        /* libraft's files are gone but ours is not (a partial wipe, or a
         * joiner that was never sent anything): whatever this member
         * voted as is lost, so it comes back as a new incarnation of its
         * group, as from an empty dir. */
        h->me.raft_id = raft_member_new_incarnation(h->cfg.id);
        if (raft_member_save(h->cfg.dir, &h->me, err, sizeof err) != 0) {
            snprintf(h->loop_err, sizeof h->loop_err, "%s", err);
            return -1;
        }
        log_warn("%s raft: libraft's state is missing from the data dir: joining the group as "
                 "raft id %llu (a new incarnation of member %u)", h->cfg.kind,
                 (unsigned long long)h->me.raft_id, h->cfg.id);
        return 2;
    }
    if (rc == 1)
        return 1;
    if (!state)
        return 0;
    /* a dir from before member files */
    h->me = (raft_member_identity){own, h->cfg.id};
    if (raft_member_save(h->cfg.dir, &h->me, err, sizeof err) != 0) {
        snprintf(h->loop_err, sizeof h->loop_err, "%s", err);
        return -1;
    }
    return 1;
}

/* An empty data dir: ask the other members whether the group exists,
 * until enough answer to tell. -1 with h->loop_err. */
static int decide(raft_host *h, start_mode *mode)
{
    char err[300];
    uint64_t own = raft_member_cluster_id(h->cfg.kind, h->peers, h->cfg.npeers);
    raft_member_probe answers[RAFT_PEERS_MAX];
    for (unsigned round = 0; !stop_asked(h); round++) {
        size_t n = 0, said = 0;
        uint64_t began = time_mono_ms();
        for (size_t i = 0; i < h->cfg.npeers; i++)
            if (h->peers[i].id != h->cfg.id) {
                ask(h, &h->peers[i], &answers[n]);
                answers[n].initial = !h->peers[i].later;
                said += answers[n++].answered;
            }
        uint64_t cluster = 0;
        const raft_peer *self = raft_peers_find(h->peers, h->cfg.npeers, h->cfg.id);
        raft_member_decision d = raft_member_decide(answers, n, !self->later, own, &cluster);
        if (d == RAFT_MEMBER_BOOTSTRAP) {
            h->me = (raft_member_identity){cluster, h->cfg.id};
            *mode = START_BOOTSTRAP;
            log_info("%s raft: a new group (%zu of %zu other members answered, none holds any "
                     "of it): bootstrapping it", h->cfg.kind, said, n);
            for (size_t i = 0; i < n; i++) /* what the decision rests on */
                if (answers[i].answered)
                    log_info("%s raft:   member %u said: group %016llx, %s, last index %llu",
                             h->cfg.kind, raft_member_of(answers[i].raft_id),
                             (unsigned long long)answers[i].cluster,
                             answers[i].has_state ? "with state" : "no state",
                             (unsigned long long)answers[i].last_index);
            return 0;
        }
        if (d == RAFT_MEMBER_JOIN) {
            h->me = (raft_member_identity){cluster, raft_member_new_incarnation(h->cfg.id)};
            if (raft_member_save(h->cfg.dir, &h->me, err, sizeof err) != 0) {
                snprintf(h->loop_err, sizeof h->loop_err, "%s", err);
                return -1;
            }
            *mode = START_JOIN;
            log_warn("%s raft: the data dir is empty but the group exists: joining it as raft id "
                     "%llu (a new incarnation of member %u); this member votes only once the "
                     "leader has caught it up and promoted it", h->cfg.kind,
                     (unsigned long long)h->me.raft_id, h->cfg.id);
            return 0;
        }
        if (round % 10 == 0)
            log_warn("%s raft: the data dir is empty; %s (%zu of %zu other members answered): "
                     "asking again", h->cfg.kind,
                     d == RAFT_MEMBER_CONFLICT
                         ? "members answer for different groups: check --raft-peers"
                     : self->later
                         ? "waiting for the group to exist (this member is not one of "
                           "--raft-initial-members: it only joins)"
                         : "waiting for a majority of the members to tell whether the group "
                           "exists",
                     said, n);
        /* A round a second, the asks' own waits included: a member
         * started before the others spends its first round waiting for
         * answers that cannot come yet, and a second more would find the
         * others, which heard it at once, bootstrapped and past their
         * first election (it then joins as a new incarnation, where it
         * could have bootstrapped with them). */
        while (time_mono_ms() - began < 1000 && !stop_asked(h))
            time_sleep_ms(50);
    }
    snprintf(h->loop_err, sizeof h->loop_err, "stopped while waiting for the other members");
    return -1;
}

static void *decider_main(void *arg)
{
    raft_host *h = arg;
    start_mode mode = START_RUN;
    int rc = decide(h, &mode);
    pthread_mutex_lock(&h->mu);
    h->decided = true;
    h->decide_failed = rc != 0;
    h->decided_mode = mode;
    pthread_mutex_unlock(&h->mu);
    raft_host_wake(h);
    return NULL;
}

/* Set libraft up on the loop; 0 or -1 with h->loop_err. */
static int loop_setup(raft_host *h)
{
    raft_peer *me = raft_peers_find(h->peers, h->cfg.npeers, h->cfg.id);

    if (me == NULL) {
        snprintf(h->loop_err, sizeof(h->loop_err), "member %u is not among the peers", h->cfg.id);
        host_closed(h);
        return -1;
    }
    char why[200];
    raft_frame_limits lim = frame_limits(&h->cfg);
    const char *net_why;
    if (h->cfg.net != NULL) {
        /* on the node's network from now on: a member still deciding
         * asks and answers over it (raft_io_net.h) */
        if (raft_io_net_init(&h->netio, h->cfg.net, h->rl, h->cfg.net_group, h->peers,
                             h->cfg.npeers, &lim, &net_why) != 0) {
            snprintf(h->loop_err, sizeof(h->loop_err), "node network: %s", net_why);
            return setup_failed(h, false, false);
        }
        h->netio_ready = true;
    } else if (raft_transport_init(&h->transport, h->loop, &(raft_transport_config){
                   .address = me->raft, .listen_fd = h->cfg.listen_fd, .peers = h->peers,
                   .npeers = h->cfg.npeers, .tls = h->cfg.peer_tls, .limits = lim,
                   .metrics = h->cfg.metrics},
                   why, sizeof why) != 0) {
        snprintf(h->loop_err, sizeof(h->loop_err), "raft transport: %s", why);
        return setup_failed(h, false, false);
    }
    int known = known_identity(h);
    if (known < 0)
        return setup_failed(h, true, false);
    if (known > 0)
        return start_raft(h, known == 1 ? START_RUN : START_JOIN);
    set_membership(h, "waiting");
    /* until it knows: a member of no group, by its number */
    say_self(h, 0, h->cfg.id, false);
    pthread_mutex_lock(&h->mu);
    h->decider_running = pthread_create(&h->decider, NULL, decider_main, h) == 0;
    pthread_mutex_unlock(&h->mu);
    if (!h->decider_running) {
        snprintf(h->loop_err, sizeof(h->loop_err), "cannot start a thread");
        return setup_failed(h, true, false);
    }
    h->deciding = true;
    return 0;
}

/* libraft on the loop, as this member (h->me), bootstrapping a new group
 * in START_BOOTSTRAP. 0, or -1 with h->loop_err (what was set up closed). */
static int start_raft(raft_host *h, int mode)
{
    raft_peer *me = raft_peers_find(h->peers, h->cfg.npeers, h->cfg.id);
    int rv;
    if (mode != START_BOOTSTRAP) /* a bootstrapping member shows up once it has (below) */
        say_self(h, h->me.cluster, h->me.raft_id, mode == START_RUN);
    if (h->cfg.net != NULL)
        raft_io_net_null_transport(&h->transport, h->rl);
    if ((rv = raft_uv_init(&h->io, h->loop, h->cfg.dir, &h->transport)) != 0) {
        snprintf(h->loop_err, sizeof(h->loop_err), "raft storage in %s: %s", h->cfg.dir,
                 raft_strerror(rv));
        return setup_failed(h, true, false);
    }
    if (h->cfg.segment_bytes > 0)
        raft_uv_set_segment_size(&h->io, h->cfg.segment_bytes);
    /* What the other members' frame check takes in one AppendEntries. */
    raft_frame_limits lim = frame_limits(&h->cfg);
    if (h->cfg.net != NULL) {
        raft_io_net_wrap(&h->netio, &h->io);
        raft_io_guard_init(&h->guard, &h->netio.io);
    } else {
        raft_io_guard_init(&h->guard, &h->io);
    }
    h->guard.max_append_bytes = raft_frame_limits_or_default(&lim).max_payload_bytes;
    if ((rv = raft_init(&h->raft, &h->guard.io, h->cfg.fsm, h->me.raft_id, me->raft)) != 0) {
        snprintf(h->loop_err, sizeof(h->loop_err), "raft: %s", raft_errmsg(&h->raft));
        return setup_failed(h, true, true);
    }
    h->raft.data = h;
    raft_set_election_timeout(&h->raft, h->cfg.election_ms ? h->cfg.election_ms : 1000);
    raft_set_heartbeat_timeout(&h->raft, h->cfg.heartbeat_ms ? h->cfg.heartbeat_ms : 100);
    raft_set_snapshot_threshold(&h->raft, h->cfg.snapshot_threshold);
    raft_set_snapshot_trailing(&h->raft, h->cfg.snapshot_trailing);
    /* An image sent and not answered is sent again after this, not after
     * libraft's 30 s: a follower drops an image that reaches it while it
     * installs or takes one (libraft 0.15 answers nothing then), and the
     * leader waits the whole timeout before it tries again (docs/DESIGN.md
     * 7.3, "Catch-up that finishes"). */
    raft_set_install_snapshot_timeout(&h->raft, install_timeout_ms(&h->cfg));
    if (h->cfg.image_first) { /* the next entry applied takes an image, all log behind it */
        raft_set_snapshot_threshold(&h->raft, 1);
        raft_set_snapshot_trailing(&h->raft, 0);
        h->first_image_pending = true;
    }
    raft_set_pre_vote(&h->raft, true);
    /* A member that starts grants no vote for an election timeout, as a
     * running one grants none while it hears from its leader: the oracle
     * leader's lease rests on that (docs/DESIGN.md §7.4). */
    raft_io_guard_hold_votes(&h->guard, h->cfg.election_ms ? h->cfg.election_ms : 1000);
    char err[300];
    if ((mode == START_BOOTSTRAP && (rv = bootstrap(h)) != 0) ||
        (rv = raft_start(&h->raft)) != 0) {
        snprintf(h->loop_err, sizeof(h->loop_err), "raft: %s", raft_strerror(rv));
        h->closing = true;
        raft_close(&h->raft, on_raft_closed);
        return -1;
    }
    /* After the bootstrap: a crash before this leaves libraft's state and
     * no member file, which reads as incarnation 0 (above). */
    if (mode == START_BOOTSTRAP && raft_member_save(h->cfg.dir, &h->me, err, sizeof err) != 0)
        snprintf(h->loop_err, sizeof(h->loop_err), "%s", err);
    else if (raft_loop_tick_add(h->rl, on_tick, h) != 0)
        snprintf(h->loop_err, sizeof(h->loop_err), "out of memory");
    else
        h->ticking = true;
    if (!h->ticking) {
        h->closing = true;
        raft_close(&h->raft, on_raft_closed);
        return -1;
    }
    h->raft_started = true;
    /* What the hello says from now on: a member that bootstrapped shows
     * its one entry at once (a member still deciding takes it for one of a
     * new group, not for a group to join: raft_identity.h). */
    raft_index last = raft_last_index(&h->raft);
    say_last_index(h, said_last_index(h, 0));
    say_self(h, h->me.cluster, h->me.raft_id, last > 0);
    h->guard.grew = on_grew; /* from now on, at once (said_last_index) */
    h->guard.grew_arg = h;
    h->guard.imaged = on_imaged;
    h->guard.imaged_arg = h;
    set_membership(h, membership_of(h));
    return 0;
}

/* Posted to the loop by raft_host_start: set the member up there. A setup
 * that fails closes what it opened (the caller waits for that). */
static void host_setup(void *arg)
{
    raft_host *h = arg;
    int ok = loop_setup(h);
    pthread_mutex_lock(&h->mu);
    h->loop_ready = ok == 0;
    h->loop_failed = ok != 0;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (ok == 0 && h->raft_started) { /* a stop's wake runs after this, on this thread */
        rp_step(h->prop, &h->raft);
        h->cfg.serve(h->cfg.arg);
    }
}

/* Until the member is off its loop (host_closed). */
static void wait_closed(raft_host *h)
{
    pthread_mutex_lock(&h->mu);
    while (!h->closed)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

int raft_host_check_timeouts(unsigned election_ms, unsigned heartbeat_ms, char *err,
                             size_t errlen)
{
    if (heartbeat_ms == 0 || election_ms < RAFT_HOST_BEATS_PER_ELECTION * heartbeat_ms) {
        snprintf(err, errlen,
                 "--raft-election-timeout-ms (%u) must be at least %u times "
                 "--raft-heartbeat-ms (%u)",
                 election_ms, RAFT_HOST_BEATS_PER_ELECTION, heartbeat_ms);
        return -1;
    }
    return 0;
}

/* The host's locks and conditions, all or none (raft_host_stop destroys
 * them). */
static int host_locks_init(raft_host *h)
{
    pthread_mutex_t *mus[] = {&h->mu, &h->admin_mu, &h->wake_mu};
    pthread_cond_t *cvs[] = {&h->cv, &h->admin_cv};
    size_t m = 0, c = 0;
    while (m < 3 && pthread_mutex_init(mus[m], NULL) == 0)
        m++;
    while (m == 3 && c < 2 && pthread_cond_init(cvs[c], NULL) == 0)
        c++;
    if (m == 3 && c == 2)
        return 0;
    while (c > 0)
        pthread_cond_destroy(cvs[--c]);
    while (m > 0)
        pthread_mutex_destroy(mus[--m]);
    return -1;
}

int raft_host_start(const raft_host_config *cfg, raft_host **out, char *err, size_t errlen)
{
    raft_host *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (cfg->npeers > RAFT_PEERS_MAX || (cfg->loop != NULL && raft_loop_on_thread(cfg->loop))) {
        /* from its loop's thread the start would wait for itself */
        snprintf(err, errlen, cfg->npeers > RAFT_PEERS_MAX ? "more than %d members"
                                                           : "started from its loop's thread",
                 RAFT_PEERS_MAX);
        free(h);
        return -1;
    }
    h->cfg = *cfg;
    memcpy(h->peers, cfg->peers, cfg->npeers * sizeof(h->peers[0]));
    if (cfg->metrics != NULL)
        h->m_dropped = metrics_counter1(
            cfg->metrics, "percolator_raft_messages_dropped_total",
            "raft messages no member sends, dropped before libraft would abort on them "
            "(docs/DESIGN.md 7.2)");
    if (cfg->metrics != NULL)
        h->m_trimmed = metrics_counter1(
            cfg->metrics, "percolator_raft_appends_trimmed_total",
            "AppendEntries that began inside this member's image, made to begin after it "
            "(docs/DESIGN.md 7.2)");
    h->cfg.peers = h->peers;
    rp_config pc = cfg->proposer;
    pc.who = cfg->kind;
    pc.id = cfg->id;
    pc.leader_url = leader_url;
    pc.wake = wake_loop;
    pc.now_ms = loop_now_ms;
    pc.loop_arg = h;
    if ((h->prop = rp_new(&pc)) == NULL) {
        snprintf(err, errlen, "out of memory");
        free(h);
        return -1;
    }
    if (host_locks_init(h) != 0) {
        snprintf(err, errlen, "cannot set up a lock: out of resources");
        rp_free(h->prop);
        free(h);
        return -1;
    }
    if (mkdir(cfg->dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", cfg->dir, strerror(errno));
        goto fail;
    }
    h->rl = cfg->loop;
    if (h->rl == NULL) {
        if (raft_loop_start(&h->rl, err, errlen) != 0)
            goto fail;
        h->own_loop = true;
    }
    h->loop = raft_loop_uv(h->rl);
    *out = h; /* before the loop runs it: its callbacks may use it */
    if (raft_loop_post(h->rl, host_setup, h) != 0) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    h->posted = true;
    pthread_mutex_lock(&h->mu);
    while (!h->loop_ready && !h->loop_failed)
        pthread_cond_wait(&h->cv, &h->mu);
    bool failed = h->loop_failed;
    pthread_mutex_unlock(&h->mu);
    if (failed) {
        snprintf(err, errlen, "%s", h->loop_err);
        goto fail;
    }
    return 0;
fail:
    *out = NULL;
    raft_host_stop(h);
    return -1;
}

void raft_host_stop(raft_host *h)
{
    if (h == NULL)
        return;
    if (h->posted && raft_loop_on_thread(h->rl)) { /* it would wait for itself */
        log_error("%s raft: a member stopped from its loop's thread", h->cfg.kind);
        abort();
    }
    if (h->posted) {
        /* The proposer first: the loop's last step, which sees the host
         * stopping, then sees it too and fails the queue (nothing can be
         * queued after it). A setup that failed closed itself. */
        rp_stop(h->prop);
        /* The decider and the prober first: they see quit within a probe
         * (seconds, through TLS) and end; joined here, not on the loop,
         * which other groups may share, and before the loop, told to stop
         * next, frees the transport they probe through. */
        pthread_mutex_lock(&h->mu);
        h->quit = true;
        bool decider = h->decider_running, prober = h->prober_started;
        h->decider_running = h->prober_started = false;
        pthread_mutex_unlock(&h->mu);
        if (decider)
            pthread_join(h->decider, NULL);
        if (prober)
            pthread_join(h->prober, NULL);
        pthread_mutex_lock(&h->mu);
        h->stopping = true;
        bool ready = h->loop_ready;
        pthread_mutex_unlock(&h->mu);
        /* The stop's wake must run (a member still deciding has no
         * tick to serve it instead): out of memory, it is tried again. */
        while (ready && !post_wake(h))
            time_sleep_ms(10);
        wait_closed(h);
    }
    if (h->own_loop)
        raft_loop_stop(h->rl);
    rp_free(h->prop); /* libraft is closed: every callback ran */
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->admin_cv);
    pthread_mutex_destroy(&h->admin_mu);
    pthread_mutex_destroy(&h->wake_mu);
    free(h);
}

/* Queue a wake unless one is queued (it serves every wake until it
 * runs). false: out of memory, none is queued. */
static bool post_wake(raft_host *h)
{
    pthread_mutex_lock(&h->wake_mu);
    if (!h->wakes_over && !h->wake_posted)
        h->wake_posted = raft_loop_post(h->rl, wake_job, h) == 0;
    bool queued = h->wakes_over || h->wake_posted;
    pthread_mutex_unlock(&h->wake_mu);
    return queued;
}

void raft_host_wake(raft_host *h)
{
    (void)post_wake(h); /* out of memory: the next tick serves */
}

struct raft *raft_host_raft(raft_host *h)
{
    return &h->raft;
}

raft_proposer *raft_host_proposer(raft_host *h)
{
    return h->prop;
}

void raft_host_status(raft_host *h, rp_status *st)
{
    rp_get_status(h->prop, st);
    st->membership = raft_host_membership(h);
    /* The leader's own commit index is the group's; a follower knows the
     * highest its leaders sent (the guard notes it before correction 1). */
    uint64_t group = st->commit_index;
    if (strcmp(st->role, "leader") != 0) {
        uint64_t sent = raft_io_guard_leader_commit(&h->guard);
        group = sent > group ? sent : group;
    }
    st->lag = group > st->applied_index ? group - st->applied_index : 0;
}

static _Atomic uint64_t ready_lag = RAFT_HOST_READY_LAG;

void raft_host_set_ready_lag(uint64_t entries)
{
    atomic_store(&ready_lag, entries);
}

const char *raft_host_not_ready(const rp_status *st, char *buf, size_t len)
{
    uint64_t bound = atomic_load(&ready_lag);
    if (strcmp(st->membership, "voter") != 0)
        return "this member is not a voter of its group yet (it is joining, or came back "
               "without its data, and is being caught up: docs/DESIGN.md 7.3)";
    if (st->lag > bound) {
        snprintf(buf, len, "this member is catching up: %llu entries its leader committed are "
                 "not applied here yet (ready again within %llu of it: docs/DESIGN.md 7.3)",
                 (unsigned long long)st->lag, (unsigned long long)bound);
        return buf;
    }
    if (st->leader_id == 0)
        return "no Raft leader is known yet (an election may be under way)";
    return NULL;
}

/* The proposer's hooks (raft_proposer.h). */
static bool leader_url(void *arg, uint64_t raft_id, char *out, size_t len)
{
    raft_host *h = arg;
    if (!raft_host_heard_lately(h, raft_id))
        return false;
    unsigned member = raft_member_of(raft_id);
    /* Made from the member's configuration address (or its --peers
     * entry): made again when that address is another. */
    const struct raft_server *s = server_of(&h->raft, member);
    const char *from = s != NULL ? s->address : "";
    if (!h->url_made || h->url_member != member || strcmp(from, h->url_from) != 0) {
        h->url_ok = raft_host_member_url(h, member, h->url, sizeof h->url);
        h->url_member = member;
        snprintf(h->url_from, sizeof h->url_from, "%s", from);
        h->url_made = true;
    }
    snprintf(out, len, "%s", h->url);
    return h->url_ok;
}

static void wake_loop(void *arg)
{
    raft_host_wake(arg);
}

/* A fresh reading (libuv's own time is the loop iteration's start). */
static uint64_t loop_now_ms(void *arg)
{
    (void)arg;
    return time_mono_ms();
}

bool raft_host_heard_lately(raft_host *h, uint64_t id)
{
    if (id == h->raft.id)
        return true;
    uint64_t heard = raft_io_guard_heard_ms(&h->guard, id);
    unsigned e = h->cfg.election_ms ? h->cfg.election_ms : 1000;
    return heard != 0 && time_mono_ms() - heard <= e;
}

void raft_host_log_changes(raft_host *h, const char *who)
{
    static const char *const names[] = {"unavailable", "follower", "candidate", "leader"};
    raft_id id = 0;
    const char *addr = NULL;
    raft_leader(&h->raft, &id, &addr);
    int st = raft_state(&h->raft);
    raft_term term = h->raft.current_term;
    if (term == h->logged_term && id == h->logged_leader && st == h->logged_state)
        return;
    const char *role = st >= 0 && st <= 3 ? names[st] : "unavailable";
    if (id == h->me.raft_id && st == RAFT_LEADER)
        log_info("%s raft: term %llu: this member (%u) leads", who, (unsigned long long)term,
                 h->cfg.id);
    else if (id != 0)
        log_info("%s raft: term %llu: member %u at %s leads; this member (%u) is a %s", who,
                 (unsigned long long)term, raft_member_of(id), addr ? addr : "?", h->cfg.id,
                 role);
    else if (st == RAFT_CANDIDATE)
        log_info("%s raft: term %llu: no leader; this member (%u) stands for election (no "
                 "leader heard within the election timeout)", who, (unsigned long long)term,
                 h->cfg.id);
    else
        log_info("%s raft: term %llu: no leader known; this member (%u) is a %s", who,
                 (unsigned long long)term, h->cfg.id, role);
    h->logged_term = term;
    h->logged_leader = id;
    h->logged_state = st;
}

uint64_t raft_host_commits_lowered(const raft_host *h)
{
    return h->guard.commits_lowered;
}

uint64_t raft_host_replies_lowered(const raft_host *h)
{
    return h->guard.replies_lowered;
}

const char *raft_host_membership(raft_host *h)
{
    pthread_mutex_lock(&h->mu);
    const char *m = h->membership != NULL ? h->membership : "waiting";
    pthread_mutex_unlock(&h->mu);
    return m;
}

void raft_host_view_get(raft_host *h, raft_host_view *v)
{
    pthread_mutex_lock(&h->mu);
    *v = h->view;
    pthread_mutex_unlock(&h->mu);
}

/* Wait on admin_cv until *flag is what want or the deadline; mu held. */
static bool admin_wait(raft_host *h, bool *flag, bool want, uint64_t deadline)
{
    while (*flag != want) {
        uint64_t now = time_mono_ms();
        if (now >= deadline)
            return false;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (deadline - now) * 1000000ull;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&h->admin_cv, &h->mu, &ts);
    }
    return true;
}

raft_host_result raft_host_change(raft_host *h, raft_host_op op, unsigned member,
                                  const raft_peer *where, unsigned wait_ms, char *err,
                                  size_t errlen)
{
    uint64_t deadline = time_mono_ms() + wait_ms;
    raft_host_result res = RAFT_HOST_TIMEOUT;
    if (op == RAFT_HOST_ADD && h->cfg.net != NULL &&
        raft_peers_find(h->peers, h->cfg.npeers, member) == NULL) {
        snprintf(err, errlen, "member %u is not one of --raft-peers: over the node network a "
                 "member is on one of the peers' nodes (members elsewhere come with the "
                 "placement driver's node list)", member);
        return RAFT_HOST_REFUSED;
    }
    pthread_mutex_lock(&h->admin_mu);
    pthread_mutex_lock(&h->mu);
    /* One asked before may still be running (its caller gave up). */
    if (!admin_wait(h, &h->admin_running, false, deadline)) {
        snprintf(err, errlen, "an earlier membership change is still running");
        goto out;
    }
    h->admin_pending = true;
    h->admin_done = false;
    h->admin_op = op;
    h->admin_member = member;
    memset(&h->admin_where, 0, sizeof h->admin_where);
    if (where != NULL)
        h->admin_where = *where;
    pthread_mutex_unlock(&h->mu);
    raft_host_wake(h);
    pthread_mutex_lock(&h->mu);
    if (admin_wait(h, &h->admin_done, true, deadline)) {
        res = h->admin_result;
        snprintf(err, errlen, "%s", h->admin_err);
    } else {
        h->admin_pending = false; /* not started: it never will be */
        snprintf(err, errlen, "no outcome within %u ms (a change under way still takes effect "
                 "when it commits)", wait_ms);
    }
out:
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_unlock(&h->admin_mu);
    return res;
}

const raft_peer *raft_host_peers(const raft_host *h, size_t *n)
{
    *n = h->cfg.npeers;
    return h->peers;
}

bool raft_host_member_url(raft_host *h, unsigned member, char *out, size_t len)
{
    const struct raft_server *s = h->raft_started ? server_of(&h->raft, member) : NULL;
    const raft_peer *p = raft_peers_find(h->peers, h->cfg.npeers, member);
    raft_peer where;
    const char *why;
    out[0] = '\0';
    if (s != NULL && raft_peers_from_conf_address(s->address, &where, &why) == 0 &&
        where.http[0] != '\0')
        snprintf(out, len, "%s", where.http);
    else if (p != NULL)
        snprintf(out, len, "%s", p->http);
    return out[0] != '\0';
}
