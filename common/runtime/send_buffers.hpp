// The output of a connection in the completion-based models (server-uring,
// server-iocp): two buffers, `sending` in flight (the kernel's until its
// send completes) and `out`, where the session appends the next responses.
// One copy of how they are sized, swapped and trimmed, and of when such a
// connection receives; a model's Connection has both members, named so.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "http/byte_buffer.hpp"
#include "http/session.hpp"
#include "runtime/clock.hpp"
#include "runtime/tuning.hpp"

namespace sm::runtime {

// A connection's output buffer grown beyond this is freed once drained: a
// client that does not read holds its output mark's worth in flight and at
// most this much beside it. A 16-deep pipeline's responses (2-3 KiB) stay
// under it: a benchmark connection keeps its two buffers.
inline constexpr std::size_t kKeepCapacity = 8 * 1024;

// Output buffers no connection holds, one set per thread (the model's
// worker): a connection with nothing to send gives its two back
// (take_collected) and takes one when it has something to render
// (provide), so an idle keep-alive connection holds no output memory (its
// two buffers were most of its memory), and no request allocates one.
class SpareBuffers {
  public:
    SpareBuffers() { free_.reserve(kSparesKept); }
    // `b` (a connection's output) has memory: a spare one if it had none.
    void provide(http::ByteBuffer& b) noexcept {
        if (b.capacity() != 0 || free_.empty()) return;
        std::swap(b, free_.back());
        free_.pop_back();
    }
    // `b`'s memory (its bytes discarded) kept for provide(), or freed when
    // kSparesKept are kept already; `b` is left without memory.
    void give(http::ByteBuffer& b) noexcept {
        if (b.capacity() == 0) return;
        b.clear();
        if (free_.size() >= kSparesKept) return b.release();
        free_.emplace_back();  // within the capacity reserved: no allocation
        std::swap(free_.back(), b);
    }
    [[nodiscard]] std::size_t kept() const noexcept { return free_.size(); }

  private:
    std::vector<http::ByteBuffer> free_;
};

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
// next responses, its memory given back if a backlog grew it. Nothing
// collected: both buffers go to `spare` (the connection is between requests).
template <typename Conn>
void take_collected(Conn& c, SpareBuffers& spare) noexcept {
    if (!c.sending.empty()) return;
    std::swap(c.out, c.sending);
    if (c.out.capacity() > kKeepCapacity) c.out.release();
    if (!c.sending.empty()) return;
    spare.give(c.out);
    spare.give(c.sending);
}

// A send completed, the kernel having taken `bytes` of `sending`: a short
// send leaves the rest for the next one; a buffer grown past kKeepCapacity
// is freed as soon as it is drained (before the next output is reserved).
// True when it made progress (the idle deadline starts again).
template <typename Conn>
[[nodiscard]] bool consume_sent(Conn& c, std::size_t bytes) noexcept {
    c.sending.consume(bytes < c.sending.size() ? bytes : c.sending.size());
    if (c.sending.empty() && c.sending.capacity() > kKeepCapacity) c.sending.release();
    return bytes > 0;
}

// Before feeding `input` bytes to c's session: `out` gets memory from
// `spare` if it has none, and this is the limit for it (Session::feed). The output mark (--output-mark) while no send is
// in flight; nothing while one is (the responses are deferred, and
// rendered once it is done: settle_output), so that a client that does not
// read holds one buffer of output, not two. (A client that reads gets its
// responses before it sends the next requests: its sends are done when
// they arrive.) A read that may be answered with more than kKeepCapacity (a
// response of 130 bytes or more per request of 18 or more) has `out`
// reserved at the mark and kResponseSlack at once (tuning.hpp): a flood's
// output then takes one allocation, not one of each size on the way to
// twice the mark.
template <typename Conn>
[[nodiscard]] std::size_t feed_limit(Conn& c, std::size_t input, std::size_t mark, SpareBuffers& spare) {
    spare.provide(c.out);
    if (!c.sending.empty()) return 0;
    if (input * 8 > kKeepCapacity && c.out.capacity() < mark + kResponseSlack)
        c.out.reserve(mark + kResponseSlack);
    return mark;
}

// After a batch's completions, before sending: renders the responses the
// output had no room for once the last send is done (see output_limit),
// then says where c stands. Its output at the mark, or responses deferred behind a send: the
// client does not take its output fast enough, so c is blocked (only
// --send-timeout runs: deadlines.block) and receiving pauses. Otherwise c
// reads again (deadlines.unblock) unless a response is still owed (a job
// out). True: c may receive.
template <typename Conn, typename Deadlines>
bool settle_output(Conn& c, Deadlines& deadlines, Clock::time_point now,
                   std::size_t mark) noexcept {
    if (c.session.deferred() && c.sending.empty() && c.out.size() < mark) {
        c.out.reserve(mark + kResponseSlack);  // once, not doubled up to it (tuning.hpp)
        if (c.session.resume(c.out, mark) == http::Session::Result::close) c.want_close = true;
    }
    if (output_of(c) >= mark || (c.session.deferred() && !c.session.waiting())) {
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
