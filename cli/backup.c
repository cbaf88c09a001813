/*
 * backup.c — `percolator backup save FILE` and `percolator backup restore
 * FILE --dir DIR` (README "Backup and restore"; etcd's `snapshot save` and
 * `snapshot restore`).
 *
 * save: GET /v1/admin/backup streams a fresh, consistent backup of the
 * store as a tar archive (common/tar.h; a follower of a group sends the
 * client to its leader); it is written to FILE.part, checked whole (every
 * header, the end blocks, WiredTiger's metadata file inside), synced, and
 * only then renamed to FILE: a FILE that exists is a whole backup.
 *
 * restore: FILE's files into the new directory DIR, synced: a backup
 * directory like the service's --backup-dir copies. A single node serves
 * it as its --data-dir; a group is made from it with --restore-from DIR
 * (docs/DESIGN.md §7.3), which also starts its Raft log afresh.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tar.h"

#define COPY_BUF (1 << 20)

/* Walk the archive in f from its start: each member's header is checked
 * and, with dir, its bytes written to a new file there. 0, or -1 with the
 * reason on stderr. *files: how many members. */
static int walk(FILE *f, const char *file, const char *dir, unsigned *files)
{
    unsigned char h[TAR_BLOCK];
    char name[TAR_NAME_MAX + 1];
    char *buf = malloc(COPY_BUF);
    bool metadata = false;
    int rc = -1;
    *files = 0;
    if (buf == NULL || fseeko(f, 0, SEEK_SET) != 0)
        goto out;
    for (;;) {
        const char *why = NULL;
        uint64_t size;
        if (fread(h, 1, TAR_BLOCK, f) != TAR_BLOCK) {
            fprintf(stderr, "percolator: %s ends before the archive does (cut short?)\n", file);
            goto out;
        }
        int k = tar_parse(h, name, &size, &why);
        if (k < 0) {
            fprintf(stderr, "percolator: %s: %s\n", file, why);
            goto out;
        }
        if (k == 0) { /* the first end block: the second must follow */
            if (fread(h, 1, TAR_BLOCK, f) != TAR_BLOCK ||
                tar_parse(h, name, &size, &why) != 0) {
                fprintf(stderr, "percolator: %s: the archive's end is not two zero blocks "
                        "(cut short?)\n", file);
                goto out;
            }
            break;
        }
        metadata |= strcmp(name, "WiredTiger") == 0;
        int out = -1;
        if (dir != NULL) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, name);
            if ((out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
                fprintf(stderr, "percolator: cannot create %s: %s\n", path, strerror(errno));
                goto out;
            }
        }
        for (uint64_t left = tar_padded(size), data = size; left > 0;) {
            size_t n = left < COPY_BUF ? (size_t)left : COPY_BUF;
            if (fread(buf, 1, n, f) != n) {
                fprintf(stderr, "percolator: %s ends inside %s (cut short?)\n", file, name);
                if (out >= 0)
                    close(out);
                goto out;
            }
            size_t keep = data < n ? (size_t)data : n;
            for (size_t off = 0; out >= 0 && off < keep;) {
                ssize_t w = write(out, buf + off, keep - off);
                if (w < 0 && errno != EINTR) {
                    fprintf(stderr, "percolator: cannot write %s/%s: %s\n", dir, name,
                            strerror(errno));
                    close(out);
                    goto out;
                }
                off += w > 0 ? (size_t)w : 0;
            }
            data -= keep;
            left -= n;
        }
        if (out >= 0 && (fsync(out) != 0 || close(out) != 0)) {
            fprintf(stderr, "percolator: cannot sync %s/%s: %s\n", dir, name, strerror(errno));
            goto out;
        }
        (*files)++;
    }
    if (!metadata) {
        fprintf(stderr, "percolator: %s is no backup of the store (no WiredTiger file in it)\n",
                file);
        goto out;
    }
    rc = 0;
out:
    free(buf);
    return rc;
}

