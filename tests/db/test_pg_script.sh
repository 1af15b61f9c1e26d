#!/usr/bin/env bash
# db:pg-script: scripts/pg.sh in directories of its own (not the fixture's).
#   test_pg_script.sh PG_SH WORKDIR
# In WORKDIR (under the build tree) and in a mktemp -d directory (closed to
# other users: run as root, the cluster then lives under /tmp): start prints
# the URL and writes it to DIR/url, the URL works, `url` prints it, a second
# start is refused and leaves the server alone; pause and resume; stop leaves
# no process of that cluster and no cluster, and stopping again is no error.
# Then two starts at once in two directories, and the usage: --help, bad
# commands, no server binaries (77). Exit 77 when no PostgreSQL is installed.
# The checks read `CHECK && ok ... || bad ...` on purpose (ok never fails);
# cleanup runs from the EXIT trap.
# shellcheck disable=SC2015,SC2317
set -euo pipefail

pg=${1:?usage: test_pg_script.sh PG_SH WORKDIR}
work=${2:?usage: test_pg_script.sh PG_SH WORKDIR}

fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
expect() {  # expect WHAT EXPECTED ACTUAL
  if [ "$2" == "$3" ]; then ok "$1"; else bad "$1"; echo "     expected: $2"; echo "     got:      $3"; fi
}

