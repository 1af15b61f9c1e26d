#include "db/pg.hpp"

#include <cstring>

#include "db/handles.hpp"

namespace sm::db {

void ConnectionFree::operator()(pg_conn* connection) const noexcept { PQfinish(connection); }
void ResultFree::operator()(pg_result* result) const noexcept { PQclear(result); }
void CancelFree::operator()(pg_cancel* cancel) const noexcept { PQfreeCancel(cancel); }

namespace pg {
namespace {

// int4, the type of the world query's parameter.
constexpr Oid kInt4 = 23;

void put_int4(char (&out)[4], std::int32_t value) noexcept {
    const auto v = static_cast<std::uint32_t>(value);
    out[0] = static_cast<char>(v >> 24);
    out[1] = static_cast<char>(v >> 16);
    out[2] = static_cast<char>(v >> 8);
    out[3] = static_cast<char>(v);
}

// A binary integer column (int2, int4 or int8) that fits 32 bits.
bool get_int(const PGresult* result, int row, int column, std::int32_t& out) noexcept {
    if (PQgetisnull(result, row, column) || PQfformat(result, column) != 1) return false;
    const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(result, row, column));
    const int length = PQgetlength(result, row, column);
    if (length != 2 && length != 4 && length != 8) return false;
    std::uint64_t v = 0;
    for (int i = 0; i < length; ++i) v = (v << 8) | p[i];
    std::int64_t value = 0;
    if (length == 2) value = static_cast<std::int16_t>(static_cast<std::uint16_t>(v));
    if (length == 4) value = static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    if (length == 8) value = static_cast<std::int64_t>(v);
    if (value < INT32_MIN || value > INT32_MAX) return false;
    out = static_cast<std::int32_t>(value);
    return true;
}

void notice_to_log(void* log, const PGresult* result) noexcept {
    try {
        std::string line;
        set_one_line(line, "notice: ", PQresultErrorMessage(result));
        log_line(*static_cast<runtime::RateLimitedLog*>(log), line);
    } catch (...) {
    }
}

PGconn* connection_from(const std::string& conninfo, const std::string& options,
                        bool blocking) noexcept {
    // Defaults first: the conninfo string, expanded in dbname's place,
    // overrides them (libpq keeps the last value of a repeated key word).
    const char* keys[6] = {"client_encoding", "fallback_application_name"};
    const char* values[6] = {"UTF8", "servermodels"};
    std::size_t n = 2;
    // PQconnectPoll ignores connect_timeout: the async client keeps its own.
    if (blocking) {
        keys[n] = "connect_timeout";
        values[n++] = "5";
    }
    if (!options.empty()) {
        keys[n] = "options";
        values[n++] = options.c_str();
    }
    keys[n] = "dbname";
    values[n++] = conninfo.c_str();
    keys[n] = values[n] = nullptr;
    return blocking ? PQconnectdbParams(keys, values, 1) : PQconnectStartParams(keys, values, 1);
}

}  // namespace

PGconn* start_connection(const std::string& conninfo, const std::string& options) noexcept {
    return connection_from(conninfo, options, false);
}
PGconn* make_connection(const std::string& conninfo, const std::string& options) noexcept {
    return connection_from(conninfo, options, true);
}

std::string statement_timeout_option(std::chrono::milliseconds timeout) {
    if (timeout.count() <= 0) return {};
    return "-c statement_timeout=" + std::to_string(timeout.count());
}

bool send_prepares(PGconn* connection) noexcept {
    const Oid types[] = {kInt4};
    return PQsendPrepare(connection, kWorldStatement, kWorldQuery, 1, types) == 1 &&
           PQsendPrepare(connection, kFortuneStatement, kFortuneQuery, 0, nullptr) == 1;
}

bool send_world(PGconn* connection, std::int32_t id) noexcept {
    char value[4];
    put_int4(value, id);
    const char* values[] = {value};
    const int lengths[] = {4};
    const int formats[] = {1};
    return PQsendQueryPrepared(connection, kWorldStatement, 1, values, lengths, formats, 1) == 1;
}

bool send_fortunes(PGconn* connection) noexcept {
    return PQsendQueryPrepared(connection, kFortuneStatement, 0, nullptr, nullptr, nullptr, 1) == 1;
}

PGresult* exec_world(PGconn* connection, std::int32_t id) noexcept {
    char value[4];
    put_int4(value, id);
    const char* values[] = {value};
    const int lengths[] = {4};
    const int formats[] = {1};
    return PQexecPrepared(connection, kWorldStatement, 1, values, lengths, formats, 1);
}

PGresult* exec_fortunes(PGconn* connection) noexcept {
    return PQexecPrepared(connection, kFortuneStatement, 0, nullptr, nullptr, nullptr, 1);
}

bool parse_world(const PGresult* result, http::WorldRow& row, std::string& error) noexcept {
    if (PQntuples(result) != 1) {
        set_one_line(error, "unexpected result: ",
                     PQntuples(result) == 0 ? "no World row with the id asked for"
                                            : "more than one World row for one id");
        return false;
    }
    if (PQnfields(result) != 2 || !get_int(result, 0, 0, row.id) || !get_int(result, 0, 1, row.random_number)) {
        set_one_line(error, "unexpected result: ", "a World row that is not two integers");
        return false;
    }
    return true;
}

bool parse_fortunes(const PGresult* result, std::vector<http::FortuneRow>& rows, std::string& error) noexcept {
    const int n = PQntuples(result);
    if (PQnfields(result) != 2) {
        set_one_line(error, "unexpected result: ", "a Fortune row that is not (id, message)");
        return false;
    }
    for (int i = 0; i < n; ++i) {
        http::FortuneRow row{0, {}};
        if (!get_int(result, i, 0, row.id) || PQgetisnull(result, i, 1)) {
            set_one_line(error, "unexpected result: ", "a Fortune row that is not (id, message)");
            return false;
        }
        row.message = std::string_view(PQgetvalue(result, i, 1), static_cast<std::size_t>(PQgetlength(result, i, 1)));
        rows.push_back(row);
    }
    return true;
}

bool ends_session(const PGresult* result) noexcept {
    const char* severity = PQresultErrorField(result, PG_DIAG_SEVERITY_NONLOCALIZED);
    return severity != nullptr && (std::strcmp(severity, "FATAL") == 0 || std::strcmp(severity, "PANIC") == 0);
}

http::JobError failure_of(const PGresult* result) noexcept {
    const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
    return state != nullptr && std::strcmp(state, "57014") == 0 ? http::JobError::timeout
                                                                 : http::JobError::failed;
}

void set_one_line(std::string& out, std::string_view prefix, std::string_view message) noexcept {
    out.assign(prefix);
    bool space = false;
    const std::size_t start = out.size();
    for (const char c : message) {
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            space = true;
            continue;
        }
        if (space && out.size() > start) out.push_back(' ');
        space = false;
        out.push_back(c);
    }
    if (out.size() == start) out.append("unknown error");
}

void log_notices(PGconn* connection, runtime::RateLimitedLog& log) noexcept {
    PQsetNoticeReceiver(connection, notice_to_log, &log);
}

void log_line(runtime::RateLimitedLog& log, std::string_view what) noexcept {
    try {
        log(std::chrono::steady_clock::now(), [&] {
            std::string line(kLogPrefix);
            line.append(what);
            return line;
        });
    } catch (...) {
    }
}

}  // namespace pg
}  // namespace sm::db
