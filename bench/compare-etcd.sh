#!/usr/bin/env bash
# bench/compare-etcd.sh — percolator-service and etcd side by side, same
# load generator (bench/loadgen.c), same connection counts and durations.
#
# Installs Debian's etcd-server if missing (as root; else prints the
# apt-get line), builds what it needs (make bench-tools), starts a single
# etcd on 127.0.0.1 (free ports, data in a temp dir, WAL fsync on: etcd's
# default) and percolator (oracle + service --sync fsync), preloads 100,000
# keys and 10 hot keys into both, then for every row alternates runs:
# percolator, etcd, percolator, etcd ... (COMPARE_RUNS each, default 2;
# BENCH_SECONDS per run, default 5) and prints the median of each side
# (rate, p50, p99, p99.9; the percentiles also drawn per row in
# build/bench-plots/single-latency.png with gnuplot, installed if missing).
# COMPARE_ONLY="write txn" keeps the rows whose label has one of the words;
# COMPARE_CONNS="64" the connection counts (default 1 16 64).
#   point read    GET /v1/kv/{key}         vs POST /v3/kv/range (linearizable)
#   write         PUT /v1/kv/{key}         vs POST /v3/kv/put
#   2-key txn     POST /v1/txn (exists condition on a, write a and b)
#                                          vs POST /v3/kv/txn (version(a) > 0, put a, put b)
#   transfer      10 hot keys: read a, read b, conditional txn on both
#                 (commit_ts / mod_revision), move 1 from a to b: commits/s
set -u
cd "$(dirname "$0")/.."

. bench/need-etcd.sh
. bench/plot.sh
need_etcd compare-etcd || exit 1
BUILD=${BUILD:-build/plain}
BINDIR=${BINDIR:-bin}
make --no-print-directory -s bench-tools BUILD="$BUILD" BINDIR="$BINDIR" || exit 1
export PERCOLATOR_BIN_DIR=$PWD/$BINDIR BENCH_BIN_DIR=$PWD/$BUILD/bench
. bench/lib.sh
RUNS=${COMPARE_RUNS:-2}

echo "percolator vs etcd, $SECS s per run, $RUNS alternating runs per side, median shown"
machine
echo "etcd:     $(etcd --version 2>/dev/null | head -1), single node, HTTP/JSON gateway, WAL fsync on"
echo "ours:     percolator-service --sync fsync (default flags otherwise) + percolator-oracle"

start_percolator
ep=$(free_port); pp=$(free_port)
etcd --name bench --data-dir "$TMP/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$ep" --advertise-client-urls "http://127.0.0.1:$ep" \
  --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
  --initial-cluster "bench=http://127.0.0.1:$pp" --logger zap --log-level warn \
  >"$TMP/etcd.log" 2>&1 &
ETCD_PID=$!; PIDS+=("$ETCD_PID")
ETCD_URL="http://127.0.0.1:$ep"
wait_http "$ETCD_URL/health" "$ETCD_PID" || { cat "$TMP/etcd.log"; die "etcd did not start"; }

echo "preloading 100,000 keys and 10 hot keys into both..."
preload "$SVC_URL" pc 0 100000
preload "$ETCD_URL" etcd 0 100000
"$LG" --url "$SVC_URL" --workload pc-hot --hot 10 --format kv >/dev/null || die "hot keys"
"$LG" --url "$ETCD_URL" --workload etcd-hot --hot 10 --format kv >/dev/null || die "hot keys (etcd)"

printf "\n%-34s %5s | %9s %7s %7s %8s | %9s %7s %7s %8s | %6s %s\n" "row" "conns" "ours/s" \
  "p50 ms" "p99 ms" "p99.9 ms" "etcd/s" "p50 ms" "p99 ms" "p99.9 ms" "ratio" "target (>=2x, p99 no worse)"
