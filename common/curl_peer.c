/*
 * curl_peer.c — see curl_peer.h.
 */
#include "curl_peer.h"

#include <stdbool.h>

static bool given(const char *s)
{
    return s != NULL && s[0] != '\0';
}

int curl_peer_connection(CURL *e, long connect_ms, long total_ms)
{
    bool ok = curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, total_ms) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_DNS_CACHE_TIMEOUT, 0L) == CURLE_OK;
    return ok ? 0 : -1;
}

int curl_peer_tls(CURL *e, const char *ca_file, const char *cert_file, const char *key_file)
{
    if (given(ca_file) && (curl_easy_setopt(e, CURLOPT_CAINFO, ca_file) != CURLE_OK ||
                           curl_easy_setopt(e, CURLOPT_CAPATH, NULL) != CURLE_OK))
        return -1;
    if (given(cert_file) && (curl_easy_setopt(e, CURLOPT_SSLCERT, cert_file) != CURLE_OK ||
                             curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM") != CURLE_OK))
        return -1;
    if (given(key_file) && (curl_easy_setopt(e, CURLOPT_SSLKEY, key_file) != CURLE_OK ||
                            curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM") != CURLE_OK))
        return -1;
    return 0;
}
