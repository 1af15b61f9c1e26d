// A connection's HTTP session, held only while it is needed. An http::Session
// is some 440 bytes (the parser, the framing checks, the request target),
// and most of a server's connections are idle between requests, where none
// of it matters: a session that is idle() holds no request state at all
// (llhttp starts afresh at every request). So a connection keeps a
// SessionSlot, 16 bytes, and the slot takes a session from its thread's
// SessionPool when bytes arrive and gives it back once the session is idle
// again (no request partly received, no response owed). An idle keep-alive
// connection then costs its model's record and its socket, not a parser.
//
// No allocation per request: the pool keeps the sessions given back (up to
// kSparesKept, tuning.hpp) and hands out the one given back last, still
// warm in the cache. The slot has Session's interface (what the models and
// db/ call); what it answers without a session is what an idle session would.
//
// A session stays in its slot while it is closed() (the connection ends) or
// asked to close (the graceful stop), until the slot's reset(). A job out
// keeps it too (owes()); each time a slot takes a session it gives it a new
// epoch, so a job of an earlier request is never taken for a later one's.
//
// Each thread that feeds sessions has a pool: SessionPool::Scope, made at
// the thread's start (the event loops, server-threadpool's workers,
// server-blocking's threads). A slot gives its session back to the pool of
// the thread that finds it idle: with server-threadpool that may be another
// worker's than the one it came from, and the next taker binds it to its own
// response cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "http/byte_buffer.hpp"
#include "http/limits.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "http/work.hpp"

namespace sm::runtime {

class SessionPool {
  public:
    SessionPool(const http::ResponseCache& cache, const http::Limits& limits) noexcept
        : cache_(cache), limits_(limits) {}
    SessionPool(const SessionPool&) = delete;
    SessionPool& operator=(const SessionPool&) = delete;

    // This thread's pool while the scope lives (below).
    class Scope;

    // The calling thread's pool (a Scope must be alive on it).
    static SessionPool& current() noexcept;
    // The same, or null on a thread without one.
    static SessionPool* here() noexcept;

    // A session ready for a new request, bound to this pool's cache: one
    // given back, or a new one; null if memory for one cannot be had.
    [[nodiscard]] std::unique_ptr<http::Session> take() noexcept;
    // A session no connection uses: kept for the next take() while fewer
    // than kSparesKept are; freed otherwise.
    void give(std::unique_ptr<http::Session> s) noexcept;

    [[nodiscard]] std::size_t kept() const noexcept { return free_.size(); }
    // Sessions this pool made (take() found none kept): a test's count of
    // allocations.
    [[nodiscard]] std::size_t made() const noexcept { return made_; }

  private:
    const http::ResponseCache& cache_;
    const http::Limits& limits_;
    std::vector<std::unique_ptr<http::Session>> free_;
    std::size_t made_ = 0;
};

// This thread's pool while the scope lives: made where a thread starts
// serving connections, with the thread's response cache.
class SessionPool::Scope {
  public:
    Scope(const http::ResponseCache& cache, const http::Limits& limits);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

  private:
    SessionPool pool_;
    SessionPool* outer_;
};

class SessionSlot {
  public:
    using Result = http::Session::Result;
    static constexpr std::size_t kNoLimit = http::Session::kNoLimit;

    SessionSlot() noexcept = default;
    SessionSlot(const SessionSlot&) = delete;
    SessionSlot& operator=(const SessionSlot&) = delete;
    ~SessionSlot();

    // Session::feed; takes a session first if the slot has none, and gives it
    // back if it is idle after. Should no session be had (out of memory),
    // Result::close with nothing answered: the connection closes.
    Result feed(std::span<const char> in, http::ByteBuffer& out, std::size_t limit = kNoLimit) noexcept;
    // Session::resume (nothing is deferred without a session).
    Result resume(http::ByteBuffer& out, std::size_t limit) noexcept;
    [[nodiscard]] bool next_job(http::Job& job) noexcept { return s_ && s_->next_job(job); }
    // Session::complete: a job of a session no longer here is stale, ignored.
    void complete(const http::Job& job, const http::JobResult& result, http::ByteBuffer& out) noexcept;
    // Session::request_close: takes a session to carry it (graceful stop).
    void request_close() noexcept;
    // Session::expire_head (a head in progress has its session here).
    void expire_head(http::ByteBuffer& out) noexcept;
    // Ready for a new connection: the session, if any, goes back to the pool.
    void reset() noexcept;
    // Session::bind: server-threadpool's worker renders a session another
    // worker took with its own cache.
    void bind(const http::ResponseCache& cache) noexcept {
        if (s_) s_->bind(cache);
    }

    [[nodiscard]] bool deferred() const noexcept { return s_ && s_->deferred(); }
    [[nodiscard]] bool owes() const noexcept { return s_ && s_->owes(); }
    [[nodiscard]] bool waiting() const noexcept { return s_ && s_->waiting(); }
    [[nodiscard]] bool idle() const noexcept { return !s_ || s_->idle(); }
    [[nodiscard]] bool in_head() const noexcept { return s_ && s_->in_head(); }
    [[nodiscard]] bool closed() const noexcept { return s_ && s_->closed(); }
    // Session::head_id (HeadMark): only read while in_head(), so while a
    // session is here.
    [[nodiscard]] std::uint64_t head_id() const noexcept { return s_ ? s_->head_id() : 0; }
    [[nodiscard]] std::size_t deferred_memory() const noexcept { return s_ ? s_->deferred_memory() : 0; }
    // A session is here (a request in progress, a response owed, or the
    // connection ending): the rest of the time the connection holds none.
    [[nodiscard]] bool holds() const noexcept { return s_ != nullptr; }

  private:
    // False: no session could be had (out of memory).
    bool take() noexcept;
    // Gives the session back if it is idle and not ending.
    void settle() noexcept;
    // To this thread's pool, or freed on a thread without one.
    void give_back() noexcept;

    std::unique_ptr<http::Session> s_;
    std::uint64_t epoch_ = 0;  // sessions taken by this slot: each one's epoch
};

}  // namespace sm::runtime
