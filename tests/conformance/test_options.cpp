// The command line every model shares: the ready line, --threads, --help,
// and bad values rejected with exit code 2.
#include <catch2/catch.hpp>

#include <simdjson.h>

#include <regex>
#include <string>
#include <vector>

#include "conformance.hpp"

using namespace sm::test;
using namespace sm::test::conformance;

TEST_CASE("options port 0 prints one ready line with the chosen port", "[conformance][options]") {
    auto server = start_server();
    const std::regex ready(R"(listening on http://127\.0\.0\.1:([0-9]{1,5}) model=)" +
                           target().model + R"( threads=([1-9][0-9]*) mode=composed)");
    std::smatch m;
    INFO("ready line: \"" << server->ready_line() << "\"");
    REQUIRE(std::regex_match(server->ready_line(), m, ready));
    CHECK(std::stoul(m[1].str()) == server->port());
    CHECK(server->port() != 0);
    Connection c = connect(*server);
    CHECK(c.request(make_request("GET", "/plaintext")).status == 200);
    // Exactly one line: nothing more on stdout.
    CHECK(server->stdout_text().empty());
}

TEST_CASE("options threads 2 serves on every thread", "[conformance][options]") {
    auto server = start_server({"--threads", "2"});
    INFO("ready line: \"" << server->ready_line() << "\"");
    CHECK_THAT(server->ready_line(), Catch::Matchers::Contains(" threads=2 "));
    const FdBaseline fds(*server);
    {
        // Enough connections that SO_REUSEPORT's hash lands on both listeners.
        std::vector<Connection> conns;
        for (int i = 0; i < 32; ++i)
            conns.push_back(connect(*server));
        for (auto& c : conns)
            c.send(make_request("GET", "/plaintext"));
        for (auto& c : conns) {
            const Response r = c.read_response();
            CHECK(r.status == 200);
            CHECK(r.body == kPlaintextBody);
        }
    }
    fds.require_back();
}

TEST_CASE("options help exits 0 and lists the options", "[conformance][options]") {
    const RunResult r = run_to_exit(target().binary, {"--help"}, kExitGuard);
    INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.status.clean());
    CHECK(r.status.describe() == "exited with code 0");
    for (const char* option :
         {"--threads", "--port", "--address", "--mode", "--cpus", "--shutdown-timeout",
          "--idle-timeout", "--header-timeout", "--linger-timeout", "--max-connections",
          "--max-head-bytes", "--max-uri-bytes", "--max-header-count", "--max-body-bytes"}) {
        INFO("option " << option);
        CHECK_THAT(r.out, Catch::Matchers::Contains(option));
    }
}

// serve() takes the --help line from the list of models (cmake/Models.cmake
// writes it into runtime/models.hpp): it must say what servers/models.json
// says the model shows, without the file's `code` marks.
TEST_CASE("options help begins with what servers/models.json says the model shows",
          "[conformance][options]") {
    simdjson::dom::parser parser;
    simdjson::dom::element list;
    REQUIRE(parser.load(SM_MODELS_FILE).get(list) == simdjson::SUCCESS);
    std::string shows;
    for (simdjson::dom::element m : list["models"].get_array()) {
        if (std::string_view(m["name"].get_string()) == target().model)
            shows = std::string(std::string_view(m["shows"].get_string()));
    }
    INFO("model " << target().model << " in " << SM_MODELS_FILE);
    REQUIRE_FALSE(shows.empty());
    std::erase(shows, '`');
    const RunResult r = run_to_exit(target().binary, {"--help"}, kExitGuard);
    const std::string first = r.out.substr(0, r.out.find('\n'));
    CHECK(first == "server-" + target().model + ": " + shows);
}

TEST_CASE("options version exits 0", "[conformance][options]") {
    const RunResult r = run_to_exit(target().binary, {"--version"}, kExitGuard);
    INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.status.clean());
    CHECK_FALSE(r.out.empty());
}

TEST_CASE("options bad value exits 2 with an error", "[conformance][options]") {
    struct Case {
        std::vector<std::string> args;
        const char* mentions;  // the error names the culprit
    };
    // Every case binds 127.0.0.1 port 0 (unless the bad value is the port or
    // address itself), so a server that wrongly starts never takes a fixed port.
    const auto bad = GENERATE(
        Case{{"--threads", "0"}, "threads"}, Case{{"--threads", "many"}, "threads"},
        Case{{"--mode", "fast"}, "mode"}, Case{{"--backlog", "0"}, "backlog"},
        Case{{"--cpus", "x"}, "cpus"}, Case{{"--max-body-bytes", "lots"}, "max-body-bytes"},
        Case{{"--shutdown-timeout", "-1"}, "shutdown-timeout"},
        Case{{"--header-timeout", "0"}, "header-timeout"}, Case{{"--frobnicate"}, "frobnicate"});
    std::vector<std::string> args = {"--address", "127.0.0.1", "--port", "0"};
    args.insert(args.end(), bad.args.begin(), bad.args.end());
    const RunResult r = run_to_exit(target().binary, args, kExitGuard);
    std::string shown;
    for (const auto& a : bad.args)
        shown += a + " ";
    INFO("arguments: " << shown << "\nstatus: " << r.status.describe() << "\nstdout:\n"
                       << r.out << "\nstderr:\n"
                       << r.err);
    CHECK(r.status.exited);
    CHECK(r.status.code == 2);
    CHECK_FALSE(r.err.empty());
    CHECK_THAT(r.err, Catch::Matchers::Contains(bad.mentions));
    CHECK_THAT(r.out, !Catch::Matchers::Contains("listening on"));
}

TEST_CASE("options bad port exits 2 with an error", "[conformance][options]") {
    const auto port = GENERATE(as<std::string>{}, "70000", "-1", "http");
    const std::vector<std::string> args = {"--address", "127.0.0.1", "--port", port};
    const RunResult r = run_to_exit(target().binary, args, kExitGuard);
    INFO("--port " << port << "\nstatus: " << r.status.describe() << "\nstdout:\n"
                   << r.out << "\nstderr:\n"
                   << r.err);
    CHECK(r.status.exited);
    CHECK(r.status.code == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains("port"));
    CHECK_THAT(r.out, !Catch::Matchers::Contains("listening on"));
}

TEST_CASE("options address that is not an IP address exits 2 with an error",
          "[conformance][options]") {
    // --help promises "IPv4 or IPv6": anything else is a bad value, refused
    // like any other (exit 2), not a failure to start (exit 1).
    const auto address = GENERATE(as<std::string>{}, "not-an-address", "127.0.0.256", "::g");
    const std::vector<std::string> args = {"--address", address, "--port", "0"};
    const RunResult r = run_to_exit(target().binary, args, kExitGuard);
    INFO("--address " << address << "\nstatus: " << r.status.describe() << "\nstdout:\n"
                      << r.out << "\nstderr:\n"
                      << r.err);
    CHECK(r.status.exited);
    CHECK(r.status.code == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains("address"));
    CHECK_THAT(r.out, !Catch::Matchers::Contains("listening on"));
}
