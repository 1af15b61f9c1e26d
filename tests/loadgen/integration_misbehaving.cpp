// loadgen against servers that misbehave on purpose (MisbehavingServer, run
// in a thread of this process): every fault is counted in its class, no run
// hangs, and responses that are merely unusual (chunked, Connection: close,
// HTTP/1.0, interim 100) are counted as responses, not errors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "integration_support.hpp"
#include "support/http_client.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::loadgen;

namespace {

using Reply = MisbehavingServer::Reply;
using Behavior = MisbehavingServer::Behavior;

constexpr std::uint64_t kConnections = 4;

// One second of closed-loop load on 4 connections of one thread.
Run load(const MisbehavingServer& server, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"-t1", "-c4", "-d", "1s"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(server.url("/plaintext"));
    return run_loadgen(args, 20s);
}

std::uint64_t errors(const Report& r, std::string_view c) {
    return r.count("/errors/" + std::string(c));
}

const std::string& kOk = MisbehavingServer::kOk;

}  // namespace

TEST_CASE("misbehaving server that closes every connection at once", "[loadgen][misbehaving]") {
    MisbehavingServer server(Behavior{.close_on_accept = true, .reply = {}});
    const Run run = load(server);
    INFO(run.describe() << "server accepted " << server.accepted());
    // The connects succeed, so the server is not gone: the run completes.
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.string("/ended") == "completed");
    CHECK(r.count("/requests") == 0);
    // Each loss counted (the close shows as a read or a write failure) and
    // the connection replaced.
    CHECK(errors(r, "read") + errors(r, "write") > 0);
    CHECK(r.count("/connections/opened") > kConnections);
    CHECK(errors(r, "malformed") == 0);
    CHECK(errors(r, "timeout") == 0);
    CHECK(server.accepted() > kConnections);
}

TEST_CASE("misbehaving server that never answers: timeouts replace connections",
          "[loadgen][misbehaving]") {
    MisbehavingServer server(Behavior{});
    const Run run = load(server, {"--timeout", "200ms"});
    INFO(run.describe() << "server accepted " << server.accepted() << ", requests "
                        << server.requests());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.number("/config/timeout_s") == Approx(0.2));
    CHECK(r.count("/requests") == 0);
    CHECK(errors(r, "timeout") > 0);
    CHECK(r.has("/error_messages/timeout"));
    CHECK(r.count("/connections/opened") > kConnections);
    CHECK(errors(r, "malformed") == 0);
    CHECK(server.accepted() > kConnections);
    // wrk's line, for scripts written for wrk.
    CHECK(has_line_starting(run.result.out, "Socket errors:"));
    CHECK(has_line_starting(run.result.out, "Requests/sec:"));
}

TEST_CASE("misbehaving server that answers garbage: malformed", "[loadgen][misbehaving]") {
    MisbehavingServer server(Behavior{
        .reply = [](std::size_t) { return Reply{{"xyzzy this is not HTTP at all\r\n\r\n"}}; }});
    const Run run = load(server);
    INFO(run.describe() << "server accepted " << server.accepted());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.count("/requests") == 0);
    CHECK(errors(r, "malformed") > 0);
    REQUIRE(r.has("/error_messages/malformed"));
    CHECK_FALSE(r.string("/error_messages/malformed").empty());
    for (const auto c : kStatusClasses)
        CHECK(r.count("/status/" + std::string(c)) == 0);
    // The connection is replaced after garbage.
    CHECK(r.count("/connections/opened") > kConnections);
}

TEST_CASE("misbehaving server that answers 500: non_2xx and 5xx", "[loadgen][misbehaving]") {
    MisbehavingServer server(Behavior{.reply = [](std::size_t) {
        return Reply{{"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\noops!"}};
    }});
    const Run run = load(server);
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.count("/requests") > 0);
    CHECK(r.count("/status/5xx") == r.count("/requests"));
    CHECK(errors(r, "non_2xx") == r.count("/requests"));
    for (const char* c : {"connect", "read", "write", "timeout", "malformed", "body"})
        CHECK(errors(r, c) == 0);
    CHECK(r.count("/connections/reconnects") == 0);
    CHECK(r.count("/connections/opened") == kConnections);
    CHECK(has_line_starting(run.result.out, "Non-2xx or 3xx responses:"));
}

