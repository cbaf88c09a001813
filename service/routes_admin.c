/*
 * routes_admin.c — POST /v1/admin/backup: an online backup into a new
 * directory under --backup-dir (docs/DESIGN.md §4.9; README "Backup and
 * restore"). The client names nothing on the server's disk: the service
 * picks the directory and answers with its name.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "log.h"
#include "respond.h"
#include "timeutil.h"

static _Atomic unsigned backups_made;

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
    uint64_t t0 = time_mono_ms();
    pc_backup_stats st;
    pc_rc rc = pc_backup(s->engine, path, &st);
    if (rc == PC_LOCKED) {
        httpd_add_header(req, "Retry-After", "10");
        httpd_reply_error(req, 409, "backup_unavailable", NULL, "another backup is running");
        return;
    }
    if (rc != PC_OK) {
        log_error("backup into %s failed (%s); the partial copy is left there", path,
                  pc_rc_name(rc));
        httpd_reply_error(req, 500, "internal", NULL, "the backup failed (%s); see the log",
                          pc_rc_name(rc));
        return;
    }
    double secs = (double)(time_mono_ms() - t0) / 1000.0;
    log_info("backup %s: %llu files, %llu bytes in %.3f s", path, (unsigned long long)st.files,
             (unsigned long long)st.bytes, secs);
    httpd_reply_json(req, 201, json_pack("{s:s,s:s,s:I,s:I,s:f}", "name", name, "path", path,
                                         "files", (json_int_t)st.files, "bytes",
                                         (json_int_t)st.bytes, "seconds", secs));
}

const httpd_route admin_routes[] = {
    {.method = "POST", .pattern = "/v1/admin/backup", .handler = h_backup, .name = "backup"},
};
const size_t admin_routes_n = sizeof(admin_routes) / sizeof(admin_routes[0]);
