/*
 * A seeded random workload against a plain in-memory model of snapshot
 * isolation: each key's committed versions in commit order.
 *
 * Many transactions are open at once, each with its start_ts and buffered
 * writes (puts of short and long values, deletes); they commit by 2PC or
 * one-phase commit, or are abandoned part-way through their commit as if
 * their coordinator crashed. The model decides what must happen:
 *   - a commit conflicts exactly when one of its keys has a version
 *     committed after its start_ts (first committer wins);
 *   - an abandoned transaction counts as committed once its primary
 *     committed, and never otherwise;
 *   - every get, scan and latest read equals the model's answer.
 * Locks met along the way can only be abandoned ones, and are resolved as
 * a reader would. At the end the store is closed, reopened and read again.
 */
#include "engine_fixture.h"

#define NKEYS 48
#define MAX_OPEN 6
#define OPS 12000
#define MAX_WRITES 5

/* ---- the model ---- */

typedef struct {
    uint64_t commit_ts;
    bool deleted;
    uint8_t *val;
    size_t len;
} version;

typedef struct {
    version *v;
    size_t n, cap;
} history;

static uint8_t key_bytes[NKEYS][8];
static size_t key_len[NKEYS];
static int key_order[NKEYS]; /* key indexes in bytewise order */
static history model[NKEYS];

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static size_t rndn(size_t n) { return (size_t)(rnd() % n); }

static pc_slice key_slice(int i) { return (pc_slice){key_bytes[i], key_len[i]}; }

static int cmp_keys(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return pc_key_cmp(key_bytes[x], key_len[x], key_bytes[y], key_len[y]);
}

/* "k1", "k10".."k19" share prefixes; some keys hold 0x00 and 0xFF bytes. */
static void make_keys(void)
{
    for (int i = 0; i < NKEYS; i++) {
        if (i < 40) {
            key_len[i] = (size_t)snprintf((char *)key_bytes[i], sizeof(key_bytes[i]), "k%d", i);
        } else {
            key_bytes[i][0] = 'k';
            key_bytes[i][1] = i % 2 ? 0x00 : 0xFF;
            key_bytes[i][2] = (uint8_t)(i % 4 < 2 ? 0x00 : 'z');
            key_len[i] = 3 + (size_t)(i % 3);
            for (size_t j = 3; j < key_len[i]; j++)
                key_bytes[i][j] = (uint8_t)(j * 7 + (size_t)i);
        }
        key_order[i] = i;
    }
    qsort(key_order, NKEYS, sizeof(int), cmp_keys);
    for (int i = 1; i < NKEYS; i++)
        assert_int_not_equal(cmp_keys(&key_order[i - 1], &key_order[i]), 0);
}

static void model_add(int key, uint64_t cts, bool deleted, const uint8_t *val, size_t len)
{
    history *h = &model[key];
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 8;
        h->v = realloc(h->v, h->cap * sizeof(*h->v));
        assert_non_null(h->v);
    }
    assert_true(h->n == 0 || h->v[h->n - 1].commit_ts < cts);
    version *v = &h->v[h->n++];
    v->commit_ts = cts;
    v->deleted = deleted;
    v->len = len;
    v->val = malloc(len ? len : 1);
    assert_non_null(v->val);
    if (len)
        memcpy(v->val, val, len);
}

/* The version visible at ts, or NULL. */
static const version *model_at(int key, uint64_t ts)
{
    const history *h = &model[key];
    for (size_t i = h->n; i > 0; i--)
        if (h->v[i - 1].commit_ts <= ts)
            return h->v[i - 1].deleted ? NULL : &h->v[i - 1];
    return NULL;
}

static uint64_t model_newest(int key)
{
    const history *h = &model[key];
    return h->n ? h->v[h->n - 1].commit_ts : 0;
}

static void model_free(void)
{
    for (int k = 0; k < NKEYS; k++) {
        for (size_t i = 0; i < model[k].n; i++)
            free(model[k].v[i].val);
        free(model[k].v);
        memset(&model[k], 0, sizeof(model[k]));
    }
}

/* ---- transactions ---- */

typedef struct {
    int key;
    bool deleted;
    uint8_t val[1600];
    size_t len;
} write_op;

typedef struct {
    uint64_t start_ts;
    write_op w[MAX_WRITES];
    size_t n;
} txn;

