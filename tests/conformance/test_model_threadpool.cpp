// server-threadpool only: the bounded hand-off queue between the reactor and
// the workers. When it is full the reactor waits for a slot (back-pressure
// into the listen backlog and the sockets); nothing is dropped or refused.
// And --batch-reactor: the reactor thread's scheduling policy.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
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

namespace {

// How many of the process's threads run under each scheduling policy
// (/proc/PID/task/TID/stat, field 41: 0 SCHED_OTHER, 3 SCHED_BATCH).
std::map<int, int> threads_by_policy(pid_t pid) {
    std::map<int, int> count;
    for (const auto& task : std::filesystem::directory_iterator(
             std::filesystem::path("/proc") / std::to_string(pid) / "task")) {
        std::ifstream in(task.path() / "stat");
        std::string stat;  // one line
        std::getline(in, stat);
        // The fields after the name, which is in parentheses and may hold spaces.
        std::istringstream rest(stat.substr(stat.rfind(')') + 2));
        std::vector<std::string> fields;
        for (std::string f; rest >> f;)
            fields.push_back(f);
        REQUIRE(fields.size() > 38);
        ++count[std::stoi(fields[38])];  // field 41 of the whole line; fields[0] is field 3
    }
    return count;
}

constexpr int kSchedOther = 0;
constexpr int kSchedBatch = 3;

}  // namespace

TEST_CASE("threadpool --batch-reactor schedules the reactor thread SCHED_BATCH, and 0 does not",
          "[model-threadpool]") {
    for (const char* setting : {"default", "1", "0"}) {
        std::vector<std::string> args = {"--threads", "3"};
        if (std::string(setting) != "default") args.insert(args.end(), {"--batch-reactor", setting});
        auto server = start_server(args);
        // Serving either way, pipelined.
        Connection c = connect(*server);
        c.send(make_request("GET", "/plaintext") + make_request("GET", "/json"));
        const auto responses = c.read_responses(2);
        REQUIRE(responses.size() == 2);
        CHECK(responses[0].body == kPlaintextBody);
        CHECK(responses[1].body == kJsonBody);
        const auto policies = threads_by_policy(server->pid());
        INFO("--batch-reactor " << setting);
        const bool batch = std::string(setting) != "0";
        // One reactor; the three workers (and any other thread) stay ordinary.
        CHECK(policies.count(kSchedBatch) == (batch ? 1U : 0U));
        if (batch) CHECK(policies.at(kSchedBatch) == 1);
        CHECK(policies.count(kSchedOther) == 1);
        if (policies.count(kSchedOther)) CHECK(policies.at(kSchedOther) >= 3);
    }
}

TEST_CASE("threadpool --batch-reactor takes only 0 or 1", "[model-threadpool]") {
    const RunResult r = run_to_exit(target().binary, {"--batch-reactor", "2"});
    CHECK(r.status.exited);
    CHECK(r.status.code == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains("--batch-reactor"));
}
