// One thread's connections and their lifecycle, for the event-loop models
// (server-epoll, server-libuv, server-uring): the pool of connection
// objects, the deadlines, the accept gate and the graceful stop. The model
// moves the bytes and calls these at the points its I/O reaches; it writes
// no policy of its own.
//
// A model's connection derives from ConnectionRecord (and its constructor). Its lifetime: open() →
// ... → closed() (the descriptor is closed, or being cancelled) → recycle() once nothing refers to
// it (the model's stale events, completions or close callbacks have run).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <vector>

#include "http/response.hpp"
#include "runtime/accept_gate.hpp"
#include "runtime/deadlines.hpp"
#include "runtime/server.hpp"
#include "runtime/session_slot.hpp"

namespace sm::runtime {

template <typename Conn>
class Connections {
  public:
    // Made on the thread that serves them: it becomes that thread's session
    // pool (session_slot.hpp), rendering with `cache`.
    Connections(const WorkerContext& ctx, const http::ResponseCache& cache)
        : gate(ctx.connections), deadlines(ctx.options), options_(ctx.options), sessions_(cache, ctx.options.limits) {}
    Connections(const Connections&) = delete;
    Connections& operator=(const Connections&) = delete;

    AcceptGate gate;
    Deadlines<Conn> deadlines;

    // A connection object for a socket just accepted (its slot taken from
    // the gate): recycled if one is free. Should making one throw, the slot
    // is given back.
    Conn& open(Clock::time_point now) {
        Conn* c;
        if (!free_.empty()) {
            c = free_.back();
            free_.pop_back();
        } else {
            try {
                c = &pool_.emplace_back();
            } catch (...) {
                gate.release();
                throw;
            }
        }
        c->open = true;
        ++live_;
        deadlines.start(*c, now);
        return *c;
    }

    // c's socket is closed (or its close is under way): its slot is free.
    void closed(Conn& c) noexcept {
        c.open = false;
        Deadlines<Conn>::forget(c);
        --live_;
        gate.release();
    }

    // Nothing refers to c any more: it serves the next connection.
    void recycle(Conn& c) noexcept {
        c.session.reset();
        c.want_close = c.peer_closed = false;
        free_.push_back(&c);
    }

    // Everything owed to the client is written: the lingering close starts
    // on `socket` (see deadlines.hpp), bounded by --linger-timeout. False:
    // close at once instead (no lingering configured, the peer closed its
    // side already, or the peer is gone).
    bool start_linger(Conn& c, NativeHandle socket, Clock::time_point now) noexcept {
        if (!shut_for_linger(c, socket, options_)) return false;
        deadlines.linger(c, now);
        return true;
    }

    // A job's outcome for c (db::Loop::deliver): the response is progress
    // (the idle deadline starts again), and every response no longer waiting
    // is appended to `out`. False, and nothing done, when c was closed (or
    // began its lingering close) while the query was out.
    bool complete_job(Conn& c, const http::Job& job, const http::JobResult& result,
                      http::ByteBuffer& out, Clock::time_point now) noexcept {
        if (!c.open || c.lingering()) return false;
        deadlines.touch(c, now);
        c.session.complete(job, result, out);
        return true;
    }

    [[nodiscard]] const ServerOptions& options() const noexcept { return options_; }
    [[nodiscard]] std::size_t live() const noexcept { return live_; }
    [[nodiscard]] bool stopping() const noexcept { return stopping_; }
    [[nodiscard]] bool finished() const noexcept { return stopping_ && live_ == 0; }

    // The graceful stop (the stop signal arrived; the model stops watching
    // it and closes its listener). Every response still to come carries
    // "Connection: close"; a connection with nothing in flight
    // (quiet(c): no request partly here, no response unsent) is closed at
    // once, close(c); the others finish, bounded by --shutdown-timeout.
    template <typename Quiet, typename Close>
    void begin_shutdown(Clock::time_point now, Quiet&& quiet, Close&& close) {
        if (stopping_) return;
        stopping_ = true;
        shutdown_deadline_ = now + options_.shutdown_timeout;
        gate.shut();
        for (Conn& c : pool_) {
            if (!c.open || c.lingering()) continue;
            c.session.request_close();
            if (c.session.idle() && quiet(c)) close(c);
        }
    }

    // Once every response owed is written, a stopping server closes the
    // connection instead of waiting for another request.
    [[nodiscard]] bool done_with(const Conn& c) const noexcept {
        return stopping_ && c.session.idle();
    }

    // The output is written: does the connection end now (nothing owed,
    // and the session ended, the client closed its side, or done_with)?
    // Then the model finishes it: start_linger, or close.
    [[nodiscard]] bool ending(const Conn& c) const noexcept {
        return runtime::ending(c, stopping_);
    }

    // The earliest deadline (connections, the gate, the stop), or max().
    [[nodiscard]] Clock::time_point next_deadline() const noexcept {
        auto next = std::min(deadlines.next(), gate.retry_at());
        return stopping_ ? std::min(next, shutdown_deadline_) : next;
    }

    // Runs what is due: the connections' deadlines (Deadlines::expire), and
    // past --shutdown-timeout closes every connection left.
    template <typename Close, typename Head, typename Progressed = NoHiddenProgress>
    void expire(Clock::time_point now, Close&& close, Head&& head, Progressed&& progressed = {}) {
        deadlines.expire(now, close, head, progressed);
        if (!stopping_ || now < shutdown_deadline_) return;
        for (Conn& c : pool_)
            if (c.open) close(c);
    }

  private:
    const ServerOptions& options_;
    SessionPool::Scope sessions_;
    std::deque<Conn> pool_;  // stable addresses: the kernel, libuv and llhttp point into them
    std::vector<Conn*> free_;
    std::size_t live_ = 0;
    bool stopping_ = false;
    Clock::time_point shutdown_deadline_{};
};

}  // namespace sm::runtime
