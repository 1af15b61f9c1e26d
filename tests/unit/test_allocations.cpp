// The hot path allocates nothing per request: once a session and its output
// buffer have grown to their working size, answering more requests (in any
// endpoint, method or mode, pipelined and split across reads) performs no
// heap allocation at all. Its own binary: it replaces the global operator new.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "support/count_allocations.hpp"
#include "http_test_support.hpp"
#include "runtime/session_slot.hpp"

using sm::test::g_allocations;

namespace {

using sm::http::ResponseMode;
using sm::test::SessionHarness;

std::string mixed_batch() {
    std::string in;
    for (int i = 0; i < 4; ++i) {
        in += "GET /plaintext HTTP/1.1\r\nHost: test\r\n\r\n";
        in += "GET /json HTTP/1.1\r\nHost: test\r\nAccept: application/json\r\n\r\n";
        in += "HEAD / HTTP/1.1\r\nHost: test\r\n\r\n";
        in += "GET /nothing-here?x=1 HTTP/1.1\r\nHost: test\r\n\r\n";
        in += "POST /json HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello";
        in +=
            "POST /plaintext HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
            "3;x=y\r\nabc\r\n0\r\n\r\n";
        in += "GET http://example.test/json HTTP/1.1\r\nHost: example.test\r\n\r\n";
    }
    return in;
}

}  // namespace

TEST_CASE("session answers requests without allocating", "[allocations][session]") {
    const auto mode = GENERATE(ResponseMode::composed, ResponseMode::cached);
    INFO("mode " << sm::http::to_string(mode));
    const std::string batch = mixed_batch();
    SessionHarness h({}, mode);
    // Warm up: the output buffer grows to the size of one batch's responses.
    REQUIRE(h.feed(batch) == sm::http::Session::Result::open);
    const std::size_t answered = h.session.responses();
    REQUIRE(answered == 28);

    const std::size_t before = g_allocations.load();
    for (int round = 0; round < 200; ++round) {
        h.out.clear();
        // Whole, and split into uneven reads (a request straddling two reads).
        if (round % 2 == 0) {
            h.feed(batch);
        } else {
            for (std::size_t at = 0; at < batch.size(); at += 37)
                h.feed(std::string_view(batch).substr(at, 37));
        }
    }
    const std::size_t allocations = g_allocations.load() - before;
    CHECK(h.session.responses() == answered * 201);
    CHECK(allocations == 0);
}

TEST_CASE("a connection's session slot answers requests without allocating: its session comes "
          "from the thread's pool and goes back between requests",
          "[allocations][session_slot]") {
    const std::string batch = mixed_batch();
    sm::http::ResponseCache cache(ResponseMode::composed, sm::test::kRfcExampleSecond);
    const sm::http::Limits limits;
    const sm::runtime::SessionPool::Scope scope(cache, limits);
    std::vector<sm::runtime::SessionSlot> slots(64);  // connections served in turn
    sm::http::ByteBuffer out;
    const auto feed = [&](sm::runtime::SessionSlot& s, std::string_view bytes) {
        s.feed(std::span<const char>(bytes.data(), bytes.size()), out);
    };
    // Warm up: the output buffer grows to a batch's responses, and the pool
    // makes the sessions a head split across reads holds at once.
    for (auto& s : slots) {
        feed(s, batch);
        feed(s, std::string_view(batch).substr(0, 20));
    }
    for (auto& s : slots)
        feed(s, std::string_view(batch).substr(20));
    out.clear();
    const std::size_t before = g_allocations.load();
    for (int round = 0; round < 50; ++round) {
        for (auto& s : slots) {
            out.clear();
            if (round % 2 == 0) {
                feed(s, batch);
            } else {
                for (std::size_t at = 0; at < batch.size(); at += 37)
                    feed(s, std::string_view(batch).substr(at, 37));
            }
            CHECK_FALSE(s.holds());  // between requests: no session
        }
    }
    CHECK(g_allocations.load() - before == 0);
    CHECK(sm::runtime::SessionPool::current().made() == slots.size());
}

