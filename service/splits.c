/*
 * splits.c — the region map as replicated state (docs/DESIGN.md §6.2).
 *
 * A split is a command in the log, as TiKV's BatchSplit is: the leader
 * proposes the whole new map (router_split_map) as a named value of the
 * store (engine_replica.h: pc_batch_set_meta), and every member installs
 * it in its router as it applies that batch (svc_applied), so all of them
 * cut the keyspace alike from the same index on. The store keeps the map
 * (a restart loads it: svc_regions_load) and images carry it (a member
 * that installs one reloads it: svc_applied_lost). Carrying the whole map
 * rather than "split at k" keeps every member's map equal to the
 * proposer's even if their --region-split-keys differed; the proposer
 * computes it from a router that holds every map committed before (one
 * split at a time, on a member that took over: every earlier entry is
 * applied here). The leader also splits a region that grew past
 * --region-max-bytes, at its middle key (svc_split_big_regions). The new
 * region's id comes from the placement driver when the service reports to
 * one, as TiKV asks PD: ids of one counter cannot clash across groups.
 * With --region-logs a split is instead a batch of the region's own log
 * (split_in_own_log, DESIGN §6.5 step h), its id always the driver's.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine_admin.h"
#include "engine_replica.h"
#include "keyspace.h"
#include "log.h"
#include "pd_report.h"
#include "region_fill.h"
#include "service.h"
#include "timeutil.h"
#include "watch.h"

void svc_region_made(void *arg, region *r)
{
    svc *s = arg;
    char id[24];
    snprintf(id, sizeof id, "%llu", (unsigned long long)r->id);
    r->batches = metrics_series_get(s->m.region_batches, id, NULL);
}

/* Make map the router's; why: what set it, for the log. */
static void install(svc *s, const void *map, size_t len, const char *why)
{
    if (router_install(s->regions, map, len, svc_region_made, s) != 0) {
        /* No leader of ours proposes a map that does not decode (it made
         * it with router_split_map); the store has it, the router keeps
         * the last good one. */
        log_error("regions: the map set by %s (%zu bytes) does not decode or memory ran out: "
                  "the router keeps its %zu regions", why, len, router_count(s->regions));
        return;
    }
    metrics_inc(s->m.region_splits, 1);
    log_info("regions: %zu after %s", router_count(s->regions), why);
}

int svc_regions_load(svc *s, pc_session *ps)
{
    char err[256];
    pc_buf map = {0};
    pc_rc rc = pc_meta_get(ps, ROUTER_MAP_NAME, &map);
    if (rc == PC_OK) {
        s->regions = router_decode(map.data, map.len);
        if (s->regions == NULL)
            log_error("the store's region map (%zu bytes) does not decode", map.len);
        else if (s->cfg.region_split_keys[0] != '\0')
            log_info("%zu regions, the store's map (split since it began): "
                     "--region-split-keys is for a store that never split",
                     router_count(s->regions));
        pc_buf_free(&map);
        return s->regions != NULL ? 0 : -1;
    }
    if (rc != PC_NOT_FOUND) {
        log_error("cannot read the store's region map (%d)", (int)rc);
        return -1;
    }
    pc_buf *splits = NULL;
    size_t n = 0;
    if (ks_split_keys(s->cfg.region_split_keys, &splits, &n, err, sizeof err) != 0) {
        log_error("%s", err); /* main checked the list: memory ran out */
        return -1;
    }
    s->regions = router_split(splits, n);
    for (size_t i = 0; i < n; i++)
        pc_buf_free(&splits[i]);
    free(splits);
    if (s->regions == NULL) {
        log_error("out of memory");
        return -1;
    }
    if (n > 0)
        log_info("%zu regions (--region-split-keys), one log for them all", n + 1);
    return 0;
}

/* The id a split gives its new region into *id: the placement driver's
 * when there is one (unique across the cluster's groups), else 0 (the
 * router's next). PC_OK, or PC_TS_UNAVAILABLE when the driver (the
 * oracle group) did not answer (err says what it said): no split then,
 * rather than an id another group could hold. */
