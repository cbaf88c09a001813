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
static const char *const TABLES[] = {"table:data", "table:lock", "table:write", "table:notify",
                                     "table:meta"};
#define NTABLES (sizeof(TABLES) / sizeof(TABLES[0]))
#define TABLE_FORMAT "key_format=u,value_format=u"

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
    fprintf(stderr, "engine: %s: %s\n", what,
            s && s->wt ? s->wt->strerror(s->wt, ret) : wiredtiger_strerror(ret));
    return PC_ERROR;
}

pc_rc pc_engine_open(const pc_engine_config *cfg, pc_engine **out)
{
    char conf[512];
    pc_engine *e;
    WT_SESSION *ws = NULL;
    int ret;

    *out = NULL;
    if (cfg == NULL || cfg->dir == NULL || cfg->dir[0] == '\0')
        return PC_INVALID;
    if (mkdir(cfg->dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "engine: cannot create %s: %s\n", cfg->dir, strerror(errno));
        return PC_ERROR;
    }
    if ((e = calloc(1, sizeof(*e))) == NULL)
        return PC_NOMEM;
    e->sync = cfg->sync;
    pthread_mutex_init(&e->sync_mu, NULL);
    pthread_cond_init(&e->sync_cv, NULL);
    pthread_rwlock_init(&e->notify_mu, NULL);
    pthread_mutex_init(&e->snap_mu, NULL);
    if (pc_memlocks_new(&e->memlocks) != PC_OK)
        goto nomem;

    /*
     * The log is on so that commits survive a crash; commits themselves do
     * not sync (transaction_sync off): pc_sync flushes the log once for a
     * whole group of committers. Checkpoints bound recovery time and let
     * old log files be archived.
     */
    snprintf(conf, sizeof(conf),
             "create,cache_size=%s,session_max=2000,"
             "log=(enabled=true,archive=true,file_max=64MB),"
             "transaction_sync=(enabled=false),checkpoint=(wait=%d)",
             cfg->cache_size ? cfg->cache_size : "128MB",
             cfg->checkpoint_secs > 0 ? cfg->checkpoint_secs : 60);
    if ((ret = wiredtiger_open(cfg->dir, NULL, conf, &e->conn)) != 0) {
        fprintf(stderr, "engine: wiredtiger_open %s: %s\n", cfg->dir, wiredtiger_strerror(ret));
        goto fail;
    }
    if ((ret = e->conn->open_session(e->conn, NULL, NULL, &ws)) != 0) {
        fprintf(stderr, "engine: open_session: %s\n", wiredtiger_strerror(ret));
        goto fail;
    }
    for (size_t i = 0; i < NTABLES; i++) {
        if ((ret = ws->create(ws, TABLES[i], TABLE_FORMAT)) != 0) {
            fprintf(stderr, "engine: create %s: %s\n", TABLES[i], wiredtiger_strerror(ret));
            goto fail;
        }
    }
    if ((ret = ws->close(ws, NULL)) != 0) {
        ws = NULL;
        fprintf(stderr, "engine: session close: %s\n", wiredtiger_strerror(ret));
        goto fail;
    }
    pc_session *boot;
    pc_rc rc = pc_session_open(e, &boot);
    if (rc == PC_OK) {
        rc = pc_snapshots_load(boot);
        pc_session_close(boot);
    }
    if (rc != PC_OK) {
        fprintf(stderr, "engine: cannot read the stored GC safe point\n");
        pc_engine_close(e);
        return rc;
    }
    *out = e;
    return PC_OK;

nomem:
    pc_engine_close(e);
    return PC_NOMEM;
fail:
    if (ws != NULL)
        ws->close(ws, NULL);
    pc_engine_close(e);
    return PC_ERROR;
}

