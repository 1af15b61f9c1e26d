#include "support/pg.hpp"
#include "support/skip.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "support/server_process.hpp"

// Built without libpq (SM_TEST_HAVE_LIBPQ 0: CMake did not find it), the
// database cases are skipped: the servers have no database client either.
#if SM_TEST_HAVE_LIBPQ
#include <libpq-fe.h>
#endif

#ifndef SM_PG_SCRIPT
#error "SM_PG_SCRIPT must name scripts/pg.sh"
#endif

namespace sm::test::pg {
namespace {

using sm::test::exit_skipped;

std::string first_line(std::string s) {
    const auto eol = s.find_first_of("\r\n");
    if (eol != std::string::npos) s.resize(eol);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.pop_back();
    return s;
}

}  // namespace

std::optional<std::string> fixture_url(std::string& why) {
    const char* file = std::getenv("SM_TEST_DB_FILE");
    if (file == nullptr || *file == '\0') {
        why = "SM_TEST_DB_FILE is not set: no PostgreSQL fixture (run the case through ctest, "
              "whose fixture starts one with scripts/pg.sh)";
        return std::nullopt;
    }
    std::ifstream in(file);
    if (!in) {
        why = std::string("SM_TEST_DB_FILE=") + file +
              " does not exist: the PostgreSQL fixture did not start (is PostgreSQL 15 "
              "installed? scripts/deps.sh test)";
        return std::nullopt;
    }
    std::string line;
    std::getline(in, line);
    line = first_line(line);
    if (line.empty()) {
        why = std::string("SM_TEST_DB_FILE=") + file + " is empty";
        return std::nullopt;
    }
    return line;
}

std::string fixture_url_or_skip() {
#if !SM_TEST_HAVE_LIBPQ
    exit_skipped("built without libpq (Debian: libpq-dev): no database workloads");
#endif
    std::string why;
    auto url = fixture_url(why);
    if (!url) exit_skipped(why);
    return *url;
}

std::uint16_t url_port(std::string_view url) {
    // postgresql://user:pass@host:PORT/db: the digits after the last ':' of
    // the authority (the part between "@" or "//" and the next '/').
    auto start = url.find("://");
    start = start == std::string_view::npos ? 0 : start + 3;
    auto end = url.find('/', start);
    std::string_view authority = url.substr(start, end - start);
    if (const auto at = authority.rfind('@'); at != std::string_view::npos)
        authority.remove_prefix(at + 1);
    const auto colon = authority.rfind(':');
    if (colon == std::string_view::npos) return 0;
    unsigned port = 0;
    for (const char c : authority.substr(colon + 1)) {
        if (c < '0' || c > '9') return 0;
        port = port * 10 + static_cast<unsigned>(c - '0');
        if (port > 65535) return 0;
    }
    return static_cast<std::uint16_t>(port);
}

std::string url_nobody_listens_on() {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) throw std::runtime_error("socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ::close(s);
        throw std::runtime_error("bind failed");
    }
    ::close(s);
    return "postgresql://benchmarkdbuser:benchmarkdbpass@127.0.0.1:" + std::to_string(ntohs(a.sin_port)) +
           "/hello_world";
}

#if SM_TEST_HAVE_LIBPQ
Session::Session(const std::string& url) {
    const char* keys[] = {"dbname", "connect_timeout", "client_encoding", nullptr};
    const char* values[] = {url.c_str(), "10", "UTF8", nullptr};
    conn_ = PQconnectdbParams(keys, values, 1);
    if (conn_ == nullptr) throw std::runtime_error("libpq: out of memory connecting to " + url);
    if (PQstatus(conn_) != CONNECTION_OK) {
        const std::string why = PQerrorMessage(conn_);
        PQfinish(conn_);
        conn_ = nullptr;
        throw std::runtime_error("cannot connect to " + url + ": " + why);
    }
}

Session::~Session() {
    if (conn_ != nullptr) PQfinish(conn_);
}

