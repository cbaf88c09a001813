#!/usr/bin/env bash
# register.sh NAME ADDRESS — an instance registers itself, etcd-style,
# through the HTTP API only: services/NAME = ADDRESS, attached to a lease
# it keeps alive every TTL/3. Stopped (SIGTERM, SIGINT), it revokes the
# lease: its key is deleted at once. Killed (kill -9, a lost machine), its
# keep-alives stop and the key is deleted when the lease runs out.
#
#   TTL_MS   the lease's TTL (default 2000)
#
# Needs bash, curl and sed. PERCOLATOR_URL is the service (default
# http://127.0.0.1:8080).
set -euo pipefail
B="${PERCOLATOR_URL:-http://127.0.0.1:8080}"
J='Content-Type: application/json'
name=$1
address=$2
ttl=${TTL_MS:-2000}

lease=$(curl -sS -f -X POST "$B/v1/leases" -H "$J" -d "{\"ttl_ms\":$ttl}" |
  sed -nE 's/.*"id":([0-9]+).*/\1/p')
curl -sS -f -o /dev/null -X PUT "$B/v1/kv/services%2F$name" -H "$J" \
  -d "{\"value\":\"$address\",\"lease\":$lease}"
deregister() {
  curl -sS -f -o /dev/null -X DELETE "$B/v1/leases/$lease" || true
  exit 0
}
trap deregister TERM INT
echo "$name: registered at $address (lease $lease)"
while curl -sS -f -o /dev/null -X POST "$B/v1/leases/$lease/keepalive"; do
  # In the background, so that a signal is handled at once.
  sleep "$((ttl / 3000)).$(printf '%03d' $((ttl / 3 % 1000)))" &
  wait $! || true
done
echo "$name: the lease ran out" >&2
exit 1
