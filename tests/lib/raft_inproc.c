/*
 * raft_inproc.c — see raft_inproc.h.
 */
#include "raft_inproc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "raft_loop.h"
#include "raft_net.h"
#include "testlib.h"
#include "timeutil.h"

int tl_inproc_node_start(int i, struct tls_server *tls, struct raft_net **net,
                         struct raft_loop **loop, char *addr, size_t len)
{
    char err[256];
    int port, fd = tl_listen_loopback(i, &port);
    if (fd < 0)
        return -1;
    snprintf(addr, len, "127.0.0.%d:%d", i + 1, port);
    int rc = raft_net_start(&(raft_net_config){.address = addr, .listen_fd = fd, .tls = tls},
                            net, err, sizeof err);
    close(fd); /* the net listens on a duplicate */
    if (rc != 0 || raft_loop_start(loop, err, sizeof err) != 0) {
        fprintf(stderr, "node %d: %s\n", i + 1, err);
        return -1;
    }
    return 0;
}

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
