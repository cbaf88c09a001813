/*
 * peer_tls.c — see peer_tls.h.
 */
#include "peer_tls.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "raft_transport.h"

static const tls_flag_names names = {"peer-cert-file", "peer-key-file", "peer-trusted-ca-file"};

/* Who this process is in its group, as peer_tls_open found it: a reload
 * checks the new certificate against it (one member per process). */
static struct {
    unsigned id;
    char host[RAFT_PEER_ADDR_MAX];
} self_named;

static bool given(const char *s)
{
    return s != NULL && s[0] != '\0';
}

/* Whether the PEM certificate names member id at host, as the other
 * members check (raft_transport_cert_names). */
static bool names_member(const char *pem, unsigned id, const char *host)
{
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0)
        return false;
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
    bool ok = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM) >= 0 &&
              raft_transport_cert_names(crt, id, host);
    gnutls_x509_crt_deinit(crt);
    return ok;
}

static void not_named(const char *file, const char *host, unsigned id, char *err, size_t errlen)
{
    snprintf(err, errlen, "--peer-cert-file %s: the certificate names neither IP:%s (this "
                          "member's raft address) nor DNS:raft-member-%u as a subjectAltName, "
                          "so the other members would refuse it", file, host, id);
}

int peer_tls_open(const peer_tls_flags *f, const raft_peer *peers, size_t npeers, unsigned self,
                  tls_server **out, char *err, size_t errlen)
{
    tls_pem pem;
    *out = NULL;
    if (given(f->cert_file) && !given(f->ca_file)) {
        snprintf(err, errlen, "--peer-cert-file needs --peer-trusted-ca-file (members verify "
                              "each other)");
        return -1;
    }
    if (tls_pem_load_named(&names, f->cert_file, f->key_file, f->ca_file, &pem, err, errlen) != 0)
        return -1;
    if (pem.cert == NULL) {
        if (f->insecure || raft_transport_plain_allowed(peers, npeers))
            return 0;
        snprintf(err, errlen, "--raft-peers has addresses outside 127.0.0.0/8: give "
                              "--peer-cert-file, --peer-key-file and --peer-trusted-ca-file "
                              "(or --peer-insecure to run plain TCP between the members)");
        return -1;
    }
    const raft_peer *me = NULL;
    for (size_t i = 0; i < npeers; i++)
        if (peers[i].id == self)
            me = &peers[i];
    char host[RAFT_PEER_ADDR_MAX];
    const char *colon = me ? strrchr(me->raft, ':') : NULL;
    snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - me->raft) : 0, me ? me->raft : "");
    if (!names_member(pem.cert, self, host)) {
        not_named(f->cert_file, host, self, err, errlen);
        tls_pem_free(&pem);
        return -1;
    }
    self_named.id = self;
    snprintf(self_named.host, sizeof self_named.host, "%s", host);
    *out = tls_server_new(pem.cert, pem.key, pem.client_ca, err, errlen);
    tls_pem_free(&pem);
    return *out != NULL ? 0 : -1;
}

void peer_tls_reload(tls_server *t, const peer_tls_flags *f)
{
    char err[512];
    tls_pem pem;
    if (t == NULL)
        return;
    bool ok = tls_pem_load_named(&names, f->cert_file, f->key_file, f->ca_file, &pem, err,
                                 sizeof err) == 0;
    if (ok && pem.cert != NULL && !names_member(pem.cert, self_named.id, self_named.host)) {
        not_named(f->cert_file, self_named.host, self_named.id, err, sizeof err);
        ok = false;
    }
    if (ok)
        ok = tls_server_reload(t, pem.cert, pem.key, pem.client_ca, err, sizeof err) == 0;
    if (!ok)
        log_error("raft peer tls: SIGHUP: the certificate in use stays: %s", err);
    else
        log_info("raft peer tls: SIGHUP: new peer connections get the certificate in %s",
                 f->cert_file);
    tls_pem_free(&pem);
}
