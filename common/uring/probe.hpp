// The start-up probe of io_uring, for server-uring (and bench/floor's
// floor-uring, its floor) and loadgen's --engine uring: can io_uring run
// here? Checked before anything is opened, so a container or kernel without
// it gets a reason instead of a half-started program.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sm::uring {

struct ProbeOptions {
    // What works without io_uring, ending every refusal: the caller's way out
    // ("server-epoll serves the same endpoints without it").
    std::string_view alternative;
    // Told (when not null) that the ring works, but not with the preferred
    // setup flags, and what it uses instead. A server logs it: its log says
    // how it runs. loadgen chooses its engine silently and passes none.
    void (*note)(std::string_view) = nullptr;
};

// Sets up a ring as the callers do, checks the features and opcodes they
// use, registers a provided-buffer ring, and runs one multishot accept and
// one multishot recv on a pair of local sockets. One set of checks for both
// callers: what server-uring and loadgen need together (loadgen accepts
// nothing), and each is implied by multishot recv (Linux 6.0) on mainline
// kernels, so the other caller's check costs a caller only a few system calls.
// Returns why io_uring cannot run ("io_uring unavailable: io_uring_setup:
// Operation not permitted (...); <alternative>"), or nothing.
std::optional<std::string> probe(const ProbeOptions& options);

}  // namespace sm::uring
