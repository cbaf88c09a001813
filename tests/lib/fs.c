/*
 * fs.c — temp dirs, files and free ports for tests (testlib.h).
 */
#include "testlib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

char *tl_mkdtemp(const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/percolator-%s-XXXXXX", base, tag ? tag : "test");
    if (!mkdtemp(tmpl))
        return NULL;
    return strdup(tmpl);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

int tl_rmtree(const char *path)
{
    if (!path || !*path || strcmp(path, "/") == 0)
        return -1;
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

char *tl_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 4096) {
            char *p = realloc(data, cap + 65536 + 1);
            if (!p) {
                free(data);
                fclose(f);
                return NULL;
            }
            data = p;
            cap += 65536;
        }
        size_t r = fread(data + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    data[n] = '\0';
    if (len)
        *len = n;
    return data;
}

int tl_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int rc = fwrite(data, 1, len, f) == len ? 0 : -1;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

void tl_dump_file(const char *path)
{
    char *s = tl_read_file(path, NULL);
    fprintf(stderr, "----- %s -----\n%s\n----- end -----\n", path, s ? s : "(unreadable)");
    free(s);
}

void tl_dump_tail(const char *path, size_t max)
{
    size_t len = 0;
    char *s = tl_read_file(path, &len);
    size_t from = s != NULL && len > max ? len - max : 0;
    fprintf(stderr, "----- %s%s -----\n%s\n----- end -----\n", path,
            from > 0 ? " (its end)" : "", s ? s + from : "(unreadable)");
    free(s);
}

/* A port the kernel gives for port 0, free at that moment. */
static int kernel_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t al = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* The kernel may give the port it gave a moment ago again (nothing binds
 * it in between): two members of one group then got one port, and the
 * second's health check was answered by the first (seen twice in one day
 * of test_service_raft runs). So a port this process handed out lately is
 * not handed out again. */
int tl_free_port(void)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static int recent[256];
    static size_t next;
    pthread_mutex_lock(&mu);
    int port = -1;
    for (int attempt = 0; attempt < 100; attempt++) {
        port = kernel_free_port();
        bool seen = false;
        for (size_t i = 0; i < sizeof recent / sizeof recent[0] && port > 0; i++)
            seen = seen || recent[i] == port;
        if (!seen)
            break;
    }
    if (port > 0)
        recent[next++ % (sizeof recent / sizeof recent[0])] = port;
    pthread_mutex_unlock(&mu);
    return port;
}
