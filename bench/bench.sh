#!/usr/bin/env bash
# bench/bench.sh — `make bench`: the service and the oracle under load.
#
# BENCH_QUICK=1 runs only rows 1-3 at 64 connections.
# Starts percolator-oracle and percolator-service (--sync fsync, fresh temp
# data dir, free loopback ports), preloads keys, and runs each workload for
# BENCH_SECONDS (default 5) per row at 1, 16 and 64 connections with the
# epoll load generator bench/loadgen.c, printing ops/s and p50/p99 latency.
# Then: the service's resident size while 1,000,000 keys load, read and
# write throughput at 10,000 vs 1,000,000 keys (two services, alternating
# runs), the oracle (one and 1,000
# timestamps a request), and an empty libmicrohttpd server for scale.
# Client and servers share the machine's CPUs.
set -u
cd "$(dirname "$0")/.."
. bench/lib.sh
[ -x "$LG" ] || die "$LG not built (make bench builds it)"

CACHE=${BENCH_CACHE:-256MB}
CONNS=(1 16 64)
declare -A OPS P99

hdr() { printf "\n%s\n%-50s %5s %11s %9s %9s  %s\n" "$1" "row" "conns" "ops/s" "p50 ms" "p99 ms" "notes"; }
# row LABEL URL WORKLOAD CONNS [loadgen args...]: run and print one row
row() {
  local label=$1 url=$2 wl=$3 c=$4 note=""
  shift 4
  run_lg "$url" "$wl" "$c" --tag "$wl-$c-$RANDOM$RANDOM" "$@"
  [ "$R_ABORT" != "0.0000" ] && note="aborts $(awk -v a="$R_ABORT" 'BEGIN{printf "%.1f%%", 100*a}')"
  [ "$R_ERR" != 0 ] && note="$note ERRORS $R_ERR"
  printf "%-50s %5s %11.0f %9.2f %9.2f  %s\n" "$label" "$c" "$R_OPS" "$R_P50" "$R_P99" "$note"
  OPS["$wl/$c/$label"]=$R_OPS
  P99["$wl/$c/$label"]=$R_P99
  LAST_OPS=$R_OPS
}

echo "percolator benchmark (make bench), $SECS s per row"
machine
echo "servers:  percolator-oracle, percolator-service --sync fsync --cache-size $CACHE (default --threads), 127.0.0.1"
echo "client:   $LG (epoll, keep-alive, one request in flight per connection, 1 thread)"

start_percolator --cache-size "$CACHE"
U=$SVC_URL

# --- 100,000 keys: the main table ---------------------------------------
preload "$U" pc 0 100000
"$LG" --url "$U" --workload pc-hot --hot 10 --format kv >/dev/null || die "hot keys"
hdr "workloads, 100,000 keys preloaded (load $(cut -d' ' -f1 /proc/loadavg))"
# BENCH_QUICK=1: rows 1-3 at 64 connections only (a before/after check).
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  row "1. point read GET /v1/kv/{key}" "$U" pc-get 64 --keys 100000
  row "2. autocommit write PUT /v1/kv/{key}" "$U" pc-put 64
  row "3. one-shot txn POST /v1/txn (1 cond, 2 writes)" "$U" pc-txn 64 --keys 100000
  exit 0
fi
for c in "${CONNS[@]}"; do row "1. point read GET /v1/kv/{key}" "$U" pc-get "$c" --keys 100000; done
for c in "${CONNS[@]}"; do row "2. autocommit write PUT /v1/kv/{key}" "$U" pc-put "$c"; done
for c in "${CONNS[@]}"; do row "3. one-shot txn POST /v1/txn (1 cond, 2 writes)" "$U" pc-txn "$c" --keys 100000; done
for c in "${CONNS[@]}"; do row "4. session txn (begin, 2 reads, 2 writes, commit)" "$U" pc-session "$c" --keys 100000; done
row "5. contended transfers, 10 hot keys (session)" "$U" pc-xfer 64 --hot 10
row "5b. contended transfers, 10 hot keys (read+CAS)" "$U" pc-xfer-cas 64 --hot 10
echo "(ops/s: requests for 1-3, transactions for 4, commits for 5; aborts: aborted / attempted)"

