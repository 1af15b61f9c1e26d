#!/usr/bin/env bash
# Quick start: installs what is missing, builds Release and starts server-epoll
# in the foreground (Ctrl-C stops it). Arguments go to the server, e.g.
#   scripts/start.sh --port 9000 --threads 2 --mode cached
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target server-epoll floor loadgen

bin=build/release/servers/epoll/server-epoll
port=8080
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -p|--port) port="${args[i+1]:-$port}" ;;
    --port=*) port="${args[i]#--port=}" ;;
  esac
done

cat <<MSG

server-epoll is starting in the foreground (Ctrl-C stops it). Try it from another shell:
  curl -i http://127.0.0.1:${port}/plaintext
  curl -i http://127.0.0.1:${port}/json
  build/release/bench/loadgen/loadgen -t1 -c64 -d10s http://127.0.0.1:${port}/plaintext
  build/release/bench/loadgen/loadgen -t1 -c256 -d10s --pipeline 16 http://127.0.0.1:${port}/plaintext
Compare every model with nginx and the floor on this machine (CPU per request, with and without pipelining):
  scripts/deps.sh bench && bench/compare/compare --quick
The same with wrk as the load client, or both side by side:
  bench/compare/compare --quick --client wrk
  bench/compare/compare --quick --client loadgen,wrk
All options: ${bin} --help

MSG
exec "${bin}" "$@"
