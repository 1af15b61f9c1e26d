// loadgen against the real server-epoll: closed loop, pipelining, body checks,
// status classes, open loop (--rate), warm-up, HEAD, JSON to stdout, IPv6 and
// the --latency table.
// Every run is short (at most a second of load) and bounded by run_loadgen's
// timeout; nothing here judges speed, only what is counted and reported.
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "integration_support.hpp"
#include "support/skip.hpp"

using namespace sm::test;
using namespace sm::test::loadgen;

namespace {

constexpr std::string_view kPlaintextBody = "Hello, World!";
constexpr std::string_view kJsonBody = R"({"message":"Hello, World!"})";

// Errors other than the classes named in `except` are all zero.
void check_no_errors(const Report& r, std::initializer_list<std::string_view> except = {}) {
    for (const auto c : kErrorClasses) {
        bool skip = false;
        for (const auto e : except)
            skip = skip || e == c;
        if (skip) continue;
        INFO("errors." << c);
        CHECK(r.count("/errors/" + std::string(c)) == 0);
    }
}

// A clean closed-loop run of `connections` connections: every response 2xx,
// no error, no reconnect, every connection still open at the end.
void check_clean(const Run& run, std::uint64_t connections) {
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.string("/ended") == "completed");
    CHECK(r.count("/requests") > 0);
    CHECK(r.count("/status/2xx") == r.count("/requests"));
    check_no_errors(r);
    CHECK(r.count("/connections/opened") == connections);
    CHECK(r.count("/connections/reconnects") == 0);
    CHECK(r.count("/connections/open_at_end") == connections);
    CHECK(r.count("/warmup/requests") == 0);
}

// Whether this machine can listen on ::1 (IPv6 may be disabled in a container).
bool ipv6_loopback_available() {
    const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_loopback;
    const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
}

}  // namespace

TEST_CASE("epoll closed loop 1s run is clean and fully reported", "[loadgen][epoll]") {
    auto server = start_epoll();
    const std::string url = url_of(*server, "/plaintext");
    const Run run = run_loadgen({"-t1", "-c8", "-d", "1s", url});
    check_clean(run, 8);
    INFO(run.describe());
    const Report& r = run.json();

    // The configuration as given.
    CHECK(r.string("/config/url") == url);
    CHECK(r.count("/config/connections") == 8);
    CHECK(r.count("/config/threads") == 1);
    CHECK(r.number("/config/duration_s") == Approx(1.0));
    CHECK(r.number("/config/warmup_s") == Approx(0.0));
    CHECK(r.count("/config/pipeline") == 1);
    CHECK(r.is_null("/config/rate"));
    CHECK(r.number("/config/timeout_s") == Approx(2.0));
    CHECK(r.string("/config/method") == "GET");
    CHECK(r.at("/config/headers").get_array().value().size() == 0);
    CHECK(r.count("/config/body_bytes") == 0);
    CHECK(r.is_null("/config/expect"));
    CHECK(r.is_null("/message"));
    bool url_in_command = false;
    const simdjson::dom::array command = r.at("/command").get_array().value();
    for (const simdjson::dom::element a : command)
        url_in_command = url_in_command || a.get_string().value() == url;
    CHECK(url_in_command);

    // The measured window is the duration asked for (a bound, not a speed).
    CHECK(r.number("/duration_s") >= 0.9);
    CHECK(r.number("/duration_s") <= 21.0);
    // Closed loop: latency from the write, nothing uncorrected.
    CHECK_FALSE(r.boolean("/latency/corrected"));
    CHECK(r.is_null("/latency_uncorrected"));
    CHECK(r.count("/latency/count") == r.count("/requests"));
    // "Hello, World!" responses: at least the body of every response was read.
    CHECK(r.count("/bytes_read") >= r.count("/requests") * kPlaintextBody.size());

    // The text summary, wrk-style, on stdout.
    const std::string& out = run.result.out;
    CHECK(has_line_starting(out, "Running "));
    CHECK_THAT(out, Catch::Matchers::Contains(url));
    CHECK(has_line_starting(out, "Latency"));
    CHECK_FALSE(has_line_starting(out, "Uncorrected"));
    CHECK(has_line_starting(out, "Status: 2xx"));
    CHECK(has_line_starting(out, "Errors: none"));
    CHECK(has_line_starting(out, "Client CPU:"));
    CHECK(has_line_starting(out, "Requests/sec:"));
    CHECK(has_line_starting(out, "Transfer/sec:"));
    CHECK_FALSE(has_line_starting(out, "Socket errors:"));
    CHECK_FALSE(has_line_starting(out, "Non-2xx or 3xx responses:"));

    CHECK(server->running());
}