TEST_CASE("misbehaving server that closes in the middle of a response: read errors",
          "[loadgen][misbehaving]") {
    // Three whole responses per connection, then half of the fourth and a close.
    MisbehavingServer server(MisbehavingServer::closing_mid_response(3));
    const Run run = load(server);
    INFO(run.describe() << "server accepted " << server.accepted());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.count("/requests") > 0);
    CHECK(r.count("/status/2xx") == r.count("/requests"));
    CHECK(errors(r, "read") > 0);
    CHECK(r.has("/error_messages/read"));
    // The close is seen at once: not a timeout, not a malformed response.
    CHECK(errors(r, "timeout") == 0);
    CHECK(errors(r, "malformed") == 0);
    CHECK(r.count("/connections/opened") > kConnections);
}

TEST_CASE("misbehaving server: chunked responses are framed", "[loadgen][misbehaving]") {
    struct Case {
        const char* what;
        std::vector<std::string> pieces;
    };
    const std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";
    const auto c = GENERATE_COPY(
        Case{"one write", {head + "5\r\nHello\r\n8\r\n, World!\r\n0\r\n\r\n"}},
        Case{"split inside the head, a size line and a CRLF",
             {"HTTP/1.1 200 OK\r\nTransfer-Enc", "oding: chunked\r\n\r\n5\r", "\nHello\r",
              "\n8\r\n, World!\r\n0\r\n", "\r\n"}},
        Case{"chunk extension and a trailer",
             {head + "d;name=value\r\nHello, World!\r\n0\r\nX-Trailer: yes\r\n\r\n"}});
    MisbehavingServer server(Behavior{.reply = [&c](std::size_t) { return Reply{c.pieces}; }});
    const Run run = load(server, {"--expect-body", "Hello, World!"});
    INFO(c.what << "\n" << run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.count("/requests") > 0);
    CHECK(r.count("/status/2xx") == r.count("/requests"));
    CHECK(run.total_errors() == 0);
    CHECK(r.count("/connections/reconnects") == 0);
    CHECK(r.count("/connections/opened") == kConnections);
}

TEST_CASE("misbehaving server that closes after each response: reconnects, not errors",
          "[loadgen][misbehaving]") {
    struct Case {
        const char* what;
        std::string response;
    };
    const auto c = GENERATE(
        Case{"Connection: close",
             "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 13\r\n\r\nHello, World!"},
        Case{"HTTP/1.0 without keep-alive",
             "HTTP/1.0 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!"},
        Case{"body delimited by the close",
             "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nHello, World!"});
    MisbehavingServer server(Behavior{.reply = [&c](std::size_t) {
        return Reply{{c.response}, true};
    }});
    const Run run = load(server, {"--expect-body", "Hello, World!"});
    INFO(c.what << "\n" << run.describe() << "server accepted " << server.accepted());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.count("/requests") > 0);
    CHECK(r.count("/status/2xx") == r.count("/requests"));
    CHECK(run.total_errors() == 0);
    CHECK(r.count("/connections/reconnects") > 0);
    CHECK(r.count("/connections/opened") > kConnections);
}

TEST_CASE("misbehaving server: an interim 100 response is skipped", "[loadgen][misbehaving]") {
    MisbehavingServer server(Behavior{
        .reply = [](std::size_t) { return Reply{{"HTTP/1.1 100 Continue\r\n\r\n" + kOk}}; }});
    const Run run = load(server, {"--expect-body", "Hello, World!"});
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.count("/requests") > 0);
    // One final response per request: the 100 is not a request of its own.
    CHECK(r.count("/status/2xx") == r.count("/requests"));
    CHECK(run.total_errors() == 0);
    CHECK(r.count("/connections/reconnects") == 0);
}

