#!/usr/bin/env bash
# Quick start: installs what is missing, builds Release and starts server-epoll
# in the foreground (Ctrl-C stops it). Arguments go to the server, e.g.
#   scripts/start.sh --port 9000 --threads 2 --mode cached
# A bare --db (no connection string after it) also starts a temporary
# PostgreSQL with the TechEmpower tables (scripts/pg.sh, in build/release/pg)
# for /db, /queries and /fortunes, and stops it when the server exits.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=build/release/servers/epoll/server-epoll
port=8080
args=("$@")
server_args=()
own_db=""
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -p|--port) port="${args[i+1]:-$port}" ;;
    --port=*) port="${args[i]#--port=}" ;;
  esac
  next="${args[i+1]:-}"
  if [[ "${args[i]}" == --db && ( -z "$next" || "$next" == -* ) ]]; then
    own_db=build/release/pg
    continue
  fi
  server_args+=("${args[i]}")
done

# Only what the server, its hints and a --db need: the compiler and
# libraries, curl, PostgreSQL (scripts/test.sh and scripts/compare.sh install the rest).
scripts/deps.sh --only "build,run${own_db:+,db}"
cmake --preset release >/dev/null
cmake --build --preset release --target server-epoll floor loadgen

if [[ -n "$own_db" ]]; then
  echo "starting a temporary PostgreSQL in ${own_db} (scripts/pg.sh)"
  url=$(scripts/pg.sh start "$own_db" --replace | tail -n 1)
  server_args+=(--db "$url")
fi

cat <<MSG

server-epoll is starting in the foreground (Ctrl-C stops it). Try it from another shell:
  curl -i http://127.0.0.1:${port}/plaintext
  curl -i http://127.0.0.1:${port}/json
  curl -i http://127.0.0.1:${port}/fortunes
  curl -i http://127.0.0.1:${port}/db          (503 without --db; scripts/start.sh --db starts a PostgreSQL)
  curl -i 'http://127.0.0.1:${port}/queries?queries=20'
  build/release/bench/loadgen/loadgen -t1 -c64 -d10s http://127.0.0.1:${port}/plaintext
  build/release/bench/loadgen/loadgen -t1 -c256 -d10s --pipeline 16 http://127.0.0.1:${port}/plaintext
Compare every model with nginx and the floor on this machine (CPU per request, with and without pipelining):
  scripts/compare.sh
The same with wrk as the load client, or both side by side:
  bench/compare/compare --quick --client wrk
  bench/compare/compare --quick --client loadgen,wrk
All options: ${bin} --help

MSG
if [[ -z "$own_db" ]]; then
  exec "${bin}" "${server_args[@]}"
fi
# The database goes when the server does (Ctrl-C reaches both; the server
# exits 0 on SIGINT after finishing responses in flight).
trap 'scripts/pg.sh stop "$own_db" >/dev/null' EXIT
"${bin}" "${server_args[@]}"
