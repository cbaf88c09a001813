#!/bin/sh
# scripts/peer-certs.sh DIR ID[=IP] ... — certificates for the members of
# one Raft group (README "Raft peers and TLS"), made with openssl (EC P-256,
# valid ${PEER_CERT_DAYS:-365} days):
#   DIR/ca.crt DIR/ca.key            the group's CA (keep ca.key elsewhere
#                                    once done; one CA per group)
#   DIR/member-ID.crt, .key          member ID's certificate: subjectAltName
#                                    DNS:raft-member-ID (and IP:IP when given),
#                                    for TLS server and client alike
# e.g. scripts/peer-certs.sh /etc/percolator/oracle-peers 1=10.0.0.1 2=10.0.0.2 3=10.0.0.3
# Refuses to overwrite an existing ca.key; the keys are readable by their
# owner only.
set -eu
dir=${1:?usage: scripts/peer-certs.sh DIR ID[=IP] ...}
shift
[ $# -gt 0 ] || { echo "usage: scripts/peer-certs.sh DIR ID[=IP] ..." >&2; exit 2; }
days=${PEER_CERT_DAYS:-365}
mkdir -p "$dir"
cd "$dir"
[ ! -e ca.key ] || { echo "peer-certs: $dir/ca.key exists; use another directory" >&2; exit 1; }
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -subj /CN=percolator-raft-ca -days "$days" -out ca.crt \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
for m in "$@"; do
    id=${m%%=*}
    case $id in ''|*[!0-9]*) echo "peer-certs: not a member id: $m" >&2; exit 2 ;; esac
    san="DNS:raft-member-$id"
    [ "$m" = "$id" ] || san="$san,IP:${m#*=}"
    key "member-$id.key"
    openssl req -new -key "member-$id.key" -subj "/CN=raft-member-$id" -out "member-$id.csr"
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' \
        "$san" > "member-$id.ext"
    openssl x509 -req -in "member-$id.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
        -days "$days" -extfile "member-$id.ext" -out "member-$id.crt" 2>/dev/null
    rm -f "member-$id.csr" "member-$id.ext"
done
rm -f ca.srl
chmod 0644 ca.crt member-*.crt
echo "peer-certs: made the CA and $# member certificate(s) in $dir"
