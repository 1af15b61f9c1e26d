// The workloads beyond Hello World (TechEmpower rules): /db, /queries and
// /fortunes. Their data comes from outside the session: from PostgreSQL, which
// a model reaches in its own way (libpq synchronously from a blocking thread,
// or asynchronously inside its event loop), or for /fortunes from memory.
//
// The contract, still sans-I/O: when a request needs the database, the
// session queues a Job and holds every later response back (pipelined
// responses stay in order). The model takes the job (Session::next_job), runs
// it however it likes, and hands the rows back (Session::complete); the
// session then renders that response and releases, in order, every response
// that is no longer waiting. A job whose connection was closed or reused in
// the meantime is recognised by its epoch and ignored.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace sm::http {

enum class Work : std::uint8_t {
    world,     // GET /db: one random World row
    worlds,    // GET /queries?queries=N: N random World rows, one query each
    fortunes,  // GET /fortunes from the database: every Fortune row
};

struct Job {
    std::uint64_t id = 0;     // which of its connection's jobs it is: 1, 2, ...
    std::uint64_t epoch = 0;  // the session's connection when queued (Session::epoch())
    Work work = Work::world;
    std::uint16_t count = 1;  // World rows to fetch (1 for /db, 1..500 for /queries)
};

// The World table: 10,000 rows, ids 1..10000, randomNumber 1..10000.
inline constexpr std::int32_t kWorldRows = 10000;
// TechEmpower's clamp of /queries?queries=N: a missing or non-numeric value
// is 1, values below 1 are 1, above 500 are 500.
inline constexpr std::uint16_t kMaxQueries = 500;

struct WorldRow {
    std::int32_t id;
    std::int32_t random_number;
};

struct FortuneRow {
    std::int32_t id;
    std::string_view message;  // UTF-8, not escaped
};

// Why a job failed, as a class: all a client is told (the 503's body is the
// class's fixed text, job_error_text). The detail, libpq's message, names
// the database's address and port and what went wrong inside it: the
// database clients write it to the server's log (rate-limited), never into
// a response.
enum class JobError : std::uint8_t {
    none,         // the job did not fail
    unavailable,  // no connection to the database, and none could be made now
    lost,         // the connection broke while the job was out
    failed,       // a query failed, or its result had not the shape of the statement's
    timeout,      // the statement ran out of time (the statement timeout, a cancel)
};

// The fixed text a 503 body gives for each class: "database unavailable",
// "database connection lost", "database error", "database timeout" ("" for none).
std::string_view job_error_text(JobError e) noexcept;

// What a job produced: its rows, or the class of its failure (a 503 whose
// body names it). The views need only live until Session::complete returns.
struct JobResult {
    std::span<const WorldRow> worlds;
    std::span<const FortuneRow> fortunes;
    JobError error = JobError::none;  // not none: the job failed

    static JobResult failed(JobError why) noexcept { return {{}, {}, why}; }
};

// Where /fortunes takes its rows from.
enum class FortuneSource : std::uint8_t {
    memory,    // the 12 rows built in: a CPU-bound handler (template scenario)
    database,  // SELECT id, message FROM fortune
};

// What the workload endpoints may use on this server.
struct Workloads {
    bool database = false;  // a --db was given: /db, /queries (and fortunes) may queue jobs
    FortuneSource fortunes = FortuneSource::memory;
};

// The 12 rows of TechEmpower's Fortune table, as built in.
std::span<const FortuneRow> builtin_fortunes() noexcept;

// The N of /queries from the query string ("queries=N&..."), clamped.
std::uint16_t parse_queries(std::string_view query) noexcept;

}  // namespace sm::http