static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd < 0 || fsync(fd) != 0 ? -1 : 0;
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The directory of path, for syncing a rename in it. */
static void dir_of(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(out, cap, ".");
    else if (slash == path)
        snprintf(out, cap, "/");
    else
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

static int save(const cli_opts *o, const char *file)
{
    char part[4200], dir[4200];
    if ((size_t)snprintf(part, sizeof part, "%s.part", file) >= sizeof part) {
        fprintf(stderr, "percolator: %s: name too long\n", file);
        return EXIT_USAGE;
    }
    FILE *f = fopen(part, "w+xe");
    if (f == NULL) {
        fprintf(stderr, "percolator: cannot create %s: %s%s\n", part, strerror(errno),
                errno == EEXIST ? " (left by a save that did not finish, or another save "
                                  "under way: remove it if none is)" : "");
        return EXIT_USAGE;
    }
    cli_reply r;
    cli_download("/v1/admin/backup", f, &r);
    int rc = r.status == 200 ? EXIT_OK : cli_fail(&r);
    cli_reply_free(&r);
    unsigned files = 0;
    if (rc == EXIT_OK && (fflush(f) != 0 || walk(f, part, NULL, &files) != 0))
        rc = EXIT_SERVER;
    if (rc == EXIT_OK && (fsync(fileno(f)) != 0 || fclose(f) != 0)) {
        fprintf(stderr, "percolator: cannot write %s: %s\n", part, strerror(errno));
        rc = EXIT_SERVER;
        f = NULL;
    } else if (rc == EXIT_OK) {
        f = NULL;
    }
    if (f != NULL)
        fclose(f);
    dir_of(file, dir, sizeof dir);
    if (rc == EXIT_OK && (rename(part, file) != 0 || sync_dir(dir) != 0)) {
        fprintf(stderr, "percolator: cannot rename %s to %s: %s\n", part, file, strerror(errno));
        rc = EXIT_SERVER;
    }
    if (rc != EXIT_OK) {
        unlink(part);
        return rc;
    }
    struct stat sb;
    long long bytes = stat(file, &sb) == 0 ? (long long)sb.st_size : -1LL;
    if (o->json) {
        json_t *j = json_pack("{s:s,s:i,s:I}", "file", file, "files", (int)files, "bytes",
                              (json_int_t)bytes);
        if (j != NULL)
            json_dumpf(j, stdout, JSON_COMPACT);
        putchar('\n');
        json_decref(j);
    } else {
        printf("%s: %u files, %lld bytes\n", file, files, bytes);
    }
    return EXIT_OK;
}

/* Remove what a failed restore made in dir (only files it holds). */
static void undo(const char *dir, FILE *f, unsigned made)
{
    unsigned char h[TAR_BLOCK];
    char name[TAR_NAME_MAX + 1], path[4200];
    const char *why;
    uint64_t size;
    if (fseeko(f, 0, SEEK_SET) != 0)
        return;
    for (unsigned i = 0; i <= made && fread(h, 1, TAR_BLOCK, f) == TAR_BLOCK; i++) {
        if (tar_parse(h, name, &size, &why) != 1 ||
            fseeko(f, (off_t)tar_padded(size), SEEK_CUR) != 0)
            break;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        unlink(path);
    }
    rmdir(dir);
}

static int restore(const cli_opts *o, const char *file)
{
    if (o->dir == NULL || o->dir[0] == '\0') {
        fprintf(stderr, "percolator: backup restore needs --dir DIR (a new directory) "
                "(percolator --help)\n");
        return EXIT_USAGE;
    }
    FILE *f = fopen(file, "rbe");
    if (f == NULL) {
        fprintf(stderr, "percolator: cannot read %s: %s\n", file, strerror(errno));
        return EXIT_USAGE;
    }
    unsigned files = 0;
    /* First the whole archive checked, so that a bad one leaves nothing. */
    if (walk(f, file, NULL, &files) != 0) {
        fclose(f);
        return EXIT_USAGE;
    }
    if (mkdir(o->dir, 0700) != 0) {
        fprintf(stderr, "percolator: cannot make %s (it must not exist yet): %s\n", o->dir,
                strerror(errno));
        fclose(f);
        return EXIT_USAGE;
    }
    char parent[4200];
    dir_of(o->dir, parent, sizeof parent);
    if (walk(f, file, o->dir, &files) != 0 || sync_dir(o->dir) != 0 || sync_dir(parent) != 0) {
        undo(o->dir, f, files);
        fclose(f);
        return EXIT_SERVER;
    }
    fclose(f);
    printf("%s: %u files from %s; start a single node on it (--data-dir %s), or make a group "
           "from it (--restore-from %s)\n", o->dir, files, file, o->dir, o->dir);
    return EXIT_OK;
}

int cli_backup(const cli_opts *o)
{
    const char *what = o->args[0];
    if (o->nargs != 2) {
        fprintf(stderr, "percolator: backup save FILE | backup restore FILE --dir DIR "
                "(percolator --help)\n");
        return EXIT_USAGE;
    }
    if (strcmp(what, "save") == 0) {
        if (o->dir != NULL) {
            fprintf(stderr, "percolator: --dir is for backup restore (percolator --help)\n");
            return EXIT_USAGE;
        }
        return save(o, o->args[1]);
    }
    if (strcmp(what, "restore") == 0)
        return restore(o, o->args[1]);
    fprintf(stderr, "percolator: backup %s: save or restore (percolator --help)\n", what);
    return EXIT_USAGE;
}
