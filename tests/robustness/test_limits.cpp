// The request limits against the real binaries, at their defaults where the
// input stays small (--max-uri-bytes 8192, --max-head-bytes 16384,
// --max-header-count 100, --max-body-bytes 1 MiB): exactly at a limit is
// served, one byte past it gets 414, 431 or 413 without waiting for the rest.
// And --header-timeout: a request head must be complete within it from its
// first byte, however it trickles in.
#include <poll.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "robustness.hpp"

using namespace sm::test;
using namespace sm::test::robustness;
using namespace std::string_literals;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxUri = 8192;
constexpr std::size_t kMaxHead = 16384;
constexpr std::size_t kMaxHeaders = 100;
constexpr std::size_t kMaxBody = 1024 * 1024;

// "GET <target> HTTP/1.1" whose target is `n` bytes: "/" and 'u's (a 404).
std::string target_of_size(std::size_t n) {
    std::string t(n, 'u');
    t.front() = '/';
    return t;
}

// A GET /plaintext whose head (request line to the final CRLF) is `n` bytes.
std::string head_of_size(std::size_t n) {
    const std::string fixed = "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX-Fill: \r\n\r\n";
    REQUIRE(n >= fixed.size());
    return "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX-Fill: " +
           std::string(n - fixed.size(), 'f') + "\r\n\r\n";
}

// A GET /plaintext with `fields` header fields in all (Host among them).
std::string request_with_fields(std::size_t fields) {
    std::string r = "GET /plaintext HTTP/1.1\r\nHost: localhost\r\n";
    for (std::size_t i = 1; i < fields; ++i)
        r += "X-H" + std::to_string(i) + ": v\r\n";
    return r + "\r\n";
}

// A chunked POST /json whose whole chunked encoding (framing included, which
// counts toward --max-body-bytes) is `n` bytes: one chunk of 4 bytes with a
// chunk extension filling the rest.
std::string chunked_body_of_size(std::size_t n) {
    const std::string fixed = "4;\r\nabcd\r\n0\r\n\r\n";
    REQUIRE(n >= fixed.size());
    return "POST /json HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n4;" +
           std::string(n - fixed.size(), 'x') + "\r\nabcd\r\n0\r\n\r\n";
}

void check_at_limit_served(ServerProcess& server, const std::string& bytes, int status) {
    INFO("sent " << bytes.size() << " bytes: \"" << printable(bytes, 120) << "\"");
    Connection c = connect(server);
    const Response r = c.request(bytes);
    INFO(r.describe());
    CHECK(r.status == status);
    conformance::check_common_headers(r);
    CHECK(r.keep_alive);
    CHECK(c.request(make_request("GET", "/json")).status == 200);
}

// Milliseconds since `start`, for messages.
long long ms_since(Clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

}  // namespace

// --- 414 -------------------------------------------------------------------------