psql=$(command -v psql || printf '%s\n' /usr/lib/postgresql/*/bin/psql | sort -V | tail -n1)
export PGCONNECT_TIMEOUT=5
worlds() { "$psql" "$1" -X -A -t -q -c 'SELECT count(*) FROM world' 2>&1; }

rm -rf "$work"
mkdir -p "$work"
tmp=$(mktemp -d)
dirs=("$work/a" "$tmp/b" "$work/c1" "$work/c2")
cleanup() {
  local d
  for d in "${dirs[@]}"; do "$pg" stop "$d" >/dev/null 2>&1 || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- usage ------------------------------------------------------------------
out=$("$pg" --help) && [[ "$out" == *"pg.sh start DIR"* && "$out" == *"pg.sh stop DIR"* ]] &&
  ok "--help" || bad "--help: $out"
rc=0; "$pg" >/dev/null 2>&1 || rc=$?; expect "no command: exit 2" 2 "$rc"
rc=0; "$pg" frobnicate "$work/x" >/dev/null 2>&1 || rc=$?; expect "an unknown command: exit 2" 2 "$rc"
rc=0; "$pg" start >/dev/null 2>&1 || rc=$?; expect "start without DIR: exit 2" 2 "$rc"
rc=0; "$pg" start "$work/x" --port nope >/dev/null 2>&1 || rc=$?; expect "a bad --port: exit 2" 2 "$rc"
rc=0; SM_PG_BINDIR=/nonexistent "$pg" start "$work/x" >/dev/null 2>"$work/nobin.err" || rc=$?
expect "no server binaries: exit 77" 77 "$rc"
grep -q "deps.sh" "$work/nobin.err" && ok "... saying how to install them" || bad "no install hint: $(cat "$work/nobin.err")"
[ ! -e "$work/x/url" ] && ok "... and no URL file" || bad "a URL file without a server"

# ---- one directory's whole life -----------------------------------------------
life() {  # life DIR [pause]
  local dir=$1 out url rc data pid kids p left
  echo "-- $dir"
  rc=0; out=$("$pg" start "$dir" 2>"$work/start.err") || rc=$?
  if [ $rc -eq 77 ]; then
    cat "$work/start.err"; echo "skipped: no PostgreSQL server installed"; exit 77
  fi
  expect "start: exit 0" 0 "$rc"
  [ $rc -eq 0 ] || { cat "$work/start.err"; return; }
  url=$(tail -n1 <<<"$out")
  [[ "$url" =~ ^postgresql://benchmarkdbuser:benchmarkdbpass@127\.0\.0\.1:[0-9]+/hello_world$ ]] &&
    ok "start prints the URL last: $url" || bad "start's last line is not the URL: $url"
  expect "DIR/url holds it" "$url" "$(cat "$dir/url" 2>&1)"
  expect "pg.sh url prints it" "$url" "$("$pg" url "$dir" 2>&1)"
  expect "the URL works (10000 worlds)" 10000 "$(worlds "$url")"

  data=$(sed -n 's/^data=//p' "$dir/pg.env")
  pid=$(head -n1 "$data/postmaster.pid")
  kids=$(ps -o pid= --ppid "$pid" | xargs)
  [ -d "/proc/$pid" ] && ok "the postmaster runs (pid $pid, children $kids)" || bad "no postmaster $pid"

  rc=0; "$pg" start "$dir" >/dev/null 2>"$work/again.err" || rc=$?
  [ $rc -ne 0 ] && grep -q "already running" "$work/again.err" &&
    ok "a second start is refused: $(cat "$work/again.err")" || bad "a second start: exit $rc, $(cat "$work/again.err")"
  expect "... and leaves the server alone" 10000 "$(worlds "$url")"
  expect "... and its URL" "$url" "$(cat "$dir/url" 2>&1)"

  if [ "${2:-}" = pause ]; then
    "$pg" pause "$dir" && ok "pause" || bad "pause failed"
    ! "$pg" url "$dir" >/dev/null 2>&1 && ok "paused: url refuses" || bad "paused: url still answers"
    ! worlds "$url" >/dev/null && ok "paused: no server" || bad "paused: the server answers"
    expect "resume prints the same URL" "$url" "$("$pg" resume "$dir" 2>&1)"
    expect "resumed: the data is there" 10000 "$(worlds "$url")"
    pid=$(head -n1 "$data/postmaster.pid")
    kids=$(ps -o pid= --ppid "$pid" | xargs)
  fi

  rc=0; "$pg" stop "$dir" || rc=$?
  expect "stop: exit 0" 0 "$rc"
  left=""
  for p in $pid $kids; do [ -d "/proc/$p" ] && left+=" $p"; done
  for p in /proc/[0-9]*; do
    grep -q -a -F -- "$data" "$p/cmdline" 2>/dev/null && left+=" ${p#/proc/}"
  done
  expect "stop leaves no process of it (postmaster $pid, children $kids)" "" "$left"
  [ ! -e "$data" ] && ok "stop removes the cluster ($data)" || bad "stop left $data"
  [ ! -e "$dir/url" ] && ok "stop removes DIR/url" || bad "stop left $dir/url"
  ! "$pg" url "$dir" >/dev/null 2>&1 && ok "stopped: url refuses" || bad "stopped: url still answers"
  ! worlds "$url" >/dev/null && ok "stopped: no server" || bad "stopped: the server answers"
  rc=0; "$pg" stop "$dir" || rc=$?
  expect "stop again: exit 0" 0 "$rc"
}

life "$work/a" pause
life "$tmp/b"

# ---- two at once ------------------------------------------------------------
echo "-- two starts at once"
"$pg" start "$work/c1" >"$work/c1.out" 2>&1 & p1=$!
"$pg" start "$work/c2" >"$work/c2.out" 2>&1 & p2=$!
rc1=0; wait $p1 || rc1=$?
rc2=0; wait $p2 || rc2=$?
expect "both started" "0 0" "$rc1 $rc2"
u1=$(cat "$work/c1/url" 2>/dev/null || true) u2=$(cat "$work/c2/url" 2>/dev/null || true)
[ -n "$u1" ] && [ "$u1" != "$u2" ] && ok "on two ports" || bad "URLs: '$u1' '$u2'; $(cat "$work/c1.out" "$work/c2.out")"
expect "both answer" "10000 10000" "$(worlds "$u1") $(worlds "$u2")"
"$pg" stop "$work/c1" & p1=$!
"$pg" stop "$work/c2" & p2=$!
rc1=0; wait $p1 || rc1=$?
rc2=0; wait $p2 || rc2=$?
expect "both stopped" "0 0" "$rc1 $rc2"

exit $fail
