// The deadlines of deadlines.hpp for a model that blocks in read() on one
// connection at a time (server-blocking), as the timeout of each read:
// inside a request head a read may wait until the head's deadline (set at
// its first byte, never moved by the bytes that follow: slowloris) or
// --idle-timeout after the last read, whichever comes first; otherwise for
// --idle-timeout. (The lingering close is bounded by --linger-timeout on its
// own, see platform.hpp.)
#pragma once

#include <algorithm>
#include <chrono>

#include "http/session.hpp"
#include "runtime/clock.hpp"
#include "runtime/options.hpp"

namespace sm::runtime {

class ReadDeadlines {
  public:
    enum class Next {
        read,       // read, waiting at most the timeout given
        head_late,  // the request head is past its deadline: answer 408
        idle,       // quiet for --idle-timeout inside a head: close
    };

    explicit ReadDeadlines(const ServerOptions& o) noexcept
        : idle_timeout_(o.idle_timeout), header_timeout_(o.header_timeout) {}

    // After each feed of the connection's session.
    void fed(const http::Session& s, Clock::time_point now) noexcept {
        in_head_ = s.in_head();
        if (!in_head_) return;
        last_read_ = now;
        // A read that ends one head and begins the next starts a new deadline.
        if (head_.is_new(s, timed_)) head_deadline_ = now + header_timeout_;
        timed_ = true;
    }

    // Before each read: what to do, and for Next::read how long it may wait.
    [[nodiscard]] Next next(Clock::time_point now, std::chrono::milliseconds& wait) const noexcept {
        wait = idle_timeout_;
        if (!in_head_) return Next::read;
        if (now >= head_deadline_) return Next::head_late;
        const Clock::time_point until = std::min(head_deadline_, last_read_ + idle_timeout_);
        if (now >= until) return Next::idle;
        wait = std::chrono::ceil<std::chrono::milliseconds>(until - now);
        return Next::read;
    }

    [[nodiscard]] bool in_head() const noexcept { return in_head_; }

  private:
    const std::chrono::milliseconds idle_timeout_;
    const std::chrono::milliseconds header_timeout_;
    bool in_head_ = false;
    bool timed_ = false;  // a head deadline has been set on this connection
    Clock::time_point head_deadline_{};
    Clock::time_point last_read_{};  // kept while in a head only
    http::HeadMark head_;            // which head head_deadline_ is for
};

}  // namespace sm::runtime
