/*
 * fdlimit.h — file descriptors for the HTTP server and what else the
 * process needs. Each connection takes a descriptor; so do the storage
 * engine's files, the event loops and the oracle client's connections. A
 * connection limit above what the process may open lets an attacker with
 * idle connections take the descriptors the storage engine needs next
 * (WiredTiger then fails "Too many open files" and panics). So both
 * programs raise their soft limit to the hard one at start and derive the
 * connection limit from what is left after their own needs.
 */
#ifndef PC_FDLIMIT_H
#define PC_FDLIMIT_H

#include <stdint.h>

/* Raise the soft RLIMIT_NOFILE to the hard limit; the soft limit after. */
uint64_t fd_limit_raise(void);

/* The connection limit: wanted, or what the limit leaves after reserve
 * descriptors if that is less; 0 when that is under min (the program
 * should refuse to start and say why). */
unsigned fd_connection_limit(uint64_t limit, unsigned reserve, unsigned wanted, unsigned min);

#endif
