// runtime::AcceptGate: whether a thread may accept the next connection, and
// when to look again. Time is explicit; the log lines are read from stderr
// (capture_log), in the exact format the README and operators grep for. The
// accept errors are the platform's (errno, WSA errors: socket_support.hpp),
// so the cases run on every platform; the texts the lines quote are the
// platform's error_text(), which test_platform checks.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "capture.hpp"
#include "runtime/accept_gate.hpp"
#include "runtime/connection_limit.hpp"
#include "runtime/tuning.hpp"
#include "runtime_test_support.hpp"
#include "socket_support.hpp"

using sm::runtime::AcceptError;
using sm::runtime::AcceptGate;
using sm::runtime::Clock;
using sm::runtime::ConnectionLimit;
using sm::runtime::kAcceptPause;
using sm::runtime::kLimitPause;
using sm::test::at;
using sm::test::capture_log;
namespace errors = sm::runtime::test::errors;

namespace {

constexpr const char* kLimitLine =
    "test: --max-connections 2 reached: new connections wait in the backlog";

// The line a pause for `err` logs.
std::string pause_line(int err, int open) {
    return "test: accept: " + sm::runtime::error_text(err) + "; pausing accepts for 100 ms (" +
           std::to_string(open) + " connections open)";
}

// The line an error of no known kind logs.
std::string unknown_line(int err, int open) {
    return "test: accept: " + sm::runtime::error_text(err) +
           "; unexpected error, skipped: accepting goes on (" + std::to_string(open) +
           " connections open)";
}

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

TEST_CASE("accept_gate failed with descriptors or memory exhausted pauses accepting",
          "[accept_gate]") {
    // EMFILE, ENFILE, ENOBUFS, ENOMEM; WSAEMFILE, WSAENOBUFS, ERROR_NOT_ENOUGH_MEMORY.
    const int err = GENERATE(from_range(errors::kExhausted));
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
        gate.failed(errors::kTooManyFiles, at(0));  // logged
        gate.reopen();
        REQUIRE(gate.try_acquire(at(100)));
        gate.failed(errors::kNoBuffers, at(100));  // within the second: counted
        gate.reopen();
        REQUIRE(gate.try_acquire(at(1000)));
        gate.failed(errors::kTooManyFiles, at(1000));  // logged, with the count
    });
    CHECK(log == pause_line(errors::kTooManyFiles, 2) + "\n" +
                     pause_line(errors::kTooManyFiles, 2) + " (1 more like this)\n");
}

TEST_CASE("accept_gate the limit and the pause are logged independently", "[accept_gate]") {
    // One rate limit per cause: a pause just logged must not hide that the
    // limit was then reached, nor the other way round.
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    const std::string log = capture_log([&] {
        REQUIRE(gate.try_acquire(at(0)));
        gate.failed(errors::kTooManyFiles, at(0));
        gate.reopen();
        REQUIRE(gate.try_acquire(at(100)));
        REQUIRE(gate.try_acquire(at(100)));
        CHECK_FALSE(gate.try_acquire(at(100)));
    });
    CHECK(log == pause_line(errors::kTooManyFiles, 0) + "\n" + kLimitLine + "\n");
}

TEST_CASE("accept_gate would-block means again and leaves the gate open", "[accept_gate]") {
    const int err = GENERATE(from_range(errors::kAgain));  // EAGAIN; WSAEWOULDBLOCK
    CAPTURE(err);
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    const std::string log =
        capture_log([&] { CHECK(gate.failed(err, at(0)) == AcceptError::again); });
    CHECK(log.empty());
    CHECK(gate.open());
    CHECK(limit.open() == 0);
    CHECK(gate.retry_at() == Clock::time_point::max());
}

