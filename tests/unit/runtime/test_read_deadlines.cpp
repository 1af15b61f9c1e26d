// runtime::ReadDeadlines: the idle and head deadlines as the timeout of the
// next blocking read (server-blocking). Time is explicit; the session is fed
// real bytes. Timeouts: idle 100 ms, header 30 ms (test_options()).
#include <catch2/catch.hpp>

#include <chrono>

#include "http/session.hpp"
#include "runtime/read_deadlines.hpp"
#include "runtime_test_support.hpp"

using namespace std::chrono_literals;
using Next = sm::runtime::ReadDeadlines::Next;
using sm::runtime::ReadDeadlines;
using sm::test::at;
using sm::test::feed;
using sm::test::kHeadRest;
using sm::test::kHeadStart;
using sm::test::kRequest;

namespace {

struct Fixture : sm::test::SessionFixture {
    ReadDeadlines d{sm::test::test_options()};
    std::chrono::milliseconds wait{};

    void read(std::string_view bytes, sm::runtime::Clock::time_point now) {
        feed(session, bytes);
        d.fed(session, now);
    }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "read_deadlines outside a head a read waits the idle timeout",
                 "[read_deadlines]") {
    CHECK(d.next(at(0), wait) == Next::read);
    CHECK(wait == 100ms);
    read(kRequest, at(10));  // answered: no head in progress
    CHECK_FALSE(d.in_head());
    CHECK(d.next(at(500), wait) == Next::read);
    CHECK(wait == 100ms);
}

TEST_CASE_METHOD(Fixture, "read_deadlines inside a head a read waits until the head's deadline",
                 "[read_deadlines]") {
    read(kHeadStart, at(0));
    REQUIRE(d.in_head());
    CHECK(d.next(at(10), wait) == Next::read);
    CHECK(wait == 20ms);  // the head's deadline (30 ms) comes before the idle one (100 ms)
    CHECK(d.next(at(30), wait) == Next::head_late);
}

TEST_CASE_METHOD(Fixture, "read_deadlines trickled bytes of one head do not move its deadline",
                 "[read_deadlines]") {
    read(kHeadStart, at(0));
    read("s", at(20));  // still the same head (slowloris trickle)
    REQUIRE(d.in_head());
    CHECK(d.next(at(25), wait) == Next::read);
    CHECK(wait == 5ms);
    CHECK(d.next(at(30), wait) == Next::head_late);
}

TEST_CASE_METHOD(Fixture, "read_deadlines a new head gets a deadline of its own",
                 "[read_deadlines]") {
    read(kHeadStart, at(0));
    // Ends that head, answers it and begins the next one in the same read.
    std::string bytes(kHeadRest);
    bytes += kHeadStart;
    read(bytes, at(25));
    REQUIRE(d.in_head());
    CHECK(d.next(at(40), wait) == Next::read);
    CHECK(wait == 15ms);  // 25 + 30
    CHECK(d.next(at(55), wait) == Next::head_late);
}

TEST_CASE("read_deadlines a quiet head is idle before its deadline when idle is shorter",
          "[read_deadlines]") {
    sm::test::SessionEnv env;
    sm::http::Session session{env.cache, env.limits};
    auto o = sm::test::test_options();
    o.idle_timeout = 20ms;  // shorter than the head's 30 ms
    ReadDeadlines d{o};
    std::chrono::milliseconds wait{};
    feed(session, kHeadStart);
    d.fed(session, at(0));
    CHECK(d.next(at(5), wait) == Next::read);
    CHECK(wait == 15ms);
    CHECK(d.next(at(20), wait) == Next::idle);
}
