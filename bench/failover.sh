#!/usr/bin/env bash
# bench/failover.sh — `make bench-failover` (also the end of `make bench`):
# how long a three-member group takes to serve again after its leader is
# killed, for the oracle group and for etcd 3.4 on the same machine.
#
# Each round: find the leader, kill -9 it, then poll every survivor at once
# (one polling loop per survivor, curl --max-time 0.5, 5 ms apart) until one
# answers 200; the round's failover time runs from the kill to the end of
# that first good answer. A member that is not the leader answers at once
# in the oracle (307 or 503); etcd holds a put until it times out, so each
# etcd survivor gets FAILOVER_ETCD_STAGGER loops (default 5) started 0.1 s
# apart. Beside it, the time until a survivor knows of a new leader (the
# oracle's /v1/health role, etcd's maintenance status): the election's
# share. The killed member is restarted on its own data dir with the same
# flags and the next round waits until it is a follower.
#   oracle   three percolator-oracle members (libraft, pre-vote on;
#            --raft-election-timeout-ms FAILOVER_ELECTION_MS, default 1000,
#            --raft-heartbeat-ms FAILOVER_HEARTBEAT_MS, default 100);
#            first good answer = POST /v1/timestamps 200, whose timestamp
#            must be above every timestamp seen before the kill (the
#            bench's own and the service's last commit_ts; else a FAILURE)
#   service  (same kills) percolator-service --oracle M1,M2,M3 --sync fsync:
#            first PUT /v1/kv/{key} answered 200 (a committed write; its
#            commit_ts too must be above every timestamp seen before)
#   etcd     three etcd 3.4 members (Debian's etcd-server, installed when
#            missing), --heartbeat-interval and --election-timeout the same
#            (by default 100 and 1000, etcd's defaults), WAL fsync on; first
#            POST /v3/kv/put answered 200
# FAILOVER_ROUNDS rounds each (default 10); every wait has a deadline
# (FAILOVER_DEADLINE seconds, default 20, for a round's first answer).
# Exits 1 when a round fails (no answer in time, a timestamp not above the
# ones before). Every process it starts is stopped by PID at exit.
set -u
cd "$(dirname "$0")/.."

. bench/need-etcd.sh
need_etcd failover || exit 1
if [ -z "${PERCOLATOR_BIN_DIR:-}" ]; then # run by hand: build what it needs
  make --no-print-directory -s bench-tools || exit 1
  export PERCOLATOR_BIN_DIR=$PWD/bin BENCH_BIN_DIR=$PWD/build/plain/bench
fi
. bench/lib.sh
[ -x "$LG" ] || die "$LG not built (make bench-tools builds it)"

ROUNDS=${FAILOVER_ROUNDS:-10}
DEADLINE_S=${FAILOVER_DEADLINE:-20}
STAGGER=${FAILOVER_ETCD_STAGGER:-5} # etcd put loops per survivor, 0.1 s apart (1..9)
ELECTION_MS=${FAILOVER_ELECTION_MS:-1000} # both systems' election timeout
HEARTBEAT_MS=${FAILOVER_HEARTBEAT_MS:-100} # and heartbeat
[[ $ELECTION_MS =~ ^[1-9][0-9]{1,4}$ && $HEARTBEAT_MS =~ ^[1-9][0-9]{1,3}$ ]] &&
  ((ELECTION_MS <= 50000 && HEARTBEAT_MS <= 1000 && ELECTION_MS >= 5 * HEARTBEAT_MS)) ||
  { echo "failover: FAILOVER_ELECTION_MS (50..50000, etcd's limit) must be at least 5 x FAILOVER_HEARTBEAT_MS (10..1000)"; exit 2; }
[[ $STAGGER =~ ^[1-9]$ ]] || { echo "failover: FAILOVER_ETCD_STAGGER must be 1..9"; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]{0,2}$ ]] || { echo "failover: FAILOVER_ROUNDS must be 1..999"; exit 2; }
[[ $DEADLINE_S =~ ^[1-9][0-9]{0,2}$ ]] || { echo "failover: FAILOVER_DEADLINE must be 1..999 (seconds)"; exit 2; }
FAILURES=0
POLLERS=()

