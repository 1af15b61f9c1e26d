#!/bin/sh
# sm_bench_session --instructions (ctest "micro:instructions"): run twice
# under callgrind with a few batches, every stage of every request has a
# positive count, the two runs' counts are the same to the instruction, and
# "session" costs at least what "llhttp" does (it runs llhttp). Counts, not
# times: nothing here depends on the machine's speed. Exit 77 (skipped) when
# valgrind is not installed, the build has no valgrind/callgrind.h or it has
# sanitizers (valgrind cannot run those).
#   instructions.sh SM_BENCH_SESSION [BATCHES]
set -u
session=$1 batches=${2:-20}
if ! command -v valgrind >/dev/null 2>&1; then
  echo "skipped: valgrind is not installed (scripts/deps.sh installs it)"
  exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for run in 1 2; do
  "$session" --instructions "$batches" >"$tmp/$run" 2>"$tmp/$run.err"
  rc=$?
  if [ "$rc" -eq 3 ]; then
    echo "skipped: $(cat "$tmp/$run.err")"
    exit 77
  elif [ "$rc" -ne 0 ]; then
    echo "FAIL: run $run: exit $rc: $session --instructions $batches"
    cat "$tmp/$run" "$tmp/$run.err"
    exit 1
  fi
done
cat "$tmp/1"
fail=0
if cmp -s "$tmp/1" "$tmp/2"; then
  echo "ok: the two runs counted the same"
else
  echo "FAIL: the two runs counted differently:"; diff "$tmp/1" "$tmp/2"; fail=1
fi
# The totals table: after its header, a row per request: its name (words),
# then one count per stage.
awk '
  BEGIN { n = split("guard llhttp through compose session 256-conns", stage, " ") }
  /^Ir in total per stage/ { totals = 1; next }
  totals && $1 == "request" { next }
  totals && NF > n {
    rows++
    row_bad = 0
    name = $1
    for (i = 2; i <= NF - n; i++) name = name " " $i
    for (s = 1; s <= n; s++) {
      v = $(NF - n + s)
      count[stage[s]] = v + 0
      if (v !~ /^[0-9]+$/ || v + 0 <= 0) {
        printf "FAIL: %s, %s: \"%s\" is not a positive count\n", name, stage[s], v; row_bad = 1
      }
    }
    if (count["session"] < count["llhttp"]) {
      printf "FAIL: %s: session %.0f < llhttp %.0f\n", name, count["session"], count["llhttp"]; row_bad = 1
    }
    if (row_bad) bad = 1
    else printf "ok: %s: every stage counted, session %.0f >= llhttp %.0f\n", name, count["session"], count["llhttp"]
  }
  END { if (rows != 3) { printf "FAIL: %d rows of totals, not 3\n", rows; bad = 1 }; exit bad }
' "$tmp/1" || fail=1
exit $fail
