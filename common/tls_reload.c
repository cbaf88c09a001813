/*
 * tls_reload.c — SIGHUP: the TLS files read again (see tls_reload.h).
 */
#include "tls_reload.h"

#include "log.h"
#include "tls.h"

int tls_reload(httpd *server, const char *cert_file, const char *key_file,
               const char *client_ca_file)
{
    char err[512];
    tls_pem pem;
    if (tls_pem_load(cert_file, key_file, client_ca_file, &pem, err, sizeof err) != 0) {
        log_error("tls: SIGHUP: the certificate in use stays: %s", err);
        return -1;
    }
    if (pem.cert == NULL) {
        log_info("tls: SIGHUP: not serving TLS, nothing to reload");
        return -1;
    }
    int rc = httpd_tls_reload(server, pem.cert, pem.key, pem.client_ca, err, sizeof err);
    if (rc != 0)
        log_error("tls: SIGHUP: the certificate in use stays: %s", err);
    else
        log_info("tls: SIGHUP: new connections get the certificate in %s%s%s", cert_file,
                 pem.client_ca ? " and the client CAs in " : "",
                 pem.client_ca ? client_ca_file : "");
    tls_pem_free(&pem); /* the server copied what it needs */
    return rc;
}
