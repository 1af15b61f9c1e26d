// runtime::DeadlineClock: the deadline rules, once, for both storages (Plain
// for a connection one thread owns, Shared for server-threadpool's, read by
// a sweeping thread), and the rules over a connection's state
// (connection_state.hpp). Time is explicit; the session is fed real bytes,
// so "inside a request head" is the session's own answer.
//
// Timeouts (test_options): idle 100 ms, head 30 ms, linger 50 ms, send 70 ms.
#include <catch2/catch.hpp>

#include <string>

#include "http/session.hpp"
#include "runtime/connection_state.hpp"
#include "runtime/deadline_clock.hpp"
#include "runtime_test_support.hpp"
#include "socket_support.hpp"

using namespace std::chrono_literals;
using sm::runtime::Due;
using sm::runtime::ServerOptions;
using sm::runtime::test::Received;
using sm::test::at;
using sm::test::feed;
using sm::test::kHeadRest;
using sm::test::kHeadStart;
using sm::test::kRequest;

namespace {

// The two storages, as types Catch can instantiate the fixture with.
struct PlainCells {
    template <typename T>
    using Cell = sm::runtime::Plain<T>;
};
struct SharedCells {
    template <typename T>
    using Cell = sm::runtime::Shared<T>;
};

template <typename Cells>
struct Fixture : sm::test::SessionFixture {
    using Clock = sm::runtime::DeadlineClock<Cells::template Cell>;
    ServerOptions o = sm::test::test_options();
    Clock d;

    Fixture() { d.start(at(0)); }
    // A read at `now`, as a model handles it.
    bool read(std::string_view bytes, sm::runtime::Clock::time_point now) {
        d.touch(now);
        feed(session, bytes);
        return d.track_head(session, now, o);
    }
    Due due(long long ms, bool busy = false) const { return d.due(at(ms), o, busy); }
    bool reading() const { return d.phase() == Clock::Phase::reading; }
    bool blocked() const { return d.phase() == Clock::Phase::blocked; }
    bool lingering() const { return d.phase() == Clock::Phase::lingering; }
};

}  // namespace

TEMPLATE_TEST_CASE_METHOD(Fixture, "deadline_clock idle: nothing until --idle-timeout, then close",
                          "[deadline_clock]", PlainCells, SharedCells) {
    auto& f = *this;
    CHECK(f.due(99) == Due::nothing);
    CHECK(f.due(100) == Due::close);
    CHECK(f.d.next(f.o) == at(100));
    f.d.touch(at(50));
    CHECK(f.due(149) == Due::nothing);
    CHECK(f.due(150) == Due::close);
    // Busy (a job out, a worker serving it): not idle; the caller renews it.
    CHECK(f.due(150, true) == Due::renew);
}

TEMPLATE_TEST_CASE_METHOD(Fixture, "deadline_clock head: due at its deadline, set at its first byte",
                          "[deadline_clock]", PlainCells, SharedCells) {
    auto& f = *this;
    CHECK(f.read(kHeadStart, at(0)));
    REQUIRE(f.session.in_head());
    CHECK(f.d.next(f.o) == at(30));  // the head's comes before the idle one
    CHECK(f.due(29) == Due::nothing);
    CHECK(f.due(30) == Due::head);
    // Idle too long as well: closing wins over answering 408, unless busy.
    CHECK(f.due(100) == Due::close);
    CHECK(f.due(100, true) == Due::head);
    f.d.clear_head();
    CHECK(f.due(30) == Due::nothing);
    CHECK(f.d.next(f.o) == at(100));
}

