/*
 * service.h — what the service's files share: its settings, the shared
 * state every handler reaches through the httpd ctx pointer, and the
 * helpers the route files use.
 *
 * Layers: routes_*.c parse HTTP/JSON and answer; reader.c and
 * coordinator.c drive the Percolator protocol through engine.h; sessions.c
 * keeps transaction sessions and their leases. No WiredTiger here.
 *
 * How functions say what happened, everywhere in service/:
 *  - one that takes the request and may answer it returns bool: true to go
 *    on, false when it has answered (an error; the caller just returns);
 *    or, if it produces something (txn_open, session_read), a pointer that
 *    is NULL when it has answered;
 *  - one below HTTP returns pc_rc (or an enum of its own, as txn_buffer);
 *  - a lookup or constructor returns a pointer, NULL for none.
 */
#ifndef PC_SERVICE_H
#define PC_SERVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "token.h"
#include "engine.h"
#include "forward.h"
#include "httpd.h"
#include "metrics.h"
#include "oracle_client.h"
#include "program.h"
#include "raft_group.h"
#include "region.h"
#include "replicator.h"
#include "store_size.h"

#define SVC_MAX_KEY 4096            /* DESIGN §2: keys are 1..4096 bytes */

typedef struct svc_config {
    program_flags shared;           /* the flags both programs have: --listen, --threads,
                                       connection limits, TLS, logs, --raft-id, peers and
                                       timeouts (common/program.h) */
    const char *data_dir, *oracle, *sync, *auth_token_file, *openapi_file;
    const char *oracle_token_file, *peer_token_file;
    const char *backup_dir, *restore_from;
    const char *region_split_keys;  /* keyspace.h ks_split_keys; "": one region */
    bool region_logs;               /* a Raft group per region (region_logs.c) */
    bool gather_leaders;            /* hand every region's lead to region 1's leader */
    uint64_t region_max_bytes;      /* split a region past this size (0: never; splits.c) */
    uint64_t pd_heartbeat_ms;       /* report to the placement driver this often (0: never;
                                       pd_report.h) */
    const char *advertise_url;      /* a single node's URL at the driver ("": from --listen) */
    uint64_t backup_keep;           /* --backup-keep: backups kept in backup_dir (0: all) */
    uint64_t lease_ttl_ms, max_lock_age_ms, janitor_interval_ms, lock_wait_ms;
    uint64_t cache_size, max_value_bytes, max_txn_bytes, txn_retention_ms;
    uint64_t oracle_timeout_ms, gc_retention_ms, max_body_memory;
    uint64_t max_reply_bytes, max_sessions, max_session_bytes;
    bool one_pc;
    uint64_t raft_snapshot_entries; /* log compaction: a snapshot every this many entries */
    uint64_t watch_max, watch_buffer_bytes; /* the change feed (watch.h) */
    uint64_t lease_max;             /* leases at once (leases.h) */
} svc_config;

typedef struct sessions sessions;
typedef struct observers observers;
typedef struct write_batch write_batch;
typedef struct watch_hub watch_hub;
typedef struct leases leases;

/* Metrics the protocol layers update (HTTP ones live in httpd). */
typedef struct svc_metrics {
    metrics_series *txn_begun, *txn_committed, *commits_1pc, *commits_2pc;
    metrics_series *commits_cross_region;
    metrics_family *region_batches;
    metrics_series *region_splits;  /* region maps installed by splits (splits.c) */
    metrics_series *region_stale_batches; /* batches cut before a split (replica.c) */
    metrics_family *region_calls_sent;   /* labels: action, result (actions.c) */
    metrics_family *region_calls_served; /* label: action (routes_region_calls.c) */
    metrics_series *region_size_checks, *region_auto_splits; /* splits.c */
    metrics_family *txn_aborted;    /* label: reason */
    metrics_family *conflicts;      /* label: kind (write_conflict, key_locked) */
    metrics_series *lock_waits, *lock_wait_timeouts;
    metrics_series *latch_wait;   /* histogram: an action's wait for another's latches */
    metrics_family *resolved;       /* label: how (rolled_forward, rolled_back) */
    metrics_family *janitor_resolved; /* label: how */
    metrics_series *gc_versions_removed, *mvcc_versions, *gc_safe_point;
    metrics_series *notify_scanned, *notif_claimed, *notif_acked, *notif_pending;
    metrics_series *leases, *leases_expired;
} svc_metrics;

