// The deadline rules of a connection, once for every model: which timeouts
// run in which state, and what each does when it passes.
//
// A connection is in one of three phases:
// - reading: --idle-timeout runs from the last read or write progress (not
//   while it is busy: a job out to the database, whose statement timeout
//   bounds the wait, or a worker serving it), and while a request head is
//   partly received, --header-timeout from the head's first byte, never
//   moved by the bytes that follow (slowloris). Past the idle one: close;
//   past the head one: the model answers 408 (connection_state.hpp).
// - blocked: reading is paused because the client does not take its
//   responses (the output is over the mark, or the socket refuses more).
//   Only --send-timeout runs, from the last write progress: no byte of
//   output accepted for that long closes the connection (nginx's
//   send_timeout). No head or idle deadline runs against a client we are
//   not reading from; when reading resumes, a head in progress gets its
//   deadline afresh.
//   Written output is not yet taken output: the kernel may hold megabytes
//   of it on their way to a slow reader after the model's own buffer
//   drained. So when an idle or head deadline passes, expire() first asks
//   the kernel: while its queue of unacknowledged output for the socket
//   moves between two looks (to empty included), the client is receiving,
//   and the deadlines start again from then (Due::delivering).
// - lingering: the lingering close (deadlines.hpp), bounded by
//   --linger-timeout from its start, whatever the client does.
//
// The models keep this clock in their connection and report what happens
// (progress, each feed, blocked and unblocked, the lingering close); three
// engines apply due(): the per-thread lists of the event loops
// (deadlines.hpp), server-threadpool's sweeping reactor (the clock in
// relaxed atomics, Shared), and server-blocking's read timeouts (next()).
// A new kind of deadline is written here and in those engines, not in a model.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "http/session.hpp"
#include "runtime/clock.hpp"
#include "runtime/options.hpp"
#include "runtime/platform.hpp"

namespace sm::runtime {

// What a connection's deadlines say at a moment.
enum class Due : std::uint8_t {
    nothing,
    close,  // idle, no output accepted for --send-timeout, or the linger is over
    head,   // the request head is late: the model answers 408 or closes
    renew,  // idle, but busy: the idle deadline starts again (touch)
    // An idle or head deadline passed while the client was still taking
    // output the kernel holds (DeadlineClock::expire): both started again
    // from now; an engine that indexes them files them anew.
    delivering,
};

// Where the clock keeps its values: a plain field when one thread owns the
// connection, a relaxed atomic when another thread reads the deadlines
// while the owner writes them (server-threadpool's sweep).
template <typename T>
struct Plain {
    T v{};
    [[nodiscard]] T load() const noexcept { return v; }
    void store(T x) noexcept { v = x; }
};
template <typename T>
struct Shared {
    std::atomic<T> v{};
    [[nodiscard]] T load() const noexcept { return v.load(std::memory_order_relaxed); }
    void store(T x) noexcept { v.store(x, std::memory_order_relaxed); }
};

template <template <typename> class Cell>
class DeadlineClock {
  public:
    enum class Phase : std::uint8_t { reading, blocked, lingering };

    // Read or write progress.
    void touch(Clock::time_point now) noexcept { last_active_.store(ticks(now)); }

    // After each feed of `s`: keeps the head deadline while the session is
    // inside a request head, set when the head begins. True when that head
    // is new (its deadline starts now). Nothing while blocked or lingering.
    // (`s`: an http::Session, or what holds one: SessionSlot.)
    template <typename Session>
    bool track_head(const Session& s, Clock::time_point now,
                    const ServerOptions& o) noexcept {
        if (phase() != Phase::reading) return false;
        const bool timed = head_deadline_.load() != 0;
        if (!s.in_head()) {
            if (timed) clear_head();
            return false;
        }
        if (!head_.is_new(s, timed)) return false;
        head_deadline_.store(ticks(now + o.header_timeout));
        return true;
    }
    // The model answered (or closed) a late head.
    void clear_head() noexcept { head_deadline_.store(0); }