TEST_CASE("a request target longer than --max-uri-bytes gets 414", "[robustness][limits]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    check_at_limit_served(*server, make_request("GET", target_of_size(kMaxUri)), 404);
    require_rejected(*server, make_request("GET", target_of_size(kMaxUri + 1)), 414);
    // The answer to HEAD has no body even when it is an error: a body here
    // would be read as the start of the next response.
    require_rejected(*server, make_request("HEAD", target_of_size(kMaxUri + 1)), 414,
                     Expect::no_body);
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("an unterminated request target gets 414 as soon as it passes the limit",
          "[robustness][limits]") {
    // 64 KiB of target and no line end: the 414 must not wait for the rest.
    check_rejected("GET /" + std::string(64 * 1024, 'u'), 414);
}

// --- 431 -------------------------------------------------------------------------

TEST_CASE("a header field larger than --max-head-bytes gets 431", "[robustness][limits]") {
    check_rejected(make_request("GET", "/plaintext", "X-Big: " + std::string(20000, 'b') + "\r\n"),
                   431);
}

TEST_CASE("a head larger than --max-head-bytes gets 431", "[robustness][limits]") {
    // Exactly the limit is served; one byte more, or the same size made of
    // many fields each well under it, is not.
    auto server = start_server();
    const FdBaseline fds(*server);
    check_at_limit_served(*server, head_of_size(kMaxHead), 200);
    require_rejected(*server, head_of_size(kMaxHead + 1), 431);
    std::string many;
    for (int i = 0; i < 40; ++i)
        many += "X-F" + std::to_string(i) + ": " + std::string(500, 'f') + "\r\n";
    require_rejected(*server, make_request("GET", "/plaintext", many), 431);
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("a head that never ends gets 431 as soon as it passes the limit",
          "[robustness][limits]") {
    std::string bytes = "GET /plaintext HTTP/1.1\r\nHost: localhost\r\n";
    for (int i = 0; bytes.size() < 4 * kMaxHead; ++i)
        bytes += "X-L" + std::to_string(i) + ": " + std::string(100, 'l') + "\r\n";
    check_rejected(bytes, 431);
}

TEST_CASE("more header fields than --max-header-count gets 431", "[robustness][limits]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    check_at_limit_served(*server, request_with_fields(kMaxHeaders), 200);
    require_rejected(*server, request_with_fields(kMaxHeaders + 1), 431);
    // Thousands of tiny fields, far under the head size limit.
    std::string tiny = "GET /plaintext HTTP/1.1\r\nHost: localhost\r\n";
    for (int i = 0; i < 3000; ++i)
        tiny += "a:\r\n";
    require_rejected(*server, tiny + "\r\n", 431);
    require_serving(*server);
    fds.require_back();
}

// --- 413 -------------------------------------------------------------------------

TEST_CASE("a Content-Length above --max-body-bytes gets 413 before the body is sent",
          "[robustness][limits]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    // At the limit: read, discarded, answered, and the connection goes on.
    check_at_limit_served(
        *server,
        make_request("POST", "/nope", "Content-Length: " + std::to_string(kMaxBody) + "\r\n") +
            std::string(kMaxBody, 'b'),
        404);
    // Past it: only the head is sent; the 413 must not wait for the body.
    require_rejected(
        *server,
        make_request("POST", "/nope", "Content-Length: " + std::to_string(kMaxBody + 1) + "\r\n"),
        413);
    require_rejected(
        *server, make_request("POST", "/nope", "Content-Length: 18446744073709551615\r\n"), 413);
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("a body sent in full past --max-body-bytes gets 413 and a clean close",
          "[robustness][limits]") {
    // The client sends the whole oversized body before reading: the server
    // answers 413 and must drain, not reset, what it will not read.
    check_rejected(make_request("POST", "/nope", "Content-Length: 262144\r\n") +
                       std::string(262144, 'b') + make_request("GET", "/plaintext"),
                   413, {"--max-body-bytes", "65536"});
}

TEST_CASE("a chunked body growing past --max-body-bytes gets 413", "[robustness][limits]") {
    auto server = start_server({"--max-body-bytes", "65536"});
    const FdBaseline fds(*server);
    std::string body =
        "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 9; ++i)  // 9 chunks of 8 KiB, each under the limit
        body += "2000\r\n" + std::string(8192, 'c') + "\r\n";
    body += "0\r\n\r\n";
    require_rejected(*server, body, 413);
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("chunked framing counts toward --max-body-bytes (CVE-2024-22019)",
          "[robustness][limits]") {
    // Chunk extensions carry no data but must not make a request unbounded:
    // the whole chunked encoding is measured.
    auto server = start_server({"--max-body-bytes", "4096"});
    const FdBaseline fds(*server);
    check_at_limit_served(*server, chunked_body_of_size(4096), 405);
    require_rejected(*server, chunked_body_of_size(4097), 413);
    // Endless extension on one chunk.
    require_rejected(*server,
                     "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "1;" +
                         std::string(64 * 1024, 'e'),
                     413);
    require_serving(*server);
    fds.require_back();
}

// --- --header-timeout ------------------------------------------------------------

TEST_CASE("a head trickled past --header-timeout gets 408 (slowloris)",
          "[robustness][limits][header-timeout]") {
    // One byte every 100 ms of a head that never ends: each byte arrives well
    // within any idle timeout, but the head as a whole must be complete within
    // --header-timeout of its first byte, so trickling cannot extend it.
    auto server = start_server({"--header-timeout", "1"});
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server, 10s);
        const std::string prefix = "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
        const auto start = Clock::now();
        bool answered = false;
        bool send_failed = false;
        std::string send_error;
        for (std::size_t i = 0; Clock::now() - start < 8s; ++i) {
            const char ch = i < prefix.size() ? prefix[i] : 's';
            if (!send_failed) {
                const ssize_t n = ::send(c.fd(), &ch, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno != EAGAIN && errno != EINTR) {
                    send_failed = true;  // the server closed; see what it said
                    send_error = std::strerror(errno);
                }
            }
            pollfd p{c.fd(), POLLIN, 0};
            if (::poll(&p, 1, 100) > 0) {
                answered = true;
                break;
            }
        }
        const auto elapsed = ms_since(start);
        INFO("first response byte (or close) after "
             << elapsed << " ms" << (send_failed ? "; a send failed: " : "") << send_error);
        REQUIRE(answered);
        const Response r = c.read_response();
        check_error_response(r, 408);
        // Not before the deadline: the head was still arriving, byte by byte.
        CHECK(elapsed >= 900);
        require_closed_cleanly(c);
    }
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("a head that stalls part-way gets 408 at --header-timeout, not at --idle-timeout",
          "[robustness][limits][header-timeout]") {
    auto server = start_server({"--header-timeout", "1", "--idle-timeout", "60"});
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server, 8s);
        const auto start = Clock::now();
        c.send("GET /plaintext HTTP/1.1\r\nHost: loc");
        const Response r = c.read_response();  // bounded by the 8 s I/O timeout
        INFO("answered after " << ms_since(start) << " ms");
        check_error_response(r, 408);
        CHECK(ms_since(start) >= 900);
        require_closed_cleanly(c);
    }
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("a connection waiting for a request is subject to --idle-timeout, not --header-timeout",
          "[robustness][limits][header-timeout]") {
    // The header deadline starts with a request's first byte: a new
    // connection that has sent nothing yet, and a keep-alive connection
    // between requests, may wait up to --idle-timeout.
    auto server = start_server({"--header-timeout", "0.3", "--idle-timeout", "3"});
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server, 10s);
        std::this_thread::sleep_for(1s);  // silent from the start: > 3x --header-timeout
        REQUIRE(c.request(make_request("GET", "/plaintext")).status == 200);
        std::this_thread::sleep_for(1s);  // silent between requests
        const Response r = c.request(make_request("GET", "/json"));
        CHECK(r.status == 200);
        CHECK(r.keep_alive);
        // Then --idle-timeout ends it, with a graceful close.
        const auto last = Clock::now();
        const Connection::Closed closed = c.expect_closed(10s);
        INFO("closed after " << ms_since(last) << " ms idle: " << closed.describe());
        CHECK(closed.how == Connection::End::eof);
        CHECK(ms_since(last) >= 1500);  // far past --header-timeout
    }
    // A complete head well within the deadline, on a fresh connection, is
    // of course served.
    require_serving(*server);
    fds.require_back();
}
