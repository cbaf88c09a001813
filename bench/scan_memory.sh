#!/usr/bin/env bash
# bench/scan_memory.sh — issue #18's attack on memory: N values of SIZE
# bytes, then C concurrent scans of all of them (limit=10000, following
# `next`), and the service's peak resident memory (VmHWM) before and after
# the scans. Extra arguments are service flags (e.g. --max-reply-bytes 4GiB
# to see the cap off).
#
#   make bin/percolator-service bin/percolator-oracle build/plain/bench/loadgen
#   N=400 SIZE=1000000 C=4 bench/scan_memory.sh
# No set -e: lib.sh's cleanup (at exit) must run to its end.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

N=${N:-400}
SIZE=${SIZE:-1000000}
C=${C:-4}
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }

start_percolator "$@"
# One body of SIZE bytes of text, PUT N times.
head -c "$SIZE" /dev/zero | tr '\0' 'v' | { printf '{"value":"'; cat; printf '"}'; } >"$TMP/body"
for i in $(seq -w 0 $((N - 1))); do
  curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' \
    --data-binary @"$TMP/body" "$SVC_URL/v1/kv/big%2F$i" || die "PUT big/$i failed"
done
echo "loaded:  $N values of $SIZE bytes; service VmHWM $(($(hwm_kb "$SVC_PID") / 1024)) MiB"

# scan_all K: follow every page of prefix big/; prints "items pages maxpage".
scan_all() {
  local after="" items=0 pages=0 max=0 f="$TMP/page.$1" n next
  while :; do
    curl -fsS -o "$f" "$SVC_URL/v1/kv?prefix=big%2F&limit=10000${after:+&after=$after}" || break
    n=$(jq '.items | length' "$f")
    items=$((items + n)); pages=$((pages + 1))
    [ "$(stat -c %s "$f")" -gt "$max" ] && max=$(stat -c %s "$f")
    next=$(jq -r '.next // empty' "$f")
    [ -z "$next" ] && break
    after=$(jq -rn --arg s "$next" '$s | @uri')
  done
  rm -f "$f"
  echo "$items $pages $max"
}

scans=()
for k in $(seq "$C"); do scan_all "$k" >"$TMP/scan.$k" & scans+=($!); done
wait "${scans[@]}" # not the servers, which are children too
for k in $(seq "$C"); do
  read -r items pages max <"$TMP/scan.$k" || die "scan $k gave no result"
  echo "scan $k:  $items items in $pages pages, largest page $((max / 1048576)) MiB"
done
echo "scanned: $C concurrent scans; service VmHWM $(($(hwm_kb "$SVC_PID") / 1024)) MiB"
