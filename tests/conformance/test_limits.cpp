// Connection limits every model honours: --idle-timeout and --max-connections.
// (Request size limits are unit-tested on the session; the robustness suite
// checks them against the binaries.)
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
