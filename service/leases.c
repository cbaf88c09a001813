/*
 * leases.c — keys that expire (leases.h; docs/DESIGN.md §11).
 *
 * The table in memory is the leader's: the leases' TTLs and deadlines, and
 * how many attachment records each has (kept exact so that the one
 * transaction that ends a lease stays bounded: LEASE_MAX_KEYS). Grants,
 * attachments and ends are transactions like any other, so every member
 * has them; a member that begins to lead reads them back (leases_load).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator.h"
#include "keyspace.h"
#include "leases.h"
#include "log.h"
#include "reader.h"
#include "sessions.h"

#define END_TRIES 5
#define LOAD_PAGE 1000
#define ENDS_PER_TICK 64   /* leases the janitor ends in one tick, at most */

typedef struct {
    uint64_t id, ttl_ms;
    uint64_t deadline_ms;   /* on the session clock (sessions_now) */
    size_t holds;           /* puts committing with it (leases_hold) */
    size_t reserved;        /* their keys, counted against LEASE_MAX_KEYS */
    long keys;              /* attachment records; -1: not counted (yet, or
                               again after a put whose outcome is unknown) */
    bool ending;            /* revoked or expired: refused from now on */
} lease;

struct leases {
    pthread_mutex_t mu;
    pthread_cond_t released; /* a hold ended */
    lease *v;                /* sorted by id */
    size_t n, cap;
    size_t pending;          /* grants committing (counted against --lease-max) */
    uint64_t term;           /* the term the table was read back for (0: none) */
    uint64_t gen;            /* bumped at each read-back: older holds are void */
};

leases *leases_new(void)
{
    leases *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->released, NULL);
    return l;
}

void leases_free(leases *l)
{
    if (l == NULL)
        return;
    free(l->v);
    pthread_cond_destroy(&l->released);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* Whether the table is this member's as the leader of its current term:
 * read back for it (a member that led before, lost the lead and leads
 * again must not act on what it knew then). With l->mu held. */
static bool current(svc *s)
{
    uint64_t term = svc_leader_term(s);
    return term != 0 && s->leases->term == term;
}

/* The lease with this id, or NULL; with l->mu held. */
static lease *find(leases *l, uint64_t id)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < l->n && l->v[lo].id == id ? &l->v[lo] : NULL;
}

/* Insert in id order; with l->mu held. */
static bool insert(leases *l, uint64_t id, uint64_t ttl_ms, uint64_t deadline_ms, long keys)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        lease *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL)
            return false;
        l->v = v;
        l->cap = cap;
    }
    size_t i = l->n;
    while (i > 0 && l->v[i - 1].id > id)
        i--;
    memmove(&l->v[i + 1], &l->v[i], (l->n - i) * sizeof(*l->v));
    l->v[i] = (lease){.id = id, .ttl_ms = ttl_ms, .deadline_ms = deadline_ms, .keys = keys};
    l->n++;
    return true;
}

static void remove_lease(leases *l, uint64_t id)
{
    lease *x = find(l, id);
    if (x == NULL)
        return;
    size_t i = (size_t)(x - l->v);
    memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(*l->v));
    l->n--;
}

/* When the lease ends, counting a stall of the whole process as sessions
 * do (DESIGN §4.5): a lease alive when the stall began gets its whole TTL
 * again from the stall's end, since nobody could keep it alive. */
static uint64_t lease_end(svc *s, const lease *x)
{
    uint64_t end, len;
    sessions_last_stall(s->sessions, &end, &len);
    if (end != 0 && x->deadline_ms >= end - len && end + x->ttl_ms > x->deadline_ms)
        return end + x->ttl_ms;
    return x->deadline_ms;
}

static void gauge(svc *s)
{
    metrics_set(s->m.leases, (int64_t)s->leases->n);
}

