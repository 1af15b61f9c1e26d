// Connection handling: pipelining, concurrency, keep-alive and close rules,
// malformed input, requests split across writes, descriptor hygiene.
#include <catch2/catch.hpp>

#include <array>
#include <charconv>
#include <string>
#include <thread>
#include <vector>

#include "conformance.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::conformance;

namespace {

// Checks a response against the endpoint that `path` names.
void check_endpoint(const Response& r, std::string_view path) {
    INFO("expected the response to GET " << path << "; got " << r.describe());
    REQUIRE(r.status == 200);
    if (path == "/json") {
        CHECK(r.header("Content-Type").value_or("(none)") == "application/json");
        CHECK(r.body == kJsonBody);
    } else {
        CHECK(r.header("Content-Type").value_or("(none)") == "text/plain");
        CHECK(r.body == kPlaintextBody);
    }
}

void require_closed_cleanly(Connection& c) {
    const Connection::Closed closed = c.expect_closed(5s);
    INFO("after the response the connection was " << closed.describe());
    CHECK(closed.unexpected.empty());
    // A reset instead of a FIN can destroy a response the client has not read
    // yet: the server must close gracefully (lingering close).
    CHECK(closed.how == Connection::End::eof);
}

}  // namespace

TEST_CASE("pipelining answers 16 requests sent in one write in order",
          "[conformance][connections]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        // An irregular mix, so a reordering cannot go unnoticed.
        constexpr unsigned kJsonMask = 0b1011'0010'0111'0100;
        std::vector<std::string_view> paths;
        std::string batch;
        for (unsigned i = 0; i < 16; ++i) {
            paths.push_back((kJsonMask >> i) & 1u ? "/json" : "/plaintext");
            batch += make_request("GET", paths.back());
        }
        Connection c = connect(*server);
        c.send(batch);
        const std::vector<Response> responses = c.read_responses(paths.size());
        for (std::size_t i = 0; i < paths.size(); ++i) {
            INFO("response " << i);
            check_endpoint(responses[i], paths[i]);
            check_common_headers(responses[i]);
        }
        CHECK(c.buffered() == 0);
        // And the connection goes on.
        check_endpoint(c.request(make_request("GET", "/json")), "/json");
    }
    fds.require_back();
}

TEST_CASE("pipelining answers 1024 requests sent in one write in order",
          "[conformance][connections]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        // More than one read's worth for any sensible buffer size (about 40 KiB
        // of requests, 140 KiB of responses), so the batch is handled across
        // several reads and writes.
        constexpr std::size_t kRequests = 1024;
        std::vector<std::string_view> paths;
        std::string batch;
        for (std::size_t i = 0; i < kRequests; ++i) {
            paths.push_back((i * 7 + i / 3) % 5 < 2 ? "/json" : "/plaintext");
            batch += make_request("GET", paths.back());
        }
        Connection c = connect(*server);
        c.send(batch);
        for (std::size_t i = 0; i < kRequests; ++i) {
            INFO("response " << i);
            check_endpoint(c.read_response(), paths[i]);
        }
        CHECK(c.buffered() == 0);
    }
    fds.require_back();
}

TEST_CASE("request bodies are consumed and not taken for the next request",
          "[conformance][connections]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        // Each body looks like a request of its own: answering it would show.
        const std::string inner = make_request("GET", "/nope");
        std::array<char, 16> hex{};
        const auto end = std::to_chars(hex.data(), hex.data() + hex.size(), inner.size(), 16).ptr;
        const std::string chunked =
            "POST /json HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n" +
            std::string(hex.data(), end) + "\r\n" + inner + "\r\n0\r\n\r\n";
        c.send(make_request("GET", "/plaintext",
                            "Content-Length: " + std::to_string(inner.size()) + "\r\n") +
               inner + chunked + make_request("GET", "/json"));
        const std::vector<Response> r = c.read_responses(3);
        check_endpoint(r[0], "/plaintext");
        INFO(r[1].describe());
        CHECK(r[1].status == 405);
        check_endpoint(r[2], "/json");
        // Nothing else comes: the bodies were not answered as requests.
        const Response last = c.request(make_request("GET", "/"));
        CHECK(last.status == 200);
        CHECK(last.body == kRootBody);
        CHECK(c.buffered() == 0);
    }
    fds.require_back();
}

