// The database as an event-loop model reaches it: libpq's asynchronous API on
// its connections' sockets, watched by the model's own loop, which never
// blocks on it (server-epoll, server-uring, server-libuv: one client per loop
// thread).
//
// Every connection runs in libpq's pipeline mode. Jobs submitted during one
// loop iteration, from any number of sessions, are spread over the
// connections (to the one with the fewest queries in flight) and leave
// together when the model calls flush(): their queries, then one Sync per
// connection, in as few writes as the socket takes. Results come back in the
// order each connection sent the queries and are delivered as they complete:
// a job that needs several queries (/queries?queries=N: one query per row) is
// delivered when its last row is in.
//
// The contract with the model's loop, each iteration:
//   1. wait for readiness, with a timeout no later than next_deadline();
//   2. on_ready(fd, ...) for each client fd reported ready;
//   3. expire(now) (whenever next_deadline() has passed; calling it more
//      often is harmless);
//   4. flush(), after everything that may have submitted jobs.
// Loop::deliver is called only from flush(), on_ready() and expire(), never
// from the constructor, submit() or the destructor. Inside deliver the model
// may call submit() (a session's next pipelined job), nothing else of the
// client's; it must not destroy the client there.
//
// Failures (the job is delivered with JobResult::error set to the class;
// nothing throws; libpq's message, which names the database's address, goes
// to the log only):
//   unavailable
//       no connection is up: the job fails at once, in the next flush()
//       (there is no queue to wait in). Only while every connection is still
//       in its first attempt after construction do jobs wait for it (at most
//       the 5 s connect timeout), so that a server's first requests do not
//       fail for a connection about to be made.
//   lost
//       the connection broke (the server stopped, a FATAL error, a write or
//       read error, a protocol surprise): every job in flight on it, at once.
//       It is made again in the background: at once, then after 100 ms,
//       doubling to 1 s between attempts while they fail.
//   failed
//       a query failed (the connection stays), or its result had not the
//       statement's shape: that job; and the other jobs of the same Sync
//       after it, which PostgreSQL aborts unrun, fail too; they are not
//       retried.
//   timeout
//       PostgreSQL cancelled the statement (the statement timeout below).
// Failures are logged through one rate-limited log per client ("db: ...",
// at most a line a second). A query that waits (a lock, a slow plan) just
// stays in flight: the loop goes on; the constructor's statement_timeout
// (the models pass --idle-timeout) has PostgreSQL bound it.
//
// Allocation: queues and row buffers keep their capacity; after warm-up a job
// allocates nothing but libpq's PGresult.
//
// Host names in the conninfo are resolved by libpq, synchronously, when a
// connection starts: give an address (host=127.0.0.1 or hostaddr=) for a
// loop that must never block.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "db/random_id.hpp"
#include "http/session.hpp"
#include "http/work.hpp"
#include "runtime/log.hpp"

namespace sm::db {

// What the model's event loop does for the client. Model-neutral: epoll
// (level-triggered for these fds), libuv's uv_poll and io_uring's POLL_ADD
// (re-armed after each completion while watched) can all implement it.
struct Loop {
    // Start watching fd, or change what is watched: report readiness through
    // AsyncClient::on_ready(fd, readable, writable), level-triggered (again
    // in every iteration while the condition holds). While connecting, one
    // of read and write, as libpq asks; once connected, read always, write
    // only while libpq has output the socket did not take. An error or
    // hang-up on the fd is reported as readable (and writable if watched).
    // Called for a fd already watched, it replaces what is watched.
    virtual void watch(int fd, bool read, bool write) noexcept = 0;
    // Stop watching fd and forget it: no on_ready for this watch after this
    // (drop an event already fetched for it in this iteration). Usually fd
    // is still open and about to be closed, but when libpq found the
    // connection broken it may have closed fd already: ignore EBADF/ENOENT
    // from epoll_ctl(DEL), stop a uv_poll all the same, cancel an io_uring
    // poll by its tag, not by the fd. The same fd number may be watched
    // again later (a new connection).
    virtual void unwatch(int fd) noexcept = 0;
    // A job's result, for the owner that submitted it. The result's views
    // (rows, error text) are valid during this call only.
    virtual void deliver(void* owner, const http::Job& job, const http::JobResult& result) noexcept = 0;

