// runtime::Connections<Conn>: one thread's pool of connection objects, its
// deadlines, its accept gate and the graceful stop. Driven as a model drives
// it (try_acquire, open, closed, recycle), with explicit time points; the
// callbacks record what the lifecycle asked the model to do.
#include <catch2/catch.hpp>

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "capture.hpp"
#include "http/byte_buffer.hpp"
#include "runtime/connection_limit.hpp"
#include "runtime/connections.hpp"
#include "runtime/platform.hpp"
#include "runtime/server.hpp"
#include "runtime/tuning.hpp"
#include "runtime_test_support.hpp"
#include "socket_support.hpp"

using namespace std::chrono_literals;
using sm::http::Session;
using sm::runtime::Clock;
using sm::runtime::Connections;
using sm::runtime::ServerOptions;
using sm::test::at;
using sm::test::kHeadRest;
using sm::test::kHeadStart;
using sm::test::kRequest;
using sm::test::TestConn;

namespace {

// Everything a worker gets from serve(), for one thread.
struct Harness {
    explicit Harness(ServerOptions o = sm::test::test_options(), std::size_t max = 10)
        : options(std::move(o)), limit(max) {}

    sm::test::SessionEnv env;
    ServerOptions options;
    sm::runtime::Listener listener;  // none: these tests accept nothing
    sm::runtime::StopSignal stop;
    sm::runtime::ConnectionLimit limit;
    sm::runtime::WorkerContext ctx{options, 0, listener, stop, limit};
    Connections<TestConn> conns{ctx, env.cache};
    std::vector<TestConn*> closed;  // in the order close() was called

    // A connection accepted at `now`: its slot taken, then its object.
    TestConn& accept(Clock::time_point now) {
        REQUIRE(conns.gate.try_acquire(now));
        return conns.open(now);
    }
    // As a model's close_now: the socket is gone, the slot free.
    auto close() {
        return [this](TestConn& c) {
            closed.push_back(&c);
            conns.closed(c);
        };
    }
    static auto no_head() {
        return [](TestConn&) { FAIL("no head is late in this test"); };
    }
};

Session::Result feed(TestConn& c, std::string_view bytes, std::string* out = nullptr) {
    sm::http::ByteBuffer buf;
    const auto r = c.session.feed(std::span<const char>(bytes.data(), bytes.size()), buf);
    if (out) *out = std::string(buf.view());
    return r;
}

}  // namespace

TEST_CASE("connections open and closed count the live connections", "[connections]") {
    Harness h;
    CHECK(h.conns.live() == 0);
    TestConn& a = h.accept(at(0));
    TestConn& b = h.accept(at(0));
    CHECK(&a != &b);
    CHECK(a.open);
    CHECK(h.conns.live() == 2);
    CHECK(h.limit.open() == 2);

    h.conns.closed(a);
    CHECK_FALSE(a.open);
    CHECK(h.conns.live() == 1);
    CHECK(h.limit.open() == 1);  // the gate's slot is back
    // Off the deadline lists: only b's idle deadline is left.
    CHECK_FALSE(a.idle_hook.linked());
    CHECK(h.conns.next_deadline() == at(100));
}

TEST_CASE("connections open touches the new connection", "[connections]") {
    Harness h;
    TestConn& a = h.accept(at(7));
    CHECK(a.clock.last_active() == at(7));
    CHECK(h.conns.next_deadline() == at(107));
}

TEST_CASE("connections recycle serves the next connection with the same object, reset",
          "[connections]") {
    Harness h;
    TestConn& a = h.accept(at(0));
    feed(a, kHeadStart);
    REQUIRE(a.session.in_head());
    h.conns.deadlines.linger(a, at(0));
    h.conns.closed(a);

    // Closed but not yet recycled (a stale event may still name it): not reused.
    TestConn& b = h.accept(at(5));
    CHECK(&b != &a);

    h.conns.recycle(a);
    TestConn& c = h.accept(at(10));
    CHECK(&c == &a);
    CHECK(c.open);
    CHECK_FALSE(c.lingering());
    CHECK(c.session.idle());
    CHECK_FALSE(c.session.in_head());
    CHECK(c.idle_hook.linked());
    CHECK(h.conns.live() == 2);
    // The recycled session answers like a new one.
    std::string out;
    CHECK(feed(c, kRequest, &out) == Session::Result::open);
    CHECK(out.starts_with("HTTP/1.1 200 OK\r\n"));
}