typedef struct svc {
    svc_config cfg;
    pc_engine *engine;
    oc_client *oracle;
    sessions *sessions;
    observers *obs;
    leases *leases;                 /* keys that expire (leases.h) */
    write_batch *batch;             /* committer of blind writes; NULL: none */
    watch_hub *watch;               /* the change feed (watch.h) */
    metrics_registry *metrics;
    svc_metrics m;
    token auth;                     /* secret NULL: no auth */
    token peer_auth;                /* the nodes' shared secret for region calls
                                     * (--peer-token-file; NULL: none are made or served) */
    store_size *size;               /* the data dir's bytes on disk (/v1/health) */
    char *openapi;                  /* the spec's text, NULL if not found */
    size_t openapi_len;
    char run_id[17];                /* this run's id: owners of earlier runs are dead */
    void (*on_commit)(struct svc *s); /* set at start: wakes the observers' waiters */
    bool (*take_over)(struct svc *s); /* set at start: svc_take_over (takeover.c) */
    _Atomic uint64_t ts_seen;       /* the highest timestamp the oracle gave us */
    /* A digest of the prefixes the engine marks for observers (observers.c
     * push_prefixes): a region call carries it (region_call.h). */
    _Atomic uint64_t observed_digest;
    _Atomic bool observers_behind;  /* a node said they differ from its store (janitor.c) */
    _Atomic uint64_t ready_probe_ms; /* last oracle request made for readiness */
    /* The store's highest timestamp as the last refused oracle answer was
     * compared with it (svc_timestamps; at start, the store's then;
     * DESIGN §4.8): what a 503 oracle_behind names. */
    _Atomic uint64_t store_max_ts;
    /* The term whose leader-only state this member took over (takeover.c
     * svc_take_over; 0: none yet), and the lock its first request holds
     * while it does. */
    _Atomic uint64_t served_term;
    pthread_mutex_t takeover_mu;
    /* The verdict on the oracle's latest answer, process-wide (what a 503
     * and /v1/health report; while it changes, a concurrent reply may
     * still give the previous reason). */
    _Atomic int ts_refusal;         /* svc_ts_refusal */
    _Atomic uint64_t ts_refused;    /* the refused answer's first timestamp */

    /* Which region holds a key (region.h), and how its writes become
     * durable (replicator.h; replica.c): today one region holds every key
     * (home), replicated by a log of one (a single node) or by a Raft
     * group, whose member this is (home->raft; NULL on a single node). */
    router *regions;
    region *home;
    pthread_mutex_t split_mu;       /* one split proposed at a time (splits.c) */
    struct pd_report *pd;           /* the placement driver's client (pd_report.h): new
                                     * regions' ids; NULL: not reporting, local ids */
    forwarder *fwd;                 /* a member passes requests on to its leader */
    struct region_calls *calls;     /* actions sent to a region's leader elsewhere
                                     * (region_call.h); NULL: none are */
    struct {                        /* --region-logs (region_logs.c): */
        struct raft_loop *loop;     /* every group's loop thread */
        struct raft_net *net;       /* the node network on the raft address */
        char **dirs;                /* each group's log dir, as long as it runs */
        size_t ndirs, capdirs;
        uint64_t warned_ms;         /* the gather's last warning (the janitor's thread) */
        uint64_t failed_logged_ms;  /* the maker's last "cannot start" (its thread) */
        raft_group_config base;     /* what each group starts with (its dir: base_dir) */
        char *base_dir;
        /* The region maker (a thread): woken when a group applied rows, it
         * makes the router the store's rows and starts new regions' groups. */
        pthread_t maker;
        bool maker_on;
        pthread_mutex_t mu;
        pthread_cond_t cv;
        bool wake, stop;            /* under mu */
        struct region_fill *fill;   /* a split missed: its replica from a peer (region_fill.h) */
    } rl;

    /* Engine sessions, one per thread that asked for one; closed at exit. */
    pthread_mutex_t es_mu;
    pc_session **es;
    size_t nes, capes;
    uint64_t es_gen;                /* this opening's number (svc_engine_session) */
} svc;

