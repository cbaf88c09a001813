/*
 * listen_socket.c — bind and listen ahead of the servers (listen_socket.h).
 */
#include "listen_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

int listen_socket(const struct sockaddr *addr, socklen_t len)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && fd <= 2) {
        /* A standard stream was closed: move off its number. */
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        int err = errno;
        close(fd);
        errno = err;
        fd = moved;
    }
    if (fd < 0)
        return -1;
    int one = 1;
    /* SO_REUSEADDR: a restart binds while the last run's connections are
     * in TIME_WAIT; a port another socket listens on stays refused. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (addr->sa_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        bind(fd, addr, len) != 0 || listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}
