/*
 * store.c — WiredTiger plumbing: the connection and its tables, one session
 * (with its cursors, opened once) per thread, and the runner that executes
 * an action as one snapshot transaction, retrying on WT_ROLLBACK.
 *
 * WT_ROLLBACK means two transactions updated the same WiredTiger key at
 * once: it is WiredTiger's first-committer-wins, and the loser simply runs
 * its action again on a fresh snapshot, where it will see the winner's
 * lock or write and answer accordingly.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "internal.h"

/* meta holds the engine's own settings that must survive a restart (the
 * GC safe point, snapshots.c). */
const char *const pc_tables[PC_NTABLES] = {"table:data", "table:lock", "table:write",
                                           "table:notify", "table:meta"};

const char *pc_rc_name(pc_rc rc)
{
    switch (rc) {
    case PC_OK: return "ok";
    case PC_NOT_FOUND: return "not_found";
    case PC_WRITE_CONFLICT: return "write_conflict";
    case PC_LOCKED: return "key_locked";
    case PC_ROLLED_BACK: return "rolled_back";
    case PC_COMMITTED: return "committed";
    case PC_LOCK_MISSING: return "lock_missing";
    case PC_TS_UNAVAILABLE: return "ts_unavailable";
    case PC_INVALID: return "invalid";
    case PC_NOMEM: return "nomem";
    case PC_ERROR: return "error";
    case PC_SYNC_FAILED: return "sync_failed";
    case PC_NOT_LEADER: return "not_leader";
    case PC_UNAVAILABLE: return "unavailable";
    case PC_PANIC: return "panic";
    case PC_RETRY: return "retry";
    }
    return "unknown";
}

uint64_t pc_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

bool pc_key_ok(pc_slice k)
{
    return k.len > 0 && k.len <= PC_KEY_MAX && k.data != NULL;
}

pc_rc pc_wt_error(pc_session *s, int ret, const char *what)
{
    if (ret == WT_ROLLBACK)
        return PC_RETRY;
    if (ret == WT_NOTFOUND)
        return PC_NOT_FOUND;
    if (ret == ENOMEM)
        return PC_NOMEM;
    const char *why = s && s->wt ? s->wt->strerror(s->wt, ret) : wiredtiger_strerror(ret);
    pc_log(s != NULL ? s->e : NULL, PC_LOG_ERROR, "%s: %s", what, why);
    if (s != NULL && pc_wt_fatal(ret)) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s: %s", what, why);
        pc_fatal(s->e, msg);
        return PC_PANIC;
    }
    return PC_ERROR;
}

pc_rc pc_session_open(pc_engine *e, pc_session **out)
{
    pc_session *s;
    WT_CURSOR **cursors[PC_NTABLES];
    int ret;

    *out = NULL;
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return PC_NOMEM;
    s->e = e;
    if (pc_slot_take(s) != PC_OK) {
        free(s);
        return PC_ERROR;
    }
    /* Snapshot isolation is what makes an action a "row transaction". */
    if ((ret = e->conn->open_session(e->conn, NULL, "isolation=snapshot", &s->wt)) != 0) {
        s->wt = NULL;
        pc_rc rc = pc_wt_error(s, ret, "open_session");
        pc_slot_give_back(s);
        free(s);
        return rc == PC_PANIC || rc == PC_NOMEM ? rc : PC_ERROR;
    }
    cursors[0] = &s->data;
    cursors[1] = &s->lock;
    cursors[2] = &s->write;
    cursors[3] = &s->notify;
    cursors[4] = &s->meta;
    for (size_t i = 0; i < PC_NTABLES; i++) {
        if ((ret = s->wt->open_cursor(s->wt, pc_tables[i], NULL, NULL, cursors[i])) != 0) {
            pc_rc rc = pc_wt_error(s, ret, "open_cursor");
            pc_session_close(s);
            return rc == PC_PANIC ? rc : PC_ERROR;
        }
    }
    pc_rc rc = pc_slot_load(s);
    if (rc != PC_OK) {
        pc_session_close(s);
        return rc;
    }
    *out = s;
    return PC_OK;
}

void pc_session_close(pc_session *s)
{
    if (s == NULL)
        return;
    pc_session_release_latches(s); /* a caller that never took them */
    /* Closing the session closes its cursors. */
    int ret = s->wt->close(s->wt, NULL);
    if (ret != 0)
        pc_log(s->e, PC_LOG_ERROR, "session close: %s", wiredtiger_strerror(ret));
    pc_buf_free(&s->scratch);
    pc_slot_give_back(s);
    free(s);
}

/* ---- the store's highest timestamp: one meta row per session slot
 * (ts_floor.c explains) ---- */

#define ROW_MAX 32

