// server-blocking only: a thread per connection, bounded by --max-connections.
// At the limit a new connection waits in the listen backlog (its request
// unread), and is served as soon as a thread frees; nothing is refused or
// dropped and the server keeps running. After a burst the pool shrinks back
// to --threads.
#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <string>
#include <thread>
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

namespace {

// The threads of process `pid` (/proc/<pid>/status).
std::size_t threads_of(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.starts_with("Threads:")) return std::stoul(line.substr(8));
    return 0;
}

}  // namespace

TEST_CASE("blocking the pool shrinks back to --threads once a burst of connections is gone",
          "[model-blocking]") {
    // Threads beyond --threads end after --spare-thread-timeout without a
    // connection; those within it stay.
    auto server = start_server({"--threads", "2", "--spare-thread-timeout", "1"});
    // The server says it listens before its pool starts; it accepts only
    // once the pool's --threads threads are there, so after one answer
    // the count is the one at rest (under a sanitizer the second thread
    // started after the first count: 3 threads at rest, then 4 for good).
    require_serving(*server);
    const std::size_t at_rest = threads_of(server->pid());
    REQUIRE(at_rest > 0);
    const FdBaseline fds(*server);
    for (int round = 0; round < 2; ++round) {
        INFO("round " << round);
        {
            // Sixteen connections open at once: a thread each.
            std::vector<Connection> burst;
            for (int i = 0; i < 16; ++i) {
                burst.push_back(connect(*server));
                REQUIRE(burst.back().request(make_request("GET", "/plaintext")).status == 200);
            }
            CHECK(threads_of(server->pid()) >= at_rest + 14);
        }
        std::size_t now = 0;
        const bool back = eventually(
            [&] {
                now = threads_of(server->pid());
                return now == at_rest;
            },
            20s, 50ms);
        INFO(now << " threads, " << at_rest << " at rest\n" << stderr_of(*server));
        REQUIRE(back);
        // And it stays at --threads: those do not end.
        std::this_thread::sleep_for(1500ms);
        CHECK(threads_of(server->pid()) == at_rest);
        require_serving(*server);
    }
    fds.require_back();
}
