/*
 * engine_fixture.h — what the engine's unit tests share: a fresh engine in
 * a temporary directory, a counter standing in for the oracle, APPLY (an
 * action run as a single node runs it: proposed, applied, flushed),
 * short wrappers for the actions and for the service's resolution of a
 * met lock (two actions) and its latest read, and a dump of the
 * data/lock/write tables in the paper's notation so a test can assert a
 * table's exact contents.
 *
 * Header-only (static functions): each test file is its own program.
 */
#ifndef ENGINE_FIXTURE_H
#define ENGINE_FIXTURE_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine_replica.h"
#include "internal.h"

typedef struct {
    char dir[256];
    pc_engine *e;
    pc_session *s;
    uint64_t ts; /* the stand-in oracle */
} fx;

static inline pc_slice S(const char *str)
{
    return (pc_slice){str, strlen(str)};
}

static inline void fx_rm_rf(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static inline void fx_open_dir(fx *f)
{
    pc_engine_config cfg = {.dir = f->dir, .sync = 1, .cache_size = "64MB"};
    assert_int_equal(pc_engine_open(&cfg, &f->e), PC_OK);
    assert_int_equal(pc_session_open(f->e, &f->s), PC_OK);
}

static inline fx *fx_new(void)
{
    fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof(f->dir), "%s/pc-engine-XXXXXX", tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    f->ts = 1;
    fx_open_dir(f);
    return f;
}

static inline void fx_close_engine(fx *f)
{
    pc_session_close(f->s);
    pc_engine_close(f->e);
    f->s = NULL;
    f->e = NULL;
}

static inline void fx_reopen(fx *f)
{
    fx_close_engine(f);
    fx_open_dir(f);
}

static inline void fx_free(fx *f)
{
    if (f->e != NULL)
        fx_close_engine(f);
    fx_rm_rf(f->dir);
    free(f);
}

static inline int fx_setup(void **state)
{
    *state = fx_new();
    return 0;
}

static inline int fx_teardown(void **state)
{
    fx_free(*state);
    return 0;
}

static inline uint64_t fx_ts(fx *f)
{
    return ++f->ts;
}

static inline int fx_ts_fn(void *arg, uint64_t *ts)
{
    *ts = fx_ts(arg);
    return 0;
}

static inline pc_txn_meta fx_meta(uint64_t start_ts, const char *primary)
{
    pc_txn_meta m = {.start_ts = start_ts, .primary = S(primary), .owner = S("test-owner"),
                     .wall_ms = pc_now_ms(), .ttl_ms = 60000};
    return m;
}

static inline pc_mutation PUT(const char *k, const char *v)
{
    return (pc_mutation){.op = PC_OP_PUT, .key = S(k), .value = S(v)};
}

static inline pc_mutation DEL(const char *k)
{
    return (pc_mutation){.op = PC_OP_DELETE, .key = S(k)};
}

/* An action that may write only proposes (engine.h): APPLY(s, action)
 * runs it the way a single node does (service/replica.c around its local
 * replicator, service/replicator_local.c): into a batch of its own, which
 * is then applied as the store's next index and flushed, and only then
 * are the action's latches (and the commits in flight they hold) let go.
 * Its result is the action's, or the apply's or flush's failure. One
 * mutex orders the applies of every thread, as the replicator's one
 * thread does. */
static pthread_mutex_t fx_apply_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local pc_buf fx_batch;

static inline void fx_propose(pc_session *s)
{
    assert_null(s->propose); /* APPLY does not nest */
    fx_batch.len = 0;
    pc_session_propose(s, &fx_batch);
}

/* Apply a batch as the store's next index and flush it. */
static inline pc_rc fx_apply_next(pc_session *s, const void *batch, size_t len)
{
    uint64_t index = 0;
    pthread_mutex_lock(&fx_apply_mu);
    pc_rc rc = pc_applied_index(s, &index);
    if (rc == PC_OK)
        rc = pc_apply_batch(s, batch, len, index + 1);
    if (rc == PC_OK)
        rc = pc_sync(s);
    pthread_mutex_unlock(&fx_apply_mu);
    return rc;
}

static inline pc_rc fx_apply(pc_session *s, pc_rc rc)
{
    pc_latches *held = pc_session_take_latches(s);
    pc_session_propose(s, NULL);
    if (fx_batch.len > 0) {
        pc_rc a = fx_apply_next(s, fx_batch.data, fx_batch.len);
        if (a != PC_OK)
            rc = a;
    }
    pc_latches_release(held);
    pc_buf_free(&fx_batch);
    return rc;
}

#define APPLY(s, action) (fx_propose(s), fx_apply((s), (action)))

/* The same for pc_one_pc_blind, which answers in its writes. */
#define APPLY_BLIND(s, call) ((void)(fx_propose(s), (call), fx_apply((s), PC_OK)))

/* Garbage collection as the janitor runs it (service/janitor.c): the
 * safe point applied first, then each part applied before the next. */
static inline pc_rc fx_gc(pc_session *s, uint64_t safe_point, pc_gc_stats *st,
                          uint64_t *applied)
{
    pc_gc_stats scratch;
    pc_gc_walk *walk = NULL;
    bool done = false;

    st = st != NULL ? st : &scratch;
    memset(st, 0, sizeof(*st));
    pc_rc rc = APPLY(s, pc_gc_begin(s, safe_point, applied, &walk));
    while (rc == PC_OK && walk != NULL && !done)
        rc = APPLY(s, pc_gc_next(s, walk, st, &done));
    pc_gc_end(walk);
    return rc;
}

/* Prewrite and commit one key (a one-key 2PC transaction). */
static inline void fx_put_committed(fx *f, const char *key, const char *value, uint64_t start,
                                    uint64_t commit)
{
    pc_txn_meta t = fx_meta(start, key);
    pc_mutation m = PUT(key, value);
    pc_slice k = S(key);
    assert_int_equal(APPLY(f->s, pc_prewrite(f->s, &t, &m, 1, NULL)), PC_OK);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, &k, 1, start, commit)), PC_OK);
}

