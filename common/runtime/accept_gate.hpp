// The accept gate, one per accepting thread: whether the thread may take the
// next connection from its listener, and when to look again if not. Two
// things close it, each with one log line in one format:
// - the connection budget (--max-connections over all threads, one atomic
//   counter: try_acquire before accepting, release once closed). At the
//   limit, new connections wait in the listen backlog; the gate reopens as
//   soon as any thread frees a slot (the thread notices within kLimitPause,
//   or at once when it frees the slot itself);
// - descriptor or memory exhaustion (EMFILE, ENFILE, ENOBUFS, ENOMEM): a
//   level-triggered listener with a full descriptor table would wake the
//   thread forever, so accepting pauses for kAcceptPause.
// Nothing else does: a connection that failed on its own (reset or aborted
// while queued) is skipped in silence, and an error of no known kind is
// logged, in one format, and skipped too. Under a burst of clients that
// connect and reset at once (AcceptEx fails with WSAENOTCONN under Wine),
// a pause per error made every other client wait.
// The model only starts and stops watching its listener: stop when
// try_acquire() or failed() close the gate, start again when reopen_due().
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>

#include "runtime/clock.hpp"
#include "runtime/connection_limit.hpp"
#include "runtime/log.hpp"
#include "runtime/platform.hpp"

namespace sm::runtime {

class AcceptGate {
  public:
    explicit AcceptGate(ConnectionLimit& limit) noexcept : limit_(limit) {}

    // Takes a slot for the next connection. False at --max-connections: the
    // gate is closed (and that logged) until a slot frees.
    [[nodiscard]] bool try_acquire(Clock::time_point now);
    // A connection taken with try_acquire() is closed.
    void release() noexcept { limit_.release(); }
    // The accept after try_acquire() failed with `err` (errno, WSA error):
    // gives the slot back and says what to do (classify_accept_error). On
    // AcceptError::exhausted the gate is closed (and that logged) for
    // kAcceptPause; on AcceptError::unknown the error is logged and the gate
    // stays open: the model goes on accepting as after a skip.
    AcceptError failed(int err, Clock::time_point now) {
        limit_.release();
        return refused(err, now);
    }
    // The same for an accept that took no slot first (server-uring's
    // multishot accept reports errors on its own). At the limit the gate
    // stays closed for the limit.
    AcceptError refused(int err, Clock::time_point now);
    // Closes the gate for kAcceptPause (and logs why), whatever `err` is:
    // for a failure the model cannot retry at once.
    void pause(int err, Clock::time_point now);
    // Closes the gate as try_acquire() does at the limit, for a model that
    // sees the budget spent before it asks (server-uring's multishot accept).
    void close_at_limit(Clock::time_point now);

    [[nodiscard]] bool open() const noexcept { return !closed_; }
    [[nodiscard]] bool at_limit() const noexcept { return closed_ && at_limit_; }
    [[nodiscard]] bool budget_spent() const noexcept { return limit_.open() >= limit_.max(); }
    // Closed and due to reopen: the pause is over, or a slot is free.
    [[nodiscard]] bool reopen_due(Clock::time_point now) const noexcept {
        return closed_ && (now >= retry_ || (at_limit_ && !budget_spent()));
    }
    // When to look again: Clock::time_point::max() while open.
    [[nodiscard]] Clock::time_point retry_at() const noexcept {
        return closed_ ? retry_ : Clock::time_point::max();
    }
    // The model watches its listener again. At the limit it asks again at
    // once (try_acquire); if that fails the gate closes for another round.
    void reopen() noexcept { closed_ = at_limit_ = false; }
    // After the listener is closed for good (shutdown): nothing to reopen,
    // and nothing later (an accept error still in flight) schedules a retry.
    void shut() noexcept {
        shut_ = closed_ = true;
        at_limit_ = false;
        retry_ = Clock::time_point::max();
    }

  private:
    ConnectionLimit& limit_;
    bool closed_ = false;
    bool at_limit_ = false;
    bool shut_ = false;
    Clock::time_point retry_ = Clock::time_point::max();
    RateLimitedLog limit_log_;
    RateLimitedLog exhausted_log_;
    RateLimitedLog unknown_log_;
};


// For the models that post accepts ahead of need (server-uring's multishot
// accept, server-iocp's AcceptEx calls): a connection such an accept
// completes after the budget is spent is taken before the accepts can be
// cancelled. It waits here, unserved, as it would have in the listen
// backlog, and is served first, oldest first, as slots free.
template <typename Handle>
class ParkedConnections {
  public:
    // A connection just accepted: serve(h) with a slot taken from the gate,
    // or parked (others wait already, or the budget is spent) and
    // at_limit() called: the model closes the gate (AcceptGate::
    // close_at_limit) and cancels its accepts. at_limit() is also called
    // when this one took the last slot.
    template <typename Serve, typename AtLimit>
    void take(AcceptGate& gate, Handle h, Clock::time_point now, Serve&& serve, AtLimit&& at_limit) {
        if (!parked_.empty() || !gate.try_acquire(now)) {
            parked_.push_back(h);
            return at_limit();
        }
        serve(h);
        if (gate.budget_spent()) at_limit();
    }

    enum class Resumed {
        waiting,   // parked connections still wait for slots: the gate stays closed
        at_limit,  // all served, and the budget is spent again: close the gate, cancel
        reopened,  // all served and the gate is open: post the accepts again
    };
    // The gate is due to reopen (AcceptGate::reopen_due): parked connections
    // are served as slots allow, then the gate reopens if the budget does.
    template <typename Serve>
    Resumed resume(AcceptGate& gate, Clock::time_point now, Serve&& serve) {
        while (!parked_.empty()) {
            if (!gate.try_acquire(now)) return Resumed::waiting;
            const Handle h = parked_.front();
            parked_.pop_front();
            serve(h);
        }
        if (gate.at_limit() && gate.budget_spent()) return Resumed::at_limit;
        gate.reopen();
        return Resumed::reopened;
    }

    // The server stops: close(h) for each, none served.
    template <typename Close>
    void close_all(Close&& close) {
        for (const Handle h : parked_)
            close(h);
        parked_.clear();
    }

    [[nodiscard]] std::size_t size() const noexcept { return parked_.size(); }

  private:
    std::deque<Handle> parked_;
};

}  // namespace sm::runtime
