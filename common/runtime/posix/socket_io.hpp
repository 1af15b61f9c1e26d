// The read and write loops the POSIX models share (non-blocking sockets, or
// blocking ones with SO_RCVTIMEO/SO_SNDTIMEO): one copy of their EINTR and
// EAGAIN handling.
#pragma once

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "http/byte_buffer.hpp"
#include "runtime/clock.hpp"
#include "runtime/connection_state.hpp"
#include "runtime/options.hpp"
#include "runtime/platform.hpp"

namespace sm::runtime {

enum class IoResult {
    done,         // all of it: `out` is empty, or the read budget was spent
    would_block,  // the socket is full (send) or drained for now (read); on a
                  // blocking socket: its timeout expired
    closed,       // the peer is gone (EOF, reset, error): close the connection
};

// Sends from `out` (consuming what the socket takes) until it is empty, the
// socket is full, or the send fails. `progress` tells whether any byte left.
// `flags`: MSG_DONTWAIT makes one call non-blocking on a blocking socket.
inline IoResult send_from(int fd, http::ByteBuffer& out, bool* progress = nullptr,
                          int flags = 0) noexcept {
    while (!out.empty()) {
        const ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | flags);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno == EAGAIN ? IoResult::would_block : IoResult::closed;
        }
        out.consume(static_cast<std::size_t>(n));
        if (progress) *progress = true;
    }
    return IoResult::done;
}

// Sends all of `out` on a blocking socket whose SO_SNDTIMEO is
// --send-timeout. Should the socket be full, c is blocked until all is
// sent (its clock runs --send-timeout; no head or idle deadline): each wait
// ends when the client takes a byte, or after the timeout with none taken
// (would_block: close the connection).
template <typename State>
IoResult send_blocking(int fd, http::ByteBuffer& out, State& c, const ServerOptions& o) noexcept {
    const IoResult r = send_from(fd, out, nullptr, MSG_DONTWAIT);
    if (r != IoResult::would_block) return r;
    c.clock.block(Clock::now());
    const IoResult rest = send_from(fd, out);
    c.clock.unblock(c.session, Clock::now(), o);
    return rest;
}

// The lingering close's reading: reads and discards at most `reads` times.
// closed: the client closed (or an error), close now; would_block: nothing
// more for now; done: the budget was spent with input still coming.
inline IoResult discard_input(int fd, char* buf, std::size_t size, int reads) noexcept {
    for (int i = 0; i < reads; ++i) {
        const ssize_t n = ::read(fd, buf, size);
        if (n > 0 || (n < 0 && errno == EINTR)) continue;
        return n < 0 && errno == EAGAIN ? IoResult::would_block : IoResult::closed;
    }
    return IoResult::done;
}

// The lingering close of a blocking socket, from start to end: shut down for
// writing, then read and discard until the client closes or
// --linger-timeout passes (the socket's timeouts bound each call).
inline void linger_blocking(int fd, char* buf, std::size_t size, const ServerOptions& o) noexcept {
    if (!start_lingering_close(fd, o.linger_timeout)) return;
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(o.linger_timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((o.linger_timeout.count() % 1000) * 1000);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const auto deadline = Clock::now() + o.linger_timeout;
    while (Clock::now() < deadline && discard_input(fd, buf, size, 1) == IoResult::done) {
    }
}

}  // namespace sm::runtime
