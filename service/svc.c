/*
 * svc.c — the service's shared context: what every layer above the engine
 * asks of the service as a whole (service.h): the calling thread's storage
 * session, timestamps from the oracle, owner liveness for the engine, the
 * snapshot-read checks, the auth check, and the stop on a storage failure.
 * main.c only starts and stops.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "region_call.h"
#include "service.h"
#include "sessions.h"
#include "timeutil.h"

/* ---- engine sessions: one per thread ---- */

static _Thread_local pc_session *tls_session;
/* Which opening of a service the thread's session belongs to (svc.es_gen):
 * a thread that outlives one (a test's main thread) opens a new one for
 * the next. */
static _Thread_local uint64_t tls_gen;
static _Atomic uint64_t next_gen = 1;

void svc_engine_sessions_init(svc *s)
{
    pthread_mutex_init(&s->es_mu, NULL);
    s->es_gen = atomic_fetch_add(&next_gen, 1);
}

pc_session *svc_engine_session(svc *s)
{
    if (tls_session != NULL && tls_gen == s->es_gen)
        return tls_session;
    pc_session *ps;
    if (pc_session_open(s->engine, &ps) != PC_OK)
        return NULL;
    pthread_mutex_lock(&s->es_mu);
    if (s->nes == s->capes) {
        size_t cap = s->capes ? s->capes * 2 : 16;
        pc_session **v = realloc(s->es, cap * sizeof(*v));
        if (v == NULL) {
            pthread_mutex_unlock(&s->es_mu);
            pc_session_close(ps);
            return NULL;
        }
        s->es = v;
        s->capes = cap;
    }
    s->es[s->nes++] = ps;
    pthread_mutex_unlock(&s->es_mu);
    tls_session = ps;
    tls_gen = s->es_gen;
    return ps;
}

void svc_close_engine_sessions(svc *s)
{
    for (size_t i = 0; i < s->nes; i++)
        pc_session_close(s->es[i]);
    free(s->es);
    s->es = NULL;
    s->nes = s->capes = 0;
}

/* ---- what the protocol layers ask of the service ---- */

static int owner_alive(void *arg, const void *owner, size_t len)
{
    svc *s = arg;
    return sessions_owner_alive(s->sessions, owner, len, time_wall_ms());
}

pc_liveness svc_liveness(svc *s)
{
    /* Right after a stall of the whole process, lock ages do not count the
     * time it was stopped: its locks are not stale for that. Read the
     * session clock first: the first reader after a stall is the one that
     * notices it (sessions_now), before it judges any lock's age. */
    sessions_now(s->sessions);
    uint64_t now = time_wall_ms() - sessions_stall_credit_ms(s->sessions);
    return (pc_liveness){.now_ms = now, .owner_alive = owner_alive, .arg = s};
}

svc_snapshot svc_snapshot_begin(svc *s, uint64_t ts)
{
    uint64_t now;
    /* A snapshot above every timestamp handed out so far would not be
     * repeatable: a commit could still land below it. */
    if (ts > atomic_load(&s->ts_seen) && !(svc_timestamp(s, &now) && ts <= now))
        return SVC_SNAP_FUTURE;
    /* Checked and pinned at once: GC cannot pass it while the read runs. */
    pc_rc rc = pc_snapshot_pin(s->engine, ts);
    return rc == PC_OK ? SVC_SNAP_OK : rc == PC_NOMEM ? SVC_SNAP_NOMEM : SVC_SNAP_COLLECTED;
}

void svc_snapshot_end(svc *s, uint64_t ts)
{
    pc_snapshot_unpin(s->engine, ts);
}

void svc_storage_failed(const char *what, pc_rc rc)
{
    /* A failed log flush leaves commits in memory that may or may not be
     * on disk, and a storage engine that cannot flush will not recover by
     * itself: stop now, without answering, and let the supervisor restart
     * the service; recovery from the log then decides what survived, and
     * no client was told anything else (docs/DESIGN.md §4.4). */
    log_error("storage failure (%s: %s): stopping at once; restart to recover from the log",
              what, pc_rc_name(rc));
    _exit(SVC_EXIT_STORAGE);
}

void svc_engine_fatal(void *arg, const char *what)
{
    (void)arg;
    /* Once WiredTiger has panicked every call fails until a restart, and
     * freeing disk space does not help: answering 500 while /v1/health
     * says ok would hide it from the supervisor (DESIGN §4.7). */
    svc_storage_failed(what, PC_PANIC);
}

void svc_engine_log(void *arg, pc_log_level level, const char *msg)
{
    (void)arg;
    log_msg(level == PC_LOG_ERROR  ? LOG_ERROR
            : level == PC_LOG_WARN ? LOG_WARN
                                   : LOG_INFO,
            "%s", msg);
}

void svc_latch_waited(void *arg, uint64_t ns)
{
    svc *s = arg;
    metrics_observe(s->m.latch_wait, (double)ns / 1e9);
}

/* Record why the oracle's answer is (not) used; a change is logged once,
 * loudly: an oracle behind the store needs an operator. */
