// Whether this process may use io_uring at all (a container's seccomp
// profile, kernel.io_uring_disabled or an old kernel refuse it). The io_uring
// test sets (server-uring's conformance run, loadgen's uring engine) exit
// with kSkipExitCode when it is refused, which ctest reports as skipped.
#pragma once

#include <string>

#include "support/skip.hpp"

namespace sm::test {

// Empty if io_uring_setup() works here, else why not.
std::string io_uring_refusal();

// Prints why and exits with kSkipExitCode when io_uring is refused; for use
// at start-up by a test binary running an io_uring set.
void exit_skipped_unless_io_uring(const char* set_name);

}  // namespace sm::test
