/*
 * replica.c — the service's one write path (replicator.h; docs/DESIGN.md
 * §6): every engine call that may write proposes a batch to the region's
 * replicator — local on a single node, a Raft group's log on a member —
 * and waits until it is applied; the fence before reads; leadership for
 * the background work; where a follower sends its clients.
 */
#include <stdatomic.h>
#include <string.h>

#include "engine_replica.h"
#include "log.h"
#include "region_call.h"
#include "raft_host.h"
#include "service.h"
#include "timeutil.h"

#define PROPOSE_WAIT_MS 5000  /* while queued; once proposed the replicator answers */

pc_rc svc_refused(rp_rc r)
{
    /* RP_SKIPPED: committed and written nowhere (its keys left the region
     * meanwhile): unavailable, and safe to ask again. */
    return r == RP_OK ? PC_OK : r == RP_NOT_LEADER ? PC_NOT_LEADER : PC_UNAVAILABLE;
}

/* The calling thread's batch, between svc_write_begin and svc_write_end
 * (each thread runs one action at a time); freed at the end, so a thread
 * that exits holds nothing. */
static _Thread_local pc_buf batch;
/* The replicator of the region the action writes, and the term it was
 * ready in when the action began (its batch is proposed in that term or
 * not at all: replicator.h). */
static _Thread_local replicator *batch_repl;
static _Thread_local uint64_t batch_term;

replicator *svc_write_term(svc *s, pc_slice key, uint64_t *term)
{
    region *r = s->regions != NULL ? router_find(s->regions, key.data, key.len) : NULL;
    *term = svc_region_ready_term(r);
    return r != NULL ? r->repl : NULL;
}

uint64_t svc_region_ready_term(const region *r)
{
    uint64_t term = r != NULL && r->repl != NULL ? r->repl->ops->ready_term(r->repl) : 0;
    return term != 0 ? term : RP_TERM_NONE; /* not a ready leader: its batch is refused */
}

/* No gate: the engine latches the keys of each action (DESIGN §4.10), so
 * actions on other keys read, propose and wait for their apply alongside
 * this one, and the replicator makes them durable together. */
void svc_write_begin(svc *s, pc_session *ps, pc_slice key)
{
    batch.len = 0;
    batch_repl = svc_write_term(s, key, &batch_term); /* before the action reads the store */
    pc_session_propose(ps, &batch);
}

region *svc_region_of_batch(svc *s, const void *batch, size_t len)
{
    if (s->home == NULL || s->home->repl == NULL)
        return NULL; /* start-up: svc_open starts the replicator first */
    bool stale = false;
    region *r = router_find_batch(s->regions, batch, len, &stale);
    if (r == NULL)
        log_error("a write batch of %zu bytes is not for one log: refused", len);
    else if (stale) /* cut before a split: its regions share one log yet */
        metrics_inc(s->m.region_stale_batches, 1);
    return r;
}

bool svc_batch_is_of(svc *s, const region *rg, const replicator *repl)
{
    static _Atomic uint64_t logged_ms; /* a split may refuse many at once: a line a minute */
    if (rg == NULL || rg->repl == NULL || repl == NULL)
        return false; /* svc_region_of_batch logged it, or no log ran when it began */
    if (rg->repl == repl)
        return true;
    /* Its term is another group's: proposed in it, it could pass or fail
     * by chance. The keys moved (a split made their region's group) or
     * the action's key was not one it writes (a mistake of ours). */
    metrics_inc(s->m.region_stale_batches, 1);
    uint64_t now = time_mono_ms(), last = atomic_load(&logged_ms);
    if (now - last >= 60000 && atomic_compare_exchange_strong(&logged_ms, &last, now))
        log_warn("a write batch is for region %llu, whose log is not the one its action began "
                 "in: refused, 503 (asked again, it begins there; counted in "
                 "percolator_region_stale_batches_total)",
                 (unsigned long long)rg->id);
    return false;
}

pc_rc svc_propose(svc *s, const void *batch, size_t len)
{
    region *rg = svc_region_of_batch(s, batch, len);
    if (rg == NULL)
        return PC_UNAVAILABLE;
    uint64_t term = rg->repl->ops->ready_term(rg->repl);
    rp_rc r = rg->repl->ops->propose(rg->repl, batch, len, term != 0 ? term : RP_TERM_NONE,
                                     PROPOSE_WAIT_MS);
    if (r == RP_OK)
        region_count_batch(rg, len);
    return svc_refused(r);
}

