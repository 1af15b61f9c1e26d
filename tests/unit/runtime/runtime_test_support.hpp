// Helpers shared by the runtime's unit tests: explicit time points, a
// connection type for Deadlines<Conn> and Connections<Conn>, and a session
// fed real bytes (so in_head() and head_id() are the session's own answers,
// not a stub's).
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <string_view>

#include "http/byte_buffer.hpp"
#include "http/limits.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "runtime/clock.hpp"
#include "runtime/deadlines.hpp"
#include "runtime/session_slot.hpp"
#include "runtime/options.hpp"

namespace sm::test {

using namespace std::chrono_literals;

// A point on the runtime's clock, `ms` after its epoch: tests say when
// things happen instead of waiting for them.
inline runtime::Clock::time_point at(std::chrono::milliseconds ms) noexcept {
    return runtime::Clock::time_point{} + ms;
}
inline runtime::Clock::time_point at(long long ms) noexcept {
    return at(std::chrono::milliseconds(ms));
}

// The first bytes of a request head, the rest of it, and a whole request.
inline constexpr std::string_view kHeadStart = "GET / HTTP/1.1\r\nHo";
inline constexpr std::string_view kHeadRest = "st: x\r\n\r\n";
inline constexpr std::string_view kRequest = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

// A model's connection, as the models declare theirs.
struct TestConn : runtime::ConnectionRecord {
    using runtime::ConnectionRecord::ConnectionRecord;
    int id = 0;
    // None by default: the kernel holds nothing for it (DeadlineClock::expire).
    runtime::NativeHandle fd = runtime::kNoHandle;
};

// Timeouts short and distinct, so that which deadline fired is unambiguous.
inline runtime::ServerOptions test_options() {
    runtime::ServerOptions o;
    o.idle_timeout = 100ms;
    o.header_timeout = 30ms;
    o.linger_timeout = 50ms;
    o.send_timeout = 70ms;
    o.shutdown_timeout = 200ms;
    return o;
}

// What a ConnectionRecord needs: a response cache and the request limits,
// and this thread's session pool made of them (session_slot.hpp).
struct SessionEnv {
    http::ResponseCache cache{http::ResponseMode::composed, 0};
    http::Limits limits;
    runtime::SessionPool::Scope sessions{cache, limits};
};

// A session of its own, for the deadline fixtures.
struct SessionFixture {
    SessionEnv env;
    http::Session session{env.cache, env.limits};
};

// Feeds `bytes` to s; returns the responses it wrote.
// (`s`: an http::Session, or a connection's runtime::SessionSlot.)
template <typename Session>
std::string feed(Session& s, std::string_view bytes) {
    http::ByteBuffer out;
    s.feed(std::span<const char>(bytes.data(), bytes.size()), out);
    return std::string(out.view());
}

}  // namespace sm::test
