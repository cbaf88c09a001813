#!/usr/bin/env bash
# make run: start the oracle and the service on 127.0.0.1 with data under
# ./data; Ctrl-C (or SIGTERM) stops both cleanly. Only the PIDs started here
# are ever signalled.
#
#   ORACLE_LISTEN   the oracle's host:port   (default 127.0.0.1:8090)
#   SERVICE_LISTEN  the service's host:port  (default 127.0.0.1:8080)
#   RUN_DATA_DIR    where both keep their data (default ./data)
#
# Exit status: 0 after a stop asked for (both programs stopped cleanly);
# 1 when a program could not start (its port is taken, its data dir is in
# use by another run, ...), or the exit status of a program that ended by
# itself (70: a storage failure, docs/DESIGN.md §4.7). Through `make run`,
# make reports a non-zero status as "run] Error N" and exits 2 itself.
set -u
cd "$(dirname "$0")/.."
BIN="${PERCOLATOR_BIN_DIR:-bin}"
ORACLE_LISTEN="${ORACLE_LISTEN:-127.0.0.1:8090}"
SERVICE_LISTEN="${SERVICE_LISTEN:-127.0.0.1:8080}"
DATA="${RUN_DATA_DIR:-data}"
mkdir -p "$DATA/oracle" "$DATA/service"

pids=()
names=()
stop() {
  trap - INT TERM HUP
  local rc=${1:-0} i st
  echo "run.sh: stopping ${pids[*]}"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" 2>/dev/null
    st=$?
    if [ "$st" != 0 ] && [ "$rc" = 0 ]; then
      echo "run.sh: ${names[$i]} exited with status $st"
      rc=$st
    fi
  done
  exit "$rc"
}
# Ctrl-C, SIGTERM, or the terminal went away (SIGHUP: the programs take
# it as "reload TLS", so it is not passed on): stop both.
trap 'stop 0' INT TERM HUP

# Someone already answers there (another `make run`?): say so, start nothing.
for a in "$ORACLE_LISTEN" "$SERVICE_LISTEN"; do
  if curl -fsS --max-time 2 -o /dev/null "http://$a/v1/health" 2>/dev/null; then
    echo "run.sh: something already answers on http://$a (another make run?); set ORACLE_LISTEN / SERVICE_LISTEN to other ports" >&2
    exit 1
  fi
done

# start NAME URL PROGRAM ARGS...: start it and wait (bounded) until it
# answers its health; exit 1 if it ends first or never answers.
start() {
  local name=$1 url=$2
  shift 2
  "$@" &
  local pid=$!
  pids+=("$pid")
  names+=("$name")
  for _ in $(seq 1 300); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      echo "run.sh: the $name did not start (exit status $?; its message is above)" >&2
      stop 1
    fi
    curl -fsS --max-time 2 -o /dev/null "$url/v1/health" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "run.sh: the $name did not answer on $url within 30 s" >&2
  stop 1
}

start oracle "http://$ORACLE_LISTEN" \
  "$BIN/percolator-oracle" --listen "$ORACLE_LISTEN" --data-dir "$DATA/oracle"
start service "http://$SERVICE_LISTEN" \
  "$BIN/percolator-service" --listen "$SERVICE_LISTEN" --data-dir "$DATA/service" \
  --oracle "http://$ORACLE_LISTEN"
echo "run.sh: oracle on http://$ORACLE_LISTEN, service on http://$SERVICE_LISTEN, data in $DATA (Ctrl-C stops both)"

# Stay until a program exits or we are told to stop.
while :; do
  for i in "${!pids[@]}"; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
      wait "${pids[$i]}"
      st=$?
      echo "run.sh: the ${names[$i]} (pid ${pids[$i]}) exited with status $st; stopping the rest" >&2
      stop $((st == 0 ? 1 : st))
    fi
  done
  sleep 1 & wait $!
done