pc_rc svc_propose_in(svc *s, replicator *repl, uint64_t term, const void *batch, size_t len,
                     bool *skipped)
{
    (void)s;
    rp_rc r = repl->ops->propose(repl, batch, len, term, PROPOSE_WAIT_MS);
    *skipped = r == RP_SKIPPED;
    return r == RP_SKIPPED ? PC_OK : svc_refused(r);
}

size_t svc_region_run(svc *s, const pc_mutation *m, size_t n)
{
    if (s->regions == NULL || router_count(s->regions) <= 1)
        return n;
    return router_run(s->regions, m, n);
}

pc_rc svc_write_end(svc *s, pc_session *ps, pc_rc rc, bool *proposed)
{
    if (proposed != NULL)
        *proposed = false;
    /* The latches (and the commits in flight handed over to them) stay
     * until the batch is applied here or could not be committed: the next
     * action on these keys then reads a store that holds this one. */
    pc_latches *held = pc_session_take_latches(ps);
    pc_session_propose(ps, NULL);
    /* An action that changed nothing has nothing to replicate. */
    if (batch.len > 0) {
        region *rg = svc_region_of_batch(s, batch.data, batch.len);
        rp_rc r = !svc_batch_is_of(s, rg, batch_repl)
                      ? RP_UNAVAILABLE
                      : rg->repl->ops->propose(rg->repl, batch.data, batch.len, batch_term,
                                               PROPOSE_WAIT_MS);
        if (r != RP_OK)
            rc = svc_refused(r);
        else if (proposed != NULL)
            *proposed = true;
        if (r == RP_OK)
            region_count_batch(rg, batch.len);
    }
    pc_latches_release(held);
    pc_buf_free(&batch);
    return rc;
}

/* In a group, the barrier proves this member still leads the region and
 * that everything it committed before the read arrived is applied here.
 * A commit below the read's timestamp that is not applied yet is still
 * in the table of commits in flight (a one-phase commit, a commit point:
 * their latches keep it there until the apply) or leaves its lock in the
 * store (two-phase secondaries), so the read meets it and waits. A group
 * of one answers at once. Before svc_open has started the replicator
 * nothing reads or writes (it starts it before it loads the observers);
 * the check only keeps a mistake from crashing. */
typedef struct {
    pc_rc rc;
    size_t regions; /* fenced so far */
    replicator *last; /* the last replicator fenced: regions that share it
                       * (today every region of a node) need one barrier */
    /* A range's fence: where the next region must start (the range's
     * start, then each region's end), and whether the last one runs to
     * the end of the keyspace. */
    pc_slice want;
    bool to_the_end;
    /* svc_read_fence_all_but's: a region not led here that its caller
     * fenced another way (NULL: none) */
    bool (*vouched)(void *arg, const region *r);
    void *varg;
} fence_args;

static int fence_region(void *arg, region *r)
{
    fence_args *f = arg;
    f->regions++;
    if (f->vouched != NULL && svc_region_ready_term(r) == RP_TERM_NONE && f->vouched(f->varg, r))
        f->last = NULL; /* another node leads it: its read index, waited for here */
    else if (r->repl == NULL)
        f->rc = PC_UNAVAILABLE; /* no log of its own yet (a split's new region): none vouches */
    else if (r->repl != f->last)
        f->rc = svc_refused(r->repl->ops->read_barrier(r->repl, PROPOSE_WAIT_MS));
    f->last = r->repl;
    return f->rc != PC_OK;
}

/* A region of a range's fence, in key order: it must start where the
 * last ended (the first: at or before the range's start). A hole (with
 * --region-logs, a member that missed a split has no region for the new
 * one's keys, and its store's rows there are old) is vouched for by none:
 * unavailable. */
static int fence_covering(void *arg, region *r)
{
    fence_args *f = arg;
    int cmp = pc_key_cmp(r->start.data, r->start.len, f->want.data, f->want.len);
    if (f->regions == 0 ? cmp > 0 : cmp != 0) {
        f->rc = PC_UNAVAILABLE;
        return 1;
    }
    f->want = (pc_slice){r->end.data, r->end.len};
    f->to_the_end = r->unbounded;
    return fence_region(f, r);
}

pc_rc svc_read_fence_range(svc *s, pc_slice start, pc_slice end)
{
    if (s->regions == NULL)
        return PC_OK; /* start-up: see above */
    if (end.data != NULL && pc_key_cmp(end.data, end.len, start.data, start.len) <= 0)
        return PC_OK; /* an empty range: nothing is read, so nothing to vouch for */
    fence_args f = {PC_OK, 0, NULL, start, false, NULL, NULL};
    router_each_overlapping(s->regions, start.data, start.len, end.data, end.len,
                            fence_covering, &f);
    /* No region holds a key of it, or one of its keys: none can vouch for
     * what the store says there. */
    bool covered = f.to_the_end ||
                   (end.data != NULL && pc_key_cmp(f.want.data, f.want.len, end.data, end.len) >= 0);
    return f.regions == 0 || (f.rc == PC_OK && !covered) ? PC_UNAVAILABLE : f.rc;
}

