#!/usr/bin/env bash
# bench/pd.sh — the placement driver under 1,000 simulated service nodes
# reporting 100 regions each (issue #27, DESIGN §6.3): three
# percolator-oracle members as a Raft group, as users deploy it, and
# bench/pd_bench.c at its leader, with the members' CPU and memory.
#
#   bench/pd.sh                  (make bench-pd)
#   PD_NODES=1000 PD_REGIONS=100 PD_INTERVAL_MS=10000 PD_SECONDS=60
#   PD_SPLIT_RATE=2 PD_CONNS=16 PD_SATURATE_SECONDS=10 bench/pd.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
PB=$BENCH_BIN/pd_bench
[ -x "$PB" ] || die "$PB missing: make bench-tools"
machine
start_oracle_group
LEADER=""
for _ in $(seq 100); do
  for u in ${ORACLE_URL//,/ }; do
    if curl -fsS --max-time 1 "$u/v1/health" 2>/dev/null | grep -q '"role": *"leader"'; then LEADER=$u; break 2; fi
  done
  sleep 0.1
done
[ -n "$LEADER" ] || die "the oracle group elected no leader"
pids=()
for p in "${PIDS[@]}"; do pids+=(--pid "$p"); done
echo "oracle group: $ORACLE_URL (leader $LEADER; pids ${PIDS[*]}, the leader's first below is member $(
  i=1; for u in ${ORACLE_URL//,/ }; do [ "$u" = "$LEADER" ] && echo $i; i=$((i + 1)); done))"
"$PB" --url "$LEADER" --nodes "${PD_NODES:-1000}" --regions "${PD_REGIONS:-100}" \
  --interval-ms "${PD_INTERVAL_MS:-10000}" --seconds "${PD_SECONDS:-60}" \
  --split-rate "${PD_SPLIT_RATE:-2}" --conns "${PD_CONNS:-16}" \
  --saturate-seconds "${PD_SATURATE_SECONDS:-10}" "${pids[@]}"
curl -fsS "$LEADER/v1/health" | sed 's/^/leader health: /'
echo
du -sh "$TMP"/oracle1 "$TMP"/oracle2 "$TMP"/oracle3 | sed 's/^/data dir: /'
