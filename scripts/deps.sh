#!/usr/bin/env bash
# Installs the Debian packages servermodels needs, only those missing.
#   scripts/deps.sh                 build, test, container and Windows dependencies (what scripts/test.sh needs)
#   scripts/deps.sh bench           ... plus the benchmark peers (wrk, nginx-light, h2o); any GROUP below
#                                   named so is added to those four
#   scripts/deps.sh --print ...     the packages it would install (those missing), one line; installs nothing
#   scripts/deps.sh --only GROUPS   just these groups, a comma list of
#                                   build       compilers and libraries for a Release build (libpq-dev: the db workloads)
#                                   test        sanitizer runtimes, Catch2, the test tools (wrk and h2load:
#                                               bench/compare --client is tested with them), PostgreSQL 15
#                                               (scripts/pg.sh starts a temporary one; no system cluster is made),
#                                               linux-perf (bench/compare counts syscalls with it),
#                                               valgrind (sm_bench_session --instructions counts under callgrind;
#                                               ctest micro:instructions), python3-scipy (bench/compare's
#                                               significance tests: --compare, the winners), python3-kubernetes
#                                               (tests/k8s reads deploy/k8s/'s manifests with its models)
#                                   containers  Podman, podman-compose, buildah, runc, debootstrap,
#                                               python3 (docker/build.sh reads servers/models.json),
#                                               catatonit (a pod's infra container: podman kube play)
#                                   windows     mingw-w64 (posix threads) to cross-build server-iocp.exe,
#                                               Wine (64-bit) to run it and the Windows unit suites
#                                   bench       the peers and what bench/compare runs with (PostgreSQL 15
#                                               for the db scenarios, python3-scipy for its significance tests)
#                                   run         what scripts/start.sh's hints use (curl) and python3
#                                               (scripts/soak.sh's bench/soak/soak)
#                                   db          PostgreSQL 15, for scripts/pg.sh (scripts/start.sh --db)
#                                   (docker/Dockerfile installs --only build, its bench image bench)
# On other systems install the equivalents; CMake finds them with
# find_package/pkg-config (see docs/building.md).
set -euo pipefail

declare -A groups=(
  [build]="g++ cmake ninja-build pkg-config make node-llhttp libuv1-dev liburing-dev libsimdjson-dev
           nlohmann-json3-dev libcli11-dev libfmt-dev libpq-dev zlib1g-dev"
  [test]="clang-14 libclang-rt-14-dev catch2 procps iproute2 curl git python3 python3-jsonschema python3-scipy python3-kubernetes wrk nghttp2-client
          postgresql-15 postgresql-client-15 linux-perf valgrind libhdrhistogram-java default-jre-headless"
  [containers]="podman podman-compose buildah runc conmon containernetworking-plugins
                golang-github-containernetworking-plugin-dnsname fuse-overlayfs slirp4netns uidmap
                iptables debootstrap python3 catatonit"
  [windows]="g++-mingw-w64-x86-64-posix wine wine64"
  [bench]="wrk nghttp2-client nginx-light h2o util-linux procps python3 python3-scipy postgresql-15 postgresql-client-15
           linux-perf"
  [run]="curl procps python3"
  [db]="postgresql-15 postgresql-client-15"
)

chosen=(build test containers windows)
print_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    build|test|containers|windows|bench|run|db) chosen+=("$1") ;;
    --only) IFS=, read -r -a chosen <<<"${2:?--only needs a comma list of groups}"; shift ;;
    --only=*) IFS=, read -r -a chosen <<<"${1#--only=}" ;;
    --print) print_only=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "deps.sh: unknown argument '$1' (expected: a group, or --only GROUPS; see --help)" >&2; exit 2 ;;
  esac
  shift
done

want=()
for g in "${chosen[@]}"; do
  [ -n "${groups[$g]+x}" ] || { echo "deps.sh: unknown group '$g' (groups: ${!groups[*]})" >&2; exit 2; }
  read -r -a pkgs <<<"$(echo ${groups[$g]})"
  want+=("${pkgs[@]}")
done

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "deps.sh: not a Debian system; install these (or equivalents) yourself: ${want[*]}" >&2
  exit 1
fi

missing=()
for p in $(printf '%s\n' "${want[@]}" | sort -u); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "$print_only" = 1 ]; then
  echo "${missing[*]}"
  exit 0
fi
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing ${missing[*]}"
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# policy-rc.d keeps the peers' packages (nginx, h2o) from starting system
# services on port 80 during installation; the bench starts its own instances.
policy=/usr/sbin/policy-rc.d
cleanup=()
trap 'if [ ${#cleanup[@]} -gt 0 ]; then "${sudo[@]}" rm -f "${cleanup[@]}"; fi' EXIT
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod +x "$policy"
  cleanup+=("$policy")
fi
# Nor does postgresql-15 make a 'main' cluster (scripts/pg.sh makes its own):
# postgresql-common's createcluster.conf reads createcluster.d/*.conf, and a
# first install skips the cluster when create_main_cluster is off.
nocluster=/etc/postgresql-common/createcluster.d/servermodels-no-main-cluster.conf
if printf '%s\n' "${missing[@]}" | grep -q '^postgresql-[0-9]*$' && [ ! -e "$nocluster" ]; then
  "${sudo[@]}" mkdir -p "${nocluster%/*}"
  echo "create_main_cluster = false" | "${sudo[@]}" tee "$nocluster" >/dev/null
  cleanup+=("$nocluster")
fi
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps.sh: done"
