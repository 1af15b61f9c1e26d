// How a run ends: on time, or early with a clear failure. Nothing listening
// (exit 1, "cannot connect"), the server killed mid-run (exit 1,
// ended "server_gone", well before the duration), bad arguments (exit 2),
// --help (exit 0), and SIGINT/SIGTERM (exit 130 with the results so far).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "integration_support.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::loadgen;

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return s;
}

// Waits (bounded) until loadgen has its `connections` connections open on the
// server (one listener, so that many sockets more), so that a signal or a
// kill lands in the middle of the run.
void wait_until_loaded(ServerProcess& server, std::size_t connections) {
    std::string fds;
    const bool loaded = eventually(
        [&] {
            fds = server.describe_fds();
            std::size_t sockets = 0;
            for (std::size_t at = fds.find("socket:"); at != std::string::npos;
                 at = fds.find("socket:", at + 1))
                ++sockets;
            return sockets >= 1 + connections;
        },
        5s, 10ms);
    INFO("server descriptors:\n" << fds);
    REQUIRE(loaded);
}

}  // namespace

TEST_CASE("endings nothing listening exits 1 saying it cannot connect", "[loadgen][endings]") {
    const RefusingPort port;
    const std::string url = url_of("127.0.0.1", port.port(), "/plaintext");
    const Run run = run_loadgen({"-t1", "-c2", "-d", "1s", url}, 20s);
    INFO(run.describe());
    // Bounded: run_loadgen kills it after 20 s, and timed_out then fails this.
    CHECK_FALSE(run.result.status.timed_out);
    CHECK(run.exited_with(1));
    CHECK_THAT(run.result.err, Catch::Matchers::Contains("cannot connect"));
}

TEST_CASE("endings server killed mid-run: server_gone well before the duration",
          "[loadgen][endings]") {
    auto server = start_epoll();
    BackgroundLoadgen loadgen({"-t1", "-c4", "-d", "10s", url_of(*server, "/plaintext")});
    wait_until_loaded(*server, 4);
    // About a second of load, so there are results to keep.
    std::this_thread::sleep_for(1s);
    const ExitStatus killed = server->stop(SIGKILL, 5s);
    INFO("server " << killed.describe());

    // Gone after 2 s of failing connects (plus a backoff step): it must end
    // by itself long before the 10 s asked for. Waiting at most 7 s more
    // keeps the whole run below 10 s.
    const Run run = loadgen.finish(7s);
    INFO(run.describe());
    CHECK_FALSE(run.result.status.timed_out);
    CHECK(run.exited_with(1));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.string("/ended") == "server_gone");
    REQUIRE(r.has("/message"));
    REQUIRE_FALSE(r.is_null("/message"));
    const std::string message = r.string("/message");
    CHECK_FALSE(message.empty());
    // The message is printed too, and so are the results so far.
    CHECK_THAT(run.result.out + run.result.err, Catch::Matchers::Contains(message));
    CHECK(r.count("/requests") > 0);
    CHECK(r.number("/duration_s") < 10.0);
    CHECK(r.count("/errors/connect") > 0);
    CHECK(has_line_starting(run.result.out, "Requests/sec:"));
}

TEST_CASE("endings bad arguments exit 2 with a message", "[loadgen][endings]") {
    struct Case {
        const char* what;
        std::vector<std::string> args;
        const char* mentions;  // the message names the culprit (lower case)
    };
    // Any URL points at a port that refuses, so a loadgen that wrongly starts
    // loads nothing.
    const RefusingPort port;
    const std::string url = url_of("127.0.0.1", port.port(), "/plaintext");
    const std::string https = "https://127.0.0.1:" + std::to_string(port.port()) + "/";
    const auto c = GENERATE_COPY(
        Case{"no URL", {"-t1", "-c1", "-d", "1s"}, "url"},
        Case{"an https URL", {"-t1", "-c1", "-d", "1s", https}, "https"},
        Case{"fewer connections than threads",
             {"-c", "1", "-t", "2", "-d", "1s", url},
             "connections"},
        Case{"a duration that is not one", {"-t1", "-c1", "--duration", "abc", url}, "abc"});
    const RunResult r = run_to_exit(loadgen_binary(), c.args, 10s);
    INFO(c.what << "\nstatus: " << r.status.describe() << "\n--- stdout ---\n"
                << r.out << "--- stderr ---\n"
                << r.err);
    CHECK(r.status.exited);
    CHECK(r.status.code == 2);
    CHECK_FALSE(r.err.empty());
    CHECK_THAT(lower(r.err), Catch::Matchers::Contains(c.mentions));
    CHECK_FALSE(has_line_starting(r.out, "Requests/sec:"));
}

TEST_CASE("endings help exits 0 and lists the options", "[loadgen][endings]") {
    const RunResult r = run_to_exit(loadgen_binary(), {"--help"}, 10s);
    INFO("status: " << r.status.describe() << "\n--- stdout ---\n"
                    << r.out << "--- stderr ---\n"
                    << r.err);
    CHECK(r.status.clean());
    for (const char* option :
         {"--connections", "--threads", "--duration", "--warmup", "--pipeline", "--rate",
          "--timeout", "--header", "--method", "--body", "--expect-body", "--expect-json", "--json",
          "--cpus", "--quiet", "--engine"}) {
        INFO("option " << option);
        CHECK_THAT(r.out, Catch::Matchers::Contains(option));
    }
}

TEST_CASE("endings a signal mid-run exits 130 with the results so far", "[loadgen][endings]") {
    const int sig = GENERATE(SIGINT, SIGTERM);
    INFO("signal " << sig);
    auto server = start_epoll();
    BackgroundLoadgen loadgen({"-t1", "-c4", "-d", "10s", url_of(*server, "/plaintext")});
    wait_until_loaded(*server, 4);
    std::this_thread::sleep_for(300ms);
    loadgen.process().signal(sig);
    const Run run = loadgen.finish(7s);
    INFO(run.describe());
    CHECK_FALSE(run.result.status.timed_out);
    CHECK(run.exited_with(130));
    // The summary is printed.
    CHECK(has_line_starting(run.result.out, "Requests/sec:"));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.string("/ended") == "interrupted");
    CHECK(r.count("/requests") > 0);
    CHECK(r.number("/duration_s") < 10.0);
    CHECK(server->running());
}
