/*
 * tls.h — the server side of TLS for both programs: the certificate files
 * of the --tls-* flags read and checked at start, and the rule of mutual
 * TLS (a client must present a certificate signed by a trusted CA).
 *
 * libmicrohttpd does the TLS itself, over GnuTLS; it takes the PEM texts
 * (httpd_config.tls_*). What it does not do is require and verify a
 * client's certificate: given a trusted CA it only asks for one, and
 * accepts a client that sends none or one signed by anybody. So for every
 * new connection httpd.c calls tls_require_client_cert(), which makes
 * GnuTLS fail the handshake unless the client's certificate verifies:
 * such a client never gets to send a request. tls_client_verified() is the
 * second lock, checked before any request is served: it fails closed (a
 * connection whose handshake did not run that verification is refused,
 * also a resumed session; MHD 0.9.75 enables no session resumption).
 */
#ifndef PERCOLATOR_TLS_H
#define PERCOLATOR_TLS_H

#include <stdbool.h>
#include <stddef.h>

#define TLS_MAX_PEM ((size_t)1 << 20) /* a PEM file over 1 MiB is refused */

typedef struct tls_pem {
    char *cert;       /* the server's certificate (chain), PEM; NULL: TLS off */
    char *key;        /* its private key, PEM */
    char *client_ca;  /* CAs that sign client certificates; NULL: no mutual TLS */
} tls_pem;

/* Read the files the --tls-cert-file, --tls-key-file and
 * --tls-client-ca-file flags name (NULL or "": not given). The certificate
 * and the key go together; a client CA needs them. Each file must be
 * readable and parse, and the key must belong to the certificate. 0 with
 * *out filled (all NULL when none is given: plain HTTP), or -1 with a
 * one-line reason naming the flag in err. */
int tls_pem_load(const char *cert_file, const char *key_file, const char *client_ca_file,
                 tls_pem *out, char *err, size_t errlen);
void tls_pem_free(tls_pem *p);

/* Check PEM texts: the certificate and key parse and match, the client CA
 * (may be NULL) holds at least one certificate. 0 or -1 with a reason. */
int tls_pem_check(const char *cert, const char *key, const char *client_ca, char *err,
                  size_t errlen);

/* Mutual TLS on a connection's GnuTLS session (a gnutls_session_t), before
 * its handshake: require a client certificate and verify it against the
 * session's trusted CAs during the handshake. 0 or -1. */
int tls_require_client_cert(void *session);
/* Whether the session's handshake verified a client certificate (the
 * verification tls_require_client_cert set up ran and passed). */
bool tls_client_verified(void *session);

#endif
