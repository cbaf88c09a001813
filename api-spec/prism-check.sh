#!/usr/bin/env bash
# prism-check.sh — the specs checked by a tool users drive the API with:
# Stoplight Prism (@stoplight/prism-cli, pinned in package.json) as a
# validating proxy in front of a real service and a real oracle.
#
# Usage: api-spec/prism-check.sh [exchanges.jsonl...]
#   PERCOLATOR_BIN_DIR  where percolator-oracle and -service are (default bin/)
#
# It starts percolator-oracle and percolator-service from PERCOLATOR_BIN_DIR
# on free ports of 127.0.0.1 with fresh data directories, then
#   prism proxy service.yaml <service> --errors   and
#   prism proxy oracle.yaml  <oracle>  --errors
# (Prism validates each request and each answer against the document;
# --errors turns a violation into an error answer), runs the README's tour
# (between <!-- tour:begin --> and <!-- tour:end -->) through the service's
# Prism, sends the specs' request examples in story order (examples-run.mjs:
# each must be answered 2xx on this fresh store), and replays the requests
# the integration tests recorded through both (prism-replay.mjs). It
# counts from Prism's own logs: every request Prism received is an
# exchange; every "Request terminated with error" and every "Violation:" is
# a violation. First it checks that Prism refuses a
# request the spec forbids. Fails on any violation, on an example not
# answered 2xx, on a tour or a replay that sent nothing, or when a program
# or Prism does not start.
# Everything it starts it stops (by PID), and every wait is bounded.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN=${PERCOLATOR_BIN_DIR:-$ROOT/bin}
PRISM="$HERE/node_modules/.bin/prism"
export SCARF_ANALYTICS=false # Prism's dependency @scarf/scarf: no telemetry

for p in "$BIN/percolator-oracle" "$BIN/percolator-service" "$PRISM"; do
  [ -x "$p" ] || { echo "prism-check: $p missing (make; cd api-spec && npm ci)"; exit 1; }
done

tmp=$(mktemp -d /tmp/prism-check.XXXXXX) || exit 1
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A free port on 127.0.0.1 (the kernel's pick; free again once closed).
free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close();});'
}

# Wait up to $2 tenths of a second until $1 answers /v1/health with 200.
wait_health() {
  for _ in $(seq "$2"); do
    curl -s -o /dev/null -m 1 -w '%{http_code}' "$1/v1/health" 2>/dev/null | grep -q '^200$' && return 0
    sleep 0.1
  done
  return 1
}

start() { # name log command...
  local name=$1 log=$2
  shift 2
  "$@" > "$log" 2>&1 &
  pids+=($!)
}

fail_start() {
  echo "prism-check: $1 did not start; its log:"
  sed 's/^/  /' "$2" | tail -20
  exit 1
}

op=$(free_port) sp=$(free_port) pop=$(free_port) psp=$(free_port)
oracle=http://127.0.0.1:$op service=http://127.0.0.1:$sp
prism_oracle=http://127.0.0.1:$pop prism_service=http://127.0.0.1:$psp

start oracle "$tmp/oracle.log" "$BIN/percolator-oracle" --listen "127.0.0.1:$op" --data-dir "$tmp/oracle"
wait_health "$oracle" 150 || fail_start percolator-oracle "$tmp/oracle.log"
start service "$tmp/service.log" "$BIN/percolator-service" --listen "127.0.0.1:$sp" \
  --data-dir "$tmp/service" --oracle "$oracle" --openapi-file "$HERE/service.yaml"
wait_health "$service" 200 || fail_start percolator-service "$tmp/service.log"
start prism-service "$tmp/prism-service.log" "$PRISM" proxy "$HERE/service.yaml" "$service" \
  --host 127.0.0.1 --port "$psp" --errors
start prism-oracle "$tmp/prism-oracle.log" "$PRISM" proxy "$HERE/oracle.yaml" "$oracle" \
  --host 127.0.0.1 --port "$pop" --errors
wait_health "$prism_service" 600 || fail_start "Prism (service.yaml)" "$tmp/prism-service.log"
wait_health "$prism_oracle" 600 || fail_start "Prism (oracle.yaml)" "$tmp/prism-oracle.log"

# Prism's count of what it received, and of the violations it reported.
received() { grep -c 'Request received' "$1"; }
violations() { grep -cE 'Request terminated with error|Violation:' "$1"; }

# Prism does validate: a body with a field the spec does not allow must
# come back 422 from Prism itself, not reach the service. (Its log line is
# not counted below.)
canary=$(curl -s -m 10 -X PUT "$prism_service/v1/kv/prism-canary" -H 'Content-Type: application/json' \
  -d '{"value":"x","no_such_field":1}' -w ' %{http_code}')
case "$canary" in
  *UNPROCESSABLE_ENTITY*' 422') ;;
  *) echo "prism-check: Prism let through a request the spec forbids: $canary"; exit 1 ;;
esac
base_s=$(received "$tmp/prism-service.log") base_o=$(received "$tmp/prism-oracle.log")
base_v=$(( $(violations "$tmp/prism-service.log") + $(violations "$tmp/prism-oracle.log") ))

# The README tour, pointed at the service's Prism.
sed -n '/<!-- tour:begin -->/,/<!-- tour:end -->/p' "$ROOT/README.md" |
  grep -v -e '^<!--' -e '^```' | sed "s|127\.0\.0\.1:8080|127.0.0.1:$psp|g" > "$tmp/tour.sh"
timeout 120 bash "$tmp/tour.sh" > "$tmp/tour.out" 2>&1
tour=$(( $(received "$tmp/prism-service.log") - base_s ))
rc=0
if [ "$tour" -eq 0 ]; then echo "prism-check: the README tour sent nothing through Prism"; rc=1; fi

# The specs' request examples, in story order, on this fresh store.
before=$(( $(received "$tmp/prism-service.log") + $(received "$tmp/prism-oracle.log") ))
timeout 120 node "$HERE/examples-run.mjs" --service "$prism_service" --oracle "$prism_oracle" || rc=1
examples=$(( $(received "$tmp/prism-service.log") + $(received "$tmp/prism-oracle.log") - before ))

replay=0
if [ $# -gt 0 ]; then
  before=$(( $(received "$tmp/prism-service.log") + $(received "$tmp/prism-oracle.log") ))
  timeout 600 node "$HERE/prism-replay.mjs" --service "$prism_service" --oracle "$prism_oracle" "$@" || rc=1
  replay=$(( $(received "$tmp/prism-service.log") + $(received "$tmp/prism-oracle.log") - before ))
fi

total=$(( $(received "$tmp/prism-service.log") - base_s + $(received "$tmp/prism-oracle.log") - base_o ))
bad=$(( $(violations "$tmp/prism-service.log") + $(violations "$tmp/prism-oracle.log") - base_v ))
if [ "$bad" -gt 0 ]; then
  echo "prism-check: what Prism reported:"
  grep -hE 'Request terminated with error|Violation:' "$tmp/prism-service.log" "$tmp/prism-oracle.log" |
    grep -v 'prism-canary' | head -40 | cut -c1-300 | sed 's/^/  /'
  rc=1
fi
prism_version=$("$PRISM" --version 2>/dev/null)
echo "prism-check: Prism $prism_version: $total exchanges through Prism (README tour $tour, spec examples $examples, replayed $replay), $bad violations"
exit "$rc"