# Pollers are stopped before lib.sh's cleanup stops the servers.
stop_pollers() {
  local p
  touch "$TMP/done" 2>/dev/null
  for p in "${POLLERS[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  POLLERS=()
}
trap 'stop_pollers; cleanup' EXIT

# field NAME: the value (string or number) of "NAME": in the JSON on stdin, else 0
# (the answers parsed here are flat and small; no jq needed)
field() { sed -nE "s/.*\"$1\":(\"([^\"]*)\"|([0-9]+)).*/\2\3/p" | grep . || echo 0; }
now_us() { echo "${EPOCHREALTIME//[.,]/}"; }
fail() { echo "FAILURE: $*"; FAILURES=$((FAILURES + 1)); }
# forget PID: take a dead server's PID out of lib.sh's list
forget() {
  local p keep=()
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}
# stop_pid PID: SIGTERM a server this script started, wait for it (bounded), forget it
stop_pid() {
  kill -TERM "$1" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  forget "$1"
}
# until_ok SECONDS CMD...: run CMD every 0.1 s until it succeeds (0) or time is up (1)
until_ok() {
  local end=$(($(now_us) + $1 * 1000000))
  shift
  while [ "$(now_us)" -lt "$end" ]; do "$@" && return 0; sleep 0.1; done
  return 1
}

# post KIND URL TAG: one request of the kind the round waits for; prints
# the body and, on the last line, the HTTP status.
post() {
  local c=(curl -sS --max-time 0.5 -o - -w '\n%{http_code}')
  case $1 in
    oracle)  "${c[@]}" -X POST "$2/v1/timestamps?count=1" ;;
    service) "${c[@]}" -X PUT "$2/v1/kv/failover-$3" -H 'Content-Type: application/json' -d '{"value":"x"}' ;;
    etcd)    "${c[@]}" -X POST "$2/v3/kv/put" -d '{"key":"ZmFpbG92ZXI=","value":"eA=="}' ;; # "failover" = "x"
  esac 2>/dev/null
}

# attempt KIND URL TAG: one try; prints the answer and succeeds when it is
# the one the round waits for: a 200 for oracle, service and etcd; for
# oelect / eelect, a member that knows of a new leader (the oracle's
# health says role leader; etcd's status names a leader other than the
# killed one, KILLED_ID), which splits the failover into election and the
# rest.
attempt() {
  local res
  case $1 in
    oelect)
      res=$(curl -fsS --max-time 0.5 "$2/v1/health" 2>/dev/null) && [ "$(field role <<<"$res")" = leader ] ;;
    eelect)
      res=$(curl -fsS --max-time 0.5 -X POST "$2/v3/maintenance/status" -d '{}' 2>/dev/null) &&
        [ "$(field leader <<<"$res")" != 0 ] && [ "$(field leader <<<"$res")" != "$KILLED_ID" ] ;;
    *)
      res=$(post "$@") && [ "${res##*$'\n'}" = 200 ] && res=${res%$'\n'*} ;;
  esac || return 1
  echo "$res"
}

# poller KIND URL NAME SLOT: background loop, from SLOT x 0.1 s after the
# kill, until its first success (written to $TMP/res.KIND.NAME.SLOT as
# "END_US NAME ANSWER"), the done file, or the deadline.
poller() {
  local kind=$1 url=$2 name=$3 slot=$4 n=0 res
  [ "$slot" = 0 ] || sleep "0.$slot"
  while [ ! -e "$TMP/done" ] && [ "$(now_us)" -lt "$DEADLINE" ]; do
    n=$((n + 1))
    if res=$(attempt "$kind" "$url" "$name-$slot-$ROUND-$n"); then
      echo "$(now_us) $name ${res//$'\n'/ }" >"$TMP/res.$kind.$name.$slot.tmp"
      mv "$TMP/res.$kind.$name.$slot.tmp" "$TMP/res.$kind.$name.$slot"
      return 0
    fi
    sleep 0.005
  done
}

