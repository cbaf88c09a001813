/*
 * backup.c — an online backup of the store, and a restore from one
 * (docs/DESIGN.md §4.9).
 *
 * WiredTiger's backup cursor ("backup:") lists the files of a consistent
 * copy: its last checkpoint and the log files from there on (a checkpoint
 * is taken just before, so that is the tables and about one log file: a
 * backup holds the store once, however many came before). While the
 * cursor is open WiredTiger neither removes nor rewrites what it listed
 * (checkpoints go on, into new blocks; log files are not removed), so
 * copying each listed file whole, while the store keeps serving, gives a
 * directory WiredTiger opens as a store: recovery replays the copied log
 * from the checkpoint on. A commit acknowledged before the backup began
 * was in the log on disk (§4.4), and the log file holding it is copied
 * after the cursor opened, so the copy has it. Whatever the copy of the
 * live log file caught after that is a prefix of the log: recovery keeps
 * whole transactions only, so the copy is a snapshot of a moment and
 * Percolator's locks left in it resolve as after a crash (§3.5).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define COPY_BUF (1 << 20)

static int join(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* Copy src to a new file dst, whole, and fsync it. 0 or -1 (logged to lg). */
static int copy_file(const pc_logger *lg, const char *src, const char *dst, char *buf,
                     uint64_t *bytes)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int rc = in < 0 || out < 0 ? -1 : 0;
    while (rc == 0) {
        ssize_t n = read(in, buf, COPY_BUF);
        if (n == 0)
            break;
        if (n < 0) {
            rc = errno == EINTR ? 0 : -1;
            continue;
        }
        for (ssize_t off = 0; off < n && rc == 0;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno != EINTR)
                rc = -1;
            off += w > 0 ? w : 0;
        }
        *bytes += (uint64_t)n;
    }
    if (rc == 0 && fsync(out) != 0)
        rc = -1;
    if (rc != 0)
        pc_logf(lg, PC_LOG_ERROR, "engine: copying %s to %s: %s", src, dst, strerror(errno));
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        rc = -1;
    return rc;
}

/* fsync a directory, so that the names of the files copied into it last. */
static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd >= 0 && fsync(fd) == 0 ? 0 : -1;
    if (fd >= 0)
        close(fd);
    return rc;
}

/* A backup's files, then its directory (a backup holds no directory). */
static int remove_backup(const char *dest)
{
    DIR *d = opendir(dest);
    for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;) {
        char path[4096];
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
            join(path, sizeof path, dest, de->d_name) == 0)
            unlink(path);
    }
    if (d != NULL)
        closedir(d);
    return rmdir(dest);
}

/* Remove what a failed backup made, so that nothing under the backup dir
 * looks like a backup that is not one. */
static void remove_partial(pc_engine *e, const char *dest)
{
    if (remove_backup(dest) != 0)
        pc_log(e, PC_LOG_ERROR, "backup: cannot remove the partial copy %s: %s", dest,
               strerror(errno));
}

pc_rc pc_backup_remove(pc_engine *e, const char *backup)
{
    if (remove_backup(backup) == 0)
        return PC_OK;
    pc_log(e, PC_LOG_ERROR, "backup: cannot remove %s: %s", backup, strerror(errno));
    return PC_ERROR;
}

static const char BACKUP_KEY[] = "backup_at"; /* meta row: when the last began (s) */

static pc_rc mark_body(pc_session *s, void *arg)
{
    uint8_t v[8];
    pc_put_be64(v, *(const uint64_t *)arg);
    return pc_cursor_put(s, s->meta, BACKUP_KEY, sizeof(BACKUP_KEY) - 1, v, sizeof v);
}

/* Write a meta row, so that the checkpoint after it is a real one:
 * WiredTiger 3.2 writes no checkpoint log record for a store that did not
 * change since its last checkpoint (force=true or not), so its checkpoint
 * LSN stays where it was. */
static pc_rc mark_backup(pc_engine *e)
{
    pc_session *s;
    pc_rc rc = pc_session_open(e, &s);
    if (rc != PC_OK)
        return rc;
    uint64_t now = (uint64_t)time(NULL);
    rc = pc_run_txn(s, mark_body, &now);
    pc_session_close(s);
    return rc;
}

/* Checkpoint, then copy every file the backup cursor lists into dest.
 * The cursor lists the log files from the one the checkpoint LSN is in to
 * the current one, and makes WiredTiger switch to a new log file (64 MiB,
 * preallocated). Without a checkpoint in between, back-to-back backups
 * each copied one more log file than the one before (64, 128, 192 MiB,
 * ...), and those files stayed in the data dir, which the log archiver
 * cleans only up to the checkpoint LSN's file. With it, a backup copies
 * the tables and the log from the checkpoint on: about one log file. */
