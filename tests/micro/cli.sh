#!/bin/sh
# The micro-benchmarks' command lines (ctest "micro:cli"): --help prints the
# usage and exits 0, a count that is not a positive integer exits 2 naming
# what it wants (sm_bench_session --instructions too: these need no
# valgrind; micro:instructions counts), and a short run prints its table.
#   cli.sh SM_BENCH_SESSION SM_BENCH_JSON
set -u
session=$1 json=$2
fail=0
check() {  # check WHAT WANT_RC WANT_TEXT COMMAND...
  what=$1 want_rc=$2 want=$3
  shift 3
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want_rc" ]; then
    echo "FAIL: $what: exit $rc, not $want_rc: $*"; echo "$out"; fail=1
  elif ! printf '%s\n' "$out" | grep -qF -- "$want"; then
    echo "FAIL: $what: no '$want' in the output of: $*"; echo "$out"; fail=1
  else
    echo "ok: $what"
  fi
}
check "session --help" 0 "usage: sm_bench_session" "$session" --help
check "session -h" 0 "usage: sm_bench_session" "$session" -h
check "session zero batches" 2 "BATCHES '0': expected a whole number from 1 to" "$session" 0
check "session negative" 2 "BATCHES '-5': expected a whole number" "$session" -5
check "session not a number" 2 "BATCHES '12x': expected a whole number" "$session" 12x
check "session zero repeats" 2 "REPEATS '0': expected a whole number from 1 to 1000" "$session" 10 0
check "session repeats over the maximum" 2 "REPEATS '1001': expected a whole number from 1 to 1000" "$session" 10 1001
check "session extra argument" 2 "at most 2 arguments" "$session" 10 1 1
check "session short run" 0 "loadgen /plaintext" "$session" 20 1
check "session --instructions --help" 0 "sm_bench_session --instructions [BATCHES]" "$session" --instructions --help
check "session --instructions zero batches" 2 "BATCHES '0': expected a whole number from 1 to" "$session" --instructions 0
check "session --instructions extra argument" 2 "at most 1 argument" "$session" --instructions 10 1
check "json --help" 0 "usage: sm_bench_json" "$json" --help
check "json zero" 2 "ITERATIONS '0': expected a whole number" "$json" 0
check "json not a number" 2 "ITERATIONS 'abc': expected a whole number" "$json" abc
check "json extra argument" 2 "at most 1 argument" "$json" 10 10
check "json short run" 0 "sm::http::serialize" "$json" 100
exit $fail
