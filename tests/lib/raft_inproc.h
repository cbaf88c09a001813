/*
 * raft_inproc.h — helpers for tests that run Raft groups inside the test
 * process (oracle members, oracle/raft_node.h, on shared loops or a node
 * network: test_raft_loop, test_raft_net).
 */
#ifndef PC_TL_RAFT_INPROC_H
#define PC_TL_RAFT_INPROC_H

#include <stddef.h>
#include <stdint.h>

#include "raft_node.h"

/* A listening socket on 127.0.0.(1+host), a free port in *port, with
 * SO_REUSEADDR as the programs' (common/listen_socket.c). The fd, or -1. */
int tl_listen_loopback(int host, int *port);

/* Node i of a cluster in this process (0..): a node network on
 * 127.0.0.(i+1) at a free port (its address in addr) with peer TLS tls
 * (may be NULL), and a loop. 0, or -1 (the reason on stderr). */
struct raft_loop;
struct raft_net;
struct tls_server;
int tl_inproc_node_start(int i, struct tls_server *tls, struct raft_net **net,
                         struct raft_loop **loop, char *addr, size_t len);

/* A timestamp from the group's leader (members: n, NULL for one
 * stopped) within 60 s, into *ts; which member answered in *who and the
 * term it leads in in *term (either may be NULL). 0, or -1: none did. */
int tl_inproc_timestamp(raft_node *const *members, size_t n, uint64_t *ts, int *who,
                        uint64_t *term);

#endif
