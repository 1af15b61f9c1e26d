// --engine: what each choice runs with, reported as config.engine; auto falls
// back to epoll (silently) where io_uring is refused, and uring asked for
// explicitly there exits 1 saying why. io_uring is refused by running loadgen
// under sm_deny_io_uring (tests/conformance/deny_io_uring.cpp), a seccomp
// launcher that denies io_uring_setup as Docker's default profile does.
// These cases pass --engine themselves: ctest runs them once, not per engine.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "integration_support.hpp"

using namespace sm::test;
using namespace sm::test::loadgen;

namespace {

std::string launcher_or_fail() {
    const std::string deny = deny_io_uring_launcher();
    if (deny.empty())
        FAIL("no sm_deny_io_uring launcher: build it, or set SM_DENY_IO_URING (run through ctest)");
    // The launcher itself leaves everything else alone.
    const RunResult ok = run_to_exit(deny, {"/bin/true"}, 5s);
    INFO("launcher with /bin/true: " << ok.status.describe() << "\n" << ok.err);
    REQUIRE(ok.status.clean());
    return deny;
}

}  // namespace

TEST_CASE("engine each choice reports the engine it ran with", "[loadgen][engine]") {
    auto server = start_epoll();
    const std::string url = url_of(*server, "/plaintext");
    const std::vector<std::string> load = {"-t1", "-c2", "-d", "300ms", url};

    const auto with = [&](const std::string& engine) {
        std::vector<std::string> args = {"--engine", engine};
        args.insert(args.end(), load.begin(), load.end());
        return run_loadgen_under("", args);
    };

    const Run epoll = with("epoll");
    {
        INFO(epoll.describe());
        REQUIRE(epoll.exited_with(0));
        check_consistency(epoll.json());
        CHECK(epoll.json().string("/config/engine") == "epoll");
        CHECK(epoll.json().count("/requests") > 0);
        CHECK(epoll.total_errors() == 0);
    }

    // uring works here or says why not; auto takes it exactly when it works.
    const Run uring = with("uring");
    const bool uring_works = uring.exited_with(0);
    {
        INFO(uring.describe());
        if (uring_works) {
            check_consistency(uring.json());
            CHECK(uring.json().string("/config/engine") == "uring");
            CHECK(uring.json().count("/requests") > 0);
            CHECK(uring.total_errors() == 0);
        } else {
            CHECK(uring.exited_with(1));
            CHECK_THAT(uring.result.err, Catch::Matchers::Contains("io_uring"));
        }
    }

    const Run automatic = with("auto");
    INFO(automatic.describe());
    REQUIRE(automatic.exited_with(0));
    check_consistency(automatic.json());
    CHECK(automatic.json().string("/config/engine") == (uring_works ? "uring" : "epoll"));
    // Falling back is silent.
    CHECK(automatic.result.err.find("io_uring") == std::string::npos);
}

TEST_CASE("engine auto falls back to epoll when a seccomp filter denies io_uring",
          "[loadgen][engine]") {
    const std::string deny = launcher_or_fail();
    auto server = start_epoll();
    const Run run = run_loadgen_under(
        deny, {"--engine", "auto", "-t1", "-c2", "-d", "300ms", url_of(*server, "/plaintext")});
    INFO(run.describe());
    REQUIRE(run.exited_with(0));
    check_consistency(run.json());
    CHECK(run.json().string("/config/engine") == "epoll");
    CHECK(run.json().count("/requests") > 0);
    CHECK(run.total_errors() == 0);
    CHECK(run.result.err.find("io_uring") == std::string::npos);
    CHECK(has_line_starting(run.result.out, "Requests/sec:"));

    // The default is auto.
    const Run by_default =
        run_loadgen_under(deny, {"-t1", "-c1", "-d", "200ms", url_of(*server, "/plaintext")});
    INFO(by_default.describe());
    REQUIRE(by_default.exited_with(0));
    CHECK(by_default.json().string("/config/engine") == "epoll");
}

TEST_CASE("engine uring exits 1 saying why when a seccomp filter denies io_uring",
          "[loadgen][engine]") {
    const std::string deny = launcher_or_fail();
    auto server = start_epoll();
    const Run run = run_loadgen_under(
        deny, {"--engine", "uring", "-t1", "-c2", "-d", "300ms", url_of(*server, "/plaintext")});
    INFO(run.describe());
    CHECK_FALSE(run.result.status.timed_out);
    CHECK(run.exited_with(1));
    // One clear line: what was asked, what failed, why, and the way out.
    CHECK_THAT(run.result.err, Catch::Matchers::Contains("--engine uring"));
    CHECK_THAT(run.result.err, Catch::Matchers::Contains("io_uring_setup"));
    CHECK_THAT(run.result.err, Catch::Matchers::Contains("Operation not permitted"));
    CHECK_THAT(run.result.err, Catch::Matchers::Contains("seccomp"));
    CHECK_THAT(run.result.err, Catch::Matchers::Contains("--engine epoll"));
    // Nothing was run: no summary, no report.
    CHECK_FALSE(has_line_starting(run.result.out, "Requests/sec:"));
    CHECK(run.json_text.empty());
}

TEST_CASE("engine a value that is not an engine exits 2", "[loadgen][engine]") {
    const RefusingPort port;
    const RunResult r = run_to_exit(
        loadgen_binary(),
        {"--engine", "kqueue", "-t1", "-c1", "-d", "1s", url_of("127.0.0.1", port.port(), "/")},
        10s);
    INFO("status: " << r.status.describe() << "\n--- stderr ---\n" << r.err);
    CHECK(r.status.exited);
    CHECK(r.status.code == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains("--engine"));
}