static pc_rc new_region_id(svc *s, uint64_t *id, char *err, size_t errlen)
{
    char why[256] = "";
    *id = 0;
    switch (pd_report_new_id(s->pd, router_next_id(s->regions), id, why, sizeof why)) {
    case PD_ID_OK:
    case PD_ID_NONE:
        return PC_OK;
    case PD_ID_UNAVAILABLE:
    default:
        snprintf(err, errlen, "the placement driver did not hand out a region id (%s)", why);
        return PC_TS_UNAVAILABLE;
    }
}

/* How long a split with --region-logs waits for the region maker to
 * route the new region here, once the split is applied here. */
#define SPLIT_MADE_MS 10000
/* A member this many entries behind the leader's log or more holds a
 * split back (at most half the entries kept behind an image: far below
 * by default), so the split is applied from the log, not skipped by an
 * image. */
#define SPLIT_MAX_LAG 256

/* With --region-logs (DESIGN §6.5 step h): the split of the region
 * holding key is a batch of that region's own log (pc_region_split, read
 * from this leader's store), proposed in its term; every replica that
 * applies it narrows the region, and its region maker starts the new
 * one's group. The new id is the placement driver's: with a log per
 * region no one map holds the next id every member agrees on (a member
 * that missed a split lacks a row), so without a driver there is no
 * split. Under split_mu. */
static pc_rc split_in_own_log(svc *s, const void *key, size_t len, char *err, size_t errlen)
{
    region *r = router_find(s->regions, key, len);
    pc_session *ps = svc_engine_session(s);
    uint64_t id = 0, term = RP_TERM_NONE;
    char why[256] = "";
    /* the term first, then the store read: a batch read in another term
     * is refused (replicator.h) */
    replicator *repl = svc_write_term(s, (pc_slice){key, len}, &term);
    if (r == NULL || r->repl == NULL) {
        snprintf(err, errlen, "no region holds that key");
        return PC_INVALID;
    }
    if (pc_key_cmp(r->start.data, r->start.len, key, len) == 0) {
        snprintf(err, errlen, "region %llu starts at that key already",
                 (unsigned long long)r->id);
        return PC_INVALID;
    }
    if (term == RP_TERM_NONE || repl != r->repl) {
        snprintf(err, errlen, "region %llu is not led here", (unsigned long long)r->id);
        return PC_NOT_LEADER;
    }
    switch (pd_report_new_id(s->pd, router_next_id(s->regions), &id, why, sizeof why)) {
    case PD_ID_OK:
        if (id != 0 && id < FILL_GROUP)
            break;
        snprintf(err, errlen, "the placement driver handed out region id %llu, which no "
                              "region may take", (unsigned long long)id);
        return PC_TS_UNAVAILABLE;
    case PD_ID_NONE:
        snprintf(err, errlen, "a split with --region-logs takes its new region's id from the "
                              "placement driver (an oracle group, --pd-heartbeat-ms not 0)");
        return PC_INVALID;
    default:
        snprintf(err, errlen, "the placement driver did not hand out a region id (%s)", why);
        return PC_TS_UNAVAILABLE;
    }
    /* Every member applies the split from its log, and the new group is
     * made once all of them started it (§7.3's probes): a member down or
     * far behind would hold the new region without a leader, and one that
     * catches up by an image instead has to make its replica from a
     * peer's image (DESIGN §6.5 step k). So a split waits until all are there: checked last before
     * the proposal (an id the driver handed out and left unused costs
     * nothing). */
    int caught_up = r->raft != NULL ? raft_group_all_caught_up(r->raft, SPLIT_MAX_LAG, why,
                                                                 sizeof why)
                                    : 1;
    if (caught_up < 0) {
        snprintf(err, errlen, "region %llu is not led here", (unsigned long long)r->id);
        return PC_NOT_LEADER;
    }
    if (caught_up == 0) {
        snprintf(err, errlen, "region %llu splits only with every member caught up: %s",
                 (unsigned long long)r->id, why);
        return PC_UNAVAILABLE;
    }
    pc_buf batch = {0};
    pc_slice k = {key, len};
    pc_rc rc = ps != NULL ? pc_region_split(ps, r->id, &k, &id, 1, &batch) : PC_NOMEM;
    if (rc == PC_INVALID)
        snprintf(err, errlen, "region %llu has no row here, or %llu is taken",
                 (unsigned long long)r->id, (unsigned long long)id);
    bool skipped = false;
    if (rc == PC_OK)
        rc = svc_propose_in(s, repl, term, batch.data, batch.len, &skipped);
    if (rc == PC_OK && skipped) {
        /* another change of the region's row came first (its epoch): this
         * split applied on no replica */
        snprintf(err, errlen, "region %llu changed meanwhile; ask again",
                 (unsigned long long)r->id);
        rc = PC_INVALID;
    }
    pc_buf_free(&batch);
    if (rc == PC_OK) {
        log_info("regions: region %llu split in its own log, region %llu made",
                 (unsigned long long)r->id, (unsigned long long)id);
        /* the region maker routes it once its group runs here */
        uint64_t end = time_mono_ms() + SPLIT_MADE_MS;
        while (!router_has_id(s->regions, id) && time_mono_ms() < end)
            time_sleep_ms(10);
        if (!router_has_id(s->regions, id))
            log_warn("regions: region %llu not routed here within %d ms of its split",
                     (unsigned long long)id, SPLIT_MADE_MS);
    }
    return rc;
}

