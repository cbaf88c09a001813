/*
 * svc_open.c — the service's core, started and stopped: everything but
 * HTTP, the janitor and the forwarder. main.c runs it between its flags
 * and its listening server; the in-process tests
 * (tests/unit/test_service_local.c) run it alone, on a store of their own
 * against a real oracle, and call the coordinator and the write batcher
 * as the routes do.
 *
 * Order: the metrics and the session and observer tables; the store
 * (made from a backup first when asked); the oracle client; the
 * observers' registrations, read from what is applied; the replicator
 * (the Raft group, or a single node's log of one); the write batcher.
 * From the replicator on, every write goes through it (replica.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_admin.h"
#include "engine_replica.h"
#include "failpoint.h"
#include "keyspace.h"
#include "leases.h"
#include "log.h"
#include "observers.h"
#include "program.h"
#include "service.h"
#include "sessions.h"
#include "watch.h"
#include "write_batch.h"

#define PROG "percolator-service"

static int make_run_id(char *out, size_t len)
{
    unsigned char r[8];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, r, sizeof(r)) != (ssize_t)sizeof(r)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    for (size_t i = 0; i < sizeof(r) && 2 * i + 2 < len; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
    return 0;
}

static void init_metrics(svc *s)
{
    metrics_registry *r = s->metrics;
    s->m.txn_begun = metrics_counter1(r, "percolator_txn_begun_total", "Sessions begun.");
    s->m.txn_committed =
        metrics_counter1(r, "percolator_txn_committed_total", "Transactions committed.");
    s->m.commits_1pc = metrics_counter1(r, "percolator_commits_one_phase_total",
                                        "Commits done in one phase.");
    s->m.commits_2pc = metrics_counter1(r, "percolator_commits_two_phase_total",
                                        "Commits done by two-phase commit.");
    s->m.commits_cross_region = metrics_counter1(
        r, "percolator_commits_cross_region_total",
        "Two-phase commits whose keys are in two or more regions.");
    s->m.region_batches = metrics_counter(r, "percolator_region_batches_total",
                                          "Write batches proposed, by region id.", "region", NULL);
    s->m.region_splits = metrics_counter1(
        r, "percolator_region_map_installs_total",
        "Region maps installed: a split applied from the log, or an image's map.");
    s->m.region_size_checks = metrics_counter1(
        r, "percolator_region_size_checks_total",
        "Regions measured for a split (--region-max-bytes).");
    s->m.region_auto_splits = metrics_counter1(
        r, "percolator_region_auto_splits_total",
        "Regions split because they passed --region-max-bytes.");
    s->m.region_stale_batches = metrics_counter1(
        r, "percolator_region_stale_batches_total",
        "Write batches cut before a split: keys in two regions of one log (proposed), or in a "
        "region of another log than the one their action began in (refused).");
    s->m.region_calls_sent = metrics_counter(
        r, "percolator_region_calls_sent_total",
        "Actions sent to the node that leads their region (--region-logs), by action and "
        "result (its rc).",
        "action", "result");
    s->m.region_calls_served = metrics_counter(
        r, "percolator_region_calls_served_total",
        "Actions another node sent this one as its region's leader, by action.", "action", NULL);
    s->m.txn_aborted = metrics_counter(r, "percolator_txn_aborted_total",
                                       "Transactions aborted, by reason.", "reason", NULL);
    s->m.conflicts = metrics_counter(r, "percolator_conflicts_total",
                                     "Conflicts answered with 409, by kind.", "kind", NULL);
    s->m.lock_waits = metrics_counter1(r, "percolator_lock_waits_total",
                                       "Reads that waited on a live lock.");
    s->m.lock_wait_timeouts = metrics_counter1(
        r, "percolator_lock_wait_timeouts_total", "Reads that gave up waiting (key_locked).");
    s->m.latch_wait = metrics_series_get(
        metrics_histogram(r, "percolator_latch_wait_seconds",
                          "How long an action that may write waited for another proposal in "
                          "flight on one of its keys to be applied (a member of a Raft group: "
                          "docs/DESIGN.md 9 item 2); only actions that waited",
                          NULL, NULL, metrics_latency_buckets, metrics_latency_nbuckets),
        NULL, NULL);
    s->m.resolved = metrics_counter(r, "percolator_locks_resolved_total",
                                    "Locks met by readers and writers and resolved, by outcome.",
                                    "how", NULL);
    s->m.janitor_resolved = metrics_counter(r, "percolator_janitor_resolved_total",
                                            "Abandoned locks the janitor resolved, by outcome.",
                                            "how", NULL);
    s->m.gc_versions_removed = metrics_counter1(r, "percolator_gc_versions_removed_total",
                                                "Versions dropped by garbage collection.");
    s->m.mvcc_versions = metrics_gauge1(r, "percolator_mvcc_versions",
                                        "Versions stored (write records) after the last GC pass.");
    s->m.gc_safe_point = metrics_gauge1(r, "percolator_gc_safe_point",
                                        "Snapshots below this timestamp may have lost versions.");
    s->m.notify_scanned = metrics_counter1(r, "percolator_notify_entries_scanned_total",
                                           "Notify entries read by claims (never data).");
    s->m.notif_claimed = metrics_counter1(r, "percolator_notifications_claimed_total",
                                          "Notifications handed out to observers.");
    s->m.notif_acked = metrics_counter1(r, "percolator_notifications_acked_total",
                                        "Observer transactions committed (acknowledged).");
    s->m.notif_pending = metrics_gauge1(r, "percolator_notifications_pending",
                                        "Unacknowledged notifications at the last listing.");
    s->m.leases = metrics_gauge1(r, "percolator_leases", "Leases alive (on the leader).");
    s->m.leases_expired = metrics_counter1(r, "percolator_leases_expired_total",
                                           "Leases that ran out and were ended by the janitor.");
}

/* Between two parts of an image's install (engine/apply.c): the crash
 * point of test_service_raft's a_crash_between_image_parts_heals. */