/* Snapshot read of a string value: returns rc; value copied to out. */
static inline pc_rc fx_get(fx *f, const char *key, uint64_t ts, char *out, size_t cap)
{
    pc_buf v = {0};
    uint64_t cts = 0;
    pc_conflict c;
    pc_rc rc = pc_get(f->s, S(key), ts, &v, &cts, &c);
    if (out != NULL && cap > 0) {
        size_t n = rc == PC_OK ? (v.len < cap - 1 ? v.len : cap - 1) : 0;
        if (n)
            memcpy(out, v.data, n);
        out[n] = '\0';
    }
    pc_buf_free(&v);
    return rc;
}

/* A one-phase put of key (its value: the key, then "v") at start,
 * committed at start + 1, or with lock_only a prewrite that leaves its
 * lock: on s as it is (proposing into a batch, or not). */
static uint64_t fx_commit_at;

static inline int fx_commit_ts(void *arg, uint64_t *ts)
{
    (void)arg;
    *ts = fx_commit_at;
    return 0;
}

static inline pc_rc fx_write_key(pc_session *s, const char *key, uint64_t start, bool lock_only)
{
    char value[64];
    snprintf(value, sizeof value, "%sv", key);
    pc_txn_meta t = fx_meta(start, key);
    pc_mutation m = PUT(key, value);
    uint64_t cts;
    fx_commit_at = start + 1;
    return lock_only ? pc_prewrite(s, &t, &m, 1, NULL)
                     : pc_one_pc(s, &t, &m, 1, fx_commit_ts, NULL, &cts, NULL);
}

/* key's value read at 1000 is want (NULL: there is none). */
static inline void fx_value_is(fx *f, const char *key, const char *want)
{
    char v[64];
    pc_rc rc = fx_get(f, key, 1000, v, sizeof v);
    if (want == NULL) {
        assert_int_equal(rc, PC_NOT_FOUND);
        return;
    }
    assert_int_equal(rc, PC_OK);
    assert_string_equal(v, want);
}

/* Whether keys a and b hash to different latch slots (latch.c), so that
 * holding one's latch does not hold the other's. */
static inline bool fx_latch_apart(const char *a, const char *b)
{
    pc_latch_set sa, sb;
    pc_latch_set_clear(&sa);
    pc_latch_set_add(&sa, a, strlen(a));
    pc_latch_set_clear(&sb);
    pc_latch_set_add(&sb, b, strlen(b));
    return !pc_latch_set_covers(&sa, &sb);
}

/* What the service does with a lock a reader or writer met
 * (service/resolve.c), on one session: the
 * primary's status, then, once the primary committed or was rolled back,
 * the key. PC_OK: the lock is gone; PC_LOCKED: its owner is alive (st says
 * until when). */
static inline pc_rc fx_resolve_met_lock(pc_session *s, const pc_lock_view *lock,
                                        const pc_liveness *live, pc_txn_status *st)
{
    pc_rc rc = APPLY(s, pc_check_txn_status(s, lock->primary, lock->start_ts, live, st));
    if (rc != PC_OK)
        return rc;
    if (st->state == PC_TXN_LOCKED)
        return PC_LOCKED;
    return APPLY(s, pc_resolve_lock(s, lock->key, lock->start_ts,
                                    st->state == PC_TXN_COMMITTED ? st->commit_ts : 0));
}

/* A latest read as the service makes it (service/reader.c rd_get_latest,
 * without its waits): a lock met is resolved and the key read again; one
 * whose owner is alive is stepped over. */
