// runtime::AcceptGate: whether a thread may accept the next connection, and
// when to look again. Time is explicit; the log lines are read from stderr
// (capture_log), in the exact format the README and operators grep for.
#include <catch2/catch.hpp>

#include <cerrno>
#include <string>
#include <thread>

#include "capture.hpp"
#include "runtime/accept_gate.hpp"
#include "runtime/connection_limit.hpp"
#include "runtime/tuning.hpp"
#include "runtime_test_support.hpp"

using sm::runtime::AcceptError;
using sm::runtime::AcceptGate;
using sm::runtime::Clock;
using sm::runtime::ConnectionLimit;
using sm::runtime::kAcceptPause;
using sm::runtime::kLimitPause;
using sm::test::at;
using sm::test::capture_log;

namespace {

constexpr const char* kLimitLine =
    "test: --max-connections 2 reached: new connections wait in the backlog";

}  // namespace

TEST_CASE("accept_gate try_acquire takes slots up to the limit, then closes", "[accept_gate]") {
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    CHECK(gate.open());
    CHECK(gate.retry_at() == Clock::time_point::max());
    const std::string log = capture_log([&] {
        CHECK(gate.try_acquire(at(0)));
        CHECK(gate.try_acquire(at(0)));
        CHECK(gate.open());
        CHECK(gate.budget_spent());
        CHECK_FALSE(gate.try_acquire(at(3)));
    });
    CHECK(limit.open() == 2);
    CHECK_FALSE(gate.open());
    CHECK(gate.at_limit());
    // It looks again after kLimitPause, or as soon as a slot frees.
    CHECK(gate.retry_at() == at(3) + kLimitPause);
    CHECK_FALSE(gate.reopen_due(at(3)));
    CHECK(log == std::string(kLimitLine) + "\n");
}

TEST_CASE("accept_gate at the limit logs once per second and counts the rest", "[accept_gate]") {
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    REQUIRE(gate.try_acquire(at(0)));
    const std::string log = capture_log([&] {
        CHECK_FALSE(gate.try_acquire(at(0)));  // logged
        // While closed at the limit, asking again is not another event
        // (only the retry moves: kLimitPause after the last ask).
        CHECK_FALSE(gate.try_acquire(at(5)));
        CHECK(gate.retry_at() == at(5) + kLimitPause);
        // Each retry that finds the budget still spent closes it again:
        // suppressed within the second, and counted.
        for (int t = 20; t <= 60; t += 10) {
            REQUIRE(gate.reopen_due(at(t)));
            gate.reopen();
            CHECK_FALSE(gate.try_acquire(at(t)));
        }
        gate.reopen();
        CHECK_FALSE(gate.try_acquire(at(1000)));  // logged, with the count
        gate.reopen();
        CHECK_FALSE(gate.try_acquire(at(1010)));  // suppressed again
    });
    CHECK(log == std::string(kLimitLine) + "\n" + kLimitLine + " (5 more like this)\n");
}

TEST_CASE("accept_gate reopen_due once a slot frees, on this thread or another", "[accept_gate]") {
    ConnectionLimit limit(2);  // shared by two threads' gates, as serve() does
    AcceptGate mine(limit);
    AcceptGate theirs(limit);
    REQUIRE(mine.try_acquire(at(0)));
    REQUIRE(theirs.try_acquire(at(0)));
    capture_log([&] { CHECK_FALSE(mine.try_acquire(at(0))); });
    CHECK_FALSE(mine.reopen_due(at(1)));

    SECTION("released here") {
        mine.release();
        CHECK(mine.reopen_due(at(1)));  // at once, not at the retry time
    }
    SECTION("released by another thread") {
        std::thread([&] { theirs.release(); }).join();
        CHECK(mine.reopen_due(at(1)));
    }
    SECTION("not released: at the retry time, to look again") {
        CHECK_FALSE(mine.reopen_due(at(0) + kLimitPause - std::chrono::nanoseconds(1)));
        CHECK(mine.reopen_due(at(0) + kLimitPause));
    }
    mine.reopen();
    CHECK(mine.open());
    CHECK(mine.retry_at() == Clock::time_point::max());
}

TEST_CASE("accept_gate failed with EMFILE, ENFILE, ENOBUFS or ENOMEM pauses accepting",
          "[accept_gate]") {
    const int err = GENERATE(EMFILE, ENFILE, ENOBUFS, ENOMEM);
    CAPTURE(err);
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    capture_log([&] { CHECK(gate.failed(err, at(5)) == AcceptError::exhausted); });
    CHECK(limit.open() == 0);  // the slot taken for it is back
    CHECK_FALSE(gate.open());
    CHECK_FALSE(gate.at_limit());
    CHECK(gate.retry_at() == at(5) + kAcceptPause);
    // Slots are free, but more accepting cannot help: only time reopens it.
    CHECK_FALSE(gate.reopen_due(at(5)));
    CHECK_FALSE(gate.reopen_due(at(5) + kAcceptPause - std::chrono::nanoseconds(1)));
    CHECK(gate.reopen_due(at(5) + kAcceptPause));
    gate.reopen();
    CHECK(gate.open());
    CHECK(gate.try_acquire(at(106)));  // recovered
}

TEST_CASE("accept_gate logs the pause with the error and the connections open", "[accept_gate]") {
    ConnectionLimit limit(5);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    REQUIRE(gate.try_acquire(at(0)));
    REQUIRE(gate.try_acquire(at(0)));
    const std::string log = capture_log([&] {
        gate.failed(EMFILE, at(0));  // logged
        gate.reopen();
        REQUIRE(gate.try_acquire(at(100)));
        gate.failed(ENFILE, at(100));  // within the second: counted
        gate.reopen();
        REQUIRE(gate.try_acquire(at(1000)));
        gate.failed(EMFILE, at(1000));  // logged, with the count
    });
    CHECK(log ==
          "test: accept: Too many open files; pausing accepts for 100 ms (2 connections open)\n"
          "test: accept: Too many open files; pausing accepts for 100 ms (2 connections open)"
          " (1 more like this)\n");
}