TEST_CASE("response cache refreshes the Date without allocating", "[allocations][response]") {
    const auto mode = GENERATE(ResponseMode::composed, ResponseMode::cached);
    sm::http::ResponseCache cache(mode, 1'000'000'000);
    const std::size_t before = g_allocations.load();
    for (std::time_t t = 1'000'000'001; t < 1'000'000'101; ++t)
        REQUIRE(cache.refresh(t));
    CHECK(g_allocations.load() - before == 0);
}

TEST_CASE("session answers the workloads without allocating once warm", "[allocations][work]") {
    // /fortunes from memory, and /db, /queries and /fortunes as jobs whose
    // responses wait behind each other, completed out of order.
    const auto mode = GENERATE(ResponseMode::composed, ResponseMode::cached);
    SessionHarness h({}, mode, sm::test::kRfcExampleSecond,
                     {true, sm::http::FortuneSource::database});
    SessionHarness memory({}, mode);
    std::string batch;
    for (int i = 0; i < 3; ++i) {
        batch += "GET /db HTTP/1.1\r\nHost: t\r\n\r\n";
        batch += "GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n";
        batch += "GET /queries?queries=20 HTTP/1.1\r\nHost: t\r\n\r\n";
        batch += "GET /fortunes HTTP/1.1\r\nHost: t\r\n\r\n";
    }
    const std::string page = "GET /fortunes HTTP/1.1\r\nHost: t\r\n\r\n";
    std::vector<sm::http::WorldRow> rows(20, sm::http::WorldRow{1, 2});
    std::vector<sm::http::Job> jobs;
    jobs.reserve(16);
    auto round = [&] {
        h.out.clear();
        memory.out.clear();
        h.feed(batch);
        jobs.clear();
        sm::http::Job j;
        while (h.session.next_job(j))
            jobs.push_back(j);
        for (auto it = jobs.rbegin(); it != jobs.rend(); ++it)
            h.session.complete(*it, {{rows.data(), it->count}, sm::http::builtin_fortunes(), {}},
                               h.out);
        memory.feed(page);
    };
    round();  // warm up: the held entries, their buffers and the cache's scratch grow
    REQUIRE(jobs.size() == 9);
    const std::size_t before = g_allocations.load();
    for (int i = 0; i < 100; ++i)
        round();
    CHECK(g_allocations.load() - before == 0);
    CHECK(h.session.responses() == 12 * 101);
    CHECK(memory.session.responses() == 101);
}

TEST_CASE("session defers and renders a flood without allocating once warm",
          "[allocations][session]") {
    // A client that pipelines past its output limit: the same request over
    // and over is one deferred entry, rendered a limit's worth at a time.
    const std::string one = "GET /plaintext HTTP/1.1\r\nHost: test\r\n\r\n";
    std::string flood;
    for (int i = 0; i < 1000; ++i)
        flood += one;
    SessionHarness h;
    auto round = [&] {
        h.out.clear();
        h.session.feed(std::span<const char>(flood.data(), flood.size()), h.out, 4096);
        while (h.session.deferred()) {
            h.out.clear();
            h.session.resume(h.out, 4096);
        }
    };
    round();  // warm up: the output buffer and the deferred queue grow once
    const std::size_t before = g_allocations.load();
    for (int i = 0; i < 50; ++i)
        round();
    CHECK(g_allocations.load() - before == 0);
    CHECK(h.session.responses() == 1000 * 51);
}

TEST_CASE("allocations the counter sees an allocation", "[allocations]") {
    // Else every "no allocation" above would pass however much is allocated.
    const std::size_t before = g_allocations.load();
    void* p = ::operator new(16);  // a call, not a new-expression: never elided
    const std::size_t counted = g_allocations.load() - before;
    ::operator delete(p);
    CHECK(counted == 1);
}