TEST_CASE("connections the gate's slot is released on closed()", "[connections]") {
    Harness h(sm::test::test_options(), 2);
    TestConn& a = h.accept(at(0));
    h.accept(at(0));
    sm::test::capture_log([&] { CHECK_FALSE(h.conns.gate.try_acquire(at(1))); });
    CHECK(h.conns.gate.at_limit());
    CHECK_FALSE(h.conns.gate.reopen_due(at(1)));

    h.conns.closed(a);
    // Before the gate's retry time: the slot freed here reopens it at once.
    CHECK(h.conns.gate.reopen_due(at(1)));
}

TEST_CASE("connections begin_shutdown closes the quiet idle ones and asks the others to close",
          "[connections]") {
    Harness h;
    TestConn& quiet = h.accept(at(0));
    TestConn& busy = h.accept(at(0));       // idle session, but output unsent (per quiet())
    TestConn& partial = h.accept(at(0));    // a request partly received
    TestConn& lingering = h.accept(at(0));  // its lingering close is under way
    TestConn& recycled = h.accept(at(0));   // closed earlier: in the pool, not open
    h.conns.closed(recycled);
    h.conns.recycle(recycled);
    h.conns.deadlines.linger(lingering, at(0));
    feed(partial, kHeadStart);

    CHECK_FALSE(h.conns.stopping());
    h.conns.begin_shutdown(
        at(10), [&](const TestConn& c) { return &c != &busy; }, h.close());
    CHECK(h.conns.stopping());
    CHECK(h.closed == std::vector{&quiet});
    CHECK(h.conns.live() == 3);
    CHECK_FALSE(h.conns.finished());
    // The listener is closed for good: the gate never reopens.
    CHECK_FALSE(h.conns.gate.open());
    CHECK_FALSE(h.conns.gate.reopen_due(at(1'000'000)));

    // The others get their responses with "Connection: close", then end.
    std::string out;
    CHECK(feed(busy, kRequest, &out) == Session::Result::close);
    CHECK(out.find("\r\nConnection: close\r\n") != std::string::npos);
    CHECK_FALSE(h.conns.done_with(partial));  // its request is still coming
    CHECK(feed(partial, kHeadRest, &out) == Session::Result::close);
    CHECK(out.find("\r\nConnection: close\r\n") != std::string::npos);
    CHECK(h.conns.done_with(partial));
    CHECK(h.conns.done_with(busy));
}

TEST_CASE("connections begin_shutdown a second time does nothing", "[connections]") {
    Harness h;
    TestConn& a = h.accept(at(0));
    auto keep = [](const TestConn&) { return false; };
    h.conns.begin_shutdown(at(0), keep, h.close());
    CHECK(h.conns.next_deadline() == at(100));  // idle 100 < shutdown 200

    // Again, later and with everything quiet: the first call's deadline
    // and choices stand.
    h.conns.begin_shutdown(
        at(150), [](const TestConn&) { return true; }, h.close());
    CHECK(h.closed.empty());
    h.conns.deadlines.touch(a, at(150));
    CHECK(h.conns.next_deadline() == at(200));
}

TEST_CASE("connections finished() once stopping with no connection left", "[connections]") {
    Harness h;
    CHECK_FALSE(h.conns.finished());  // not stopping: a worker with no connections runs on
    TestConn& a = h.accept(at(0));
    h.conns.begin_shutdown(
        at(0), [](const TestConn&) { return false; }, h.close());
    CHECK_FALSE(h.conns.finished());
    h.conns.closed(a);
    CHECK(h.conns.finished());
}

TEST_CASE("connections done_with is false until stopping", "[connections]") {
    Harness h;
    TestConn& a = h.accept(at(0));
    CHECK_FALSE(h.conns.done_with(a));
    h.conns.begin_shutdown(
        at(0), [](const TestConn&) { return false; }, h.close());
    CHECK(h.conns.done_with(a));
}

