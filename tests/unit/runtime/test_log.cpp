// runtime::log, RateLimit and RateLimitedLog: the one stderr format every
// model logs in, and the rate limit that keeps an error repeating per
// connection from flooding it. Time is explicit.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "capture.hpp"
#include "runtime/log.hpp"
#include "runtime_test_support.hpp"

using namespace std::chrono_literals;
using sm::runtime::RateLimit;
using sm::runtime::RateLimitedLog;
using sm::test::at;
using sm::test::capture_log;

TEST_CASE("log writes one line prefixed with the program name", "[log]") {
    const std::string out = sm::test::capture_stderr([] {
        sm::runtime::set_program_name("server-test");
        sm::runtime::log("something happened");
        sm::runtime::log("");
    });
    CHECK(out == "server-test: something happened\nserver-test: \n");
}

TEST_CASE("log RateLimit lets the first message through", "[log]") {
    // Whenever the clock's epoch was: a test's, or a machine booted a moment ago.
    RateLimit limit;
    CHECK(limit.allow(at(0)));
    RateLimit later;
    CHECK(later.allow(at(5'000'000)));
}

TEST_CASE("log RateLimit allows one message per interval and counts the others", "[log]") {
    RateLimit limit;  // one second
    CHECK(limit.allow(at(0)));
    CHECK(limit.take_suppressed() == 0);
    CHECK_FALSE(limit.allow(at(1)));
    CHECK_FALSE(limit.allow(at(999)));
    CHECK(limit.allow(at(1000)));  // a whole interval after the last one allowed
    CHECK(limit.take_suppressed() == 2);
    CHECK(limit.take_suppressed() == 0);  // taking resets the count
    CHECK_FALSE(limit.allow(at(1999)));
    CHECK(limit.allow(at(2500)));
    CHECK(limit.take_suppressed() == 1);
}

TEST_CASE("log RateLimit measures from the last message allowed, not the last one seen", "[log]") {
    // A message every 600 ms is let through every other time: suppressed
    // ones do not push the next allowed one further out.
    RateLimit limit;
    CHECK(limit.allow(at(0)));
    CHECK_FALSE(limit.allow(at(600)));
    CHECK(limit.allow(at(1200)));
    CHECK_FALSE(limit.allow(at(1800)));
    CHECK(limit.allow(at(2400)));
}

TEST_CASE("log RateLimit takes its interval", "[log]") {
    RateLimit limit(100ms);
    CHECK(limit.allow(at(0)));
    CHECK_FALSE(limit.allow(at(99)));
    CHECK(limit.allow(at(100)));
    CHECK(limit.take_suppressed() == 1);
}

TEST_CASE("log RateLimitedLog logs the count suppressed since the last line", "[log]") {
    RateLimitedLog line;
    int made = 0;
    auto make = [&] {
        ++made;
        return std::string("accept: out of luck");
    };
    const std::string out = capture_log([&] {
        line(at(0), make);
        line(at(10), make);
        line(at(20), make);
        line(at(1000), make);
        line(at(2000), make);
    });
    CHECK(out ==
          "test: accept: out of luck\n"
          "test: accept: out of luck (2 more like this)\n"
          "test: accept: out of luck\n");
    // The message is built only for the lines that are written.
    CHECK(made == 3);
}
