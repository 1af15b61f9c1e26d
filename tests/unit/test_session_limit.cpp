// http::Session's output limit: responses past it are deferred, not
// rendered, and resume() renders them once the model has room. What a model
// relies on: the same bytes as without a limit, in order, whatever the limit
// and however the input is split; never more than the limit plus one
// response in the output per call; a flood deferred in a few bytes; and the
// session's end (Connection: close, an error, a graceful stop) where the
// client would see it without a limit. Responses are parsed back with llhttp
// in response mode (http_test_support.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "http/work.hpp"
#include "http_test_support.hpp"

using Result = sm::http::Session::Result;
using sm::http::Session;
using sm::test::SessionHarness;

namespace {

std::string get(std::string_view target, std::string_view extra = "") {
    return "GET " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n" + std::string(extra) + "\r\n";
}

// Every kind of answer a session gives while it stays open: the endpoints,
// HEAD, 404, 405 (with a body to skip), a chunked body, absolute form.
std::string mixed() {
    std::string in;
    for (int i = 0; i < 6; ++i) {
        in += get("/plaintext");
        in += get("/json");
        in += "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n";
        in += get("/nothing-here?x=1");
        in += "POST /json HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello";
        in += "POST /plaintext HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
              "3;x=y\r\nabc\r\n0\r\n\r\n";
        in += get("http://example.test/json");
        in += get("/fortunes");
    }
    return in;
}

std::string unlimited(std::string_view in) {
    SessionHarness h;
    h.feed(in);
    return std::string(h.out.view());
}

// The largest single response in `whole` (what one call may overshoot by).
// Which responses of mixed() answer a HEAD.
std::vector<bool> mixed_heads() {
    std::vector<bool> heads;
    for (int i = 0; i < 6; ++i)
        for (int k = 0; k < 8; ++k)
            heads.push_back(k == 2);
    return heads;
}

std::size_t largest_response(std::string_view whole) {
    const auto s = sm::test::parse_responses(whole, mixed_heads());
    std::size_t most = 0;
    for (const auto& r : s.responses)
        most = std::max(most, r.raw.size());
    return most;
}

// Feeds `in` in reads of `read` bytes with `limit`, as a model does: a read
// only when nothing is deferred, the output taken (sent) after every call,
// resume() whenever something is deferred. Returns everything sent.
struct Drive {
    std::string sent;
    std::size_t most_per_call = 0;  // the largest output of one call
    std::size_t calls = 0;
};
Drive drive(SessionHarness& h, std::string_view in, std::size_t read, std::size_t limit) {
    Drive d;
    auto take = [&] {
        d.most_per_call = std::max(d.most_per_call, h.out.size());
        d.sent += h.out.view();
        h.out.clear();
        ++d.calls;
    };
    std::size_t at = 0;
    while (at < in.size() || h.session.deferred()) {
        if (h.session.deferred()) {
            h.session.resume(h.out, limit);
        } else {
            const auto chunk = in.substr(at, read);
            at += chunk.size();
            h.session.feed(std::span<const char>(chunk.data(), chunk.size()), h.out, limit);
        }
        take();
        REQUIRE(d.calls < 1'000'000);
    }
    return d;
}

// What a session that has closed (feed() said so) sends from here on: the
// output so far, then every deferred response, resume() saying close each time.
std::string sent_after_close(SessionHarness& h, std::size_t limit) {
    std::string sent(h.out.view());
    h.out.clear();
    while (h.session.deferred()) {
        CHECK(h.session.resume(h.out, limit) == Result::close);
        sent += h.out.view();
        h.out.clear();
    }
    return sent;
}

}  // namespace

TEST_CASE("session output limit defers responses and resume renders the same bytes in order",
          "[session][limit]") {
    const std::string in = mixed();
    const std::string whole = unlimited(in);
    REQUIRE(sm::test::parse_responses(whole, mixed_heads()).size() == 48);
    const std::size_t largest = largest_response(whole);
    const std::size_t limit = GENERATE(1, 100, 200, 333, 1000, 4096, 100000);
    const std::size_t read = GENERATE(7, 64, 1000, 100000);
    INFO("limit " << limit << ", reads of " << read);
    SessionHarness h;
    const Drive d = drive(h, in, read, limit);
    CHECK(d.sent == whole);
    // One response may start under the limit and end past it; no more.
    CHECK(d.most_per_call < std::max(limit, std::size_t{1}) + largest);
    CHECK_FALSE(h.session.deferred());
    CHECK(h.session.idle());
    CHECK(h.session.responses() == 48);
}