TEST_CASE("connections ending: the session ended, the peer closed its side, or done_with",
          "[connections]") {
    Harness h;
    TestConn& a = h.accept(at(0));
    TestConn& b = h.accept(at(0));
    TestConn& c = h.accept(at(0));
    TestConn& d = h.accept(at(0));
    feed(d, kHeadStart);  // a request partly here: not done_with while stopping
    CHECK_FALSE(h.conns.ending(a));
    b.want_close = true;
    c.peer_closed = true;
    CHECK(h.conns.ending(b));
    CHECK(h.conns.ending(c));
    h.conns.begin_shutdown(
        at(0), [](const TestConn&) { return false; }, h.close());
    CHECK(h.conns.ending(a));  // stopping, and its session is idle
    CHECK_FALSE(h.conns.ending(d));
    // A recycled connection starts with neither flag.
    h.conns.closed(b);
    h.conns.recycle(b);
    h.conns.closed(c);
    h.conns.recycle(c);
    CHECK_FALSE(b.want_close);
    CHECK_FALSE(c.peer_closed);
}

TEST_CASE("answer_late_head: no 408 while responses are queued, else the 408 and want_close",
          "[connections]") {
    Harness h;
    TestConn& queued = h.accept(at(0));
    TestConn& late = h.accept(at(0));
    feed(queued, kHeadStart);
    feed(late, kHeadStart);
    sm::http::ByteBuffer out;
    // The client is not reading what it already got: close, nothing added.
    CHECK_FALSE(sm::runtime::answer_late_head(queued, true, out));
    CHECK(out.empty());
    CHECK_FALSE(queued.want_close);
    CHECK_FALSE(queued.session.closed());
    // Nothing queued: the 408 with "Connection: close", and the session ends.
    CHECK(sm::runtime::answer_late_head(late, false, out));
    const std::string_view sent = out.view();
    CHECK(sent.starts_with("HTTP/1.1 408 Request Timeout\r\n"));
    CHECK(sent.find("\r\nConnection: close\r\n") != std::string_view::npos);
    CHECK(late.want_close);
    CHECK(late.session.closed());
    CHECK(h.conns.ending(late));
}

TEST_CASE("connections expire past the shutdown deadline closes every open one", "[connections]") {
    ServerOptions o = sm::test::test_options();
    o.idle_timeout = o.header_timeout = o.linger_timeout = 1000ms;  // only the stop is due
    Harness h(o);
    TestConn& a = h.accept(at(0));
    TestConn& b = h.accept(at(0));
    TestConn& c = h.accept(at(0));
    feed(b, kHeadStart);
    h.conns.deadlines.track_head(b, at(0));
    h.conns.deadlines.linger(c, at(0));
    h.conns.begin_shutdown(
        at(0), [](const TestConn&) { return false; }, h.close());
    CHECK(h.conns.next_deadline() == at(200));

    h.conns.expire(at(199), h.close(), Harness::no_head());
    CHECK(h.closed.empty());
    h.conns.expire(at(200), h.close(), Harness::no_head());
    CHECK(h.closed == std::vector{&a, &b, &c});
    CHECK(h.conns.live() == 0);
    CHECK(h.conns.finished());
}

TEST_CASE("connections expire runs the connections' deadlines", "[connections]") {
    Harness h;
    TestConn& a = h.accept(at(0));
    TestConn& b = h.accept(at(50));
    std::vector<TestConn*> late;
    auto head = [&](TestConn& c) { late.push_back(&c); };
    feed(b, kHeadStart);
    h.conns.deadlines.track_head(b, at(50));  // due at 80

    h.conns.expire(at(80), h.close(), head);
    CHECK(late == std::vector{&b});
    CHECK(h.closed.empty());
    h.conns.expire(at(100), h.close(), head);
    CHECK(h.closed == std::vector{&a});
}