PLOT_DATA=$TMP/latency.dat
: >"$PLOT_DATA"
ROWS=(
  "point read|pc-get|etcd-get|--keys 100000"
  "autocommit write|pc-put|etcd-put|"
  "2-key txn with condition|pc-txn|etcd-txn|--keys 100000"
  "contended transfer (10 hot keys)|pc-xfer-cas|etcd-xfer|--hot 10"
)
for spec in "${ROWS[@]}"; do
  IFS='|' read -r label pcw etw args <<<"$spec"
  # COMPARE_ONLY=WORDS: only rows whose label contains one of the words
  if [ -n "${COMPARE_ONLY:-}" ]; then
    keep=0; for w in $COMPARE_ONLY; do case $label in *"$w"*) keep=1 ;; esac; done
    [ "$keep" = 1 ] || continue
  fi
  for c in ${COMPARE_CONNS:-1 16 64}; do
    : >"$TMP/res.pc"; : >"$TMP/res.etcd"
    for r in $(seq "$RUNS"); do
      # shellcheck disable=SC2086
      run_lg "$SVC_URL" "$pcw" "$c" --tag "p$c$r$RANDOM" $args
      echo "$R_OPS $R_P50 $R_P99 $R_ABORT $R_ERR $R_P999" >>"$TMP/res.pc"
      # shellcheck disable=SC2086
      run_lg "$ETCD_URL" "$etw" "$c" --tag "e$c$r$RANDOM" $args
      echo "$R_OPS $R_P50 $R_P99 $R_ABORT $R_ERR $R_P999" >>"$TMP/res.etcd"
    done
    po=$(cut -d' ' -f1 "$TMP/res.pc" | median); p5=$(cut -d' ' -f2 "$TMP/res.pc" | median); p9=$(cut -d' ' -f3 "$TMP/res.pc" | median)
    eo=$(cut -d' ' -f1 "$TMP/res.etcd" | median); e5=$(cut -d' ' -f2 "$TMP/res.etcd" | median); e9=$(cut -d' ' -f3 "$TMP/res.etcd" | median)
    p99=$(cut -d' ' -f6 "$TMP/res.pc" | median); e99=$(cut -d' ' -f6 "$TMP/res.etcd" | median)
    echo "$label|$c|$p5|$p9|$p99|$e5|$e9|$e99" >>"$PLOT_DATA"
    ratio=$(calc "$po / $eo")
    verdict=$(awk -v r="$ratio" -v a="$p9" -v b="$e9" 'BEGIN { printf "%s", (r >= 2 && a <= b) ? "met" : "NOT met" }')
    note=""
    pa=$(cut -d' ' -f4 "$TMP/res.pc" | median); ea=$(cut -d' ' -f4 "$TMP/res.etcd" | median)
    if [ "$pcw" = pc-xfer-cas ]; then
      note=" (aborts: ours $(calc "100*$pa" | cut -d. -f1)%, etcd $(calc "100*$ea" | cut -d. -f1)%)"
    fi
    perr=$(awk '{s+=$5} END {print s+0}' "$TMP/res.pc"); eerr=$(awk '{s+=$5} END {print s+0}' "$TMP/res.etcd")
    [ "$perr$eerr" != 00 ] && note="$note ERRORS ours $perr etcd $eerr"
    printf "%-34s %5s | %9.0f %7.2f %7.2f %8.2f | %9.0f %7.2f %7.2f %8.2f | %6.2f %s%s\n" \
      "$label" "$c" "$po" "$p5" "$p9" "$p99" "$eo" "$e5" "$e9" "$e99" "$ratio" \
      "$([ "$c" = 64 ] && echo "$verdict")" "$note"
  done
done
echo "(ops/s: requests for reads and writes, committed transactions for txn and transfer;"
echo " ratio = ours / etcd; the targets apply at 64 connections)"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
# The picture: BENCH_PLOT_DIR (default build/bench-plots), kept after the run.
PLOT_DIR=${BENCH_PLOT_DIR:-$PWD/build/bench-plots}
if need_gnuplot compare-etcd && mkdir -p "$PLOT_DIR"; then
  plot_latency "$PLOT_DATA" "$PLOT_DIR/single-latency.png" \
    "a single node each: percolator vs etcd, latency percentiles per row ($(date -u '+%Y-%m-%d'))"
fi
