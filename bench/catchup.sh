#!/usr/bin/env bash
# bench/catchup.sh — how long a wiped follower takes to be back in the
# quorum under sustained writes (issue #23's "catch-up that finishes"), at
# the default snapshot settings unless CATCHUP_FLAGS says otherwise.
#   1. one oracle and three percolator-service members (--sync fsync);
#   2. loadgen writes fresh keys (CATCHUP_VALUE bytes each, default 512) at
#      the leader with CATCHUP_CONNS connections (default 64) for the whole
#      run; CATCHUP_WARM seconds (default 30) to grow the store and the log;
#   3. a follower is killed (-9), its data dir removed, and it is started
#      again 3 s later on the empty dir: a new incarnation that the leader
#      sends its image to, then entries, then promotes (DESIGN §7.3);
#   4. printed: from its restart to "voter" (membership in /v1/health) and
#      to /v1/ready 200, with the images it installed and the lag left;
#   5. then the other follower is killed: printed, how long until the next
#      write is acknowledged (the leader and the member back are a quorum).
# CATCHUP_ROUNDS (default 1) repeats 3-5 (the second follower restarted in
# between). CATCHUP_FLAGS: more service flags (e.g. "--raft-snapshot-entries
# 100000"); CATCHUP_LOGS=DIR keeps the members' logs there; CATCHUP_TRACE=1
# runs the members with libraft's trace (LIBRAFT_TRACE) in their logs.
# Every process it starts is stopped by PID at exit.
set -u
cd "$(dirname "$0")/.."
if [ -z "${PERCOLATOR_BIN_DIR:-}" ]; then
  make --no-print-directory -s bench-tools || exit 1
  export PERCOLATOR_BIN_DIR=$PWD/bin BENCH_BIN_DIR=$PWD/build/plain/bench
fi
. bench/lib.sh
[ -x "$LG" ] || die "$LG not built (make bench-tools builds it)"
CONNS=${CATCHUP_CONNS:-64}
VALUE=${CATCHUP_VALUE:-512}
WARM=${CATCHUP_WARM:-30}
ROUNDS=${CATCHUP_ROUNDS:-1}
read -r -a EXTRA <<<"${CATCHUP_FLAGS:-}"

echo "a wiped follower under writes: $CONNS connections, $VALUE-byte values, ${WARM} s before the wipe, $ROUNDS round(s)"
machine
start_oracle

service_group_ports
MEMBER_LOG_LEVEL=info MEMBER_ENV=${CATCHUP_TRACE:+LIBRAFT_TRACE=1}
health() { curl -fsS --max-time 1 "http://127.0.0.1:${HP[$1]}/v1/health" 2>/dev/null; }
field() { sed -nE "s/.*\"$1\": *(\"([^\"]*)\"|(-?[0-9]+)).*/\2\3/p" | head -1; }
kill_member() { kill -KILL "${MPID[$1]}" 2>/dev/null; wait "${MPID[$1]}" 2>/dev/null; }
for i in 1 2 3; do start_member "$i" "${EXTRA[@]}"; done
wait_leader
LURL="http://127.0.0.1:${HP[$L]}"
TOTAL=$((WARM + ROUNDS * 120))
"$LG" --url "$LURL" --workload pc-put --conns "$CONNS" --seconds "$TOTAL" --value-size "$VALUE" \
  --format kv >"$TMP/load.out" 2>&1 &
LG_PID=$!; PIDS+=("$LG_PID")
sleep "$WARM"
ms() { echo $(( ${EPOCHREALTIME//[.,]/} / 1000 )); }
for r in $(seq "$ROUNDS"); do
  W=$(( L % 3 + 1 )); F=$(( W % 3 + 1 ))
  h=$(health "$L")
  echo "round $r: leader $L applied $(field applied_index <<<"$h"), store $(( $(field store_bytes <<<"$h") / 1048576 )) MiB; member $W wiped"
  kill_member "$W"
  rm -rf "$TMP/svc$W"
  sleep 3
  t0=$(ms); start_member "$W"
  voter="" ready=""
  for _ in $(seq 1200); do # 120 s at most
    h=$(health "$W")
    [ -z "$voter" ] && [ "$(field membership <<<"$h")" = voter ] && voter=$(( $(ms) - t0 ))
    if [ -n "$voter" ] && curl -fsS --max-time 1 -o /dev/null "http://127.0.0.1:${HP[$W]}/v1/ready" 2>/dev/null; then
      ready=$(( $(ms) - t0 )); break
    fi
    sleep 0.1
  done
  installs=$(curl -fsS --max-time 1 "http://127.0.0.1:${HP[$W]}/metrics" | sed -nE 's/^percolator_raft_snapshot_installs_total ([0-9]+).*/\1/p')
  h=$(health "$W"); lh=$(health "$L")
  echo "  member $W: a voter ${voter:-never (120 s)} ms after its restart, ready ${ready:-never} ms; ${installs:-?} image(s) installed; applied $(field applied_index <<<"$h"), the leader $(field applied_index <<<"$lh")"
  [ -n "$ready" ] || { grep -iE "snapshot|image|install" "$TMP/svc$W.log" | tail -5; }
  kill_member "$F"
  t1=$(ms); took=""
  code=""
  for _ in $(seq 600); do
    code=$(curl -sS --max-time 2 -o "$TMP/put.out" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' -d '{"value":"x"}' "$LURL/v1/kv/catchup-$r" 2>&1)
    if [ "$code" = 200 ]; then took=$(( $(ms) - t1 )); break; fi
    [ $(( $(ms) - t1 )) -lt 30000 ] || break
    sleep 0.05
  done
  [ -n "$took" ] || echo "  last answer: $code $(head -c 300 "$TMP/put.out" 2>/dev/null)"
  echo "  member $F then killed: a write acknowledged ${took:-never (30 s)} ms later"
  start_member "$F" "${EXTRA[@]}"
  sleep 5
done
kill -INT "$LG_PID" 2>/dev/null
if [ -n "${CATCHUP_LOGS:-}" ]; then # the members' logs, kept for a look
  mkdir -p "$CATCHUP_LOGS" && cp "$TMP"/*.log "$CATCHUP_LOGS"/ && echo "logs: $CATCHUP_LOGS"
fi
echo "command: CATCHUP_CONNS=$CONNS CATCHUP_VALUE=$VALUE CATCHUP_WARM=$WARM CATCHUP_ROUNDS=$ROUNDS${CATCHUP_FLAGS:+ CATCHUP_FLAGS=\"$CATCHUP_FLAGS\"} bash bench/catchup.sh"
