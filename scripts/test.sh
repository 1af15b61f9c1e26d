#!/usr/bin/env bash
# Installs what is missing, builds and runs the whole test suite: unit tests
# and the conformance and robustness suites against every server binary,
# twice: a g++ Release build with warnings as errors (preset ci), and a
# clang-14 build under AddressSanitizer + UndefinedBehaviorSanitizer (preset
# clang-asan); then the conformance suite once more against every model built
# with ThreadSanitizer (preset ci-tsan).
#   scripts/test.sh                   all three (what CI runs)
#   scripts/test.sh --preset release  one preset (release, debug, asan, clang-asan, tsan, ci, ci-tsan)
set -euo pipefail
cd "$(dirname "$0")/.."

presets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) presets+=("${2:?--preset needs a name}"); shift 2 ;;
    --preset=*) presets+=("${1#--preset=}"); shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#presets[@]} -gt 0 ] || presets=(ci clang-asan ci-tsan)

scripts/deps.sh
jobs=$(nproc)
for preset in "${presets[@]}"; do
  echo "== ${preset}: configure and build"
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}" -j "${jobs}"
  echo "== ${preset}: tests"
  ctest --preset "${preset}" -j "${jobs}" --timeout 300
done
echo "== all tests passed (${presets[*]})"