TEST_CASE("pipelining keeps HEAD and GET responses framed", "[conformance][connections]") {
    auto server = start_server();
    Connection c = connect(*server);
    const std::string batch = make_request("GET", "/plaintext") + make_request("HEAD", "/json") +
                              make_request("GET", "/json") + make_request("HEAD", "/plaintext") +
                              make_request("HEAD", "/nope") + make_request("GET", "/");
    c.send(batch);
    const std::array<Expect, 6> expect = {Expect::body,    Expect::no_body, Expect::body,
                                          Expect::no_body, Expect::no_body, Expect::body};
    const std::vector<Response> r = c.read_responses(expect);
    check_endpoint(r[0], "/plaintext");
    CHECK(r[1].status == 200);
    CHECK(r[1].header("Content-Type").value_or("(none)") == "application/json");
    check_endpoint(r[2], "/json");
    CHECK(r[3].status == 200);
    CHECK(r[3].header("Content-Type").value_or("(none)") == "text/plain");
    CHECK(r[4].status == 404);
    CHECK(r[5].status == 200);
    CHECK(r[5].body == kRootBody);
    for (std::size_t i = 0; i < r.size(); ++i) {
        INFO("response " << i);
        check_common_headers(r[i], expect[i]);
    }
}

TEST_CASE("keep-alive serves 256 concurrent connections", "[conformance][connections]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        constexpr std::size_t kConnections = 256;
        std::vector<Connection> conns;
        conns.reserve(kConnections);
        // Open all, then send on all, then read all: the server holds every
        // connection at once.
        for (std::size_t i = 0; i < kConnections; ++i)
            conns.push_back(connect(*server));
        for (auto& c : conns)
            c.send(make_request("GET", "/plaintext"));
        for (std::size_t i = 0; i < kConnections; ++i) {
            INFO("connection " << i);
            check_endpoint(conns[i].read_response(), "/plaintext");
        }
        // A second request on each proves every connection was kept alive.
        for (auto& c : conns)
            c.send(make_request("GET", "/json"));
        for (std::size_t i = 0; i < kConnections; ++i) {
            INFO("connection " << i);
            const Response r = conns[i].read_response();
            check_endpoint(r, "/json");
            CHECK(r.keep_alive);
        }
    }
    fds.require_back();
}

TEST_CASE("http 1.0 request is answered and then closed", "[conformance][connections]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        const Response r = c.request("GET /plaintext HTTP/1.0\r\n\r\n");
        INFO(r.describe());
        check_endpoint(r, "/plaintext");
        check_common_headers(r);
        CHECK_FALSE(has_token(r.header("Connection").value_or(""), "keep-alive"));
        CHECK_FALSE(r.keep_alive);
        require_closed_cleanly(c);
    }
    fds.require_back();
}

TEST_CASE("http 1.0 keep-alive request keeps the connection open", "[conformance][connections]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        for (int i = 0; i < 3; ++i) {
            INFO("request " << i);
            const Response r = c.request(
                "GET /json HTTP/1.0\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n");
            INFO(r.describe());
            check_endpoint(r, "/json");
            check_common_headers(r);
            // An HTTP/1.0 client keeps the connection only when the response says so.
            CHECK(has_token(r.header("Connection").value_or(""), "keep-alive"));
            CHECK(r.keep_alive);
        }
        // Without keep-alive the next HTTP/1.0 request ends the connection.
        check_endpoint(c.request("GET /plaintext HTTP/1.0\r\nHost: localhost\r\n\r\n"),
                       "/plaintext");
        require_closed_cleanly(c);
    }
    fds.require_back();
}

TEST_CASE("connection close is honoured and what follows is not answered",
          "[conformance][connections]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        c.send(make_request("GET", "/plaintext", "Connection: close\r\n") +
               make_request("GET", "/json"));
        const Response r = c.read_response();
        INFO(r.describe());
        check_endpoint(r, "/plaintext");
        check_common_headers(r);
        CHECK(has_token(r.header("Connection").value_or(""), "close"));
        CHECK_FALSE(r.keep_alive);
        require_closed_cleanly(c);
    }
    {
        // Case-insensitive token, on the one request of the connection.
        Connection c = connect(*server);
        const Response r = c.request(make_request("GET", "/json", "connection: CLOSE\r\n"));
        check_endpoint(r, "/json");
        CHECK(has_token(r.header("Connection").value_or(""), "close"));
        require_closed_cleanly(c);
    }
    fds.require_back();
}