static int alive(void *arg, const void *owner, size_t len)
{
    (void)arg;
    return !(len == 9 && memcmp(owner, "abandoned", 9) == 0);
}

static pc_liveness liveness(void)
{
    return (pc_liveness){.now_ms = pc_now_ms(), .owner_alive = alive};
}

typedef struct {
    uint64_t ops, gets, scans, latest, commits_2pc, commits_1pc, conflicts, abandoned,
        resolved;
} counters;
static counters cnt;

/* A lock met: only abandoned transactions leave locks behind, and their
 * owner is dead, so resolving always removes it. */
static void resolve(fx *f, const pc_conflict *c)
{
    pc_liveness live = liveness();
    pc_txn_status st;
    assert_int_equal(fx_resolve_met_lock(f->s, &c->lock, &live, &st), PC_OK);
    cnt.resolved++;
}

static void add_write(txn *t)
{
    int key = (int)rndn(NKEYS);
    write_op *w = NULL;
    for (size_t i = 0; i < t->n; i++)
        if (t->w[i].key == key)
            w = &t->w[i]; /* a later write of the same key replaces it */
    if (w == NULL) {
        if (t->n == MAX_WRITES)
            return;
        w = &t->w[t->n++];
    }
    w->key = key;
    w->deleted = rndn(6) == 0;
    w->len = w->deleted ? 0 : rndn(3) ? rndn(40) : 256 + rndn(1300);
    for (size_t i = 0; i < w->len; i++)
        w->val[i] = (uint8_t)rnd();
}

static void fill_mutations(const txn *t, pc_mutation *m)
{
    for (size_t i = 0; i < t->n; i++) {
        m[i].op = t->w[i].deleted ? PC_OP_DELETE : PC_OP_PUT;
        m[i].key = key_slice(t->w[i].key);
        m[i].value = (pc_slice){t->w[i].val, t->w[i].len};
    }
}

static bool model_conflicts(const txn *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (model_newest(t->w[i].key) > t->start_ts)
            return true;
    return false;
}

static void model_commit(const txn *t, uint64_t cts)
{
    for (size_t i = 0; i < t->n; i++)
        model_add(t->w[i].key, cts, t->w[i].deleted, t->w[i].val, t->w[i].len);
}

/* Prewrite, resolving abandoned locks in the way. */
static pc_rc prewrite(fx *f, const pc_txn_meta *meta, const pc_mutation *m, size_t n)
{
    for (;;) {
        pc_conflict c;
        pc_rc rc = APPLY(f->s, pc_prewrite(f->s, meta, m, n, &c));
        if (rc != PC_LOCKED)
            return rc;
        resolve(f, &c);
    }
}

enum { CRASH_NONE, AFTER_PRIMARY_PREWRITE, AFTER_ALL_PREWRITES, AFTER_PRIMARY_COMMIT, AFTER_HALF };

static void commit_2pc(fx *f, const txn *t, int crash)
{
    pc_mutation m[MAX_WRITES];
    pc_slice keys[MAX_WRITES];
    fill_mutations(t, m);
    for (size_t i = 0; i < t->n; i++)
        keys[i] = m[i].key;
    pc_txn_meta meta = fx_meta(t->start_ts, "");
    meta.primary = keys[0];
    meta.owner = crash ? S("abandoned") : S("live");
    bool conflict = model_conflicts(t);

    pc_rc rc = prewrite(f, &meta, m, 1);
    if (rc == PC_OK && crash == AFTER_PRIMARY_PREWRITE)
        goto abandoned;
    if (rc == PC_OK)
        rc = prewrite(f, &meta, m + 1, t->n - 1);
    if (rc != PC_OK) {
        assert_int_equal(rc, PC_WRITE_CONFLICT);
        assert_true(conflict);
        cnt.conflicts++;
        assert_int_equal(APPLY(f->s, pc_rollback(f->s, keys, t->n, t->start_ts)), PC_OK);
        return;
    }
    assert_false(conflict);
    if (crash == AFTER_ALL_PREWRITES)
        goto abandoned;
    uint64_t cts = fx_ts(f);
    assert_int_equal(APPLY(f->s, pc_commit(f->s, keys, 1, t->start_ts, cts)), PC_OK);
    model_commit(t, cts); /* the commit point */
    if (crash == AFTER_PRIMARY_COMMIT)
        goto abandoned;
    size_t upto = crash == AFTER_HALF ? (t->n - 1) / 2 : t->n - 1;
    assert_int_equal(APPLY(f->s, pc_commit(f->s, keys + 1, upto, t->start_ts, cts)), PC_OK);
    if (crash == AFTER_HALF)
        goto abandoned;
    cnt.commits_2pc++;
    return;
abandoned:
    cnt.abandoned++;
}

