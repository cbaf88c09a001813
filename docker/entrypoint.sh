#!/bin/sh
# percolator-entrypoint: runs the program the container's command names,
# `percolator-service` (the default) or `percolator-oracle`, with container
# defaults; any other command (the client `percolator`, sh, ...) runs as it is.
#  - PERCOLATOR_LISTEN, when unset, is 0.0.0.0:8090 for the oracle and
#    0.0.0.0:8080 for the service (a --listen flag still wins).
#  - For the service, a non-empty token file at /run/secrets/auth_token turns
#    on bearer-token auth (PERCOLATOR_AUTH_TOKEN_FILE), unless that variable
#    is already set. docker/compose.yml mounts $PERCOLATOR_AUTH_TOKEN_FILE
#    there (a compose secret), or /dev/null (no auth).
#  - A non-empty /run/secrets/oracle_token is the oracle's token: the
#    oracle asks for it (its PERCOLATOR_AUTH_TOKEN_FILE), the service sends
#    it (PERCOLATOR_ORACLE_TOKEN_FILE); /dev/null or nothing: off.
#  - For either program, host names in PERCOLATOR_RAFT_PEERS become IPv4
#    addresses (libraft takes only those): docker/compose.raft.yml and
#    docker/compose.cluster.yml name the members by service name. It waits
#    until every name resolves (the other members' containers may not be
#    up yet), at most PERCOLATOR_RAFT_RESOLVE_WAIT seconds (default 120).
set -eu

# use_secret FILE VAR: export VAR=FILE when FILE holds something and VAR is
# unset; an empty regular file is a mistake (exit 2).
use_secret() {
    if [ -n "$(eval "echo \${$2:-}")" ]; then return 0; fi
    if [ -s "$1" ]; then
        export "$2=$1"
    elif [ -f "$1" ]; then
        echo "percolator-entrypoint: $1 is empty: put a token in it, or mount nothing there" >&2
        exit 2
    fi
}

# resolve_peers ID=HOST:PORT,...: the same list with each HOST an IPv4
# address, or exit 2 when a name does not resolve in time.
resolve_peers() {
    out=""
    deadline=$(( $(date +%s) + ${PERCOLATOR_RAFT_RESOLVE_WAIT:-120} ))
    old_ifs=$IFS
    IFS=,
    for entry in $1; do
        id=${entry%%=*}
        hostport=${entry#*=}
        host=${hostport%:*}
        port=${hostport##*:}
        case "$host" in
            *[!0-9.]*)
                while ! ip=$(getent ahostsv4 "$host" | awk 'NR == 1 { print $1 }') || [ -z "$ip" ]; do
                    if [ "$(date +%s)" -ge "$deadline" ]; then
                        echo "percolator-entrypoint: raft member $id: $host does not resolve to an IPv4 address" >&2
                        exit 2
                    fi
                    sleep 1
                done
                host=$ip ;;
        esac
        out="$out${out:+,}$id=$host:$port"
    done
    IFS=$old_ifs
    echo "$out"
}
case "${1:-}" in
    '' | -*) set -- percolator-service "$@" ;;
esac
case "$1" in
    percolator-oracle | */percolator-oracle)
        port=8090
        use_secret /run/secrets/oracle_token PERCOLATOR_AUTH_TOKEN_FILE ;;
    percolator-service | */percolator-service)
        port=8080
        use_secret /run/secrets/auth_token PERCOLATOR_AUTH_TOKEN_FILE
        use_secret /run/secrets/oracle_token PERCOLATOR_ORACLE_TOKEN_FILE ;;
    *)
        exec "$@" ;;
esac
if [ -n "${PERCOLATOR_RAFT_PEERS:-}" ]; then
    peers=$(resolve_peers "$PERCOLATOR_RAFT_PEERS")
    export PERCOLATOR_RAFT_PEERS="$peers"
fi
if [ -z "${PERCOLATOR_LISTEN:-}" ]; then
    export PERCOLATOR_LISTEN="0.0.0.0:$port"
fi
exec "$@"