TEST_CASE("accept_gate a connection gone before it was accepted is skipped without closing",
          "[accept_gate]") {
    // ECONNABORTED, ECONNRESET, EPROTO, EPERM, EINTR, the network errors
    // pending on a new connection; WSAECONNRESET, WSAENOTCONN, ERROR_NETNAME_DELETED...
    // A burst of clients that reset at once must not close it, nor fill the log.
    const int err = GENERATE(from_range(errors::kSkip));
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

TEST_CASE("accept_gate an unknown error is logged and leaves the gate open", "[accept_gate]") {
    // EINVAL, EBADF, ENOTSOCK...; WSAEINVAL, WSAENOTSOCK...: not known to be
    // one client's, nor a shortage. Said once, and accepting goes on.
    const int err = GENERATE(from_range(errors::kUnknown));
    CAPTURE(err);
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    REQUIRE(gate.try_acquire(at(0)));
    const std::string log =
        capture_log([&] { CHECK(gate.failed(err, at(0)) == AcceptError::unknown); });
    CHECK(log == unknown_line(err, 1) + "\n");
    CHECK(gate.open());
    CHECK_FALSE(gate.at_limit());
    CHECK(limit.open() == 1);  // the slot taken for it is back
    CHECK(gate.retry_at() == Clock::time_point::max());
    CHECK(gate.try_acquire(at(0)));  // the next accept may go ahead at once
}

TEST_CASE("accept_gate unknown errors are logged once a second with the count", "[accept_gate]") {
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    const int err = errors::kInvalidArgument;
    const std::string log = capture_log([&] {
        for (int t = 0; t < 1000; t += 100)
            CHECK(gate.refused(err, at(t)) == AcceptError::unknown);  // 1 logged, 9 counted
        CHECK(gate.refused(err, at(1000)) == AcceptError::unknown);   // logged, with the count
    });
    CHECK(log == unknown_line(err, 0) + "\n" + unknown_line(err, 0) + " (9 more like this)\n");
    CHECK(gate.open());
}

TEST_CASE("accept_gate an unknown error, a pause and the limit are logged independently",
          "[accept_gate]") {
    // One rate limit per cause: an unknown error just logged must not hide
    // a pause, nor the other way round.
    ConnectionLimit limit(1);
    AcceptGate gate(limit);
    const std::string log = capture_log([&] {
        CHECK(gate.refused(errors::kInvalidArgument, at(0)) == AcceptError::unknown);
        CHECK(gate.refused(errors::kTooManyFiles, at(0)) == AcceptError::exhausted);
        gate.reopen();
        CHECK(gate.refused(errors::kInvalidArgument, at(10)) == AcceptError::unknown);  // counted
        REQUIRE(gate.try_acquire(at(10)));
        CHECK_FALSE(gate.try_acquire(at(10)));
    });
    CHECK(log == unknown_line(errors::kInvalidArgument, 0) + "\n" +
                     pause_line(errors::kTooManyFiles, 0) + "\n" +
                     "test: --max-connections 1 reached: new connections wait in the backlog\n");
}

TEST_CASE("accept_gate refused() classifies like failed() but keeps the slots", "[accept_gate]") {
    // server-uring's multishot accept reports errors without a slot taken.
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    REQUIRE(gate.try_acquire(at(0)));
    CHECK(gate.refused(errors::kWouldBlock, at(0)) == AcceptError::again);
    CHECK(gate.refused(errors::kConnectionAborted, at(0)) == AcceptError::skip);
    CHECK(limit.open() == 1);
    CHECK(gate.open());
    capture_log(
        [&] { CHECK(gate.refused(errors::kTooManyFiles, at(0)) == AcceptError::exhausted); });
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
        CHECK(gate.refused(errors::kTooManyFiles, at(2)) == AcceptError::exhausted);
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
    const std::string log = capture_log([&] { gate.pause(errors::kInvalidArgument, at(0)); });
    CHECK(log == pause_line(errors::kInvalidArgument, 0) + "\n");
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
        capture_log([&] { gate.pause(errors::kTooManyFiles, at(0)); });
        gate.shut();
    }
    SECTION("with an accept error reported after it") {
        // server-uring: a multishot accept's last completion can arrive
        // after the listener was closed for the stop.
        gate.shut();
        const std::string log = capture_log([&] {
            CHECK(gate.refused(errors::kTooManyFiles, at(0)) == AcceptError::exhausted);
            CHECK(gate.refused(errors::kInvalidArgument, at(0)) == AcceptError::unknown);
            gate.close_at_limit(at(0));
        });
        CHECK(log.empty());  // nothing is paused or worth saying: accepting is over
    }
    CHECK_FALSE(gate.open());
    CHECK_FALSE(gate.at_limit());
    CHECK(gate.retry_at() == Clock::time_point::max());
    CHECK_FALSE(gate.reopen_due(at(0)));
    CHECK_FALSE(gate.reopen_due(much_later));
}

// --- ParkedConnections: accepted past the budget, served first as slots free ---

