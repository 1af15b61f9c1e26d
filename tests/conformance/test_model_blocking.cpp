// server-blocking only: a thread per connection, bounded by --max-connections.
// At the limit a new connection waits in the listen backlog (its request
// unread), and is served as soon as a thread frees; nothing is refused or
// dropped and the server keeps running.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "conformance.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::conformance;

TEST_CASE("blocking at --max-connections new connections wait in the backlog", "[model-blocking]") {
    auto server = start_server({"--threads", "1", "--max-connections", "2"});
    const FdBaseline fds(*server);
    {
        // Two keep-alive connections hold both threads (each waits for its
        // next request in a blocking read).
        std::vector<Connection> held;
        for (int i = 0; i < 2; ++i) {
            held.push_back(connect(*server));
            REQUIRE(held.back().request(make_request("GET", "/plaintext")).status == 200);
        }
        REQUIRE(eventually(
            [&] {
                return server->stderr_text().find(
                           "all 2 connection threads busy (--max-connections 2)") !=
                       std::string::npos;
            },
            5s, 10ms));

        // A third is completed by the kernel but not accepted: its request
        // stays unread in the server side's receive queue.
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

        // Freeing a thread serves it.
        held.front().close();
        const Response r = third.read_response();
        CHECK(r.status == 200);
        CHECK(r.body == kJsonBody);
        // The other held connection still works.
        CHECK(held.back().request(make_request("GET", "/")).body == kRootBody);
    }
    fds.require_back();
}
