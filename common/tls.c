/*
 * tls.c — certificate files, and mutual TLS on GnuTLS sessions (see tls.h).
 */
#include "tls.h"

#include <errno.h>
#include <pthread.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

/* A whole PEM file, NUL-terminated, at most TLS_MAX_PEM bytes. */
static char *read_pem(const char *flag, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "--%s %s: %s", flag, path, strerror(errno));
        return NULL;
    }
    char *data = malloc(TLS_MAX_PEM + 1);
    size_t len = data ? fread(data, 1, TLS_MAX_PEM + 1, f) : 0;
    if (data == NULL)
        snprintf(err, errlen, "--%s %s: out of memory", flag, path);
    else if (ferror(f))
        snprintf(err, errlen, "--%s %s: cannot read it", flag, path);
    else if (len > TLS_MAX_PEM)
        snprintf(err, errlen, "--%s %s: larger than %zu bytes", flag, path, TLS_MAX_PEM);
    else if (len == 0 || memchr(data, '\0', len) != NULL)
        snprintf(err, errlen, "--%s %s: empty, or not a PEM file", flag, path);
    else {
        data[len] = '\0';
        fclose(f);
        return data;
    }
    free(data);
    fclose(f);
    return NULL;
}

static bool given(const char *s)
{
    return s != NULL && s[0] != '\0';
}

static gnutls_datum_t datum(const char *pem)
{
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
    return d;
}

/* One generation of a server's credentials. */
typedef struct tls_gen {
    gnutls_certificate_credentials_t cred;
    bool client_ca;     /* client certificates required */
    struct tls_gen *next;
} tls_gen;

struct tls_server {
    pthread_mutex_t mu; /* guards the list */
    tls_gen *gens;      /* every generation, the current one first */
    unsigned reloads;
};

/* Credentials from PEM texts: the key must be the certificate's, a client
 * CA text must hold a certificate. NULL with a reason. */
static tls_gen *gen_new(const char *cert, const char *key, const char *client_ca, char *err,
                        size_t errlen)
{
    tls_gen *g = calloc(1, sizeof *g);
    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int rc = gnutls_certificate_allocate_credentials(&g->cred);
    if (rc < 0) {
        snprintf(err, errlen, "cannot start GnuTLS: %s", gnutls_strerror(rc));
        free(g);
        return NULL;
    }
    gnutls_datum_t c = datum(cert), k = datum(key);
    rc = gnutls_certificate_set_x509_key_mem(g->cred, &c, &k, GNUTLS_X509_FMT_PEM);
    if (rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH)
        snprintf(err, errlen, "the key does not belong to the certificate");
    else if (rc < 0)
        snprintf(err, errlen, "cannot load the certificate and key: %s", gnutls_strerror(rc));
    if (rc >= 0 && client_ca != NULL) {
        gnutls_datum_t ca = datum(client_ca);
        int n = gnutls_certificate_set_x509_trust_mem(g->cred, &ca, GNUTLS_X509_FMT_PEM);
        if (n <= 0) {
            snprintf(err, errlen, "no CA certificate in the client CA file%s%s",
                     n < 0 ? ": " : "", n < 0 ? gnutls_strerror(n) : "");
            rc = -1;
        }
    }
    if (rc < 0) {
        gnutls_certificate_free_credentials(g->cred);
        free(g);
        return NULL;
    }
    g->client_ca = client_ca != NULL;
    return g;
}

static void gen_free(tls_gen *g)
{
    gnutls_certificate_free_credentials(g->cred);
    free(g);
}

int tls_pem_check(const char *cert, const char *key, const char *client_ca, char *err,
                  size_t errlen)
{
    tls_gen *g = gen_new(cert, key, client_ca, err, errlen);
    if (g == NULL)
        return -1;
    gen_free(g);
    return 0;
}

tls_server *tls_server_new(const char *cert, const char *key, const char *client_ca, char *err,
                           size_t errlen)
{
    tls_server *t = calloc(1, sizeof *t);
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if ((t->gens = gen_new(cert, key, client_ca, err, errlen)) == NULL ||
        pthread_mutex_init(&t->mu, NULL) != 0) {
        if (t->gens != NULL) {
            snprintf(err, errlen, "cannot make a mutex");
            gen_free(t->gens);
        }
        free(t);
        return NULL;
    }
    return t;
}

