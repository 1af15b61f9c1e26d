// The lingering close, for every model: closing a socket with unread input
// makes the kernel send a reset, which can destroy the response before the
// client reads it. So a connection that owes the client nothing more is shut
// down for writing, then read and discarded until the client closes or
// --linger-timeout passes; the model only moves those bytes.
#pragma once

#include <sys/socket.h>

#include <chrono>

namespace sm::runtime {

// Starts it on `fd`: false means close at once instead (--linger-timeout 0,
// or the shutdown failed: the peer is already gone).
inline bool start_lingering_close(int fd, std::chrono::milliseconds timeout) noexcept {
    return timeout.count() != 0 && ::shutdown(fd, SHUT_WR) == 0;
}

}  // namespace sm::runtime