static inline pc_rc fx_get_latest(pc_session *s, pc_slice key, const pc_liveness *live,
                                  pc_buf *value, uint64_t *commit_ts, pc_conflict *c)
{
    pc_txn_status st;
    bool step_over = false;
    for (int round = 0; round < 8; round++) {
        pc_rc rc = pc_get_latest(s, key, step_over, value, commit_ts, c);
        if (rc != PC_LOCKED || c->lock.start_ts == 0)
            return rc;
        rc = fx_resolve_met_lock(s, &c->lock, live, &st);
        if (rc != PC_OK && rc != PC_LOCKED)
            return rc;
        step_over = rc == PC_LOCKED;
    }
    return pc_get_latest(s, key, true, value, commit_ts, c);
}

/* Append "fmt" to a dump string. */
static inline void fx_cat(char *dst, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(dst);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst + len, cap - len, fmt, ap);
    va_end(ap);
}

static inline void fx_printable(char *dst, size_t cap, const void *p, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n && j + 5 < cap; i++) {
        unsigned char ch = ((const unsigned char *)p)[i];
        if (ch >= 32 && ch < 127)
            dst[j++] = (char)ch;
        else
            j += (size_t)snprintf(dst + j, cap - j, "\\x%02x", ch);
    }
    dst[j] = '\0';
}

/*
 * Dump one table, one entry per line, newest version first:
 *   data   "Bob@7=$3"
 *   lock   "Bob@7 primary=Bob put short=$3"
 *   write  "Bob@8 put start=7"   "Bob@9 rollback start=9"
 */
static inline void fx_dump(fx *f, const char *table, char *out, size_t cap)
{
    WT_CURSOR *c = strcmp(table, "data") == 0   ? f->s->data
                   : strcmp(table, "lock") == 0 ? f->s->lock
                                                : f->s->write;
    WT_ITEM k, v;
    char a[256], b[256];
    int ret;

    out[0] = '\0';
    assert_int_equal(c->reset(c), 0);
    assert_int_equal(f->s->wt->begin_transaction(f->s->wt, NULL), 0);
    while ((ret = c->next(c)) == 0) {
        assert_int_equal(c->get_key(c, &k), 0);
        assert_int_equal(c->get_value(c, &v), 0);
        if (c == f->s->lock) {
            pc_lock_rec l;
            assert_int_equal(pc_lock_decode(v.data, v.size, &l), PC_OK);
            fx_printable(a, sizeof(a), k.data, k.size);
            fx_printable(b, sizeof(b), l.primary.data, l.primary.len);
            fx_cat(out, cap, "%s@%llu primary=%s %s", a, (unsigned long long)l.start_ts, b,
                   l.op == PC_OP_PUT ? "put" : "delete");
            if (l.has_value) {
                fx_printable(b, sizeof(b), l.value.data, l.value.len);
                fx_cat(out, cap, " short=%s", b);
            }
            fx_cat(out, cap, "\n");
            continue;
        }
        uint8_t ukey[PC_KEY_MAX];
        size_t ulen;
        uint64_t ts;
        assert_int_equal(pc_vkey_decode(k.data, k.size, ukey, &ulen, &ts), 0);
        fx_printable(a, sizeof(a), ukey, ulen);
        if (c == f->s->data) {
            /* Long values: their first bytes and their size. */
            fx_printable(b, sizeof(b), v.data, v.size > 8 ? 8 : v.size);
            if (v.size > 8)
                fx_cat(b, sizeof(b), "..(%zu)", v.size);
            fx_cat(out, cap, "%s@%llu=%s\n", a, (unsigned long long)ts, b);
            continue;
        }
        pc_write_rec w;
        assert_int_equal(pc_write_decode(v.data, v.size, &w), PC_OK);
        static const char *types[] = {"?", "put", "delete", "rollback"};
        fx_cat(out, cap, "%s@%llu %s start=%llu", a, (unsigned long long)ts, types[w.type],
               (unsigned long long)w.start_ts);
        if (w.has_value) {
            fx_printable(b, sizeof(b), w.value.data, w.value.len);
            fx_cat(out, cap, " short=%s", b);
        }
        fx_cat(out, cap, "\n");
    }
    assert_int_equal(ret, WT_NOTFOUND);
    assert_int_equal(c->reset(c), 0);
    assert_int_equal(f->s->wt->rollback_transaction(f->s->wt, NULL), 0);
}

#define assert_table(f, table, expected)                                                         \
    do {                                                                                         \
        char dump_[8192];                                                                        \
        fx_dump((f), (table), dump_, sizeof(dump_));                                             \
        assert_string_equal(dump_, (expected));                                                  \
    } while (0)

#endif
