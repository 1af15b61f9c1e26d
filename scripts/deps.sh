#!/usr/bin/env bash
# Installs the Debian packages servermodels needs, only those missing.
#   scripts/deps.sh            build and test dependencies
#   scripts/deps.sh bench      ... plus the benchmark peers (wrk, nginx-light, h2o)
# On other systems install the equivalents; CMake finds them with
# find_package/pkg-config (see README "Building elsewhere").
set -euo pipefail

build=(g++ clang-14 libclang-rt-14-dev cmake ninja-build pkg-config make
       node-llhttp libuv1-dev liburing-dev libsimdjson-dev nlohmann-json3-dev
       libcli11-dev libfmt-dev catch2 procps iproute2 python3 python3-jsonschema)
bench=(wrk nginx-light h2o util-linux)

want=("${build[@]}")
for arg in "$@"; do
  case "$arg" in
    bench) want+=("${bench[@]}") ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "deps.sh: unknown argument '$arg' (expected: bench)" >&2; exit 2 ;;
  esac
done

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "deps.sh: not a Debian system; install these (or equivalents) yourself: ${want[*]}" >&2
  exit 1
fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing ${missing[*]}"
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# policy-rc.d keeps the peers' packages (nginx, h2o) from starting system
# services on port 80 during installation; the bench starts its own instances.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod +x "$policy"
  trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps.sh: done"
