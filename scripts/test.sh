#!/usr/bin/env bash
# Installs what is missing, builds and runs the whole test suite: unit tests
# and the conformance and robustness suites against every server binary,
# twice: a g++ Release build with warnings as errors (preset ci), and a
# clang-14 build under AddressSanitizer + UndefinedBehaviorSanitizer (preset
# clang-asan); then the conformance suite once more against every model built
# with ThreadSanitizer (preset ci-tsan).
#   scripts/test.sh                   all three (what CI runs)
#   scripts/test.sh --preset release  one preset (release, debug, asan, clang-asan, tsan, ci, ci-tsan)
# Every preset runs even when one fails; a summary of all of them ends the
# output, and the exit code is 1 when any failed. All three take about 40
# minutes on 2 cores.
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
# Every preset runs, whatever the one before it did; the summary at the end
# says how each went, and the exit code is 1 if any failed.
summary=()
failed=()
for preset in "${presets[@]}"; do
  start=${SECONDS}
  echo "== ${preset}: configure and build"
  if ! cmake --preset "${preset}" -DSM_REQUIRE_TESTS=ON >/dev/null || ! cmake --build --preset "${preset}" -j "${jobs}"; then
    outcome="FAILED to configure or build"
  else
    echo "== ${preset}: tests"
    if ctest --preset "${preset}" -j "${jobs}" --timeout 300; then
      outcome="passed"
    else
      # ctest's list of the failed ones (its default binary directory: build/PRESET).
      list="build/${preset}/Testing/Temporary/LastTestsFailed.log"
      n=$( [ -f "${list}" ] && grep -c . "${list}" || echo "?")
      outcome="FAILED: ${n} test(s), listed in ${list}"
    fi
  fi
  [ "${outcome}" = "passed" ] || failed+=("${preset}")
  summary+=("$(printf '  %-12s %s (%d min)' "${preset}" "${outcome}" $(( (SECONDS - start + 30) / 60 )))")
done
echo "== summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "== failed: ${failed[*]} (of ${presets[*]})"
  exit 1
fi
echo "== all tests passed (${presets[*]})"
