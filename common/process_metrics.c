/*
 * process_metrics.c — process_* and build info for /metrics (see
 * process_metrics.h).
 */
#include "process_metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "version.h"

/* Open descriptors: the entries of /proc/self/fd (less the one reading it). */
static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    long n = 0;
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1;
}

/* The system's boot time, seconds since the epoch (/proc/stat btime). */
static long long boot_time(void)
{
    FILE *f = fopen("/proc/stat", "r");
    char line[256];
    long long bt = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "btime %lld", &bt) == 1)
            break;
    fclose(f);
    return bt;
}

typedef struct proc_stat {
    double cpu_s, start_s;
    unsigned long long vsize, rss_bytes;
} proc_stat;

/* /proc/self/stat: fields 14-15 (user and system CPU, in clock ticks), 22
 * (start, ticks after boot), 23 (virtual size, bytes), 24 (resident pages).
 * The command name (field 2) may hold spaces: parse after its ')'. */
static int read_stat(proc_stat *ps)
{
    char text[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (f == NULL)
        return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *p = strrchr(text, ')');
    unsigned long long ut, st, start, vsize;
    long long rss;
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
                                   "%*d %*d %*d %*d %*d %*d %llu %llu %lld",
                            &ut, &st, &start, &vsize, &rss) != 5)
        return -1;
    double tick = (double)sysconf(_SC_CLK_TCK);
    long long bt = boot_time();
    ps->cpu_s = (double)(ut + st) / tick;
    ps->start_s = bt < 0 ? -1 : (double)bt + (double)start / tick;
    ps->vsize = vsize;
    ps->rss_bytes = rss < 0 ? 0 : (unsigned long long)rss * (unsigned long long)sysconf(_SC_PAGESIZE);
    return 0;
}

static int series(buf *out, const char *name, const char *type, const char *help, double v)
{
    char line[512];
    int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name,
                     type, name, v);
    return n > 0 && (size_t)n < sizeof line ? buf_append(out, line, (size_t)n) : -1;
}

int process_metrics_render(buf *out)
{
    static const char info[] = "# HELP percolator_build_info The version of this program.\n"
                               "# TYPE percolator_build_info gauge\n"
                               "percolator_build_info{version=\"" PERCOLATOR_VERSION "\"} 1\n";
    if (buf_append(out, info, sizeof info - 1) != 0)
        return -1;
    proc_stat ps;
    struct rlimit rl;
    long fds = open_fds();
    int rc = 0;
    if (read_stat(&ps) == 0) {
        rc |= series(out, "process_cpu_seconds_total", "counter",
                     "User and system CPU time spent, in seconds.", ps.cpu_s);
        rc |= series(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                     (double)ps.rss_bytes);
        rc |= series(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
                     (double)ps.vsize);
        if (ps.start_s >= 0)
            rc |= series(out, "process_start_time_seconds", "gauge",
                         "Start time of the process since the epoch, in seconds.", ps.start_s);
    }
    if (fds >= 0)
        rc |= series(out, "process_open_fds", "gauge", "Open file descriptors.", (double)fds);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        rc |= series(out, "process_max_fds", "gauge", "The soft limit of open file descriptors.",
                     (double)rl.rlim_cur);
    return rc == 0 ? 0 : -1;
}