pc_rc svc_read_fence(svc *s, pc_slice key)
{
    if (s->regions == NULL)
        return PC_OK;
    region *r = router_find(s->regions, key.data, key.len);
    fence_args f = {.rc = PC_OK};
    if (r != NULL)
        fence_region(&f, r);
    return f.regions == 0 ? PC_UNAVAILABLE : f.rc;
}

/* svc_read_epoch's sum: each replicator once (regions that share one are
 * next to each other). */
typedef struct {
    uint64_t sum;
    replicator *last;
} epoch_args;

static int add_failures(void *arg, region *r)
{
    epoch_args *e = arg;
    if (r->repl != NULL && r->repl != e->last)
        e->sum += r->repl->ops->failures(r->repl);
    e->last = r->repl;
    return 0;
}

/* The map's generation is in the sum: a read sampled before and after a
 * split may sum the failures of other logs (its key moved), whose sums
 * say nothing of each other; every change of the map changes the epoch. */
uint64_t svc_read_epoch(svc *s, pc_slice key)
{
    if (s->regions == NULL)
        return 0;
    epoch_args e = {router_generation(s->regions), NULL};
    region *r = router_find(s->regions, key.data, key.len);
    if (r != NULL)
        add_failures(&e, r);
    return e.sum;
}

uint64_t svc_read_epoch_range(svc *s, pc_slice start, pc_slice end)
{
    if (s->regions == NULL)
        return 0;
    epoch_args e = {router_generation(s->regions), NULL};
    router_each_overlapping(s->regions, start.data, start.len, end.data, end.len, add_failures,
                            &e);
    return e.sum;
}

bool svc_read_now(svc *s, pc_slice key)
{
    region *r = s->regions != NULL ? router_find(s->regions, key.data, key.len) : NULL;
    return r != NULL && r->repl != NULL && r->repl->ops->read_now(r->repl);
}

pc_rc svc_read_fence_all(svc *s)
{
    return svc_read_fence_range(s, (pc_slice){"", 0}, (pc_slice){NULL, 0});
}

pc_rc svc_read_fence_all_but(svc *s, bool (*vouched)(void *arg, const region *r), void *arg)
{
    if (s->regions == NULL)
        return PC_OK;
    fence_args f = {PC_OK, 0, NULL, {"", 0}, false, vouched, arg};
    router_each_overlapping(s->regions, "", 0, NULL, 0, fence_covering, &f);
    return f.regions == 0 || (f.rc == PC_OK && !f.to_the_end) ? PC_UNAVAILABLE : f.rc;
}

svc_leadership svc_leadership_of(svc *s, rp_status *st)
{
    rp_status local;
    if (st == NULL)
        st = &local;
    if (s->home == NULL || s->home->repl == NULL) {
        *st = (rp_status){.role = "unavailable", .membership = ""};
        return SVC_NO_LEADER; /* start-up: svc_open */
    }
    s->home->repl->ops->status(s->home->repl, st);
    if (st->ready_term != 0)
        return SVC_LEADS;
    if (strcmp(st->role, "leader") == 0)
        return SVC_LEADS_NOT_READY;
    return st->leader_http[0] != '\0' ? SVC_FOLLOWS : SVC_NO_LEADER;
}

const char *svc_member_not_ready(svc *s, char *buf, size_t len)
{
    rp_status st;
    if (svc_leadership_of(s, &st) == SVC_LEADS_NOT_READY)
        return "this member was just elected and is taking over (its first Raft barrier is not "
               "applied yet)";
    return raft_host_not_ready(&st, buf, len);
}

bool svc_leads(svc *s)
{
    return svc_leadership_of(s, NULL) == SVC_LEADS;
}

void svc_raft_status(svc *s, raft_group_status *st)
{
    raft_group_get_status(s->home->raft, st);
}

struct raft_host *svc_raft_host(svc *s)
{
    return raft_group_host(s->home->raft);
}

uint64_t svc_leader_term(svc *s)
{
    /* None before the replicator runs: nothing may be proposed yet. */
    replicator *repl = s->home != NULL ? s->home->repl : NULL;
    return repl != NULL ? repl->ops->ready_term(repl) : 0;
}