    // Reading pauses for output: only --send-timeout runs now, from `now`.
    void block(Clock::time_point now) noexcept {
        if (phase() != Phase::reading) return;
        clear_head();
        touch(now);
        phase_.store(Phase::blocked);
    }
    // Reading resumes: the idle deadline from `now`, and a head in progress
    // (of `s`) gets its deadline afresh. True when it did.
    template <typename Session>
    bool unblock(const Session& s, Clock::time_point now, const ServerOptions& o) noexcept {
        if (phase() != Phase::blocked) return false;
        phase_.store(Phase::reading);
        touch(now);
        if (!s.in_head()) return false;
        (void)head_.is_new(s, false);  // records the head
        head_deadline_.store(ticks(now + o.header_timeout));
        return true;
    }
    // The lingering close starts: only its deadline bounds the connection.
    void linger(Clock::time_point now, const ServerOptions& o) noexcept {
        clear_head();
        linger_deadline_.store(ticks(now + o.linger_timeout));
        phase_.store(Phase::lingering);
    }
    // What the engines act on: due(), except that an idle or head deadline
    // that passed while reading asks the kernel first. When its queue of
    // output for `socket` the client has not taken (unsent_output()) has
    // moved since the last look (emptied too), the client has been receiving
    // its responses, neither idle nor slow with a head: the idle deadline
    // and a running head's start again from `now`, and the answer is
    // Due::delivering. So they pass a whole timeout after the client took
    // its last byte, or later. When the queue has not moved over a whole
    // timeout (or was empty at both looks, or the platform does not say),
    // the deadline applies: a client that takes none of it is closed one
    // timeout later than one with nothing queued. Only a passed deadline
    // costs the look (a syscall).
    [[nodiscard]] Due expire(Clock::time_point now, const ServerOptions& o, bool busy,
                             NativeHandle socket) noexcept {
        const Due d = due(now, o, busy);
        if ((d != Due::close && d != Due::head) || phase() != Phase::reading) return d;
        const auto unsent = static_cast<std::uint32_t>(
            std::min<std::size_t>(unsent_output(socket), UINT32_MAX));
        const std::uint32_t before = unsent_.load();
        unsent_.store(unsent);
        if (unsent == before) return d;
        touch(now);
        if (head_running()) head_deadline_.store(ticks(now + o.header_timeout));
        return Due::delivering;
    }

    // A new connection (a recycled one's clock starts over).
    void start(Clock::time_point now) noexcept {
        unsent_.store(0);
        clear_head();
        linger_deadline_.store(0);
        phase_.store(Phase::reading);
        touch(now);
    }

    // What is due at `now`. `busy`: the connection is being served (a job
    // out, a worker holding it), so not idle. In this order: the linger;
    // the send timeout; idle and not busy; a late head; idle but busy.
    [[nodiscard]] Due due(Clock::time_point now, const ServerOptions& o, bool busy) const noexcept {
        switch (phase()) {
            case Phase::lingering: return now >= linger_deadline() ? Due::close : Due::nothing;
            case Phase::blocked: return now >= send_deadline(o) ? Due::close : Due::nothing;
            case Phase::reading: break;
        }
        const bool idle = now >= idle_deadline(o);
        if (idle && !busy) return Due::close;
        if (head_deadline_.load() != 0 && now >= head_deadline()) return Due::head;
        return idle ? Due::renew : Due::nothing;
    }

    // When due() may next say something: the earliest deadline running.
    [[nodiscard]] Clock::time_point next(const ServerOptions& o) const noexcept {
        switch (phase()) {
            case Phase::lingering: return linger_deadline();
            case Phase::blocked: return send_deadline(o);
            case Phase::reading: break;
        }
        const Clock::time_point idle = idle_deadline(o);
        return head_deadline_.load() != 0 ? std::min(idle, head_deadline()) : idle;
    }

    [[nodiscard]] Phase phase() const noexcept { return phase_.load(); }
    [[nodiscard]] Clock::time_point last_active() const noexcept { return point(last_active_.load()); }
    [[nodiscard]] bool head_running() const noexcept { return head_deadline_.load() != 0; }
    [[nodiscard]] Clock::time_point head_deadline() const noexcept {
        return point(head_deadline_.load());
    }
    [[nodiscard]] Clock::time_point linger_deadline() const noexcept {
        return point(linger_deadline_.load());
    }
    [[nodiscard]] Clock::time_point idle_deadline(const ServerOptions& o) const noexcept {
        return last_active() + o.idle_timeout;
    }
    [[nodiscard]] Clock::time_point send_deadline(const ServerOptions& o) const noexcept {
        return last_active() + o.send_timeout;
    }

  private:
    static Clock::rep ticks(Clock::time_point t) noexcept { return t.time_since_epoch().count(); }
    static Clock::time_point point(Clock::rep r) noexcept {
        return Clock::time_point(Clock::duration(r));
    }

    Cell<Clock::rep> last_active_;
    Cell<Clock::rep> head_deadline_;  // 0: no request head in progress
    Cell<Clock::rep> linger_deadline_;
    Cell<Phase> phase_;
    Cell<std::uint32_t> unsent_;  // the kernel's unsent output at expire()'s last look
    http::HeadMark head_;  // which head the deadline is for (the owner's only)
};

// For an engine that sweeps every connection instead of keeping lists
// (server-threadpool's reactor): how often to look. A quarter of the
// shortest timeout, within [10 ms, 500 ms]: a deadline is then late by at
// most that.
inline std::chrono::milliseconds sweep_interval(const ServerOptions& o) noexcept {
    return std::clamp<std::chrono::milliseconds>(
        std::min({o.idle_timeout, o.linger_timeout, o.header_timeout, o.send_timeout}) / 4,
        std::chrono::milliseconds(10), std::chrono::milliseconds(500));
}

}  // namespace sm::runtime
