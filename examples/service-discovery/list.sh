#!/usr/bin/env bash
# list.sh — the instances registered now: "NAME ADDRESS" a line, by name.
set -euo pipefail
B="${PERCOLATOR_URL:-http://127.0.0.1:8080}"
curl -sS -f "$B/v1/kv?prefix=services/" |
  grep -o '"key":"services/[^"]*","value":"[^"]*"' |
  sed -E 's|"key":"services/([^"]*)","value":"([^"]*)"|\1 \2|'