bool leases_load(svc *s, pc_session *ps, uint64_t term)
{
    char start[LEASE_RECORD_KEY + 1] = {KS_LEASE}, end[1] = {KS_LEASE + 1};
    size_t slen = 1;
    leases fresh = {0};
    uint64_t now = sessions_now(s->sessions);
    bool ok = true;
    /* Every lease, a page at a time, whatever --lease-max is now: the
     * latest of each record (a lock left by a crashed run is resolved on
     * the way), as observers_load reads the registrations. */
    for (bool more = true; ok && more;) {
        pc_items it = {0};
        pc_conflict c;
        pc_rc rc = rd_scan(s, ps, (pc_slice){start, slen}, (pc_slice){end, 1}, PC_TS_MAX - 1,
                           LOAD_PAGE, &it, &c);
        if (rc != PC_OK)
            log_error("leases: cannot read the leases: %s", pc_rc_name(rc));
        ok = rc == PC_OK;
        more = ok && it.more && it.n > 0;
        for (size_t i = 0; ok && i < it.n; i++) {
            char ttl[24] = {0};
            uint64_t id;
            if (!lease_record_parse(it.items[i].key.data, it.items[i].key.len, &id) ||
                it.items[i].value.len >= sizeof(ttl))
                continue;
            memcpy(ttl, it.items[i].value.data, it.items[i].value.len);
            uint64_t ttl_ms = strtoull(ttl, NULL, 10);
            /* A fresh TTL for each: its keep-alives went to the last leader. */
            ok = insert(&fresh, id, ttl_ms, now + ttl_ms, -1);
            if (!ok)
                log_error("leases: out of memory reading the leases back");
        }
        if (more) { /* the next page: after the last key */
            pc_slice last = it.items[it.n - 1].key;
            slen = last.len < LEASE_RECORD_KEY ? last.len : LEASE_RECORD_KEY;
            memcpy(start, last.data, slen);
            start[slen++] = '\0';
        }
        pc_items_free(&it);
    }
    if (!ok) {
        free(fresh.v);
        return false;
    }
    leases *l = s->leases;
    pthread_mutex_lock(&l->mu);
    free(l->v);
    l->v = fresh.v;
    l->n = fresh.n;
    l->cap = fresh.cap;
    l->term = term;
    l->gen++; /* the holds of the table it replaces are void */
    gauge(s);
    pthread_cond_broadcast(&l->released);
    pthread_mutex_unlock(&l->mu);
    if (fresh.n > 0)
        log_info("leases: %zu lease(s) read back, each with its whole TTL from now", fresh.n);
    return true;
}

/* Whether a failed write's outcome is known to be "nothing written". */
static bool surely_not_written(pc_rc rc)
{
    return rc == PC_WRITE_CONFLICT || rc == PC_LOCKED || rc == PC_NOT_FOUND ||
           rc == PC_TS_UNAVAILABLE || rc == PC_INVALID || rc == PC_NOT_LEADER;
}

pc_rc leases_grant(svc *s, pc_session *ps, uint64_t ttl_ms, uint64_t *id)
{
    leases *l = s->leases;
    uint64_t start = 0, cts;
    pc_conflict c;
    char key[LEASE_RECORD_KEY], val[24];

    pthread_mutex_lock(&l->mu);
    bool ready = current(s), full = l->n + l->pending >= s->cfg.lease_max;
    if (ready && !full)
        l->pending++; /* its room, while it commits */
    pthread_mutex_unlock(&l->mu);
    if (!ready)
        return PC_NOT_LEADER;
    if (full)
        return PC_INVALID;
    pc_rc rc = PC_TS_UNAVAILABLE;
    if (svc_timestamp(s, &start)) {
        /* The id is the grant's start timestamp: no other grant, on this
         * leader or any other, can have it. */
        lease_record_key(key, start);
        int vn = snprintf(val, sizeof(val), "%llu", (unsigned long long)ttl_ms);
        pc_mutation m = {PC_OP_PUT, {key, sizeof(key)}, {val, (size_t)vn}};
        rc = coord_commit_internal(s, ps, start, &m, 1, &cts, &c);
    }
    pthread_mutex_lock(&l->mu);
    l->pending--;
    bool kept = true;
    /* Granted: kept. Perhaps granted (the answer of the commit was lost):
     * kept as ending, so that the janitor removes its record if it is
     * there; the client was told it failed. */
    if (rc == PC_OK || !surely_not_written(rc)) {
        kept = insert(l, start, ttl_ms, sessions_now(s->sessions) + ttl_ms, 0);
        if (kept && rc != PC_OK)
            find(l, start)->ending = true;
    }
    gauge(s);
    pthread_mutex_unlock(&l->mu);
    if (!kept) {
        /* The next leader reads it back and, with no keep-alive, ends it. */
        log_error("leases: out of memory keeping lease %llu", (unsigned long long)start);
        return rc == PC_OK ? PC_NOMEM : rc;
    }
    if (rc == PC_OK)
        *id = start;
    return rc;
}