# --- 1,000,000 keys: resident size while loading, then the large end ----
echo
echo "memory: loading keys 100,000..1,000,000 (--cache-size $CACHE)"
# load_sampling PID URL FROM TO: preload while sampling PID's resident
# size every 0.2 s; sets RSS_MAX (KiB) and LOAD_S.
load_sampling() {
  local pid=$1 url=$2 t0 t1
  rm -f "$TMP/load.done" "$TMP/rss.max"
  ( max=0; while kill -0 "$pid" 2>/dev/null && [ ! -e "$TMP/load.done" ]; do
      r=$(rss_kb "$pid"); [ "$r" -gt "$max" ] && max=$r; echo "$max" >"$TMP/rss.max"; sleep 0.2
    done ) &
  local sampler=$!
  t0=$(date +%s.%N)
  preload "$url" pc "$3" "$4"
  t1=$(date +%s.%N)
  touch "$TMP/load.done"; wait "$sampler" 2>/dev/null
  RSS_MAX=$(cat "$TMP/rss.max" 2>/dev/null || echo 0)
  LOAD_S=$(calc "$t1 - $t0")
}
rss0=$(rss_kb "$SVC_PID")
load_sampling "$SVC_PID" "$U" 100000 1000000
rssmax=$RSS_MAX
du_kb=$(du -sk "$TMP/service" | cut -f1)
printf "  loaded 900,000 keys in %.1f s (%.0f keys/s)\n" "$LOAD_S" "$(calc "900000 / $LOAD_S")"
printf "  service resident size: %d MiB before, %d MiB peak while loading, %d MiB after; cache %s; data dir %d MiB\n" \
  $((rss0 / 1024)) $((rssmax / 1024)) $(($(rss_kb "$SVC_PID") / 1024)) "$CACHE" $((du_kb / 1024))
# The same 1,000,000 keys into a service whose cache is far smaller than
# the data: the resident size follows the cache setting, not the data.
SMALL_CACHE=${BENCH_SMALL_CACHE:-64MB}
MAIN_URL=$SVC_URL MAIN_PID=$SVC_PID
start_service tight --cache-size "$SMALL_CACHE"
load_sampling "$SVC_PID" "$SVC_URL" 0 1000000
printf "  with --cache-size %s: %d MiB peak while loading 1,000,000 keys (data dir %d MiB)\n" \
  "$SMALL_CACHE" $((RSS_MAX / 1024)) $(($(du -sk "$TMP/tight" | cut -f1) / 1024))
TIGHT_MAX=$RSS_MAX
kill -TERM "$SVC_PID"; wait "$SVC_PID" 2>/dev/null
SVC_URL=$MAIN_URL SVC_PID=$MAIN_PID

# --- how cost grows: 10,000 vs 1,000,000 keys ---------------------------
# A second service (same flags, same oracle) holds 10,000 keys; runs
# alternate between the two so that both see the same machine.
BIG=$U BIG_PID=$SVC_PID
start_service small --cache-size "$CACHE"
SMALL=$SVC_URL
preload "$SMALL" pc 0 10000
RUNS=${SCALING_RUNS:-3}
hdr "scaling: 10,000 vs 1,000,000 keys preloaded, $RUNS alternating runs each"
: >"$TMP/scale"
for r in $(seq "$RUNS"); do
  row "point read, 10k keys" "$SMALL" pc-get 64 --keys 10000;       echo "g10 $LAST_OPS" >>"$TMP/scale"
  row "point read, 1M keys" "$BIG" pc-get 64 --keys 1000000;        echo "g1m $LAST_OPS" >>"$TMP/scale"
  row "autocommit write, 10k keys" "$SMALL" pc-put 64;               echo "w10 $LAST_OPS" >>"$TMP/scale"
  row "autocommit write, 1M keys" "$BIG" pc-put 64;                  echo "w1m $LAST_OPS" >>"$TMP/scale"
done
med() { awk -v k="$1" '$1 == k {print $2}' "$TMP/scale" | median; }
printf "  medians: point read %.0f (10k) vs %.0f (1M) ops/s, autocommit write %.0f vs %.0f ops/s\n" \
  "$(med g10)" "$(med g1m)" "$(med w10)" "$(med w1m)"
printf "  1M/10k throughput ratio: point read %.2f, autocommit write %.2f (near 1: cost does not grow with size)\n" \
  "$(calc "$(med g1m) / $(med g10)")" "$(calc "$(med w1m) / $(med w10)")"
printf "  resident size of the 1M-key service after these runs: %d MiB (cache %s)\n" \
  $(($(rss_kb "$BIG_PID") / 1024)) "$CACHE"

