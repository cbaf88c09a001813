#!/usr/bin/env bash
# bench/watch.sh — the change feed under load (make bench-watch): a single
# node (oracle + service, --sync fsync), W watchers following one prefix
# while writers put fresh keys under it at R writes a second (open loop);
# each row: writes acknowledged/s and their p50/p99, the share of
# (watchers × acknowledged writes) delivered, delivery latency p50/p99/max
# (from the write's send to the line's arrival at a watcher), watchers
# that ended early, the service's RSS after the row. Then the autocommit
# write row (loadgen pc-put) with and without 1,000 watchers of every key.
#
#   WATCH_ROWS="0:2000 100:2000 1000:1000 1000:2000" WATCH_SECONDS=10 bash bench/watch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
WT=$BENCH_BIN/watchers
ROWS=${WATCH_ROWS:-"0:2000 100:2000 1000:1000 1000:2000 1000:5000"}
WSECS=${WATCH_SECONDS:-10}
[ -x "$WT" ] || die "$WT missing: make bench-tools"
machine
echo
echo "command:  WATCH_ROWS=\"$ROWS\" WATCH_SECONDS=$WSECS bash bench/watch.sh"
echo
echo "| watchers | rate/s | writes acked/s | write p50 ms | write p99 ms | delivered | delivery p50 ms | p99 ms | max ms | ended | service RSS MiB |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for row in $ROWS; do
  w=${row%%:*} rate=${row##*:}
  start_percolator --watch-max 5000 --max-connections-per-ip 6000 --max-connections 6000
  "$WT" --url "$SVC_URL" --watchers "$w" --writers 32 --rate "$rate" --seconds "$WSECS" \
    --pid "$SVC_PID" --prefix "wb/" 2>"$TMP/watchers.err" || { cat "$TMP/watchers.err"; die "watchers failed"; }
  cleanup || true
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/percolator-bench.XXXXXX")
done
echo
echo "Autocommit writes (loadgen pc-put, 64 connections, ${SECS} s) with N watchers of every key:"
echo
echo "| watchers of every key | writes/s | p50 ms | p99 ms |"
echo "|---:|---:|---:|---:|"
for w in 0 100 1000; do
  start_percolator --watch-max 5000 --max-connections-per-ip 6000 --max-connections 6000
  if [ "$w" -gt 0 ]; then
    "$WT" --url "$SVC_URL" --watchers "$w" --writers 1 --rate 1 --seconds $((SECS + 4)) \
      --prefix "" >"$TMP/bg.out" 2>&1 &
    BG=$!
    sleep 2
  fi
  run_lg "$SVC_URL" pc-put 64
  echo "| $w | $R_OPS | $R_P50 | $R_P99 |"
  [ "$w" -gt 0 ] && wait "$BG" 2>/dev/null || true
  cleanup || true
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/percolator-bench.XXXXXX")
done
