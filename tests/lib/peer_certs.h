/*
 * peer_certs.h — certificates for a Raft group's peer TLS
 * (--peer-cert-file, --peer-key-file, --peer-trusted-ca-file), made by
 * openssl in a directory (EC P-256 keys, valid two days):
 *
 *  - a CA;
 *  - per member N (1..TL_PEER_MEMBERS) a leaf the CA signed, with
 *    subjectAltName IP:127.0.0.N and extendedKeyUsage serverAuth and
 *    clientAuth (a member is server and client to the others);
 *  - a second CA nobody trusts, and a leaf of its own for IP:127.0.0.1
 *    (same usages): a stranger's certificate that looks right.
 */
#ifndef PC_TL_PEER_CERTS_H
#define PC_TL_PEER_CERTS_H

#include <stdbool.h>

#define TL_PEER_MEMBERS 3

typedef struct {
    char dir[512];          /* where the files are */
    bool own_dir;           /* made by tl_peer_certs_make: removed by _remove */
    char ca[600];           /* the trusted CA's certificate (PEM) */
    char ca_key[600];       /* and its key, to sign more */
    char cert[TL_PEER_MEMBERS][600]; /* member i+1's certificate, IP:127.0.0.(i+1) */
    char key[TL_PEER_MEMBERS][600];  /* and its key */
    char other_ca[600];     /* the untrusted CA's certificate */
    char stranger_cert[600];/* its leaf for IP:127.0.0.1 */
    char stranger_key[600];
} tl_peer_certs;

/* Make the files in dir (NULL: a fresh temp dir of its own). 0, or -1
 * (openssl missing or failing: its log is printed). */
int tl_peer_certs_make(tl_peer_certs *pc, const char *dir);

/* Remove the temp dir if tl_peer_certs_make made it (files in a caller's
 * dir are left to the caller). */
void tl_peer_certs_remove(tl_peer_certs *pc);

#endif
