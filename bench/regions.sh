#!/usr/bin/env bash
# bench/regions.sh — what a transaction across regions costs (issue #27,
# DESIGN §6.2): 2-key one-shot transactions (loadgen pc-txn: condition
# "a exists", write a and b, over REGIONS_KEYS preloaded keys) on one
# service, three ways, each on a fresh oracle and service:
#   within   one region: the transaction commits in one phase (the default)
#   2pc      one region, --one-pc off: two phases, the same batches as
#            across but all in one region (what crossing itself costs is
#            the difference between this row and the next)
#   across   --region-split-keys cutting before every key: each key its own
#            region, so every transaction spans two and commits in two
#            phases, its batches cut per region
# at REGIONS_CONNS connections (default "16 64"), REGIONS_RUNS times each
# (default 2), the configurations alternated; BENCH_SECONDS per row
# (default 5). Prints each row (rate, p50, p99, p99.9, aborts) and the
# median ratios across/within and across/2pc.
#
# REGIONS_GROUP=1 measures what users deploy for regions of their own
# logs instead: three oracles as a Raft group (the placement driver) and
# a three-member service group with --region-logs, each region a Raft
# group of its own; the load at the leader. There "across" cuts the keys
# into REGIONS_COUNT regions (default 8; each a Raft group on every
# member), so a transaction's two keys are in two regions 1 - 1/COUNT of
# the time (the metric of commits across regions is printed). A fourth
# row there, "spread", is "across" with --region-leaders-gather off and a
# --peer-token-file: each region keeps the leader it elected, and region
# 1's leader sends the actions of regions led elsewhere to their leaders
# (POST /v1/region-calls, DESIGN §6.6; the calls are printed).
#
#   bench/regions.sh                    (make bench-regions)
#   REGIONS_GROUP=1 bench/regions.sh    (make bench-regions-group)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
KEYS=${REGIONS_KEYS:-1000}
CONNS_LIST=${REGIONS_CONNS:-16 64}
RUNS=${REGIONS_RUNS:-2}
GROUP=${REGIONS_GROUP:-0}
COUNT=${REGIONS_COUNT:-8}
[ -x "$LG" ] || die "$LG missing: make bench-tools"
[ "$KEYS" -ge 2 ] && [ "$KEYS" -le 1025 ] || die "REGIONS_KEYS must be 2..1025 (at most 1024 split keys)"

# The loadgen's key names (k%08lu) from 1 on: a cut before each but the
# first; in a group, COUNT regions of KEYS/COUNT keys each.
SPLITS=$(seq -f 'k%08g' 1 $((KEYS - 1)) | paste -sd, -)
if [ "$GROUP" = 1 ]; then
  [ "$COUNT" -ge 2 ] && [ "$COUNT" -le "$KEYS" ] || die "REGIONS_COUNT must be 2..REGIONS_KEYS"
  SPLITS=$(for i in $(seq 1 $((COUNT - 1))); do printf 'k%08d\n' $((i * KEYS / COUNT)); done | paste -sd, -)
fi

# start_config FLAGS...: a fresh single service, or a fresh group (its
# leader's URL in SVC_URL) with the oracles as a group.
start_config() {
  if [ "$GROUP" != 1 ]; then
    start_percolator "$@"
    return
  fi
  start_oracle_group
  service_group_ports
  local i
  for i in 1 2 3; do start_member "$i" --region-logs "$@"; done
  wait_leader
  if [ "${SPREAD:-0}" = 1 ]; then # leaders where elected: each region led by someone
    for _ in $(seq 300); do
      curl -fsS --max-time 2 "$SVC_URL/v1/regions?local=true" 2>/dev/null |
        grep -qE '"leader": *0[,}]' || return 0
      sleep 0.1
    done
    die "some region of the group has no leader after 30 s"
  fi
  # every region's group led with region 1's (the gathering: a janitor
  # round or two), so that no request meets a lead being handed over
  local leaders
  for _ in $(seq 300); do
    leaders=$(curl -fsS --max-time 2 "$SVC_URL/v1/regions?local=true" 2>/dev/null |
      grep -oE '"leader": *[0-9]+' | grep -oE '[0-9]+$' | sort -u | paste -sd' ' -)
    [ "$leaders" = "$L" ] && return
    sleep 0.1
  done
  die "the regions' groups are not all led by member $L after 30 s (leaders: $leaders)"
}

stop_all() { # stop what start_config started, by PID
  local p
  for p in "${PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  PIDS=()
  rm -rf "$TMP"/oracle* "$TMP"/service "$TMP"/svc*
}

