#!/usr/bin/env bash
# bench/leases.sh — what a lease costs (make bench-leases): a single node
# (oracle + service, --sync fsync). Autocommit puts that write 8 keys per
# connection again and again, without a lease and attached to one (a put
# with a lease is a one-shot transaction of two keys, the key and its
# attachment, where a plain put is a blind write); and keep-alives of one
# lease (each answered after a read fence). 16 and 64 connections.
#
#   BENCH_SECONDS=5 bash bench/leases.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
machine
echo
echo "command:  BENCH_SECONDS=$SECS bash bench/leases.sh"
echo
echo "| row | conns | ops/s | p50 ms | p99 ms | errors |"
echo "|---|---:|---:|---:|---:|---:|"
start_percolator
lease=$(curl -sS -f -X POST "$SVC_URL/v1/leases" -H 'Content-Type: application/json' \
  -d '{"ttl_ms":600000}' | sed -nE 's/.*"id":([0-9]+).*/\1/p')
[ -n "$lease" ] || die "cannot grant a lease"
for conns in 16 64; do
  run_lg "$SVC_URL" pc-put "$conns" --rewrite 8 --tag "p$conns"
  echo "| put, no lease | $conns | $R_OPS | $R_P50 | $R_P99 | $R_ERR |"
  run_lg "$SVC_URL" pc-put "$conns" --rewrite 8 --tag "l$conns" --lease "$lease"
  echo "| put with a lease | $conns | $R_OPS | $R_P50 | $R_P99 | $R_ERR |"
  run_lg "$SVC_URL" pc-keepalive "$conns" --lease "$lease"
  echo "| keep-alive | $conns | $R_OPS | $R_P50 | $R_P99 | $R_ERR |"
done
# The lease's end: one transaction for its keys (16 x 8 + 64 x 8 = 640).
began=$(date +%s%3N)
ended=$(curl -sS -f -X DELETE "$SVC_URL/v1/leases/$lease")
echo
echo "revoke of the lease with $(sed -nE 's/.*"deleted_keys":([0-9]+).*/\1/p' <<<"$ended") keys: $(( $(date +%s%3N) - began )) ms"
cleanup || true
