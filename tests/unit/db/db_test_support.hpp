// What the db client tests share beyond support/pg.hpp (the fixture's URL,
// reference sessions, a PostgreSQL of a test's own, a port nobody listens
// on): how a failed job looks to a client and in the log.
#pragma once

#include <catch2/catch.hpp>

#include <ctime>
#include <string>
#include <string_view>

#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/work.hpp"
#include "support/pg.hpp"
#include "unit/runtime/capture.hpp"

namespace sm::test {

// What a server answers for a job that failed with `e`: the 503's body, as
// the response cache the sessions use renders it (ResponseCache::write_job).
inline std::string body_for(http::JobError e) {
    const http::ResponseCache cache(http::ResponseMode::composed, std::time(nullptr),
                                    {true, http::FortuneSource::database});
    http::ByteBuffer out;
    cache.write_job(http::Job{}, http::JobResult::failed(e), false, http::Persistence::keep_alive, out);
    const std::string response(out.view());
    const auto end_of_head = response.find("\r\n\r\n");
    REQUIRE(end_of_head != std::string::npos);
    return response.substr(end_of_head + 4);
}

// A client's failure as a client and as the operator see it. The body names
// the class only: exactly `body` (written here, apart from http/work.cpp),
// without the database's address or port (from `url`) and without
// `detail`, libpq's text for the failure, which the log (what the client
// logged meanwhile, `log`) must have instead, with the address and port
// where the failure is about connecting (`log_names_address`).
inline void check_failure_told_apart(http::JobError e, std::string_view body, const std::string& url,
                                     const std::string& log, std::string_view detail,
                                     bool log_names_address) {
    const std::string got = body_for(e);
    const std::string port = std::to_string(pg::url_port(url));
    INFO("the 503's body: " << got << "the log:\n" << log);
    CHECK(got == body);
    CHECK(got.find("127.0.0.1") == std::string::npos);
    CHECK(got.find(port) == std::string::npos);
    CHECK(got.find(detail) == std::string::npos);
    CHECK(log.find(detail) != std::string::npos);
    if (log_names_address) {
        CHECK(log.find("127.0.0.1") != std::string::npos);
        CHECK(log.find("port " + port) != std::string::npos);
    }
}

// The rest of the first log line that has `what` (libpq's text after
// "db: connection lost: ", say); fails the case when no line has it.
inline std::string log_detail(const std::string& log, std::string_view what) {
    const auto at = log.find(what);
    INFO("the log:\n" << log);
    REQUIRE(at != std::string::npos);
    const auto from = at + what.size();
    const std::string detail = log.substr(from, log.find('\n', from) - from);
    REQUIRE(!detail.empty());
    return detail;
}

}  // namespace sm::test
