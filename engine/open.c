/*
 * open.c — the engine's life: open the WiredTiger connection and create
 * the tables, load what the engine keeps across restarts (the GC safe
 * point), and close it all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

#define TABLE_FORMAT "key_format=u,value_format=u"

pc_rc pc_engine_open(const pc_engine_config *cfg, pc_engine **out)
{
    char conf[512];
    pc_engine *e;
    WT_SESSION *ws = NULL;
    int ret;

    *out = NULL;
    if (cfg == NULL || cfg->dir == NULL || cfg->dir[0] == '\0')
        return PC_INVALID;
    const pc_logger lg = {cfg->log, cfg->log_arg};
    if (mkdir(cfg->dir, 0755) != 0 && errno != EEXIST) {
        pc_logf(&lg, PC_LOG_ERROR, "engine: cannot create %s: %s", cfg->dir, strerror(errno));
        return PC_ERROR;
    }
    if ((e = calloc(1, sizeof(*e))) == NULL)
        return PC_NOMEM;
    e->log = lg;
    e->sync = cfg->sync;
    e->latch_waited = cfg->latch_waited;
    e->latch_arg = cfg->latch_arg;
    e->image_part_done = cfg->image_part_done;
    e->image_arg = cfg->image_arg;
    pc_fatal_init(e, cfg->on_fatal, cfg->fatal_arg);
    pthread_mutex_init(&e->sync_mu, NULL);
    pthread_cond_init(&e->sync_cv, NULL);
    pthread_rwlock_init(&e->notify_mu, NULL);
    pthread_mutex_init(&e->snap_mu, NULL);
    pthread_mutex_init(&e->slot_mu, NULL);
    if (pc_memlocks_new(&e->memlocks, &e->ts_max) != PC_OK)
        goto nomem;
    pc_rc made = pc_latch_table_new(&e->latches);
    if (made != PC_OK) {
        pc_log(e, PC_LOG_ERROR, "cannot create the latch table");
        pc_engine_close(e);
        return made;
    }

    /*
     * The log is on so that commits survive a crash; commits themselves do
     * not sync (transaction_sync off): pc_sync flushes the log once for a
     * whole group of applied batches (a single node's replicator). Checkpoints bound recovery time and let
     * old log files be archived.
     */
    snprintf(conf, sizeof(conf),
             "create,cache_size=%s,session_max=2000,"
             "log=(enabled=true,archive=true,file_max=64MB),"
             "transaction_sync=(enabled=false),checkpoint=(wait=%d)",
             cfg->cache_size ? cfg->cache_size : "128MB",
             cfg->checkpoint_secs > 0 ? cfg->checkpoint_secs : 60);
    if ((ret = wiredtiger_open(cfg->dir, &e->events, conf, &e->conn)) != 0) {
        pc_log(e, PC_LOG_ERROR, "wiredtiger_open %s: %s", cfg->dir, wiredtiger_strerror(ret));
        goto fail;
    }
    if ((ret = e->conn->open_session(e->conn, NULL, NULL, &ws)) != 0) {
        pc_log(e, PC_LOG_ERROR, "open_session: %s", wiredtiger_strerror(ret));
        goto fail;
    }
    for (size_t i = 0; i < PC_NTABLES; i++) {
        if ((ret = ws->create(ws, pc_tables[i], TABLE_FORMAT)) != 0) {
            pc_log(e, PC_LOG_ERROR, "create %s: %s", pc_tables[i], wiredtiger_strerror(ret));
            goto fail;
        }
    }
    if ((ret = ws->close(ws, NULL)) != 0) {
        ws = NULL;
        pc_log(e, PC_LOG_ERROR, "session close: %s", wiredtiger_strerror(ret));
        goto fail;
    }
    pc_session *boot;
    pc_rc rc = pc_session_open(e, &boot);
    if (rc == PC_OK) {
        rc = pc_snapshots_load(boot);
        if (rc == PC_OK)
            rc = pc_ts_floor_load(boot);
        pc_session_close(boot);
    }
    if (rc != PC_OK) {
        pc_log(e, PC_LOG_ERROR, "cannot read the stored GC safe point and highest timestamp");
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
            pc_log(e, PC_LOG_ERROR, "close: %s", wiredtiger_strerror(ret));
    }
    pc_memlocks_free(e->memlocks);
    pc_latch_table_free(e->latches);
    pc_buf_free(&e->notify_prefixes);
    pthread_rwlock_destroy(&e->notify_mu);
    pthread_mutex_destroy(&e->snap_mu);
    pthread_mutex_destroy(&e->slot_mu);
    free(e->pins);
    pthread_cond_destroy(&e->sync_cv);
    pthread_mutex_destroy(&e->sync_mu);
    free(e);
}