TEST_CASE("epoll pipeline 16 run is clean", "[loadgen][epoll]") {
    auto server = start_epoll();
    const Run run =
        run_loadgen({"-t1", "-c8", "-d", "1s", "--pipeline", "16", url_of(*server, "/plaintext")});
    check_clean(run, 8);
    INFO(run.describe());
    CHECK(run.json().count("/config/pipeline") == 16);
}

TEST_CASE("epoll expect-body counts responses whose body differs", "[loadgen][epoll]") {
    struct Case {
        std::string expected;
        bool matches;
    };
    const auto c = GENERATE(Case{std::string(kPlaintextBody), true}, Case{"nope", false});
    auto server = start_epoll();
    const Run run = run_loadgen(
        {"-t1", "-c4", "-d", "500ms", "--expect-body", c.expected, url_of(*server, "/plaintext")});
    INFO("--expect-body '" << c.expected << "'\n" << run.describe());
    if (c.matches) {
        check_clean(run, 4);
    } else {
        CHECK(run.exited_with(0));
        const Report& r = run.json();
        check_consistency(r);
        // Every response is complete and 2xx, and every one is a body error.
        CHECK(r.count("/requests") > 0);
        CHECK(r.count("/status/2xx") == r.count("/requests"));
        CHECK(r.count("/errors/body") == r.count("/requests"));
        check_no_errors(r, {"body"});
        CHECK(r.has("/error_messages/body"));
        CHECK(has_line_starting(run.result.out, "Errors: body"));
    }
    const Report& r = run.json();
    CHECK(r.string("/config/expect/body") == c.expected);
}

TEST_CASE("epoll expect-json compares parsed documents", "[loadgen][epoll]") {
    struct Case {
        std::string expected;
        bool matches;
    };
    const auto c = GENERATE(Case{std::string(kJsonBody), true},
                            // Whitespace is ignored.
                            Case{"{ \"message\" :\n \"Hello, World!\" }", true},
                            Case{R"({"message":"Hello, World"})", false});
    auto server = start_epoll();
    const Run run = run_loadgen(
        {"-t1", "-c4", "-d", "500ms", "--expect-json", c.expected, url_of(*server, "/json")});
    INFO("--expect-json '" << c.expected << "'\n" << run.describe());
    if (c.matches) {
        check_clean(run, 4);
    } else {
        CHECK(run.exited_with(0));
        const Report& r = run.json();
        check_consistency(r);
        CHECK(r.count("/requests") > 0);
        CHECK(r.count("/status/2xx") == r.count("/requests"));
        CHECK(r.count("/errors/body") == r.count("/requests"));
        check_no_errors(r, {"body"});
    }
    CHECK(run.json().string("/config/expect/json") == c.expected);
}

TEST_CASE("epoll 404 path counts non_2xx and status 4xx", "[loadgen][epoll]") {
    auto server = start_epoll();
    const Run run = run_loadgen({"-t1", "-c4", "-d", "500ms", url_of(*server, "/no-such-path")});
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.string("/ended") == "completed");
    CHECK(r.count("/requests") > 0);
    CHECK(r.count("/status/4xx") == r.count("/requests"));
    CHECK(r.count("/status/2xx") == 0);
    CHECK(r.count("/errors/non_2xx") == r.count("/requests"));
    check_no_errors(r, {"non_2xx"});
    // A 404 keeps the connection: nothing is reopened.
    CHECK(r.count("/connections/reconnects") == 0);
    CHECK(has_line_starting(run.result.out, "Non-2xx or 3xx responses:"));
    CHECK(has_line_starting(run.result.out, "Errors: non_2xx"));
}

