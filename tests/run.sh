#!/usr/bin/env bash
# Runs test binaries one by one, each bounded in time, and ends with the
# summary line "N passed, N failed". Exit status is non-zero if any failed.
set -u
passed=0; failed=0; failed_names=()
limit="${PERCOLATOR_TEST_TIMEOUT:-900}"
for t in "$@"; do
  echo "=== $t"
  if timeout --signal=KILL "$limit" "$t"; then
    passed=$((passed + 1))
  else
    rc=$?
    echo "!!! $t failed (exit $rc)"
    failed=$((failed + 1)); failed_names+=("$t")
  fi
done
[ "$failed" -gt 0 ] && printf 'failed: %s\n' "${failed_names[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
