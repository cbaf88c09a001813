/*
 * backup_archive.c — GET /v1/admin/backup: a fresh online backup streamed
 * to the client as a tar archive (README "Backup and restore"; etcd's
 * `snapshot save`), so that a backup can leave the machine with whoever
 * asked for it.
 *
 * The backup is made as POST /v1/admin/backup makes one (pc_backup: a
 * consistent copy while the store serves, docs/DESIGN.md §4.9), into a
 * directory of the data dir that lives as long as the reply; the archive
 * (common/tar.h) is made from its files as it is sent, so memory stays at
 * one read buffer whatever the store's size. One archive at a time: each
 * needs the store's size again on disk while it is sent.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_admin.h"
#include "log.h"
#include "service.h"
#include "tar.h"
#include "timeutil.h"

#define STREAM_PREFIX "stream-backup-"

typedef struct {
    char name[TAR_NAME_MAX + 1];
    uint64_t size;
    uint64_t start;                 /* where its header is in the archive */
} member;

typedef struct {
    pc_engine *engine;
    char dir[4200];
    member *files;
    size_t nfiles;
    uint64_t total;                 /* the archive's bytes, end blocks included */
    uint64_t mtime;
    size_t at;                      /* the file the last read was in */
    int fd;                         /* files[at] open, or -1 */
    uint64_t sent_ms;               /* when it began, for the log line */
} archive;

static atomic_bool streaming; /* one archive at a time */

static void archive_free(archive *a)
{
    if (a->fd >= 0)
        close(a->fd);
    if (a->dir[0] != '\0' && pc_backup_remove(a->engine, a->dir) != PC_OK)
        log_warn("backup archive: cannot remove %s; remove it by hand", a->dir);
    free(a->files);
    free(a);
}

/* httpd_reply_stream's end: the copy goes, the next archive may begin. */
static void archive_done(void *arg)
{
    archive *a = arg;
    log_info("backup archive: %zu files, %llu bytes, over after %.3f s", a->nfiles,
             (unsigned long long)a->total, (double)(time_mono_ms() - a->sent_ms) / 1000.0);
    archive_free(a);
    atomic_store(&streaming, false);
}

/* The archive's bytes from pos: each file's header, its bytes, its zero
 * padding; two zero blocks at the end. MHD reads in order, so the file of
 * the last read is where to look first. */
static long archive_read(void *arg, uint64_t pos, char *buf, size_t max)
{
    archive *a = arg;
    if (pos >= a->total)
        return -1;
    while (a->at < a->nfiles && pos >= a->files[a->at].start + TAR_BLOCK +
                                           tar_padded(a->files[a->at].size)) {
        if (a->fd >= 0)
            close(a->fd);
        a->fd = -1;
        a->at++;
    }
    if (a->at == a->nfiles) { /* the end blocks */
        size_t n = (size_t)(a->total - pos) < max ? (size_t)(a->total - pos) : max;
        memset(buf, 0, n);
        return (long)n;
    }
    member *m = &a->files[a->at];
    uint64_t off = pos - m->start;
    if (off < TAR_BLOCK) {
        unsigned char h[TAR_BLOCK];
        if (tar_header(h, m->name, m->size, a->mtime) != 0)
            return -1;
        size_t n = TAR_BLOCK - (size_t)off < max ? TAR_BLOCK - (size_t)off : max;
        memcpy(buf, h + off, n);
        return (long)n;
    }
    off -= TAR_BLOCK;
    if (off >= m->size) { /* padding */
        uint64_t left = tar_padded(m->size) - off;
        size_t n = left < max ? (size_t)left : max;
        memset(buf, 0, n);
        return (long)n;
    }
    if (a->fd < 0) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", a->dir, m->name);
        if ((a->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
            log_error("backup archive: cannot open %s: %s", path, strerror(errno));
            return -1;
        }
    }
    uint64_t left = m->size - off;
    ssize_t n = pread(a->fd, buf, left < max ? (size_t)left : max, (off_t)off);
    if (n <= 0) {
        log_error("backup archive: cannot read %s: %s", m->name,
                  n < 0 ? strerror(errno) : "shorter than it was");
        return -1;
    }
    return (long)n;
}

