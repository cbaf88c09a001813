/*
 * listen_socket.h — a listening TCP socket made before a program opens
 * its data.
 *
 * A program that cannot have its port must say so and stop before it
 * touches its data dir (a second copy of a service started by mistake
 * must not open, lock or recover the first one's store). So both programs
 * bind their ports first and hand the sockets to the HTTP server and the
 * raft transport when those start: the port is never free in between, as
 * it would be after a bind probe. Connections that arrive meanwhile wait
 * in the listen queue and are served once the server runs.
 */
#ifndef PC_LISTEN_SOCKET_H
#define PC_LISTEN_SOCKET_H

#include <sys/socket.h>

/* A socket bound to addr and listening (non-blocking, close-on-exec,
 * SO_REUSEADDR; an IPv6 address listens on IPv6 only). Its number is
 * above 2, so that 0 can mean "none" in a config and a listening socket
 * never takes a standard stream's number. The socket, or -1 with errno. */
int listen_socket(const struct sockaddr *addr, socklen_t len);

#endif
