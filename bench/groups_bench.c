/*
 * groups_bench.c — what Raft groups cost one process today (issue #27,
 * docs/DESIGN.md §6.5): K groups of three members, all in this process,
 * each member a whole oracle member (oracle/raft_node.h: a libuv loop,
 * its own or shared as --loops says, libraft's on-disk log in a directory
 * of its own, a transport with its own port and a thread per connection)
 * on loopback.
 *
 *   groups_bench [--groups K] [--heartbeat-ms H] [--seconds S] [--settle T] [--dir D]
 *                [--loops L] [--segment-kib S]
 *
 * --loops 0 (the default) gives every member a loop and thread of its
 * own, as the programs do; --loops L puts member i (in the order started,
 * group after group) on shared loop i mod L (common/raft_loop.h), so
 * --loops 3 is three nodes with one loop each, member m of every group on
 * node m (DESIGN §6.5, step 1). --segment-kib sets libraft's segment size
 * (0: its default, 8 MiB). --net (with --loops L) gives each loop a node
 * network of its own (common/raft_net.h) on 127.0.0.(1+i): every group's
 * member on that loop is at that node's one address, and the groups'
 * messages between two nodes share one connection each way (step 2);
 * --tls runs them over mutual TLS (certificates made by openssl in a
 * temporary dir, as the tests make theirs).
 *
 * It starts the 3K members, waits until every group has a leader that
 * handed out a timestamp (a write through its log), then measures the
 * process while the groups idle for S seconds (after T more seconds, 0
 * by default, in which what the start left, such as libraft removing the
 * segments it prepared, settles): CPU (% of one core),
 * threads, open descriptors, resident memory, the disk its data dirs
 * take, and the kernel's AIO contexts taken (/proc/sys/fs/aio-nr: libraft
 * takes one per open segment). Each figure is printed in all and per
 * member, less what the process held before the first member started.
 * A region per group is what issue #27 asks for; these are the numbers
 * that say how far one process gets that way.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "peer_certs.h"
#include "raft_loop.h"
#include "raft_net.h"
#include "raft_node.h"
#include "timeutil.h"
#include "tls.h"

#define MEMBERS 3
#define MAX_GROUPS 400
#define MAX_LOOPS 64

typedef struct {
    long threads, fds, rss_kb, aio;
    double cpu_s;
} usage;

static long proc_status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    if (f != NULL)
        fclose(f);
    return v;
}

static long count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    long n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return n - 1; /* the directory's own */
}

static long aio_nr(void)
{
    FILE *f = fopen("/proc/sys/fs/aio-nr", "r");
    long v = -1;
    if (f != NULL && fscanf(f, "%ld", &v) != 1)
        v = -1;
    if (f != NULL)
        fclose(f);
    return v;
}

static void sample(usage *u)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    u->cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    u->threads = proc_status_kb("Threads");
    u->rss_kb = proc_status_kb("VmRSS");
    u->fds = count_fds();
    u->aio = aio_nr();
}

static unsigned long long disk_bytes;

static int add_file(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path, (void)ftw;
    if (flag == FTW_F)
        disk_bytes += (unsigned long long)st->st_blocks * 512;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* A socket bound to 127.0.0.(1+host) on a free port, listening; its port
 * in *port. */
static int bind_loopback_host(int host, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)host)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static int bind_loopback(int *port)
{
    return bind_loopback_host(0, port);
}

/* Records the nodes' networks sent, in all (net i: nets[i]). */
static uint64_t records_sent(raft_net *const *nets, int k)
{
    uint64_t sum = 0;
    for (int i = 0; i < k; i++) {
        raft_net_stats st;
        if (nets[i] != NULL) {
            raft_net_get_stats(nets[i], &st);
            sum += st.sent;
        }
    }
    return sum;
}

static int usage_exit(const char *prog)
{
    fprintf(stderr, "usage: %s [--groups 1..%d] [--heartbeat-ms H] [--seconds S] [--settle T] "
            "[--dir D] [--loops 0..%d] [--segment-kib S] [--net [--tls]]\n", prog, MAX_GROUPS, MAX_LOOPS);
    return 2;
}