static size_t row_key(char *out, uint32_t slot)
{
    return (size_t)snprintf(out, ROW_MAX, PC_TS_ROW_PREFIX "%04u", (unsigned)slot);
}

void pc_ts_max_raise(pc_engine *e, uint64_t ts)
{
    uint64_t cur = atomic_load(&e->ts_max);
    while (cur < ts && !atomic_compare_exchange_weak(&e->ts_max, &cur, ts))
        ;
}

/* ---- session slots ---- */

pc_rc pc_slot_take(pc_session *s)
{
    pc_engine *e = s->e;
    pc_rc rc = PC_ERROR;
    pthread_mutex_lock(&e->slot_mu);
    for (uint32_t i = 0; i < PC_SLOTS; i++) {
        if (!e->slot_used[i]) {
            e->slot_used[i] = true;
            s->slot = i;
            rc = PC_OK;
            break;
        }
    }
    pthread_mutex_unlock(&e->slot_mu);
    if (rc != PC_OK)
        pc_log(e, PC_LOG_ERROR, "more than %d sessions", PC_SLOTS);
    return rc;
}

void pc_slot_give_back(pc_session *s)
{
    pthread_mutex_lock(&s->e->slot_mu);
    s->e->slot_used[s->slot] = false;
    pthread_mutex_unlock(&s->e->slot_mu);
}

/* ---- the rows ---- */

static pc_rc slot_load_body(pc_session *s, void *arg)
{
    char k[ROW_MAX];
    WT_ITEM v;
    (void)arg;
    pc_rc rc = pc_cursor_get(s, s->meta, k, row_key(k, s->slot), &v);
    if (rc == PC_NOT_FOUND) {
        s->ts_stored = 0;
        return PC_OK;
    }
    if (rc != PC_OK)
        return rc;
    if (v.size != 8)
        return PC_ERROR;
    s->ts_stored = pc_get_be64(v.data);
    return PC_OK;
}

pc_rc pc_slot_load(pc_session *s)
{
    return pc_run_txn(s, slot_load_body, NULL);
}

pc_rc pc_ts_row_put(pc_session *s)
{
    char k[ROW_MAX];
    uint8_t v[8];
    pc_put_be64(v, s->txn_ts);
    return pc_cursor_put(s, s->meta, k, row_key(k, s->slot), v, sizeof(v));
}

void pc_ts_row_committed(pc_session *s)
{
    s->ts_stored = s->txn_ts;
    pc_ts_max_raise(s->e, s->txn_ts);
}

/* Short exponential backoff between retries of a conflicting transaction. */
static void retry_pause(int attempt)
{
    if (attempt < 4) {
        sched_yield();
        return;
    }
    long us = 10L << (attempt < 10 ? attempt - 4 : 6); /* 10 us .. 640 us */
    struct timespec t = {0, us * 1000};
    nanosleep(&t, NULL);
}

/* Cursors keep their position across transactions: reset them so that the
 * next action starts unpositioned (a next() from the first key) and pins
 * no page in the meantime. */
static pc_rc reset_cursors(pc_session *s)
{
    WT_CURSOR *all[PC_NTABLES] = {s->data, s->lock, s->write, s->notify, s->meta};
    for (size_t i = 0; i < PC_NTABLES; i++) {
        int ret = all[i]->reset(all[i]);
        if (ret != 0)
            return pc_wt_error(s, ret, "cursor reset");
    }
    return PC_OK;
}

/* A proposing session (batch.c): the action read the store and wrote into
 * the batch; its transaction wrote nothing and is rolled back. The timestamp
 * floor goes into the batch for the appliers. On failure the batch loses
 * what this attempt added. */
static pc_rc finish_proposal(pc_session *s, pc_rc rc, pc_batch_mark mark)
{
    if (rc == PC_OK && s->txn_ts > 0)
        rc = pc_batch_raise_ts(s->propose, s->txn_ts);
    if (rc != PC_OK)
        pc_batch_rewind(s->propose, mark);
    pc_rc reset = reset_cursors(s);
    int ret = s->wt->rollback_transaction(s->wt, NULL);
    if (ret != 0)
        return pc_wt_error(s, ret, "rollback_transaction");
    return rc == PC_OK ? reset : rc;
}

