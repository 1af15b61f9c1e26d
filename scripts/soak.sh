#!/usr/bin/env bash
# Soaks every server model: installs what is missing, builds Release, and runs
# bench/soak/soak, which puts ten minutes of mixed load with connection churn
# and hostile clients on each model in turn (about 51 minutes for all five)
# and reports whether each server's memory and open descriptors stay flat.
# Arguments go to bench/soak/soak, e.g.
#   scripts/soak.sh                                  # every model, 10 minutes each
#   scripts/soak.sh --duration 2m --models epoll,uring
#   scripts/soak.sh --duration 30s --segment 10s     # a quick look at all five (~3 min)
#   scripts/soak.sh --out /tmp/soak                  # results.json, samples.csv, logs/ there
# Exit code 0 when every model soaked stayed flat and exited 0 on SIGTERM,
# 1 when not, 2 on a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

for arg in "$@"; do
  case "$arg" in
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
               echo; exec python3 bench/soak/soak --help ;;
  esac
done

scripts/deps.sh --only build,run
cmake --preset release >/dev/null
# Every server the build defines here (server-uring needs liburing) and
# loadgen; not the tests.
available=$(cmake --build --preset release --target help | sed -n 's/^\(server-[a-z]*\|loadgen\):.*/\1/p')
# shellcheck disable=SC2086
cmake --build --preset release --target ${available}
exec python3 bench/soak/soak "$@"