/* Start the service's core (svc_open.c): the session and observer
 * tables, metrics, the store in s->cfg.data_dir (made from
 * s->cfg.restore_from first when set), the oracle client (otls and
 * oracle_secret may be NULL), the observers' registrations, the replicator
 * (rcfg: a member of that Raft group, its listen_fd, peers and timeouts
 * filled in; NULL: a single node's log of one) and the write batcher.
 * 0, or the exit status to stop with (logged; svc_close frees what was
 * started). */
int svc_open(svc *s, raft_group_config *rcfg, const oc_tls *otls, const char *oracle_secret);
/* --region-logs (region_logs.c): the regions from the store's rows (a new
 * store seeded with --region-split-keys' first), a node network and a
 * loop, and a Raft group per region over them (rcfg: the member's, its
 * listen hooks set; each group's log in rcfg->dir/r<id>); s->regions set.
 * 0, or -1 with why in err (what started is stopped by
 * svc_region_logs_close). */
int svc_region_logs_open(svc *s, pc_session *ps, const raft_group_config *rcfg, char *err,
                         size_t errlen);
void svc_region_logs_close(svc *s);
/* An apply listener's rows (replicator.h): a group applied region rows;
 * the region maker is woken (on the loop thread: no waiting). */
void svc_region_rows_set(void *arg);

/* Without --region-logs: -1 (logged) when the store has region rows (it
 * was made with --region-logs) or cannot be read; else 0. */
int svc_region_logs_refuse_one_log(svc *s, pc_session *ps);
/* Leaders together (each janitor round, every member): a region led here
 * while region 1 is led by another member is handed to it. */
void svc_region_leaders_gather(svc *s);
/* With --region-logs, region r's own group as this member sees it: its
 * leader's --raft-id (0: none known) and term. false: r has no group of
 * its own (one log for every region). */
bool svc_region_group(svc *s, const region *r, unsigned *leader, uint64_t *term);
/* Stop and free what svc_open started, writers first. Call once nothing
 * else (HTTP, the janitor) uses s. */
void svc_close(svc *s);

/* The calling thread's engine session (opened on first use). NULL if it
 * cannot be opened. */
pc_session *svc_engine_session(svc *s);
void svc_close_engine_sessions(svc *s);
/* Before the first svc_engine_session (svc_open calls it). */
void svc_engine_sessions_init(svc *s);

/* Liveness for the engine: an owner is alive while its session holds a
 * lease in this run of the service. */
pc_liveness svc_liveness(svc *s);

/* A snapshot read at ts (?ts=) begins: SVC_SNAP_OK, and ts is pinned
 * against GC until svc_snapshot_end; else why it cannot be read (nothing
 * pinned; reply_snapshot_refused answers it). */
typedef enum {
    SVC_SNAP_OK,
    SVC_SNAP_FUTURE,      /* above every timestamp the oracle handed out */
    SVC_SNAP_COLLECTED,   /* below the GC safe point: versions may be gone */
    SVC_SNAP_NOMEM,
} svc_snapshot;
svc_snapshot svc_snapshot_begin(svc *s, uint64_t ts);
void svc_snapshot_end(svc *s, uint64_t ts);

/* The exit status after a storage failure (a failed log flush). */
#define SVC_EXIT_STORAGE 70
/* Log and exit at once with SVC_EXIT_STORAGE (never returns). */
_Noreturn void svc_storage_failed(const char *what, pc_rc rc);
/* The engine's on_fatal hook (WiredTiger panicked, a disk write failed):
 * svc_storage_failed, from whatever thread saw it. */
_Noreturn void svc_engine_fatal(void *arg, const char *what);
/* The engine's log hook: WiredTiger's messages and the engine's own go
 * to the service's log, in its --log-format. */
void svc_engine_log(void *arg, pc_log_level level, const char *msg);
/* pc_engine_config.latch_waited: into percolator_latch_wait_seconds. */
void svc_latch_waited(void *arg, uint64_t ns);