namespace {

using Parked = sm::runtime::ParkedConnections<int>;

// What the model was asked to do, in order: "serve 7", "at limit".
struct Calls {
    std::vector<std::string> seen;
    auto serve() {
        return [this](int h) { seen.push_back("serve " + std::to_string(h)); };
    }
    auto at_limit() {
        return [this] { seen.push_back("at limit"); };
    }
};

}  // namespace

TEST_CASE("parked_connections take serves with a slot, and says when the last slot went",
          "[accept_gate][parked]") {
    ConnectionLimit limit(2);
    AcceptGate gate(limit);
    Parked parked;
    Calls calls;
    capture_log([&] {
        parked.take(gate, 1, at(0), calls.serve(), calls.at_limit());
        parked.take(gate, 2, at(0), calls.serve(), calls.at_limit());
    });
    CHECK(calls.seen == std::vector<std::string>{"serve 1", "serve 2", "at limit"});
    CHECK(limit.open() == 2);
    CHECK(parked.size() == 0);
}

TEST_CASE("parked_connections past the budget wait unserved and are served oldest first",
          "[accept_gate][parked]") {
    ConnectionLimit limit(1);
    AcceptGate gate(limit);
    Parked parked;
    Calls calls;
    const std::string log = capture_log([&] {
        parked.take(gate, 1, at(0), calls.serve(), calls.at_limit());
        // The model's accepts were posted ahead: two more complete anyway.
        parked.take(gate, 2, at(1), calls.serve(), calls.at_limit());
        parked.take(gate, 3, at(2), calls.serve(), calls.at_limit());
    });
    CHECK(calls.seen == std::vector<std::string>{"serve 1", "at limit", "at limit", "at limit"});
    CHECK(parked.size() == 2);
    CHECK_FALSE(gate.open());
    CHECK(log.find("--max-connections 1 reached") != std::string::npos);

    // No slot yet: they keep waiting, the gate stays closed.
    calls.seen.clear();
    CHECK(parked.resume(gate, at(20), calls.serve()) == Parked::Resumed::waiting);
    CHECK(calls.seen.empty());

    // One slot frees: the oldest is served; the budget is spent again, so
    // the gate does not reopen and the newest still waits.
    gate.release();
    CHECK(gate.reopen_due(at(21)));
    CHECK(parked.resume(gate, at(21), calls.serve()) == Parked::Resumed::waiting);
    CHECK(calls.seen == std::vector<std::string>{"serve 2"});
    CHECK(parked.size() == 1);

    gate.release();
    calls.seen.clear();
    CHECK(parked.resume(gate, at(40), calls.serve()) == Parked::Resumed::at_limit);
    CHECK(calls.seen == std::vector<std::string>{"serve 3"});
    CHECK(parked.size() == 0);

    // With a slot left after the parked ones, the gate reopens.
    gate.release();
    CHECK(parked.resume(gate, at(60), calls.serve()) == Parked::Resumed::reopened);
    CHECK(gate.open());
}

TEST_CASE("parked_connections a new connection queues behind parked ones even with a slot free",
          "[accept_gate][parked]") {
    ConnectionLimit limit(1);
    AcceptGate gate(limit);
    Parked parked;
    Calls calls;
    capture_log([&] {
        parked.take(gate, 1, at(0), calls.serve(), calls.at_limit());
        parked.take(gate, 2, at(0), calls.serve(), calls.at_limit());
        gate.release();  // 1 closed: a slot is free, but 2 came first
        parked.take(gate, 3, at(1), calls.serve(), calls.at_limit());
    });
    CHECK(parked.size() == 2);
    calls.seen.clear();
    CHECK(parked.resume(gate, at(2), calls.serve()) == Parked::Resumed::waiting);
    CHECK(calls.seen == std::vector<std::string>{"serve 2"});
}

TEST_CASE("parked_connections close_all closes each, none served", "[accept_gate][parked]") {
    ConnectionLimit limit(1);
    AcceptGate gate(limit);
    Parked parked;
    Calls calls;
    capture_log([&] {
        for (int h = 1; h <= 3; ++h)
            parked.take(gate, h, at(0), calls.serve(), calls.at_limit());
    });
    std::vector<int> closed;
    parked.close_all([&](int h) { closed.push_back(h); });
    CHECK(closed == std::vector<int>{2, 3});
    CHECK(parked.size() == 0);
    CHECK(limit.open() == 1);  // only the served one holds a slot
}