# --- the oracle -----------------------------------------------------------
hdr "6. oracle POST /v1/timestamps (ops/s = requests/s)"
for c in "${CONNS[@]}"; do row "timestamps, count=1" "$ORACLE_URL" oracle "$c" --count 1; done
for c in 16 64; do
  row "timestamps, count=1000 (batched)" "$ORACLE_URL" oracle "$c" --count 1000
  printf "%-50s %5s %11.0f timestamps/s\n" "" "$c" "$(calc "$LAST_OPS * 1000")"
  TS64=$(calc "$LAST_OPS * 1000")
done

# --- the oracle as a three-member Raft group, through its leader ---------
# Same rows against the leader of a group on loopback (each member's raft
# on its own 127.0.1.x, data in the temp dir): every batch is a command a
# quorum commits (an fsync on two members), so batching decides the rate.
RP=() RH=() RPIDS=()
for i in 1 2 3; do RP+=("$(free_port)"); RH+=("$(free_port)"); done
PEERS="1=127.0.1.1:${RP[0]},2=127.0.1.2:${RP[1]},3=127.0.1.3:${RP[2]}"
URLS="1=http://127.0.0.1:${RH[0]},2=http://127.0.0.1:${RH[1]},3=http://127.0.0.1:${RH[2]}"
for i in 0 1 2; do
  "$BIN/percolator-oracle" --listen "127.0.0.1:${RH[$i]}" --data-dir "$TMP/raft$i" \
    --raft-id $((i + 1)) --raft-peers "$PEERS" --raft-urls "$URLS" --log-level warn \
    >"$TMP/raft$i.log" 2>&1 &
  RPIDS+=("$!"); PIDS+=("$!")
  wait_http "http://127.0.0.1:${RH[$i]}/v1/health" "$!" || die "raft member $((i + 1)) did not start"
done
LEADER_URL=""
for _ in $(seq 100); do
  for i in 0 1 2; do
    curl -fsS "http://127.0.0.1:${RH[$i]}/v1/health" 2>/dev/null | grep -q '"role":"leader"' &&
      LEADER_URL="http://127.0.0.1:${RH[$i]}"
  done
  [ -n "$LEADER_URL" ] && break
  sleep 0.1
done
[ -n "$LEADER_URL" ] || die "the oracle group elected no leader"
hdr "6b. oracle as a 3-member Raft group, through the leader"
for c in 1 16 64; do row "raft group, count=1" "$LEADER_URL" oracle "$c" --count 1; done
row "raft group, count=1000 (batched)" "$LEADER_URL" oracle 64 --count 1000
printf "%-50s %5s %11.0f timestamps/s\n" "" 64 "$(calc "$LAST_OPS * 1000")"
RAFT_TS64=$(calc "$LAST_OPS * 1000")
for p in "${RPIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done

# --- an empty libmicrohttpd server, for scale ----------------------------
mp=$(free_port)
"$BENCH_BIN/mhd_empty" "$mp" 2 >"$TMP/mhd.log" 2>&1 &
MHD_PID=$!; PIDS+=("$MHD_PID")
wait_http "http://127.0.0.1:$mp/" "$MHD_PID" || die "mhd_empty did not start"
hdr "empty libmicrohttpd handler (epoll, pool of 2, fixed 150-byte JSON)"
for c in "${CONNS[@]}"; do row "GET, fixed answer" "http://127.0.0.1:$mp" plain "$c" --path /; done
E64=$LAST_OPS

echo
echo "targets (64 connections):"
printf "  point read vs empty libmicrohttpd: %.0f vs %.0f req/s, empty/ours = %.2f (target: at most 2)\n" \
  "${OPS["pc-get/64/1. point read GET /v1/kv/{key}"]}" "$E64" \
  "$(calc "$E64 / ${OPS["pc-get/64/1. point read GET /v1/kv/{key}"]}")"
printf "  oracle, batched: %.0f timestamps/s (target: at least 2,000,000); as a 3-member Raft group: %.0f\n" "$TS64" "$RAFT_TS64"
printf "  resident size while loading 1M keys: peak %d MiB with cache %s, %d MiB with cache %s\n" \
  $((rssmax / 1024)) "$CACHE" $((TIGHT_MAX / 1024)) "$SMALL_CACHE"
echo "  etcd comparison: bench/compare-etcd.sh"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
