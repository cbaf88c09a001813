#!/bin/sh
# docker/tls-certs.sh DIR — a private CA and the certificates that
# docker/compose.tls.yml mounts, made with openssl (EC P-256, valid
# ${TLS_DAYS:-365} days):
#   ca.crt ca.key            the CA (keep ca.key elsewhere once done)
#   oracle.crt oracle.key    the oracle's server certificate: DNS:oracle, DNS:localhost, IP:127.0.0.1
#   service.crt service.key  the service's: DNS:service, DNS:localhost, IP:127.0.0.1
#   client.crt client.key    a client certificate (the service towards the
#                            oracle, the healthchecks, your curl)
# The keys are made readable by everyone (the programs run as uid 10001 in
# the image): fine for trying TLS out; with real keys, give uid 10001 alone
# read access. Refuses to overwrite an existing ca.key.
set -eu
dir=${1:?usage: docker/tls-certs.sh DIR}
days=${TLS_DAYS:-365}
mkdir -p "$dir"
cd "$dir"
[ ! -e ca.key ] || { echo "tls-certs: $dir/ca.key exists; use another directory" >&2; exit 1; }
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
# leaf NAME EXTENSIONS: a certificate signed by the CA
leaf() {
    key "$1.key"
    openssl req -new -key "$1.key" -subj "/CN=$1" -out "$1.csr"
    printf '%s\n' "$2" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
key ca.key
openssl req -x509 -new -key ca.key -subj /CN=percolator-ca -days "$days" -out ca.crt \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
leaf oracle "subjectAltName=DNS:oracle,DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
leaf service "subjectAltName=DNS:service,DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
leaf client "extendedKeyUsage=clientAuth"
rm -f ca.srl
chmod 0644 oracle.key service.key client.key
chmod 0600 ca.key
echo "tls-certs: made ca, oracle, service and client certificates in $dir"
