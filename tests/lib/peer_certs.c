/*
 * peer_certs.c — see peer_certs.h. One shell script through system(), as
 * tests/integration/test_tls.c makes its certificates.
 */
#include "peer_certs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

_Static_assert(TL_PEER_MEMBERS == 3, "the script below makes member1..3");

/* Run in the target directory. ca NAME, leaf NAME CA IP. */
static const char PEER_CERTS_SH[] =
    "set -e\n"
    "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \"$1\"; }\n"
    "ca() { key $1.key; openssl req -x509 -new -key $1.key -subj /CN=$1 -days 2 -out $1.crt"
    " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign; }\n"
    "leaf() { key $1.key; openssl req -new -key $1.key -subj /CN=$1 -out $1.csr;"
    " printf 'basicConstraints=critical,CA:FALSE\\nkeyUsage=critical,digitalSignature\\n"
    "extendedKeyUsage=serverAuth,clientAuth\\nsubjectAltName=IP:%s\\n' $3 > $1.ext;"
    " openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial -days 2"
    " -extfile $1.ext -out $1.crt; }\n"
    "ca peer-ca; ca other-ca\n"
    "for n in 1 2 3; do leaf member$n peer-ca 127.0.0.$n; done\n"
    "leaf stranger other-ca 127.0.0.1\n";

/* dir/name into out. */
static void path(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* Every path of pc, from pc->dir (copied: snprintf's source must not be
 * part of the object it writes). */
static void fill_paths(tl_peer_certs *pc)
{
    char dir[sizeof pc->dir];
    memcpy(dir, pc->dir, sizeof dir);
    path(pc->ca, sizeof pc->ca, dir, "peer-ca.crt");
    path(pc->ca_key, sizeof pc->ca_key, dir, "peer-ca.key");
    for (int i = 0; i < TL_PEER_MEMBERS; i++) {
        char name[32];
        snprintf(name, sizeof name, "member%d.crt", i + 1);
        path(pc->cert[i], sizeof pc->cert[i], dir, name);
        snprintf(name, sizeof name, "member%d.key", i + 1);
        path(pc->key[i], sizeof pc->key[i], dir, name);
    }
    path(pc->other_ca, sizeof pc->other_ca, dir, "other-ca.crt");
    path(pc->stranger_cert, sizeof pc->stranger_cert, dir, "stranger.crt");
    path(pc->stranger_key, sizeof pc->stranger_key, dir, "stranger.key");
}

int tl_peer_certs_make(tl_peer_certs *pc, const char *dir)
{
    memset(pc, 0, sizeof *pc);
    if (system("command -v openssl >/dev/null") != 0) {
        fprintf(stderr, "peer_certs: openssl is not installed (make deps installs it)\n");
        return -1;
    }
    if (dir == NULL) {
        char *d = tl_mkdtemp("peer-certs");
        if (d == NULL)
            return -1;
        snprintf(pc->dir, sizeof pc->dir, "%s", d);
        free(d);
        pc->own_dir = true;
    } else {
        snprintf(pc->dir, sizeof pc->dir, "%s", dir);
    }
    char script[600], cmd[1400];
    path(script, sizeof script, pc->dir, "peer-certs.sh");
    if (tl_write_file(script, PEER_CERTS_SH, sizeof PEER_CERTS_SH - 1) != 0)
        return -1;
    snprintf(cmd, sizeof cmd, "cd '%s' && sh peer-certs.sh > peer-certs.log 2>&1", pc->dir);
    if (system(cmd) != 0) {
        path(cmd, sizeof cmd, pc->dir, "peer-certs.log");
        tl_dump_file(cmd);
        return -1;
    }
    fill_paths(pc);
    return 0;
}

void tl_peer_certs_remove(tl_peer_certs *pc)
{
    if (pc->own_dir && pc->dir[0])
        tl_rmtree(pc->dir);
    pc->own_dir = false;
}
