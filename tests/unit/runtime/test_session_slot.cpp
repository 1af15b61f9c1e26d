// runtime::SessionSlot and SessionPool: a connection holds a session only
// while a request is in progress, a response is owed or it is ending; the
// sessions come from the thread's pool and go back to it.
#include <catch2/catch.hpp>

#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/work.hpp"
#include "runtime/session_slot.hpp"
#include "runtime/tuning.hpp"
#include "runtime_test_support.hpp"

using sm::http::ByteBuffer;
using sm::runtime::SessionPool;
using sm::runtime::SessionSlot;
using sm::test::kHeadRest;
using sm::test::kHeadStart;
using sm::test::kRequest;

namespace {

SessionSlot::Result feed(SessionSlot& s, std::string_view bytes, ByteBuffer& out) {
    return s.feed(std::span<const char>(bytes.data(), bytes.size()), out);
}

// This thread's pool, a connection's slot and its output.
struct Slot {
    sm::test::SessionEnv env;  // first: the pool the others take from
    SessionPool& pool = SessionPool::current();
    SessionSlot slot;
    ByteBuffer out;
};

}  // namespace

TEST_CASE_METHOD(Slot,
                 "session slot: a whole request is answered and its session goes back to the pool",
                 "[session_slot]") {
    CHECK_FALSE(slot.holds());
    CHECK(slot.idle());
    CHECK(feed(slot, kRequest, out) == SessionSlot::Result::open);
    CHECK(out.view().starts_with("HTTP/1.1 200 OK\r\n"));
    CHECK_FALSE(slot.holds());  // idle again: given back
    CHECK(pool.kept() == 1);
    CHECK(pool.made() == 1);
    // The next requests, here and on another connection, reuse it.
    SessionSlot other;
    for (int i = 0; i < 10; ++i) {
        feed(slot, kRequest, out);
        feed(other, kRequest, out);
    }
    CHECK(pool.made() == 1);
    CHECK(pool.kept() == 1);
}

TEST_CASE_METHOD(Slot,
                 "session slot: a head split across reads keeps its session, and its state, until it ends",
                 "[session_slot]") {
    feed(slot, kHeadStart, out);
    CHECK(slot.holds());
    CHECK(slot.in_head());
    CHECK_FALSE(slot.idle());
    CHECK(out.empty());
    CHECK(pool.kept() == 0);
    feed(slot, kHeadRest, out);
    CHECK(out.view().starts_with("HTTP/1.1 200 OK\r\n"));
    CHECK_FALSE(slot.holds());
    // A read that ends inside the next head keeps it.
    const std::string one_and_a_half = std::string(kRequest) + std::string(kHeadStart);
    feed(slot, one_and_a_half, out);
    CHECK(slot.holds());
    CHECK(slot.in_head());
}

