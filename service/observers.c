/*
 * observers.c — notifications over HTTP.
 *
 * Three kinds of records, all in the engine:
 *   notify  'u'key -> commit_ts   set by the commit of any write under an
 *                                 observed prefix, in the same WiredTiger
 *                                 transaction (engine/notify.c); a hint
 *   ack     'a'name'\0'key -> ts  the change an observer last processed;
 *                                 written by the observer's own transaction,
 *                                 so two claimants of one change conflict
 *   reg     'o'name -> prefix     the registrations, committed like data
 *
 * A claim scans only the notify table (never the data), from a random
 * position inside the observer's prefix, wrapping around; keys another
 * claimant holds (the in-memory advisory claim set) are skipped, and after
 * two in a row the scan jumps to a new random position instead of
 * trailing behind that claimant (the paper's answer to "bus clumping").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "coordinator.h"
#include "keyspace.h"
#include "log.h"
#include "actions.h"
#include "observers.h"
#include "reader.h"
#include "timeutil.h"

#define SCAN_BATCH 64
#define JUMPS 4

typedef struct {
    char name[OBS_NAME_MAX + 1];
    char *prefix;
    size_t plen;
} observer;

/* A key held by a claimant: (observer, key). */
typedef struct {
    char name[OBS_NAME_MAX + 1];
    char *key;
    size_t klen;
} held;

struct observers {
    pthread_mutex_t reg_mu;     /* serialises registrations */
    pthread_rwlock_t mu;        /* guards v */
    observer *v;
    size_t n;
    _Atomic uint64_t reloaded_ms; /* observers_match's last read of the store */
    _Atomic uint64_t gen;       /* sets pushed to the engine (push_prefixes) */

    pthread_mutex_t claim_mu;   /* guards the claim set */
    pthread_cond_t work;        /* a commit or a released claim */
    held *h;
    size_t nh, caph;
    atomic_int waiters;
};

observers *observers_new(void)
{
    observers *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return NULL;
    pthread_mutex_init(&o->reg_mu, NULL);
    pthread_rwlock_init(&o->mu, NULL);
    pthread_mutex_init(&o->claim_mu, NULL);
    pthread_cond_init(&o->work, NULL);
    return o;
}

void observers_free(observers *o)
{
    if (o == NULL)
        return;
    for (size_t i = 0; i < o->n; i++)
        free(o->v[i].prefix);
    free(o->v);
    for (size_t i = 0; i < o->nh; i++)
        free(o->h[i].key);
    free(o->h);
    pthread_cond_destroy(&o->work);
    pthread_mutex_destroy(&o->claim_mu);
    pthread_rwlock_destroy(&o->mu);
    pthread_mutex_destroy(&o->reg_mu);
    free(o);
}