TEST_CASE("session output limit: a flood of one request is deferred in a few bytes",
          "[session][limit]") {
    // 64 KiB of the shortest request: ~234 KiB of responses, of which 4 KiB
    // are rendered.
    const std::string one = "GET /plaintext HTTP/1.1\r\nHost: a\r\n\r\n";
    std::string flood;
    while (flood.size() + one.size() <= 64 * 1024)
        flood += one;
    const std::size_t n = flood.size() / one.size();
    SessionHarness h;
    CHECK(h.session.feed(std::span<const char>(flood.data(), flood.size()), h.out, 4096) ==
          Result::open);
    CHECK(h.out.size() >= 4096);
    CHECK(h.out.size() < 4096 + 200);
    CHECK(h.session.deferred());
    CHECK(h.session.owes());
    CHECK_FALSE(h.session.idle());
    CHECK(h.session.deferred_memory() <= 64);
    std::size_t answered = sm::test::parse_responses(h.out.view()).size();
    while (h.session.deferred()) {
        h.out.clear();
        h.session.resume(h.out, 4096);
        const auto s = sm::test::parse_responses(h.out.view());
        REQUIRE(s.ok());
        answered += s.size();
    }
    CHECK(answered == n);
    CHECK(h.session.deferred_memory() <= 64);
    CHECK(h.session.idle());
}

TEST_CASE("session output limit: alternating requests are bounded by one read's requests",
          "[session][limit]") {
    // The worst case for the runs: no two neighbours alike. Each deferred
    // answer then costs an entry; still a fraction of the input read.
    std::string in;
    while (in.size() < 64 * 1024)
        in += get("/plaintext") + get("/json");
    SessionHarness h;
    h.session.feed(std::span<const char>(in.data(), in.size()), h.out, 4096);
    CHECK(h.session.deferred());
    const std::size_t requests = 2 * (in.size() / (get("/plaintext") + get("/json")).size());
    INFO(requests << " requests in " << in.size() << " bytes; deferred entries hold "
                  << h.session.deferred_memory() << " bytes");
    CHECK(h.session.deferred_memory() < in.size() / 2);
    CHECK(h.session.deferred_memory() >= requests * 4);  // it is an entry each
}

