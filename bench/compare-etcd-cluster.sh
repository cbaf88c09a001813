#!/usr/bin/env bash
# bench/compare-etcd-cluster.sh — the replicated service against a
# replicated etcd, on the same machine, same load generator (bench/loadgen.c)
# as bench/compare-etcd.sh:
#   ours   three percolator-service members (--raft-id/--raft-peers, --sync
#          fsync; libraft fsyncs every entry on a quorum) over three
#          percolator-oracle members as a Raft group, as users deploy it
#          (CLUSTER_ORACLE=one: a single oracle); the load goes to the leader
#   etcd   three etcd 3.4 members (Debian's etcd-server, installed when
#          missing; WAL fsync on, its default); the load goes to the leader
# Rows (at each of COMPARE_CONNS connections, default "16 64 256";
# COMPARE_RUNS alternating runs per side, default 2, median shown;
# BENCH_SECONDS per run, default 5; target: COMPARE_TARGET times etcd's
# rate, default 3, with a p99 no worse; p50, p99 and p99.9 of each side,
# also drawn per row in build/bench-plots/cluster-latency.png with gnuplot,
# installed when missing):
#   point read   GET /v1/kv/{key} (a Raft read barrier) vs POST /v3/kv/range
#                (linearizable: etcd's read index)
#   write        PUT /v1/kv/{key} vs POST /v3/kv/put
#   2-key txn    POST /v1/txn (exists condition on a, write a and b) vs
#                POST /v3/kv/txn (version(a) > 0, put a, put b)
#   ... via a follower: the point read and the write sent to a follower of
#                each (ours passes the request on to its leader and relays
#                the answer; etcd's does the same): the cost of the hop
# Both preloaded with CLUSTER_KEYS keys (default 20,000). CLUSTER_PEER_TLS=1:
# the service members talk over mutual TLS (certificates from
# scripts/peer-certs.sh; etcd's peers stay plain). PERCOLATOR_BIN_DIR
# set: use those programs as they are (e.g. an older build, to compare);
# else build them. Every process it starts is stopped by PID at exit.
set -u
cd "$(dirname "$0")/.."

. bench/need-etcd.sh
. bench/plot.sh
need_etcd compare-etcd-cluster || exit 1
if [ -z "${PERCOLATOR_BIN_DIR:-}" ]; then # run by hand: build what it needs
  make --no-print-directory -s bench-tools || exit 1
  export PERCOLATOR_BIN_DIR=$PWD/bin BENCH_BIN_DIR=$PWD/build/plain/bench
fi
. bench/lib.sh
[ -x "$LG" ] || die "$LG not built (make bench-tools builds it)"
RUNS=${COMPARE_RUNS:-2}
TARGET=${COMPARE_TARGET:-3}
KEYS=${CLUSTER_KEYS:-20000}

echo "three-member percolator vs three-member etcd, $SECS s per run, $RUNS alternating runs per side, median shown"
machine
echo "etcd:     $(etcd --version 2>/dev/null | head -1), 3 members, HTTP/JSON gateway, WAL fsync on"
PEER_TLS=${CLUSTER_PEER_TLS:-0}
echo "ours:     3 x percolator-service --raft-id N --sync fsync over $([ "${CLUSTER_ORACLE:-group}" = one ] && echo "one percolator-oracle" || echo "3 x percolator-oracle as a Raft group") ($BIN), peer TLS $([ "$PEER_TLS" = 1 ] && echo on || echo off)"

# --- ours: the oracle (a group of three, or one), three members ---------
ORACLE=${CLUSTER_ORACLE:-group}
if [ "$ORACLE" = one ]; then
  start_oracle
else
  start_oracle_group
fi
service_group_ports
[ "$PEER_TLS" != 1 ] || scripts/peer-certs.sh "$TMP/peers" 1 2 3 >/dev/null || die "cannot make the peer certificates"
for i in 1 2 3; do
  tls=()
  [ "$PEER_TLS" != 1 ] || tls=(--peer-cert-file "$TMP/peers/member-$i.crt" --peer-key-file "$TMP/peers/member-$i.key" --peer-trusted-ca-file "$TMP/peers/ca.crt")
  start_member "$i" "${tls[@]}"
done
wait_leader

# --- etcd: three members -------------------------------------------------
CP=() PP=() EURL=() EPID=()
for i in 1 2 3; do CP[$i]=$(free_port); PP[$i]=$(free_port); EURL[$i]="http://127.0.0.1:${CP[$i]}"; done
CLUSTER="e1=http://127.0.0.1:${PP[1]},e2=http://127.0.0.1:${PP[2]},e3=http://127.0.0.1:${PP[3]}"
for i in 1 2 3; do
  etcd --name "e$i" --data-dir "$TMP/etcd$i" \
    --listen-client-urls "${EURL[$i]}" --advertise-client-urls "${EURL[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${PP[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${PP[$i]}" \
    --initial-cluster "$CLUSTER" --initial-cluster-state new --initial-cluster-token "bench-$$" \
    --logger zap --log-level warn >"$TMP/etcd$i.log" 2>&1 &
  EPID[$i]=$!; PIDS+=("$!")
done
for i in 1 2 3; do wait_http "${EURL[$i]}/health" "${EPID[$i]}" || { cat "$TMP/etcd$i.log"; die "etcd member $i did not start"; }; done
# the leader: the member whose status names itself (bounded: 30 s)
ETCD_URL=""
for _ in $(seq 300); do
  for i in 1 2 3; do
    st=$(curl -fsS --max-time 1 -X POST "${EURL[$i]}/v3/maintenance/status" -d '{}' 2>/dev/null)
    me=$(sed -nE 's/.*"member_id":"([0-9]+)".*/\1/p' <<<"$st"); ld=$(sed -nE 's/.*"leader":"([0-9]+)".*/\1/p' <<<"$st")
    if [ -n "$me" ] && [ "$me" = "$ld" ]; then ETCD_URL=${EURL[$i]}; break 2; fi
  done
  sleep 0.1