TEST_CASE("accept_gate the limit and the pause are logged independently", "[accept_gate]") {
    // One rate limit per cause: a pause just logged must not hide that the
    // limit was then reached, nor the other way round.
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    const std::string log = capture_log([&] {
        REQUIRE(gate.try_acquire(at(0)));
        gate.failed(EMFILE, at(0));
        gate.reopen();
        REQUIRE(gate.try_acquire(at(100)));
        REQUIRE(gate.try_acquire(at(100)));
        CHECK_FALSE(gate.try_acquire(at(100)));
    });
    CHECK(log ==
          "test: accept: Too many open files; pausing accepts for 100 ms (0 connections open)\n" +
              std::string(kLimitLine) + "\n");
}

TEST_CASE("accept_gate EAGAIN means again and leaves the gate open", "[accept_gate]") {
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    const std::string log =
        capture_log([&] { CHECK(gate.failed(EAGAIN, at(0)) == AcceptError::again); });
    CHECK(log.empty());
    CHECK(gate.open());
    CHECK(limit.open() == 0);
    CHECK(gate.retry_at() == Clock::time_point::max());
}

TEST_CASE("accept_gate ECONNABORTED, EPROTO, EPERM and EINTR skip without closing",
          "[accept_gate]") {
    const int err = GENERATE(ECONNABORTED, EPROTO, EPERM, EINTR);
    CAPTURE(err);
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    const std::string log =
        capture_log([&] { CHECK(gate.failed(err, at(0)) == AcceptError::skip); });
    CHECK(log.empty());
    CHECK(gate.open());
    CHECK(limit.open() == 0);
    CHECK(gate.retry_at() == Clock::time_point::max());
}

TEST_CASE("accept_gate refused() classifies like failed() but keeps the slots", "[accept_gate]") {
    // server-uring's multishot accept reports errors without a slot taken.
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    CHECK(gate.refused(EAGAIN, at(0)) == AcceptError::again);
    CHECK(gate.refused(ECONNABORTED, at(0)) == AcceptError::skip);
    CHECK(limit.open() == 1);
    CHECK(gate.open());
    capture_log([&] { CHECK(gate.refused(EMFILE, at(0)) == AcceptError::exhausted); });
    CHECK(limit.open() == 1);
    CHECK_FALSE(gate.open());
    CHECK(gate.retry_at() == at(0) + kAcceptPause);
}

TEST_CASE("accept_gate refused while at the limit stays at the limit", "[accept_gate]") {
    ConnectionLimit limit(1);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    const std::string log = capture_log([&] {
        CHECK_FALSE(gate.try_acquire(at(0)));
        CHECK(gate.refused(EMFILE, at(2)) == AcceptError::exhausted);
    });
    // No pause: the limit's retry time stands, and a freed slot still
    // reopens the gate at once.
    CHECK(log == "test: --max-connections 1 reached: new connections wait in the backlog\n");
    CHECK(gate.at_limit());
    CHECK(gate.retry_at() == at(0) + kLimitPause);
    gate.release();
    CHECK(gate.reopen_due(at(3)));
}

TEST_CASE("accept_gate pause() closes the gate whatever the error", "[accept_gate]") {
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    const std::string log = capture_log([&] { gate.pause(EINVAL, at(0)); });
    CHECK(log ==
          "test: accept: Invalid argument; pausing accepts for 100 ms (0 connections open)\n");
    CHECK_FALSE(gate.open());
    CHECK_FALSE(gate.at_limit());
    CHECK(gate.retry_at() == at(0) + kAcceptPause);
}

TEST_CASE("accept_gate close_at_limit closes as try_acquire does at the limit", "[accept_gate]") {
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    REQUIRE(gate.try_acquire(at(0)));
    const std::string log = capture_log([&] { gate.close_at_limit(at(0)); });
    CHECK(log == std::string(kLimitLine) + "\n");
    CHECK(gate.at_limit());
    CHECK(gate.retry_at() == at(0) + kLimitPause);
    gate.release();
    CHECK(gate.reopen_due(at(0)));
}

TEST_CASE("accept_gate shut() never reopens", "[accept_gate]") {
    ConnectionLimit limit(1);
    AcceptGate gate(limit);
    const auto much_later = at(1'000'000'000);
    SECTION("from open") {
        gate.shut();
    }
    SECTION("from the limit, with the slot freed afterwards") {
        REQUIRE(gate.try_acquire(at(0)));
        capture_log([&] { CHECK_FALSE(gate.try_acquire(at(0))); });
        gate.shut();
        gate.release();
    }
    SECTION("from a pause") {
        capture_log([&] { gate.pause(EMFILE, at(0)); });
        gate.shut();
    }
    SECTION("with an accept error reported after it") {
        // server-uring: a multishot accept's last completion can arrive
        // after the listener was closed for the stop.
        gate.shut();
        const std::string log = capture_log([&] {
            CHECK(gate.refused(EMFILE, at(0)) == AcceptError::exhausted);
            gate.close_at_limit(at(0));
        });
        CHECK(log.empty());  // nothing is paused: accepting is over
    }
    CHECK_FALSE(gate.open());
    CHECK_FALSE(gate.at_limit());
    CHECK(gate.retry_at() == Clock::time_point::max());
    CHECK_FALSE(gate.reopen_due(at(0)));
    CHECK_FALSE(gate.reopen_due(much_later));
}