/* The backup's files, in name order, and the archive's layout. 0 or -1. */
static int list_files(archive *a)
{
    struct dirent **names = NULL;
    int n = scandir(a->dir, &names, NULL, alphasort);
    if (n < 0)
        return -1;
    int rc = 0;
    a->files = calloc((size_t)n + 1, sizeof *a->files);
    if (a->files == NULL)
        rc = -1;
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        struct stat sb;
        char path[4200 + 260];
        const char *nm = names[i]->d_name;
        snprintf(path, sizeof path, "%s/%s", a->dir, nm);
        if (rc == 0 && strcmp(nm, ".") != 0 && strcmp(nm, "..") != 0 &&
            stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            member *m = &a->files[a->nfiles];
            if (strlen(nm) > TAR_NAME_MAX) {
                log_error("backup archive: file name %s too long for the archive", nm);
                rc = -1;
            } else {
                memcpy(m->name, nm, strlen(nm) + 1); /* fits: checked above */
                m->size = (uint64_t)sb.st_size;
                m->start = at;
                at += TAR_BLOCK + tar_padded(m->size);
                a->nfiles++;
            }
        }
        free(names[i]);
    }
    free(names);
    a->total = at + 2 * TAR_BLOCK;
    return rc;
}

void h_backup_archive(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    static _Atomic unsigned made;
    if (atomic_exchange(&streaming, true)) {
        httpd_add_header(req, "Retry-After", "10");
        httpd_reply_error(req, 409, "backup_unavailable", NULL,
                          "another backup archive is being sent; retry when it is done");
        return;
    }
    archive *a = calloc(1, sizeof *a);
    if (a == NULL) {
        atomic_store(&streaming, false);
        httpd_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    a->fd = -1;
    a->engine = s->engine;
    a->mtime = (uint64_t)time(NULL);
    a->sent_ms = time_mono_ms();
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s%ld-%u", s->cfg.data_dir, STREAM_PREFIX, (long)getpid(),
             atomic_fetch_add(&made, 1) + 1);
    pc_backup_stats st;
    pc_rc rc = pc_backup(s->engine, dir, NULL, NULL, &st);
    if (rc == PC_OK)
        snprintf(a->dir, sizeof a->dir, "%s", dir); /* from here archive_free removes it */
    if (rc == PC_LOCKED) {
        httpd_add_header(req, "Retry-After", "10");
        httpd_reply_error(req, 409, "backup_unavailable", NULL, "another backup is running");
    } else if (rc != PC_OK || list_files(a) != 0) {
        log_error("backup archive: the backup into %s failed (%s)", dir, pc_rc_name(rc));
        httpd_reply_error(req, 500, "internal", NULL, "the backup failed (%s); see the log",
                          pc_rc_name(rc));
    } else {
        log_info("backup archive: %zu files, %llu bytes copied in %.3f s; sending %llu bytes",
                 a->nfiles, (unsigned long long)st.bytes,
                 (double)(time_mono_ms() - a->sent_ms) / 1000.0, (unsigned long long)a->total);
        httpd_add_header(req, "Content-Disposition", "attachment; filename=\"percolator-backup.tar\"");
        httpd_reply_stream(req, 200, "application/x-tar", a->total, archive_read, archive_done,
                           a);
        return;
    }
    archive_free(a);
    atomic_store(&streaming, false);
}

void backup_archive_cleanup(const svc *s)
{
    struct dirent **names = NULL;
    int n = scandir(s->cfg.data_dir, &names, NULL, NULL);
    for (int i = 0; i < n; i++) {
        char path[4200 + 260];
        if (strncmp(names[i]->d_name, STREAM_PREFIX, strlen(STREAM_PREFIX)) == 0) {
            snprintf(path, sizeof path, "%s/%s", s->cfg.data_dir, names[i]->d_name);
            if (pc_backup_remove(s->engine, path) == PC_OK)
                log_info("backup archive: removed %s, left by an earlier run", path);
        }
        free(names[i]);
    }
    free(names);
}
