#!/usr/bin/env bash
# elect.sh NAME — campaign to lead, etcd-style, through the HTTP API only.
#
# A campaign is one one-shot transaction: "if election/leader does not
# exist, put it = NAME, attached to my lease". The winner keeps its lease
# alive every TTL/3; if it dies (kill -9, a lost machine), its keep-alives
# stop, the lease ends after its TTL and takes election/leader with it. A
# loser watches the key (GET /v1/watch from the key's commit_ts, so no
# change is missed) and campaigns again once it is deleted.
#
#   TTL_MS    the lease's TTL (default 2000)
#   LEAD_MS   resign (revoke the lease) after leading this long; 0 (the
#             default): lead until killed
#
# Prints "NAME: leader", "NAME: following OTHER", "NAME: resigned".
# Needs bash, curl and sed. PERCOLATOR_URL is the service (default
# http://127.0.0.1:8080).
set -euo pipefail
B="${PERCOLATOR_URL:-http://127.0.0.1:8080}"
J='Content-Type: application/json'
name=$1
ttl=${TTL_MS:-2000}
lead_ms=${LEAD_MS:-0}
key=election%2Fleader

num() { sed -nE "s/.*\"$1\":([0-9]+).*/\1/p" <<<"$2"; }
str() { sed -nE "s/.*\"$1\":\"([^\"]*)\".*/\1/p" <<<"$2"; }
now_ms() { date +%s%3N; }

while :; do
  lease=$(num id "$(curl -sS -f -X POST "$B/v1/leases" -H "$J" -d "{\"ttl_ms\":$ttl}")")
  campaign="{\"conditions\":[{\"key\":\"election/leader\",\"exists\":false}],
             \"writes\":[{\"key\":\"election/leader\",\"value\":\"$name\"}],\"lease\":$lease}"
  code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$B/v1/txn" -H "$J" -d "$campaign")
  if [ "$code" = 200 ]; then
    echo "$name: leader"
    began=$(now_ms)
    # Lead while the lease lives: keep it alive three times a TTL.
    while curl -sS -f -o /dev/null -X POST "$B/v1/leases/$lease/keepalive"; do
      if [ "$lead_ms" -gt 0 ] && [ $(($(now_ms) - began)) -ge "$lead_ms" ]; then
        curl -sS -f -o /dev/null -X DELETE "$B/v1/leases/$lease"
        echo "$name: resigned"
        exit 0
      fi
      sleep "$((ttl / 3000)).$(printf '%03d' $((ttl / 3 % 1000)))"
    done
    echo "$name: lost the lease" # a keep-alive came too late: campaign again
    continue
  fi
  [ "$code" = 409 ] || { echo "$name: the campaign answered $code" >&2; exit 1; }
  # Lost: the lease was for nothing. Follow the leader until its key goes.
  curl -sS -o /dev/null -X DELETE "$B/v1/leases/$lease" || true
  current=$(curl -sS "$B/v1/kv/$key")
  holder=$(str value "$current")
  [ -n "$holder" ] || continue # gone already: campaign again
  echo "$name: following $holder"
  # Every change of the key after the version read; the first delete ends
  # the wait (-m bounds it: then look again).
  curl -sN -m 60 "$B/v1/watch?key=$key&start_ts=$(num commit_ts "$current")" |
    grep -m1 -q '"type":"delete"' || true
done