pc_rc svc_split_region(svc *s, const void *key, size_t len, char *err, size_t errlen)
{
    uint64_t id = 0;
    pc_buf map = {0}, batch = {0};
    if (s->cfg.region_logs) {
        pthread_mutex_lock(&s->split_mu); /* one at a time: each reads the rows the last set */
        pc_rc rc = split_in_own_log(s, key, len, err, errlen);
        pthread_mutex_unlock(&s->split_mu);
        return rc;
    }
    /* One split at a time, from the check to the proposal: each proposes
     * the whole map, built on the one the split before it installed, and
     * the ids the driver hands out in order are taken in that order (a
     * split that asked first and took its id later would find it below
     * the map's next id). Every split waits for the driver anyway; the
     * janitor's round stops at the first it did not answer. */
    pthread_mutex_lock(&s->split_mu);
    /* Checked against the map first: a split the map refuses asks the
     * driver for nothing. */
    pc_rc rc = router_split_map(s->regions, key, len, 0, NULL, err, errlen) == 0
                   ? new_region_id(s, &id, err, errlen)
                   : PC_INVALID;
    if (rc == PC_OK && router_split_map(s->regions, key, len, id, &map, err, errlen) != 0)
        /* Refused now, not before: while the driver answered, a map of
         * another leader was applied here (this member no longer leads). */
        rc = id != 0 ? PC_NOT_LEADER : PC_INVALID;
    if (rc == PC_OK &&
        (rc = pc_batch_set_meta(&batch, ROUTER_MAP_NAME, map.data, map.len)) != PC_OK)
        snprintf(err, errlen, "out of memory");
    if (rc == PC_OK)
        rc = svc_propose(s, batch.data, batch.len);
    pthread_mutex_unlock(&s->split_mu);
    pc_buf_free(&map);
    pc_buf_free(&batch);
    return rc;
}

void svc_apply_begin(void *arg)
{
    watch_apply_begin(((svc *)arg)->watch);
}

void svc_applied(void *arg, const void *batch, size_t len)
{
    svc *s = arg;
    watch_applied(s->watch, batch, len);
    pc_slice map;
    if (pc_batch_meta(batch, len, ROUTER_MAP_NAME, &map) == PC_OK)
        install(s, map.data, map.len, "a split in the log");
}

void svc_apply_end(void *arg)
{
    watch_apply_end(((svc *)arg)->watch);
}

