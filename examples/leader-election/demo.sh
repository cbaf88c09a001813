#!/usr/bin/env bash
# Two candidates, a and b: a leads, b follows; a is killed (kill -9, so
# its lease is not revoked: it runs out), and b leads within the TTL plus
# the janitor's interval. b resigns after leading 3 s: its revoke deletes
# the key at once.
set -euo pipefail
B="${PERCOLATOR_URL:-http://127.0.0.1:8080}"
here=$(dirname "$0")
export TTL_MS=${TTL_MS:-2000}
out=$(mktemp -d)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true; rm -rf "$out"' EXIT

leader() {
  local v
  v=$(curl -sS "$B/v1/kv/election%2Fleader" | sed -nE 's/.*"value":"([^"]*)".*/\1/p')
  echo "${v:-none}"
}
# Wait (at most 30 s) until the command succeeds.
until_true() {
  for _ in $(seq 300); do "$@" && return 0; sleep 0.1; done
  echo "demo: timed out waiting for: $*" >&2
  exit 1
}

"$here/elect.sh" a >"$out/a" 2>&1 &
pids+=($!)
until_true grep -q "a: leader" "$out/a"
LEAD_MS=3000 "$here/elect.sh" b >"$out/b" 2>&1 &
pids+=($!)
until_true grep -q "b: following a" "$out/b"
echo "leader: $(leader)"
kill -9 "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
echo "a crashed (kill -9): its lease runs out in $TTL_MS ms"
until_true grep -q "b: leader" "$out/b"
echo "leader: $(leader)"
wait "${pids[1]}"
echo "leader: $(leader) (b resigned)"
cat "$out/a" "$out/b"