static void svc_image_part(void *arg, pc_session *ps)
{
    (void)arg;
    failpoint(ps, "image_part");
}

int svc_open(svc *s, raft_group_config *rcfg, const oc_tls *otls, const char *oracle_secret)
{
    const svc_config *c = &s->cfg;
    char err[512];

    svc_engine_sessions_init(s);
    pthread_mutex_init(&s->takeover_mu, NULL);
    pthread_mutex_init(&s->split_mu, NULL);
    if (make_run_id(s->run_id, sizeof(s->run_id)) != 0) {
        log_error("cannot read /dev/urandom");
        return 1;
    }
    if ((s->metrics = metrics_registry_new()) == NULL ||
        (s->sessions = sessions_new(s->run_id, c->txn_retention_ms)) == NULL ||
        (s->obs = observers_new()) == NULL || (s->leases = leases_new()) == NULL)
        return 1;
    sessions_set_end_hook(s->sessions, observers_session_ended, s);
    s->on_commit = observers_wake;
    s->take_over = svc_take_over;
    init_metrics(s);
    sessions_set_gauges(s->sessions,
                        metrics_gauge1(s->metrics, "percolator_sessions_open",
                                       "Sessions open (active or committing), against --max-sessions."),
                        metrics_gauge1(s->metrics, "percolator_session_buffered_bytes",
                                       "Bytes buffered by all sessions together, against --max-session-bytes."));
    /* The janitor reads the session clock every interval: a longer gap
     * means the whole process stood still. */
    sessions_set_stall_ms(s->sessions, 2 * c->janitor_interval_ms + 1000);

    char cache[32];
    snprintf(cache, sizeof(cache), "%lluMB", (unsigned long long)(c->cache_size >> 20));
    pc_engine_config ecfg = {.dir = c->data_dir, .sync = strcmp(c->sync, "fsync") == 0,
                             .cache_size = cache, .on_fatal = svc_engine_fatal,
                             .log = svc_engine_log, .latch_waited = svc_latch_waited,
                             .latch_arg = s, .image_part_done = svc_image_part};
    if (c->backup_dir[0] != '\0' && mkdir(c->backup_dir, 0700) != 0 && errno != EEXIST) {
        log_startup_error(PROG, "--backup-dir %s: %s", c->backup_dir, strerror(errno));
        return 2;
    }
    if (c->restore_from[0] != '\0') {
        if (pc_restore(c->restore_from, &ecfg) != PC_OK) {
            log_startup_error(PROG, "cannot restore %s from %s (see the log above)",
                              c->data_dir, c->restore_from);
            return 2;
        }
        log_info("restored %s from the backup %s", c->data_dir, c->restore_from);
    }
    if (pc_engine_open(&ecfg, &s->engine) != PC_OK) {
        log_startup_error(PROG, "cannot open the store in %s (see the log above)", c->data_dir);
        return 1;
    }
    /* Every timestamp the store holds was handed out: snapshots up to it
     * are readable, and the oracle must answer above it (DESIGN §4.8). */
    atomic_store(&s->store_max_ts, pc_store_max_ts(s->engine));
    atomic_store(&s->ts_seen, pc_store_max_ts(s->engine));
    log_info("store: highest timestamp %llu", (unsigned long long)atomic_load(&s->store_max_ts));
    if ((s->oracle = oc_open(c->oracle, (int)c->oracle_timeout_ms, s->metrics)) == NULL ||
        (oracle_secret != NULL && oc_set_token(s->oracle, oracle_secret) != 0)) {
        log_error("cannot start the oracle client");
        return 1;
    }
    if (otls != NULL && oc_set_tls(s->oracle, otls) != 0) {
        log_error("cannot set up TLS towards the oracle");
        return 1;
    }
    pc_session *boot = svc_engine_session(s);
    if (boot != NULL && c->restore_from[0] != '\0' && rcfg != NULL) {
        /* A group made from a backup is a new group (DESIGN 7.3). */
        if (pc_applied_new_group(boot) != PC_OK) {
            log_startup_error(PROG, "cannot reset the restored store's Raft index");
            return 1;
        }
        log_info("the restored store starts a new Raft group: its applied index is reset");
    }
    backup_archive_cleanup(s);
    if (boot == NULL) {
        log_startup_error(PROG, "cannot open a storage session");
        return 1;
    }

    /* The change feed hears of every batch applied (watch.h). */
    watch_config wc = {.max_watchers = c->watch_max, .ring_bytes = c->watch_buffer_bytes,
                       .slow_ms = c->gc_retention_ms > 10000 ? c->gc_retention_ms : 10000};
    if ((s->watch = watch_hub_new(s, &wc)) == NULL)
        return 1;
    /* The change feed and the router hear of every batch applied. */
    apply_listener hear = {svc_apply_begin, svc_applied,    svc_apply_end,
                           svc_applied_lost, svc_region_rows_set, s};
    /* The regions (region.h): the store's map, or the one
     * --region-split-keys cuts (one region without it: every key), all in
     * the node's store. The first is home: its replicator is every
     * region's (today one log for the node). */
    if (rcfg != NULL && s->cfg.region_logs) {
        /* A group per region over one node network (region_logs.c). */
        rcfg->listen = hear;
        rcfg->engine = s->engine;
        rcfg->apply_failed = svc_storage_failed;
        int opened = svc_region_logs_open(s, boot, rcfg, err, sizeof err);
        s->home = s->regions != NULL ? router_at(s->regions, 0) : NULL;
        if (opened != 0) {
            log_startup_error(PROG, "--region-logs: %s", err);
            return 1;
        }
    } else if (svc_region_logs_refuse_one_log(s, boot) != 0 ||
               svc_regions_load(s, boot) != 0) {
        log_startup_error(PROG, "cannot make the region map (see the log above)");
        return 1;
    }
    region *home = router_at(s->regions, 0);
    s->home = home;
    /* From here on every write goes through the region's replicator
     * (replica.c): a member's Raft group, or a single node's log of one. */
    if (s->cfg.region_logs) {
        /* started above, a group per region */
    } else if (rcfg != NULL) {
        rcfg->listen = hear;
        rcfg->engine = s->engine;
        rcfg->restored = c->restore_from[0] != '\0';
        rcfg->apply_failed = svc_storage_failed;
        if (raft_group_start(rcfg, s->metrics, &home->raft, err, sizeof err) != 0) {
            log_startup_error(PROG, "raft: %s", err);
            return 1;
        }
        home->repl = raft_group_replicator(home->raft);
    } else if ((home->repl = replicator_local_start(s->engine, svc_storage_failed, s->metrics,
                                                    &hear)) == NULL) {
        /* A single node is a group of one: its own log (replicator.h). */
        log_startup_error(PROG, "cannot start the local replicator");
        return 1;
    }
    if (!s->cfg.region_logs) {
        router_share_log(s->regions, s->engine, home->repl, home->raft);
        /* (--region-logs: svc_region_logs_open did, before its maker ran) */
        for (size_t i = 0; i < router_count(s->regions); i++)
            svc_region_made(s, router_at(s->regions, i));
    }
    /* A single node leads from the start (its term is
     * REPLICATOR_LOCAL_TERM): it takes over now, as a member that begins
     * to lead does (svc_take_over: the observers' registrations, a lock a
     * crash left on one resolved through the replicator as any write). A
     * member takes over when it begins to lead, from the store every
     * earlier leader's entries are applied to; a follower never needs to. */
    if (rcfg == NULL && !svc_take_over(s)) {
        log_startup_error(PROG, "cannot load the observers (see the log above)");
        return 1;
    }
    /* The blind-write committer groups one-phase commits into one batch
     * for the replicator (write_batch.h). */
    if ((s->batch = write_batch_start(s)) == NULL) {
        log_error("cannot start the write committer");
        return 1;
    }
    if (watch_hub_start(s->watch) != 0) {
        log_error("cannot start the change feed");
        return 1;
    }
    return 0;
}

void svc_close(svc *s)
{
    write_batch_stop(s->batch); /* deferred writes come back first */
    s->batch = NULL;
    /* Every region's replicator is home's: it stops once; or each region's
     * own group (--region-logs). */
    if (s->cfg.region_logs)
        svc_region_logs_close(s);
    else if (s->home != NULL && s->home->raft != NULL)
        raft_group_stop(s->home->raft); /* after every writer: nothing proposes any more */
    else if (s->home != NULL)
        replicator_local_stop(s->home->repl); /* the same */
    if (s->regions != NULL && !s->cfg.region_logs)
        router_share_log(s->regions, NULL, NULL, NULL);
    router_free(s->regions);
    s->regions = NULL;
    s->home = NULL;
    watch_hub_free(s->watch); /* after the replicator: nothing applies any more */
    s->watch = NULL;
    svc_close_engine_sessions(s);
    pc_engine_close(s->engine);
    s->engine = NULL;
    oc_close(s->oracle);
    s->oracle = NULL;
    sessions_free(s->sessions);
    s->sessions = NULL;
    observers_free(s->obs);
    s->obs = NULL;
    leases_free(s->leases);
    s->leases = NULL;
    metrics_registry_free(s->metrics);
    s->metrics = NULL;
}
