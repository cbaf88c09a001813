/*
 * routes_admin.c — POST /v1/admin/backup: an online backup into a new
 * directory under --backup-dir (docs/DESIGN.md §4.9; README "Backup and
 * restore"). The client names nothing on the server's disk: the service
 * picks the directory and answers with its name.
 */
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_admin.h"
#include "failpoint.h"
#include "log.h"
#include "respond.h"
#include "timeutil.h"

static _Atomic unsigned backups_made;

/* pc_backup's hook, after the first file is copied: the failpoint
 * backup_copy holds a backup there (=sleep:MS) or fails it (=error). */
static int backup_copied(void *arg)
{
    failpoint(arg, "backup_copy");
    return failpoint_fails("backup_copy") ? -1 : 0;
}

/* Backups by age: the name's time, then its number within that second. */
static int by_age(const struct dirent **a, const struct dirent **b)
{
    const char *x = (*a)->d_name, *y = (*b)->d_name;
    size_t stamp = strlen("backup-YYYYmmddTHHMMSSZ");
    int c = strncmp(x, y, stamp);
    if (c != 0 || strlen(x) <= stamp || strlen(y) <= stamp)
        return c;
    unsigned long nx = strtoul(x + stamp + 1, NULL, 10), ny = strtoul(y + stamp + 1, NULL, 10);
    return nx < ny ? -1 : nx > ny;
}

static int is_backup(const struct dirent *d)
{
    return strncmp(d->d_name, "backup-", 7) == 0 && d->d_type == DT_DIR;
}

/* --backup-keep: after a backup, the oldest beyond the newest keep are
 * removed (0: none is). Backups are whole copies (a restore copies its
 * backup), so any of them may go. */
static void prune_backups(const svc *s)
{
    struct dirent **names = NULL;
    if (s->cfg.backup_keep == 0)
        return;
    int n = scandir(s->cfg.backup_dir, &names, is_backup, by_age);
    for (int i = 0; i < n; i++) {
        char path[4200];
        if ((uint64_t)(n - i) > s->cfg.backup_keep &&
            (size_t)snprintf(path, sizeof path, "%s/%s", s->cfg.backup_dir,
                             names[i]->d_name) < sizeof path &&
            pc_backup_remove(s->engine, path) == PC_OK)
            log_info("backup %s removed (--backup-keep %llu)", path,
                     (unsigned long long)s->cfg.backup_keep);
        free(names[i]);
    }
    free(names);
}

static void h_backup(httpd_req *req, void *ctx)
{
    svc *s = ctx;
    if (s->cfg.backup_dir[0] == '\0') {
        httpd_reply_error(req, 409, "backup_unavailable", NULL,
                          "backups are off: start the service with --backup-dir DIR");
        return;
    }
    char name[64], path[4200];
    struct tm tm;
    time_t now = time(NULL);
    gmtime_r(&now, &tm);
    size_t n = strftime(name, sizeof name, "backup-%Y%m%dT%H%M%SZ", &tm);
    snprintf(name + n, sizeof name - n, "-%u", atomic_fetch_add(&backups_made, 1) + 1);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", s->cfg.backup_dir, name) >= sizeof path) {
        httpd_reply_error(req, 500, "internal", NULL, "--backup-dir is too long");
        return;
    }
    pc_session *ps = svc_engine_session(s); /* the failpoint's, to crash there */
    if (ps == NULL) {
        reply_no_session(req);
        return;
    }
    uint64_t t0 = time_mono_ms();
    pc_backup_stats st;
    pc_rc rc = pc_backup(s->engine, path, backup_copied, ps, &st);
    if (rc == PC_LOCKED) {
        httpd_add_header(req, "Retry-After", "10");
        httpd_reply_error(req, 409, "backup_unavailable", NULL, "another backup is running");
        return;
    }
    if (rc != PC_OK) {
        log_error("backup into %s failed (%s); the partial copy is removed", path,
                  pc_rc_name(rc));
        httpd_reply_error(req, 500, "internal", NULL, "the backup failed (%s); see the log",
                          pc_rc_name(rc));
        return;
    }
    double secs = (double)(time_mono_ms() - t0) / 1000.0;
    log_info("backup %s: %llu files, %llu bytes in %.3f s", path, (unsigned long long)st.files,
             (unsigned long long)st.bytes, secs);
    prune_backups(s);
    httpd_reply_json(req, 201, json_pack("{s:s,s:s,s:I,s:I,s:f}", "name", name, "path", path,
                                         "files", (json_int_t)st.files, "bytes",
                                         (json_int_t)st.bytes, "seconds", secs));
}

const httpd_route admin_routes[] = {
    {.method = "POST", .pattern = "/v1/admin/backup", .handler = h_backup},
    {.method = "GET", .pattern = "/v1/admin/backup", .handler = h_backup_archive,
     .blocking = true},
};
const size_t admin_routes_n = sizeof(admin_routes) / sizeof(admin_routes[0]);