void pc_engine_close(pc_engine *e)
{
    if (e == NULL)
        return;
    if (e->conn != NULL) {
        int ret = e->conn->close(e->conn, NULL);
        if (ret != 0)
            fprintf(stderr, "engine: close: %s\n", wiredtiger_strerror(ret));
    }
    pc_memlocks_free(e->memlocks);
    pc_buf_free(&e->notify_prefixes);
    pthread_rwlock_destroy(&e->notify_mu);
    pthread_mutex_destroy(&e->snap_mu);
    free(e->pins);
    pthread_cond_destroy(&e->sync_cv);
    pthread_mutex_destroy(&e->sync_mu);
    free(e);
}

pc_rc pc_session_open(pc_engine *e, pc_session **out)
{
    pc_session *s;
    WT_CURSOR **cursors[NTABLES];
    int ret;

    *out = NULL;
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return PC_NOMEM;
    s->e = e;
    /* Snapshot isolation is what makes an action a "row transaction". */
    if ((ret = e->conn->open_session(e->conn, NULL, "isolation=snapshot", &s->wt)) != 0) {
        fprintf(stderr, "engine: open_session: %s\n", wiredtiger_strerror(ret));
        free(s);
        return PC_ERROR;
    }
    cursors[0] = &s->data;
    cursors[1] = &s->lock;
    cursors[2] = &s->write;
    cursors[3] = &s->notify;
    cursors[4] = &s->meta;
    for (size_t i = 0; i < NTABLES; i++) {
        if ((ret = s->wt->open_cursor(s->wt, TABLES[i], NULL, NULL, cursors[i])) != 0) {
            pc_wt_error(s, ret, "open_cursor");
            pc_session_close(s);
            return PC_ERROR;
        }
    }
    *out = s;
    return PC_OK;
}

void pc_session_close(pc_session *s)
{
    if (s == NULL)
        return;
    /* Closing the session closes its cursors. */
    int ret = s->wt->close(s->wt, NULL);
    if (ret != 0)
        fprintf(stderr, "engine: session close: %s\n", wiredtiger_strerror(ret));
    pc_buf_free(&s->scratch);
    free(s);
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
    WT_CURSOR *all[NTABLES] = {s->data, s->lock, s->write, s->notify, s->meta};
    for (size_t i = 0; i < NTABLES; i++) {
        int ret = all[i]->reset(all[i]);
        if (ret != 0)
            return pc_wt_error(s, ret, "cursor reset");
    }
    return PC_OK;
}

pc_rc pc_run_txn(pc_session *s, pc_txn_body body, void *arg)
{
    for (int attempt = 0; attempt < 10000; attempt++) {
        int ret = s->wt->begin_transaction(s->wt, NULL);
        if (ret != 0)
            return pc_wt_error(s, ret, "begin_transaction");
        pc_rc rc = body(s, arg);
        pc_rc reset = reset_cursors(s);
        if (rc == PC_OK && reset != PC_OK)
            rc = reset;
        if (rc == PC_OK) {
            /* A failed commit has rolled the transaction back. */
            if ((ret = s->wt->commit_transaction(s->wt, NULL)) == 0)
                return PC_OK;
            rc = pc_wt_error(s, ret, "commit_transaction");
        } else if ((ret = s->wt->rollback_transaction(s->wt, NULL)) != 0) {
            pc_wt_error(s, ret, "rollback_transaction");
            return PC_ERROR;
        }
        if (rc != PC_RETRY)
            return rc;
        retry_pause(attempt);
    }
    fprintf(stderr, "engine: transaction kept conflicting, giving up\n");
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

pc_rc pc_cursor_put(pc_session *s, WT_CURSOR *c, const void *k, size_t klen, const void *v,
                    size_t vlen)
{
    WT_ITEM key = {.data = k, .size = klen}, val = {.data = v, .size = vlen};
    int ret;

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

    c->set_key(c, &key);
    ret = c->remove(c);
    if (ret != 0 && ret != WT_NOTFOUND)
        return pc_wt_error(s, ret, "remove");
    return PC_OK;
}