int tls_server_reload(tls_server *t, const char *cert, const char *key, const char *client_ca,
                      char *err, size_t errlen)
{
    pthread_mutex_lock(&t->mu);
    unsigned reloads = t->reloads;
    pthread_mutex_unlock(&t->mu);
    if (reloads >= TLS_MAX_RELOADS) {
        snprintf(err, errlen, "reloaded %u times already: restart to reload again", reloads);
        return -1;
    }
    tls_gen *g = gen_new(cert, key, client_ca, err, errlen);
    if (g == NULL)
        return -1;
    pthread_mutex_lock(&t->mu);
    /* The old generations stay: open connections may use them. */
    g->next = t->gens;
    t->gens = g;
    t->reloads++;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

int tls_server_attach(tls_server *t, void *session)
{
    gnutls_session_t s = session;
    if (s == NULL)
        return -1;
    pthread_mutex_lock(&t->mu);
    tls_gen *g = t->gens;
    pthread_mutex_unlock(&t->mu);
    if (gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, g->cred) < 0)
        return -1;
    if (g->client_ca) {
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
        /* Verified against g's client CAs during the handshake; no host
         * name to match for a client. */
        gnutls_session_set_verify_cert(s, NULL, 0);
    }
    return 0;
}

void *tls_server_credentials(tls_server *t)
{
    pthread_mutex_lock(&t->mu);
    tls_gen *g = t->gens;
    pthread_mutex_unlock(&t->mu);
    return g->cred;
}

void tls_server_free(tls_server *t)
{
    if (t == NULL)
        return;
    while (t->gens != NULL) {
        tls_gen *g = t->gens;
        t->gens = g->next;
        gen_free(g);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* An expired (or not yet valid) certificate of our own is the operator's
 * to fix, not a reason to refuse to start: clients refuse it and say so. */
static void warn_if_expired(const char *path, const char *pem)
{
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0)
        return;
    gnutls_datum_t d = datum(pem);
    if (gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM) >= 0) {
        time_t now = time(NULL);
        time_t end = gnutls_x509_crt_get_expiration_time(crt);
        time_t start = gnutls_x509_crt_get_activation_time(crt);
        if (end != (time_t)-1 && end < now)
            log_warn("tls: the certificate in %s expired (clients will refuse it)", path);
        else if (start != (time_t)-1 && start > now)
            log_warn("tls: the certificate in %s is not valid yet (clients will refuse it)", path);
    }
    gnutls_x509_crt_deinit(crt);
}

int tls_pem_load(const char *cert_file, const char *key_file, const char *client_ca_file,
                 tls_pem *out, char *err, size_t errlen)
{
    static const tls_flag_names http = {"tls-cert-file", "tls-key-file", "tls-client-ca-file"};
    return tls_pem_load_named(&http, cert_file, key_file, client_ca_file, out, err, errlen);
}

int tls_pem_load_named(const tls_flag_names *names, const char *cert_file, const char *key_file,
                       const char *client_ca_file, tls_pem *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (given(cert_file) != given(key_file)) {
        snprintf(err, errlen, "--%s and --%s go together: give both or neither", names->cert,
                 names->key);
        return -1;
    }
    if (given(client_ca_file) && !given(cert_file)) {
        snprintf(err, errlen, "--%s needs --%s and --%s", names->ca, names->cert, names->key);
        return -1;
    }
    if (!given(cert_file))
        return 0; /* plain HTTP */
    char why[256];
    if ((out->cert = read_pem(names->cert, cert_file, err, errlen)) == NULL ||
        (out->key = read_pem(names->key, key_file, err, errlen)) == NULL ||
        (given(client_ca_file) &&
         (out->client_ca = read_pem(names->ca, client_ca_file, err, errlen)) == NULL))
        goto fail;
    if (tls_pem_check(out->cert, out->key, out->client_ca, why, sizeof why) != 0) {
        snprintf(err, errlen, "--%s %s, --%s %s%s%s%s%s: %s", names->cert, cert_file, names->key,
                 key_file, out->client_ca ? ", --" : "", out->client_ca ? names->ca : "",
                 out->client_ca ? " " : "", out->client_ca ? client_ca_file : "", why);
        goto fail;
    }
    warn_if_expired(cert_file, out->cert);
    return 0;
fail:
    tls_pem_free(out);
    return -1;
}

void tls_pem_free(tls_pem *p)
{
    if (p == NULL)
        return;
    free(p->cert);
    free(p->key);
    free(p->client_ca);
    memset(p, 0, sizeof *p);
}

bool tls_peer_cert_check(void *session, bool (*check)(void *crt, const void *arg),
                         const void *arg)
{
    unsigned n = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers(session, &n);
    gnutls_x509_crt_t crt;
    if (certs == NULL || n == 0 || gnutls_x509_crt_init(&crt) < 0)
        return false;
    bool ok = gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) >= 0 && check(crt, arg);
    gnutls_x509_crt_deinit(crt);
    return ok;
}

bool tls_client_verified(void *session)
{
    gnutls_session_t s = session;
    unsigned n = 0;
    /* (unsigned)-1 until a verification ran, then 0 only if it passed. */
    return s != NULL && gnutls_certificate_get_peers(s, &n) != NULL && n > 0 &&
           gnutls_session_get_verify_cert_status(s) == 0;
}
