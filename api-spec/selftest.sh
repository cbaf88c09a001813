#!/bin/sh
# selftest.sh — prove that validate.mjs accepts what the spec documents and
# rejects what it does not. Run from anywhere; needs node_modules (npm ci).
#
#   1. every example in service.yaml and oracle.yaml, turned into an exchange by
#      test/examples.mjs, validates (so the examples match their schemas);
#   2. test/valid.jsonl (the examples' 2xx / off-spec exchanges plus
#      hand-written ones: base64 keys, own writes, 503 with Retry-After, ...)
#      passes as a whole;
#   3. each line of test/invalid.jsonl, as a file of its own, fails, and its
#      failure lines contain the line's "selftest_expect" text (the validator
#      ignores that field);
#   4. no exchanges at all (no file, an empty file) is a failure;
#   5. split.mjs --check passes on what split.mjs writes and fails when a
#      generated document differs from what percolator.yaml gives.
set -u
cd "$(dirname "$0")" || exit 1

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "selftest FAIL: $*"; }

# 1. the spec's own examples
if node test/examples.mjs > "$tmp/examples.jsonl" &&
   node validate.mjs "$tmp/examples.jsonl" > "$tmp/out" 2>&1; then
  ok
else
  bad "the spec's examples do not validate:"; sed 's/^/  /' "$tmp/out"
fi

# 2. the valid file
if node validate.mjs test/valid.jsonl > "$tmp/out" 2>&1; then
  ok
else
  bad "test/valid.jsonl does not validate:"; sed 's/^/  /' "$tmp/out"
fi

# 3. each invalid exchange on its own: split test/invalid.jsonl into one
# file per line (N.jsonl, with its expectation in N.expect), validate them
# in one run, and look for each file's failure line.
mkdir "$tmp/inv"
n=$(node -e '
  const fs = require("fs");
  const lines = fs.readFileSync("test/invalid.jsonl", "utf8").split("\n").filter((l) => l.trim());
  lines.forEach((l, i) => {
    fs.writeFileSync(`${process.argv[1]}/${i + 1}.jsonl`, l + "\n");
    fs.writeFileSync(`${process.argv[1]}/${i + 1}.expect`, String(JSON.parse(l).selftest_expect || ""));
  });
  console.log(lines.length);' "$tmp/inv") || n=0
if [ "$n" -gt 0 ]; then
  files=""
  i=1; while [ "$i" -le "$n" ]; do files="$files $tmp/inv/$i.jsonl"; i=$((i + 1)); done
  # shellcheck disable=SC2086 # the paths hold no spaces (mktemp -d)
  node validate.mjs $files > "$tmp/out" 2>&1
  rc=$?
  if [ "$rc" -ne 1 ]; then bad "the invalid exchanges did not make the validator exit 1 (exit $rc)"; else ok; fi
  if grep -q "api-spec: 0 passed, $n failed" "$tmp/out"; then ok; else
    bad "expected all $n invalid exchanges to fail:"; grep '^api-spec:' "$tmp/out" | sed 's/^/  /'
  fi
  i=1; while [ "$i" -le "$n" ]; do
    expect=$(cat "$tmp/inv/$i.expect")
    if ! grep -F "[$tmp/inv/$i.jsonl:1]" "$tmp/out" > "$tmp/lines"; then
      bad "invalid line $i passed the validator (expected: $expect)"
    elif [ -n "$expect" ] && ! grep -qF -- "$expect" "$tmp/lines"; then
      bad "invalid line $i failed, but not with \"$expect\":"; sed 's/^/  /' "$tmp/lines"
    else
      ok
    fi
    i=$((i + 1))
  done
else
  bad "test/invalid.jsonl is empty or unreadable"
fi

# 4. nothing recorded is a failure, not a pass
if node validate.mjs > "$tmp/out" 2>&1; then bad "no arguments passed"; else ok; fi
: > "$tmp/empty.jsonl"
if node validate.mjs "$tmp/empty.jsonl" > "$tmp/out" 2>&1; then bad "an empty log passed"; else ok; fi
printf 'not json\n' > "$tmp/garbage.jsonl"
if node validate.mjs "$tmp/garbage.jsonl" > "$tmp/out" 2>&1; then bad "a line that is not JSON passed"; else ok; fi

# 5. the staleness check of the generated documents, on copies in $tmp
mkdir "$tmp/gen"
if node split.mjs --dir "$tmp/gen" > "$tmp/out" 2>&1 &&
   node split.mjs --check --dir "$tmp/gen" > "$tmp/out" 2>&1; then ok; else
  bad "split.mjs --check fails on what split.mjs wrote:"; sed 's/^/  /' "$tmp/out"
fi
printf '# edited by hand\n' >> "$tmp/gen/oracle.yaml"
if node split.mjs --check --dir "$tmp/gen" > "$tmp/out" 2>&1; then
  bad "split.mjs --check passed a hand-edited oracle.yaml"
elif grep -q "oracle.yaml is stale" "$tmp/out"; then ok; else
  bad "split.mjs --check failed, but not naming oracle.yaml:"; sed 's/^/  /' "$tmp/out"
fi

echo "api-spec selftest: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
