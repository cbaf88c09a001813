#!/usr/bin/env bash
# bench/soak.sh — the replicated service under mixed load for a long run,
# its tail latency window by window: do images, elections of nobody, the
# janitor or GC stall it now and then (issue #28, "no stalls")?
#   ours  three percolator-service members (--sync fsync) over three
#         percolator-oracle members as a Raft group, as users deploy it,
#         with their default image, janitor and GC settings (SOAK_FLAGS:
#         more service flags); preloaded with SOAK_KEYS keys (default
#         20,000);
#   load  for SOAK_SECONDS (default 600), three load generators at once at
#         the leader: writes of fresh keys (SOAK_PUT_CONNS connections,
#         default 16), point reads (SOAK_GET_CONNS, 16) and 2-key
#         transactions (SOAK_TXN_CONNS, 8); each reports p50, p99 and p99.9
#         per SOAK_WINDOW seconds (default 10).
# Printed: a line per window (each workload's rate and p99), then per
# workload the median window's p99, the worst window's and their ratio,
# against SOAK_LIMIT (default 2: no window's p99 above twice the median
# window's); the images the leader took. The p99 per window is drawn in
# build/bench-plots/soak-p99.png (gnuplot, installed when missing; the
# picture never fails the run). A benchmark reports: the exit status is 0
# whatever the figures, 1 when something did not run. Every process it
# starts is stopped by PID at exit.
set -u
cd "$(dirname "$0")/.."

. bench/need-etcd.sh # need_debian, for gnuplot
. bench/plot.sh
if [ -z "${PERCOLATOR_BIN_DIR:-}" ]; then # run by hand: build what it needs
  make --no-print-directory -s bench-tools || exit 1
  export PERCOLATOR_BIN_DIR=$PWD/bin BENCH_BIN_DIR=$PWD/build/plain/bench
fi
. bench/lib.sh
[ -x "$LG" ] || die "$LG not built (make bench-tools builds it)"
DURATION=${SOAK_SECONDS:-600}
WINDOW=${SOAK_WINDOW:-10}
KEYS=${SOAK_KEYS:-20000}
LIMIT=${SOAK_LIMIT:-2}
PUT_CONNS=${SOAK_PUT_CONNS:-16} GET_CONNS=${SOAK_GET_CONNS:-16} TXN_CONNS=${SOAK_TXN_CONNS:-8}
read -r -a EXTRA <<<"${SOAK_FLAGS:-}"

echo "soak: three members over a three-member oracle group, ${DURATION} s of mixed load, p99 per ${WINDOW} s window"
machine
start_oracle_group
service_group_ports
for i in 1 2 3; do start_member "$i" "${EXTRA[@]}"; done
wait_leader
echo "preloading $KEYS keys through the leader (member $L)..."
preload "$SVC_URL" pc 0 "$KEYS"
metric() { curl -fsS --max-time 2 "$SVC_URL/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
images0=$(metric percolator_raft_snapshots_total)

# The three at once, each with its windows (kv lines) in its own file.
LGS=()
run() { # NAME WORKLOAD CONNS
  "$LG" --url "$SVC_URL" --workload "$2" --conns "$3" --keys "$KEYS" --seconds "$DURATION" \
    --window "$WINDOW" --format kv >"$TMP/$1.out" 2>"$TMP/$1.err" &
  LGS+=("$!"); PIDS+=("$!")
}
run put pc-put "$PUT_CONNS"
run get pc-get "$GET_CONNS"
run txn pc-txn "$TXN_CONNS"
ok=1
for p in "${LGS[@]}"; do wait "$p" || ok=0; done
[ "$ok" = 1 ] || { tail -3 "$TMP"/*.err; die "a load generator failed"; }
images=""
[ -z "$images0" ] || images=$(( $(metric percolator_raft_snapshots_total) - images0 ))

# windows: NAME FIELD: the field of every window line, in order
windows() { sed -nE "s/^window=[0-9]+ .*$2=([0-9.]+).*/\1/p" "$TMP/$1.out"; }
DATA=$TMP/soak.data # start_s put_p99 get_p99 txn_p99
paste -d' ' <(sed -nE 's/^window=[0-9]+ start_s=([0-9]+).*/\1/p' "$TMP/put.out") \
  <(windows put p99_ms) <(windows get p99_ms) <(windows txn p99_ms) >"$DATA"
printf '%8s  %10s %9s  %10s %9s  %10s %9s\n' window put/s "p99 ms" get/s "p99 ms" txn/s "p99 ms"
paste -d' ' <(cut -d' ' -f1 "$DATA") <(windows put ops_s) <(windows put p99_ms) \
  <(windows get ops_s) <(windows get p99_ms) <(windows txn ops_s) <(windows txn p99_ms) |
  awk '{ printf "%7ss  %10s %9s  %10s %9s  %10s %9s\n", $1, $2, $3, $4, $5, $6, $7 }'
echo
printf '%-22s %12s %12s %12s %8s  %s\n' workload "median p99" "worst p99" "worst at" ratio "(limit ${LIMIT}x)"
for w in put get txn; do
  med=$(windows "$w" p99_ms | median)
  worst=$(windows "$w" p99_ms | sort -g | tail -1)
  at=$(paste -d' ' <(cut -d' ' -f1 "$DATA") <(windows "$w" p99_ms) | sort -k2 -g | tail -1 | cut -d' ' -f1)
  ratio=$(calc "$worst / $med")
  over=$(windows "$w" p99_ms | awk -v m="$med" -v l="$LIMIT" '$1 > m * l {n++} END {print n + 0}')
  errors=$(windows "$w" errors | awk '{s += $1} END {print s + 0}')
  printf '%-22s %12s %12s %11ss %8s  %s\n' "$w ($(windows "$w" ops_s | median)/s)" "$med" "$worst" "$at" "${ratio}x" \
    "$over window(s) above; $errors error(s)"
done
echo "images taken by the leader during the run: ${images:-not reported}; load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
PLOT_DIR=${BENCH_PLOT_DIR:-$PWD/build/bench-plots}
if need_gnuplot soak && mkdir -p "$PLOT_DIR"; then
  plot_windows "$DATA" "$PLOT_DIR/soak-p99.png" \
    "soak: p99 per ${WINDOW} s window, three members over a three-member oracle group ($(date -u '+%Y-%m-%d'))"
fi
echo "command: SOAK_SECONDS=$DURATION SOAK_WINDOW=$WINDOW SOAK_KEYS=$KEYS SOAK_PUT_CONNS=$PUT_CONNS SOAK_GET_CONNS=$GET_CONNS SOAK_TXN_CONNS=$TXN_CONNS${SOAK_FLAGS:+ SOAK_FLAGS=\"$SOAK_FLAGS\"} bash bench/soak.sh"
