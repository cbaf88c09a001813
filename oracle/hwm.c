/*
 * hwm.c — the persisted high-water mark (see hwm.h for the format and the
 * rules).
 *
 * The order of operations in hwm_persist is what makes it crash-safe:
 *   write tmp -> fsync tmp -> rename tmp over state -> fsync directory.
 * Without the first fsync a crash could leave a renamed but empty file;
 * without the directory fsync the rename itself could be lost and the old,
 * lower mark come back after a power cut, while timestamps above it were
 * already handed out.
 */
#include "hwm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_MAX 128         /* a valid state file is far shorter */

struct hwm_store {
    char path[PATH_MAX];      /* <dir>/oracle.state */
    char tmp[PATH_MAX];       /* <dir>/oracle.state.tmp */
    int dir_fd;               /* for fsync after rename */
    int lock_fd;              /* holds the flock */
};

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32), bitwise: the file is a
 * few dozen bytes, table-driven speed does not matter here. */
static uint32_t crc32_ieee(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

int hwm_format(uint64_t mark, char *out, size_t outlen)
{
    char body[64];
    int n = snprintf(body, sizeof body, "percolator-oracle-state v1 hwm=%" PRIu64, mark);
    if (n < 0 || (size_t)n >= sizeof body)
        return -1;
    int m = snprintf(out, outlen, "%s crc32=%08" PRIx32 "\n", body,
                     crc32_ieee(body, (size_t)n));
    if (m < 0 || (size_t)m >= outlen)
        return -1;
    return m;
}

int hwm_parse(const char *text, size_t len, uint64_t *mark)
{
    static const char prefix[] = "percolator-oracle-state v1 hwm=";
    if (len >= STATE_MAX || len < sizeof prefix || memchr(text, '\0', len))
        return -1;
    char copy[STATE_MAX];
    memcpy(copy, text, len);
    copy[len] = '\0';
    if (strncmp(copy, prefix, sizeof prefix - 1) != 0)
        return -1;
    /* The mark: decimal digits only, no overflow. */
    const char *p = copy + sizeof prefix - 1;
    uint64_t v = 0;
    size_t digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (digits == 0 || digits > 20)
        return -1;
    /* Re-format and compare byte for byte: checks the CRC, the separator,
     * the newline and that nothing else is in the file. */
    char expect[STATE_MAX];
    int n = hwm_format(v, expect, sizeof expect);
    if (n < 0 || (size_t)n != len || memcmp(expect, copy, len) != 0)
        return -1;
    *mark = v;
    return 0;
}

static int mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof path)
        return -1;
    memcpy(path, dir, len + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* Read the state file: 0 (mark set; 0 when missing) or -1 (err set). */
static int read_state(hwm_store *s, uint64_t *mark, char *err, size_t errlen)
{
    int fd = open(s->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            *mark = 0;
            return 0;
        }
        snprintf(err, errlen, "cannot read %s: %s", s->path, strerror(errno));
        return -1;
    }
    char text[STATE_MAX];
    size_t len = 0;
    int rc = -1;
    for (;;) {
        ssize_t n = read(fd, text + len, sizeof text - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "cannot read %s: %s", s->path, strerror(errno));
            goto done;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == sizeof text)
            break; /* too long to be valid; hwm_parse rejects it */
    }
    if (hwm_parse(text, len, mark) != 0) {
        snprintf(err, errlen,
                 "state file %s is corrupt (%zu bytes, not a valid high-water mark); "
                 "refusing to start: restarting from 1 would reuse timestamps. "
                 "Restore the file or move the data dir away to start a new oracle",
                 s->path, len);
        goto done;
    }
    rc = 0;
done:
    close(fd);
    return rc;
}

int hwm_open(const char *dir, hwm_store **out, uint64_t *mark, char *err, size_t errlen)
{
    *out = NULL;
    hwm_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->dir_fd = s->lock_fd = -1;
    char lock[PATH_MAX];
    if (snprintf(s->path, sizeof s->path, "%s/%s", dir, HWM_STATE_FILE) >= (int)sizeof s->path ||
        snprintf(s->tmp, sizeof s->tmp, "%s/%s.tmp", dir, HWM_STATE_FILE) >= (int)sizeof s->tmp ||
        snprintf(lock, sizeof lock, "%s/LOCK", dir) >= (int)sizeof lock) {
        snprintf(err, errlen, "data dir path too long");
        goto fail;
    }
    if (mkdir_p(dir) != 0) {
        snprintf(err, errlen, "cannot create data dir %s: %s", dir, strerror(errno));
        goto fail;
    }
    s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dir_fd < 0) {
        snprintf(err, errlen, "cannot open data dir %s: %s", dir, strerror(errno));
        goto fail;
    }
    s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", lock, strerror(errno));
        goto fail;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen, "data dir %s is in use by another oracle (%s is locked)", dir, lock);
        goto fail;
    }
    if (read_state(s, mark, err, errlen) != 0)
        goto fail;
    /* A leftover tmp file is a persist that crashed before its rename: the
     * mark it held was never used (nothing is handed out before the rename
     * is durable), so it is safe to drop. */
    if (unlink(s->tmp) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove %s: %s", s->tmp, strerror(errno));
        goto fail;
    }
    *out = s;
    return 0;
fail:
    hwm_close(s);
    return -1;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int hwm_persist(hwm_store *s, uint64_t mark, unsigned *fsyncs, char *err, size_t errlen)
{
    char text[STATE_MAX];
    unsigned synced = 0;
    int rc = -1;
    int n = hwm_format(mark, text, sizeof text);
    if (n < 0) {
        snprintf(err, errlen, "cannot format the mark");
        return -1;
    }
    int fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", s->tmp, strerror(errno));
        goto done;
    }
    if (write_all(fd, text, (size_t)n) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", s->tmp, strerror(errno));
        goto done;
    }
    if (fsync(fd) != 0) {
        snprintf(err, errlen, "cannot fsync %s: %s", s->tmp, strerror(errno));
        goto done;
    }
    synced++;
    if (close(fd) != 0) {
        fd = -1;
        snprintf(err, errlen, "cannot close %s: %s", s->tmp, strerror(errno));
        goto done;
    }
    fd = -1;
    if (rename(s->tmp, s->path) != 0) {
        snprintf(err, errlen, "cannot rename %s: %s", s->tmp, strerror(errno));
        goto done;
    }
    if (fsync(s->dir_fd) != 0) {
        snprintf(err, errlen, "cannot fsync the data dir: %s", strerror(errno));
        goto done;
    }
    synced++;
    rc = 0;
done:
    if (fd >= 0)
        close(fd);
    if (fsyncs)
        *fsyncs = synced;
    return rc;
}

void hwm_close(hwm_store *s)
{
    if (!s)
        return;
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* releases the flock */
    free(s);
}
