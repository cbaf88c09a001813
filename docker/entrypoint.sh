#!/bin/sh
# percolator-entrypoint: runs the program the container's command names,
# `percolator-service` (the default) or `percolator-oracle`, with container
# defaults; any other command (sh, ...) runs as it is.
#  - PERCOLATOR_LISTEN, when unset, is 0.0.0.0:8090 for the oracle and
#    0.0.0.0:8080 for the service (a --listen flag still wins).
#  - For the service, a non-empty token file at /run/secrets/auth_token turns
#    on bearer-token auth (PERCOLATOR_AUTH_TOKEN_FILE), unless that variable
#    is already set. docker/compose.yml mounts $PERCOLATOR_AUTH_TOKEN_FILE
#    there, or /dev/null (no auth).
set -eu
case "${1:-}" in
    '' | -*) set -- percolator-service "$@" ;;
esac
case "$1" in
    percolator-oracle | */percolator-oracle)
        port=8090 ;;
    percolator-service | */percolator-service)
        port=8080
        secret=/run/secrets/auth_token
        if [ -z "${PERCOLATOR_AUTH_TOKEN_FILE:-}" ]; then
            if [ -s "$secret" ]; then
                export PERCOLATOR_AUTH_TOKEN_FILE="$secret"
            elif [ -f "$secret" ]; then
                echo "percolator-entrypoint: $secret is empty: put a token in it, or mount nothing there" >&2
                exit 2
            fi
        fi ;;
    *)
        exec "$@" ;;
esac
if [ -z "${PERCOLATOR_LISTEN:-}" ]; then
    export PERCOLATOR_LISTEN="0.0.0.0:$port"
fi
exec "$@"
