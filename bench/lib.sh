# bench/lib.sh — shared by the benchmark scripts (bench/*.sh): start
# servers (single or as Raft groups) on 127.0.0.1 with free ports and temp
# data dirs, run load generator rows, stop everything by PID at exit.
# Sourced, not run.

BIN=${PERCOLATOR_BIN_DIR:-bin}
BENCH_BIN=${BENCH_BIN_DIR:-build/plain/bench}
LG=$BENCH_BIN/loadgen
SECS=${BENCH_SECONDS:-5}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/percolator-bench.XXXXXX")
PIDS=()

cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  PIDS=()
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench: $*" >&2; exit 1; }

free_port() { "$LG" --free-port; }

# wait_http URL PID: poll until URL answers 200 (bounded: 20 s).
wait_http() {
  for _ in $(seq 200); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# start_oracle: one percolator-oracle; sets ORACLE_URL and ORACLE_PID.
start_oracle() {
  local op
  op=$(free_port)
  "$BIN/percolator-oracle" --listen "127.0.0.1:$op" --data-dir "$TMP/oracle" \
    --log-level warn >"$TMP/oracle.log" 2>&1 &
  ORACLE_PID=$!; PIDS+=("$ORACLE_PID")
  ORACLE_URL="http://127.0.0.1:$op"
  wait_http "$ORACLE_URL/v1/health" "$ORACLE_PID" || { cat "$TMP/oracle.log"; die "the oracle did not start"; }
}

# start_percolator [extra service flags...]: one oracle and one service;
# sets ORACLE_URL, SVC_URL, SVC_PID, ORACLE_PID
start_percolator() {
  start_oracle
  start_service service "$@"
}

# start_service NAME [extra service flags...]: one more service on the same
# oracle, data in $TMP/NAME; sets SVC_URL and SVC_PID.
start_service() {
  local name=$1 sp
  shift
  sp=$(free_port)
  "$BIN/percolator-service" --listen "127.0.0.1:$sp" --data-dir "$TMP/$name" \
    --oracle "$ORACLE_URL" --sync fsync --log-level warn "$@" >"$TMP/$name.log" 2>&1 &
  SVC_PID=$!; PIDS+=("$SVC_PID")
  SVC_URL="http://127.0.0.1:$sp"
  wait_http "$SVC_URL/v1/health" "$SVC_PID" || { cat "$TMP/$name.log"; die "the service ($name) did not start"; }
}

# start_oracle_group: three percolator-oracle members as a Raft group, as
# users deploy it; sets ORACLE_URL (their URLs, comma-separated, the form
# --oracle takes).
# wait_voters URL...: until each member's health says it is a voter
# (bounded: 30 s). An initial member that starts after the others wrote
# joins as a new incarnation and is promoted a second or two later
# (DESIGN 7.3); until then the group cannot lose another member.
wait_voters() {
  local u
  for u in "$@"; do
    for _ in $(seq 300); do
      curl -fsS --max-time 1 "$u/v1/health" 2>/dev/null | grep -q '"membership": *"voter"' && continue 2
      sleep 0.1
    done
    die "$u is not a voter of its group 30 s after the start"
  done
}

start_oracle_group() {
  local i oh=() orp=() peers="" urls=""
  ORACLE_URL=""
  for i in 1 2 3; do
    oh[$i]=$(free_port); orp[$i]=$(free_port)
    peers="$peers${peers:+,}$i=127.0.0.1:${orp[$i]}"
    urls="$urls${urls:+,}$i=http://127.0.0.1:${oh[$i]}"
    ORACLE_URL="$ORACLE_URL${ORACLE_URL:+,}http://127.0.0.1:${oh[$i]}"
  done
  for i in 1 2 3; do
    "$BIN/percolator-oracle" --listen "127.0.0.1:${oh[$i]}" --data-dir "$TMP/oracle$i" --log-level warn \
      --raft-id "$i" --raft-peers "$peers" --raft-urls "$urls" >"$TMP/oracle$i.log" 2>&1 &
    PIDS+=("$!")
    wait_http "http://127.0.0.1:${oh[$i]}/v1/health" "$!" || { cat "$TMP/oracle$i.log"; die "oracle member $i did not start"; }
  done
  wait_voters ${ORACLE_URL//,/ }
}

# The three members of a service group: service_group_ports picks their
# ports (HP: HTTP, RP: Raft; PEERS, URLS for --raft-peers/--raft-urls);
# start_member I [flags...] starts member I on $ORACLE_URL (--sync fsync,
# data in $TMP/svcI, log appended to $TMP/svcI.log at MEMBER_LOG_LEVEL,
# default warn; MEMBER_ENV: variables for its environment) and sets
# MPID[I]; wait_leader sets L and SVC_URL to the member that leads and is
# ready for writes (bounded: 30 s), SVC_FOLLOWER to another, once every
# member is a voter (wait_voters).
service_group_ports() {
  local i
  HP=() RP=() MPID=() PEERS="" URLS=""
  for i in 1 2 3; do
    HP[$i]=$(free_port); RP[$i]=$(free_port)
    PEERS="$PEERS${PEERS:+,}$i=127.0.0.1:${RP[$i]}"
    URLS="$URLS${URLS:+,}$i=http://127.0.0.1:${HP[$i]}"
  done
}

start_member() {
  local i=$1
  shift
  env ${MEMBER_ENV:-} "$BIN/percolator-service" --listen "127.0.0.1:${HP[$i]}" --data-dir "$TMP/svc$i" \
    --oracle "$ORACLE_URL" --sync fsync --log-level "${MEMBER_LOG_LEVEL:-warn}" "$@" \
    --raft-id "$i" --raft-peers "$PEERS" --raft-urls "$URLS" >>"$TMP/svc$i.log" 2>&1 &
  MPID[$i]=$!; PIDS+=("$!")
  wait_http "http://127.0.0.1:${HP[$i]}/v1/health" "$!" || { tail -20 "$TMP/svc$i.log"; die "member $i did not start"; }
}

wait_leader() {
  local i u
  L="" SVC_URL="" SVC_FOLLOWER=""
  for _ in $(seq 300); do
    for i in 1 2 3; do
      u="http://127.0.0.1:${HP[$i]}"
      if curl -fsS --max-time 1 "$u/v1/health" 2>/dev/null | grep -q '"role": *"leader"' &&
        curl -fsS --max-time 1 -o /dev/null "$u/v1/ready" 2>/dev/null; then
        L=$i SVC_URL=$u; break 2
      fi
    done
    sleep 0.1
  done
  [ -n "$L" ] || die "no member of the service group leads"
  wait_voters "http://127.0.0.1:${HP[1]}" "http://127.0.0.1:${HP[2]}" "http://127.0.0.1:${HP[3]}"
  SVC_FOLLOWER="http://127.0.0.1:${HP[$(( L % 3 + 1 ))]}"
}

# median: of the numbers on stdin, one a line
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# run_lg URL WORKLOAD CONNS [loadgen args...]: one timed row; sets
# R_OPS R_P50 R_P99 R_P999 R_ABORT R_ERR (from loadgen --format kv).
run_lg() {
  local url=$1 wl=$2 conns=$3 out
  shift 3
  out=$("$LG" --url "$url" --workload "$wl" --conns "$conns" --seconds "$SECS" --format kv "$@") ||
    echo "bench: loadgen failed for $wl at $conns connections" >&2
  R_OPS=$(sed -nE 's/.*ops_s=([0-9.]+).*/\1/p' <<<"$out")
  R_P50=$(sed -nE 's/.*p50_ms=([0-9.]+).*/\1/p' <<<"$out")
  R_P99=$(sed -nE 's/.*p99_ms=([0-9.]+).*/\1/p' <<<"$out")
  R_P999=$(sed -nE 's/.*p999_ms=([0-9.]+).*/\1/p' <<<"$out")
  R_ABORT=$(sed -nE 's/.*abort_rate=([0-9.]+).*/\1/p' <<<"$out")
  R_ERR=$(sed -nE 's/.*errors=([0-9]+).*/\1/p' <<<"$out")
  : "${R_OPS:=0}" "${R_P50:=0}" "${R_P99:=0}" "${R_P999:=0}" "${R_ABORT:=0}" "${R_ERR:=0}"
}

# preload URL pc|etcd FROM TO: keys k%08d in [FROM, TO), batched transactions.
preload() {
  local url=$1 kind=$2 from=$3 to=$4 batch=500
  [ "$kind" = etcd ] && batch=128 # etcd's default --max-txn-ops
  "$LG" --url "$url" --workload "$kind-load" --from "$from" --keys "$to" --batch "$batch" \
    --conns 4 --format kv >"$TMP/load.out" || { cat "$TMP/load.out"; die "preload failed"; }
  grep -q 'errors=0 ' "$TMP/load.out" || { cat "$TMP/load.out"; die "preload had errors"; }
}

# calc EXPR: floating-point arithmetic (awk; no bc needed)
calc() { awk "BEGIN { x = $1; printf \"%.4f\", (x == x ? x : 0) }" 2>/dev/null || echo 0; }

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

machine() {
  echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine:  $(nproc) CPUs ($(sed -nE 's/^model name\s*: (.*)/\1/p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, $(. /etc/os-release; echo "$PRETTY_NAME"), kernel $(uname -r)"
  echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; other work shares these CPUs)"
}
