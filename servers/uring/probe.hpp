// The start-up probe of server-uring: can io_uring serve here? Checked before
// anything is opened, so a container or kernel without it gets a reason
// instead of a half-started server.
#pragma once

#include <optional>
#include <string>

#include "runtime/options.hpp"

namespace sm::uring {

// Sets up a ring as the workers will, checks the opcodes they use, registers
// a provided-buffer ring, and runs one multishot accept and one multishot
// recv on a pair of local sockets. Returns why io_uring cannot serve
// ("io_uring unavailable: io_uring_setup: Operation not permitted (...)"),
// or nothing.
std::optional<std::string> probe(const runtime::ServerOptions& options);

}  // namespace sm::uring