# earliest KIND: the first answer of that kind this round ("END_US NAME BODY")
earliest() { cat "$TMP"/res."$1".*[0-9] 2>/dev/null | sort -n | head -1; }

# failover_round KIND... : the leader (LEADER, its PID KILL_PID, survivor
# URLs SURVIVORS) is known; kill it, poll, and set MS_<KIND> and
# FIRST_<KIND> (the earliest answer) for each kind, or "" on timeout.
failover_round() {
  local k t0 line name s slots
  rm -f "$TMP"/res.* "$TMP/done"
  # (stderr off from the kill to the wait: no "Killed" job notice)
  {
    kill -KILL "$KILL_PID"
    t0=$(now_us)
    DEADLINE=$((t0 + DEADLINE_S * 1000000))
    for k in "$@"; do
      if [ "$k" = service ]; then
        poller service "$SVC_URL" svc 0 & POLLERS+=("$!")
        continue
      fi
      # etcd holds a put while it has no leader, and the puts held during
      # the election ran into the 0.5 s limit: one loop per survivor saw
      # the first put up to 0.5 s late, so STAGGER loops, 0.1 s apart.
      slots=1
      [ "$k" = etcd ] && slots=$STAGGER
      for name in "${!SURVIVORS[@]}"; do
        for ((s = 0; s < slots; s++)); do
          poller "$k" "${SURVIVORS[$name]}" "$name" "$s" & POLLERS+=("$!")
        done
      done
    done
    wait "$KILL_PID"
  } 2>/dev/null
  forget "$KILL_PID"
  while [ "$(now_us)" -lt "$DEADLINE" ]; do
    local all=1
    for k in "$@"; do [ -n "$(earliest "$k")" ] || all=0; done
    [ "$all" = 1 ] && break
    sleep 0.01
  done
  stop_pollers
  for k in "$@"; do
    line=$(earliest "$k")
    printf -v "FIRST_$k" '%s' "$line"
    if [ -n "$line" ]; then
      printf -v "MS_$k" '%s' "$(calc "(${line%% *} - $t0) / 1000")"
    else
      printf -v "MS_$k" '%s' ""
    fi
  done
}

# summary FILE: "rounds median max" of the millisecond figures in FILE
summary() {
  local n med max
  n=$(grep -c . "$1")
  [ "$n" = 0 ] && { echo "0 - -"; return; }
  med=$(median <"$1")
  max=$(sort -g "$1" | tail -1)
  printf "%s %.0f %.0f" "$n" "${med:-0}" "${max:-0}"
}

echo "failover: kill -9 the leader of a three-member group, time to the first good answer"
machine
echo "rounds:   $ROUNDS per system; polling every survivor at once, curl --max-time 0.5, 5 ms apart"
echo "          (etcd: $STAGGER such loops per survivor, started 0.1 s apart)"

