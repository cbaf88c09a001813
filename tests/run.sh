#!/usr/bin/env bash
# Runs test binaries, each bounded in time, and ends with the summary line
# "N passed, N failed". Exit status is non-zero if any failed.
# With PERCOLATOR_EXCHANGE_DIR set, each integration test records the HTTP
# exchanges it makes into that folder (checked by `make api-check`).
# PERCOLATOR_TEST_JOBS=N runs N programs at a time (default 1): every test
# takes free ports and its own temporary directories, and passes on a
# loaded machine, so programs that mostly wait (elections, TTLs) can share
# the CPUs. Each program's output is kept whole and printed in the order
# given, with its time.
set -u
limit="${PERCOLATOR_TEST_TIMEOUT:-900}"
jobs="${PERCOLATOR_TEST_JOBS:-1}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# run_one INDEX PROGRAM: its output in $out/INDEX.log, its status in
# $out/INDEX.rc, its time in $out/INDEX.s.
run_one() {
  local i=$1 t=$2 began=$SECONDS rc=0
  # Integration tests record their HTTP exchanges for the OpenAPI check.
  if [ -n "${PERCOLATOR_EXCHANGE_DIR:-}" ] && [[ "$t" == */integration/* ]]; then
    export PERCOLATOR_EXCHANGE_LOG="$PERCOLATOR_EXCHANGE_DIR/$(basename "$t").jsonl"
  else
    unset PERCOLATOR_EXCHANGE_LOG
  fi
  timeout --signal=KILL "$limit" "$t" >"$out/$i.log" 2>&1 || rc=$?
  echo "$rc" >"$out/$i.rc"
  echo $((SECONDS - began)) >"$out/$i.s"
}

report() {
  local i=$1 t=$2 rc
  echo "=== $t"
  cat "$out/$i.log"
  rc=$(cat "$out/$i.rc")
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
  else
    echo "!!! $t failed (exit $rc)"
    failed=$((failed + 1)); failed_names+=("$t")
  fi
  # Each program's time, so the suite's budget can be seen where it goes.
  echo "--- $(basename "$t"): $(cat "$out/$i.s") s"
}

passed=0; failed=0; failed_names=()
tests=("$@")
next=0     # the next program to report, in the order given
running=0
for ((i = 0; i < ${#tests[@]}; i++)); do
  if [ "$jobs" -le 1 ]; then
    run_one "$i" "${tests[i]}"
    report "$i" "${tests[i]}"
    continue
  fi
  run_one "$i" "${tests[i]}" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  # Report, in order, what has finished.
  while [ "$next" -lt "$i" ] && [ -f "$out/$next.s" ]; do
    report "$next" "${tests[next]}"; next=$((next + 1))
  done
done
wait
while [ "$next" -lt "${#tests[@]}" ]; do
  report "$next" "${tests[next]}"; next=$((next + 1))
done
[ "$failed" -gt 0 ] && printf 'failed: %s\n' "${failed_names[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