Session::Rows Session::query(const std::string& sql) {
    PGresult* last = nullptr;
    if (PQsendQuery(conn_, sql.c_str()) == 0)
        throw std::runtime_error("sending \"" + sql + "\": " + PQerrorMessage(conn_));
    std::string error;
    while (PGresult* r = PQgetResult(conn_)) {
        const ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && error.empty())
            error = PQresultErrorMessage(r);
        if (last != nullptr) PQclear(last);
        last = r;
    }
    if (!error.empty() || last == nullptr) {
        if (last != nullptr) PQclear(last);
        if (error.empty()) error = PQerrorMessage(conn_);
        throw std::runtime_error("\"" + sql + "\": " + error);
    }
    Rows rows;
    const int n = PQntuples(last);
    const int cols = PQnfields(last);
    rows.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        auto& row = rows.emplace_back();
        for (int j = 0; j < cols; ++j)
            row.emplace_back(PQgetvalue(last, i, j), static_cast<std::size_t>(PQgetlength(last, i, j)));
    }
    PQclear(last);
    return rows;
}

#else
Session::Session(const std::string&) {
    exit_skipped("built without libpq (Debian: libpq-dev): no database workloads");
}
Session::~Session() = default;
Session::Rows Session::query(const std::string&) {
    throw std::runtime_error("built without libpq");
}
#endif

std::map<std::int32_t, std::int32_t> world_table(Session& s) {
    std::map<std::int32_t, std::int32_t> world;
    for (const auto& row : s.query("SELECT id, randomnumber FROM world"))
        world[std::stoi(row.at(0))] = std::stoi(row.at(1));
    return world;
}

std::vector<std::pair<std::int32_t, std::string>> fortune_table(Session& s) {
    std::vector<std::pair<std::int32_t, std::string>> rows;
    for (const auto& row : s.query("SELECT id, message FROM fortune ORDER BY id"))
        rows.emplace_back(std::stoi(row.at(0)), row.at(1));
    return rows;
}

int sessions_waiting_on_a_lock(Session& s) {
    const auto rows = s.query(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'");
    return std::stoi(rows.at(0).at(0));
}

OwnPostgres::OwnPostgres() {
#if !SM_TEST_HAVE_LIBPQ
    exit_skipped("built without libpq (Debian: libpq-dev): no database workloads");
#endif
    char templ[] = "/tmp/sm-test-pg.XXXXXX";
    if (::mkdtemp(templ) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = templ;
    // The server's user (pg.sh runs it as postgres when we are root) may use it.
    ::chmod(dir_.c_str(), 0755);
    const RunResult r = run_to_exit("/bin/bash", {SM_PG_SCRIPT, "start", dir_}, 90s);
    if (r.status.exited && r.status.code == 77) {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        exit_skipped("scripts/pg.sh start: no PostgreSQL server installed: " + r.err);
    }
    if (!r.status.clean()) {
        const std::string what = "scripts/pg.sh start " + dir_ + ": " + r.status.describe() +
                                 "\n--- stdout ---\n" + r.out + "--- stderr ---\n" + r.err;
        run_to_exit("/bin/bash", {SM_PG_SCRIPT, "stop", dir_}, 60s);
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        throw std::runtime_error(what);
    }
    std::ifstream in(dir_ + "/url");
    std::getline(in, url_);
    url_ = first_line(url_);
    port_ = url_port(url_);
    if (url_.empty() || port_ == 0) {
        run_to_exit("/bin/bash", {SM_PG_SCRIPT, "stop", dir_}, 60s);
        throw std::runtime_error("scripts/pg.sh start wrote no usable URL in " + dir_ +
                                 "/url: \"" + url_ + "\"\n" + r.out + r.err);
    }
}

OwnPostgres::~OwnPostgres() {
    try {
        run_to_exit("/bin/bash", {SM_PG_SCRIPT, "stop", dir_}, 60s);
    } catch (...) {
        // A destructor: nothing more to do than try.
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

std::string OwnPostgres::run(const std::vector<std::string>& args,
                             std::chrono::milliseconds timeout) {
    std::vector<std::string> argv = {SM_PG_SCRIPT};
    argv.insert(argv.end(), args.begin(), args.end());
    const RunResult r = run_to_exit("/bin/bash", argv, timeout);
    if (!r.status.clean()) {
        std::string shown;
        for (const auto& a : args)
            shown += " " + a;
        throw std::runtime_error("scripts/pg.sh" + shown + ": " + r.status.describe() +
                                 "\n--- stdout ---\n" + r.out + "--- stderr ---\n" + r.err);
    }
    return r.out;
}

void OwnPostgres::pause() { run({"pause", dir_}, 60s); }

void OwnPostgres::resume() { run({"resume", dir_}, 60s); }

}  // namespace sm::test::pg
