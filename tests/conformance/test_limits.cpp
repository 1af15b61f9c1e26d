// Connection limits every model honours: --idle-timeout, --header-timeout and
// --max-connections.
// (Request size limits are unit-tested on the session; the robustness suite
// checks them against the binaries.)
#include <poll.h>

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "conformance.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::conformance;

TEST_CASE("limits --idle-timeout closes a keep-alive connection that waits too long",
          "[conformance][limits]") {
    auto server = start_server({"--threads", "1", "--idle-timeout", "0.3"});
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        REQUIRE(c.request(make_request("GET", "/plaintext")).status == 200);
        const auto closed = c.expect_closed(10s);
        INFO(closed.describe());
        CHECK(closed.how == Connection::End::eof);
        // A connection that keeps talking is not idle: requests spread over
        // longer than the timeout, each within it, are all answered.
        Connection busy = connect(*server);
        for (int i = 0; i < 6; ++i) {
            REQUIRE(busy.request(make_request("GET", "/json")).status == 200);
            std::this_thread::sleep_for(100ms);
        }
    }
    fds.require_back();
}

TEST_CASE("limits --idle-timeout also closes a connection that goes quiet inside a request head",
          "[conformance][limits]") {
    // --header-timeout bounds a head however busy it is; --idle-timeout still
    // bounds each silence within it. With the head deadline far off, the
    // idle timeout is what must close these.
    auto server = start_server({"--threads", "1", "--idle-timeout", "0.3", "--header-timeout", "60"});
    const FdBaseline fds(*server);
    {
        Connection first = connect(*server);
        first.send("GET /plaintext HTTP/1.1\r\nHo");
        Connection later = connect(*server);  // a head that starts after a response
        REQUIRE(later.request(make_request("GET", "/json")).status == 200);
        later.send("GET /json HT");
        for (Connection* c : {&first, &later}) {
            const auto closed = c->expect_closed(20s);
            INFO(closed.describe());
            CHECK(closed.how != Connection::End::timeout);
            CHECK(closed.unexpected.empty());
        }
    }
    fds.require_back();
}

TEST_CASE("limits at --max-connections a new connection waits in the backlog until one closes",
          "[conformance][limits]") {
    auto server = start_server({"--threads", "1", "--max-connections", "2"});
    const FdBaseline fds(*server);
    {
        std::vector<Connection> held;
        for (int i = 0; i < 2; ++i) {
            held.push_back(connect(*server));
            REQUIRE(held.back().request(make_request("GET", "/plaintext")).status == 200);
        }
        // The third is completed by the kernel but not accepted: its request
        // stays unread in the server side's receive queue (neither answered,
        // nor refused, nor reset).
        Connection third = connect(*server);
        const std::string request = make_request("GET", "/json");
        third.send(request);
        std::optional<TcpQueues> q;
        REQUIRE(eventually(
            [&] {
                q = tcp_queues(server->port(), third.local_port());
                return q && q->rx == request.size();
            },
            5s, 10ms));
        // Give a wrongly eager server time to answer anyway: it must not.
        std::this_thread::sleep_for(200ms);
        q = tcp_queues(server->port(), third.local_port());
        REQUIRE(q);
        CHECK(q->rx == request.size());

        held.front().close();
        const Response r = third.read_response();
        CHECK(r.status == 200);
        CHECK(r.body == kJsonBody);
        CHECK(held.back().request(make_request("GET", "/")).body == kRootBody);
    }
    fds.require_back();
}

namespace {

// Sends `bytes` one at a time, `gap` apart, until all are sent, `until`
// passes, or the server's answer is waiting to be read.
void trickle(Connection& c, std::string_view bytes, std::chrono::milliseconds gap,
             std::chrono::steady_clock::time_point until) {
    for (std::size_t i = 0; i < bytes.size() && std::chrono::steady_clock::now() < until; ++i) {
        pollfd p{c.fd(), POLLIN, 0};
        if (::poll(&p, 1, 0) != 0) return;
        c.send(bytes.substr(i, 1));
        std::this_thread::sleep_for(gap);
    }
}

}  // namespace

