#!/usr/bin/env bash
# build:without_catch2: configuring without Catch2 (as scripts/start.sh and
# scripts/compare.sh do on a machine without the test tools) succeeds with a
# warning and no test suites; with SM_REQUIRE_TESTS=ON (scripts/test.sh) it
# fails, naming Catch2.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(-S "$repo" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSM_WINDOWS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON)
failures=0
out=$(cmake "${common[@]}" -B "$work/lax" 2>&1); rc=$?
if [ "$rc" -ne 0 ]; then echo "FAIL: configure without Catch2 exited $rc"; echo "$out" | tail -20; failures=$((failures + 1)); fi
case "$out" in *"Catch2 2 not found: the test suites are not built"*) echo "ok: the warning" ;;
  *) echo "FAIL: no warning naming Catch2"; failures=$((failures + 1)) ;; esac
if [ -e "$work/lax/build.ninja" ] && grep -q "sm_unit_tests" "$work/lax/build.ninja"; then
  echo "FAIL: the test suites are in the build"; failures=$((failures + 1))
elif grep -q "server-epoll" "$work/lax/build.ninja" 2>/dev/null; then
  echo "ok: the servers are built, the suites are not"
else
  echo "FAIL: no build.ninja with server-epoll"; failures=$((failures + 1))
fi
out=$(cmake "${common[@]}" -DSM_REQUIRE_TESTS=ON -B "$work/strict" 2>&1); rc=$?
if [ "$rc" -eq 0 ]; then echo "FAIL: SM_REQUIRE_TESTS=ON configured without Catch2"; failures=$((failures + 1))
else
  case "$out" in *"Catch2 2 not found: the test suites need it"*) echo "ok: SM_REQUIRE_TESTS=ON refuses, naming Catch2" ;;
    *) echo "FAIL: the refusal does not name Catch2"; echo "$out" | tail -10; failures=$((failures + 1)) ;; esac
fi
[ "$failures" -eq 0 ] || exit 1
echo "all passed"
