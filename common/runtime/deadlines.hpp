// The deadlines of one thread's connections, for the event-loop models
// (server-epoll, server-libuv, server-uring, server-iocp): each connection's
// DeadlineClock (deadline_clock.hpp: the rules) indexed by four lists, one
// per kind of deadline:
// - idle: reading connections, by their last progress (--idle-timeout);
// - sending: blocked connections, by their last write progress (--send-timeout);
// - heads: connections inside a request head, by its deadline (--header-timeout);
// - lingering: the lingering close (--linger-timeout). Closing a socket with
//   unread input makes the kernel send a reset, which can destroy the
//   response before the client reads it. So a connection that owes the
//   client nothing more is shut down for writing, then read and discarded
//   until the client closes or this deadline passes.
// Every connection on a list gets the same timeout, so appending keeps each
// list sorted by deadline: its front is the next to expire, no timer heap.
// What happens to a connection whose deadline passed is the clock's due().
#pragma once

#include <algorithm>
#include <cassert>
#include <chrono>
#include <type_traits>
#include <utility>

#include "http/session.hpp"
#include "runtime/clock.hpp"
#include "runtime/connection_state.hpp"
#include "runtime/deadline_clock.hpp"
#include "runtime/intrusive_list.hpp"
#include "runtime/options.hpp"

namespace sm::runtime {

// The part of a connection the event loops' shared lifecycle keeps: its
// state (connection_state.hpp) and the hooks of the lists below; a model's
// connection derives from it (using ConnectionRecord::ConnectionRecord).
struct ConnectionRecord : ConnectionState<Plain> {
    using ConnectionState::ConnectionState;

    bool open = false;   // between Connections::open() and closed()
    ListHook idle_hook;  // reading: least recently active first; blocked: on the sending list
    ListHook head_hook;  // inside a request head, oldest head first
    ListHook linger_hook;
};

// Where Deadlines::expire asks the kernel what it still holds for a
// connection (DeadlineClock::expire): its `fd`. A model whose connection
// keeps its socket otherwise declares its own socket_of(const Conn&) beside
// it, found by argument-dependent lookup.
template <typename Conn>
    requires requires(const Conn& c) { NativeHandle{c.fd}; }
NativeHandle socket_of(const Conn& c) noexcept {
    return c.fd;
}

// For Deadlines::expire: no connection makes progress the model could not
// report as it happened.
struct NoHiddenProgress {
    bool operator()(const ConnectionRecord&) const noexcept { return false; }
};

template <typename Conn>
class Deadlines {
    static_assert(std::is_base_of_v<ConnectionRecord, Conn>);

  public:
    explicit Deadlines(const ServerOptions& o) noexcept : options_(o) {}

    // A new connection: reading, idle from `now`.
    void start(Conn& c, Clock::time_point now) noexcept {
        forget(c);
        c.clock.start(now);
        idle_.push_back(c);
    }

    // Read or write progress: the idle (or, blocked, the send) deadline
    // starts again. Cheap when repeated in one loop iteration (same `now`).
    // A lingering connection's progress does not extend its linger.
    void touch(Conn& c, Clock::time_point now) noexcept {
        if (c.lingering() || (c.clock.last_active() == now && c.idle_hook.linked())) return;
        c.clock.touch(now);
        IdleList::remove(c);
        (c.blocked() ? sending_ : idle_).push_back(c);
    }

    // After each feed of c's session: keeps c on the head list exactly while
    // the session is inside a request head (and c reading). True when that
    // head is new: its deadline starts now.
    bool track_head(Conn& c, Clock::time_point now) noexcept {
        const bool fresh = c.clock.track_head(c.session, now, options_);
        if (!c.clock.head_running()) {
            HeadList::remove(c);
        } else if (fresh) {
            HeadList::remove(c);
            heads_.push_back(c);
        }
        return fresh;
    }

    // Reading pauses for output: c leaves the idle and head lists for the
    // sending list (--send-timeout from now). Nothing if c is not reading.
    void block(Conn& c, Clock::time_point now) noexcept {
        if (c.clock.phase() != Clock_::Phase::reading) return;
        c.clock.block(now);
        HeadList::remove(c);
        IdleList::remove(c);
        sending_.push_back(c);
    }

