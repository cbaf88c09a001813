/*
 * tls.h — the server side of TLS for both programs: the certificate files
 * of the --tls-* flags read and checked, the credentials every new
 * connection gets (reloadable), and the rule of mutual TLS (a client must
 * present a certificate signed by a trusted CA).
 *
 * libmicrohttpd does the TLS itself, over GnuTLS, and takes the PEM texts
 * once, at start (httpd_config.tls_*). Two things it does not do:
 *  - require and verify a client's certificate: given a trusted CA it
 *    only asks for one, and accepts a client that sends none or one
 *    signed by anybody;
 *  - change certificates while it runs.
 * So httpd.c hands every new connection's GnuTLS session, before its
 * handshake, to tls_server_attach(): the session gets the current
 * credentials (certificate, key, client CAs) of a tls_server, which
 * tls_server_reload() replaces (SIGHUP), and with client CAs it is told to
 * require a client certificate and verify it during the handshake: such a
 * client never gets to send a request. tls_client_verified() is the
 * second lock, checked before any request is served: it fails closed (a
 * connection whose handshake did not run that verification is refused,
 * also a resumed session; MHD 0.9.75 enables no session resumption).
 */
#ifndef PERCOLATOR_TLS_H
#define PERCOLATOR_TLS_H

#include <stdbool.h>
#include <stddef.h>

#define TLS_MAX_PEM ((size_t)1 << 20) /* a PEM file over 1 MiB is refused */

/* The GnuTLS priorities of every TLS session both programs make, HTTP and
 * Raft peers alike: TLS 1.3 and 1.2 only, and in 1.2 only AEAD ciphers
 * (AES-GCM, ChaCha20-Poly1305) with ephemeral key exchange, so no CBC or
 * SHA-1 suite is ever offered or accepted. */
#define TLS_PRIORITIES                                                              \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM:"           \
    "+AES-128-GCM:+CHACHA20-POLY1305:-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA"

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

/* The same for other flags (the Raft peers' --peer-*): their names,
 * without the dashes, in the reasons. */
typedef struct {
    const char *cert, *key, *ca;
} tls_flag_names;
int tls_pem_load_named(const tls_flag_names *names, const char *cert_file, const char *key_file,
                       const char *client_ca_file, tls_pem *out, char *err, size_t errlen);

/* Check PEM texts: the certificate and key parse and match, the client CA
 * (may be NULL) holds at least one certificate. 0 or -1 with a reason. */
int tls_pem_check(const char *cert, const char *key, const char *client_ca, char *err,
                  size_t errlen);

/* A server's credentials: one generation (certificate, key, client CAs)
 * is current, and new connections get it. A connection uses the
 * generation it started with for its whole life, and nothing tells us
 * reliably when that ends (MHD has cleared a session's credentials by the
 * time it reports the connection closed, and its one per-connection
 * pointer belongs to httpd.c), so earlier generations stay in memory until
 * the server stops: a few KiB each, at most TLS_MAX_RELOADS of them. */
typedef struct tls_server tls_server;

#define TLS_MAX_RELOADS 64 /* then a reload is refused: restart */

/* From PEM texts (client_ca may be NULL), checked as tls_pem_check does.
 * NULL with a reason in err. */
tls_server *tls_server_new(const char *cert, const char *key, const char *client_ca, char *err,
                           size_t errlen);
/* Make new credentials current (new connections get them; open ones keep
 * theirs). On any error, or past TLS_MAX_RELOADS, the current ones stay:
 * 0 or -1 with a reason. */
int tls_server_reload(tls_server *t, const char *cert, const char *key, const char *client_ca,
                      char *err, size_t errlen);
/* A new connection's GnuTLS session (a gnutls_session_t), before its
 * handshake: give it the current credentials and, when they have client
 * CAs, require a client certificate that verifies against them. 0, or -1
 * on failure (the session keeps MHD's credentials, and with client CAs
 * tls_client_verified() refuses it). */
int tls_server_attach(tls_server *t, void *session);
/* The current generation's GnuTLS credentials (a
 * gnutls_certificate_credentials_t: certificate, key, trusted CAs), for a
 * client session of ours (the Raft peer transport connects with them). It
 * stays valid until tls_server_free. */
void *tls_server_credentials(tls_server *t);
/* Free every generation, once no connection is open. NULL is fine. */
void tls_server_free(tls_server *t);
/* Whether the session's handshake verified a client certificate (the
 * verification tls_require_client_cert set up ran and passed). */
bool tls_client_verified(void *session);

/* check(crt, arg) on the first certificate the other end of a verified
 * session presented (a gnutls_x509_crt_t): false without one. */
bool tls_peer_cert_check(void *session, bool (*check)(void *crt, const void *arg),
                         const void *arg);

#endif
