// runtime/send_buffers.hpp: the two output buffers of server-uring and
// server-iocp, swapped only when nothing is in flight, trimmed after a backlog,
// and when such a connection receives.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "http/byte_buffer.hpp"
#include "runtime/deadlines.hpp"
#include "runtime/send_buffers.hpp"
#include "runtime_test_support.hpp"

using sm::http::ByteBuffer;
using sm::runtime::kKeepCapacity;

namespace {

struct Conn {
    ByteBuffer out;
    ByteBuffer sending;
    bool lingered = false;
    bool want_close = false;
    bool peer_closed = false;
    [[nodiscard]] bool lingering() const noexcept { return lingered; }
};

}  // namespace

TEST_CASE("take_collected: the collected responses become the next send, in one",
          "[send_buffers]") {
    sm::runtime::SpareBuffers spare;
    Conn c;
    c.out.append("first");
    c.out.append("second");
    sm::runtime::take_collected(c, spare);
    CHECK(c.sending.view() == "firstsecond");
    CHECK(c.out.empty());
    CHECK(sm::runtime::output_of(c) == 11);
}

TEST_CASE("take_collected: nothing moves while the last send is unfinished", "[send_buffers]") {
    sm::runtime::SpareBuffers spare;
    Conn c;
    c.sending.append("in flight");
    c.out.append("next");
    sm::runtime::take_collected(c, spare);
    CHECK(c.sending.view() == "in flight");
    CHECK(c.out.view() == "next");
    CHECK(sm::runtime::output_of(c) == 13);
}

TEST_CASE("take_collected: a buffer a backlog grew gives its memory back once drained",
          "[send_buffers]") {
    sm::runtime::SpareBuffers spare;
    Conn c;
    const std::string backlog(2 * kKeepCapacity, 'x');
    c.sending.append(backlog);  // sent by now: the drained buffer is `sending`
    c.sending.clear();
    CHECK(c.sending.capacity() > kKeepCapacity);
    c.out.append("next");
    sm::runtime::take_collected(c, spare);
    CHECK(c.sending.view() == "next");
    CHECK(c.out.capacity() == 0);  // the grown one, now collecting, was released

    // A small one keeps its memory for the next responses.
    Conn small;
    small.sending.append("sent");
    small.sending.clear();
    const std::size_t kept = small.sending.capacity();
    small.out.append("next");
    sm::runtime::take_collected(small, spare);
    CHECK(small.out.capacity() == kept);
}

TEST_CASE("take_collected: with nothing collected both buffers go to the spares, and feed_limit "
          "takes one back: an idle connection holds no output memory, and no request allocates",
          "[send_buffers]") {
    sm::runtime::SpareBuffers spare;
    Conn c;
    c.out.append("a response");
    sm::runtime::take_collected(c, spare);
    REQUIRE(sm::runtime::consume_sent(c, c.sending.size()));  // sent
    const char* memory = c.sending.data();
    sm::runtime::take_collected(c, spare);  // nothing collected since
    CHECK(c.sending.capacity() == 0);
    CHECK(c.out.capacity() == 0);
    CHECK(spare.kept() == 1);  // the one that had memory
    // The next request's responses go into that same memory.
    (void)sm::runtime::feed_limit(c, 40, 32 * 1024, spare);
    CHECK(c.out.capacity() > 0);
    CHECK(c.out.data() == memory);
    CHECK(spare.kept() == 0);
    // Without spares, it stays without memory until a response grows it.
    Conn other;
    (void)sm::runtime::feed_limit(other, 40, 32 * 1024, spare);
    CHECK(other.out.capacity() == 0);
}

TEST_CASE("SpareBuffers keeps at most kSparesKept buffers and frees the rest", "[send_buffers]") {
    sm::runtime::SpareBuffers spare;
    for (std::size_t i = 0; i < sm::runtime::kSparesKept + 3; ++i) {
        ByteBuffer b;
        b.append("x");
        spare.give(b);
        CHECK(b.capacity() == 0);
        CHECK(b.empty());
    }
    CHECK(spare.kept() == sm::runtime::kSparesKept);
    ByteBuffer none;
    spare.give(none);  // nothing to keep
    CHECK(spare.kept() == sm::runtime::kSparesKept);
}

TEST_CASE("trim empties a buffer and keeps at most the memory asked for", "[send_buffers]") {
    ByteBuffer big;
    big.append(std::string(8192, 'x'));
    sm::runtime::trim(big, 4096);
    CHECK(big.empty());
    CHECK(big.capacity() == 0);
    ByteBuffer small;
    small.append("abc");
    const std::size_t cap = small.capacity();
    sm::runtime::trim(small, 4096);
    CHECK(small.empty());
    CHECK(small.capacity() == cap);
}

TEST_CASE("consume_sent: a short send leaves the rest, and only bytes sent are progress",
          "[send_buffers]") {
    Conn c;
    c.sending.append("0123456789");
    CHECK(sm::runtime::consume_sent(c, 4));
    CHECK(c.sending.view() == "456789");
    CHECK_FALSE(sm::runtime::consume_sent(c, 0));
    CHECK(c.sending.view() == "456789");
    // More than is left (a completion never reports that; iocp clamps): all gone.
    CHECK(sm::runtime::consume_sent(c, 100));
    CHECK(c.sending.empty());
}

