#!/usr/bin/env bash
# bench/tls.sh — point reads (GET /v1/kv/{key}) over HTTPS against plain
# HTTP, keep-alive, with the curl command line as the client (bench/loadgen
# speaks no TLS): `curl -Z` runs TLS_REQUESTS requests over up to
# TLS_CONNS connections it keeps open, and the row is requests / wall time.
# curl costs far more CPU per request than the service does, so the rates
# are the client's as much as the server's; the last column, the service's
# own CPU time per request (from /proc/PID/stat, 10 ms ticks), is the
# server's cost alone. One oracle, two services on it (plain, TLS), a throwaway CA
# made with openssl, everything on free loopback ports in a temp dir,
# stopped by PID.
#
#   bench/tls.sh                        # TLS_REQUESTS=20000 TLS_CONNS=16 TLS_RUNS=3
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
REQS=${TLS_REQUESTS:-20000}
CONNS=${TLS_CONNS:-16}
RUNS=${TLS_RUNS:-3}

[ -x "$LG" ] || die "$LG missing: make bench-tools"
command -v openssl >/dev/null || die "openssl is not installed"

(
  cd "$TMP"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key
  openssl req -x509 -new -key ca.key -subj /CN=bench-ca -days 1 -out ca.crt \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out server.key
  openssl req -new -key server.key -subj /CN=127.0.0.1 -out server.csr
  printf 'subjectAltName=IP:127.0.0.1\n' >server.ext
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
    -extfile server.ext -out server.crt
) >"$TMP/certs.log" 2>&1 || { cat "$TMP/certs.log"; die "openssl failed"; }

start_percolator
PLAIN=$SVC_URL
PLAIN_PID=$SVC_PID
sp=$(free_port)
"$BIN/percolator-service" --listen "127.0.0.1:$sp" --data-dir "$TMP/tls" \
  --oracle "$ORACLE_URL" --log-level warn \
  --tls-cert-file "$TMP/server.crt" --tls-key-file "$TMP/server.key" >"$TMP/tls.log" 2>&1 &
TLS_PID=$!
PIDS+=("$TLS_PID")
TLS="https://127.0.0.1:$sp"
for _ in $(seq 200); do
  curl -fsS --cacert "$TMP/ca.crt" -o /dev/null "$TLS/v1/health" 2>/dev/null && break
  sleep 0.1
done
curl -fsS --cacert "$TMP/ca.crt" -o /dev/null "$TLS/v1/health" || { cat "$TMP/tls.log"; die "the TLS service did not start"; }
for u in "$PLAIN" "$TLS"; do
  curl -fsS --cacert "$TMP/ca.crt" -o /dev/null -X PUT "$u/v1/kv/k00000001" \
    -H 'Content-Type: application/json' -d '{"value":"0123456789abcdef"}'
done

# cpu_ticks PID: user + system clock ticks the process has used.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# row NAME URL PID RUN: requests/s of REQS GETs over CONNS keep-alive
# connections, the connections the service saw opened, and the service's
# own CPU time per request.
row() {
  local cfg="$TMP/urls.$1" t0 t1 rate k0 k1
  awk -v n="$REQS" -v u="$2/v1/kv/k00000001" \
    'BEGIN { for (i = 0; i < n; i++) print "url = \"" u "\"\noutput = /dev/null" }' >"$cfg"
  c0=$(conns_opened "$2")
  k0=$(cpu_ticks "$3")
  t0=$(date +%s.%N)
  curl -sS --no-progress-meter -Z --parallel-max "$CONNS" --cacert "$TMP/ca.crt" \
    -w '%{http_code}\n' -K "$cfg" >"$TMP/codes" 2>"$TMP/curl.err" || true
  t1=$(date +%s.%N)
  k1=$(cpu_ticks "$3")
  ok=$(grep -c '^200$' "$TMP/codes" || true)
  [ "$ok" = "$REQS" ] || { head -5 "$TMP/curl.err"; die "$1: $ok of $REQS requests answered 200"; }
  rate=$(echo "$REQS / ($t1 - $t0)" | bc)
  printf '%-34s %10s %12s %14s\n' "$1, run $4" "$rate" "$(($(conns_opened "$2") - c0 - 1))" \
    "$(echo "($k1 - $k0) * 1000000 / $(getconf CLK_TCK) / $REQS" | bc)"
}

# conns_opened URL: the service's percolator_http_connections_total (this
# request's connection included).
conns_opened() {
  curl -fsS --cacert "$TMP/ca.crt" "$1/metrics" | awk '$1 == "percolator_http_connections_total" { print $2 }'
}

echo "GET /v1/kv/{key}, $REQS requests, $CONNS keep-alive connections (curl -Z), $(nproc) CPUs shared"
printf '%-34s %10s %12s %14s\n' "row" "requests/s" "connections" "server us/req"
for r in $(seq "$RUNS"); do
  row "http" "$PLAIN" "$PLAIN_PID" "$r"
  row "https (TLS 1.3, P-256)" "$TLS" "$TLS_PID" "$r"
done
