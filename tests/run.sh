#!/usr/bin/env bash
# Runs test binaries one by one, each bounded in time, and ends with the
# summary line "N passed, N failed". Exit status is non-zero if any failed.
# With PERCOLATOR_EXCHANGE_DIR set, each integration test records the HTTP
# exchanges it makes into that folder (checked by `make api-check`).
set -u
passed=0; failed=0; failed_names=()
limit="${PERCOLATOR_TEST_TIMEOUT:-900}"
for t in "$@"; do
  echo "=== $t"
  # Integration tests record their HTTP exchanges for the OpenAPI check.
  if [ -n "${PERCOLATOR_EXCHANGE_DIR:-}" ] && [[ "$t" == */integration/* ]]; then
    export PERCOLATOR_EXCHANGE_LOG="$PERCOLATOR_EXCHANGE_DIR/$(basename "$t").jsonl"
  else
    unset PERCOLATOR_EXCHANGE_LOG
  fi
  began=$SECONDS
  if timeout --signal=KILL "$limit" "$t"; then
    passed=$((passed + 1))
  else
    rc=$?
    echo "!!! $t failed (exit $rc)"
    failed=$((failed + 1)); failed_names+=("$t")
  fi
  # Each program's time, so the suite's budget can be seen where it goes.
  echo "--- $(basename "$t"): $((SECONDS - began)) s"
done
[ "$failed" -gt 0 ] && printf 'failed: %s\n' "${failed_names[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