  protected:
    ~Loop() = default;
};

class AsyncClient {
  public:
    // `conninfo`: a libpq connection string or URI; `connections`: how many
    // connections (at least 1). Starts connecting them at once (non-blocking:
    // PQconnectStart), so it calls loop.watch from here; `loop` must outlive
    // the client.
    // `statement_timeout` (the server's --idle-timeout): PostgreSQL cancels
    // a statement that runs longer, and its job fails (timeout), unless the
    // conninfo sets "options". Zero: no limit.
    AsyncClient(std::string conninfo, unsigned connections, Loop& loop,
                std::chrono::milliseconds statement_timeout = std::chrono::milliseconds{0});
    // Closes every connection (unwatching its fd first). Nothing is
    // delivered: jobs still in flight are dropped (their sessions are going
    // away too, at shutdown).
    ~AsyncClient();
    AsyncClient(const AsyncClient&) = delete;
    AsyncClient& operator=(const AsyncClient&) = delete;

    // Queues a job for `owner` (an opaque pointer handed back to
    // Loop::deliver with the job). Sent, or failed, by the next flush().
    void submit(void* owner, const http::Job& job) noexcept;
    // Every job `session` has queued and not handed out yet, for `owner`
    // (what the models do after each feed). `Session`: http::Session, or
    // what holds one (runtime::SessionSlot).
    template <typename Session>
    void submit_jobs(void* owner, Session& session) noexcept {
        http::Job job;
        while (session.next_job(job))
            submit(owner, job);
    }
    // Sends what was submitted since the last flush: the queries, one Sync
    // per connection that got any, then as much as the sockets take (the rest
    // when the fd is writable: the client watches for it). May deliver
    // (failures at once; results libpq happened to read while writing).
    void flush() noexcept;
    // fd (one the client watches) is ready: moves its connection on
    // (connecting, reading results, writing the rest). An fd the client does
    // not watch (now) is ignored.
    void on_ready(int fd, bool readable, bool writable) noexcept;
    // When expire() has something to do: the next reconnection attempt or a
    // connect timeout; time_point::max() when nothing is pending.
    std::chrono::steady_clock::time_point next_deadline() const noexcept;
    void expire(std::chrono::steady_clock::time_point now) noexcept;

    // Jobs submitted and not yet delivered.
    std::size_t in_flight() const noexcept { return in_flight_; }
    // Connections ready for queries now.
    unsigned connections_up() const noexcept;
    // How many connections there are (the constructor's `connections`).
    unsigned connections() const noexcept { return static_cast<unsigned>(connections_.size()); }
    // Jobs sent on connection `index` (0-based) since the client was made:
    // how the work was spread.
    std::uint64_t jobs_sent(unsigned index) const noexcept;

  private:
    struct Connection;
    struct Submitted {
        void* owner;
        http::Job job;
    };
    using Clock = std::chrono::steady_clock;

    void dispatch(const Submitted& submitted) noexcept;
    void send_job(Connection& c, const Submitted& submitted) noexcept;
    void sync(Connection& c) noexcept;
    void push_output(Connection& c) noexcept;
    void drain(Connection& c) noexcept;
    void complete_head(Connection& c) noexcept;
    void start_connecting(Connection& c, Clock::time_point now) noexcept;
    void continue_connecting(Connection& c) noexcept;
    void start_preparing(Connection& c) noexcept;
    void became_ready(Connection& c) noexcept;
    void fail(Connection& c, std::string_view why) noexcept;
    void watch(Connection& c, bool read, bool write) noexcept;
    void unwatch(Connection& c) noexcept;
    void settle_waiting() noexcept;
    bool first_attempts_pending() const noexcept;
    void log_line(std::string_view what) noexcept;

    std::string conninfo_;
    std::string options_;  // libpq "options": the statement timeout
    Loop& loop_;
    std::vector<std::unique_ptr<Connection>> connections_;
    std::vector<Submitted> submitted_;  // since the last flush
    std::vector<Submitted> batch_;      // what flush() is dispatching
    std::vector<Submitted> waiting_;    // for a first connection to come up
    std::size_t in_flight_ = 0;
    RandomIds ids_;
    runtime::RateLimitedLog log_;
};

}  // namespace sm::db