bool observers_name_ok(const char *name, size_t len)
{
    if (len == 0 || len > OBS_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static size_t ack_key(char *out, const char *name, const void *key, size_t klen)
{
    size_t n = strlen(name);
    out[0] = KS_ACK;
    memcpy(out + 1, name, n);
    out[1 + n] = '\0';
    memcpy(out + 2 + n, key, klen);
    return 2 + n + klen;
}

/* FNV-1a of a prefix; a set's digest is the sum of its prefixes' (in any
 * order, as each node keeps its registrations in its own). */
static uint64_t prefix_hash(const char *p, size_t len)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return (h ^ len) * 1099511628211ull;
}

/* Tell the engine which user-key prefixes to mark; with o->mu held. */
static void push_prefixes(svc *s)
{
    observers *o = s->obs;
    pc_slice *p = calloc(o->n ? o->n : 1, sizeof(*p));
    char *buf = malloc(o->n * KS_MAX + 1);
    if (p == NULL || buf == NULL) {
        log_error("observers: out of memory");
    } else {
        uint64_t digest = 0;
        for (size_t i = 0; i < o->n; i++) {
            p[i] = (pc_slice){buf + i * KS_MAX, ks_user(buf + i * KS_MAX, o->v[i].prefix, o->v[i].plen)};
            digest += prefix_hash(o->v[i].prefix, o->v[i].plen);
        }
        /* The digest says what the engine marks: when it refused the new
         * set, one no sender has (UINT64_MAX), so this node runs no region
         * call's commit until a set is taken. */
        if (pc_notify_set_prefixes(s->engine, p, o->n) != PC_OK) {
            log_error("observers: cannot set the observed prefixes");
            digest = UINT64_MAX;
        }
        atomic_store(&s->observed_digest, digest);
        atomic_fetch_add(&o->gen, 1);
    }
    free(p);
    free(buf);
}

/* Set (prefix != NULL) or remove an observer in memory; with o->mu held. */
static bool set_observer(observers *o, const char *name, const void *prefix, size_t plen)
{
    size_t i;
    for (i = 0; i < o->n && strcmp(o->v[i].name, name) != 0; i++)
        ;
    if (prefix == NULL) {
        if (i == o->n)
            return false;
        free(o->v[i].prefix);
        o->v[i] = o->v[--o->n];
        return true;
    }
    char *copy = malloc(plen + 1);
    if (copy == NULL)
        return false;
    memcpy(copy, prefix, plen);
    if (i == o->n) {
        observer *v = realloc(o->v, (o->n + 1) * sizeof(*v));
        if (v == NULL) {
            free(copy);
            return false;
        }
        o->v = v;
        o->n++;
        snprintf(o->v[i].name, sizeof(o->v[i].name), "%s", name);
    } else {
        free(o->v[i].prefix);
    }
    o->v[i].prefix = copy;
    o->v[i].plen = plen;
    return true;
}

/* The registrations in it replace the ones in memory: one another
 * leader removed is gone here too. */
/* With gen (not UINT64_MAX), only if no set was pushed since gen was
 * read: a read of the store made before a newer set was taken must not
 * put the older one back. */
static void adopt(svc *s, const pc_items *it, uint64_t gen)
{
    pthread_rwlock_wrlock(&s->obs->mu);
    if (gen != UINT64_MAX && atomic_load(&s->obs->gen) != gen) {
        pthread_rwlock_unlock(&s->obs->mu);
        return;
    }
    for (size_t i = 0; i < s->obs->n; i++)
        free(s->obs->v[i].prefix);
    s->obs->n = 0;
    for (size_t i = 0; i < it->n; i++) {
        char name[OBS_NAME_MAX + 1];
        size_t n = it->items[i].key.len - 1;
        if (n > OBS_NAME_MAX)
            continue;
        memcpy(name, (const char *)it->items[i].key.data + 1, n);
        name[n] = '\0';
        set_observer(s->obs, name, it->items[i].value.data, it->items[i].value.len);
    }
    push_prefixes(s);
    if (gen == UINT64_MAX)
        log_info("observers: %zu registered", s->obs->n);
    else
        log_debug("observers: %zu registered (read again)", s->obs->n);
    pthread_rwlock_unlock(&s->obs->mu);
}

/* observers_load, and with gen the same but only over the set pushed
 * as gen was read (adopt). */
static bool load(svc *s, pc_session *ps, uint64_t gen)
{
    char start[1] = {KS_OBSERVER}, end[1] = {KS_OBSERVER + 1};
    pc_items it = {0};
    pc_conflict c;
    /* Any lock on a registration is a crashed run's: resolved on the way. */
    pc_rc rc = rd_scan(s, ps, (pc_slice){start, 1}, (pc_slice){end, 1}, PC_TS_MAX - 1, 100000,
                       &it, &c);
    if (rc != PC_OK) {
        log_error("observers: cannot read the registrations: %s", pc_rc_name(rc));
        pc_items_free(&it);
        return false;
    }
    adopt(s, &it, gen);
    pc_items_free(&it);
    return true;
}

bool observers_load(svc *s, pc_session *ps)
{
    return load(s, ps, UINT64_MAX);
}

bool observers_reload(svc *s, pc_session *ps)
{
    return load(s, ps, atomic_load(&s->obs->gen));
}

bool observers_match(svc *s, pc_session *ps, uint64_t digest)
{
    if (atomic_load(&s->observed_digest) == digest)
        return true;
    char start[1] = {KS_OBSERVER}, end[1] = {KS_OBSERVER + 1};
    pc_items it = {0};
    pc_conflict c;
    /* At most ten reads a second, whoever asks: a sender that differs for
     * long is refused meanwhile, not answered with scans. */
    uint64_t now = time_mono_ms(), last = atomic_load(&s->obs->reloaded_ms);
    if (now - last < 100 || !atomic_compare_exchange_strong(&s->obs->reloaded_ms, &last, now))
        return false;
    /* As this node applied them (no fence: it need not lead region 1); a
     * lock met leaves the set as it was. A registration under way here
     * (reg_mu held: it may be sending calls) is not waited for, and one
     * pushed while the store is read wins (adopt's gen). */
    if (pthread_mutex_trylock(&s->obs->reg_mu) != 0)
        return false;
    uint64_t gen = atomic_load(&s->obs->gen);
    if (pc_scan(ps, (pc_slice){start, 1}, (pc_slice){end, 1}, PC_TS_MAX - 1, 100000, &it, &c) ==
        PC_OK)
        adopt(s, &it, gen);
    pthread_mutex_unlock(&s->obs->reg_mu);
    pc_items_free(&it);
    return atomic_load(&s->observed_digest) == digest;
}

/* Commit internal writes as a transaction of their own. */
static pc_rc commit_internal(svc *s, pc_session *ps, pc_mutation *m, size_t n)
{
    uint64_t start, cts;
    pc_conflict c;
    if (!svc_timestamp(s, &start))
        return PC_TS_UNAVAILABLE;
    return coord_commit_internal(s, ps, start, m, n, &cts, &c);
}

pc_rc observers_put(svc *s, pc_session *ps, const char *name, const void *prefix, size_t plen,
                    bool *created)
{
    observers *o = s->obs;
    char key[1 + OBS_NAME_MAX];
    size_t klen = 1 + strlen(name);
    key[0] = KS_OBSERVER;
    memcpy(key + 1, name, klen - 1);
    pc_mutation m = {PC_OP_PUT, {key, klen}, {prefix, plen}};

    pthread_mutex_lock(&o->reg_mu);
    pthread_rwlock_rdlock(&o->mu);
    bool full = o->n >= OBS_MAX;
    for (size_t i = 0; full && i < o->n; i++)
        full = strcmp(o->v[i].name, name) != 0; /* replacing is always fine */
    pthread_rwlock_unlock(&o->mu);
    pc_rc rc = full ? PC_INVALID : commit_internal(s, ps, &m, 1);
    if (rc == PC_OK) {
        pthread_rwlock_wrlock(&o->mu);
        size_t before = o->n;
        if (!set_observer(o, name, prefix, plen))
            rc = PC_NOMEM;
        *created = o->n > before;
        push_prefixes(s);
        pthread_rwlock_unlock(&o->mu);
    }
    pthread_mutex_unlock(&o->reg_mu);
    return rc;
}

static bool lookup(observers *o, const char *name, observer *copy, char *prefix_buf);
static void prefix_range(const observer *ob, char *sbuf, pc_slice *start, char *ebuf, pc_slice *end);

pc_rc observers_delete(svc *s, pc_session *ps, const char *name)
{
    observers *o = s->obs;
    char key[1 + OBS_NAME_MAX];
    size_t klen = 1 + strlen(name);
    bool exists = false;
    key[0] = KS_OBSERVER;
    memcpy(key + 1, name, klen - 1);
    pc_mutation m = {PC_OP_DELETE, {key, klen}, {NULL, 0}};

    pthread_mutex_lock(&o->reg_mu);
    pthread_rwlock_rdlock(&o->mu);
    for (size_t i = 0; i < o->n; i++)
        exists |= strcmp(o->v[i].name, name) == 0;
    pthread_rwlock_unlock(&o->mu);
    pc_rc rc = exists ? commit_internal(s, ps, &m, 1) : PC_NOT_FOUND;
    if (rc == PC_OK) {
        observer gone;
        char pbuf[SVC_MAX_KEY + 1], sbuf[KS_MAX + 1], ebuf[KS_MAX + 1];
        pc_slice start, end;
        bool had = lookup(o, name, &gone, pbuf);
        pthread_rwlock_wrlock(&o->mu);
        set_observer(o, name, NULL, 0);
        push_prefixes(s);
        pthread_rwlock_unlock(&o->mu);
        if (had) {
            /* Dirty keys under its prefix that nobody else watches would
             * stay dirty for ever: clear them. */
            pc_items it = {0};
            prefix_range(&gone, sbuf, &start, ebuf, &end);
            if (pc_notify_scan(ps, start, end, start, 1000000, &it) == PC_OK) {
                for (size_t i = 0; i < it.n; i++) {
                    pc_slice user;
                    bool watched = false;
                    if (!ks_is_user(it.items[i].key, &user))
                        continue;
                    pthread_rwlock_rdlock(&o->mu);
                    for (size_t k = 0; k < o->n && !watched; k++)
                        watched = o->v[k].plen <= user.len &&
                                  memcmp(o->v[k].prefix, user.data, o->v[k].plen) == 0;
                    pthread_rwlock_unlock(&o->mu);
                    if (!watched) {
                        act_notify_clear(s, ps, it.items[i].key, UINT64_MAX);
                    }
                }
            }
            pc_items_free(&it);
        }
    }
    pthread_mutex_unlock(&o->reg_mu);
    return rc;
}

/* The change of user key this observer acknowledged (0: none): the
 * latest, or as of the snapshot ts. */
static uint64_t acked_at(svc *s, pc_session *ps, const char *name, const void *key, size_t klen,
                         uint64_t ts)
{
    char ak[1 + OBS_NAME_MAX + 1 + SVC_MAX_KEY];
    pc_slice k = {ak, ack_key(ak, name, key, klen)};
    pc_buf v = {0};
    uint64_t cts, ack = 0;
    pc_conflict c;
    pc_rc rc;
    if (ts == 0) {
        rc = rd_get_latest(s, ps, k, &v, &cts, &c, true);
    } else {
        rc = rd_get(s, ps, k, ts, &v, &cts, &c);
    }
    if (rc == PC_OK) {
        char tmp[24] = {0};
        memcpy(tmp, v.data, v.len < 23 ? v.len : 23);
        ack = strtoull(tmp, NULL, 10);
    }
    pc_buf_free(&v);
    return ack;
}

static uint64_t acked(svc *s, pc_session *ps, const char *name, const void *key, size_t klen)
{
    return acked_at(s, ps, name, key, klen, 0);
}

/* The user-key range of a prefix, as engine keys. */
static void prefix_range(const observer *ob, char *sbuf, pc_slice *start, char *ebuf, pc_slice *end)
{
    char p[SVC_MAX_KEY + 1];
    size_t elen = ob->plen;
    memcpy(p, ob->prefix, ob->plen);
    if (!ks_prefix_end(p, &elen))
        elen = 0;
    ks_user_range(ob->prefix, ob->plen, p, elen, sbuf, start, ebuf, end);
}

static bool lookup(observers *o, const char *name, observer *copy, char *prefix_buf)
{
    bool found = false;
    pthread_rwlock_rdlock(&o->mu);
    for (size_t i = 0; i < o->n && !found; i++) {
        if (strcmp(o->v[i].name, name) == 0) {
            *copy = o->v[i];
            memcpy(prefix_buf, o->v[i].prefix, o->v[i].plen);
            copy->prefix = prefix_buf;
            found = true;
        }
    }
    pthread_rwlock_unlock(&o->mu);
    return found;
}

json_t *observers_list(svc *s, pc_session *ps, codec_enc enc)
{
    observers *o = s->obs;
    json_t *list = json_array();
    size_t n;
    char names[OBS_MAX][OBS_NAME_MAX + 1];

    pthread_rwlock_rdlock(&o->mu);
    n = o->n < OBS_MAX ? o->n : OBS_MAX;
    for (size_t i = 0; i < n; i++)
        snprintf(names[i], sizeof(names[i]), "%s", o->v[i].name);
    pthread_rwlock_unlock(&o->mu);
    int64_t pending_all = 0;
    for (size_t i = 0; i < n; i++) {
        observer ob;
        char pbuf[SVC_MAX_KEY + 1], sbuf[KS_MAX + 1], ebuf[KS_MAX + 1];
        pc_slice start, end;
        pc_items it = {0};
        if (!lookup(o, names[i], &ob, pbuf))
            continue;
        prefix_range(&ob, sbuf, &start, ebuf, &end);
        /* Pending: dirty keys under the prefix this observer has not
         * acknowledged yet (counted up to 100,000). */
        int64_t pending = 0;
        if (pc_notify_scan(ps, start, end, start, 100000, &it) == PC_OK) {
            for (size_t j = 0; j < it.n; j++) {
                pc_slice user;
                if (ks_is_user(it.items[j].key, &user) &&
                    acked(s, ps, ob.name, user.data, user.len) < it.items[j].commit_ts)
                    pending++;
            }
        }
        pc_items_free(&it);
        pending_all += pending;
        json_t *jp = codec_to_json(ob.prefix, ob.plen, enc);
        if (jp == NULL) {
            json_decref(list);
            return NULL;
        }
        json_array_append_new(list, json_pack("{s:s,s:o,s:I}", "name", ob.name, "prefix", jp,
                                               "pending", (json_int_t)pending));
    }
    metrics_set(s->m.notif_pending, pending_all);
    return json_pack("{s:o}", "observers", list);
}

/* ---- the advisory claim set ---- */

static bool is_held(observers *o, const char *name, const void *key, size_t klen)
{
    for (size_t i = 0; i < o->nh; i++)
        if (o->h[i].klen == klen && strcmp(o->h[i].name, name) == 0 &&
            memcmp(o->h[i].key, key, klen) == 0)
            return true;
    return false;
}

/* Hold (name, key) unless somebody does; true if this caller holds it now. */
static bool hold(observers *o, const char *name, const void *key, size_t klen)
{
    bool ok = false;
    pthread_mutex_lock(&o->claim_mu);
    if (!is_held(o, name, key, klen)) {
        if (o->nh == o->caph) {
            size_t cap = o->caph ? o->caph * 2 : 16;
            held *h = realloc(o->h, cap * sizeof(*h));
            if (h != NULL) {
                o->h = h;
                o->caph = cap;
            }
        }
        char *copy = malloc(klen ? klen : 1);
        if (o->nh < o->caph && copy != NULL) {
            memcpy(copy, key, klen);
            snprintf(o->h[o->nh].name, sizeof(o->h[o->nh].name), "%s", name);
            o->h[o->nh].key = copy;
            o->h[o->nh].klen = klen;
            o->nh++;
            ok = true;
        } else {
            free(copy);
        }
    }
    pthread_mutex_unlock(&o->claim_mu);
    return ok;
}

static void release(observers *o, const char *name, const void *key, size_t klen)
{
    pthread_mutex_lock(&o->claim_mu);
    for (size_t i = 0; i < o->nh; i++) {
        if (o->h[i].klen == klen && strcmp(o->h[i].name, name) == 0 &&
            memcmp(o->h[i].key, key, klen) == 0) {
            free(o->h[i].key);
            o->h[i] = o->h[--o->nh];
            break;
        }
    }
    pthread_cond_broadcast(&o->work); /* the key may be claimable again */
    pthread_mutex_unlock(&o->claim_mu);
}

void observers_session_ended(void *arg, txn *t)
{
    svc *s = arg;
    obs_claim *c = t->claim;
    t->claim = NULL;
    release(s->obs, c->name, c->key, c->klen);
    free(c->key);
    free(c);
}

void observers_wake(svc *s)
{
    observers *o = s->obs;
    if (o == NULL || atomic_load(&o->waiters) == 0)
        return;
    pthread_mutex_lock(&o->claim_mu);
    pthread_cond_broadcast(&o->work);
    pthread_mutex_unlock(&o->claim_mu);
}

/* Try to hand out one dirty key: PC_OK with the session, PC_NOT_FOUND
 * when this candidate is not (or no longer) claimable. */
static pc_rc try_claim(svc *s, pc_session *ps, const observer *ob, pc_slice user,
                       uint64_t dirty_ts, codec_enc enc, txn **out, json_t **item)
{
    observers *o = s->obs;
    char ek[KS_MAX];
    pc_buf v = {0};
    uint64_t start, cts = 0;
    pc_conflict c;

    if (acked(s, ps, ob->name, user.data, user.len) >= dirty_ts)
        return PC_NOT_FOUND; /* done already; the hint is stale */
    if (!hold(o, ob->name, user.data, user.len))
        return PC_NOT_FOUND;
    if (!svc_timestamp(s, &start)) {
        release(o, ob->name, user.data, user.len);
        return PC_TS_UNAVAILABLE;
    }
    /* The change handed out is the newest at the claim's snapshot. */
    pc_rc rc = rd_get(s, ps, (pc_slice){ek, ks_user(ek, user.data, user.len)}, start, &v, &cts, &c);
    if (rc == PC_NOT_FOUND && cts == 0)
        cts = dirty_ts; /* deleted (no version left at all) */
    else if (rc != PC_OK && rc != PC_NOT_FOUND) {
        pc_buf_free(&v);
        release(o, ob->name, user.data, user.len);
        return rc == PC_LOCKED ? PC_NOT_FOUND : rc; /* busy: another key */
    }
    /* At most once: the acknowledgment is read in the same snapshot. An
     * observer transaction that committed before it is seen here (nothing
     * to do); one that commits after it overlaps this one, and their two
     * acknowledgment writes conflict, so only one commits. The check above
     * (before the snapshot) only saves work. */
    if (acked_at(s, ps, ob->name, user.data, user.len, start) >= cts) {
        pc_buf_free(&v);
        release(o, ob->name, user.data, user.len);
        return PC_NOT_FOUND;
    }
    /* Not text in text mode: base64, marked on the item; refusing it would
     * leave a text-mode observer unable to get past the key. */
    bool key_b64, value_b64 = false;
    json_t *jk = codec_to_json_marked(user.data, user.len, enc, &key_b64);
    json_t *jv = rc == PC_OK ? codec_to_json_marked(v.data, v.len, enc, &value_b64) : json_null();
    pc_buf_free(&v);
    obs_claim *cl = calloc(1, sizeof(*cl));
    char *kcopy = malloc(user.len);
    txn *t = NULL;
    if (jk == NULL || jv == NULL || cl == NULL || kcopy == NULL ||
        (t = sessions_begin(s->sessions, start, s->cfg.lease_ttl_ms)) == NULL) {
        json_decref(jk);
        json_decref(jv);
        free(cl);
        free(kcopy);
        release(o, ob->name, user.data, user.len);
        return PC_NOMEM;
    }
    t->raft_term = svc_leader_term(s);
    memcpy(kcopy, user.data, user.len);
    snprintf(cl->name, sizeof(cl->name), "%s", ob->name);
    cl->key = kcopy;
    cl->klen = user.len;
    cl->version = cts;
    cl->ack_len = ack_key(cl->ack_key, ob->name, user.data, user.len);
    snprintf(cl->ack_val, sizeof(cl->ack_val), "%llu", (unsigned long long)cts);
    t->claim = cl; /* released when the session ends, however it ends */
    metrics_inc(s->m.notif_claimed, 1);
    *out = t;
    *item = json_pack("{s:o,s:o,s:I,s:{s:s,s:I,s:I}}", "key", jk, "value", jv, "commit_ts",
                      (json_int_t)cts, "txn", "id", t->id, "start_ts", (json_int_t)start,
                      "lease_ttl_ms", (json_int_t)t->lease_ttl_ms);
    if (key_b64)
        json_object_set_new(*item, "key_encoding", json_string("base64"));
    if (value_b64)
        json_object_set_new(*item, "value_encoding", json_string("base64"));
    return PC_OK;
}

/* A random position inside the prefix range: prefix + two random bytes. */
static void random_from(const observer *ob, char *buf, pc_slice *from)
{
    unsigned char r[2] = {0, 0};
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        r[0] = (unsigned char)rand();
    size_t n = ks_user(buf, ob->prefix, ob->plen);
    if (n + 2 <= KS_MAX) {
        buf[n++] = (char)r[0];
        buf[n++] = (char)r[1];
    }
    *from = (pc_slice){buf, n};
}

pc_rc observers_claim(svc *s, pc_session *ps, const char *name, uint64_t wait_ms, codec_enc enc,
                      txn **out, json_t **item, bool *no_observer)
{
    observers *o = s->obs;
    observer ob;
    char pbuf[SVC_MAX_KEY + 1], sbuf[KS_MAX + 1], ebuf[KS_MAX + 1], fbuf[KS_MAX + 2];
    pc_slice start, end, from;
    uint64_t deadline = time_mono_ms() + wait_ms;

    *no_observer = !lookup(o, name, &ob, pbuf);
    if (*no_observer)
        return PC_NOT_FOUND;
    prefix_range(&ob, sbuf, &start, ebuf, &end);
    for (;;) {
        for (int jump = 0; jump < JUMPS; jump++) {
            pc_items it = {0};
            random_from(&ob, fbuf, &from);
            pc_rc rc = pc_notify_scan(ps, start, end, from, SCAN_BATCH, &it);
            if (rc != PC_OK) {
                pc_items_free(&it);
                return rc;
            }
            metrics_inc(s->m.notify_scanned, it.n);
            int behind = 0;
            bool jumped = false;
            for (size_t i = 0; i < it.n; i++) {
                pc_slice user;
                if (!ks_is_user(it.items[i].key, &user))
                    continue;
                pthread_mutex_lock(&o->claim_mu);
                bool taken = is_held(o, name, user.data, user.len);
                pthread_mutex_unlock(&o->claim_mu);
                if (taken) {
                    /* Right behind another claimant: go elsewhere. */
                    if (++behind == 2 && i + 1 < it.n) {
                        jumped = true;
                        break;
                    }
                    continue;
                }
                behind = 0;
                rc = try_claim(s, ps, &ob, user, it.items[i].commit_ts, enc, out, item);
                if (rc != PC_NOT_FOUND) {
                    pc_items_free(&it);
                    return rc;
                }
            }
            bool more = it.more;
            pc_items_free(&it);
            if (!jumped && !more)
                break; /* the whole range was seen */
        }
        /* Nothing now: wait for a commit or a released claim. Waiting holds
         * a handler worker, so at most half of them wait at once; past
         * that a claim answers 204 at once and the client polls again. */
        uint64_t now = time_mono_ms();
        if (now >= deadline)
            return PC_NOT_FOUND;
        if ((uint64_t)atomic_load(&o->waiters) >= (s->cfg.shared.threads + 1) / 2)
            return PC_NOT_FOUND;
        uint64_t pause = deadline - now < 100 ? deadline - now : 100;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + pause * 1000000ull;
        until.tv_sec += (time_t)(ns / 1000000000ull);
        until.tv_nsec = (long)(ns % 1000000000ull);
        atomic_fetch_add(&o->waiters, 1);
        pthread_mutex_lock(&o->claim_mu);
        pthread_cond_timedwait(&o->work, &o->claim_mu, &until);
        pthread_mutex_unlock(&o->claim_mu);
        atomic_fetch_sub(&o->waiters, 1);
    }
}

void observers_committed(svc *s, pc_session *ps, const txn *t)
{
    observers *o = s->obs;
    const obs_claim *c = t->claim;
    char names[OBS_MAX][OBS_NAME_MAX + 1];
    size_t n = 0;
    char ek[KS_MAX];

    metrics_inc(s->m.notif_acked, 1);
    /* Every observer watching the key must have acknowledged. */
    pthread_rwlock_rdlock(&o->mu);
    for (size_t i = 0; i < o->n && n < OBS_MAX; i++)
        if (o->v[i].plen <= c->klen && memcmp(o->v[i].prefix, c->key, o->v[i].plen) == 0)
            snprintf(names[n++], sizeof(names[0]), "%s", o->v[i].name);
    pthread_rwlock_unlock(&o->mu);
    uint64_t upto = c->version;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = strcmp(names[i], c->name) == 0 ? c->version : acked(s, ps, names[i], c->key, c->klen);
        if (a < upto)
            upto = a;
    }
    pc_slice key = {ek, ks_user(ek, c->key, c->klen)};
    pc_rc rc = act_notify_clear(s, ps, key, upto);
    if (rc != PC_OK)
        log_warn("observers: clearing a notify entry: %s", pc_rc_name(rc));
}
