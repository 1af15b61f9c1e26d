// The three deadlines of a connection, for the models that keep them per
// thread in lists (server-epoll, server-libuv, server-uring):
// - idle (--idle-timeout): after the last read or write progress;
// - head (--header-timeout): a request head must be complete this long after
//   its first byte, however the bytes trickle in (slowloris). Its deadline
//   is set when the head begins and never moved by the bytes that follow;
// - linger (--linger-timeout): the lingering close. Closing a socket with
//   unread input makes the kernel send a reset, which can destroy the
//   response before the client reads it. So a connection that owes the
//   client nothing more is shut down for writing, then read and discarded
//   until the client closes or this deadline passes.
// Every connection on a list gets the same timeout, so appending keeps each
// list sorted by deadline: its front is the next to expire, no timer heap.
#pragma once

#include <algorithm>
#include <chrono>
#include <type_traits>

#include "http/session.hpp"
#include "runtime/clock.hpp"
#include "runtime/intrusive_list.hpp"
#include "runtime/late_head.hpp"
#include "runtime/options.hpp"

namespace sm::runtime {

// The part of a connection the shared lifecycle keeps, and its session; a
// model's connection derives from it (using ConnectionRecord::ConnectionRecord).
struct ConnectionRecord {
    ConnectionRecord(const http::ResponseCache& cache, const http::Limits& limits) noexcept
        : session(cache, limits) {}

    http::Session session;
    bool open = false;       // between Connections::open() and closed()
    bool lingering = false;  // our side is shut down: input is discarded until EOF or deadline
    // The session ended (Connection: close, an error, HTTP/1.0): what follows
    // is not answered, and the connection ends once its output is written.
    bool want_close = false;
    // The client shut down its side (a read returned 0): no lingering close.
    bool peer_closed = false;
    Clock::time_point last_active{};  // last read or write progress
    Clock::time_point head_deadline{};
    Clock::time_point linger_deadline{};
    http::HeadMark head;  // which head head_deadline is for
    ListHook idle_hook;   // least recently active first
    ListHook head_hook;   // inside a request head, oldest head first
    ListHook linger_hook;
};

// For Deadlines::expire: no connection makes progress the model could not
// report as it happened.
struct NoHiddenProgress {
    bool operator()(const ConnectionRecord&) const noexcept { return false; }
};

template <typename Conn>
class Deadlines {
    static_assert(std::is_base_of_v<ConnectionRecord, Conn>);

  public:
    explicit Deadlines(const ServerOptions& o) noexcept
        : idle_timeout_(o.idle_timeout),
          header_timeout_(o.header_timeout),
          linger_timeout_(o.linger_timeout) {}

    // Read or write progress: the idle deadline starts again. Cheap when
    // repeated in one loop iteration (same `now`).
    void touch(Conn& c, Clock::time_point now) noexcept {
        if (c.lingering || (c.last_active == now && c.idle_hook.linked())) return;
        c.last_active = now;
        IdleList::remove(c);
        idle_.push_back(c);
    }

    // After each feed of c's session: keeps c on the head list exactly while
    // the session is inside a request head. True when that head is new: its
    // deadline (c.head_deadline) starts now.
    bool track_head(Conn& c, Clock::time_point now) noexcept {
        if (!c.session.in_head()) {
            HeadList::remove(c);
            return false;
        }
        if (!c.head.is_new(c.session, c.head_hook.linked())) return false;
        HeadList::remove(c);
        c.head_deadline = now + header_timeout_;
        heads_.push_back(c);
        return true;
    }

    // The lingering close starts: only its deadline bounds c from now on.
    void linger(Conn& c, Clock::time_point now) noexcept {
        IdleList::remove(c);
        HeadList::remove(c);
        c.lingering = true;
        c.linger_deadline = now + linger_timeout_;
        lingering_.push_back(c);
    }

    // c is closing: off every list.
    static void forget(Conn& c) noexcept {
        IdleList::remove(c);
        HeadList::remove(c);
        LingerList::remove(c);
    }

    [[nodiscard]] bool empty() const noexcept {
        return idle_.empty() && heads_.empty() && lingering_.empty();
    }

    // The earliest deadline, or Clock::time_point::max().
    [[nodiscard]] Clock::time_point next() const noexcept {
        auto next = Clock::time_point::max();
        if (!lingering_.empty()) next = std::min(next, front(lingering_).linger_deadline);
        if (!idle_.empty()) next = std::min(next, front(idle_).last_active + idle_timeout_);
        if (!heads_.empty()) next = std::min(next, front(heads_).head_deadline);
        return next;
    }

    // Every connection whose deadline has passed, each list in deadline
    // order: close(c) for an idle or lingering one (close takes c off the
    // lists: forget), head(c) for one whose head is late (it is off the head
    // list by then; the model answers 408 or closes). An idle one whose
    // session waits for a job (the database: its statement timeout bounds
    // the wait) is not idle, nor one for which progressed(c) says it made
    // progress the model could not see as it happened (libuv reports only
    // whole writes): either is touched instead.
    template <typename Close, typename Head, typename Progressed = NoHiddenProgress>
    void expire(Clock::time_point now, Close&& close, Head&& head, Progressed&& progressed = {}) {
        while (!lingering_.empty() && front(lingering_).linger_deadline <= now)
            close(front(lingering_));
        while (!idle_.empty() && front(idle_).last_active + idle_timeout_ <= now) {
            Conn& c = front(idle_);
            if (c.session.waiting() || progressed(c)) {
                touch(c, now);
            } else {
                close(c);
            }
        }
        while (!heads_.empty() && front(heads_).head_deadline <= now) {
            Conn& c = front(heads_);
            HeadList::remove(c);
            head(c);
        }
    }

  private:
    using IdleList = IntrusiveList<ConnectionRecord, &ConnectionRecord::idle_hook>;
    using HeadList = IntrusiveList<ConnectionRecord, &ConnectionRecord::head_hook>;
    using LingerList = IntrusiveList<ConnectionRecord, &ConnectionRecord::linger_hook>;

    template <typename List>
    static Conn& front(const List& l) noexcept {
        return static_cast<Conn&>(l.front());
    }

    const std::chrono::milliseconds idle_timeout_;
    const std::chrono::milliseconds header_timeout_;
    const std::chrono::milliseconds linger_timeout_;
    IdleList idle_;
    HeadList heads_;
    LingerList lingering_;
};

}  // namespace sm::runtime
