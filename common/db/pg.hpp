// What both clients do with libpq (internal to sm_db: with db/libpq.hpp,
// which loads libpq when a client is first made, and its .cpp files, the only
// place that includes libpq-fe.h).
#pragma once

#include "db/libpq.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/work.hpp"
#include "runtime/log.hpp"

namespace sm::db::pg {

// The prepared statements, made once per connection.
inline constexpr const char* kWorldStatement = "sm_world";
inline constexpr const char* kWorldQuery = "SELECT id, randomnumber FROM world WHERE id = $1";
inline constexpr const char* kFortuneStatement = "sm_fortune";
inline constexpr const char* kFortuneQuery = "SELECT id, message FROM fortune";

// The prefix of every line the clients log.
inline constexpr std::string_view kLogPrefix = "db: ";

// How long an asynchronous connection attempt may take (PQconnectPoll does
// not enforce connect_timeout; the blocking client passes it to libpq).
inline constexpr std::chrono::seconds kConnectTimeout{5};

// Starts a connection (PQconnectStartParams) or makes one (PQconnectdbParams)
// from a conninfo string or URI, asking for client_encoding UTF8 (and, when
// blocking, connect_timeout 5) unless the string sets them. Null only when
// libpq is out of memory.
// `options` (a libpq "options" value, e.g. "-c statement_timeout=60000") is
// a default too: an "options" in the conninfo replaces it. Empty: none.
PGconn* start_connection(const std::string& conninfo, const std::string& options) noexcept;
PGconn* make_connection(const std::string& conninfo, const std::string& options) noexcept;

// The "options" value that makes the server cancel a statement running
// longer than `timeout` ("" for zero: no limit).
std::string statement_timeout_option(std::chrono::milliseconds timeout);

// Sends the two Parse messages (pipeline mode or not).
bool send_prepares(PGconn* connection) noexcept;
// Sends one world query for `id` or the fortune query (binary parameters
// and results).
bool send_world(PGconn* connection, std::int32_t id) noexcept;
bool send_fortunes(PGconn* connection) noexcept;
// The blocking forms: run and wait.
PGresult* exec_world(PGconn* connection, std::int32_t id) noexcept;
PGresult* exec_fortunes(PGconn* connection) noexcept;

// A result's rows. False (with `error` set to "unexpected result: ...", for
// the log) when the result has not the shape of the statement's.
bool parse_world(const PGresult* result, http::WorldRow& row, std::string& error) noexcept;
bool parse_fortunes(const PGresult* result, std::vector<http::FortuneRow>& rows,
                    std::string& error) noexcept;

// An error the server ends the session with (severity FATAL or PANIC): the
// connection is going away whatever the query was.
bool ends_session(const PGresult* result) noexcept;

// The class of a failed query's result (null: libpq had none): timeout when
// PostgreSQL cancelled the statement (SQLSTATE 57014: the statement timeout,
// or a cancel request such as a blocking model's at --shutdown-timeout),
// else failed.
http::JobError failure_of(const PGresult* result) noexcept;

// `out` = prefix + message on one line: runs of white space (libpq's "\n\t"
// continuation lines, "ERROR:  ") become one space, none at the ends; an
// empty message reads "unknown error". Keeps out's capacity.
void set_one_line(std::string& out, std::string_view prefix, std::string_view message) noexcept;
inline void set_one_line(std::string& out, std::string_view prefix, const char* message) noexcept {
    set_one_line(out, prefix, std::string_view(message != nullptr ? message : ""));
}

// Routes the connection's notices (and libpq's own warnings) to `log`.
void log_notices(PGconn* connection, runtime::RateLimitedLog& log) noexcept;
// Logs "db: <what>" through `log` (at most a line a second).
void log_line(runtime::RateLimitedLog& log, std::string_view what) noexcept;

}  // namespace sm::db::pg
