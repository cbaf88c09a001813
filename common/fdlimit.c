/*
 * fdlimit.c — see fdlimit.h.
 */
#include <sys/resource.h>

#include "fdlimit.h"
#include "log.h"

uint64_t fd_limit_raise(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        return 1024;
    if (r.rlim_cur < r.rlim_max) {
        rlim_t was = r.rlim_cur;
        r.rlim_cur = r.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &r) != 0)
            r.rlim_cur = was;
    }
    return r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)r.rlim_cur;
}

unsigned fd_connection_limit(uint64_t limit, unsigned reserve, unsigned wanted, unsigned min)
{
    uint64_t left = limit > reserve ? limit - reserve : 0;
    if (left < min)
        return 0;
    if (left < wanted) {
        log_info("connections limited to %llu: the process may open %llu files and keeps %u "
                 "for storage and its own use",
                 (unsigned long long)left, (unsigned long long)limit, reserve);
        return (unsigned)left;
    }
    return wanted;
}
