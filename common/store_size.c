/*
 * store_size.c — the data dir's size on disk, walked by a thread of its
 * own (store_size.h).
 */
#include "store_size.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct store_size {
    char *dir;
    unsigned interval_ms;
    _Atomic uint64_t bytes;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* on CLOCK_MONOTONIC: stop wakes the thread at once */
    bool stop;
};

/* Add what the files under the open dir fd take to *bytes; fd is closed
 * here. *budget: the entries the walk may still look at. */
static void walk_fd(int fd, int depth, uint64_t *bytes, long *budget)
{
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return;
    }
    struct dirent *e;
    while (*budget > 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        (*budget)--;
        struct stat st;
        /* Gone since readdir (a log file removed, a WiredTiger rename):
         * it takes nothing any more. */
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISREG(st.st_mode)) {
            /* The blocks, as du counts them; a small file whose bytes a
             * file system keeps in its inode (ext4's inline_data, btrfs)
             * has none, and counts its length. */
            *bytes += st.st_blocks > 0 ? (uint64_t)st.st_blocks * 512 : (uint64_t)st.st_size;
        } else if (S_ISDIR(st.st_mode) && depth < STORE_SIZE_MAX_DEPTH) {
            int sub = openat(dirfd(d), e->d_name,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                walk_fd(sub, depth + 1, bytes, budget);
        }
    }
    closedir(d);
}

uint64_t store_size_walk(const char *dir)
{
    uint64_t bytes = 0;
    long budget = STORE_SIZE_MAX_FILES;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        walk_fd(fd, 1, &bytes, &budget);
    return bytes;
}

static void deadline_after(struct timespec *ts, unsigned ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void *run(void *arg)
{
    store_size *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec until;
        deadline_after(&until, s->interval_ms);
        while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &until) != ETIMEDOUT)
            ;
        if (s->stop)
            break;
        /* The walk outside the lock: stop never waits for more than one. */
        pthread_mutex_unlock(&s->mu);
        atomic_store(&s->bytes, store_size_walk(s->dir));
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The lock and the monotonic condition variable. 0 or -1 (nothing left made). */
static int sync_init(store_size *s)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
                     pthread_cond_init(&s->cv, &ca) == 0
                 ? 0
                 : -1;
    pthread_condattr_destroy(&ca);
    if (rc == 0 && pthread_mutex_init(&s->mu, NULL) != 0) {
        pthread_cond_destroy(&s->cv);
        rc = -1;
    }
    return rc;
}

store_size *store_size_start(const char *dir, unsigned interval_ms)
{
    store_size *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    if ((s->dir = strdup(dir)) == NULL || sync_init(s) != 0) {
        free(s->dir);
        free(s);
        return NULL;
    }
    s->interval_ms = interval_ms ? interval_ms : 1;
    atomic_store(&s->bytes, store_size_walk(dir));
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s->dir);
        free(s);
        return NULL;
    }
    return s;
}

uint64_t store_size_bytes(const store_size *s)
{
    return atomic_load(&s->bytes);
}

void store_size_stop(store_size *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->dir);
    free(s);
}