TEST_CASE("connections next_deadline is the earliest of the connections, the gate and the stop",
          "[connections]") {
    ServerOptions o = sm::test::test_options();
    o.shutdown_timeout = 20ms;
    Harness h(o, 1);
    CHECK(h.conns.next_deadline() == Clock::time_point::max());

    h.accept(at(0));
    CHECK(h.conns.next_deadline() == at(100));  // the idle deadline

    // At the limit the gate looks again after kLimitPause.
    sm::test::capture_log([&] { CHECK_FALSE(h.conns.gate.try_acquire(at(30))); });
    CHECK(h.conns.next_deadline() == at(30) + sm::runtime::kLimitPause);

    // Stopping: the gate is shut (no retry), the stop's deadline counts.
    h.conns.begin_shutdown(
        at(35), [](const TestConn&) { return false; }, h.close());
    CHECK(h.conns.next_deadline() == at(55));
}

TEST_CASE("connections start_linger starts the lingering close on the socket", "[connections]") {
    using sm::runtime::test::Received;
    const sm::runtime::test::SocketPair sp;
    char byte = 0;

    SECTION("with a linger timeout") {
        Harness h;
        TestConn& a = h.accept(at(0));
        CHECK(h.conns.start_linger(a, sp.ours.get(), at(10)));
        CHECK(a.lingering());
        CHECK(h.conns.next_deadline() == at(60));
        // The peer sees our FIN.
        CHECK(sm::runtime::test::receive(sp.peer.get(), byte) == Received::eof);
    }
    SECTION("the peer closed its side: close at once instead") {
        Harness h;
        TestConn& a = h.accept(at(0));
        a.peer_closed = true;
        CHECK_FALSE(h.conns.start_linger(a, sp.ours.get(), at(10)));
        CHECK_FALSE(a.lingering());
        CHECK(h.conns.next_deadline() == at(100));
        // Not shut down: no EOF.
        CHECK(sm::runtime::test::receive_now(sp.peer.get(), byte) == Received::nothing);
    }
    SECTION("without one: close at once instead") {
        ServerOptions o = sm::test::test_options();
        o.linger_timeout = 0ms;
        Harness h(o);
        TestConn& a = h.accept(at(0));
        CHECK_FALSE(h.conns.start_linger(a, sp.ours.get(), at(10)));
        CHECK_FALSE(a.lingering());
        CHECK(h.conns.next_deadline() == at(100));
        // Not shut down: no EOF, and our byte still goes out.
        CHECK(sm::runtime::test::receive_now(sp.peer.get(), byte) == Received::nothing);
        REQUIRE(sm::runtime::test::send_byte(sp.ours.get(), 'y'));
        CHECK(sm::runtime::test::receive(sp.peer.get(), byte) == Received::byte);
    }
}

TEST_CASE("connections complete_job answers an open connection and skips a closed one",
          "[connections]") {
    // The Connections' cache decides the workloads: a database here.
    Harness h;
    const sm::http::ResponseCache db_cache(sm::http::ResponseMode::composed, 0,
                                           {true, sm::http::FortuneSource::database});
    Connections<TestConn> conns{h.ctx, db_cache};
    REQUIRE(conns.gate.try_acquire(at(0)));
    TestConn& c = conns.open(at(0));
    sm::test::feed(c.session, "GET /db HTTP/1.1\r\nHost: t\r\n\r\n");
    sm::http::Job job;
    REQUIRE(c.session.next_job(job));
    sm::http::ByteBuffer out;
    const sm::http::WorldRow row{7, 8};
    // The response is progress: the idle deadline starts from it.
    CHECK(conns.complete_job(c, job, {{&row, 1}, {}, {}}, out, at(40)));
    CHECK(c.clock.last_active() == at(40));
    CHECK(out.view().find(R"({"id":7,"randomNumber":8})") != std::string_view::npos);
    CHECK_FALSE(c.session.waiting());

    // Closed while its query was out: nothing is written, nothing touched.
    sm::test::feed(c.session, "GET /db HTTP/1.1\r\nHost: t\r\n\r\n");
    REQUIRE(c.session.next_job(job));
    conns.closed(c);
    out.clear();
    CHECK_FALSE(conns.complete_job(c, job, {{&row, 1}, {}, {}}, out, at(80)));
    CHECK(out.empty());
    CHECK(c.clock.last_active() == at(40));
}