/* Timestamps no transaction may use (DESIGN §4.8): at or below the
 * store's highest timestamp (the oracle lost its state), or this close to
 * 2^53 (JSON numbers are exact below it; the oracle is nearly exhausted). */
#define SVC_TS_LIMIT ((UINT64_C(1) << 53) - (UINT64_C(1) << 32))

/* Why the oracle's last answer could not be used. */
typedef enum {
    SVC_TS_OK = 0,
    SVC_TS_UNREACHABLE,             /* no answer (or a wrong one) */
    SVC_TS_BEHIND,                  /* at or below the store's highest timestamp */
    SVC_TS_OUT_OF_RANGE             /* at or above SVC_TS_LIMIT */
} svc_ts_refusal;

/* A fresh timestamp; false when the oracle cannot be reached or its
 * timestamp is refused (s->ts_refusal says which). */
bool svc_timestamp(svc *s, uint64_t *ts);
/* Readiness: NULL when the service can commit now, else why not. Asks the
 * oracle at most once a second, whoever calls; else the last known state. */
const char *svc_not_ready(svc *s);
/* count consecutive fresh timestamps from *first on; false as above. */
bool svc_timestamps(svc *s, unsigned count, uint64_t *first);

/* Every commit calls it once it is durable (coordinator, write batch): the
 * hook set at start (observers' claim waiters) learns of new writes
 * without the commit paths knowing who listens. */
void svc_committed(svc *s);

/* ---- the one write path (replica.c, replicator.h, docs/DESIGN.md §6) ---- */

/* Whether this is a member of a Raft group (else a single node: a group
 * of one, with no peers, membership or forwarding). */
static inline bool svc_replicated(const svc *s)
{
    return s->home != NULL && s->home->raft != NULL;
}

/* Around every engine call that may write: ps proposes (its writes go
 * into the thread's batch, its keys are latched by the engine);
 * svc_write_end hands the batch to the replicator, waits until it is
 * durable and applied here, and then lets the latches go, so that an
 * action on the same keys never reads a store that lacks this one, while
 * actions on other keys run and are made durable alongside. It returns
 * rc, or the replicator's refusal when the batch could not be committed
 * (PC_NOT_LEADER, PC_UNAVAILABLE: svc_refused); *proposed (may be NULL):
 * a batch was applied.
 * key is one the action writes (an empty key for a batch that writes
 * none: GC's safe point, which goes to the first region): the batch is
 * proposed in the term its region's replicator was ready in when the
 * action began, before it read the store (replicator.h), and refused
 * unavailable if its keys turn out to be another replicator's (regions
 * with groups of their own: two groups' terms are unrelated numbers;
 * DESIGN §6.5, step 6). */
void svc_write_begin(svc *s, pc_session *ps, pc_slice key);
pc_rc svc_write_end(svc *s, pc_session *ps, pc_rc rc, bool *proposed);
/* The replicator of the region holding key (empty: the first region) and
 * in *term the term it may propose in now (RP_TERM_NONE: none, its batch
 * is refused); NULL before the replicator runs. */
replicator *svc_write_term(svc *s, pc_slice key, uint64_t *term);
/* The same for region r (NULL: none): the term it may propose in now, or
 * RP_TERM_NONE. */
uint64_t svc_region_ready_term(const region *r);
/* Whether a batch svc_region_of_batch put in rg may be proposed in the
 * term of repl (svc_write_term's when its action began): rg has that
 * replicator. Else false, counted and logged. */
bool svc_batch_is_of(svc *s, const region *rg, const replicator *repl);
/* The region whose replicator a write batch goes to: the one every key it
 * writes is in (router_find_batch). Keys of several regions that share a
 * log (a batch cut before a split was applied) go to that log, counted
 * (DESIGN §6.2). NULL, logged: its keys are in regions of other logs or
 * none, or no replicator runs yet. */
region *svc_region_of_batch(svc *s, const void *batch, size_t len);
/* Propose a batch this service made itself (not an engine action's: a
 * region map) to its region's replicator in the term this member leads,
 * and wait until it is applied here: PC_OK, or the refusal (svc_refused). */