TEMPLATE_TEST_CASE_METHOD(Fixture, "deadline_clock head: trickled bytes do not move it (slowloris)",
                          "[deadline_clock]", PlainCells, SharedCells) {
    auto& f = *this;
    CHECK(f.read(kHeadStart, at(0)));
    CHECK_FALSE(f.read("st: x\r\n", at(20)));
    CHECK(f.due(29) == Due::nothing);
    CHECK(f.due(30) == Due::head);
    SECTION("a pipelined new head begun in the read that ends the last gets its own") {
        CHECK(f.read("\r\n" + std::string(kHeadStart), at(25)));
        REQUIRE(f.session.in_head());
        CHECK(f.due(54) == Due::nothing);
        CHECK(f.due(55) == Due::head);
    }
    SECTION("a completed head clears it; the next head starts its own") {
        CHECK_FALSE(f.read("\r\n", at(25)));
        REQUIRE_FALSE(f.session.in_head());
        CHECK_FALSE(f.d.head_running());
        CHECK(f.due(124) == Due::nothing);
        CHECK(f.read(kHeadStart, at(40)));
        CHECK(f.due(69) == Due::nothing);
        CHECK(f.due(70) == Due::head);
    }
}

TEMPLATE_TEST_CASE_METHOD(Fixture, "deadline_clock a quiet head is idle before its deadline",
                          "[deadline_clock]", PlainCells, SharedCells) {
    auto& f = *this;
    f.o.idle_timeout = 20ms;  // shorter than the head's 30 ms
    f.read(kHeadStart, at(0));
    CHECK(f.d.next(f.o) == at(20));
    CHECK(f.due(19) == Due::nothing);
    CHECK(f.due(20) == Due::close);
}

TEMPLATE_TEST_CASE_METHOD(Fixture,
                          "deadline_clock blocked: only --send-timeout runs, from the last write "
                          "progress",
                          "[deadline_clock]", PlainCells, SharedCells) {
    auto& f = *this;
    // A client mid-head whose responses to earlier requests back up.
    f.read(std::string(kRequest) + std::string(kHeadStart), at(0));
    REQUIRE(f.d.head_running());
    f.d.block(at(10));
    CHECK(f.blocked());
    CHECK_FALSE(f.d.head_running());
    // Neither the head (30) nor the idle deadline (100) runs against it.
    CHECK(f.due(30) == Due::nothing);
    CHECK(f.due(79) == Due::nothing);
    CHECK(f.d.next(f.o) == at(80));
    CHECK(f.due(80) == Due::close);
    // Each byte the client takes moves it on; bytes it sends do not count
    // (it is not read), nor does a feed start a head.
    f.d.touch(at(60));
    CHECK(f.due(129) == Due::nothing);
    CHECK(f.due(130) == Due::close);
    CHECK_FALSE(f.d.track_head(f.session, at(60), f.o));
    CHECK_FALSE(f.d.head_running());
    // Blocking again changes nothing.
    f.d.block(at(100));
    CHECK(f.due(130) == Due::close);

    SECTION("unblocked: reading resumes, and the head in progress starts afresh") {
        CHECK(f.d.unblock(f.session, at(120), f.o));
        CHECK(f.reading());
        CHECK(f.d.head_running());
        CHECK(f.due(149) == Due::nothing);
        CHECK(f.due(150) == Due::head);
        CHECK(f.due(220) == Due::close);  // idle from 120
        // Not blocked: unblocking again does nothing.
        CHECK_FALSE(f.d.unblock(f.session, at(130), f.o));
        CHECK(f.due(150) == Due::head);
    }
    SECTION("unblocked between requests: only the idle deadline") {
        feed(f.session, kHeadRest);
        REQUIRE_FALSE(f.session.in_head());
        CHECK_FALSE(f.d.unblock(f.session, at(120), f.o));
        CHECK_FALSE(f.d.head_running());
        CHECK(f.due(219) == Due::nothing);
        CHECK(f.due(220) == Due::close);
    }
}

TEMPLATE_TEST_CASE_METHOD(Fixture, "deadline_clock lingering: its deadline replaces every other",
                          "[deadline_clock]", PlainCells, SharedCells) {
    auto& f = *this;
    f.read(kHeadStart, at(0));  // head due at 30
    f.d.linger(at(10), f.o);    // due at 60
    CHECK(f.lingering());
    CHECK(f.due(40) == Due::nothing);
    CHECK(f.due(59) == Due::nothing);
    CHECK(f.d.next(f.o) == at(60));
    CHECK(f.due(60) == Due::close);
    // Neither blocking nor a feed changes it.
    f.d.block(at(20));
    CHECK_FALSE(f.d.track_head(f.session, at(20), f.o));
    CHECK(f.due(60) == Due::close);
    // A recycled connection starts over.
    f.d.start(at(100));
    CHECK(f.reading());
    CHECK(f.due(199) == Due::nothing);
    CHECK(f.due(200) == Due::close);
}

