// PostgreSQL for the network suites' database cases: the shared fixture's
// URL (SM_TEST_DB_FILE, written by the ctest fixture of cmake/Postgres.cmake),
// a libpq reference session to read what the tables really hold (and to take
// locks), and a PostgreSQL of a test's own, started with scripts/pg.sh in a
// temporary directory, that the test may stop, restart or change at will (the
// shared fixture's tables are never modified).
// Linux only, and only where libpq was found (SM_HAVE_LIBPQ in CMake).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pg_conn;  // libpq's PGconn: libpq-fe.h stays in pg.cpp

namespace sm::test::pg {

using namespace std::chrono_literals;

// The shared fixture's libpq URL: the first line of the file SM_TEST_DB_FILE
// names. Nothing when the variable is unset or empty, the file is missing or
// empty; `why` then says which.
std::optional<std::string> fixture_url(std::string& why);

// The shared fixture's URL, or, when there is none, prints why and ends the
// process with exit code 77 (ctest: skipped). Call it before starting anything
// a destructor must stop: the exit runs none.
std::string fixture_url_or_skip();

// The port of a postgresql://user:pass@host:PORT/db URL (0 if it has none).
std::uint16_t url_port(std::string_view url);

// A libpq URL on 127.0.0.1 where nothing listens (a port just free): a
// database that is down. Throws std::runtime_error if no port can be had.
std::string url_nobody_listens_on();

// A libpq session of the test's own. Every failure throws std::runtime_error
// with libpq's message.
class Session {
  public:
    using Rows = std::vector<std::vector<std::string>>;  // text values, NULL as ""

    // Connects (connect_timeout 10 s); throws if it cannot.
    explicit Session(const std::string& url);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Runs one statement (or several, ';'-separated, without parameters) and
    // returns the last one's rows; throws on an error.
    Rows query(const std::string& sql);
    // query() for statements without rows.
    void exec(const std::string& sql) { (void)query(sql); }

  private:
    pg_conn* conn_ = nullptr;
};

// The World table: id -> randomNumber.
std::map<std::int32_t, std::int32_t> world_table(Session& s);
// The Fortune table: (id, message), in id order.
std::vector<std::pair<std::int32_t, std::string>> fortune_table(Session& s);
// Server processes (backends) of the hello_world database waiting for a lock
// (pg_stat_activity.wait_event_type = 'Lock').
int sessions_waiting_on_a_lock(Session& s);

// A PostgreSQL of the test's own: scripts/pg.sh start in a fresh temporary
// directory (the same schema as the shared fixture, on a free port). The
// destructor stops it and removes the directory.
class OwnPostgres {
  public:
    // Starts it; if scripts/pg.sh says no PostgreSQL server is installed
    // (exit 77), prints why and ends the process with exit code 77 (call it
    // before starting anything else). Throws with pg.sh's output on any
    // other failure.
    OwnPostgres();
    ~OwnPostgres();
    OwnPostgres(const OwnPostgres&) = delete;
    OwnPostgres& operator=(const OwnPostgres&) = delete;

    [[nodiscard]] const std::string& url() const noexcept { return url_; }
    [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

    // pg.sh pause: the server stops (fast shutdown: its sessions are
    // terminated), keeping its data and port.
    void pause();
    // pg.sh resume: it starts again on the same port.
    void resume();

  private:
    // Runs pg.sh `args`; throws with its output unless it exits 0.
    std::string run(const std::vector<std::string>& args, std::chrono::milliseconds timeout);

    std::string dir_;
    std::string url_;
    std::uint16_t port_ = 0;
};

}  // namespace sm::test::pg
