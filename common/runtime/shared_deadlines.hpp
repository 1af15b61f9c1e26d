// The deadlines of deadlines.hpp (idle, head, linger) for a connection whose
// owner moves between threads (server-threadpool hands it from worker to
// worker): kept in atomics, so that one sweeping thread reads them while the
// owner writes, with no lock and no list. The owner calls touch(),
// track_head() and linger(); the sweeper calls due().
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>

#include "http/session.hpp"
#include "runtime/clock.hpp"
#include "runtime/late_head.hpp"
#include "runtime/options.hpp"
#include "runtime/platform.hpp"

namespace sm::runtime {

class SharedDeadlines {
  public:
    enum class Due {
        nothing,
        close,  // idle too long, or the linger is over
        head,   // the request head is late: the owner answers 408
    };

    explicit SharedDeadlines(Clock::time_point now) noexcept { touch(now); }

    // How often a sweep should look: a quarter of the shortest timeout,
    // within [10 ms, 500 ms] (a deadline is then late by at most that).
    static std::chrono::milliseconds sweep_interval(const ServerOptions& o) noexcept {
        return std::clamp<std::chrono::milliseconds>(
            std::min({o.idle_timeout, o.linger_timeout, o.header_timeout}) / 4,
            std::chrono::milliseconds(10), std::chrono::milliseconds(500));
    }

    void touch(Clock::time_point now) noexcept { last_active_.store(ticks(now), kRelaxed); }

    // After each feed of `s`, by the owner: a head's deadline is set when it
    // begins and never moved by the bytes that follow (slowloris).
    void track_head(const http::Session& s, Clock::time_point now,
                    std::chrono::milliseconds timeout) noexcept {
        const bool timed = head_deadline_.load(kRelaxed) != 0;
        if (!s.in_head()) {
            if (timed) clear_head();
            return;
        }
        if (head_.is_new(s, timed)) head_deadline_.store(ticks(now + timeout), kRelaxed);
    }
    void clear_head() noexcept { head_deadline_.store(0, kRelaxed); }

    // The lingering close started: only the linger deadline bounds it now.
    void linger(Clock::time_point now, std::chrono::milliseconds timeout) noexcept {
        linger_deadline_.store(ticks(now + timeout), kRelaxed);
    }

    // The same, with the timeouts the server was given: what a model calls,
    // so that it names no timeout itself.
    void track_head(const http::Session& s, Clock::time_point now,
                    const ServerOptions& o) noexcept {
        track_head(s, now, o.header_timeout);
    }
    // Starts the lingering close on `socket` (platform.hpp) and its
    // deadline; false: close at once instead.
    bool start_linger(NativeHandle socket, Clock::time_point now, const ServerOptions& o) noexcept {
        if (!start_lingering_close(socket, o.linger_timeout)) return false;
        linger(now, o.linger_timeout);
        return true;
    }
    [[nodiscard]] Due due(Clock::time_point now, const ServerOptions& o) const noexcept {
        return due(now, o.idle_timeout);
    }

    [[nodiscard]] bool head_due(Clock::time_point now) const noexcept {
        const Clock::rep head = head_deadline_.load(kRelaxed);
        return head != 0 && ticks(now) >= head;
    }

    // What is due at `now` (any thread).
    [[nodiscard]] Due due(Clock::time_point now, std::chrono::milliseconds idle) const noexcept {
        const Clock::rep t = ticks(now);
        const Clock::rep linger = linger_deadline_.load(kRelaxed);
        if (linger != 0) return t >= linger ? Due::close : Due::nothing;
        if (t - last_active_.load(kRelaxed) >= ticks(idle)) return Due::close;
        return head_due(now) ? Due::head : Due::nothing;
    }

  private:
    static constexpr auto kRelaxed = std::memory_order_relaxed;
    static Clock::rep ticks(Clock::time_point t) noexcept { return t.time_since_epoch().count(); }
    static Clock::rep ticks(std::chrono::milliseconds d) noexcept {
        return std::chrono::duration_cast<Clock::duration>(d).count();
    }

    std::atomic<Clock::rep> last_active_{0};
    std::atomic<Clock::rep> head_deadline_{0};    // 0: no request head in progress
    std::atomic<Clock::rep> linger_deadline_{0};  // 0: not lingering
    http::HeadMark head_;                         // which head the deadline is for (owner only)
};

}  // namespace sm::runtime