TEST_CASE("epoll open loop at 2000/s sends about the rate's requests", "[loadgen][epoll]") {
    auto server = start_epoll();
    const Run run =
        run_loadgen({"-t1", "-c8", "-d", "1s", "--rate", "2000", url_of(*server, "/plaintext")});
    check_clean(run, 8);
    INFO(run.describe());
    const Report& r = run.json();
    CHECK(r.number("/config/rate") == Approx(2000.0));
    // The schedule fixes the number of requests due in the window: a
    // correctness bound (a loop that ignores the rate sends far more), loose
    // enough for a slow machine.
    const std::uint64_t requests = r.count("/requests");
    CHECK(requests >= 1000);
    CHECK(requests <= 2200);
    CHECK(r.boolean("/latency/corrected"));
    REQUIRE_FALSE(r.is_null("/latency_uncorrected"));
    CHECK(r.count("/latency_uncorrected/count") == requests);
    CHECK(has_line_starting(run.result.out, "Uncorrected"));
}

TEST_CASE("epoll warm-up is reported apart", "[loadgen][epoll]") {
    auto server = start_epoll();
    const Run run = run_loadgen(
        {"-t1", "-c4", "-d", "500ms", "--warmup", "500ms", url_of(*server, "/plaintext")});
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.number("/config/warmup_s") == Approx(0.5));
    CHECK(r.number("/config/duration_s") == Approx(0.5));
    CHECK(r.count("/warmup/requests") > 0);
    CHECK(r.count("/warmup/errors") == 0);
    CHECK(r.count("/requests") > 0);
    CHECK(r.count("/status/2xx") == r.count("/requests"));
    CHECK(r.count("/latency/count") == r.count("/requests"));
    check_no_errors(r);
    // The window is the measured half only.
    CHECK(r.number("/duration_s") >= 0.45);
}

TEST_CASE("epoll --announce prints the schedule before the load, on the monotonic clock",
          "[loadgen][epoll]") {
    auto server = start_epoll();
    const auto mono_ns = [] {
        timespec ts{};
        ::clock_gettime(CLOCK_MONOTONIC, &ts);
        return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    };
    const std::int64_t before = mono_ns();
    const Run run = run_loadgen({"-t1", "-c2", "-d", "300ms", "--warmup", "200ms", "-q",
                                 "--announce", url_of(*server, "/plaintext")});
    const std::int64_t after = mono_ns();
    INFO(run.describe());
    CHECK(run.exited_with(0));
    long long start = 0, measure = 0, end = 0;
    REQUIRE(std::sscanf(run.result.out.c_str(),
                        "schedule monotonic_ns start=%lld measure=%lld end=%lld\n", &start,
                        &measure, &end) == 3);
    // The only line (-q), and the times are this machine's CLOCK_MONOTONIC:
    // inside the run, warm-up then window, as long as asked.
    CHECK(std::count(run.result.out.begin(), run.result.out.end(), '\n') == 1);
    CHECK(start > before);
    CHECK(end < after);
    CHECK(measure - start == 200'000'000);
    CHECK(end - measure == 300'000'000);
    check_no_errors(run.json());
}

TEST_CASE("epoll thousands of connections: the first answers come while the rest still open",
          "[loadgen][epoll]") {
    // loadgen used to connect every connection before its first wait (and
    // its first scan reopened all that were left): at ~15k connections here
    // that took longer than the run, which ended with no request and no
    // error. Connections now open 128 per round of the event loop.
    rlimit rl{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &rl) == 0);
    const std::uint64_t conns =
        std::min<std::uint64_t>(16000, rl.rlim_max > 256 ? rl.rlim_max - 200 : 56);
    auto server = start_epoll();
    const Run run = run_loadgen({"-t1", "-c", std::to_string(conns), "-d", "1s", "--timeout", "5s",
                                 url_of(*server, "/plaintext")},
                                60s);
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    CHECK(r.string("/ended") == "completed");
    CHECK(r.count("/requests") > 0);
    CHECK(r.count("/connections/opened") > 0);
    check_no_errors(r);
}

