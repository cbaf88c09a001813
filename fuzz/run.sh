#!/usr/bin/env bash
# fuzz/run.sh DIR TARGET... — run each built harness DIR/fuzz_<target> for
# FUZZ_SECONDS on its seeds, one after the other (the machine has 2 cores),
# print what each did, and fail if any found a crash, a leak, a timeout or
# a broken property. Inputs that broke one are saved in DIR/crashes/.
set -u
dir="$1"; shift
secs="${FUZZ_SECONDS:-20}"
mkdir -p "$dir/logs" "$dir/crashes"
failed=()

# Longest input per harness: room for the largest valid case (a 4104-byte
# key escaped twice over, a JSON list of long base64 keys), not much more.
max_len() {
  case "$1" in
    keys) echo 8400 ;;
    records) echo 4700 ;;
    writes) echo 16384 ;;
    hwm) echo 256 ;;
    *) echo 4096 ;;
  esac
}

for t in "$@"; do
  bin="$dir/fuzz_$t" work="$dir/corpus/$t" log="$dir/logs/$t.log"
  rm -rf "$work" && mkdir -p "$work"
  "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len="$(max_len "$t")" \
    -print_final_stats=1 -artifact_prefix="$dir/crashes/$t-" "$work" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  added=$(sed -n 's/^stat::new_units_added: *//p' "$log")
  if [ "$rc" -eq 0 ]; then
    printf 'fuzz_%-8s ok   %s runs in %ss (%s/s), %s new inputs\n' "$t" "${runs:-?}" "$secs" "${rate:-?}" "${added:-?}"
  else
    printf 'fuzz_%-8s FAILED (exit %s); the end of %s:\n' "$t" "$rc" "$log"
    tail -n 40 "$log"
    failed+=("$t")
  fi
done

echo "long run: make fuzz FUZZ_SECONDS=3600 [FUZZ_TARGETS=\"keys writes\"]"
echo "  or one harness, by hand: $dir/fuzz_<target> -max_total_time=3600 -rss_limit_mb=2048 $dir/corpus/<target> fuzz/corpus/<target>"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (reproduce: $dir/fuzz_<target> $dir/crashes/<file>)"
  exit 1
fi
