#!/usr/bin/env bash
# Two instances register; a client lists them and watches services/; one
# instance is killed (kill -9: its lease runs out) and disappears from the
# list within its TTL plus the janitor's interval, the watcher seeing the
# delete; the other stops cleanly (SIGTERM: it revokes its lease) and is
# gone at once.
set -euo pipefail
B="${PERCOLATOR_URL:-http://127.0.0.1:8080}"
here=$(dirname "$0")
export TTL_MS=${TTL_MS:-2000}
out=$(mktemp -d)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true; rm -rf "$out"' EXIT

# Wait (at most 30 s) until the command succeeds.
until_true() {
  for _ in $(seq 300); do "$@" && return 0; sleep 0.1; done
  echo "demo: timed out waiting for: $*" >&2
  exit 1
}
count_is() { [ "$("$here/list.sh" | wc -l)" -eq "$1" ]; }

"$here/register.sh" web-1 10.0.0.1:8080 >"$out/web-1" &
pids+=($!)
"$here/register.sh" web-2 10.0.0.2:8080 >"$out/web-2" &
pids+=($!)
until_true count_is 2
echo "registered:"
"$here/list.sh"
# Watch the prefix from now on (a stream: -m bounds it).
curl -sN -m 60 "$B/v1/watch?prefix=services/" >"$out/watch" &
pids+=($!)
until_true grep -q progress "$out/watch"
kill -9 "${pids[1]}"
wait "${pids[1]}" 2>/dev/null || true
echo "web-2 killed (kill -9): its lease runs out in $TTL_MS ms"
until_true count_is 1
echo "registered:"
"$here/list.sh"
until_true grep -q '"type":"delete"' "$out/watch"
echo "the watcher saw: $(grep -o '"type":"delete","commit_ts":[0-9]*,"key":"[^"]*"' "$out/watch" |
  sed -E 's/.*"key":"([^"]*)"/delete \1/')"
kill -TERM "${pids[0]}"
wait "${pids[0]}"
echo "web-1 stopped (SIGTERM): it revoked its lease"
echo "registered: $(count_is 0 && echo none)"
kill "${pids[2]}" 2>/dev/null || true # the watcher
wait "${pids[2]}" 2>/dev/null || true