void svc_applied_lost(void *arg)
{
    svc *s = arg;
    watch_lost(s->watch);
    /* An image replaced the store: its map (if it has one) is the router's. */
    pc_session *ps = svc_engine_session(s);
    pc_buf map = {0};
    pc_rc rc = ps != NULL ? pc_meta_get(ps, ROUTER_MAP_NAME, &map) : PC_NOMEM;
    if (rc == PC_OK)
        install(s, map.data, map.len, "an image of the leader's store");
    else if (rc != PC_NOT_FOUND)
        log_error("regions: cannot read the region map of the image installed (%d)", (int)rc);
    pc_buf_free(&map);
}

/* At most this many regions measured in one round of the janitor: a walk
 * of each (pc_range_size) must not hold GC up for long. */
#define SIZE_CHECKS_PER_ROUND 4

/* Measure r; split it at its middle key when it holds more than max bytes
 * and the middle is a user key (the service's own records, in the first
 * region, are never a region's start). What the split gave (PC_OK when
 * there was none to make). */
static pc_rc check_region(svc *s, pc_session *ps, region *r, uint64_t max)
{
    pc_range_stats st = {0};
    pc_slice start = {r->start.data, r->start.len};
    pc_slice end = r->unbounded ? (pc_slice){NULL, 0} : (pc_slice){r->end.data, r->end.len};
    pc_rc rc = pc_range_size(ps, start, end, &st);
    metrics_inc(s->m.region_size_checks, 1);
    pc_slice user;
    if (rc != PC_OK) {
        log_warn("regions: cannot measure region %llu: %s", (unsigned long long)r->id,
                 pc_rc_name(rc));
        return PC_OK;
    }
    atomic_store(&r->size, (int64_t)st.bytes);
    if (st.bytes <= max || st.middle.len == 0 ||
        !ks_is_user((pc_slice){st.middle.data, st.middle.len}, &user)) {
        pc_buf_free(&st.middle);
        return PC_OK;
    }
    char err[320] = "";
    rc = svc_split_region(s, st.middle.data, st.middle.len, err, sizeof err);
    if (rc == PC_OK) {
        metrics_inc(s->m.region_auto_splits, 1);
        log_info("regions: region %llu held %llu bytes in %llu keys (--region-max-bytes %llu): "
                 "split before \"%.*s\"", (unsigned long long)r->id,
                 (unsigned long long)st.bytes, (unsigned long long)st.keys,
                 (unsigned long long)max, (int)(user.len > 64 ? 64 : user.len),
                 (const char *)user.data);
    } else {
        log_warn("regions: region %llu held %llu bytes, but its split failed: %s",
                 (unsigned long long)r->id, (unsigned long long)st.bytes,
                 rc == PC_INVALID || rc == PC_TS_UNAVAILABLE || err[0] != '\0' ? err
                                                                                : pc_rc_name(rc));
    }
    if (rc == PC_TS_UNAVAILABLE || (rc == PC_UNAVAILABLE && err[0] != '\0'))
        atomic_store(&r->size, -1); /* measured again next round, not after max/4 more */
    pc_buf_free(&st.middle);
    return rc;
}

void svc_split_big_regions(svc *s, pc_session *ps)
{
    uint64_t max = s->cfg.region_max_bytes;
    if (max == 0 || !svc_leads(s))
        return;
    region **all = NULL;
    size_t n = router_list(s->regions, &all), checked = 0;
    /* A region is measured once a quarter of the limit was written to it
     * since its last check (TiKV checks on its writes the same way): a
     * walk of at most about max bytes per max/4 written; and once when it
     * is new (made by a split, or at start), so that every region's size
     * is known. */
    for (size_t i = 0; i < n && checked < SIZE_CHECKS_PER_ROUND; i++) {
        region *r = all[i];
        if (atomic_load(&r->written) < max / 4 && atomic_load(&r->size) >= 0)
            continue;
        atomic_store(&r->written, 0);
        checked++;
        /* The driver did not answer for an id: the other splits of this
         * round would wait for it as long; GC goes on, they wait a round. */
        if (check_region(s, ps, r, max) == PC_TS_UNAVAILABLE)
            break;
    }
    free(all);
}
