#!/bin/sh
# percolator-healthcheck: the image's HEALTHCHECK. The service's readiness,
# GET /v1/ready (503 while it cannot commit: the oracle is unreachable), or
# the oracle's GET /v1/health, of the program this container runs (PID 1);
# healthy on a 2xx answer. The address
# is a --listen flag on PID 1's command line, else PERCOLATOR_LISTEN, else
# the program's default (oracle 8090, service 8080), as in the programs.
# With PERCOLATOR_TLS_CERT_FILE (or --tls-cert-file) the program speaks HTTPS: the probe
# does too, without checking the certificate (it sends nothing secret to
# 127.0.0.1, it only asks whether the program answers), and shows
# PERCOLATOR_HEALTHCHECK_CERT_FILE / _KEY_FILE when the program requires
# client certificates (mutual TLS).
set -eu
prog=""
listen=""
prev=""
first=1
tls=""
if [ -n "${PERCOLATOR_TLS_CERT_FILE:-}" ]; then tls=1; fi
if [ -r /proc/1/cmdline ]; then
    while IFS= read -r a; do
        if [ "$first" = 1 ]; then
            case "$a" in
                *percolator-oracle) prog=oracle ;;
                *percolator-service) prog=service ;;
            esac
            first=0
        fi
        case "$a" in
            --listen=*) flag="${a#--listen=}" ;;
            --tls-cert-file=?*) tls=1 ;;
        esac
        if [ "$prev" = "--listen" ]; then flag="$a"; fi
        if [ "$prev" = "--tls-cert-file" ] && [ -n "$a" ]; then tls=1; fi
        prev="$a"
    done <<END
$(tr '\0' '\n' </proc/1/cmdline)
END
fi
case "$prog" in
    oracle) listen="0.0.0.0:8090" ;;
    service) listen="0.0.0.0:8080" ;;
esac
if [ -n "${PERCOLATOR_LISTEN:-}" ]; then listen="$PERCOLATOR_LISTEN"; fi
if [ -n "${flag:-}" ]; then listen="$flag"; fi
if [ -z "$listen" ]; then
    # Not started by the entrypoint (e.g. an init as PID 1): try both.
    for port in 8080 8090; do
        curl -fsS --max-time 4 -o /dev/null "http://127.0.0.1:$port/v1/health" 2>/dev/null && exit 0
    done
    echo "percolator-healthcheck: no percolator program answers on 8080 or 8090" >&2
    exit 1
fi
path=/v1/health
if [ "$prog" = service ]; then path=/v1/ready; fi
port="${listen##*:}"
host="${listen%:*}"
if [ -n "$tls" ]; then
    case "$host" in
        '' | 0.0.0.0 | '*' | '[::]' | '::') host=127.0.0.1 ;;
    esac
    set -- --insecure
    if [ -n "${PERCOLATOR_HEALTHCHECK_CERT_FILE:-}" ]; then
        set -- "$@" --cert "$PERCOLATOR_HEALTHCHECK_CERT_FILE" --key "${PERCOLATOR_HEALTHCHECK_KEY_FILE:-}"
    fi
    exec curl -fsS --max-time 4 -o /dev/null "$@" "https://$host:$port${path:-/v1/health}"
fi
case "$host" in
    '' | 0.0.0.0 | '*' | '[::]' | '::') host=127.0.0.1 ;;
esac
exec curl -fsS --max-time 4 -o /dev/null "http://$host:$port$path"
