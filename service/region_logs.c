/*
 * region_logs.c — a member whose regions each have a Raft group of their
 * own (--region-logs; docs/DESIGN.md §6.5 step 6 (g)), as TiKV's regions
 * do: one node network on the member's raft address (common/raft_net.h,
 * peer TLS as the member's own transport has it), one loop thread for
 * every group (so every apply, and every apply listener call, comes from
 * that one thread, as with one group), and a group per region, member m
 * of every group on member m's node, its log in <data-dir>/raft/r<id>.
 *
 * The regions are the store's region rows (engine_replica.h): a new store
 * is seeded with the rows --region-split-keys cuts (the same on every
 * member, as TiKV bootstraps its first region from configuration), and
 * from then on only the regions' own logs change them. The seed's digest
 * is kept with the rows: a store restarted with other split keys than it
 * was made with refuses to start, and the digest is the node network's
 * realm, so that members first started with different keys never
 * exchange a record (each logs the other's realm). A store of the one
 * log (its applied index, or its region map, set) is never run so, and a
 * store with region rows never runs as one log: a node runs one or the
 * other over a store.
 *
 * Region 1 holds the empty key, and with it the service's own records
 * (sessions, leases, observers): it is home, and its group's leader is
 * the service's leader. Leaders together: a member leading another region
 * while region 1's leader is elsewhere hands that region's lead to it
 * (svc_region_leaders_gather, each janitor round), so latches, in-memory
 * locks, the janitor and forwarding, which assume one leader, hold.
 *
 * Splits (DESIGN §6.5 step h): a split is a batch of the region's own log
 * (splits.c); each group tells of rows it applied (svc_region_rows_set),
 * and the region maker, a thread, makes the router the store's rows,
 * starting each new region's group before the router routes to it. A
 * member that missed a split (a hole in its rows) makes the new region's
 * replica from a peer's image first (region_fill.h, step k). Not yet:
 * membership changes, restore (DESIGN §6.5 step j).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine_replica.h"
#include "failpoint.h"
#include "keyspace.h"
#include "log.h"
#include "raft_host.h"
#include "raft_identity.h"
#include "raft_loop.h"
#include "raft_net.h"
#include "region_fill.h"
#include "service.h"
#include "timeutil.h"

/* What a new store is seeded with: the rows --region-split-keys cuts,
 * epoch 1, ids 1.. in key order, their keys in splits. */
typedef struct {
    pc_buf *splits;
    size_t nsplits;
    pc_region_row *rows; /* nsplits + 1 */
} seed;

static void seed_free(seed *sd)
{
    for (size_t i = 0; i < sd->nsplits; i++)
        pc_buf_free(&sd->splits[i]);
    free(sd->splits);
    free(sd->rows);
}

static int seed_of_flags(svc *s, seed *sd)
{
    char err[256];
    size_t n = 0;
    memset(sd, 0, sizeof *sd);
    if (ks_split_keys(s->cfg.region_split_keys, &sd->splits, &n, err, sizeof err) != 0) {
        log_error("%s", err);
        return -1;
    }
    sd->nsplits = n;
    if ((sd->rows = calloc(n + 1, sizeof *sd->rows)) == NULL) {
        log_error("out of memory");
        seed_free(sd);
        return -1;
    }
    for (size_t i = 0; i <= n; i++) {
        pc_region_row *r = &sd->rows[i];
        r->id = i + 1;
        r->epoch = 1;
        r->start = i == 0 ? (pc_slice){"", 0} : (pc_slice){sd->splits[i - 1].data,
                                                            sd->splits[i - 1].len};
        r->end = i == n ? (pc_slice){NULL, 0} : (pc_slice){sd->splits[i].data, sd->splits[i].len};
    }
    return 0;
}

/* The store's seed, made now on a new store, is the flags' (which must
 * be the same on every member, always); *digest its digest. */
