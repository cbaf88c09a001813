#!/usr/bin/env bash
# Register the observer, write a few documents (two pairs of duplicates and
# one unique), run the worker until nothing is left, and list dups/.
set -euo pipefail
B="${PERCOLATOR_URL:-http://127.0.0.1:8080}"
J='Content-Type: application/json'
here=$(dirname "$0")

curl -sS -f -X PUT "$B/v1/observers/dedup" -H "$J" -d '{"prefix":"docs/"}' >/dev/null
put_doc() {
  local key
  key=$(printf 'docs/%s' "$1" | sed 's|/|%2F|g')
  curl -sS -f -X PUT "$B/v1/kv/$key" -H "$J" -d "{\"value\":\"$2\"}" >/dev/null
}
put_doc example.com/a "the quick brown fox"
put_doc example.com/b "lorem ipsum dolor"
put_doc mirror.org/a "the quick brown fox"
put_doc mirror.org/c "lorem ipsum dolor"
put_doc zzz.net/x "a unique text"
"$here/worker.sh" --drain
curl -sS "$B/v1/kv?prefix=dups/"
echo