pc_rc svc_propose(svc *s, const void *batch, size_t len);
/* The same to repl in term (svc_write_term's, taken before the batch was
 * read from the store): PC_OK, or the refusal; *skipped when the batch
 * was committed and written nowhere (replicator.h RP_SKIPPED: a split
 * that another change of its region beat). */
pc_rc svc_propose_in(svc *s, replicator *repl, uint64_t term, const void *batch, size_t len,
                     bool *skipped);

/* ---- splits (splits.c, DESIGN §6.2) ---- */
/* The region map at start: the store's, once a split was applied; before
 * that the one --region-split-keys cuts. 0; -1 logged. */
int svc_regions_load(svc *s, pc_session *ps);
/* The leader's size check (the janitor's GC thread, each round): a region
 * past --region-max-bytes is split at its middle key. */
void svc_split_big_regions(svc *s, pc_session *ps);
/* Split the region holding the engine key before it: propose the new map
 * and wait until it is applied here (every member installs it as it
 * applies it). PC_OK; PC_INVALID with why in err (no region holds the
 * key, it starts one already, the map is full); PC_TS_UNAVAILABLE with why
 * in err: the placement driver handed out no id for the new region;
 * PC_UNAVAILABLE with why in err: with --region-logs, a member of the
 * region's group is not caught up (nothing proposed); the replicator's
 * refusal (err untouched). */
pc_rc svc_split_region(svc *s, const void *key, size_t len, char *err, size_t errlen);
/* A region new to the router (at start, or made by a split): its
 * batches' metric series (its store and replicator are the router's
 * shared log). */
void svc_region_made(void *arg, region *r);
/* The apply listener's calls (replicator.h): the change feed's, and the
 * router's when a batch set the region map or an image replaced the store. */
void svc_apply_begin(void *arg);
void svc_applied(void *arg, const void *batch, size_t len);
void svc_apply_end(void *arg);
void svc_applied_lost(void *arg);
/* Sampled before a read's fence and again after its read of the store:
 * when it changed, a proposal failed meanwhile, in the log of a region
 * the read covers, whose commits in flight were let go though its entry
 * may yet be committed by the next leader (rp_failures); the read may
 * have missed one and fences again. The sum of the failures of the
 * replicators of the regions of key, or of [start, end) (end.data NULL:
 * to the end of the keyspace), and the region map's generation: each only
 * grows, so the sum changes when any does (a split included: the key may
 * be another log's then), and a failure in another region's log does not
 * make this read fence again (DESIGN §6.5, step 6). */
uint64_t svc_read_epoch(svc *s, pc_slice key);
uint64_t svc_read_epoch_range(svc *s, pc_slice start, pc_slice end);
/* How many of the mutations m[0..n) (engine keys), from m[0] on, are in
 * m[0]'s region and may go in one batch (router_run); n with one region. */
size_t svc_region_run(svc *s, const pc_mutation *m, size_t n);
/* Before a read of the store (after its timestamp was taken): the read
 * barrier of the replicator of every region the read covers (this member
 * leads it, and has applied everything it committed before the read;
 * commits not yet applied are in flight for the engine's reads). PC_OK,
 * or the first refusal (PC_NOT_LEADER, PC_UNAVAILABLE). A single node:
 * PC_OK at once. Keys are engine keys (keyspace.h), as the regions' are:
 * the read of one key, of [start, end) (end.data NULL: to the end of the
 * keyspace), or of everything (the change feed). */
pc_rc svc_read_fence(svc *s, pc_slice key);
pc_rc svc_read_fence_range(svc *s, pc_slice start, pc_slice end);
pc_rc svc_read_fence_all(svc *s);
/* svc_read_fence_all, but a region this node does not lead (not ready)
 * for which vouched(arg, r) is true counts as fenced: its caller waited
 * for that region's read index (follower_fence.h). */
pc_rc svc_read_fence_all_but(svc *s, bool (*vouched)(void *arg, const region *r), void *arg);
/* Whether the read of key may go on at once, without waiting (its
 * region's replicator says so: read_now): an event thread reads then,
 * else hands the read to a worker, which takes svc_read_fence. */
bool svc_read_now(svc *s, pc_slice key);
/* A replicator's answer as the result every caller passes on: PC_OK,
 * PC_NOT_LEADER or PC_UNAVAILABLE (reply_engine answers them 503). */