TEST_CASE("limits --header-timeout answers a head still trickling in at its deadline with 408",
          "[conformance][limits]") {
    // The deadline runs from the head's first byte; each byte arriving well
    // within --idle-timeout does not extend it (slowloris).
    auto server = start_server(
        {"--threads", "1", "--header-timeout", "0.5", "--idle-timeout", "30"});
    const FdBaseline fds(*server);
    {
        Connection slow = connect(*server);
        std::string endless = "GET /plaintext HTTP/1.1\r\nHost: localhost\r\n";
        for (int i = 0; i < 200; ++i)
            endless += "X-Trickle: " + std::to_string(i) + "\r\n";
        // Stops once the server's answer arrives.
        const auto started = std::chrono::steady_clock::now();
        trickle(slow, endless, 20ms, started + 10s);
        const Response r = slow.read_response();
        INFO(r.describe());
        CHECK(r.status == 408);
        CHECK(r.header("Connection") == "close");
        CHECK_THAT(r.body, Catch::Matchers::StartsWith("Request Timeout"));
        const auto closed = slow.expect_closed(10s);
        INFO(closed.describe());
        CHECK(closed.how == Connection::End::eof);

        // Still serving: a fresh connection is answered.
        Connection fresh = connect(*server);
        CHECK(fresh.request(make_request("GET", "/plaintext")).status == 200);
    }
    fds.require_back();
}

TEST_CASE("limits --header-timeout runs from the head's first byte, not from the last response",
          "[conformance][limits]") {
    auto server = start_server(
        {"--threads", "1", "--header-timeout", "0.5", "--idle-timeout", "30"});
    const FdBaseline fds(*server);
    {
        // Idle between requests for longer than the head deadline: only
        // --idle-timeout applies there, so the next request is answered.
        Connection c = connect(*server);
        REQUIRE(c.request(make_request("GET", "/plaintext")).status == 200);
        std::this_thread::sleep_for(1200ms);
        REQUIRE(c.request(make_request("GET", "/json")).status == 200);

        // A body may arrive slower than the head deadline (each part within
        // --idle-timeout): the deadline covers the head only.
        c.send("POST /plaintext HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\n\r\n");
        for (const char* part : {"a", "b", "c", "d"}) {
            std::this_thread::sleep_for(250ms);
            c.send(part);
        }
        CHECK(c.read_response().status == 405);

        // A response written, then half a head: the 408 follows the 200.
        c.send(make_request("GET", "/plaintext") + "GET /plain");
        const Response ok = c.read_response();
        CHECK(ok.status == 200);
        const Response late = c.read_response();
        INFO(late.describe());
        CHECK(late.status == 408);
        const auto closed = c.expect_closed(10s);
        INFO(closed.describe());
        CHECK(closed.how == Connection::End::eof);
    }
    fds.require_back();
}

TEST_CASE("limits --header-timeout starts afresh for each request when every read ends inside a head",
          "[conformance][limits]") {
    // Pipelined traffic often ends a read in the middle of the next request:
    // the connection is then inside a head after every read, yet each head is
    // new and quick. Its deadline is that head's own, not the first one's.
    auto server = start_server(
        {"--threads", "1", "--header-timeout", "0.3", "--idle-timeout", "30"});
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        const std::string request = make_request("GET", "/plaintext");
        const std::string first_half = request.substr(0, request.size() / 2);
        const std::string second_half = request.substr(request.size() / 2);
        c.send(first_half);
        const auto until = std::chrono::steady_clock::now() + 1500ms;
        int answered = 0;
        while (std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(50ms);
            c.send(second_half + first_half);  // ends one head, begins the next
            const Response r = c.read_response();
            INFO("after " << answered << " answers: " << r.describe());
            REQUIRE(r.status == 200);
            ++answered;
        }
        c.send(second_half);
        CHECK(c.read_response().status == 200);
        CHECK(answered >= 5);
    }
    fds.require_back();
}