# --- percolator-oracle, three members -------------------------------------
RP=() RH=() OURL=() OPID=()
for i in 1 2 3; do RP[$i]=$(free_port); RH[$i]=$(free_port); OURL[$i]="http://127.0.0.1:${RH[$i]}"; done
PEERS="1=127.0.0.1:${RP[1]},2=127.0.0.1:${RP[2]},3=127.0.0.1:${RP[3]}"
URLS="1=${OURL[1]},2=${OURL[2]},3=${OURL[3]}"
start_oracle() {
  "$BIN/percolator-oracle" --listen "127.0.0.1:${RH[$1]}" --data-dir "$TMP/oracle$1" \
    --raft-id "$1" --raft-peers "$PEERS" --raft-urls "$URLS" --log-level warn \
    --raft-election-timeout-ms "$ELECTION_MS" --raft-heartbeat-ms "$HEARTBEAT_MS" \
    >>"$TMP/oracle$1.log" 2>&1 &
  OPID[$1]=$!; PIDS+=("$!")
  wait_http "${OURL[$1]}/v1/health" "$!" || { cat "$TMP/oracle$1.log"; die "oracle member $1 did not start"; }
}
# oracle_health I: "ROLE LEADER_ID" of member I
oracle_health() {
  local h
  h=$(curl -fsS --max-time 0.5 "${OURL[$1]}/v1/health" 2>/dev/null)
  echo "$(field role <<<"$h") $(sed -E 's/.*"leader":\{"id":([0-9]+).*/\1/;t;s/.*/0/' <<<"$h")"
}
# oracle_leader: sets LEADER when one member leads and every member names it
oracle_leader() {
  local i h lead=0
  for i in 1 2 3; do
    h=$(oracle_health "$i")
    [ "${h% *}" = leader ] && lead=$i
  done
  [ "$lead" != 0 ] || return 1
  for i in 1 2 3; do [ "$(oracle_health "$i")" = "$([ "$i" = "$lead" ] && echo leader || echo follower) $lead" ] || return 1; done
  LEADER=$lead
}
# oracle_follower I: member I follows a known leader
oracle_follower() {
  local h
  h=$(oracle_health "$1")
  [ "${h% *}" = follower ] && [ "${h#* }" != 0 ]
}
# svc_put_ok: one write through the service; its commit_ts into TS
svc_put_ok() {
  local res
  res=$(post service "$SVC_URL" pre)
  TS=0
  [ "${res##*$'\n'}" = 200 ] && TS=$(field commit_ts <<<"${res%$'\n'*}")
  [ "$TS" != 0 ]
}
# take_ts URL: one timestamp from URL into TS (0 when it did not answer 200)
take_ts() {
  local res
  res=$(post oracle "$1")
  TS=0
  [ "${res##*$'\n'}" = 200 ] && TS=$(field first <<<"${res%$'\n'*}")
  [ "$TS" != 0 ]
}

echo
echo "oracle:   3 x percolator-oracle --raft-id N --raft-peers ... (libraft $(dpkg-query -W -f '${Version}' libraft2 2>/dev/null || echo '?')), 127.0.0.1"
echo "          --raft-election-timeout-ms $ELECTION_MS --raft-heartbeat-ms $HEARTBEAT_MS, pre-vote on"
echo "service:  percolator-service --oracle M1,M2,M3 --sync fsync: first committed PUT after the kill"
for i in 1 2 3; do start_oracle "$i"; done
until_ok 30 oracle_leader || die "the oracle group elected no leader"
wait_voters "${OURL[1]}" "${OURL[2]}" "${OURL[3]}" # a whole group before the first kill
ORACLE_URL="${OURL[1]},${OURL[2]},${OURL[3]}"
start_service svc
: >"$TMP/ms.oracle"; : >"$TMP/ms.service"; : >"$TMP/ms.oelect"
MAXTS=0 MS_oracle="" MS_service="" MS_etcd="" MS_oelect="" MS_eelect=""
printf "\n%-6s %-7s %-11s %11s %11s %11s  %s\n" round killed "new leader" "elected ms" "oracle ms" "service ms" "first timestamp after the kill > max before"
for ROUND in $(seq "$ROUNDS"); do
  until_ok 30 oracle_leader || die "round $ROUND: no settled leader"
  until_ok 10 take_ts "${OURL[$LEADER]}" || die "round $ROUND: the leader hands out no timestamp"
  [ "$TS" -gt "$MAXTS" ] && MAXTS=$TS
  until_ok 10 svc_put_ok || die "round $ROUND: the service commits nothing before the kill"
  [ "$TS" -gt "$MAXTS" ] && MAXTS=$TS # the service's commit took one from the group too
  declare -A SURVIVORS=()
  for i in 1 2 3; do [ "$i" = "$LEADER" ] || SURVIVORS[$i]=${OURL[$i]}; done
  KILL_PID=${OPID[$LEADER]}
  failover_round oelect oracle service
  unset SURVIVORS
  if [ -z "$FIRST_oracle" ]; then
    fail "round $ROUND: no member served a timestamp within $DEADLINE_S s"
    newl=none first=none before=$MAXTS
  else
    read -r _ newl body <<<"$FIRST_oracle"
    first=$(field first <<<"$body")
    # every answer of the round (both survivors may have answered) must be
    # above every timestamp seen before the kill
    before=$MAXTS
    while read -r _ who b; do
      f=$(field first <<<"$b")
      [ "$f" -gt "$before" ] || fail "round $ROUND: member $who handed out $f, not above $before seen before the kill"
      [ "$f" -gt "$MAXTS" ] && MAXTS=$f
    done < <(cat "$TMP"/res.oracle.*[0-9])
    first="$first > $before"
    echo "$MS_oracle" >>"$TMP/ms.oracle"
  fi
  if [ -z "$FIRST_service" ]; then
    fail "round $ROUND: the service committed no write within $DEADLINE_S s"
  else
    f=$(field commit_ts <<<"${FIRST_service#* * }")
    [ "$f" -gt "$before" ] || fail "round $ROUND: the service committed at $f, not above $before seen before the kill"
    echo "$MS_service" >>"$TMP/ms.service"
  fi
  [ -n "$MS_oelect" ] && echo "$MS_oelect" >>"$TMP/ms.oelect"
  printf "%-6s %-7s %-11s %11s %11s %11s  %s\n" "$ROUND" "$LEADER" "$newl" "$(printf %.0f "${MS_oelect:-0}")" \
    "$(printf %.0f "${MS_oracle:-0}")" "$(printf %.0f "${MS_service:-0}")" "$first"
  start_oracle "$LEADER"
  until_ok 30 oracle_follower "$LEADER" || die "round $ROUND: restarted member $LEADER did not become a follower"
