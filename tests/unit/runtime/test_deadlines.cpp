// runtime::Deadlines<Conn>: the idle, head and linger lists of one thread's
// connections. Time is explicit (at(ms) on the runtime's clock), and each
// connection carries a real http::Session fed real bytes, so "inside a
// request head" is the session's own answer.
//
// Timeouts (test_options): idle 100 ms, head 30 ms, linger 50 ms, send 70 ms.
#include <catch2/catch.hpp>

#include <deque>
#include <vector>

#include "runtime/deadlines.hpp"
#include "runtime_test_support.hpp"

using sm::runtime::Clock;
using sm::runtime::Deadlines;
using sm::test::at;
using sm::test::feed;
using sm::test::kHeadRest;
using sm::test::kHeadStart;
using sm::test::kRequest;
using sm::test::TestConn;

namespace {

struct Fixture {
    sm::test::SessionEnv env;
    sm::runtime::ServerOptions options = sm::test::test_options();
    Deadlines<TestConn> d{options};
    std::deque<TestConn> conns;  // stable addresses, as Connections keeps them
    std::vector<int> closed;     // ids, in the order close() was called
    std::vector<int> late;       // ids, in the order head() was called

    TestConn& make(int id) {
        TestConn& c = conns.emplace_back();
        c.id = id;
        return c;
    }
    // As a model's close does: the connection leaves every list.
    auto close() {
        return [this](TestConn& c) {
            closed.push_back(c.id);
            Deadlines<TestConn>::forget(c);
        };
    }
    auto head() {
        return [this](TestConn& c) {
            // Deadlines takes it off the head list before telling the model.
            CHECK_FALSE(c.head_hook.linked());
            late.push_back(c.id);
        };
    }
    void expire(Clock::time_point now) { d.expire(now, close(), head()); }
    // A read of `bytes` at `now`, as a model handles it.
    bool read(TestConn& c, std::string_view bytes, Clock::time_point now) {
        d.touch(c, now);
        feed(c.session, bytes);
        return d.track_head(c, now);
    }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "deadlines with nothing on a list next() is max", "[deadlines]") {
    CHECK(d.empty());
    CHECK(d.next() == Clock::time_point::max());
    expire(at(1'000'000));
    CHECK(closed.empty());
    CHECK(late.empty());
}

TEST_CASE_METHOD(Fixture, "deadlines touch moves a connection to the back of the idle list",
                 "[deadlines]") {
    TestConn& a = make(1);
    TestConn& b = make(2);
    TestConn& c = make(3);
    d.touch(a, at(0));
    d.touch(b, at(10));
    d.touch(c, at(20));
    CHECK_FALSE(d.empty());
    CHECK(d.next() == at(100));

    // a made progress: it is now the most recently active, b the least.
    d.touch(a, at(30));
    CHECK(a.clock.last_active() == at(30));
    CHECK(d.next() == at(110));
    expire(at(109));
    CHECK(closed.empty());
    expire(at(120));
    CHECK(closed == std::vector{2, 3});
    CHECK(d.next() == at(130));
    expire(at(130));
    CHECK(closed == std::vector{2, 3, 1});
    CHECK(d.empty());
}

TEST_CASE_METHOD(Fixture, "deadlines next() is the earliest of the three lists", "[deadlines]") {
    TestConn& idle = make(1);
    TestConn& heading = make(2);
    TestConn& lingering = make(3);

    SECTION("the idle deadline") {
        d.touch(idle, at(0));               // 100
        read(heading, kHeadStart, at(75));  // head 105, idle 175
        d.linger(lingering, at(60));        // 110
        CHECK(d.next() == at(100));
    }
    SECTION("the head deadline") {
        d.touch(idle, at(0));               // 100
        read(heading, kHeadStart, at(10));  // head 40, idle 110
        d.linger(lingering, at(0));         // 50
        CHECK(d.next() == at(40));
    }
    SECTION("the linger deadline") {
        d.touch(idle, at(0));               // 100
        read(heading, kHeadStart, at(50));  // head 80, idle 150
        d.linger(lingering, at(20));        // 70
        CHECK(d.next() == at(70));
    }
}

TEST_CASE_METHOD(Fixture,
                 "deadlines expire closes in deadline order and stops at the first in time",
                 "[deadlines]") {
    for (int id = 1; id <= 3; ++id)
        d.touch(make(id), at(5 * (id - 1)));  // idle deadlines 100, 105, 110
    TestConn& l1 = make(4);
    TestConn& l2 = make(5);
    d.linger(l1, at(0));   // 50
    d.linger(l2, at(20));  // 70

    expire(at(60));
    CHECK(closed == std::vector{4});
    expire(at(105));
    CHECK(closed == std::vector{4, 5, 1, 2});
    CHECK(d.next() == at(110));
    CHECK(late.empty());
}

TEST_CASE_METHOD(Fixture, "deadlines a head's deadline is set at its first byte", "[deadlines]") {
    TestConn& c = make(1);
    d.touch(c, at(0));
    CHECK_FALSE(d.track_head(c, at(0)));  // nothing received: not in a head
    CHECK(d.next() == at(100));

    CHECK(read(c, kHeadStart, at(10)));
    REQUIRE(c.session.in_head());
    CHECK(c.clock.head_deadline() == at(40));
    CHECK(d.next() == at(40));
}

TEST_CASE_METHOD(Fixture, "deadlines later bytes of the same head do not move its deadline",
                 "[deadlines]") {
    // Slowloris: a client that sends a byte now and then must not keep its
    // head alive forever. Each byte is progress (the idle deadline moves),
    // but the head deadline stays where the head began.
    TestConn& c = make(1);
    CHECK(read(c, kHeadStart, at(0)));
    CHECK_FALSE(read(c, "st", at(10)));
    CHECK_FALSE(read(c, ": x\r\n", at(20)));
    REQUIRE(c.session.in_head());
    CHECK(c.clock.head_deadline() == at(30));

    expire(at(29));
    CHECK(late.empty());
    expire(at(30));
    CHECK(late == std::vector{1});
    CHECK(closed.empty());  // idle since 20: due at 120
    // Off the head list: the next deadline is the idle one, and the head
    // is not reported twice.
    CHECK(d.next() == at(120));
    expire(at(31));
    CHECK(late == std::vector{1});
}

TEST_CASE_METHOD(Fixture, "deadlines a completed head takes the connection off the head list",
                 "[deadlines]") {
    TestConn& c = make(1);
    CHECK(read(c, kHeadStart, at(0)));
    CHECK_FALSE(read(c, kHeadRest, at(10)));
    CHECK_FALSE(c.session.in_head());
    CHECK_FALSE(c.head_hook.linked());
    CHECK(d.next() == at(110));
    expire(at(30));
    CHECK(late.empty());
}

TEST_CASE_METHOD(Fixture, "deadlines a pipelined new head gets a new deadline", "[deadlines]") {
    TestConn& c = make(1);
    CHECK(read(c, kHeadStart, at(0)));
    CHECK(c.clock.head_deadline() == at(30));

    // One read completes the first request and begins the next: in_head()
    // stays true across it, yet the head is another one with its own time.
    CHECK(read(c, std::string(kHeadRest) + std::string(kHeadStart), at(20)));
    REQUIRE(c.session.in_head());
    CHECK(c.clock.head_deadline() == at(50));
    expire(at(30));
    CHECK(late.empty());
    expire(at(50));
    CHECK(late == std::vector{1});
}

TEST_CASE_METHOD(Fixture, "deadlines a head that begins in a later read gets a new deadline",
                 "[deadlines]") {
    TestConn& c = make(1);
    CHECK_FALSE(read(c, kRequest, at(0)));
    CHECK(read(c, kHeadStart, at(40)));
    CHECK(c.clock.head_deadline() == at(70));
    CHECK_FALSE(read(c, kHeadRest, at(50)));
    CHECK(read(c, kHeadStart, at(60)));
    CHECK(c.clock.head_deadline() == at(90));
}

TEST_CASE_METHOD(Fixture, "deadlines linger() takes the connection off the idle and head lists",
                 "[deadlines]") {
    TestConn& c = make(1);
    CHECK(read(c, kHeadStart, at(0)));  // head due at 30, idle at 100
    d.linger(c, at(10));
    CHECK(c.lingering());
    CHECK(c.clock.linger_deadline() == at(60));
    CHECK_FALSE(c.idle_hook.linked());
    CHECK_FALSE(c.head_hook.linked());
    CHECK(d.next() == at(60));

    // Progress while lingering (discarded input) does not extend it.
    d.touch(c, at(20));
    CHECK(d.next() == at(60));
    expire(at(59));
    CHECK(late.empty());
    CHECK(closed.empty());
    expire(at(60));
    CHECK(closed == std::vector{1});
    CHECK(d.empty());
}

TEST_CASE_METHOD(Fixture, "deadlines forget() takes the connection off every list", "[deadlines]") {
    TestConn& a = make(1);
    TestConn& b = make(2);
    TestConn& never = make(3);
    CHECK(read(a, kHeadStart, at(0)));
    d.linger(b, at(0));
    Deadlines<TestConn>::forget(a);
    Deadlines<TestConn>::forget(b);
    Deadlines<TestConn>::forget(never);  // on no list: nothing happens
    CHECK_FALSE(a.idle_hook.linked());
    CHECK_FALSE(a.head_hook.linked());
    CHECK_FALSE(b.linger_hook.linked());
    CHECK(d.empty());
    CHECK(d.next() == Clock::time_point::max());
    expire(at(1000));
    CHECK(closed.empty());
    CHECK(late.empty());
}

TEST_CASE_METHOD(Fixture, "deadlines progressed touches instead of closing", "[deadlines]") {
    // libuv reports only whole writes: a connection sending a large response
    // to a slow reader looks idle while it is not. expire() asks first.
    TestConn& a = make(1);
    TestConn& b = make(2);
    d.touch(a, at(0));
    d.touch(b, at(10));
    d.expire(at(110), close(), head(), [](const TestConn& c) { return c.id == 1; });
    CHECK(closed == std::vector{2});
    CHECK(a.clock.last_active() == at(110));
    CHECK(d.next() == at(210));

    // Without progress it is closed like any other.
    expire(at(210));
    CHECK(closed == std::vector{2, 1});
}

TEST_CASE_METHOD(Fixture, "deadlines a connection waiting for the database is not idle",
                 "[deadlines]") {
    // Its request is in (a job out to the database, whose statement timeout
    // bounds the wait): the client waits for us, not we for it.
    const sm::http::ResponseCache db_cache(sm::http::ResponseMode::composed, 0,
                                           {true, sm::http::FortuneSource::database});
    const sm::runtime::SessionPool::Scope db_sessions(db_cache, env.limits);  // its session renders /db
    TestConn& waiting = conns.emplace_back();
    waiting.id = 1;
    TestConn& other = make(2);
    d.touch(waiting, at(0));
    d.touch(other, at(0));
    feed(waiting.session, "GET /db HTTP/1.1\r\nHost: t\r\n\r\n");
    REQUIRE(waiting.session.waiting());
    expire(at(100));
    CHECK(closed == std::vector{2});
    CHECK(waiting.clock.last_active() == at(100));

    // Once its response went out, it is idle like any other.
    sm::http::Job job;
    REQUIRE(waiting.session.next_job(job));
    sm::http::ByteBuffer out;
    waiting.session.complete(job, sm::http::JobResult::failed(sm::http::JobError::lost), out);
    expire(at(200));
    CHECK(closed == std::vector{2, 1});
}

TEST_CASE_METHOD(Fixture,
                 "deadlines block() trades the idle and head deadlines for --send-timeout",
                 "[deadlines]") {
    // A client mid-head whose responses back up: we stop reading it, so
    // neither its head nor its silence may count against it; only whether
    // it takes its output does.
    TestConn& c = make(1);
    TestConn& other = make(2);
    d.touch(other, at(0));  // idle: due at 100
    CHECK(read(c, std::string(kRequest) + std::string(kHeadStart), at(0)));  // head due at 30
    d.block(c, at(10));
    CHECK(c.blocked());
    CHECK_FALSE(c.head_hook.linked());
    CHECK(c.idle_hook.linked());  // on the sending list
    CHECK(d.next() == at(80));
    expire(at(79));
    CHECK(late.empty());
    CHECK(closed.empty());
    // The client takes a byte: progress moves its deadline.
    d.touch(c, at(50));
    CHECK(d.next() == at(100));  // the other's idle deadline first now
    expire(at(100));
    CHECK(closed == std::vector{2});
    CHECK(d.next() == at(120));
    // A feed while blocked (a completion model's recv already in flight)
    // starts no head deadline.
    CHECK_FALSE(d.track_head(c, at(60)));
    CHECK_FALSE(c.head_hook.linked());
    expire(at(120));
    CHECK(closed == std::vector{2, 1});
    CHECK(late.empty());
}

TEST_CASE_METHOD(Fixture,
                 "deadlines unblock() puts a connection back on the idle list with a fresh head "
                 "deadline",
                 "[deadlines]") {
    TestConn& c = make(1);
    CHECK(read(c, std::string(kRequest) + std::string(kHeadStart), at(0)));
    d.block(c, at(10));
    CHECK_FALSE(d.unblock(make(2), at(10)));  // not blocked: nothing
    // Reading resumes long after the head's first deadline would have passed.
    CHECK(d.unblock(c, at(200)));
    CHECK_FALSE(c.blocked());
    CHECK(c.head_hook.linked());
    CHECK(d.next() == at(230));
    expire(at(229));
    CHECK(late.empty());
    expire(at(230));
    CHECK(late == std::vector{1});
    CHECK(d.next() == at(300));  // idle from 200
    expire(at(300));
    CHECK(closed == std::vector{1});
}

TEST_CASE_METHOD(Fixture, "deadlines a blocked connection's hidden write progress keeps it",
                 "[deadlines]") {
    // libuv reports only whole writes: a slow reader that took part of one
    // since the last look is not out of time.
    TestConn& c = make(1);
    d.touch(c, at(0));
    d.block(c, at(0));
    d.expire(at(70), close(), head(), [](const TestConn&) { return true; });
    CHECK(closed.empty());
    CHECK(c.clock.last_active() == at(70));
    expire(at(140));
    CHECK(closed == std::vector{1});
}