TEST_CASE("deadline_clock sweep_interval is a quarter of the shortest timeout, within [10, 500] ms",
          "[deadline_clock]") {
    using sm::runtime::sweep_interval;
    ServerOptions o;
    o.idle_timeout = 60s;
    o.header_timeout = 30s;
    o.send_timeout = 60s;
    o.linger_timeout = 800ms;
    CHECK(sweep_interval(o) == 200ms);  // the linger timeout's quarter
    o.header_timeout = 120ms;
    CHECK(sweep_interval(o) == 30ms);  // the head timeout's
    o.send_timeout = 100ms;
    CHECK(sweep_interval(o) == 25ms);  // the send timeout's
    o.idle_timeout = 20ms;
    CHECK(sweep_interval(o) == 10ms);  // clamped up
    o.idle_timeout = o.header_timeout = o.send_timeout = 60s;
    o.linger_timeout = 0ms;  // --linger-timeout 0
    CHECK(sweep_interval(o) == 10ms);
    o.linger_timeout = 10s;
    CHECK(sweep_interval(o) == 500ms);  // clamped down
}

// --- the rules over a connection's state ----------------------------------------

namespace {

struct State : sm::runtime::ConnectionState<sm::runtime::Plain> {
    State() { clock.start(at(0)); }
    // The session pool its session comes from (this thread's).
    static inline sm::test::SessionEnv env;
};

}  // namespace

TEST_CASE("connection_state ending: only with nothing owed, and a reason to end",
          "[connection_state]") {
    State c;
    CHECK_FALSE(sm::runtime::ending(c, false));
    CHECK(sm::runtime::ending(c, true));  // stopping, no request in progress
    feed(c.session, kHeadStart);
    CHECK_FALSE(sm::runtime::ending(c, true));  // a request is in progress
    c.want_close = true;
    CHECK(sm::runtime::ending(c, false));
    c.want_close = false;
    c.peer_closed = true;
    CHECK(sm::runtime::ending(c, false));

    // Responses deferred for want of room are owed: not yet.
    State d;
    std::string flood;
    for (int i = 0; i < 10; ++i)
        flood += kRequest;
    sm::http::ByteBuffer out;
    d.session.feed(std::span<const char>(flood.data(), flood.size()), out, 100);
    REQUIRE(d.session.deferred());
    d.want_close = d.peer_closed = true;
    CHECK_FALSE(sm::runtime::ending(d, true));
}

TEST_CASE("connection_state shut_for_linger shuts the sending side down", "[connection_state]") {
    sm::runtime::test::SocketPair p;
    State c;
    const ServerOptions o = sm::test::test_options();
    REQUIRE(sm::runtime::shut_for_linger(c, p.ours.get(), o));
    char byte = 0;
    CHECK(sm::runtime::test::receive(p.peer.get(), byte) == Received::eof);  // our FIN
}

TEST_CASE("connection_state shut_for_linger refuses with --linger-timeout 0 or after the client's EOF",
          "[connection_state]") {
    sm::runtime::test::SocketPair p;
    State c;
    ServerOptions o = sm::test::test_options();
    SECTION("--linger-timeout 0") { o.linger_timeout = 0ms; }
    SECTION("the client closed its side") { c.peer_closed = true; }
    CHECK_FALSE(sm::runtime::shut_for_linger(c, p.ours.get(), o));
    // Not shut down: no EOF, and our byte still goes out.
    char byte = 0;
    CHECK(sm::runtime::test::receive_now(p.peer.get(), byte) == Received::nothing);
    REQUIRE(sm::runtime::test::send_byte(p.ours.get(), 'y'));
    CHECK(sm::runtime::test::receive(p.peer.get(), byte) == Received::byte);
}
