/*
 * durable.c — group commit. Actions commit their WiredTiger transactions
 * without syncing; a caller that must not answer before its commit point
 * is on disk calls pc_sync. The first waiter flushes the log once for
 * everybody that asked before the flush began; the others wait for it.
 * One fsync then covers a whole group of commits (the WiredTiger log is
 * written in order, so flushing it makes every earlier commit durable).
 */
#include "internal.h"

pc_rc pc_sync(pc_session *s)
{
    pc_engine *e = s->e;
    pc_rc rc = PC_OK;

    pthread_mutex_lock(&e->sync_mu);
    uint64_t mine = ++e->sync_requested;
    while (e->sync_done < mine) {
        if (e->sync_running) {
            pthread_cond_wait(&e->sync_cv, &e->sync_mu);
            continue;
        }
        /* Become the flusher for every request made so far. */
        e->sync_running = true;
        uint64_t target = e->sync_requested;
        pthread_mutex_unlock(&e->sync_mu);
        int ret = s->wt->log_flush(s->wt, e->sync ? "sync=on" : "sync=off");
        pthread_mutex_lock(&e->sync_mu);
        e->sync_running = false;
        if (ret == 0 && target > e->sync_done)
            e->sync_done = target;
        pthread_cond_broadcast(&e->sync_cv);
        if (ret != 0) {
            rc = pc_wt_error(s, ret, "log_flush");
            break;
        }
    }
    pthread_mutex_unlock(&e->sync_mu);
    return rc == PC_OK ? PC_OK : PC_SYNC_FAILED;
}
