#!/usr/bin/env bash
# make run: start the oracle (and the service, once it is built) on
# 127.0.0.1 with data under ./data; Ctrl-C (or SIGTERM) stops both cleanly.
# Only the PIDs started here are ever signalled.
set -u
cd "$(dirname "$0")/.."
BIN="${PERCOLATOR_BIN_DIR:-bin}"
ORACLE_LISTEN="${ORACLE_LISTEN:-127.0.0.1:8090}"
SERVICE_LISTEN="${SERVICE_LISTEN:-127.0.0.1:8080}"
mkdir -p data/oracle data/service

pids=()
stop() {
  trap - INT TERM
  echo "run.sh: stopping ${pids[*]}"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  exit "${1:-0}"
}
trap stop INT TERM

"$BIN/percolator-oracle" --listen "$ORACLE_LISTEN" --data-dir data/oracle &
pids+=($!)

# Wait (bounded) for the oracle before starting what depends on it.
for _ in $(seq 1 100); do
  curl -fsS "http://$ORACLE_LISTEN/v1/health" >/dev/null 2>&1 && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "run.sh: the oracle did not start"; exit 1; }
  sleep 0.1
done

if [ -x "$BIN/percolator-service" ]; then
  "$BIN/percolator-service" --listen "$SERVICE_LISTEN" --data-dir data/service \
    --oracle "http://$ORACLE_LISTEN" &
  pids+=($!)
  echo "run.sh: oracle on http://$ORACLE_LISTEN, service on http://$SERVICE_LISTEN (Ctrl-C stops both)"
else
  echo "run.sh: oracle on http://$ORACLE_LISTEN (percolator-service is not built yet; Ctrl-C stops)"
fi

# Stay until a program exits or we are told to stop.
while :; do
  for p in "${pids[@]}"; do
    if ! kill -0 "$p" 2>/dev/null; then
      # Its status says why: 70 is a storage failure (docs/DESIGN.md §4.4, §4.7).
      wait "$p" 2>/dev/null; rc=$?
      echo "run.sh: process $p exited with status $rc; stopping the rest"
      stop "$rc"
    fi
  done
  sleep 1 & wait $!
done
