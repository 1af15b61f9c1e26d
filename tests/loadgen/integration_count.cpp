// loadgen -n N: the run stops after N responses, exactly, however the load is
// shaped (connections, threads, --pipeline, --rate): no more than N requests
// reach the server after the warm-up (counted on the server's side), the
// warm-up's are reported apart, -d is then a time limit, requests lost to
// errors end the run too, and --announce says when the measured time began
// and ended.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "integration_support.hpp"

using namespace sm::test;
using namespace sm::test::loadgen;

namespace {

// A run -n stopped: every one of the N answered, nothing else counted (and
// the text summary says so, unless -q).
void check_exact(const Run& run, std::uint64_t n, bool quiet = false) {
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.string("/ended") == "completed");
    CHECK(r.string("/stopped_by") == "requests");
    CHECK(r.count("/config/requests") == n);
    CHECK(r.count("/requests") == n);
    CHECK(r.count("/sent") == n);
    CHECK(r.count("/status/2xx") == n);
    CHECK(run.total_errors() == 0);
    CHECK(r.number("/duration_s") > 0.0);
    if (!quiet) CHECK(has_line_starting(run.result.out, std::to_string(n) + " requests in "));
}

}  // namespace

TEST_CASE("count -n: exactly N responses and N requests at the server, any shape",
          "[loadgen][count]") {
    struct Case {
        const char* what;
        std::vector<std::string> shape;
    };
    const auto c =
        GENERATE(Case{"one connection", {"-t1", "-c1"}}, Case{"eight connections", {"-t1", "-c8"}},
                 Case{"two threads, seven connections", {"-t2", "-c7"}},
                 Case{"pipeline 16 on four connections", {"-t1", "-c4", "--pipeline", "16"}},
                 Case{"pipeline 7, two threads", {"-t2", "-c3", "--pipeline", "7"}});
    constexpr std::uint64_t kN = 1001;  // a multiple of no batch here
    MisbehavingServer server(MisbehavingServer::answering_ok());
    std::vector<std::string> args = c.shape;
    args.insert(args.end(), {"-n", std::to_string(kN), server.url("/plaintext")});
    const Run run = run_loadgen(args);
    INFO(c.what << "\n" << run.describe() << "server requests " << server.requests());
    check_exact(run, kN);
    const Report& r = run.json();
    // No time limit without -d.
    CHECK(r.is_null("/config/duration_s"));
    CHECK(server.requests() == kN);
}

TEST_CASE("count -n against server-epoll, closed and open loop", "[loadgen][count]") {
    struct Case {
        const char* what;
        std::vector<std::string> args;
    };
    const auto c = GENERATE(Case{"closed loop", {"-t2", "-c4", "-n", "2000"}},
                            Case{"open loop", {"-t1", "-c4", "-n", "300", "--rate", "1000"}});
    auto server = start_epoll();
    std::vector<std::string> args = c.args;
    args.push_back(url_of(*server, "/json"));
    const Run run = run_loadgen(args);
    INFO(c.what << "\n" << run.describe());
    const std::uint64_t n =
        std::stoull(args[std::find(args.begin(), args.end(), "-n") - args.begin() + 1]);
    check_exact(run, n);
    CHECK(run.json().count("/latency/count") == n);
}

TEST_CASE("count -n after a warm-up: the warm-up's responses are not counted", "[loadgen][count]") {
    MisbehavingServer server(MisbehavingServer::answering_ok());
    const Run run =
        run_loadgen({"-t1", "-c4", "--warmup", "300ms", "-n", "200", server.url("/plaintext")});
    INFO(run.describe() << "server requests " << server.requests());
    check_exact(run, 200);
    const Report& r = run.json();
    CHECK(r.count("/warmup/requests") > 0);
    // Every request the server saw is either one of the 200 or a warm-up one
    // (counted by when it was sent, so one answered after the warm-up ended
    // is still the warm-up's).
    CHECK(server.requests() == r.count("/warmup/requests") + 200);
}

TEST_CASE("count -n with -d: the time limit ends a run that cannot finish in it",
          "[loadgen][count]") {
    auto server = start_epoll();
    // 200/s for half a second: about 100 of the 100000 asked for.
    const Run run = run_loadgen({"-t1", "-c2", "-n", "100000", "-d", "500ms", "--rate", "200",
                                 url_of(*server, "/plaintext")});
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.string("/ended") == "completed");
    CHECK(r.string("/stopped_by") == "duration");
    CHECK(r.number("/config/duration_s") == Approx(0.5));
    CHECK(r.count("/requests") > 0);
    CHECK(r.count("/requests") < 100000);
    CHECK(has_line_starting(run.result.out, "Stopped by the time limit"));
}

TEST_CASE("count -n: requests lost to errors end the run too, none sent again",
          "[loadgen][count]") {
    // Three answers per connection, then half of the fourth and a close: the
    // fourth request of each connection is lost (a read error).
    MisbehavingServer server(MisbehavingServer::closing_mid_response(3));
    const Run run = run_loadgen({"-t1", "-c2", "-n", "100", server.url("/plaintext")});
    INFO(run.describe() << "server requests " << server.requests());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.string("/stopped_by") == "requests");
    CHECK(r.count("/sent") == 100);
    CHECK(server.requests() == 100);
    // One request in flight per connection (no pipelining): each read error
    // lost exactly one.
    CHECK(r.count("/errors/read") > 0);
    CHECK(r.count("/requests") + r.count("/errors/read") == 100);
    CHECK(has_line_starting(run.result.out, std::to_string(r.count("/errors/read")) +
                                                " of the 100 requests got no response"));
}

TEST_CASE("count -n --announce: the schedule with N, then the measured time", "[loadgen][count]") {
    struct Case {
        std::vector<std::string> extra;
        bool limited;
    };
    const auto c = GENERATE(Case{{}, false}, Case{{"-d", "5s"}, true});
    auto server = start_epoll();
    std::vector<std::string> args = {"-t1", "-c2",        "-n",       "500",
                                     "-q",  "--announce", "--warmup", "100ms"};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    args.push_back(url_of(*server, "/plaintext"));
    const Run run = run_loadgen(args);
    INFO(run.describe());
    CHECK(run.exited_with(0));
    long long start = 0, measure = 0, first = 0, last = 0, limit = 0;
    unsigned long long n = 0;
    char limit_text[32] = {};
    REQUIRE(std::sscanf(run.result.out.c_str(),
                        "schedule monotonic_ns start=%lld measure=%lld requests=%llu limit=%31s\n"
                        "measured monotonic_ns first=%lld last=%lld\n",
                        &start, &measure, &n, limit_text, &first, &last) == 6);
    CHECK(n == 500);
    CHECK(measure - start == 100'000'000);
    if (c.limited) {
        REQUIRE(std::sscanf(limit_text, "%lld", &limit) == 1);
        CHECK(limit - measure == 5'000'000'000);
    } else {
        CHECK(std::string(limit_text) == "none");
    }
    // The measured time runs from the first measured request to the 500th
    // response, and is the report's duration.
    CHECK(first >= measure);
    CHECK(last > first);
    const Report& r = run.json();
    CHECK(r.number("/duration_s") == Approx(static_cast<double>(last - first) / 1e9).margin(1e-6));
    // Nothing else on stdout (-q), and not the -d line bench/compare reads.
    CHECK(std::count(run.result.out.begin(), run.result.out.end(), '\n') == 2);
    CHECK(run.result.out.find(" end=") == std::string::npos);
    check_exact(run, 500, true);
}