pc_rc pc_run_txn(pc_session *s, pc_txn_body body, void *arg)
{
    for (int attempt = 0; attempt < 10000; attempt++) {
        int ret = s->wt->begin_transaction(s->wt, NULL);
        if (ret != 0)
            return pc_wt_error(s, ret, "begin_transaction");
        s->txn_ts = 0;
        pc_batch_mark mark = s->propose ? pc_batch_mark_of(s->propose) : (pc_batch_mark){0, 0};
        pc_rc rc = body(s, arg);
        if (s->propose != NULL) {
            if ((rc = finish_proposal(s, rc, mark)) != PC_RETRY)
                return rc;
            retry_pause(attempt);
            continue;
        }
        /* The store's highest timestamp commits with what it covers. */
        bool new_max = rc == PC_OK && s->txn_ts > s->ts_stored;
        if (new_max)
            rc = pc_ts_row_put(s);
        pc_rc reset = reset_cursors(s);
        if (rc == PC_OK && reset != PC_OK)
            rc = reset;
        if (rc == PC_OK) {
            /* A failed commit has rolled the transaction back. */
            if ((ret = s->wt->commit_transaction(s->wt, NULL)) == 0) {
                if (new_max)
                    pc_ts_row_committed(s);
                return PC_OK;
            }
            rc = pc_wt_error(s, ret, "commit_transaction");
        } else if ((ret = s->wt->rollback_transaction(s->wt, NULL)) != 0) {
            pc_rc err = pc_wt_error(s, ret, "rollback_transaction");
            return err == PC_PANIC ? PC_PANIC : PC_ERROR;
        }
        if (rc != PC_RETRY)
            return rc;
        retry_pause(attempt);
    }
    pc_log(s->e, PC_LOG_ERROR, "transaction kept conflicting, giving up");
    return PC_ERROR;
}

pc_rc pc_cursor_seek_ge(pc_session *s, WT_CURSOR *c, const void *k, size_t klen)
{
    WT_ITEM item = {.data = k, .size = klen};
    int exact, ret;

    c->set_key(c, &item);
    if ((ret = c->search_near(c, &exact)) != 0)
        return pc_wt_error(s, ret, "search_near");
    if (exact < 0 && (ret = c->next(c)) != 0)
        return pc_wt_error(s, ret, "cursor next");
    return PC_OK;
}

pc_rc pc_cursor_get(pc_session *s, WT_CURSOR *c, const void *k, size_t klen, WT_ITEM *v)
{
    WT_ITEM item = {.data = k, .size = klen};
    int ret;

    c->set_key(c, &item);
    if ((ret = c->search(c)) != 0)
        return pc_wt_error(s, ret, "search");
    if ((ret = c->get_value(c, v)) != 0)
        return pc_wt_error(s, ret, "get_value");
    return PC_OK;
}

void pc_session_propose(pc_session *s, pc_buf *batch)
{
    /* Latches the caller did not take: it keeps proposals apart itself. */
    if (batch == NULL)
        pc_session_release_latches(s);
    s->propose = batch;
}

/* A table's index in a batch (batch.c), or -1 for the meta table, which
 * only the applier writes. */
static int batch_table(const pc_session *s, const WT_CURSOR *c)
{
    return c == s->data ? 0 : c == s->lock ? 1 : c == s->write ? 2 : c == s->notify ? 3 : -1;
}

/* A write in propose mode: into the batch. A meta row is refused: the
 * applier owns the meta table (the GC safe point is proposed as an
 * operation of its own, RAISE_SAFE_POINT). */
static pc_rc propose_write(pc_session *s, WT_CURSOR *c, const void *k, size_t klen,
                           const void *v, size_t vlen, bool del)
{
    int t = batch_table(s, c);
    if (t < 0) {
        pc_log(s->e, PC_LOG_ERROR, "a meta row cannot be proposed yet (DESIGN §4.10)");
        return PC_INVALID;
    }
    return del ? pc_batch_del(s->propose, t, k, klen) : pc_batch_put(s->propose, t, k, klen, v, vlen);
}

pc_rc pc_cursor_put(pc_session *s, WT_CURSOR *c, const void *k, size_t klen, const void *v,
                    size_t vlen)
{
    WT_ITEM key = {.data = k, .size = klen}, val = {.data = v, .size = vlen};
    int ret;

    if (s->propose != NULL)
        return propose_write(s, c, k, klen, v, vlen, false);
    c->set_key(c, &key);
    c->set_value(c, &val);
    if ((ret = c->insert(c)) != 0)
        return pc_wt_error(s, ret, "insert");
    return PC_OK;
}

/* Removing a key that is not there is not an error. */
pc_rc pc_cursor_del(pc_session *s, WT_CURSOR *c, const void *k, size_t klen)
{
    WT_ITEM key = {.data = k, .size = klen};
    int ret;

    if (s->propose != NULL)
        return propose_write(s, c, k, klen, NULL, 0, true);
    c->set_key(c, &key);
    ret = c->remove(c);
    if (ret != 0 && ret != WT_NOTFOUND)
        return pc_wt_error(s, ret, "remove");
    return PC_OK;
}
