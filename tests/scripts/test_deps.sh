#!/usr/bin/env bash
# scripts:deps: scripts/deps.sh's arguments, on a system where nothing is
# installed (a dpkg-query on PATH that knows no package), with --print so
# nothing is installed: the groups each form chooses, and the refusals.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
printf '#!/bin/sh\nexit 1\n' >"$fake/dpkg-query"
chmod +x "$fake/dpkg-query"
deps() { PATH="$fake:$PATH" "$repo/scripts/deps.sh" "$@"; }
failures=0
expect() {  # expect WHAT WANT GOT
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1"; echo "  want: $2"; echo "  got:  $3"; failures=$((failures + 1))
  else
    echo "ok: $1"
  fi
}
expect "--only run,db" "curl postgresql-15 postgresql-client-15 procps python3" "$(deps --print --only run,db)"
expect "--only=build is what start.sh's build needs" \
  "cmake g++ libcli11-dev libfmt-dev libpq-dev libsimdjson-dev liburing-dev libuv1-dev make ninja-build nlohmann-json3-dev node-llhttp pkg-config zlib1g-dev" \
  "$(deps --print --only=build)"
all=$(deps --print)
for p in g++ catch2 curl git podman wine64 g++-mingw-w64-x86-64-posix; do
  case " $all " in *" $p "*) ;; *) expect "the default groups hold $p" "$p" "(missing)" ;; esac
done
case " $all " in *" nginx-light "*) expect "the default groups leave out the peers" "" "nginx-light" ;; esac
# A group named as an argument is added to the default four (pg.sh and the tests say "scripts/deps.sh test").
expect "test adds nothing to the default" "$all" "$(deps --print test)"
with_bench=$(deps --print bench)
case " $with_bench " in *" nginx-light "*" h2o "*|*" h2o "*" nginx-light "*) ;; *) expect "bench adds the peers" "nginx-light h2o" "$with_bench" ;; esac
# Refusals: exit 2 and a message naming the argument.
err=$(deps --print nope 2>&1); rc=$?
expect "an unknown argument: exit 2" 2 "$rc"
case "$err" in *"unknown argument 'nope'"*) ;; *) expect "it names the argument" "unknown argument 'nope'" "$err" ;; esac
err=$(deps --print --only build,nope 2>&1); rc=$?
expect "an unknown group: exit 2" 2 "$rc"
case "$err" in *"unknown group 'nope'"*) ;; *) expect "it names the group" "unknown group 'nope'" "$err" ;; esac
[ "$failures" -eq 0 ] || { echo "$failures failed"; exit 1; }
echo "all passed"
