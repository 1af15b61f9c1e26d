// The output of a connection in the completion-based models (server-uring,
// server-iocp): two buffers, `sending` in flight (the kernel's until its
// send completes) and `out`, where the session appends the next responses.
// One copy of how they are sized, swapped and trimmed, and of when such a
// connection receives; a model's Connection has both members, named so.
#pragma once

#include <cstddef>
#include <utility>

#include "http/byte_buffer.hpp"

namespace sm::runtime {

// A connection's buffer (its output, or input server-uring holds back) grown
// beyond this by a backlog is freed once drained.
inline constexpr std::size_t kKeepCapacity = 64 * 1024;

// Output a connection holds, sent and collected.
template <typename Conn>
[[nodiscard]] std::size_t output_of(const Conn& c) noexcept {
    return c.out.size() + c.sending.size();
}

// Empties `b`, keeping at most `keep` bytes of its memory.
inline void trim(http::ByteBuffer& b, std::size_t keep) noexcept {
    b.clear();
    if (b.capacity() > keep) b.release();
}

// No send in flight and `sending` drained: everything collected becomes the
// next send, in one (nothing is copied), and the drained buffer collects the
// next responses, its memory given back if a backlog grew it.
template <typename Conn>
void take_collected(Conn& c) noexcept {
    if (!c.sending.empty()) return;
    std::swap(c.out, c.sending);
    if (c.out.capacity() > kKeepCapacity) c.out.release();
}

// A send completed, the kernel having taken `bytes` of `sending`: a short
// send leaves the rest for the next one. True when it made progress (the
// idle deadline starts again).
template <typename Conn>
[[nodiscard]] bool consume_sent(Conn& c, std::size_t bytes) noexcept {
    c.sending.consume(bytes < c.sending.size() ? bytes : c.sending.size());
    return bytes > 0;
}

// Whether c should have a receive posted, given whether one is (`posted`)
// and whether its output is under the model's mark: receiving goes on while
// the output is under it, a lingering connection reads (and discards) until
// the client's EOF, and nothing is read after the client's EOF or once the
// session ended.
template <typename Conn>
[[nodiscard]] bool wants_receive(const Conn& c, bool posted, bool output_under_mark) noexcept {
    return !posted && !c.peer_closed && (c.lingering || (!c.want_close && output_under_mark));
}

}  // namespace sm::runtime