static void commit_1pc(fx *f, const txn *t)
{
    pc_mutation m[MAX_WRITES];
    fill_mutations(t, m);
    pc_txn_meta meta = fx_meta(t->start_ts, "");
    meta.primary = m[0].key;
    bool conflict = model_conflicts(t);
    for (;;) {
        pc_conflict c;
        uint64_t cts = 0;
        pc_rc rc = APPLY(f->s, pc_one_pc(f->s, &meta, m, t->n, fx_ts_fn, f, &cts, &c));
        if (rc == PC_LOCKED) {
            resolve(f, &c);
            continue;
        }
        if (rc == PC_WRITE_CONFLICT) {
            assert_true(conflict);
            cnt.conflicts++;
            return;
        }
        assert_int_equal(rc, PC_OK);
        assert_false(conflict);
        model_commit(t, cts);
        cnt.commits_1pc++;
        return;
    }
}

/* ---- reads against the model ---- */

static void check_get(fx *f, int key, uint64_t ts)
{
    pc_buf v = {0};
    uint64_t cts = 0;
    pc_conflict c;
    pc_rc rc;
    while ((rc = pc_get(f->s, key_slice(key), ts, &v, &cts, &c)) == PC_LOCKED)
        resolve(f, &c);
    const version *want = model_at(key, ts);
    if (want == NULL) {
        assert_int_equal(rc, PC_NOT_FOUND);
    } else {
        assert_int_equal(rc, PC_OK);
        assert_int_equal(cts, want->commit_ts);
        assert_int_equal(v.len, want->len);
        if (v.len)
            assert_memory_equal(v.data, want->val, v.len);
    }
    pc_buf_free(&v);
    cnt.gets++;
}

static void check_latest(fx *f, int key)
{
    pc_buf v = {0};
    uint64_t cts = 0;
    pc_liveness live = liveness();
    pc_conflict c;
    pc_rc rc = fx_get_latest(f->s, key_slice(key), &live, &v, &cts, &c);
    const version *want = model_at(key, PC_TS_MAX);
    if (want == NULL) {
        assert_int_equal(rc, PC_NOT_FOUND);
    } else {
        assert_int_equal(rc, PC_OK);
        assert_int_equal(cts, want->commit_ts);
        assert_int_equal(v.len, want->len);
        if (v.len)
            assert_memory_equal(v.data, want->val, v.len);
    }
    pc_buf_free(&v);
    cnt.latest++;
}

static void check_scan(fx *f, pc_slice start, pc_slice end, uint64_t ts, size_t limit)
{
    pc_items it = {0};
    pc_conflict c;
    pc_rc rc;
    while ((rc = pc_scan(f->s, start, end, ts, limit, &it, &c)) == PC_LOCKED)
        resolve(f, &c);
    assert_int_equal(rc, PC_OK);
    size_t got = 0;
    bool more_in_model = false;
    for (int o = 0; o < NKEYS; o++) {
        int k = key_order[o];
        if (start.len && pc_key_cmp(key_bytes[k], key_len[k], start.data, start.len) < 0)
            continue;
        if (end.len && pc_key_cmp(key_bytes[k], key_len[k], end.data, end.len) >= 0)
            break;
        const version *want = model_at(k, ts);
        if (want == NULL)
            continue;
        if (got == limit) {
            more_in_model = true;
            break;
        }
        assert_true(got < it.n);
        const pc_item *item = &it.items[got++];
        assert_int_equal(item->key.len, key_len[k]);
        assert_memory_equal(item->key.data, key_bytes[k], key_len[k]);
        assert_int_equal(item->commit_ts, want->commit_ts);
        assert_int_equal(item->value.len, want->len);
        if (want->len)
            assert_memory_equal(item->value.data, want->val, want->len);
    }
    assert_int_equal(it.n, got);
    if (more_in_model)
        assert_int_equal(it.more, 1);
    pc_items_free(&it);
    cnt.scans++;
}

