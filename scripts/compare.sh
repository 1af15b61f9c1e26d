#!/usr/bin/env bash
# The main command: installs what is missing (build dependencies and the
# peers nginx and h2o), builds Release, and compares every server model side
# by side with bench/compare (--quick unless other options are given: about
# two minutes on 2 cores). Arguments go to bench/compare/compare, e.g.
#   scripts/compare.sh                        # quick comparison, every model
#   scripts/compare.sh --out /tmp/cmp         # ... into /tmp/cmp
#   scripts/compare.sh --full                 # both response modes, 5 rounds x 5 s
#   scripts/compare.sh --targets epoll,nginx --rounds 9
# It prints the table and where results.json, results.csv and report.html are.
set -euo pipefail
cd "$(dirname "$0")/.."

args=("$@")
quick=(--quick)
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
               echo; exec bench/compare/compare --help ;;
    --full) quick=(); unset 'args[i]' ;;
    --quick|--from) quick=() ;;
  esac
done

scripts/deps.sh --only build,bench
cmake --preset release >/dev/null
# Every server the build defines here (server-uring needs liburing), the
# floors (floor-uring needs liburing too) and loadgen; not the tests.
available=$(cmake --build --preset release --target help | sed -n 's/^\(server-[a-z]*\|floor\|floor-uring\|loadgen\):.*/\1/p')
# shellcheck disable=SC2086
cmake --build --preset release --target ${available}
exec python3 bench/compare/compare "${quick[@]}" "${args[@]}"