done
stop_pid "$SVC_PID"
for i in 1 2 3; do stop_pid "${OPID[$i]}"; done

# --- etcd 3.4, three members ----------------------------------------------
CP=() PP=() EURL=() EPID=()
for i in 1 2 3; do CP[$i]=$(free_port); PP[$i]=$(free_port); EURL[$i]="http://127.0.0.1:${CP[$i]}"; done
CLUSTER="e1=http://127.0.0.1:${PP[1]},e2=http://127.0.0.1:${PP[2]},e3=http://127.0.0.1:${PP[3]}"
start_etcd() {
  etcd --name "e$1" --data-dir "$TMP/etcd$1" \
    --listen-client-urls "${EURL[$1]}" --advertise-client-urls "${EURL[$1]}" \
    --listen-peer-urls "http://127.0.0.1:${PP[$1]}" --initial-advertise-peer-urls "http://127.0.0.1:${PP[$1]}" \
    --initial-cluster "$CLUSTER" --initial-cluster-state new --initial-cluster-token "failover-$$" \
    --heartbeat-interval "$HEARTBEAT_MS" --election-timeout "$ELECTION_MS" --logger zap --log-level warn \
    >>"$TMP/etcd$1.log" 2>&1 &
  EPID[$1]=$!; PIDS+=("$!")
}
# etcd_status I: "MEMBER_ID LEADER_ID" of member I (the gateway's status call)
etcd_status() {
  local st
  st=$(curl -fsS --max-time 0.5 -X POST "${EURL[$1]}/v3/maintenance/status" -d '{}' 2>/dev/null)
  echo "$(field member_id <<<"$st") $(field leader <<<"$st")"
}
# etcd_leader: sets LEADER when one member leads and every member names it
etcd_leader() {
  local i st lead="" id=()
  for i in 1 2 3; do
    st=$(etcd_status "$i")
    [ -n "$st" ] && [ "${st#* }" != 0 ] || return 1
    id[$i]=${st% *}
    [ -z "$lead" ] || [ "$lead" = "${st#* }" ] || return 1
    lead=${st#* }
  done
  for i in 1 2 3; do [ "${id[$i]}" = "$lead" ] && LEADER=$i LEADER_ID=$lead && return 0; done
  return 1
}
etcd_put_ok() { [ "$(post etcd "$1" | tail -1)" = 200 ]; }
# etcd_follower I: member I is healthy and follows a leader
etcd_follower() {
  local st
  curl -fsS --max-time 0.5 "${EURL[$1]}/health" 2>/dev/null | grep -q '"health":"true"' || return 1
  st=$(etcd_status "$1")
  [ -n "$st" ] && [ "${st#* }" != 0 ] && [ "${st% *}" != "${st#* }" ]
}

echo
echo "etcd:     3 x $(etcd --version 2>/dev/null | head -1), 127.0.0.1, --heartbeat-interval $HEARTBEAT_MS --election-timeout $ELECTION_MS (its defaults: 100, 1000),"
echo "          pre-vote off (3.4's default), WAL fsync on; first POST /v3/kv/put answered 200 after the kill"
for i in 1 2 3; do start_etcd "$i"; done
until_ok 30 etcd_leader || { cat "$TMP"/etcd*.log | tail -20; die "the etcd cluster elected no leader"; }
: >"$TMP/ms.etcd"; : >"$TMP/ms.eelect"
printf "\n%-6s %-7s %-11s %11s %11s\n" round killed "answered by" "elected ms" "etcd ms"
for ROUND in $(seq "$ROUNDS"); do
  until_ok 30 etcd_leader || die "round $ROUND: no settled etcd leader"
  until_ok 10 etcd_put_ok "${EURL[$LEADER]}" || die "round $ROUND: etcd's leader takes no put"
  declare -A SURVIVORS=()
  for i in 1 2 3; do [ "$i" = "$LEADER" ] || SURVIVORS[$i]=${EURL[$i]}; done
  KILL_PID=${EPID[$LEADER]}
  KILLED_ID=$LEADER_ID
  failover_round eelect etcd
  unset SURVIVORS
  if [ -z "$FIRST_etcd" ]; then
    fail "round $ROUND: no etcd member took a put within $DEADLINE_S s"
    who=none
  else
    read -r _ who _ <<<"$FIRST_etcd"
    who=e$who
    echo "$MS_etcd" >>"$TMP/ms.etcd"
  fi
  [ -n "$MS_eelect" ] && echo "$MS_eelect" >>"$TMP/ms.eelect"
  printf "%-6s %-7s %-11s %11s %11s\n" "$ROUND" "e$LEADER" "$who" "$(printf %.0f "${MS_eelect:-0}")" "$(printf %.0f "${MS_etcd:-0}")"
  start_etcd "$LEADER"
  until_ok 30 etcd_follower "$LEADER" || die "round $ROUND: restarted etcd member e$LEADER did not become a healthy follower"
done
for i in 1 2 3; do stop_pid "${EPID[$i]}"; done

# --- the table --------------------------------------------------------------
echo
printf "%-52s %6s %10s %8s  %s\n" system rounds "median ms" "max ms" "new leader known (median ms)"
row_of() {
  read -r n med max <<<"$(summary "$2")"
  printf "%-52s %6s %10s %8s  %s\n" "$1" "$n" "$med" "$max" "$([ -n "$3" ] && summary "$3" | cut -d' ' -f2)"
}
row_of "percolator-oracle, 3 members: first timestamp" "$TMP/ms.oracle" "$TMP/ms.oelect"
row_of "percolator-service over them: first committed PUT" "$TMP/ms.service" ""
row_of "etcd $(etcd --version 2>/dev/null | sed -nE 's/^etcd Version: //p'), 3 members: first put" "$TMP/ms.etcd" "$TMP/ms.eelect"
echo "(from kill -9 of the leader to the end of the first 200; rounds = rounds that got one;"
echo " new leader known: a survivor's /v1/health says leader, or etcd's status names a new leader)"
echo "command:  FAILOVER_ROUNDS=$ROUNDS FAILOVER_ETCD_STAGGER=$STAGGER FAILOVER_ELECTION_MS=$ELECTION_MS FAILOVER_HEARTBEAT_MS=$HEARTBEAT_MS bash bench/failover.sh"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$FAILURES" = 0 ] || { echo "failover: $FAILURES FAILURE(S) above"; exit 1; }
