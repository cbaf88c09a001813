/*
 * raft_identity.c — see raft_identity.h.
 */
#include "raft_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "timeutil.h"

#define FILE_MAX 256

int raft_member_load(const char *dir, raft_member_identity *out, char *err, size_t errlen)
{
    char path[4096], text[FILE_MAX + 1];
    snprintf(path, sizeof path, "%s/%s", dir, RAFT_MEMBER_FILE);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    ssize_t n = read(fd, text, FILE_MAX);
    close(fd);
    uint64_t cluster = 0, id = 0;
    int used = 0;
    if (n > 0)
        text[n] = '\0';
    if (n <= 0 ||
        sscanf(text, "percolator raft member 1\ncluster %" SCNx64 "\nraft-id %" SCNu64 "\n%n",
               &cluster, &id, &used) != 2 || used != n || cluster == 0 ||
        raft_member_of(id) == 0) {
        snprintf(err, errlen, "%s is not a member file of ours (remove the data dir's "
                 "contents to start this member afresh)", path);
        return -1;
    }
    out->cluster = cluster;
    out->raft_id = id;
    return 1;
}

int raft_member_save(const char *dir, const raft_member_identity *id, char *err, size_t errlen)
{
    char path[4096], tmp[4200], text[FILE_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, RAFT_MEMBER_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int len = snprintf(text, sizeof text, "percolator raft member 1\ncluster %016" PRIx64
                       "\nraft-id %" PRIu64 "\n", id->cluster, id->raft_id);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && write(fd, text, (size_t)len) == len && fsync(fd) == 0;
    if (fd >= 0 && close(fd) != 0)
        ok = false;
    ok = ok && rename(tmp, path) == 0;
    int dfd = ok ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    ok = ok && dfd >= 0 && fsync(dfd) == 0;
    if (dfd >= 0)
        close(dfd);
    if (!ok) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

bool raft_member_has_state(const char *dir)
{
    static const char *const names[] = {"metadata1", "metadata2"};
    for (size_t i = 0; i < 2; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0)
            return true;
    }
    return false;
}

/* FNV-1a, 64 bits. */
static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

uint64_t raft_member_cluster_id(const char *kind, const raft_peer *peers, size_t n)
{
    uint64_t h = fnv(0xcbf29ce484222325ULL, kind, strlen(kind) + 1);
    /* in the order of the member numbers, whatever the flag's order */
    unsigned last = 0;
    for (size_t k = 0; k < n; k++) {
        const raft_peer *next = NULL;
        for (size_t i = 0; i < n; i++)
            if (!peers[i].later && peers[i].id > last && (next == NULL || peers[i].id < next->id))
                next = &peers[i];
        if (next == NULL)
            break;
        char one[RAFT_PEER_ADDR_MAX + 16];
        int len = snprintf(one, sizeof one, "%u=%s;", next->id, next->raft);
        h = fnv(h, one, (size_t)len);
        last = next->id;
    }
    return h != 0 ? h : 1;
}

uint64_t raft_member_new_incarnation(unsigned member)
{
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = (uint32_t)(ts.tv_nsec ^ ts.tv_sec ^ getpid());
    }
    if (r == 0)
        r = 1;
    return (uint64_t)r << 32 | member;
}

/* Whether an answer shows a group that holds more than its bootstrap
 * entry: a member with a longer log (or one not known yet), or one that
 * is itself joining a group. */
static bool shows_a_group(const raft_member_probe *a)
{
    if (a->has_state)
        return a->last_index > 1;
    return a->cluster != 0;
}

raft_member_decision raft_member_decide(const raft_member_probe *answers, size_t n,
                                        bool self_initial, uint64_t own, uint64_t *cluster)
{
    uint64_t seen = 0;
    size_t answered = 0, initial = self_initial; /* answered: the others */
    for (size_t i = 0; i < n; i++)
        initial += answers[i].initial;
    bool group = false;
    for (size_t i = 0; i < n; i++) {
        const raft_member_probe *a = &answers[i];
        if (!a->answered)
            continue;
        answered += a->initial;
        if (a->cluster != 0) {
            if (seen != 0 && seen != a->cluster)
                return RAFT_MEMBER_CONFLICT;
            seen = a->cluster;
        }
        group = group || shows_a_group(a);
    }
    if (group) {
        *cluster = seen;
        return RAFT_MEMBER_JOIN;
    }
    /* Only bootstrapped-but-empty members or fresh ones answered. Enough
     * of them to meet every majority of the initial members without this
     * one (which may be a wiped member that voted and held entries with
     * those that do not answer: raft_identity.h), or it waits. */
    if (seen != 0 && seen != own)
        return RAFT_MEMBER_CONFLICT;
    size_t majority = initial / 2 + 1;
    if (!self_initial || (initial > 1 && answered < initial - majority + 1))
        return RAFT_MEMBER_WAIT;
    *cluster = own;
    return RAFT_MEMBER_BOOTSTRAP;
}

void raft_seen_note(raft_seen *s, uint64_t raft_id, bool has_state)
{
    s->raft_id = raft_id;
    s->has_state = has_state;
    atomic_store(&s->ms, time_mono_ms());
}

bool raft_seen_get(const raft_seen *s, uint64_t max_age_ms, uint64_t *raft_id, bool *has_state,
                   uint64_t *at_ms)
{
    *at_ms = s != NULL ? atomic_load(&s->ms) : 0;
    bool known = *at_ms != 0;
    *raft_id = known ? s->raft_id : 0;
    *has_state = known && s->has_state;
    return known && time_mono_ms() - *at_ms <= max_age_ms;
}
