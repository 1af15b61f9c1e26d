// The database as a blocking model reaches it: one libpq connection per
// worker thread, each job run to completion on the calling thread
// (server-blocking, server-threadpool).
//
//   world      one prepared `SELECT id, randomnumber FROM world WHERE id = $1`
//              with a random id in 1..kWorldRows
//   worlds     `count` such queries, one per row (TechEmpower's rule), sent
//              in libpq's pipeline mode: one round trip for all of them
//              (count 1: the same single query as world)
//   fortunes   one prepared `SELECT id, message FROM fortune`: every row
//
// Connecting: lazily, on the first run(), or eagerly with connect() (e.g. as
// the worker thread starts, so that its first request does not pay for it).
// A connection that fails or is lost is re-established lazily by a later
// run(), at most one attempt a second; while none may be made, run() fails at
// once. Every failure is logged through one rate-limited log per client (at
// most a line a second, "db: ..."); none throws.
//
// Not thread-safe (one client per thread), not copyable or movable (libpq's
// notice callback points at it): hold it in place, in a std::optional or a
// std::unique_ptr.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "db/handles.hpp"
#include "db/random_id.hpp"
#include "http/work.hpp"
#include "runtime/log.hpp"

namespace sm::db {

class SyncClient {
  public:
    // `conninfo`: a libpq connection string or URI (postgresql://...). The
    // client asks for client_encoding UTF8 and a 5 s connect_timeout unless
    // the string says otherwise, and with a `statement_timeout` (the
    // server's --idle-timeout) for PostgreSQL to cancel a statement that
    // runs longer (its job fails: 503), unless the string sets "options".
    // Connects nothing yet.
    explicit SyncClient(std::string conninfo,
                        std::chrono::milliseconds statement_timeout = std::chrono::milliseconds{0});
    ~SyncClient();
    SyncClient(const SyncClient&) = delete;
    SyncClient& operator=(const SyncClient&) = delete;

    // Connects now unless connected (blocking; prepares the statements).
    // False when no connection is up: then why() says why (also when an
    // attempt was made less than a second ago and none is made now).
    bool connect() noexcept;
    bool connected() const noexcept { return connection_ != nullptr; }
    // Why the last attempt to connect failed ("" when connected).
    const std::string& why() const noexcept { return why_; }

    // Asks the server to cancel the statement this client's thread waits
    // for, if any (its run() then fails). Any thread may call it: a
    // blocking model's stop, out of --shutdown-timeout, unblocks its workers.
    void cancel() noexcept;

    // Runs the job on this thread (blocks for its round trip). The result's
    // views (rows) stay valid until the next run() or the client's end.
    // Failures, by class (libpq's message goes to the log, not the result):
    //   unavailable  no connection, and none could be made now
    //   lost         the connection was lost during the job and could not be
    //                made again at once
    //   failed       a query failed (the connection stays), or its result had
    //                not the statement's shape
    //   timeout      PostgreSQL cancelled the statement (statement_timeout,
    //                or cancel())
    // A connection found lost during a job (the server restarted since the
    // last one, typically) is made again right away, within the once-a-second
    // rule, and the job run once more on it: the queries only read.
    http::JobResult run(const http::Job& job) noexcept;

  private:
    using Clock = std::chrono::steady_clock;

    bool ensure_connected(Clock::time_point now) noexcept;
    void drop(const char* message) noexcept;
    http::JobResult world() noexcept;
    http::JobResult worlds(unsigned count) noexcept;
    http::JobResult fortunes() noexcept;
    http::JobResult failed_query(const pg_result* result) noexcept;
    http::JobResult failed(http::JobError why) noexcept;

    std::string conninfo_;
    std::string options_;  // libpq "options": the statement timeout
    ConnectionHandle connection_;
    // cancel()'s handle on connection_, under cancel_mutex_ (it is made and
    // freed with the connection, on the client's thread).
    std::mutex cancel_mutex_;
    std::unique_ptr<pg_cancel, CancelFree> cancel_;
    bool attempted_ = false;           // an attempt was made (last_attempt_ is valid)
    Clock::time_point last_attempt_{};
    std::string why_;                  // why there is no connection
    std::string error_;                // a result of the wrong shape, for the log
    ResultHandle fortune_result_;      // what the fortune rows' messages point into
    std::vector<http::WorldRow> worlds_;
    std::vector<http::FortuneRow> fortunes_;
    RandomIds ids_;
    runtime::RateLimitedLog log_;
};

}  // namespace sm::db