done
[ -n "$ETCD_URL" ] || die "no etcd member leads"
ETCD_FOLLOWER=""
for i in 1 2 3; do [ "${EURL[$i]}" = "$ETCD_URL" ] || { ETCD_FOLLOWER=${EURL[$i]}; break; }; done

echo "preloading $KEYS keys into both, through their leaders..."
preload "$SVC_URL" pc 0 "$KEYS"
preload "$ETCD_URL" etcd 0 "$KEYS"

printf "\n%-26s %5s | %9s %7s %7s %8s | %9s %7s %7s %8s | %6s %s\n" "row (3 members each)" "conns" \
  "ours/s" "p50 ms" "p99 ms" "p99.9 ms" "etcd/s" "p50 ms" "p99 ms" "p99.9 ms" "ratio" \
  "target (>=${TARGET}x, p99 no worse)"
PLOT_DATA=$TMP/latency.dat
: >"$PLOT_DATA"
ROWS=(
  "point read|pc-get|etcd-get|--keys $KEYS|leader"
  "autocommit write|pc-put|etcd-put||leader"
  "2-key txn with condition|pc-txn|etcd-txn|--keys $KEYS|leader"
  "point read via a follower|pc-get|etcd-get|--keys $KEYS|follower"
  "write via a follower|pc-put|etcd-put||follower"
)
for spec in "${ROWS[@]}"; do
  IFS='|' read -r label pcw etw args via <<<"$spec"
  pc_url=$SVC_URL etcd_url=$ETCD_URL
  [ "$via" = leader ] || { pc_url=$SVC_FOLLOWER; etcd_url=$ETCD_FOLLOWER; }
  for c in ${COMPARE_CONNS:-16 64 256}; do
    : >"$TMP/res.pc"; : >"$TMP/res.etcd"
    for r in $(seq "$RUNS"); do
      # shellcheck disable=SC2086
      run_lg "$pc_url" "$pcw" "$c" --tag "cp$c$r$RANDOM" $args
      echo "$R_OPS $R_P50 $R_P99 $R_ERR $R_P999" >>"$TMP/res.pc"
      # shellcheck disable=SC2086
      run_lg "$etcd_url" "$etw" "$c" --tag "ce$c$r$RANDOM" $args
      echo "$R_OPS $R_P50 $R_P99 $R_ERR $R_P999" >>"$TMP/res.etcd"
    done
    po=$(cut -d' ' -f1 "$TMP/res.pc" | median); p5=$(cut -d' ' -f2 "$TMP/res.pc" | median); p9=$(cut -d' ' -f3 "$TMP/res.pc" | median)
    eo=$(cut -d' ' -f1 "$TMP/res.etcd" | median); e5=$(cut -d' ' -f2 "$TMP/res.etcd" | median); e9=$(cut -d' ' -f3 "$TMP/res.etcd" | median)
    p99=$(cut -d' ' -f5 "$TMP/res.pc" | median); e99=$(cut -d' ' -f5 "$TMP/res.etcd" | median)
    echo "$label|$c|$p5|$p9|$p99|$e5|$e9|$e99" >>"$PLOT_DATA"
    ratio=$(calc "$po / $eo")
    verdict=$(awk -v r="$ratio" -v t="$TARGET" -v a="$p9" -v b="$e9" 'BEGIN { printf "%s", (r >= t && a <= b) ? "met" : "NOT met" }')
    perr=$(awk '{s+=$4} END {print s+0}' "$TMP/res.pc"); eerr=$(awk '{s+=$4} END {print s+0}' "$TMP/res.etcd")
    note=""
    [ "$perr$eerr" != 00 ] && note=" ERRORS ours $perr etcd $eerr"
    printf "%-26s %5s | %9.0f %7.2f %7.2f %8.2f | %9.0f %7.2f %7.2f %8.2f | %6.2f %s%s\n" \
      "$label" "$c" "$po" "$p5" "$p9" "$p99" "$eo" "$e5" "$e9" "$e99" "$ratio" "$verdict" "$note"
  done
done
M=$(curl -fsS "$SVC_URL/metrics" 2>/dev/null)
metric() { sed -nE "s/^$1 ([0-9.e+]+).*/\1/p" <<<"$M" | head -1; }
inflight=$(metric percolator_raft_proposals_in_flight_max)
batches=$(metric percolator_raft_proposals_total); entries=$(metric percolator_raft_entries_total)
rounds=$(metric percolator_write_batch_size_count); writes=$(metric percolator_write_batch_size_sum)
echo "(ops/s: requests for reads and writes, committed transactions for txn; ratio = ours / etcd;"
echo " the leader's most proposals in flight at once: ${inflight:-not reported};"
echo " Raft's group commit on the leader: ${batches:-?} write batches in ${entries:-?} entries,"
echo " blind writes: ${writes:-?} in ${rounds:-?} rounds (one batch a round))"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
# The picture: BENCH_PLOT_DIR (default build/bench-plots), kept after the run.
PLOT_DIR=${BENCH_PLOT_DIR:-$PWD/build/bench-plots}
if need_gnuplot compare-etcd-cluster && mkdir -p "$PLOT_DIR"; then
  plot_latency "$PLOT_DATA" "$PLOT_DIR/cluster-latency.png" \
    "three members each: percolator vs etcd, latency percentiles per row ($(date -u '+%Y-%m-%d'))"
fi
