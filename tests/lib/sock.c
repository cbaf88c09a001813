/*
 * sock.c — raw TCP for tests that must send what an HTTP library would
 * not: half requests, bytes that are not UTF-8, ambiguous lengths.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testlib.h"
#include "timeutil.h"

int tl_dial(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (src != NULL) {
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            return -1;
        }
    }
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

bool tl_closed_by_server(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return false;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

long tl_raw_exchange(int port, const void *req, size_t len, char *out, size_t cap, int ms)
{
    int fd = tl_dial(NULL, port);
    if (fd < 0)
        return -1;
    if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    uint64_t deadline = time_mono_ms() + (uint64_t)ms;
    while (got + 1 < cap) {
        uint64_t now = time_mono_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
            break;
        ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    out[got] = '\0';
    close(fd);
    return (long)got;
}

int tl_raw_status(const char *reply)
{
    int st = 0;
    if (strncmp(reply, "HTTP/1.", 7) != 0 || strlen(reply) < 12)
        return -1;
    for (int i = 9; i < 12; i++)
        st = st * 10 + (reply[i] - '0');
    return st;
}
