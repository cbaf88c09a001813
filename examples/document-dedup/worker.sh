#!/usr/bin/env bash
# The observer of the document pipeline (the Percolator paper's Figure 2, in
# miniature): for every changed document under docs/<url>, hash its content
# and keep dups/<hash> -> the canonical URL (the smallest URL with that
# content), inside the observer transaction the claim hands out, so each
# change is processed by at most one committed transaction.
#
#   worker.sh            claim and process forever (Ctrl-C stops)
#   worker.sh --drain    stop when nothing is left to claim
#
# Needs bash, curl, sed and sha256sum. PERCOLATOR_URL is the service
# (default http://127.0.0.1:8080). Documents are plain text without
# double quotes or backslashes (this script reads JSON with sed).
set -euo pipefail
B="${PERCOLATOR_URL:-http://127.0.0.1:8080}"
J='Content-Type: application/json'
drain=false
[ "${1:-}" = "--drain" ] && drain=true

urlencode() {
  local s="$1" out="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case "$c" in
      [a-zA-Z0-9.~_-]) out+="$c" ;;
      *) printf -v c '%%%02X' "'$c"; out+="$c" ;;
    esac
  done
  printf '%s' "$out"
}
field() { sed -nE "s/.*\"$1\":\"([^\"]*)\".*/\1/p" <<<"$2"; }

processed=0
while :; do
  answer=$(curl -sS -X POST "$B/v1/observers/dedup/claim?wait_ms=500" -w '\n%{http_code}')
  status=${answer##*$'\n'}
  body=${answer%$'\n'*}
  if [ "$status" = 204 ]; then
    $drain && break
    continue
  fi
  [ "$status" = 200 ] || { echo "worker: claim answered $status: $body" >&2; exit 1; }
  key=$(field key "$body")
  txn=$(field id "$body")
  url=${key#docs/}
  content=$(field value "$body")   # empty when the document was deleted
  if [ -n "$content" ]; then
    hash=$(printf '%s' "$content" | sha256sum | cut -c1-16)
    dup="$B/v1/txns/$txn/keys/$(urlencode "dups/$hash")"
    current=$(field value "$(curl -sS "$dup")")
    if [ -z "$current" ] || [[ "$url" < "$current" ]]; then
      curl -sS -f -X PUT "$dup" -H "$J" -d "{\"value\":\"$url\"}" >/dev/null
    fi
  fi
  # Committing acknowledges the change; a conflict means another
  # transaction wrote dups/<hash> first: the change is claimed again.
  code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$B/v1/txns/$txn/commit")
  [ "$code" = 200 ] && processed=$((processed + 1))
done
echo "worker: processed $processed change(s)"