static pc_rc copy_store(pc_engine *e, const char *dest, pc_backup_hook hook, void *arg,
                        char *buf, pc_backup_stats *st)
{
    const char *home = e->conn->get_home(e->conn);
    WT_SESSION *ws = NULL;
    WT_CURSOR *c = NULL;
    pc_rc rc = mark_backup(e);
    int ret;
    if (rc != PC_OK) {
        pc_log(e, PC_LOG_ERROR, "backup: cannot write its meta row (%s)", pc_rc_name(rc));
        return rc;
    }
    if ((ret = e->conn->open_session(e->conn, NULL, NULL, &ws)) != 0 ||
        (ret = ws->checkpoint(ws, NULL)) != 0 ||
        (ret = ws->open_cursor(ws, "backup:", NULL, NULL, &c)) != 0) {
        pc_log(e, PC_LOG_ERROR, "backup: %s", wiredtiger_strerror(ret));
        rc = PC_ERROR;
        goto done;
    }
    while (rc == PC_OK && (ret = c->next(c)) == 0) {
        const char *name;
        char src[4096], dst[4096];
        if ((ret = c->get_key(c, &name)) != 0 || join(src, sizeof src, home, name) != 0 ||
            join(dst, sizeof dst, dest, name) != 0 ||
            copy_file(&e->log, src, dst, buf, &st->bytes) != 0)
            rc = PC_ERROR;
        else if (st->files++ == 0 && hook != NULL && hook(arg) != 0)
            rc = PC_ERROR;
    }
    if (rc == PC_OK && ret != WT_NOTFOUND) {
        pc_log(e, PC_LOG_ERROR, "backup cursor: %s", wiredtiger_strerror(ret));
        rc = PC_ERROR;
    }
    if (rc == PC_OK && sync_dir(dest) != 0)
        rc = PC_ERROR;
done:
    if (c != NULL && (ret = c->close(c)) != 0 && rc == PC_OK)
        rc = PC_ERROR;
    if (ws != NULL)
        ws->close(ws, NULL);
    return rc;
}

pc_rc pc_backup(pc_engine *e, const char *dest, pc_backup_hook hook, void *arg,
                pc_backup_stats *st)
{
    memset(st, 0, sizeof *st);
    /* WiredTiger has one backup cursor and refuses a second with EINVAL,
     * as it does a bad call: refused here first, before dest is made. */
    if (atomic_exchange(&e->backup_running, true))
        return PC_LOCKED;
    pc_rc rc;
    char *buf = NULL;
    if (mkdir(dest, 0700) != 0) {
        int err = errno;
        pc_log(e, PC_LOG_ERROR, "backup: cannot make %s: %s", dest, strerror(err));
        rc = err == EEXIST ? PC_INVALID : PC_ERROR;
    } else {
        buf = malloc(COPY_BUF);
        rc = buf == NULL ? PC_NOMEM : copy_store(e, dest, hook, arg, buf, st);
        if (rc != PC_OK)
            remove_partial(e, dest);
    }
    free(buf);
    atomic_store(&e->backup_running, false);
    return rc;
}

pc_rc pc_restore(const char *backup, const pc_engine_config *cfg)
{
    const pc_logger lg = {cfg->log, cfg->log_arg};
    const char *dir = cfg->dir;
    DIR *d = opendir(backup);
    if (d == NULL) {
        pc_logf(&lg, PC_LOG_ERROR, "engine: restore: cannot read %s: %s", backup,
                strerror(errno));
        return PC_INVALID;
    }
    char wt[4096];
    struct stat sb;
    /* A backup has WiredTiger's metadata; an empty or foreign dir does not. */
    if (join(wt, sizeof wt, backup, "WiredTiger") != 0 || stat(wt, &sb) != 0) {
        pc_logf(&lg, PC_LOG_ERROR, "engine: restore: %s is not a backup (no WiredTiger file)",
                backup);
        closedir(d);
        return PC_INVALID;
    }
    if (mkdir(dir, 0700) != 0) {
        pc_logf(&lg, PC_LOG_ERROR, "engine: restore: cannot make %s (it must not exist yet): %s",
                dir, strerror(errno));
        closedir(d);
        return PC_INVALID;
    }
    char *buf = malloc(COPY_BUF);
    pc_backup_stats st = {0, 0};
    pc_rc rc = buf == NULL ? PC_NOMEM : PC_OK;
    for (struct dirent *de; rc == PC_OK && (de = readdir(d)) != NULL;) {
        char src[4096], dst[4096];
        if (de->d_name[0] == '.')
            continue;
        if (join(src, sizeof src, backup, de->d_name) != 0 ||
            join(dst, sizeof dst, dir, de->d_name) != 0 || stat(src, &sb) != 0)
            rc = PC_ERROR;
        else if (S_ISREG(sb.st_mode) && copy_file(&lg, src, dst, buf, &st.bytes) != 0)
            rc = PC_ERROR;
    }
    closedir(d);
    free(buf);
    if (rc == PC_OK && sync_dir(dir) != 0)
        rc = PC_ERROR;
    return rc;
}