static int check_seed(svc *s, pc_session *ps, bool fresh, uint64_t *digest)
{
    seed sd;
    uint64_t want = 0, have = 0;
    if (seed_of_flags(s, &sd) != 0)
        return -1;
    pc_rc rc = pc_region_rows_digest(sd.rows, sd.nsplits + 1, &want);
    if (rc == PC_OK && fresh) {
        rc = pc_region_rows_seed(ps, sd.rows, sd.nsplits + 1);
        if (rc == PC_OK)
            log_info("a new store of %zu region(s), each with a Raft group of its own",
                     sd.nsplits + 1);
    }
    if (rc == PC_OK)
        rc = pc_region_seed_digest(ps, &have);
    seed_free(&sd);
    if (rc != PC_OK) {
        log_error("cannot seed or read the store's first region rows (%d)", (int)rc);
        return -1;
    }
    if (have != want) {
        log_error("--region-logs: --region-split-keys differs from the keys this store was "
                  "made with; it must be the same on every member, always (a store's regions "
                  "change only by their logs)");
        return -1;
    }
    *digest = have;
    return 0;
}

/* Whether the store is the one log's: it applied a batch of it, or holds
 * its region map. */
static int one_log_store(pc_session *ps, bool *is)
{
    uint64_t applied = 0;
    pc_buf map = {0};
    pc_rc rc = pc_applied_index(ps, &applied);
    pc_rc m = rc == PC_OK ? pc_meta_get(ps, ROUTER_MAP_NAME, &map) : rc;
    pc_buf_free(&map);
    if (rc != PC_OK || (m != PC_OK && m != PC_NOT_FOUND))
        return -1;
    *is = applied > 0 || m == PC_OK;
    return 0;
}

typedef struct {
    router *rt;
    bool failed;
} rows_load;

static int count_row(void *arg, const pc_region_row *row)
{
    (void)row;
    ++*(size_t *)arg;
    return 0;
}

int svc_region_logs_refuse_one_log(svc *s, pc_session *ps)
{
    size_t rows = 0;
    pc_rc rc = pc_region_rows_each(ps, count_row, &rows);
    if (rc != PC_OK) {
        log_error("cannot read the store's region rows (%d)", (int)rc);
        return -1;
    }
    if (rows > 0 && !s->cfg.region_logs) {
        log_error("the store in --data-dir has %zu region(s), each with a log of its own: it "
                  "runs with --region-logs, never as one log for every region (DESIGN §6.5)",
                  rows);
        return -1;
    }
    return 0;
}

static int add_row(void *arg, const pc_region_row *row)
{
    rows_load *l = arg;
    region *r = region_new(row->id, row->start.data, row->start.len, row->end.data,
                           row->end.len);
    if (r == NULL) {
        log_error("region %llu's row cannot be made a region (out of memory)",
                  (unsigned long long)row->id);
        l->failed = true;
        return 1;
    }
    r->epoch = row->epoch;
    if (router_add(l->rt, r) != 0) {
        log_error("region %llu's row overlaps another region's", (unsigned long long)row->id);
        region_free(r);
        l->failed = true;
        return 1;
    }
    return 0;
}

/* The router of the store's rows (none: an empty router). */
static router *load_rows(pc_session *ps)
{
    rows_load l = {router_new(), false};
    if (l.rt == NULL)
        return NULL;
    pc_rc rc = pc_region_rows_each(ps, add_row, &l);
    if (rc != PC_OK || l.failed) {
        if (rc != PC_OK)
            log_error("cannot read the store's region rows (%d)", (int)rc);
        router_free(l.rt);
        return NULL;
    }
    return l.rt;
}

/* The regions: the store's rows, a new store's seeded first. Region 1
 * holds the empty key (home). *seed_digest: the digest of the rows it was
 * seeded with. 0; -1 logged. */
static int open_regions(svc *s, pc_session *ps, uint64_t *seed_digest)
{
    bool one_log = false;
    if (one_log_store(ps, &one_log) != 0) {
        log_error("cannot read the store's applied index or region map");
        return -1;
    }
    router *rt = load_rows(ps);
    if (rt != NULL && router_count(rt) == 0 && one_log) {
        log_error("--region-logs: the store in --data-dir belongs to one log for every region "
                  "(it applied that log's entries or holds its region map); a node runs one "
                  "log or a log per region over a store, never both (DESIGN §6.5)");
        router_free(rt);
        return -1;
    }
    bool fresh = rt != NULL && router_count(rt) == 0;
    if (rt != NULL && check_seed(s, ps, fresh, seed_digest) != 0) {
        router_free(rt);
        return -1;
    }
    if (fresh) {
        router_free(rt);
        rt = load_rows(ps);
    }
    if (rt == NULL)
        return -1;
    region *first = router_count(rt) > 0 ? router_at(rt, 0) : NULL;
    if (first == NULL || first->id != 1 || first->start.len != 0) {
        log_error("the store's region rows do not begin with region 1 at the empty key");
        router_free(rt);
        return -1;
    }
    s->regions = rt;
    return 0;
}

