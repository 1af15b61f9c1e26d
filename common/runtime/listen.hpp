// Listening sockets (POSIX): one per thread with SO_REUSEPORT, so the kernel
// spreads connections over per-thread accept queues with no shared lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/unique_fd.hpp"

namespace sm::runtime {

struct Listeners {
    std::vector<UniqueFd> fds;
    std::string url;  // "http://127.0.0.1:8080", "http://[::1]:8080"
    std::uint16_t port = 0;
};

// Opens `count` non-blocking listening sockets on address:port, all with
// SO_REUSEPORT and TCP_NODELAY. Port 0 picks a free port for the first and
// binds the others to it. A port another process already listens on is an
// error, not a silent share. Throws std::runtime_error with a clear message.
Listeners open_listeners(const std::string& address, std::uint16_t port, unsigned count,
                         int backlog);

// Sets TCP_NODELAY on a connected socket; false on failure.
bool set_nodelay(int fd) noexcept;

}  // namespace sm::runtime
