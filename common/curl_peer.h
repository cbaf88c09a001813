/*
 * curl_peer.h — the libcurl options every request one of our programs
 * sends another takes: the service's oracle client (service/oracle_client.c)
 * and a follower passing a request to its leader (common/forward.c).
 */
#ifndef PC_CURL_PEER_H
#define PC_CURL_PEER_H

#include <curl/curl.h>

/* No signals (threads), the connect and whole-request timeouts, Nagle off
 * (small requests and answers), TCP keepalive (a peer that vanished is
 * noticed), and the peer's name looked up again on every new connection
 * (a member replaced under the same name, a new container, has a new
 * address; an open connection is reused meanwhile, so this costs nothing
 * per request). 0, or -1 if libcurl refused one. */
int curl_peer_connection(CURL *e, long connect_ms, long total_ms);

/* TLS to a peer: a private CA trusted alone (not the system's CAs beside
 * it), a client certificate and key (PEM); NULL or "" for none. libcurl
 * reads the files when it connects. 0, or -1. */
int curl_peer_tls(CURL *e, const char *ca_file, const char *cert_file, const char *key_file);

#endif