machine() { echo "machine: $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"; }
if [ "$GROUP" = 1 ]; then
  echo "regions: 2-key transactions within one region and across $COUNT, each region a Raft group of its own (--region-logs) on three members, three oracles as a group (--sync fsync)"
else
  echo "regions: 2-key transactions within one region and across two, on one service (--sync fsync)"
fi
machine
printf '%-8s %6s %4s %10s %9s %9s %9s %8s\n' config conns run "txn/s" "p50 ms" "p99 ms" "p99.9 ms" aborts
declare -A OPS P99
CONFIGS="within 2pc across"
if [ "$GROUP" = 1 ]; then
  CONFIGS="$CONFIGS spread"
  printf 'bench-peer-secret-%s\n' "$(od -An -tx8 -N8 /dev/urandom | tr -d ' ')" >"$TMP/peer-token"
fi
for run in $(seq "$RUNS"); do
  for cfg in $CONFIGS; do
    case $cfg in
      within) start_config ;;
      2pc) start_config --one-pc off ;;
      across) start_config --region-split-keys "$SPLITS" ;;
      spread) SPREAD=1 start_config --region-split-keys "$SPLITS" --region-leaders-gather off \
                --peer-token-file "$TMP/peer-token" ;;
    esac
    preload "$SVC_URL" pc 0 "$KEYS"
    for c in $CONNS_LIST; do
      run_lg "$SVC_URL" pc-txn "$c" --keys "$KEYS"
      [ "$R_ERR" = 0 ] || die "$cfg at $c connections: $R_ERR errors"
      printf '%-8s %6s %4s %10s %9s %9s %9s %8s\n' "$cfg" "$c" "$run" "$R_OPS" "$R_P50" "$R_P99" "$R_P999" "$R_ABORT"
      OPS[$cfg.$c]+="$R_OPS "
      P99[$cfg.$c]+="$R_P99 "
    done
    if [ "$cfg" = across ] || [ "$cfg" = spread ]; then
      cross=$(curl -fsS "$SVC_URL/metrics" | awk '$1 == "percolator_commits_cross_region_total" {print $2}')
      echo "         ($cfg: $cross commits spanned two or more regions)"
    fi
    if [ "$cfg" = spread ]; then
      leaders=$(curl -fsS "$SVC_URL/v1/regions?local=true" | grep -oE '"leader": *[0-9]+' |
        grep -oE '[0-9]+$' | paste -sd' ' -)
      calls=$(curl -fsS "$SVC_URL/metrics" |
        awk '$1 ~ /^percolator_region_calls_sent_total/ {n += $2} END {print n + 0}')
      echo "         (spread: the regions' leaders $leaders, region 1's member $L; $calls calls sent)"
    fi
    stop_all
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
printf '%6s %14s %14s %14s %16s %16s\n' conns "within txn/s" "2pc txn/s" "across txn/s" "across/within" "across/2pc"
for c in $CONNS_LIST; do
  w=$(median <<<"${OPS[within.$c]}") t=$(median <<<"${OPS[2pc.$c]}") a=$(median <<<"${OPS[across.$c]}")
  printf '%6s %14s %14s %14s %16s %16s\n' "$c" "$w" "$t" "$a" "$(calc "$a / $w")" "$(calc "$a / $t")"
  w=$(median <<<"${P99[within.$c]}") t=$(median <<<"${P99[2pc.$c]}") a=$(median <<<"${P99[across.$c]}")
  printf '%6s %14s %14s %14s %16s %16s   (p99 ms)\n' "" "$w" "$t" "$a" "$(calc "$a / $w")" "$(calc "$a / $t")"
done
if [ "$GROUP" = 1 ]; then
  printf '%6s %14s %14s %16s\n' conns "spread txn/s" "spread p99 ms" "spread/across"
  for c in $CONNS_LIST; do
    a=$(median <<<"${OPS[across.$c]}") p=$(median <<<"${OPS[spread.$c]}")
    printf '%6s %14s %14s %16s\n' "$c" "$p" "$(median <<<"${P99[spread.$c]}")" "$(calc "$p / $a")"
  done
fi
echo "command: REGIONS_GROUP=$GROUP REGIONS_COUNT=$COUNT REGIONS_KEYS=$KEYS REGIONS_CONNS=\"$CONNS_LIST\" REGIONS_RUNS=$RUNS BENCH_SECONDS=$SECS bash bench/regions.sh"