TEST_CASE("session output limit: the session ends where it would without the limit",
          "[session][limit]") {
    SECTION("Connection: close deferred: feed says close, nothing after it is answered") {
        std::string in;
        for (int i = 0; i < 20; ++i)
            in += get("/plaintext");
        in += get("/json", "Connection: close\r\n") + get("/plaintext");
        SessionHarness h;
        CHECK(h.session.feed(std::span<const char>(in.data(), in.size()), h.out, 300) ==
              Result::close);
        CHECK(h.session.closed());
        CHECK(h.session.owes());  // the model must not close before it is rendered
        const std::string sent = sent_after_close(h, 300);
        CHECK_FALSE(h.session.owes());
        const auto s = sm::test::parse_responses(sent);
        REQUIRE(s.ok());
        REQUIRE(s.size() == 21);
        CHECK(s[20].body == sm::test::kJsonBody);
        CHECK(s[20].header("Connection") == "close");
    }
    SECTION("an error deferred behind good requests: answered last, with its detail") {
        std::string in;
        for (int i = 0; i < 20; ++i)
            in += get("/plaintext");
        in += "GET /plaintext HTTP/1.1\r\nHost: t\r\nNo Colon\r\n\r\n" + get("/plaintext");
        const std::string whole = unlimited(in);
        SessionHarness h;
        CHECK(h.session.feed(std::span<const char>(in.data(), in.size()), h.out, 300) ==
              Result::close);
        const std::string sent = sent_after_close(h, 300);
        CHECK(sent == whole);
        const auto s = sm::test::parse_responses(sent);
        REQUIRE(s.size() == 21);
        CHECK(s[20].status == 400);
        CHECK(s[20].body.find(": ") != std::string::npos);  // the detail is there
        CHECK(s[20].header("Connection") == "close");
    }
    SECTION("a graceful stop: the next response rendered closes, the deferred rest is dropped") {
        std::string in;
        for (int i = 0; i < 20; ++i)
            in += get("/plaintext");
        SessionHarness h;
        CHECK(h.session.feed(std::span<const char>(in.data(), in.size()), h.out, 300) ==
              Result::open);
        const std::size_t first = sm::test::parse_responses(h.out.view()).size();
        REQUIRE(first < 20);
        h.out.clear();
        h.session.request_close();
        CHECK(h.session.resume(h.out, 300) == Result::close);
        const auto s = sm::test::parse_responses(h.out.view());
        REQUIRE(s.ok());
        REQUIRE(s.size() == 1);
        CHECK(s[0].header("Connection") == "close");
        CHECK_FALSE(h.session.deferred());
        CHECK_FALSE(h.session.owes());
    }
    SECTION("reset forgets what was deferred, and its memory") {
        std::string in;
        for (int i = 0; i < 20; ++i)
            in += get(i % 2 ? "/json" : "/plaintext");
        SessionHarness h;
        h.session.feed(std::span<const char>(in.data(), in.size()), h.out, 300);
        REQUIRE(h.session.deferred());
        h.session.reset();
        CHECK_FALSE(h.session.deferred());
        CHECK(h.session.deferred_memory() == 0);
        CHECK(h.session.idle());
    }
}

TEST_CASE("session output limit: a limit already reached defers everything", "[session][limit]") {
    SessionHarness h;
    h.out.append(std::string(500, 'x'));
    h.session.feed(std::span<const char>(get("/plaintext").data(), get("/plaintext").size()),
                   h.out, 500);
    CHECK(h.out.size() == 500);
    CHECK(h.session.deferred());
    h.out.clear();
    h.session.resume(h.out, 500);
    CHECK_FALSE(h.session.deferred());
    const auto s = sm::test::parse_responses(h.out.view());
    REQUIRE(s.size() == 1);
    CHECK(s[0].body == sm::test::kPlaintextBody);
}

TEST_CASE("session output limit holds back jobs too, and keeps them in order", "[session][limit]") {
    SessionHarness h({}, sm::http::ResponseMode::composed, sm::test::kRfcExampleSecond,
                     {true, sm::http::FortuneSource::database});
    // Many /db requests in one read: each held job counts against the limit,
    // so a flood of them is deferred, not queued whole.
    std::string in;
    for (int i = 0; i < 100; ++i)
        in += get("/db") + get("/plaintext");
    h.session.feed(std::span<const char>(in.data(), in.size()), h.out, 8 * 1024);
    CHECK(h.session.deferred());
    std::size_t jobs = 0;
    std::string sent;
    const sm::http::WorldRow row{7, 8};
    for (int round = 0; round < 10'000 && h.session.owes(); ++round) {
        sm::http::Job job;
        std::vector<sm::http::Job> taken;
        while (h.session.next_job(job))
            taken.push_back(job);
        CHECK(taken.size() <= 9);  // 8 KiB of room at 1 KiB a job, and one to overshoot
        jobs += taken.size();
        for (const auto& j : taken)
            h.session.complete(j, {{&row, 1}, {}, {}}, h.out);
        if (!h.session.waiting()) h.session.resume(h.out, 8 * 1024);
        sent += h.out.view();
        h.out.clear();
    }
    CHECK(jobs == 100);
    const auto s = sm::test::parse_responses(sent);
    REQUIRE(s.ok());
    REQUIRE(s.size() == 200);
    for (std::size_t i = 0; i < s.size(); ++i) {
        INFO("response " << i);
        CHECK(s[i].body == (i % 2 == 0 ? R"({"id":7,"randomNumber":8})"
                                       : std::string(sm::test::kPlaintextBody)));
    }
}