TEST_CASE_METHOD(Slot,
                 "session slot: a session that ended (an error, Connection: close) stays until reset",
                 "[session_slot]") {
    CHECK(feed(slot, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", out) ==
          SessionSlot::Result::close);
    CHECK(slot.holds());
    CHECK(slot.closed());
    // Further input is not answered.
    out.clear();
    CHECK(feed(slot, kRequest, out) == SessionSlot::Result::close);
    CHECK(out.empty());
    slot.reset();  // the connection is recycled
    CHECK_FALSE(slot.holds());
    CHECK(pool.kept() == 1);
    // The next connection starts afresh.
    CHECK(feed(slot, kRequest, out) == SessionSlot::Result::open);
    CHECK(out.view().starts_with("HTTP/1.1 200 OK\r\n"));
}

TEST_CASE_METHOD(Slot, "session slot: the graceful stop takes a session to carry Connection: close",
                 "[session_slot]") {
    feed(slot, kRequest, out);
    REQUIRE_FALSE(slot.holds());
    slot.request_close();
    CHECK(slot.holds());
    CHECK(slot.idle());  // a stopping model may close it at once
    out.clear();
    CHECK(feed(slot, kRequest, out) == SessionSlot::Result::close);
    CHECK(out.view().find("Connection: close\r\n") != std::string_view::npos);
}

TEST_CASE("session slot: a job out keeps the session; a job of an earlier session is ignored",
          "[session_slot]") {
    sm::test::SessionEnv env;
    const sm::http::ResponseCache db_cache(sm::http::ResponseMode::composed, 0,
                                           {true, sm::http::FortuneSource::database});
    const SessionPool::Scope db_sessions(db_cache, env.limits);
    SessionSlot slot;
    ByteBuffer out;
    feed(slot, "GET /db HTTP/1.1\r\nHost: x\r\n\r\n", out);
    CHECK(slot.holds());
    CHECK(slot.waiting());
    sm::http::Job first;
    REQUIRE(slot.next_job(first));
    const sm::http::WorldRow row{1, 2};
    slot.complete(first, {.worlds = std::span(&row, 1), .fortunes = {}}, out);
    CHECK(out.view().find("\"randomNumber\":2") != std::string_view::npos);
    CHECK_FALSE(slot.holds());  // answered: given back

    // The next request's job, from a session the slot took again (the same
    // object, from the pool), is not the first one's.
    out.clear();
    feed(slot, "GET /db HTTP/1.1\r\nHost: x\r\n\r\n", out);
    sm::http::Job second;
    REQUIRE(slot.next_job(second));
    CHECK(second.epoch != first.epoch);
    slot.complete(first, {.worlds = std::span(&row, 1), .fortunes = {}}, out);  // stale: ignored
    CHECK(out.empty());
    CHECK(slot.waiting());
    slot.complete(second, {.worlds = std::span(&row, 1), .fortunes = {}}, out);
    CHECK_FALSE(out.empty());
    CHECK_FALSE(slot.holds());
    // Without a session, a completion has nothing to go to.
    slot.complete(second, {.worlds = std::span(&row, 1), .fortunes = {}}, out);
    CHECK_FALSE(slot.holds());
}

TEST_CASE_METHOD(Slot, "session pool: at most kSparesKept sessions are kept", "[session_slot]") {
    std::vector<SessionSlot> slots(sm::runtime::kSparesKept + 5);
    for (SessionSlot& s : slots)
        feed(s, kHeadStart, out);  // each holds one
    CHECK(pool.made() == slots.size());
    for (SessionSlot& s : slots)
        s.reset();
    CHECK(pool.kept() == sm::runtime::kSparesKept);
}

TEST_CASE_METHOD(Slot, "session slot: a late head gets the session's 408, with or without a session here",
                 "[session_slot]") {
    feed(slot, kHeadStart, out);
    slot.expire_head(out);
    CHECK(out.view().starts_with("HTTP/1.1 408 Request Timeout\r\n"));
    CHECK(slot.closed());
    // A slot between requests answers as an idle session would.
    SessionSlot idle;
    ByteBuffer idle_out;
    idle.expire_head(idle_out);
    CHECK(idle_out.view().starts_with("HTTP/1.1 408 Request Timeout\r\n"));
    CHECK(idle.closed());
}

TEST_CASE_METHOD(Slot, "session slot: bind renders the session it holds with another thread's cache",
                 "[session_slot]") {
    // server-threadpool: a worker binds its own cache before it feeds a
    // connection whose session another worker took (mid-head).
    const sm::http::ResponseCache other(sm::http::ResponseMode::composed, 784111777);
    feed(slot, kHeadStart, out);
    REQUIRE(slot.holds());
    slot.bind(other);
    feed(slot, kHeadRest, out);
    CHECK(out.view().find("Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n") != std::string_view::npos);
    // Taken again from this thread's pool: bound to its cache.
    out.clear();
    feed(slot, kRequest, out);
    CHECK(out.view().find("Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n") != std::string_view::npos);
    SessionSlot none;
    none.bind(other);  // nothing held: nothing to bind
    CHECK_FALSE(none.holds());
}

TEST_CASE_METHOD(Slot, "session slot: a session given back on a thread without a pool is freed",
                 "[session_slot]") {
    // A thread that serves no connection (server-threadpool's reactor
    // closing one) has no pool.
    feed(slot, kHeadStart, out);
    REQUIRE(slot.holds());
    std::thread([this] { slot.reset(); }).join();
    CHECK_FALSE(slot.holds());
    CHECK(pool.kept() == 0);  // not this thread's to keep
}