TEST_CASE("malformed request gets 400 and the connection is closed", "[conformance][connections]") {
    struct Case {
        const char* what;
        const char* bytes;
    };
    const auto bad =
        GENERATE(Case{"header line without a colon",
                      "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nNo-Colon-Here\r\n\r\n"},
                 Case{"space inside the request target",
                      "GET /plain text HTTP/1.1\r\nHost: localhost\r\n\r\n"},
                 Case{"non-numeric Content-Length",
                      "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n"},
                 Case{"two different Content-Length fields",
                      "POST /plaintext HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n"
                      "Content-Length: 2\r\n\r\nab"},
                 Case{"space before the header colon",
                      "GET /plaintext HTTP/1.1\r\nHost : localhost\r\n\r\n"},
                 Case{"binary garbage", "\x01\x02\x03garbage\r\n\r\n"});
    INFO("malformed request: " << bad.what);
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        const Response r = c.request(bad.bytes);
        INFO(r.describe());
        CHECK(r.status == 400);
        check_common_headers(r);
        CHECK(has_token(r.header("Connection").value_or(""), "close"));
        require_closed_cleanly(c);
    }
    {
        // The server goes on answering other connections.
        Connection c = connect(*server);
        check_endpoint(c.request(make_request("GET", "/plaintext")), "/plaintext");
    }
    fds.require_back();
}

TEST_CASE("malformed request after a good one in the same write gets 400 after the 200",
          "[conformance][connections]") {
    auto server = start_server();
    Connection c = connect(*server);
    c.send(make_request("GET", "/json") + "GET /plaintext HTTP/1.1\r\nBad Header\r\n\r\n" +
           make_request("GET", "/plaintext"));
    check_endpoint(c.read_response(), "/json");
    const Response r = c.read_response();
    INFO(r.describe());
    CHECK(r.status == 400);
    CHECK(has_token(r.header("Connection").value_or(""), "close"));
    require_closed_cleanly(c);
}

TEST_CASE("request split into single bytes is answered", "[conformance][connections]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        // Two pipelined requests, one byte per write; TCP_NODELAY and a short
        // pause make each byte its own segment, so the server reads them apart.
        const std::string bytes = make_request("GET", "/plaintext") + make_request("GET", "/json");
        for (const char ch : bytes) {
            c.send(std::string_view(&ch, 1));
            std::this_thread::sleep_for(1ms);
        }
        const std::vector<Response> r = c.read_responses(2);
        check_endpoint(r[0], "/plaintext");
        check_endpoint(r[1], "/json");
        // Split at every point of the head once more, in two writes each time.
        const std::string one = make_request("GET", "/json");
        for (std::size_t cut = 1; cut < one.size(); cut += 5) {
            INFO("split after byte " << cut);
            c.send(std::string_view(one).substr(0, cut));
            std::this_thread::sleep_for(1ms);
            c.send(std::string_view(one).substr(cut));
            check_endpoint(c.read_response(), "/json");
        }
    }
    fds.require_back();
}

TEST_CASE("half-closed client still gets its response", "[conformance][connections]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        c.send(make_request("GET", "/plaintext") + make_request("GET", "/json"));
        c.shutdown_write();
        const std::vector<Response> r = c.read_responses(2);
        check_endpoint(r[0], "/plaintext");
        check_endpoint(r[1], "/json");
        require_closed_cleanly(c);
    }
    fds.require_back();
}

TEST_CASE("descriptors return to baseline after clients close", "[conformance][connections]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    INFO("baseline: " << fds.count() << " descriptors");
    {
        // Keep-alive connections the client closes after a response.
        std::vector<Connection> conns;
        for (int i = 0; i < 32; ++i) {
            conns.push_back(connect(*server));
            check_endpoint(conns.back().request(make_request("GET", "/plaintext")), "/plaintext");
        }
        // Connected and closed without a byte.
        for (int i = 0; i < 8; ++i)
            Connection idle = connect(*server);
        // Closed in the middle of a request head, and in the middle of a body.
        for (int i = 0; i < 8; ++i) {
            Connection c = connect(*server);
            c.send("GET /plaintext HTTP/1.1\r\nHost: loc");
        }
        for (int i = 0; i < 8; ++i) {
            Connection c = connect(*server);
            c.send(make_request("POST", "/json", "Content-Length: 100\r\n") + "partial");
        }
        // Aborted with a reset after sending requests whose responses are not read.
        for (int i = 0; i < 8; ++i) {
            Connection c = connect(*server);
            c.send(make_request("GET", "/json") + make_request("GET", "/json"));
            c.abort();
        }
        // Closed by the server: Connection: close and a malformed request.
        for (int i = 0; i < 8; ++i) {
            Connection c = connect(*server);
            c.request(make_request("GET", "/plaintext", "Connection: close\r\n"));
            Connection bad = connect(*server);
            CHECK(bad.request("BAD\x01 / HTTP/1.1\r\n\r\n").status == 400);
        }
    }
    fds.require_back();
    // And the server still answers.
    Connection c = connect(*server);
    check_endpoint(c.request(make_request("GET", "/plaintext")), "/plaintext");
}
