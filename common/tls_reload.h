/*
 * tls_reload.h — what SIGHUP does in both programs: read the --tls-* files
 * again and serve the connections that open from then on with them (open
 * connections keep theirs). A file that cannot be read or checked leaves
 * the current certificate in place; either way one log line says what
 * happened.
 */
#ifndef PERCOLATOR_TLS_RELOAD_H
#define PERCOLATOR_TLS_RELOAD_H

#include "httpd.h"

/* The files as the flags name them ("" or NULL: not given). 0 when the new
 * certificate is served, -1 otherwise (logged). */
int tls_reload(httpd *server, const char *cert_file, const char *key_file,
               const char *client_ca_file);

#endif