pc_rc svc_refused(rp_rc r);
/* Where this member stands: the one answer every caller asks (the
 * janitor, routing a request, readiness, the take-over). */
typedef enum {
    SVC_LEADS,            /* a single node, or the leader with its term's first
                             barrier applied: it serves and proposes */
    SVC_LEADS_NOT_READY,  /* elected, its first barrier not applied yet: it answers
                             503 and takes over once the barrier is in */
    SVC_FOLLOWS,          /* another member leads and was heard from lately
                             (st.leader_http): requests are passed on to it */
    SVC_NO_LEADER,        /* none known, or not heard from within the election
                             timeout (an election may be under way): 503 */
} svc_leadership;
/* st (may be NULL) gets the Raft status it was read from (a member only). */
svc_leadership svc_leadership_of(svc *s, raft_group_status *st);
/* Why this member cannot serve yet (/v1/ready's 503), or NULL: elected
 * and taking over, or raft_host_not_ready's reasons (not a voter yet,
 * catching up, no leader known); the text may be in buf. A member only. */
const char *svc_member_not_ready(svc *s, char *buf, size_t len);
/* Whether background work (janitor, observers' scans) should run here:
 * svc_leadership_of says SVC_LEADS. */
bool svc_leads(svc *s);
/* A member's Raft status and host, for health, readiness and the
 * membership routes (routes never call the replicator itself: make
 * check-layers). Only on a member (svc_replicated). */
void svc_raft_status(svc *s, raft_group_status *st);
struct raft_host *svc_raft_host(svc *s);
/* The term this member may propose in (0: it does not lead, or its
 * term's first barrier is not applied yet; a single node: always
 * REPLICATOR_LOCAL_TERM). */
uint64_t svc_leader_term(svc *s);
/* On a member that leads in a term whose leader-only state it has not
 * taken over yet, take it over now (the observers' registrations, the
 * highest timestamp handed out: DESIGN §9), once per term, by the first
 * request of the term (the others wait for it). true when there is
 * nothing to take over or it is done; false when the registrations could
 * not be read (logged). svc_timestamps calls it. */
bool svc_take_over(svc *s);
/* Whether svc_timestamps last stopped on the calling thread because
 * s->take_over failed; forgets it. */
bool svc_takeover_failed(void);
/* httpd_config.elsewhere: a follower passes /v1 requests on to the
 * leader (httpd_config.forward: svc_forward), or answers 503 not_leader
 * while it knows of no leader it heard from lately. */
bool svc_elsewhere(const httpd_req *req, void *ctx, httpd_elsewhere *out);
void svc_forward(httpd_req *req, const char *target, void *ctx);
/* The forwarder of a group member (TLS files may be ""). NULL with a reason. */
forwarder *svc_forwarder_start(svc *s, const oc_tls *tls, char *err, size_t errlen);

/* GET /v1/admin/backup: a fresh backup streamed as a tar archive
 * (backup_archive.c); at start, the copies an earlier run left. */
void h_backup_archive(httpd_req *req, void *ctx);
void backup_archive_cleanup(const svc *s);

/* The routes of each resource. */
extern const httpd_route txn_routes[];
extern const size_t txn_routes_n;
extern const httpd_route kv_routes[];
extern const size_t kv_routes_n;
extern const httpd_route ops_routes[];
extern const size_t ops_routes_n;
extern const httpd_route observer_routes[];
extern const size_t observer_routes_n;
extern const httpd_route lease_routes[];
extern const size_t lease_routes_n;
extern const httpd_route admin_routes[];
extern const size_t admin_routes_n;
extern const httpd_route members_routes[];
extern const size_t members_routes_n;
extern const httpd_route watch_routes[];
extern const size_t watch_routes_n;
extern const httpd_route regions_routes[];
extern const size_t regions_routes_n;
extern const httpd_route region_call_routes[];
extern const size_t region_call_routes_n;

/* The router's authorize check (httpd_config.authorize): NULL when the
 * request carries the bearer token (or no token is configured). */
const char *svc_authorize(const httpd_req *req, void *ctx);

#endif
