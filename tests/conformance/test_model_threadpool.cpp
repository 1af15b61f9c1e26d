// server-threadpool only: the bounded hand-off queue between the reactor and
// the workers. When it is full the reactor waits for a slot (back-pressure
// into the listen backlog and the sockets); nothing is dropped or refused.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "conformance.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::conformance;

TEST_CASE("threadpool a full hand-off queue makes the reactor wait and drops nothing",
          "[model-threadpool]") {
    // One worker and one slot: a burst from many connections fills the queue
    // the moment the reactor sees two of them ready at once.
    auto server = start_server({"--threads", "1", "--queue-size", "1"});
    const FdBaseline fds(*server);
    constexpr std::size_t kConnections = 200;
    constexpr std::size_t kDepth = 8;
    std::string burst;
    for (std::size_t i = 0; i < kDepth; ++i)
        burst += make_request("GET", i % 2 == 0 ? "/plaintext" : "/json");
    bool waited = false;
    // A burst normally suffices; a few more keep the test from depending on
    // the scheduler's mood (bounded).
    for (int attempt = 0; attempt < 5 && !waited; ++attempt) {
        std::vector<Connection> conns;
        conns.reserve(kConnections);
        for (std::size_t i = 0; i < kConnections; ++i)
            conns.push_back(connect(*server));
        for (auto& c : conns)
            c.send(burst);
        for (std::size_t i = 0; i < kConnections; ++i) {
            INFO("connection " << i);
            const auto responses = conns[i].read_responses(kDepth);
            for (std::size_t j = 0; j < kDepth; ++j) {
                REQUIRE(responses[j].status == 200);
                CHECK(responses[j].body == (j % 2 == 0 ? kPlaintextBody : kJsonBody));
            }
        }
        waited = eventually(
            [&] {
                return server->stderr_text().find("hand-off queue full (--queue-size 1)") !=
                       std::string::npos;
            },
            1s, 10ms);
    }
    INFO("stderr: " << server->stderr_text());
    CHECK(waited);
    fds.require_back();
}

TEST_CASE("threadpool --queue-size must be at least 1", "[model-threadpool]") {
    const RunResult r = run_to_exit(target().binary, {"--queue-size", "0"});
    CHECK(r.status.exited);
    CHECK(r.status.code == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains("--queue-size"));
}