pc_rc leases_keepalive(svc *s, uint64_t id, uint64_t *ttl_ms)
{
    leases *l = s->leases;
    /* Confirm the lead first: a deposed leader that still thinks it leads
     * must not answer a keep-alive the new leader never heard of. The new
     * leader's fresh TTLs start after this confirmation, so they end no
     * sooner than a TTL after the keep-alive was sent. */
    char rec[LEASE_RECORD_KEY];
    lease_record_key(rec, id);
    pc_rc rc = svc_read_fence(s, (pc_slice){rec, sizeof rec}); /* the lease's region */
    if (rc != PC_OK)
        return rc;
    uint64_t now = sessions_now(s->sessions);
    rc = PC_NOT_FOUND;
    pthread_mutex_lock(&l->mu);
    lease *x = find(l, id);
    /* One that has run out is not brought back: the janitor's next tick
     * ends it (a keep-alive after the deadline is too late, as in etcd). */
    if (!current(s)) {
        rc = PC_NOT_LEADER;
    } else if (x != NULL && !x->ending && now <= lease_end(s, x)) {
        x->deadline_ms = now + x->ttl_ms;
        *ttl_ms = x->ttl_ms;
        rc = PC_OK;
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

lease_hold leases_hold(svc *s, uint64_t id, size_t nputs, uint64_t *gen)
{
    leases *l = s->leases;
    lease_hold h = LEASE_MISSING;
    uint64_t now = sessions_now(s->sessions);
    pthread_mutex_lock(&l->mu);
    lease *x = find(l, id);
    if (!current(s)) {
        h = LEASE_NOT_READY;
    } else if (x != NULL && !x->ending && now <= lease_end(s, x)) {
        if (x->keys < 0) {
            h = LEASE_UNCOUNTED; /* leases_count first */
        } else if ((size_t)x->keys + x->reserved + nputs > LEASE_MAX_KEYS) {
            h = LEASE_FULL;
        } else {
            x->holds++;
            x->reserved += nputs;
            *gen = l->gen;
            h = LEASE_HELD;
        }
    }
    pthread_mutex_unlock(&l->mu);
    return h;
}

bool leases_still_held(svc *s, uint64_t gen)
{
    pthread_mutex_lock(&s->leases->mu);
    bool same = s->leases->gen == gen && current(s);
    pthread_mutex_unlock(&s->leases->mu);
    return same;
}

/* The attachment records of a lease at ts, from `from` on (empty: the
 * first), at most limit (plus one, to tell that there are more). */
static pc_rc attachments(svc *s, pc_session *ps, uint64_t id, uint64_t ts, size_t limit,
                         pc_items *it)
{
    char start[LEASE_RECORD_KEY], end[LEASE_RECORD_KEY];
    pc_conflict c;
    lease_attach_range(id, start, end);
    return rd_scan(s, ps, (pc_slice){start, sizeof start}, (pc_slice){end, sizeof end}, ts,
                   limit, it, &c);
}

pc_rc leases_count(svc *s, pc_session *ps, uint64_t id)
{
    leases *l = s->leases;
    lease *x;
    uint64_t ts;
    /* With no put holding it (none can start while it is not counted),
     * every attachment is committed below a timestamp taken now. */
    pthread_mutex_lock(&l->mu);
    while ((x = find(l, id)) != NULL && x->keys < 0 && x->holds > 0)
        pthread_cond_wait(&l->released, &l->mu);
    bool needed = x != NULL && x->keys < 0;
    pthread_mutex_unlock(&l->mu);
    if (!needed)
        return PC_OK;
    if (!svc_timestamp(s, &ts))
        return PC_TS_UNAVAILABLE;
    pc_items it = {0};
    pc_rc rc = attachments(s, ps, id, ts, LEASE_MAX_KEYS * 2, &it);
    if (rc == PC_OK) {
        pthread_mutex_lock(&l->mu);
        if ((x = find(l, id)) != NULL && x->keys < 0)
            x->keys = it.more ? LEASE_MAX_KEYS * 2 : (long)it.n;
        pthread_mutex_unlock(&l->mu);
    }
    pc_items_free(&it);
    return rc;
}

void leases_release(svc *s, uint64_t id, uint64_t gen, size_t nputs, size_t added, pc_rc rc)
{
    leases *l = s->leases;
    pthread_mutex_lock(&l->mu);
    lease *x = find(l, id);
    /* A hold of a table read back since is void: nothing to let go of. */
    if (x != NULL && gen == l->gen && x->holds > 0 && x->reserved >= nputs) {
        x->holds--;
        x->reserved -= nputs;
        if (rc == PC_OK && x->keys >= 0)
            x->keys += (long)added;
        else if (rc != PC_OK && !surely_not_written(rc))
            x->keys = -1; /* it may have committed: count again */
    }
    pthread_cond_broadcast(&l->released);
    pthread_mutex_unlock(&l->mu);
}

/* Mark the lease ending and wait until no put holds it: from then on no
 * attachment to it can commit, so a transaction that starts now sees them
 * all. false: no such lease, or (due_only: the janitor) kept alive since
 * it was found due. */
static bool begin_end(svc *s, uint64_t id, bool due_only)
{
    leases *l = s->leases;
    pthread_mutex_lock(&l->mu);
    lease *x = find(l, id);
    if (x != NULL && due_only && !x->ending && sessions_now(s->sessions) <= lease_end(s, x))
        x = NULL;
    if (x != NULL) {
        x->ending = true;
        while ((x = find(l, id)) != NULL && x->holds > 0)
            pthread_cond_wait(&l->released, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return x != NULL;
}

/* Is the user key behind attachment a still attached (its latest write at
 * ts is the attachment's)? *ek gets its engine key (KS_MAX bytes). */
static pc_rc still_attached(svc *s, pc_session *ps, const pc_item *a, uint64_t ts, char *ek,
                            pc_slice *key, bool *yes)
{
    pc_buf v = {0};
    uint64_t cts = 0, id;
    pc_conflict c;
    const char *user;
    size_t ulen;
    *yes = false;
    if (!lease_attach_parse(a->key.data, a->key.len, &id, &user, &ulen))
        return PC_OK; /* not an attachment: nothing to delete with it */
    *key = (pc_slice){ek, ks_user(ek, user, ulen)};
    pc_rc rc = rd_get(s, ps, *key, ts, &v, &cts, &c);
    pc_buf_free(&v);
    *yes = rc == PC_OK && cts == a->commit_ts;
    return rc == PC_NOT_FOUND ? PC_OK : rc;
}

static int cmp_mutation(const void *a, const void *b)
{
    const pc_mutation *x = a, *y = b;
    return pc_key_cmp(x->key.data, x->key.len, y->key.data, y->key.len);
}

/* One try at the end's transaction. Normally one transaction deletes the
 * lease, its attachments and the keys still attached. Should a lease have
 * more attachments than LEASE_MAX_KEYS (its count was lost), the first
 * ones go in a transaction of their own, the lease record staying
 * (*partial): no key outlives its lease, at the cost of its end being in
 * parts. */
static pc_rc end_once(svc *s, pc_session *ps, uint64_t id, size_t *deleted, uint64_t *cts,
                      bool *partial)
{
    uint64_t start;
    pc_items it = {0};
    pc_conflict c;
    char rec[LEASE_RECORD_KEY];
    if (!svc_timestamp(s, &start))
        return PC_TS_UNAVAILABLE;
    pc_rc rc = attachments(s, ps, id, start, LEASE_MAX_KEYS, &it);
    *partial = rc == PC_OK && it.more;
    size_t na = it.n < LEASE_MAX_KEYS ? it.n : LEASE_MAX_KEYS;
    /* At most: the lease, each attachment, each user key. */
    pc_mutation *m = rc == PC_OK ? calloc(2 * na + 1, sizeof(*m)) : NULL;
    char *ekeys = rc == PC_OK ? malloc(na * KS_MAX + 1) : NULL;
    size_t n = 0;
    if (rc == PC_OK && (m == NULL || ekeys == NULL))
        rc = PC_NOMEM;
    if (rc == PC_OK && !*partial) {
        lease_record_key(rec, id);
        m[n++] = (pc_mutation){PC_OP_DELETE, {rec, sizeof(rec)}, {NULL, 0}};
    }
    for (size_t i = 0; rc == PC_OK && i < na; i++) {
        const pc_item *a = &it.items[i];
        bool attached = false;
        pc_slice user;
        if ((rc = still_attached(s, ps, a, start, ekeys + i * KS_MAX, &user, &attached)) != PC_OK)
            break;
        m[n++] = (pc_mutation){PC_OP_DELETE, a->key, {NULL, 0}};
        if (attached) {
            m[n++] = (pc_mutation){PC_OP_DELETE, user, {NULL, 0}};
            (*deleted)++;
        }
    }
    if (rc == PC_OK) {
        qsort(m, n, sizeof(*m), cmp_mutation);
        rc = coord_commit_internal(s, ps, start, m, n, cts, &c);
    }
    free(m);
    free(ekeys);
    pc_items_free(&it);
    return rc;
}

/* End lease id (leases.h leases_revoke; the janitor's with due_only). */
static pc_rc end_lease(svc *s, pc_session *ps, uint64_t id, bool due_only, size_t *deleted,
                       uint64_t *commit_ts)
{
    leases *l = s->leases;
    if (!begin_end(s, id, due_only))
        return PC_NOT_FOUND;
    pc_rc rc = PC_OK;
    bool partial = true;
    *deleted = 0;
    /* A put of one of its keys without the lease may commit between this
     * transaction's start and its commit: a write conflict, and on the next
     * try that key is no longer attached. */
    for (int tries = 0; partial && tries < END_TRIES; tries++) {
        size_t part = 0;
        rc = end_once(s, ps, id, &part, commit_ts, &partial);
        if (rc == PC_OK) {
            *deleted += part;
            tries = -1; /* a part done: the tries start again */
        } else if (rc != PC_WRITE_CONFLICT && rc != PC_LOCKED) {
            break;
        }
    }
    if (rc == PC_OK && !partial) {
        pthread_mutex_lock(&l->mu);
        remove_lease(l, id);
        gauge(s);
        pthread_mutex_unlock(&l->mu);
    }
    return rc == PC_OK && partial ? PC_WRITE_CONFLICT : rc;
}

pc_rc leases_revoke(svc *s, pc_session *ps, uint64_t id, size_t *deleted, uint64_t *commit_ts)
{
    pthread_mutex_lock(&s->leases->mu);
    bool ready = current(s);
    pthread_mutex_unlock(&s->leases->mu);
    return ready ? end_lease(s, ps, id, false, deleted, commit_ts) : PC_NOT_LEADER;
}

pc_rc leases_lookup(svc *s, pc_session *ps, uint64_t id, codec_enc enc, json_t **out)
{
    leases *l = s->leases;
    uint64_t now = sessions_now(s->sessions), ts, ttl = 0, end = 0;
    *out = NULL;
    pthread_mutex_lock(&l->mu);
    lease *x = find(l, id);
    bool found = x != NULL && !x->ending;
    if (found) {
        ttl = x->ttl_ms;
        end = lease_end(s, x);
    }
    pthread_mutex_unlock(&l->mu);
    if (!found)
        return PC_NOT_FOUND;
    if (!svc_timestamp(s, &ts))
        return PC_TS_UNAVAILABLE;
    pc_items it = {0};
    pc_rc rc = attachments(s, ps, id, ts, LEASE_MAX_KEYS, &it);
    json_t *keys = json_array();
    bool text = true;
    for (size_t i = 0; rc == PC_OK && keys != NULL && i < it.n; i++) {
        bool attached = false;
        char ek[KS_MAX];
        pc_slice user;
        if ((rc = still_attached(s, ps, &it.items[i], ts, ek, &user, &attached)) != PC_OK ||
            !attached)
            continue;
        json_t *k = codec_to_json((const char *)user.data + 1, user.len - 1, enc);
        text &= k != NULL;
        if (k == NULL || json_array_append_new(keys, k) != 0)
            break;
    }
    pc_items_free(&it);
    if (rc != PC_OK || keys == NULL || !text) {
        json_decref(keys);
        return keys == NULL ? PC_NOMEM : rc;
    }
    *out = json_pack("{s:I,s:I,s:I,s:o}", "id", (json_int_t)id, "ttl_ms", (json_int_t)ttl,
                     "remaining_ms", (json_int_t)(end > now ? end - now : 0), "keys", keys);
    return *out != NULL ? PC_OK : PC_NOMEM;
}

json_t *leases_list(svc *s)
{
    leases *l = s->leases;
    uint64_t now = sessions_now(s->sessions);
    json_t *arr = json_array();
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; arr != NULL && i < l->n; i++) {
        const lease *x = &l->v[i];
        if (x->ending)
            continue;
        uint64_t end = lease_end(s, x);
        json_t *o = json_pack("{s:I,s:I,s:I}", "id", (json_int_t)x->id, "ttl_ms",
                              (json_int_t)x->ttl_ms, "remaining_ms",
                              (json_int_t)(end > now ? end - now : 0));
        if (o == NULL || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    pthread_mutex_unlock(&l->mu);
    return arr != NULL ? json_pack("{s:o}", "leases", arr) : NULL;
}

void leases_expire(svc *s, pc_session *ps)
{
    leases *l = s->leases;
    uint64_t now = sessions_now(s->sessions), due[ENDS_PER_TICK];
    size_t n = 0;
    /* The leases due (and those whose end failed before), found in one
     * pass and ended one at a time, the table unlocked meanwhile; a
     * bounded number a tick, so that sessions and locks wait no longer. */
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; current(s) && i < l->n && n < ENDS_PER_TICK; i++)
        if (l->v[i].ending || now > lease_end(s, &l->v[i]))
            due[n++] = l->v[i].id;
    pthread_mutex_unlock(&l->mu);
    for (size_t i = 0; i < n; i++) {
        size_t deleted = 0;
        uint64_t cts = 0;
        pc_rc rc = end_lease(s, ps, due[i], true, &deleted, &cts);
        if (rc == PC_OK) {
            metrics_inc(s->m.leases_expired, 1);
            log_info("leases: lease %llu expired: %zu key(s) deleted at %llu",
                     (unsigned long long)due[i], deleted, (unsigned long long)cts);
        } else if (rc != PC_NOT_FOUND) {
            /* It stays ending: tried again on the next tick; the others go on. */
            log_warn("leases: lease %llu expired but could not end yet: %s",
                     (unsigned long long)due[i], pc_rc_name(rc));
        }
    }
}
