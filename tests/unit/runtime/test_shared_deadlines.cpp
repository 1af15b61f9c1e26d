// runtime::SharedDeadlines: a connection's idle, head and linger deadlines in
// atomics, for a connection whose owner changes threads (server-threadpool).
// The owner records progress; a sweeping thread asks due(). Time is explicit.
#include <catch2/catch.hpp>

#include <string>

#include "http/session.hpp"
#include "runtime/shared_deadlines.hpp"
#include "runtime_test_support.hpp"
#include "socket_support.hpp"

using namespace std::chrono_literals;
using Due = sm::runtime::SharedDeadlines::Due;
using sm::runtime::ServerOptions;
using sm::runtime::SharedDeadlines;
using sm::runtime::test::Received;
using sm::test::at;
using sm::test::feed;
using sm::test::kHeadStart;
using sm::test::kRequest;

namespace {

struct Fixture : sm::test::SessionFixture {
    SharedDeadlines d{at(0)};

    // A read at `now`, as the owner handles it (head timeout 30 ms).
    void read(std::string_view bytes, sm::runtime::Clock::time_point now) {
        d.touch(now);
        feed(session, bytes);
        d.track_head(session, now, 30ms);
    }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "shared_deadlines due() is nothing until the idle timeout, then close",
                 "[shared_deadlines]") {
    CHECK(d.due(at(99), 100ms) == Due::nothing);
    CHECK(d.due(at(100), 100ms) == Due::close);
    d.touch(at(50));
    CHECK(d.due(at(149), 100ms) == Due::nothing);
    CHECK(d.due(at(150), 100ms) == Due::close);
}

TEST_CASE_METHOD(Fixture, "shared_deadlines due() head once the request head is late",
                 "[shared_deadlines]") {
    read(kHeadStart, at(0));
    REQUIRE(session.in_head());
    CHECK_FALSE(d.head_due(at(29)));
    CHECK(d.due(at(29), 100ms) == Due::nothing);
    CHECK(d.head_due(at(30)));
    CHECK(d.due(at(30), 100ms) == Due::head);
    // Idle too long as well: closing wins over answering 408.
    CHECK(d.due(at(100), 100ms) == Due::close);
}

TEST_CASE_METHOD(Fixture, "shared_deadlines a head's deadline is set once per head",
                 "[shared_deadlines]") {
    // Slowloris: more bytes of the same head do not move its deadline.
    read(kHeadStart, at(0));
    read("st: x\r\n", at(20));
    CHECK(d.due(at(29), 100ms) == Due::nothing);
    CHECK(d.due(at(30), 100ms) == Due::head);

    SECTION("a pipelined new head begins in the read that ends the last") {
        read("\r\n" + std::string(kHeadStart), at(25));
        REQUIRE(session.in_head());
        CHECK(d.due(at(54), 100ms) == Due::nothing);
        CHECK(d.due(at(55), 100ms) == Due::head);
    }
    SECTION("a completed head clears it") {
        read("\r\n", at(25));
        REQUIRE_FALSE(session.in_head());
        CHECK_FALSE(d.head_due(at(1000)));
        CHECK(d.due(at(124), 100ms) == Due::nothing);
        SECTION("and the next head starts its own") {
            read(kHeadStart, at(40));
            CHECK(d.due(at(69), 100ms) == Due::nothing);
            CHECK(d.due(at(70), 100ms) == Due::head);
        }
    }
}

TEST_CASE_METHOD(Fixture, "shared_deadlines clear_head() forgets the head in progress",
                 "[shared_deadlines]") {
    read(kHeadStart, at(0));
    d.clear_head();
    CHECK_FALSE(d.head_due(at(30)));
    CHECK(d.due(at(30), 100ms) == Due::nothing);
}

TEST_CASE_METHOD(Fixture, "shared_deadlines a complete request leaves no head deadline",
                 "[shared_deadlines]") {
    read(kRequest, at(0));
    CHECK_FALSE(d.head_due(at(1000)));
    CHECK(d.due(at(99), 100ms) == Due::nothing);
}

TEST_CASE_METHOD(Fixture, "shared_deadlines the linger deadline replaces idle and head",
                 "[shared_deadlines]") {
    read(kHeadStart, at(0));  // head due at 30
    d.linger(at(10), 50ms);   // due at 60
    // Idle for longer than 10 ms, and the head late: neither counts now.
    CHECK(d.due(at(40), 10ms) == Due::nothing);
    CHECK(d.due(at(59), 10ms) == Due::nothing);
    CHECK(d.due(at(60), 10ms) == Due::close);
    // Progress while lingering does not extend it.
    d.touch(at(55));
    CHECK(d.due(at(60), 1000ms) == Due::close);
}

TEST_CASE(
    "shared_deadlines sweep_interval is a quarter of the shortest timeout, within "
    "[10 ms, 500 ms]",
    "[shared_deadlines]") {
    ServerOptions o;
    o.idle_timeout = 60s;
    o.header_timeout = 30s;
    o.linger_timeout = 800ms;
    CHECK(SharedDeadlines::sweep_interval(o) == 200ms);  // the linger timeout's quarter
    o.header_timeout = 120ms;
    CHECK(SharedDeadlines::sweep_interval(o) == 30ms);  // the head timeout's
    o.idle_timeout = 100ms;
    CHECK(SharedDeadlines::sweep_interval(o) == 25ms);  // the idle timeout's
    o.idle_timeout = 20ms;
    CHECK(SharedDeadlines::sweep_interval(o) == 10ms);  // clamped up
    o.idle_timeout = o.header_timeout = 60s;
    o.linger_timeout = 0ms;  // --linger-timeout 0
    CHECK(SharedDeadlines::sweep_interval(o) == 10ms);
    o.linger_timeout = 10s;
    CHECK(SharedDeadlines::sweep_interval(o) == 500ms);  // clamped down
    o.linger_timeout = 2s;
    CHECK(SharedDeadlines::sweep_interval(o) == 500ms);  // exactly the bound
}

TEST_CASE_METHOD(Fixture, "shared_deadlines with the server's options, each deadline its timeout",
                 "[shared_deadlines]") {
    ServerOptions o = sm::test::test_options();  // idle 100, header 30, linger 50
    feed(session, kHeadStart);
    d.track_head(session, at(0), o);
    CHECK(d.due(at(29), o) == Due::nothing);
    CHECK(d.due(at(30), o) == Due::head);
    d.clear_head();
    CHECK(d.due(at(99), o) == Due::nothing);
    CHECK(d.due(at(100), o) == Due::close);
}

TEST_CASE_METHOD(Fixture,
                 "shared_deadlines start_linger shuts the sending side down and starts the linger "
                 "deadline",
                 "[shared_deadlines]") {
    sm::runtime::test::SocketPair p;
    const ServerOptions o = sm::test::test_options();  // linger 50
    REQUIRE(d.start_linger(p.ours.get(), at(10), o));
    char c = 0;
    // The client sees our FIN.
    CHECK(sm::runtime::test::receive(p.peer.get(), c) == Received::eof);
    CHECK(d.due(at(59), o) == Due::nothing);
    CHECK(d.due(at(60), o) == Due::close);
}

TEST_CASE_METHOD(Fixture,
                 "shared_deadlines start_linger with --linger-timeout 0 says close at once",
                 "[shared_deadlines]") {
    sm::runtime::test::SocketPair p;
    ServerOptions o = sm::test::test_options();
    o.linger_timeout = 0ms;
    CHECK_FALSE(d.start_linger(p.ours.get(), at(10), o));
    // Not shut down: no EOF, and our byte still goes out.
    char c = 0;
    CHECK(sm::runtime::test::receive_now(p.peer.get(), c) == Received::nothing);
    REQUIRE(sm::runtime::test::send_byte(p.ours.get(), 'y'));
    CHECK(sm::runtime::test::receive(p.peer.get(), c) == Received::byte);
    CHECK(d.due(at(50), o) == Due::nothing);  // and no linger deadline (idle still 100)
}