/* Every /v1 request but health and readiness (public routes, which httpd
 * never asks about) is served by the leader: a follower passes it on to
 * the leader it heard from within the last election timeout and relays the
 * answer (forward.h), so any member serves any client; while it knows of
 * no such leader it answers 503 not_leader with Retry-After. A request
 * that was passed on already is never passed on again (no loops). */
bool svc_elsewhere(const httpd_req *req, void *ctx, httpd_elsewhere *out)
{
    svc *s = ctx;
    if (!svc_replicated(s) || strncmp(httpd_path(req), "/v1/", 4) != 0)
        return false;
    /* An action sent to this node as its region's leader: served or
     * refused here, never passed on (routes_region_calls.c). */
    if (strcmp(httpd_path(req), REGION_CALL_PATH) == 0)
        return false;
    /* A member's own region map, as it applied it (routes_regions.c). */
    const char *local = httpd_query(req, "local", NULL);
    if (strcmp(httpd_method(req), "GET") == 0 && strcmp(httpd_path(req), "/v1/regions") == 0 &&
        local != NULL && strcmp(local, "true") == 0)
        return false;
    raft_group_status st;
    svc_leadership l = svc_leadership_of(s, &st);
    const char *by = httpd_header(req, FORWARD_HEADER);
    if (l == SVC_LEADS || l == SVC_LEADS_NOT_READY) {
        if (by != NULL)
            forward_note_received(s->fwd);
        return false; /* a leader still waiting for its first barrier answers 503 itself */
    }
    out->code = "not_leader";
    if (by != NULL) {
        snprintf(out->message, sizeof out->message,
                 "this member (%u) was passed the request by %.64s as the leader, but does "
                 "not lead: retry", s->cfg.shared.raft_id ? (unsigned)s->cfg.shared.raft_id : 0, by);
    } else if (l == SVC_FOLLOWS && s->fwd != NULL) {
        snprintf(out->location, sizeof out->location, "%s", st.leader_http);
        /* A backup archive is as big as the store, and a watch never
         * ends: neither is held in memory to be relayed, the client is
         * sent to the leader for it (307). */
        bool get = strcmp(httpd_method(req), "GET") == 0 ||
                   strcmp(httpd_method(req), "HEAD") == 0;
        bool backup = get && strcmp(httpd_path(req), "/v1/admin/backup") == 0;
        bool watch = get && strcmp(httpd_path(req), "/v1/watch") == 0;
        out->forward = !backup && !watch;
        if (!out->forward)
            snprintf(out->message, sizeof out->message, "%s comes from the leader: member %u at %s",
                     backup ? "a backup archive" : "a change stream", st.leader_id,
                     st.leader_http);
    } else {
        snprintf(out->message, sizeof out->message,
                 "this member is not the leader and has not heard from one within the "
                 "election timeout (an election may be under way): retry");
    }
    return true;
}

void svc_forward(httpd_req *req, const char *target, void *ctx)
{
    svc *s = ctx;
    forward_request(s->fwd, req, target);
}

/* forward_config.still_target: the member a request was passed to still
 * leads as far as this member knows, and was heard from lately. */
static bool still_leader(const char *target, void *arg)
{
    svc *s = arg;
    raft_group_status st;
    raft_group_get_status(s->home->raft, &st);
    return strcmp(st.leader_http, target) == 0;
}

forwarder *svc_forwarder_start(svc *s, const oc_tls *tls, char *err, size_t errlen)
{
    char self[32];
    snprintf(self, sizeof self, "member %u", (unsigned)s->cfg.shared.raft_id);
    /* A scan page holds up to --max-reply-bytes of keys and values, more
     * once encoded (base64, JSON per item). */
    size_t max_reply = s->cfg.max_reply_bytes * 4 + ((size_t)16 << 20);
    forward_config fc = {
        .self = self,
        .connect_timeout_ms = 1000,
        /* The longest a leader may take: an observer claim's wait (60 s
         * at most), a lock wait, then a quorum. */
        .timeout_ms = (unsigned)(s->cfg.lock_wait_ms + 90000),
        .max_reply = max_reply,
        .max_conns = (unsigned)s->cfg.shared.threads,
        .ca_file = tls->ca_file[0] ? tls->ca_file : NULL,
        .cert_file = tls->cert_file[0] ? tls->cert_file : NULL,
        .key_file = tls->key_file[0] ? tls->key_file : NULL,
        .still_target = still_leader,
        .arg = s,
        .metrics = s->metrics,
    };
    return forward_start(&fc, err, errlen);
}