    // Reading resumes: back on the idle list from now, and a head in
    // progress gets a new deadline. True when it did (a timer may need
    // re-arming earlier). Nothing if c is not blocked.
    bool unblock(Conn& c, Clock::time_point now) noexcept {
        if (!c.blocked()) return false;
        const bool fresh = c.clock.unblock(c.session, now, options_);
        IdleList::remove(c);
        idle_.push_back(c);
        if (fresh) heads_.push_back(c);
        return fresh;
    }

    // The lingering close starts: only its deadline bounds c from now on.
    void linger(Conn& c, Clock::time_point now) noexcept {
        IdleList::remove(c);
        HeadList::remove(c);
        c.clock.linger(now, options_);
        lingering_.push_back(c);
    }

    // c is closing: off every list.
    static void forget(Conn& c) noexcept {
        IdleList::remove(c);
        HeadList::remove(c);
        LingerList::remove(c);
    }

    [[nodiscard]] bool empty() const noexcept {
        return idle_.empty() && sending_.empty() && heads_.empty() && lingering_.empty();
    }

    // The earliest deadline, or Clock::time_point::max().
    [[nodiscard]] Clock::time_point next() const noexcept {
        auto next = Clock::time_point::max();
        if (!lingering_.empty()) next = std::min(next, front(lingering_).clock.linger_deadline());
        if (!sending_.empty()) next = std::min(next, front(sending_).clock.send_deadline(options_));
        if (!idle_.empty()) next = std::min(next, front(idle_).clock.idle_deadline(options_));
        if (!heads_.empty()) next = std::min(next, front(heads_).clock.head_deadline());
        return next;
    }

    // Every connection whose deadline has passed, each list in deadline
    // order, gets what its clock says is due: close(c) (close takes c off
    // the lists: forget), head(c) for a late head (off the head list by
    // then; the model answers 408 or closes), or a touch when it is busy (a
    // job out: its session waits for the database, whose statement timeout
    // bounds the wait). A connection for which progressed(c) says it made
    // progress the model could not see as it happened (libuv reports only
    // whole writes) is touched instead of closed; one whose client is still
    // taking output the kernel holds (Due::delivering) is filed anew.
    template <typename Close, typename Head, typename Progressed = NoHiddenProgress>
    void expire(Clock::time_point now, Close&& close, Head&& head, Progressed&& progressed = {}) {
        auto run = [&](auto& list, auto deadline) {
            while (!list.empty() && deadline(front(list)) <= now) {
                Conn& c = front(list);
                switch (c.clock.expire(now, options_, c.session.waiting(),
                                       socket_of(std::as_const(c)))) {
                    case Due::close:
                        if (!c.lingering() && progressed(c)) {
                            touch(c, now);
                        } else {
                            close(c);
                        }
                        break;
                    case Due::head:
                        c.clock.clear_head();
                        HeadList::remove(c);
                        head(c);
                        break;
                    case Due::renew: touch(c, now); break;
                    case Due::delivering:
                        IdleList::remove(c);
                        idle_.push_back(c);
                        if (c.clock.head_running()) {
                            HeadList::remove(c);
                            heads_.push_back(c);
                        }
                        break;
                    case Due::nothing:
                        // Each list's deadline is one of the clock's: cannot be.
                        assert(false);
                        return;
                }
            }
        };
        run(lingering_, [](const Conn& c) { return c.clock.linger_deadline(); });
        run(sending_, [this](const Conn& c) { return c.clock.send_deadline(options_); });
        run(idle_, [this](const Conn& c) { return c.clock.idle_deadline(options_); });
        run(heads_, [](const Conn& c) { return c.clock.head_deadline(); });
    }

  private:
    using Clock_ = DeadlineClock<Plain>;
    using IdleList = IntrusiveList<ConnectionRecord, &ConnectionRecord::idle_hook>;
    using HeadList = IntrusiveList<ConnectionRecord, &ConnectionRecord::head_hook>;
    using LingerList = IntrusiveList<ConnectionRecord, &ConnectionRecord::linger_hook>;

    template <typename List>
    static Conn& front(const List& l) noexcept {
        return static_cast<Conn&>(l.front());
    }

    const ServerOptions& options_;
    IdleList idle_;
    IdleList sending_;  // the blocked ones, by the same hook (a connection is on one of the two)
    HeadList heads_;
    LingerList lingering_;
};

}  // namespace sm::runtime
