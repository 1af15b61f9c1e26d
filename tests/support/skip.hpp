// A test that cannot run here (its prerequisite cannot exist on this machine)
// says why and exits with kSkipExitCode, which ctest reports as skipped (each
// case runs in a process of its own; SKIP_RETURN_CODE 77 on the suites).
#pragma once

#include <string_view>

namespace sm::test {

inline constexpr int kSkipExitCode = 77;

// Prints "skipped: WHY" and ends the process with kSkipExitCode at once (no
// destructors run: call it before the case starts anything).
[[noreturn]] void exit_skipped(std::string_view why);

}  // namespace sm::test
