// Graceful shutdown: SIGINT/SIGTERM stop accepting, finish the responses in
// flight (within --shutdown-timeout), and exit 0.
#include <poll.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <csignal>
#include <string>
#include <thread>

#include "conformance.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::conformance;

namespace {

std::string describe_exit(ServerProcess& server, const ExitStatus& s) {
    return "server " + s.describe() + "\n--- server stderr ---\n" + server.stderr_text();
}

// Whether a new connection to the server is refused (or dropped unanswered).
bool refuses_connections(const ServerProcess& server) {
    try {
        Connection c = connect(server, 500ms);
        c.request(make_request("GET", "/plaintext"));
        return false;
    } catch (const std::runtime_error&) {
        return true;
    }
}

// The server's side of `c` as the kernel sees it.
std::optional<TcpQueues> server_side(const ServerProcess& server, const Connection& c) {
    return tcp_queues(server.port(), c.local_port());
}

}  // namespace

TEST_CASE("shutdown signal while idle exits 0", "[conformance][shutdown]") {
    const int sig = GENERATE(SIGTERM, SIGINT);
    INFO("signal " << sig);
    auto server = start_server();
    {
        Connection c = connect(*server);
        CHECK(c.request(make_request("GET", "/plaintext")).status == 200);
    }
    const ExitStatus s = server->stop(sig, 5s);
    INFO(describe_exit(*server, s));
    CHECK(s.clean());
}

TEST_CASE("shutdown SIGTERM closes idle keep-alive connections and exits 0",
          "[conformance][shutdown]") {
    auto server = start_server();
    std::vector<Connection> conns;
    for (int i = 0; i < 8; ++i) {
        conns.push_back(connect(*server));
        CHECK(conns.back().request(make_request("GET", "/json")).status == 200);
    }
    const ExitStatus s = server->stop(SIGTERM, 5s);
    INFO(describe_exit(*server, s));
    CHECK(s.clean());
    for (auto& c : conns) {
        const Connection::Closed closed = c.expect_closed(2s);
        INFO(closed.describe());
        CHECK(closed.how != Connection::End::timeout);
        CHECK(closed.unexpected.empty());
    }
}

TEST_CASE("shutdown SIGTERM finishes responses in flight to a slow reader",
          "[conformance][shutdown]") {
    auto server = start_server({"--shutdown-timeout", "10"});
    // A small receive window: the responses back up into the server while
    // the client does not read.
    Connection c = connect(*server, 5s, 4096);
    constexpr std::size_t kRequests = 2000;
    std::string batch;
    for (std::size_t i = 0; i < kRequests; ++i)
        batch += make_request("GET", "/plaintext");
    c.send(batch);

    // Responses are in flight: output backed up in the server's send queue.
    std::optional<TcpQueues> q;
    const bool backed_up = eventually(
        [&] {
            q = server_side(*server, c);
            return q && q->tx > 0;
        },
        5s, 10ms);
    REQUIRE(backed_up);

    server->signal(SIGTERM);
    // It stops accepting at once, while it still has responses to finish.
    CHECK(eventually([&] { return refuses_connections(*server); }, 5s, 50ms));

    // Now read, slowly enough to keep the server writing for a while. The
    // server may close between responses (pipelined requests it had not
    // started may go unanswered), but every response it started must arrive
    // whole, in order, and the connection must end with a FIN, not a reset
    // that could destroy responses not yet read.
    std::size_t received = 0;
    std::string ending = "all responses received";
    try {
        for (; received < kRequests; ++received) {
            const std::optional<Response> r = c.read_response_or_eof();
            if (!r) {
                ending = "closed after a complete response";
                break;
            }
            if (r->status != 200 || r->body != kPlaintextBody) {
                INFO("response " << received << ": " << r->describe());
                FAIL("a response in flight came back wrong");
            }
            if (received % 100 == 0) std::this_thread::sleep_for(5ms);
        }
    } catch (const std::runtime_error& e) {
        ending = e.what();
        FAIL_CHECK("after " << received << " responses: " << ending);
    }
    INFO(received << " of " << kRequests << " pipelined responses; " << ending);
    CHECK(received > 0);
    if (received == kRequests) {
        const Connection::Closed closed = c.expect_closed(5s);
        INFO("after the last response the connection was " << closed.describe());
        CHECK(closed.how == Connection::End::eof);
        CHECK(closed.unexpected.empty());
    }

    const auto s = server->wait_exit(10s);
    REQUIRE(s.has_value());
    INFO(describe_exit(*server, *s));
    CHECK(s->clean());
}

TEST_CASE("shutdown SIGTERM gives up on a reader that never reads and exits 0",
          "[conformance][shutdown]") {
    // One second to finish, then connections still owed data are dropped.
    auto server = start_server({"--shutdown-timeout", "1"});
    Connection c = connect(*server, 5s, 4096);
    // Requests go out from a thread: the server stops reading once its
    // output backs up, and this test must not block on that.
    std::atomic<std::size_t> sent{0};
    std::jthread sender([&](std::stop_token stop) {
        const std::string chunk = [] {
            std::string s;
            for (int i = 0; i < 100; ++i)
                s += make_request("GET", "/plaintext");
            return s;
        }();
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        std::size_t off = 0;
        while (!stop.stop_requested() && std::chrono::steady_clock::now() < deadline &&
               sent.load() < 64u * 1024 * 1024) {
            pollfd p{c.fd(), POLLOUT, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            if ((p.revents & POLLOUT) == 0) return;  // error or hang-up
            const ssize_t n =
                ::send(c.fd(), chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR) continue;
                return;
            }
            off = (off + static_cast<std::size_t>(n)) % chunk.size();
            sent += static_cast<std::size_t>(n);
        }
    });

    // Wait until the server has data backed up for this client.
    std::optional<TcpQueues> q;
    const bool backed_up = eventually(
        [&] {
            q = server_side(*server, c);
            return q && q->tx > 0;
        },
        5s, 10ms);
    INFO("sent " << sent.load() << " request bytes");
    REQUIRE(backed_up);

    const ExitStatus s = server->stop(SIGTERM, 10s);
    sender.request_stop();
    sender.join();
    INFO(describe_exit(*server, s));
    CHECK(s.clean());
}