namespace {

// Accepts, waits for the client's first bytes (it reads nothing), then
// resets the connection (SO_LINGER 0). The client writes far more than the
// socket buffers hold, so it is still writing when the reset comes, however
// late: a write error, and nothing else, whatever the timing.
class ResettingServer {
  public:
    ResettingServer() {
        listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(listener_ >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(listener_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(listener_, 64) == 0);
        socklen_t len = sizeof a;
        REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        port_ = ntohs(a.sin_port);
        thread_ = std::jthread([this](const std::stop_token& stop) { serve(stop); });
    }
    ~ResettingServer() {
        thread_.request_stop();
        thread_.join();
        ::close(listener_);
    }
    ResettingServer(const ResettingServer&) = delete;
    ResettingServer& operator=(const ResettingServer&) = delete;

    [[nodiscard]] std::string url() const {
        return "http://127.0.0.1:" + std::to_string(port_) + "/";
    }
    [[nodiscard]] std::size_t resets() const noexcept { return resets_.load(); }

  private:
    void serve(const std::stop_token& stop) {
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (!stop.stop_requested() && std::chrono::steady_clock::now() < deadline) {
            pollfd p{listener_, POLLIN, 0};
            if (::poll(&p, 1, 50) != 1) continue;
            const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) continue;
            // Wait for the first bytes (the client is connected and
            // writing: a reset before them could meet its connect); never read.
            pollfd c{fd, POLLIN, 0};
            while (!stop.stop_requested() && ::poll(&c, 1, 50) == 0) {}
            const linger l{1, 0};
            ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
            ::close(fd);  // unread data and linger 0: a reset
            ++resets_;
        }
    }

    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<std::size_t> resets_{0};
    std::jthread thread_;
};

}  // namespace

TEST_CASE("misbehaving server that resets while the client writes: write errors",
          "[loadgen][misbehaving]") {
    ResettingServer server;
    // 256 pipelined POSTs of 120 KiB each (30 MiB, far more than socket
    // buffers grow to: 4 MiB by default) while the server reads nothing: a
    // write is pending when the reset comes. Both engines count it to the
    // write (io_uring's recv, woken by the reset too, leaves it to the send).
    const Run run = run_loadgen({"-t1", "-c1", "-d", "1s", "--pipeline", "256", "-m", "POST",
                                 "--body", std::string(120 * 1024, 'x'), server.url()},
                                20s);
    INFO("loadgen exit: " << run.result.status.describe() << "; server resets " << server.resets());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    CHECK(r.count("/requests") == 0);
    INFO("read errors " << errors(r, "read") << ", connect errors " << errors(r, "connect"));
    CHECK(errors(r, "write") > 0);
    CHECK(errors(r, "read") == 0);
    CHECK(r.has("/error_messages/write"));
    CHECK(server.resets() > 0);
}

TEST_CASE(
    "misbehaving server answer_after: nothing is answered before that many connections "
    "have each sent a request",
    "[loadgen][misbehaving]") {
    const std::size_t answer_after = GENERATE(std::size_t{0}, std::size_t{2});
    // How many requests the server had read when it made its first reply
    // (it counts a request before it answers it).
    std::atomic<const MisbehavingServer*> self{nullptr};
    std::atomic<std::size_t> read_at_first_reply{0};
    Behavior behavior;
    behavior.answer_after = answer_after;
    behavior.reply = [&](std::size_t) {
        std::size_t none = 0;
        read_at_first_reply.compare_exchange_strong(none, self.load()->requests());
        return Reply{{MisbehavingServer::kOk}};
    };
    MisbehavingServer server(std::move(behavior));
    self = &server;
    const std::string request = make_request("GET", "/plaintext");
    Connection a("127.0.0.1", server.port());
    a.send(request);
    // The first connection's request is read; only then does the second send.
    REQUIRE(eventually([&] { return server.requests() == 1; }, 5s));
    Connection b("127.0.0.1", server.port());
    b.send(request);
    CHECK(a.read_response().status == 200);
    CHECK(b.read_response().status == 200);
    // Both connections answered, in any case; with answer_after 2 the first
    // reply waited for the second connection's request.
    INFO("answer_after " << answer_after);
    CHECK(read_at_first_reply.load() == (answer_after == 2 ? 2 : 1));
    // Held requests, once released, are answered in order as usual.
    a.send(request + request);
    CHECK(a.read_responses(2).size() == 2);
}
