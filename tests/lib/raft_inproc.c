/*
 * raft_inproc.c — see raft_inproc.h.
 */
#include "raft_inproc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testlib.h"
#include "timeutil.h"

int tl_listen_loopback(int host, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)host)};
    socklen_t len = sizeof a;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int tl_inproc_timestamp(raft_node *const *members, size_t n, uint64_t *ts, int *who,
                        uint64_t *term)
{
    uint64_t deadline = time_mono_ms() + TL_START_MS;
    while (time_mono_ms() < deadline) {
        for (size_t m = 0; m < n; m++) {
            raft_node_status st;
            if (members[m] == NULL)
                continue;
            raft_node_get_status(members[m], &st);
            if (st.ready_term != 0 && raft_node_timestamps(members[m], 1, 2000, ts) == RN_OK) {
                if (who != NULL)
                    *who = (int)m;
                if (term != NULL)
                    *term = st.ready_term;
                return 0;
            }
        }
        time_sleep_ms(20);
    }
    return -1;
}