TEST_CASE("epoll HEAD responses are framed without bodies", "[loadgen][epoll]") {
    auto server = start_epoll();
    const Run run =
        run_loadgen({"-t1", "-c4", "-d", "500ms", "-m", "HEAD", url_of(*server, "/plaintext")});
    check_clean(run, 4);
    INFO(run.describe());
    CHECK(run.json().string("/config/method") == "HEAD");
}

TEST_CASE("epoll --json - writes JSON to stdout and the summary to stderr", "[loadgen][epoll]") {
    auto server = start_epoll();
    const std::vector<std::string> args =
        with_engine({"-t1", "-c2", "-d", "300ms", "--json", "-", url_of(*server, "/plaintext")});
    const RunResult run = run_to_exit(loadgen_binary(), args, 20s);
    INFO("status: " << run.status.describe() << "\n--- stdout ---\n"
                    << run.out << "--- stderr ---\n"
                    << run.err);
    CHECK(run.status.clean());
    const Report r(run.out);
    check_consistency(r);
    CHECK(r.count("/requests") > 0);
    CHECK(has_line_starting(run.err, "Requests/sec:"));
    CHECK_FALSE(has_line_starting(run.out, "Requests/sec:"));
}

TEST_CASE("epoll over IPv6 loopback", "[loadgen][epoll]") {
    if (!ipv6_loopback_available()) {
        exit_skipped("::1 is not available here: IPv6 not tested");
    }
    auto server = start_epoll("::1");
    const std::string url = url_of(*server, "/json");
    REQUIRE_THAT(url, Catch::Matchers::StartsWith("http://[::1]:"));
    const Run run = run_loadgen({"-t1", "-c2", "-d", "500ms", url});
    check_clean(run, 2);
    INFO(run.describe());
    CHECK(run.json().string("/config/url") == url);
}

TEST_CASE("epoll --latency prints a percentile table in place of the latency row",
          "[loadgen][epoll]") {
    struct Case {
        const char* what;
        std::vector<std::string> extra;
        bool open_loop;
    };
    const auto c =
        GENERATE(Case{"closed loop", {}, false}, Case{"open loop", {"--rate", "1000"}, true});
    auto server = start_epoll();
    std::vector<std::string> args = {"-t1", "-c2", "-d", "500ms", "--latency"};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    args.push_back(url_of(*server, "/plaintext"));
    const Run run = run_loadgen(args);
    INFO(c.what << "\n" << run.describe());
    CHECK(run.exited_with(0));
    check_consistency(run.json());
    const std::string& out = run.result.out;
    CHECK(has_line_starting(out, "Latency Distribution"));
    // wrk's rows ("     50%  351.20us"), one per percentile, then the maximum;
    // with --rate the uncorrected latency beside each.
    for (const char* row : {"50% ", "75% ", "90% ", "99% ", "99.9% ", "99.99% ", "max "}) {
        INFO("row " << row);
        CHECK(has_line_starting(out, row));
        const auto at = out.find(std::string(row));
        REQUIRE(at != std::string::npos);
        const std::string line = out.substr(at, out.find('\n', at) - at);
        std::size_t values = 0;
        for (std::size_t i = 0; i < line.size(); ++i)
            values += line[i] == 's' && (i + 1 == line.size() || line[i + 1] == ' ') ? 1 : 0;
        CHECK(values == (c.open_loop ? 2 : 1));
    }
    CHECK((out.find("uncorrected") != std::string::npos) == c.open_loop);
    CHECK(has_line_starting(out, "Uncorrected") == c.open_loop);
    // Not the row as well: the percentiles are printed once.
    CHECK(out.find("p50") == std::string::npos);
    CHECK(out.find("p99.99") == std::string::npos);
}
