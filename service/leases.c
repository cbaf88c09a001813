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

typedef struct {
    uint64_t id, ttl_ms;
    uint64_t deadline_ms;   /* on the session clock (sessions_now) */
    size_t holds;           /* puts committing with it (leases_hold) */
    size_t reserved;        /* their keys, counted against LEASE_MAX_KEYS */
    long keys;              /* attachment records; -1: not counted yet */
    bool ending;            /* revoked or expired: refused from now on */
} lease;

struct leases {
    pthread_mutex_t mu;
    pthread_cond_t released; /* a hold ended */
    lease *v;                /* sorted by id */
    size_t n, cap;
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

bool leases_load(svc *s, pc_session *ps)
{
    char start[1] = {KS_LEASE}, end[1] = {KS_LEASE + 1};
    pc_items it = {0};
    pc_conflict c;
    /* The latest of each record (a lock left by a crashed run is resolved
     * on the way), as observers_load reads the registrations. */
    pc_rc rc = rd_scan(s, ps, (pc_slice){start, 1}, (pc_slice){end, 1}, PC_TS_MAX - 1,
                       s->cfg.lease_max + 1, &it, &c);
    if (rc != PC_OK) {
        log_error("leases: cannot read the leases: %s", pc_rc_name(rc));
        pc_items_free(&it);
        return false;
    }
    leases *l = s->leases;
    uint64_t now = sessions_now(s->sessions);
    bool ok = true;
    pthread_mutex_lock(&l->mu);
    l->n = 0;
    for (size_t i = 0; ok && i < it.n; i++) {
        char ttl[24] = {0};
        uint64_t id;
        if (!lease_record_parse(it.items[i].key.data, it.items[i].key.len, &id) ||
            it.items[i].value.len >= sizeof(ttl))
            continue;
        memcpy(ttl, it.items[i].value.data, it.items[i].value.len);
        uint64_t ttl_ms = strtoull(ttl, NULL, 10);
        /* A fresh TTL for each: its keep-alives went to the last leader. */
        ok = insert(l, id, ttl_ms, now + ttl_ms, -1);
    }
    gauge(s);
    if (ok && l->n > 0)
        log_info("leases: %zu lease(s) read back, each with its whole TTL from now", l->n);
    pthread_mutex_unlock(&l->mu);
    pc_items_free(&it);
    if (!ok)
        log_error("leases: out of memory reading the leases back");
    return ok;
}

pc_rc leases_grant(svc *s, pc_session *ps, uint64_t ttl_ms, uint64_t *id)
{
    leases *l = s->leases;
    uint64_t start, cts;
    pc_conflict c;
    char key[LEASE_RECORD_KEY], val[24];

    pthread_mutex_lock(&l->mu);
    bool full = l->n >= s->cfg.lease_max;
    pthread_mutex_unlock(&l->mu);
    if (full)
        return PC_INVALID;
    if (!svc_timestamp(s, &start))
        return PC_TS_UNAVAILABLE;
    /* The id is the grant's start timestamp: no other grant, on this
     * leader or any other, can have it. */
    lease_record_key(key, start);
    int vn = snprintf(val, sizeof(val), "%llu", (unsigned long long)ttl_ms);
    pc_mutation m = {PC_OP_PUT, {key, sizeof(key)}, {val, (size_t)vn}};
    pc_rc rc = coord_commit_internal(s, ps, start, &m, 1, &cts, &c);
    if (rc != PC_OK)
        return rc;
    pthread_mutex_lock(&l->mu);
    bool ok = insert(l, start, ttl_ms, sessions_now(s->sessions) + ttl_ms, 0);
    gauge(s);
    pthread_mutex_unlock(&l->mu);
    if (!ok) {
        /* Committed but not kept here: the client is told it failed;
         * the next leader reads it back and, with no keep-alive, ends it
         * after its TTL. */
        log_error("leases: out of memory keeping lease %llu", (unsigned long long)start);
        return PC_NOMEM;
    }
    *id = start;
    return PC_OK;
}

pc_rc leases_keepalive(svc *s, uint64_t id, uint64_t *ttl_ms)
{
    leases *l = s->leases;
    uint64_t now = sessions_now(s->sessions);
    pc_rc rc = PC_NOT_FOUND;
    pthread_mutex_lock(&l->mu);
    lease *x = find(l, id);
    /* One that has run out is not brought back: the janitor's next tick
     * ends it (a keep-alive after the deadline is too late, as in etcd). */
    if (x != NULL && !x->ending && now <= lease_end(s, x)) {
        x->deadline_ms = now + x->ttl_ms;
        *ttl_ms = x->ttl_ms;
        rc = PC_OK;
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

lease_hold leases_hold(svc *s, uint64_t id, size_t nputs)
{
    leases *l = s->leases;
    lease_hold h = LEASE_MISSING;
    uint64_t now = sessions_now(s->sessions);
    pthread_mutex_lock(&l->mu);
    lease *x = find(l, id);
    if (x != NULL && !x->ending && now <= lease_end(s, x)) {
        /* Before the count is known, a hold takes the whole room: the
         * count is made under it (leases_count_known). */
        size_t used = x->keys < 0 ? 0 : (size_t)x->keys;
        if (used + x->reserved + nputs > LEASE_MAX_KEYS) {
            h = LEASE_FULL;
        } else {
            x->holds++;
            x->reserved += nputs;
            h = LEASE_HELD;
        }
    }
    pthread_mutex_unlock(&l->mu);
    return h;
}

/* The attachment records of a lease at ts (at most LEASE_MAX_KEYS + 1). */
static pc_rc attachments(svc *s, pc_session *ps, uint64_t id, uint64_t ts, pc_items *it)
{
    char start[LEASE_RECORD_KEY], end[LEASE_RECORD_KEY];
    pc_conflict c;
    lease_attach_range(id, start, end);
    return rd_scan(s, ps, (pc_slice){start, sizeof start}, (pc_slice){end, sizeof end}, ts,
                   LEASE_MAX_KEYS + 1, it, &c);
}

pc_rc leases_count_known(svc *s, pc_session *ps, uint64_t id, uint64_t ts)
{
    leases *l = s->leases;
    pthread_mutex_lock(&l->mu);
    lease *x = find(l, id);
    bool known = x == NULL || x->keys >= 0;
    pthread_mutex_unlock(&l->mu);
    if (known)
        return PC_OK;
    pc_items it = {0};
    pc_rc rc = attachments(s, ps, id, ts, &it);
    if (rc == PC_OK) {
        pthread_mutex_lock(&l->mu);
        if ((x = find(l, id)) != NULL && x->keys < 0)
            x->keys = (long)it.n;
        pthread_mutex_unlock(&l->mu);
    }
    pc_items_free(&it);
    return rc;
}

void leases_release(svc *s, uint64_t id, size_t nputs, size_t added)
{
    leases *l = s->leases;
    pthread_mutex_lock(&l->mu);
    lease *x = find(l, id);
    /* A member that began to lead again read the table back meanwhile
     * (leases_load): the hold is not there any more. */
    if (x != NULL && x->holds > 0 && x->reserved >= nputs) {
        x->holds--;
        x->reserved -= nputs;
        if (x->keys >= 0)
            x->keys += (long)added;
    }
    pthread_cond_broadcast(&l->released);
    pthread_mutex_unlock(&l->mu);
}

/* Mark the lease ending and wait until no put holds it: from then on no
 * attachment to it can commit, so a transaction that starts now sees
 * them all. false: no such lease. */
static bool begin_end(leases *l, uint64_t id)
{
    pthread_mutex_lock(&l->mu);
    lease *x = find(l, id);
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
    return key_cmp(x->key.data, x->key.len, y->key.data, y->key.len);
}

/* One try at the end's transaction. */
static pc_rc end_once(svc *s, pc_session *ps, uint64_t id, size_t *deleted, uint64_t *cts)
{
    uint64_t start;
    pc_items it = {0};
    pc_conflict c;
    char rec[LEASE_RECORD_KEY];
    if (!svc_timestamp(s, &start))
        return PC_TS_UNAVAILABLE;
    pc_rc rc = attachments(s, ps, id, start, &it);
    /* At most: the lease, each attachment, each user key. */
    pc_mutation *m = rc == PC_OK ? calloc(2 * it.n + 1, sizeof(*m)) : NULL;
    char *ekeys = rc == PC_OK ? malloc(it.n * KS_MAX + 1) : NULL;
    size_t n = 0;
    if (rc == PC_OK && (m == NULL || ekeys == NULL))
        rc = PC_NOMEM;
    *deleted = 0;
    if (rc == PC_OK) {
        lease_record_key(rec, id);
        m[n++] = (pc_mutation){PC_OP_DELETE, {rec, sizeof(rec)}, {NULL, 0}};
    }
    for (size_t i = 0; rc == PC_OK && i < it.n; i++) {
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

pc_rc leases_revoke(svc *s, pc_session *ps, uint64_t id, size_t *deleted, uint64_t *commit_ts)
{
    leases *l = s->leases;
    if (!begin_end(l, id))
        return PC_NOT_FOUND;
    pc_rc rc = PC_OK;
    /* A put of one of its keys without the lease may commit between this
     * transaction's start and its commit: a write conflict, and on the next
     * try that key is no longer attached. */
    for (int tries = 0; tries < END_TRIES; tries++) {
        rc = end_once(s, ps, id, deleted, commit_ts);
        if (rc != PC_WRITE_CONFLICT && rc != PC_LOCKED)
            break;
    }
    if (rc == PC_OK) {
        pthread_mutex_lock(&l->mu);
        remove_lease(l, id);
        gauge(s);
        pthread_mutex_unlock(&l->mu);
    }
    return rc;
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
    pc_rc rc = attachments(s, ps, id, ts, &it);
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
    uint64_t now = sessions_now(s->sessions);
    for (;;) {
        /* One at a time, the table unlocked while each ends. */
        uint64_t id = 0;
        pthread_mutex_lock(&l->mu);
        for (size_t i = 0; i < l->n && id == 0; i++)
            if (l->v[i].ending || now > lease_end(s, &l->v[i]))
                id = l->v[i].id;
        pthread_mutex_unlock(&l->mu);
        if (id == 0)
            return;
        size_t deleted = 0;
        uint64_t cts = 0;
        pc_rc rc = leases_revoke(s, ps, id, &deleted, &cts);
        if (rc == PC_OK) {
            metrics_inc(s->m.leases_expired, 1);
            log_info("leases: lease %llu expired: %zu key(s) deleted at %llu",
                     (unsigned long long)id, deleted, (unsigned long long)cts);
        } else if (rc != PC_NOT_FOUND) {
            /* It stays ending: tried again on the next tick. */
            log_warn("leases: lease %llu expired but could not end yet: %s",
                     (unsigned long long)id, pc_rc_name(rc));
            return;
        }
    }
}