int main(int argc, char **argv)
{
    int groups = 10, seconds = 10, settle = 0, nloops = 0, segment_kib = 0, use_net = 0, use_tls = 0;
    unsigned heartbeat_ms = 100;
    const char *dir = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--net") == 0 || strcmp(argv[i], "--tls") == 0) { /* no value */
            *(argv[i][2] == 'n' ? &use_net : &use_tls) = 1;
            i--;
            continue;
        }
        if (i + 1 == argc)
            return usage_exit(argv[0]);
        if (strcmp(argv[i], "--groups") == 0)
            groups = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--heartbeat-ms") == 0)
            heartbeat_ms = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--settle") == 0)
            settle = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--loops") == 0)
            nloops = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--segment-kib") == 0)
            segment_kib = atoi(argv[i + 1]);
        else
            return usage_exit(argv[0]);
    }
    if ((use_net && nloops != MEMBERS) || (use_tls && !use_net) || groups < 1 || groups > MAX_GROUPS || seconds < 1 || seconds > 3600 ||
        settle < 0 || settle > 600 ||
        heartbeat_ms < 10 || heartbeat_ms > 10000 || nloops < 0 || nloops > MAX_LOOPS ||
        segment_kib < 0 || segment_kib > 1024 * 1024)
        return usage_exit(argv[0]);
    char tmpl[] = "/tmp/percolator-groups-XXXXXX";
    if (dir == NULL && (dir = mkdtemp(tmpl)) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    log_set_level(LOG_WARN);
    signal(SIGPIPE, SIG_IGN); /* a peer's connection closed: an error, not an exit */
    int n = groups * MEMBERS;
    raft_node **nodes = calloc((size_t)n, sizeof *nodes);
    char(*dirs)[512] = calloc((size_t)n, sizeof *dirs); /* a member keeps its dir's name */
    if (nodes == NULL || dirs == NULL)
        return 1;
    usage before, after_start, idle_start, idle_end;
    sample(&before);
    raft_loop *loops[MAX_LOOPS] = {NULL};
    char err[256];
    for (int i = 0; i < nloops; i++)
        if (raft_loop_start(&loops[i], err, sizeof err) != 0) {
            fprintf(stderr, "loop %d: %s\n", i, err);
            return 1;
        }
    /* --net: a node network a loop, on 127.0.0.(1+i); every group's
     * member i is at its address. */
    raft_net *nets[MAX_LOOPS] = {NULL};
    tls_server *creds[MAX_LOOPS] = {NULL};
    char net_peers[256] = "";
    /* --tls: node i's peer credentials, a certificate for 127.0.0.(1+i) */
    tl_peer_certs certs;
    if (use_tls && tl_peer_certs_make(&certs, NULL) != 0)
        return 1;
    for (int i = 0; use_tls && i < nloops; i++) {
        tls_pem pem;
        if (tls_pem_load(certs.cert[i], certs.key[i], certs.ca, &pem, err, sizeof err) != 0 ||
            (creds[i] = tls_server_new(pem.cert, pem.key, pem.client_ca, err, sizeof err)) ==
                NULL) {
            fprintf(stderr, "node %d credentials: %s\n", i, err);
            return 1;
        }
        tls_pem_free(&pem);
    }
    for (int i = 0; use_net && i < nloops; i++) {
        int port, fd = bind_loopback_host(i, &port);
        char addr[64];
        snprintf(addr, sizeof addr, "127.0.0.%d:%d", 1 + i, port);
        if (fd < 0 || raft_net_start(&(raft_net_config){.address = addr, .listen_fd = fd,
                                                        .tls = creds[i]},
                                     &nets[i], err, sizeof err) != 0) {
            fprintf(stderr, "node %d: %s\n", i, fd < 0 ? strerror(errno) : err);
            return 1;
        }
        close(fd); /* the net listens on a duplicate */
        size_t at = strlen(net_peers);
        snprintf(net_peers + at, sizeof net_peers - at, "%s%d=%s", i ? "," : "", i + 1, addr);
    }
    uint64_t t0 = time_mono_ms();
    int rc = 0;
    for (int g = 0; g < groups && rc == 0; g++) {
        int fds[MEMBERS] = {-1, -1, -1}, ports[MEMBERS] = {0};
        char peers[256] = "";
        for (int m = 0; m < MEMBERS && rc == 0 && !use_net; m++) {
            if ((fds[m] = bind_loopback(&ports[m])) < 0) {
                fprintf(stderr, "group %d: cannot bind a port: %s\n", g, strerror(errno));
                rc = 1;
            }
            size_t at = strlen(peers);
            snprintf(peers + at, sizeof peers - at, "%s%d=127.0.0.1:%d", m ? "," : "", m + 1,
                     ports[m]);
        }
        for (int m = 0; m < MEMBERS && rc == 0; m++) {
            char *d = dirs[g * MEMBERS + m];
            snprintf(d, sizeof dirs[0], "%s/g%d-m%d", dir, g, m + 1);
            if (mkdir(d, 0700) != 0 && errno != EEXIST) {
                fprintf(stderr, "%s: %s\n", d, strerror(errno));
                rc = 1;
                break;
            }
            raft_node_config cfg = {.id = (unsigned)m + 1, .dir = d,
                                    .listen_fd = use_net ? 0 : fds[m],
                                    .net = use_net ? nets[m] : NULL,
                                    .net_group = (uint64_t)g + 1,
                                    .heartbeat_ms = heartbeat_ms,
                                    .election_ms = heartbeat_ms * 10,
                                    .loop = nloops ? loops[(g * MEMBERS + m) % nloops] : NULL,
                                    .segment_bytes = (size_t)segment_kib * 1024};
            if (raft_node_parse_peers(use_net ? net_peers : peers, NULL, &cfg, err,
                                      sizeof err) != 0 ||
                raft_node_start(&cfg, NULL, &nodes[g * MEMBERS + m], err, sizeof err) != 0) {
                fprintf(stderr, "group %d member %d: %s\n", g, m + 1, err);
                rc = 1;
            }
        }
        /* The sockets no member took (a started member owns its own). */
        for (int m = 0; m < MEMBERS; m++)
            if (fds[m] >= 0 && nodes[g * MEMBERS + m] == NULL)
                close(fds[m]);
    }
    /* Every group: a leader, and a timestamp through its log. */
    int led = 0;
    uint64_t deadline = time_mono_ms() + 60000 + (uint64_t)groups * 500;
    for (int g = 0; g < groups && rc == 0; g++) {
        bool done = false;
        while (!done && time_mono_ms() < deadline) {
            for (int m = 0; m < MEMBERS && !done; m++) {
                raft_node_status st;
                raft_node_get_status(nodes[g * MEMBERS + m], &st);
                uint64_t first = 0;
                done = st.ready_term != 0 &&
                       raft_node_timestamps(nodes[g * MEMBERS + m], 1, 2000, &first) == RN_OK;
            }
            if (!done)
                time_sleep_ms(20);
        }
        led += done;
    }
    uint64_t ready_ms = time_mono_ms() - t0;
    sample(&after_start);
    if (rc == 0 && led < groups) {
        fprintf(stderr, "only %d of %d groups had a leader that answered within %llu ms\n", led,
                groups, (unsigned long long)ready_ms);
        rc = 1;
    }
    if (rc == 0) {
        time_sleep_ms((unsigned)settle * 1000);
        uint64_t sent0 = use_net ? records_sent(nets, nloops) : 0;
        sample(&idle_start);
        uint64_t w0 = time_mono_ms();
        time_sleep_ms((unsigned)seconds * 1000);
        sample(&idle_end);
        uint64_t sent = use_net ? records_sent(nets, nloops) - sent0 : 0;
        double wall = (double)(time_mono_ms() - w0) / 1000.0;
        disk_bytes = 0;
        nftw(dir, add_file, 64, FTW_PHYS);
        double cpu = 100.0 * (idle_end.cpu_s - idle_start.cpu_s) / wall;
        printf("groups_bench --groups %d --heartbeat-ms %u --seconds %d --settle %d --loops %d "
               "--segment-kib %d%s%s: %d members in one process\n", groups, heartbeat_ms,
               seconds, settle, nloops, segment_kib, use_net ? " --net" : "", use_tls ? " --tls" : "", n);
        printf("every group led and answering after %.1f s\n", (double)ready_ms / 1000.0);
        printf("%-28s %12s %12s\n", "", "all", "per member");
        printf("%-28s %12.1f %12.3f\n", "CPU idle (% of one core)", cpu, cpu / n);
        printf("%-28s %12ld %12.1f\n", "threads", idle_end.threads - before.threads,
               (double)(idle_end.threads - before.threads) / n);
        printf("%-28s %12ld %12.1f\n", "open descriptors", idle_end.fds - before.fds,
               (double)(idle_end.fds - before.fds) / n);
        printf("%-28s %12.1f %12.2f\n", "resident memory (MiB)",
               (double)(idle_end.rss_kb - before.rss_kb) / 1024.0,
               (double)(idle_end.rss_kb - before.rss_kb) / 1024.0 / n);
        printf("%-28s %12.1f %12.2f\n", "disk (MiB)", (double)disk_bytes / 1048576.0,
               (double)disk_bytes / 1048576.0 / n);
        if (before.aio >= 0 && idle_end.aio >= 0)
            printf("%-28s %12ld %12.1f\n", "AIO contexts (aio-nr)", idle_end.aio - before.aio,
                   (double)(idle_end.aio - before.aio) / n);
        if (use_net && sent > 0) /* heartbeats and their answers, between the nodes */
            printf("%-28s %12.0f %12.1f\n", "records a second (net)", (double)sent / wall,
                   (double)sent / wall / n);
    }
    for (int i = 0; i < n; i++)
        if (nodes[i] != NULL)
            raft_node_stop(nodes[i]);
    for (int i = 0; i < nloops; i++)
        raft_loop_stop(loops[i]);
    for (int i = 0; i < nloops; i++) {
        raft_net_stop(nets[i]);
        tls_server_free(creds[i]);
    }
    if (use_tls)
        tl_peer_certs_remove(&certs);
    free(nodes);
    free(dirs);
    if (strcmp(dir, tmpl) == 0)
        nftw(dir, rm_entry, 64, FTW_DEPTH | FTW_PHYS);
    return rc;
}