TEST_CASE("wants_receive: a receive while the output is under the mark, one at a time",
          "[send_buffers]") {
    using sm::runtime::wants_receive;
    Conn c;
    CHECK(wants_receive(c, false, true));
    CHECK_FALSE(wants_receive(c, true, true));    // one is posted already
    CHECK_FALSE(wants_receive(c, false, false));  // the output is over the mark: paused
}

TEST_CASE(
    "wants_receive: nothing after the session ended or the client's EOF; a lingering "
    "connection reads until EOF whatever its output",
    "[send_buffers]") {
    using sm::runtime::wants_receive;
    Conn ended;
    ended.want_close = true;
    CHECK_FALSE(wants_receive(ended, false, true));

    Conn eof;
    eof.peer_closed = true;
    CHECK_FALSE(wants_receive(eof, false, true));

    Conn lingering;
    lingering.lingered = true;
    lingering.want_close = true;
    CHECK(wants_receive(lingering, false, false));
    CHECK_FALSE(wants_receive(lingering, true, false));
    lingering.peer_closed = true;  // the client's EOF ends the linger's reading too
    CHECK_FALSE(wants_receive(lingering, false, false));
}

TEST_CASE("feed_limit: the mark with no send in flight, nothing while one is; a read that may "
          "be answered with more than kKeepCapacity reserves the mark at once",
          "[send_buffers]") {
    sm::runtime::SpareBuffers spare;
    using sm::runtime::feed_limit;
    Conn c;
    CHECK(feed_limit(c, 600, 32 * 1024, spare) == 32 * 1024);  // a 16-deep pipeline: nothing reserved
    CHECK(c.out.capacity() == 0);
    CHECK(feed_limit(c, 8192, 32 * 1024, spare) == 32 * 1024);  // a flood's read
    CHECK(c.out.capacity() == 32 * 1024 + sm::runtime::kResponseSlack);
    c.sending.append("in flight");
    CHECK(feed_limit(c, 8192, 32 * 1024, spare) == 0);
}

TEST_CASE("consume_sent: a drained buffer grown past kKeepCapacity is freed at once",
          "[send_buffers]") {
    Conn c;
    c.sending.append(std::string(2 * kKeepCapacity, 'x'));
    REQUIRE(sm::runtime::consume_sent(c, kKeepCapacity));
    CHECK(c.sending.capacity() >= 2 * kKeepCapacity);  // not drained: kept
    REQUIRE(sm::runtime::consume_sent(c, kKeepCapacity));
    CHECK(c.sending.capacity() == 0);
    Conn small;
    small.sending.append("small");
    REQUIRE(sm::runtime::consume_sent(small, 5));
    CHECK(small.sending.capacity() > 0);  // within kKeepCapacity: kept for the next
}

namespace {

// A completion model's connection: the runtime's record and the two buffers.
struct ModelConn : sm::test::TestConn {
    using TestConn::TestConn;
    ByteBuffer out;
    ByteBuffer sending;
};

}  // namespace

TEST_CASE("settle_output: what was deferred is rendered once the send is done, up to the mark; "
          "a connection whose output waits is blocked and receives nothing",
          "[send_buffers]") {
    sm::runtime::SpareBuffers spare;
    constexpr std::size_t kOutputMark = 32 * 1024;  // --output-mark's default
    using sm::runtime::output_of;
    using sm::runtime::settle_output;
    using sm::test::at;
    sm::test::SessionEnv env;
    const sm::runtime::ServerOptions options = sm::test::test_options();
    sm::runtime::Deadlines<ModelConn> deadlines(options);
    ModelConn c;
    deadlines.start(c, at(0));
    // Several marks' worth of responses asked for in one read.
    std::string flood;
    while (flood.size() < kOutputMark)
        flood += sm::test::kRequest;
    c.session.feed(std::span<const char>(flood.data(), flood.size()), c.out,
                   sm::runtime::feed_limit(c, flood.size(), kOutputMark, spare));
    REQUIRE(c.session.deferred());
    REQUIRE(output_of(c) >= kOutputMark);
    CHECK(output_of(c) < kOutputMark + 200);  // one response past it at most

    // The output is full: blocked, no receive.
    CHECK_FALSE(settle_output(c, deadlines, at(1), kOutputMark));
    CHECK(c.blocked());
    CHECK_FALSE(sm::runtime::wants_receive(c, false, false));
    // Sent, in part: nothing more is rendered while the rest is in flight.
    sm::runtime::take_collected(c, spare);
    REQUIRE(sm::runtime::consume_sent(c, kOutputMark / 2));
    CHECK_FALSE(settle_output(c, deadlines, at(2), kOutputMark));
    CHECK(c.out.empty());
    CHECK(c.blocked());
    // The rest sent: a mark's worth more is rendered.
    REQUIRE(sm::runtime::consume_sent(c, c.sending.size()));
    CHECK_FALSE(settle_output(c, deadlines, at(3), kOutputMark));
    CHECK(output_of(c) >= kOutputMark);
    // Everything sent, again and again: once nothing is deferred and the
    // output is under the mark, it reads again.
    std::size_t rounds = 0;
    while (!settle_output(c, deadlines, at(4), kOutputMark)) {
        REQUIRE(++rounds < 100);
        sm::runtime::take_collected(c, spare);
        REQUIRE(sm::runtime::consume_sent(c, c.sending.size()));
    }
    CHECK_FALSE(c.session.deferred());
    CHECK_FALSE(c.blocked());
    CHECK(output_of(c) < kOutputMark);
}