static pc_slice random_bound(void)
{
    if (rndn(4) == 0)
        return (pc_slice){"", 0};
    return key_slice((int)rndn(NKEYS));
}

static int take_lock(void *arg, const pc_lock_view *l)
{
    pc_lock_copy(arg, l);
    return 1;
}

/* Resolve whatever abandoned locks are left, as the janitor would. */
static void sweep_locks(fx *f)
{
    for (int i = 0; i < 10000; i++) {
        pc_conflict c = {0};
        assert_int_equal(pc_lock_scan(f->s, S(""), 1, take_lock, &c), PC_OK);
        if (c.lock.key.len == 0)
            return;
        resolve(f, &c);
    }
    fail_msg("locks do not go away");
}

static void verify_everything(fx *f)
{
    uint64_t now = fx_ts(f);
    for (int k = 0; k < NKEYS; k++) {
        check_latest(f, k);
        check_get(f, k, now);
        for (size_t i = 0; i < model[k].n; i++) {
            check_get(f, k, model[k].v[i].commit_ts);
            check_get(f, k, model[k].v[i].commit_ts - 1);
        }
    }
    check_scan(f, (pc_slice){"", 0}, (pc_slice){"", 0}, now, NKEYS + 1);
}

static void run_workload(fx *f, uint64_t seed)
{
    txn open[MAX_OPEN];
    size_t nopen = 0;

    rng_state = seed;
    memset(&cnt, 0, sizeof(cnt));
    make_keys();
    for (cnt.ops = 0; cnt.ops < OPS; cnt.ops++) {
        size_t r = rndn(100);
        if (r < 12 || nopen == 0) {
            if (nopen < MAX_OPEN) {
                memset(&open[nopen], 0, sizeof(open[nopen]));
                open[nopen++].start_ts = fx_ts(f);
            }
        } else if (r < 40) {
            add_write(&open[rndn(nopen)]);
        } else if (r < 52) {
            size_t i = rndn(nopen);
            if (open[i].n > 0) {
                if (rndn(4) == 0)
                    commit_1pc(f, &open[i]);
                else
                    commit_2pc(f, &open[i], rndn(10) == 0 ? 1 + (int)rndn(4) : CRASH_NONE);
            }
            open[i] = open[--nopen];
        } else if (r < 55) {
            size_t i = rndn(nopen); /* given up before commit */
            open[i] = open[--nopen];
        } else if (r < 72) {
            check_get(f, (int)rndn(NKEYS), 1 + rndn(f->ts));
        } else if (r < 80) {
            /* Snapshot of an open transaction: what it would read. */
            check_get(f, (int)rndn(NKEYS), open[rndn(nopen)].start_ts);
        } else if (r < 90) {
            check_scan(f, random_bound(), random_bound(), 1 + rndn(f->ts), 1 + rndn(NKEYS));
        } else {
            check_latest(f, (int)rndn(NKEYS));
        }
    }
    print_message("seed %llu, ops %llu: gets %llu, scans %llu, latest %llu, 2pc %llu, 1pc %llu, "
                  "conflicts %llu, abandoned %llu, locks resolved %llu\n",
                  (unsigned long long)seed, (unsigned long long)cnt.ops,
                  (unsigned long long)cnt.gets,
                  (unsigned long long)cnt.scans, (unsigned long long)cnt.latest,
                  (unsigned long long)cnt.commits_2pc, (unsigned long long)cnt.commits_1pc,
                  (unsigned long long)cnt.conflicts, (unsigned long long)cnt.abandoned,
                  (unsigned long long)cnt.resolved);
    /* The workload must have exercised what it claims to. */
    assert_true(cnt.commits_2pc > 100 && cnt.commits_1pc > 30 && cnt.conflicts > 10 &&
                cnt.abandoned > 10 && cnt.resolved > 5);

    sweep_locks(f);
    assert_table(f, "lock", "");
    verify_everything(f);
    /* Closed and reopened: the same answers. */
    fx_reopen(f);
    verify_everything(f);
    model_free();
}

static void seed_1(void **state) { run_workload(*state, 88172645463325252ull); }
static void seed_2(void **state) { run_workload(*state, 1234567); }
static void seed_3(void **state) { run_workload(*state, 0x9e3779b97f4a7c15ull); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(seed_1, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(seed_2, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(seed_3, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("engine: random workload vs model", tests, NULL, NULL);
}