/* <raft dir>/r<id> for region r, made if missing: the caller's. */
static char *region_dir(const char *raft_dir, uint64_t id)
{
    size_t len = strlen(raft_dir) + 32;
    char *dir = malloc(len);
    if (dir == NULL)
        return NULL;
    snprintf(dir, len, "%s/r%llu", raft_dir, (unsigned long long)id);
    return dir;
}

/* Start region r's group here (its log in <raft dir>/r<id>, empty for a
 * region a split just made: §7.3's probes make the group once every
 * member that applied the split answers). 0, or -1 with why in err. */
static int start_group(svc *s, region *r, char *err, size_t errlen)
{
    if (s->rl.ndirs == s->rl.capdirs) {
        size_t cap = s->rl.capdirs ? 2 * s->rl.capdirs : 16;
        char **grown = realloc(s->rl.dirs, cap * sizeof *grown);
        if (grown == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        s->rl.dirs = grown;
        s->rl.capdirs = cap;
    }
    raft_group_config cfg = s->rl.base;
    char why[256];
    cfg.region = r->id;
    cfg.start = (pc_slice){r->start.data, r->start.len};
    cfg.end = r->unbounded ? (pc_slice){NULL, 0} : (pc_slice){r->end.data, r->end.len};
    cfg.loop = s->rl.loop;
    cfg.net = s->rl.net;
    cfg.listen_fd = 0;
    /* libraft keeps the dir's name: it lives as long as the group */
    char *dir = region_dir(s->rl.base_dir, r->id);
    if ((cfg.dir = dir) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (raft_group_start(&cfg, s->metrics, &r->raft, why, sizeof why) != 0) {
        snprintf(err, errlen, "region %llu: %s", (unsigned long long)r->id, why);
        free(dir);
        return -1;
    }
    s->rl.dirs[s->rl.ndirs++] = dir;
    r->engine = s->engine;
    r->repl = raft_group_replicator(r->raft);
    return 0;
}

/* ---- the region maker (DESIGN §6.5 step h) ---- */

/* One pass: the store's rows as the router (gaps allowed: a node that
 * missed a split lacks the new region's row, step k), each region new
 * here given a group first, so that no region is ever routed without
 * one. A region whose group cannot start is left out, a hole (its keys
 * answer 503, and no read across it is fenced) while the rest go on; -1
 * then, or when nothing could be made: tried again (logged). */
static int remake(svc *s)
{
    pc_session *ps = svc_engine_session(s);
    if (ps != NULL)
        region_fill_serve(s->rl.fill, ps); /* step k: an image that came, peers' asks */
    router *fresh = ps != NULL ? load_rows(ps) : NULL;
    if (fresh == NULL) {
        log_error("regions: cannot read the store's region rows; tried again in a second");
        return -1;
    }
    /* A hole: a split this node missed; a peer is asked for the region,
     * and the pass is tried again a second later. */
    bool hole = region_fill_holes(s->rl.fill, fresh);
    size_t n = router_count(fresh), nstarted = 0;
    raft_group **started = calloc(n ? n : 1, sizeof *started);
    if (started == NULL) {
        router_free(fresh);
        log_error("regions: out of memory making the router; tried again in a second");
        return -1;
    }
    uint64_t *failed = calloc(n ? n : 1, sizeof *failed);
    size_t nfailed = 0;
    if (failed == NULL) {
        free(started);
        router_free(fresh);
        log_error("regions: out of memory making the router; tried again in a second");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        region *r = router_at(fresh, i);
        char err[320];
        if (router_has_id(s->regions, r->id))
            continue; /* its group goes on (a split's left part: narrowed by its row) */
        /* tests: a member dies after it applied a split and before the
         * new region's group ran here; at restart the row starts it */
        failpoint(ps, "before_region_group");
        if (start_group(s, r, err, sizeof err) != 0) {
            uint64_t now = time_mono_ms();
            if (now - s->rl.failed_logged_ms >= 60000) { /* tried every second */
                s->rl.failed_logged_ms = now;
                log_error("regions: cannot start the group of region %llu: %s; tried again "
                          "every second (logged once a minute)", (unsigned long long)r->id, err);
            }
            failed[nfailed++] = r->id;
            continue;
        }
        started[nstarted++] = r->raft;
        log_info("regions: region %llu (epoch %llu) made here, a Raft group of its own",
                 (unsigned long long)r->id, (unsigned long long)r->epoch);
    }
    for (size_t k = 0; k < nfailed; k++)
        region_free(router_take(fresh, failed[k]));
    free(failed);
    size_t was = router_count(s->regions);
    if (router_adopt(s->regions, fresh, svc_region_made, s) != 0) {
        for (size_t k = 0; k < nstarted; k++)
            raft_group_stop(started[k]); /* nothing routed to them yet */
        free(started);
        log_error("regions: out of memory making the router; tried again in a second");
        return -1;
    }
    free(started);
    metrics_inc(s->m.region_splits, nstarted); /* on every member, as a map's install */
    if (router_count(s->regions) != was)
        log_info("regions: %zu, from the store's rows", router_count(s->regions));
    return nfailed > 0 || hole ? -1 : 0;
}

static void *maker_main(void *arg)
{
    svc *s = arg;
    pthread_mutex_lock(&s->rl.mu);
    bool retry = false;
    while (!s->rl.stop) {
        if (!s->rl.wake && !retry) {
            pthread_cond_wait(&s->rl.cv, &s->rl.mu);
            continue;
        }
        if (retry && !s->rl.wake) {
            struct timespec until = time_deadline(CLOCK_REALTIME, 1000);
            pthread_cond_timedwait(&s->rl.cv, &s->rl.mu, &until);
            if (s->rl.stop)
                break;
        }
        s->rl.wake = false;
        pthread_mutex_unlock(&s->rl.mu);
        retry = remake(s) != 0;
        pthread_mutex_lock(&s->rl.mu);
    }
    pthread_mutex_unlock(&s->rl.mu);
    return NULL;
}

void svc_region_rows_set(void *arg)
{
    svc *s = arg;
    if (!s->cfg.region_logs)
        return;
    pthread_mutex_lock(&s->rl.mu);
    s->rl.wake = true;
    pthread_cond_broadcast(&s->rl.cv);
    pthread_mutex_unlock(&s->rl.mu);
}

int svc_region_logs_open(svc *s, pc_session *ps, const raft_group_config *rcfg, char *err,
                         size_t errlen)
{
    const raft_peer *me = NULL;
    for (size_t i = 0; i < rcfg->npeers; i++)
        if (rcfg->peers[i].id == rcfg->id)
            me = &rcfg->peers[i];
    if (me == NULL) {
        snprintf(err, errlen, "--raft-id %u is not among --raft-peers", rcfg->id);
        return -1;
    }
    /* A one-log member that never applied an entry has a store that
     * passes as new, but its raft dir holds that log's state (its own
     * groups' logs are in r<id> below it). */
    raft_member_identity mine;
    char why[256] = "";
    int member = raft_member_load(rcfg->dir, &mine, why, sizeof why);
    if (member < 0) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    if (raft_member_has_state(rcfg->dir) || member > 0) {
        snprintf(err, errlen, "%s holds the Raft state of one log for every region: a node runs "
                              "one log or a log per region, never both (DESIGN §6.5)", rcfg->dir);
        return -1;
    }
    uint64_t realm = 0;
    if (open_regions(s, ps, &realm) != 0) {
        snprintf(err, errlen, "cannot make the regions from the store (see the log above)");
        return -1;
    }
    if (mkdir(rcfg->dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "%s: %s", rcfg->dir, strerror(errno));
        return -1;
    }
    s->rl.base = *rcfg;
    if ((s->rl.base_dir = strdup(rcfg->dir)) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* before any group: each may hear of rows as it replays its log */
    pthread_mutex_init(&s->rl.mu, NULL);
    pthread_cond_init(&s->rl.cv, NULL);
    if (raft_loop_start(&s->rl.loop, err, errlen) != 0)
        return -1;
    /* Members seeded differently would each apply what the others skip
     * as out of range: they are of different realms, and never talk. */
    raft_net_config nc = {.address = me->raft, .listen_fd = rcfg->listen_fd,
                          .tls = rcfg->peer_tls, .realm = realm};
    if (raft_net_start(&nc, &s->rl.net, err, errlen) != 0)
        return -1;
    s->rl.fill = region_fill_start(s->rl.net, rcfg->peers, rcfg->npeers, rcfg->id, s->metrics,
                                   svc_region_rows_set, s, err, errlen);
    if (s->rl.fill == NULL)
        return -1;
    size_t n = router_count(s->regions);
    for (size_t i = 0; i < n; i++) {
        if (start_group(s, router_at(s->regions, i), err, errlen) != 0)
            return -1;
        svc_region_made(s, router_at(s->regions, i)); /* before the maker runs */
    }
    if (pthread_create(&s->rl.maker, NULL, maker_main, s) != 0) {
        snprintf(err, errlen, "cannot start the region maker's thread");
        return -1;
    }
    s->rl.maker_on = true;
    log_info("%zu region(s), each a Raft group of its own over one node network at %s%s "
             "(realm %016llx: the region seed's digest)", n, me->raft,
             rcfg->peer_tls != NULL ? " (peer TLS)" : "", (unsigned long long)realm);
    return 0;
}

void svc_region_logs_close(svc *s)
{
    if (s->rl.maker_on) { /* first: it starts groups */
        pthread_mutex_lock(&s->rl.mu);
        s->rl.stop = true;
        pthread_cond_broadcast(&s->rl.cv);
        pthread_mutex_unlock(&s->rl.mu);
        pthread_join(s->rl.maker, NULL);
        s->rl.maker_on = false;
    }
    /* Each group once: a split's retired regions share theirs with the
     * left parts in the router. */
    for (size_t i = 0; s->regions != NULL && i < router_count(s->regions); i++) {
        region *r = router_at(s->regions, i);
        raft_group_stop(r->raft); /* after every writer: nothing proposes any more */
        r->raft = NULL;
        r->repl = NULL;
        r->engine = NULL;
    }
    raft_loop_stop(s->rl.loop);
    s->rl.loop = NULL;
    region_fill_stop(s->rl.fill); /* a group of the net, left before it stops */
    s->rl.fill = NULL;
    raft_net_stop(s->rl.net);
    s->rl.net = NULL;
    for (size_t i = 0; i < s->rl.ndirs; i++)
        free(s->rl.dirs[i]);
    free(s->rl.dirs);
    s->rl.dirs = NULL;
    s->rl.ndirs = s->rl.capdirs = 0;
    if (s->rl.base_dir != NULL) { /* the groups that heard of rows are stopped */
        pthread_cond_destroy(&s->rl.cv);
        pthread_mutex_destroy(&s->rl.mu);
    }
    free(s->rl.base_dir);
    s->rl.base_dir = NULL;
}

void svc_region_leaders_gather(svc *s)
{
    if (!s->cfg.region_logs || !s->cfg.gather_leaders || s->home == NULL ||
        s->home->raft == NULL)
        return;
    raft_group_status home;
    raft_group_get_status(s->home->raft, &home);
    if (home.leader_id == 0)
        return; /* no leader of region 1 known: nothing to gather around */
    for (size_t i = 0; i < router_count(s->regions); i++) {
        region *r = router_at(s->regions, i);
        raft_group_status st;
        char err[256];
        if (r->raft == s->home->raft || r->raft == NULL)
            continue;
        raft_group_get_status(r->raft, &st);
        if (st.leader_id != (unsigned)s->cfg.shared.raft_id || home.leader_id == st.leader_id)
            continue;
        /* A short wait: the transfer goes on without it, and the
         * janitor's round (sessions, locks, leases) is not held up by
         * many regions in turn. */
        raft_host_result res = raft_host_change(raft_group_host(r->raft), RAFT_HOST_LEAD,
                                                home.leader_id, NULL, 50, err, sizeof err);
        uint64_t now = time_mono_ms();
        if (res == RAFT_HOST_DONE) {
            log_info("region %llu: its lead handed to member %u, region 1's leader",
                     (unsigned long long)r->id, home.leader_id);
        } else if (res == RAFT_HOST_REFUSED && now - s->rl.warned_ms >= 60000) {
            s->rl.warned_ms = now; /* once a minute: it is tried every round */
            log_warn("region %llu: cannot hand its lead to member %u, region 1's leader: %s "
                     "(its writes answer 503 meanwhile)",
                     (unsigned long long)r->id, home.leader_id, err);
        }
    }
}

bool svc_region_group(svc *s, const region *r, unsigned *leader, uint64_t *term)
{
    raft_group_status st;
    if (!s->cfg.region_logs || r->raft == NULL)
        return false;
    raft_group_get_status(r->raft, &st);
    *leader = st.leader_id;
    *term = st.term;
    return true;
}
