// The output of a connection in the completion-based models (server-uring,
// server-iocp): two buffers, `sending` in flight (the kernel's until its
// send completes) and `out`, where the session appends the next responses.
// One copy of how they are sized, swapped and trimmed, and of when such a
// connection receives; a model's Connection has both members, named so.
#pragma once

#include <cstddef>
#include <utility>

#include "http/byte_buffer.hpp"
#include "http/session.hpp"
#include "runtime/clock.hpp"
#include "runtime/tuning.hpp"

namespace sm::runtime {

// A connection's output buffer grown beyond this by a backlog is freed once
// drained: half the mark, so that a client that does not read holds at most
// a mark's worth of output in the two buffers and this much spare.
inline constexpr std::size_t kKeepCapacity = kOutputMark / 2;

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

// The limit for the session's output `out` (Session::feed, resume): what
// the mark leaves beside the send in flight.
template <typename Conn>
[[nodiscard]] std::size_t output_limit(const Conn& c) noexcept {
    return kOutputMark > c.sending.size() ? kOutputMark - c.sending.size() : 0;
}

// After a batch's completions, before sending: renders the responses the
// output had no room for while it has room, then says where c stands. Its
// output at the mark: the client does not take it, so c is blocked (only
// --send-timeout runs: deadlines.block) and receiving pauses. Otherwise c
// reads again (deadlines.unblock) unless a response is still owed (a job
// out). True: c may receive.
template <typename Conn, typename Deadlines>
bool settle_output(Conn& c, Deadlines& deadlines, Clock::time_point now) noexcept {
    if (c.session.deferred() && output_of(c) < kOutputMark &&
        c.session.resume(c.out, output_limit(c)) == http::Session::Result::close)
        c.want_close = true;
    if (output_of(c) >= kOutputMark) {
        deadlines.block(c, now);
        return false;
    }
    deadlines.unblock(c, now);
    return !c.session.owes();
}

// Whether c should have a receive posted, given whether one is (`posted`)
// and whether its output lets it (settle_output): receiving goes on while
// it does, a lingering connection reads (and discards) until the client's
// EOF, and nothing is read after the client's EOF or once the session ended.
template <typename Conn>
[[nodiscard]] bool wants_receive(const Conn& c, bool posted, bool output_allows) noexcept {
    return !posted && !c.peer_closed && (c.lingering() || (!c.want_close && output_allows));
}

}  // namespace sm::runtime