static bool ts_verdict(svc *s, svc_ts_refusal why, uint64_t first)
{
    if (why == SVC_TS_OK && atomic_load(&s->ts_refusal) == SVC_TS_OK)
        return true; /* the usual case: no shared write */
    atomic_store(&s->ts_refused, first);
    int was = atomic_exchange(&s->ts_refusal, (int)why);
    if (why == SVC_TS_BEHIND && was != SVC_TS_BEHIND)
        log_error("the timestamp oracle is behind the store: it handed out %llu, the store "
                  "holds timestamps up to %llu; it has lost its state. Refusing every "
                  "transaction until an oracle above %llu answers",
                  (unsigned long long)first, (unsigned long long)atomic_load(&s->store_max_ts),
                  (unsigned long long)atomic_load(&s->store_max_ts));
    else if (why == SVC_TS_OUT_OF_RANGE && was != SVC_TS_OUT_OF_RANGE)
        log_error("the timestamp oracle handed out %llu, at or above the limit %llu (2^53 - "
                  "2^32): refusing every transaction", (unsigned long long)first,
                  (unsigned long long)SVC_TS_LIMIT);
    else if (why == SVC_TS_OK && (was == SVC_TS_BEHIND || was == SVC_TS_OUT_OF_RANGE))
        log_info("the timestamp oracle's timestamps are usable again (%llu)",
                 (unsigned long long)first);
    return why == SVC_TS_OK;
}

static _Thread_local bool takeover_failed;

bool svc_takeover_failed(void)
{
    bool failed = takeover_failed;
    takeover_failed = false;
    return failed;
}

bool svc_timestamps(svc *s, unsigned count, uint64_t *first)
{
    /* A member that has just begun to lead hands out nothing before it
     * took over the leader's state: every transaction, read or write,
     * begins here. */
    if (s->take_over != NULL && !s->take_over(s)) {
        takeover_failed = true;
        return false;
    }
    /* The store's highest timestamp before the request: every timestamp
     * the store holds was handed out before it, so an oracle that kept its
     * state answers above it (the client sends a batch only after its
     * members joined it). Read live, not at start: on a member the store
     * grows by what other leaders committed, on any node by what this one
     * did before the oracle lost its state. */
    uint64_t floor = pc_store_max_ts(s->engine);
    int rc = oc_timestamps(s->oracle, count, first);
    if (rc == OC_BEHIND) {
        /* Below what it handed this process before: the number to start a
         * new oracle above (--min-timestamp) is the higher of the two. */
        uint64_t had = oc_highest(s->oracle);
        floor = had > floor ? had : floor;
    } else if (rc != OC_OK) {
        return ts_verdict(s, SVC_TS_UNREACHABLE, 0);
    }
    uint64_t last = *first + count - 1;
    /* Below the store's maximum, a transaction would conflict with (or
     * read around) versions from its own future. */
    if (*first <= floor) {
        atomic_store(&s->store_max_ts, floor);
        return ts_verdict(s, SVC_TS_BEHIND, *first);
    }
    if (last >= SVC_TS_LIMIT)
        return ts_verdict(s, SVC_TS_OUT_OF_RANGE, *first);
    ts_verdict(s, SVC_TS_OK, *first);
    uint64_t seen = atomic_load(&s->ts_seen);
    while (seen < last && !atomic_compare_exchange_weak(&s->ts_seen, &seen, last))
        ;
    return true;
}

bool svc_timestamp(svc *s, uint64_t *ts)
{
    return svc_timestamps(s, 1, ts);
}

const char *svc_not_ready(svc *s)
{
    uint64_t now = time_mono_ms(), last = atomic_load(&s->ready_probe_ms);
    /* Probes need no token: one oracle request a second at most, so that
     * asking often costs the oracle nothing more. */
    if (now - last >= 1000 && atomic_compare_exchange_strong(&s->ready_probe_ms, &last, now)) {
        uint64_t ts;
        svc_timestamp(s, &ts);
        svc_takeover_failed(); /* this probe's, not a request's to answer */
    }
    switch (atomic_load(&s->ts_refusal)) {
    case SVC_TS_OK:
        return NULL;
    case SVC_TS_BEHIND:
        return "the timestamp oracle is behind the store (DESIGN §4.8): transactions cannot "
               "begin or commit";
    case SVC_TS_OUT_OF_RANGE:
        return "the oracle's timestamps are near 2^53: transactions cannot begin or commit";
    default:
        return "the timestamp oracle is unreachable: transactions cannot begin or commit";
    }
}

const char *svc_authorize(const httpd_req *req, void *ctx)
{
    svc *s = ctx;
    if (s->auth.secret != NULL && !token_matches(&s->auth, httpd_header(req, "Authorization")))
        return "this request needs the header Authorization: Bearer <token>";
    /* A region's actions, raw (no oracle, any timestamp, a secondary
     * committed without its primary): for the cluster's nodes alone. */
    if (strcmp(httpd_path(req), REGION_CALL_PATH) == 0 &&
        (s->peer_auth.secret == NULL ||
         !token_is(&s->peer_auth, httpd_header(req, PEER_TOKEN_HEADER))))
        return "region calls are for the service nodes of the cluster: they need the header "
               PEER_TOKEN_HEADER " with the secret of their --peer-token-file";
    return NULL;
}

void svc_committed(svc *s)
{
    if (s->on_commit != NULL)
        s->on_commit(s);
}
