// server-uring only: the start-up probe (io_uring denied by a seccomp filter,
// as in a container with the default profile), the provided buffers resident
// from the start, the provided-buffer ring running dry and recovering, recv
// held back while a client that pipelines without reading owes it output,
// and such clients leaving the ring (and the loop) to the others.
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "conformance.hpp"
#include "support/ring_growth.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::conformance;

namespace {

// The launcher that denies io_uring (tests/conformance/deny_io_uring.cpp).
std::string deny_launcher() {
    const char* path = std::getenv("SM_DENY_IO_URING");
    return path == nullptr ? std::string() : std::string(path);
}

// The first line of `text` containing every one of `words`, or "".
std::string line_with(const std::string& text, std::initializer_list<std::string_view> words) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        bool all = true;
        for (const auto w : words)
            all = all && line.find(w) != std::string::npos;
        if (all) return line;
    }
    return {};
}

bool logged(const ServerProcess& server, std::string_view what) {
    return server.stderr_text().find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("uring probe exits 1 saying why when a seccomp filter denies io_uring", "[model-uring]") {
    const std::string deny = deny_launcher();
    if (deny.empty()) FAIL("SM_DENY_IO_URING does not name the launcher (run through ctest)");
    // The launcher itself leaves everything else alone.
    const RunResult ok = run_to_exit(deny, {"/bin/true"}, 5s);
    INFO("launcher with /bin/true: " << ok.status.describe() << "\n" << ok.err);
    REQUIRE(ok.status.clean());

    const RunResult r =
        run_to_exit(deny, {target().binary, "--port", "0", "--address", "127.0.0.1"}, 10s);
    INFO("server " << r.status.describe() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.status.exited);
    CHECK(r.status.code == 1);
    // One line saying what failed and why, not a crash or a stack of errors.
    const std::string line = line_with(r.err, {"io_uring", "Operation not permitted"});
    CHECK_FALSE(line.empty());
    CHECK_THAT(line, Catch::Matchers::Contains("io_uring_setup"));
    CHECK_THAT(line, Catch::Matchers::Contains("seccomp"));
    // It never became ready.
    CHECK(r.out.find("listening on") == std::string::npos);
}

TEST_CASE("uring --uring-buffers that is not a power of two exits 2 saying so", "[model-uring]") {
    const RunResult r = run_to_exit(
        target().binary, {"--port", "0", "--address", "127.0.0.1", "--uring-buffers", "3"});
    INFO("server " << r.status.describe() << "\nstderr:\n" << r.err);
    CHECK(r.status.exited);
    CHECK(r.status.code == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains("--uring-buffers"));
    CHECK_THAT(r.err, Catch::Matchers::Contains("power of two"));
    CHECK(r.out.find("listening on") == std::string::npos);
}

TEST_CASE("uring provided buffers start few and grow, resident, to what the load keeps in flight",
          "[model-uring]") {
    // All handed over at start, --uring-buffers of them would be resident in
    // an idle server (32 MiB here); left to fault in where the kernel writes,
    // RSS would creep under load for minutes. So the ring starts with 32
    // (uring/ring.hpp, kFirstBuffers) and doubles, populated, each time it
    // runs dry, once per batch.
    constexpr std::size_t kBuffers = 4096;  // x 8 KiB = 32 MiB, far above the rest of the server
    auto server = start_server({"--threads", "1", "--uring-buffers", std::to_string(kBuffers)});
    const FdBaseline fds(*server);
    const RingGrowth g = grow_ring(*server, "/plaintext");
    INFO("server RSS " << g.at_rest_kib << " KiB after one request, " << g.loaded_kib
                       << " KiB after bursts of 256 connections");
    CHECK(g.at_rest_kib < kBuffers * kRingBufferKiB);  // not all of them: at least 32 MiB
    // Grown by 32 buffers or more, whole, but not to all of them (256
    // connections need at most 256 buffers in one batch, however many dry
    // recvs asked).
    CHECK(g.loaded_kib >= g.at_rest_kib + kFirstRingBuffers * kRingBufferKiB);
    CHECK(g.loaded_kib < g.at_rest_kib + kBuffers * kRingBufferKiB);
    CHECK_FALSE(logged(*server, "ran dry"));  // grown, not short
    fds.require_back();
}

TEST_CASE("uring more busy connections than provided buffers are all served", "[model-uring]") {
    // Four buffers for 256 connections that all send at once: most recv
    // completions of a batch find the ring empty and are re-armed after it.
    auto server = start_server({"--threads", "1", "--uring-buffers", "4"});
    const FdBaseline fds(*server);
    constexpr std::size_t kConnections = 256;
    constexpr std::size_t kDepth = 4;
    std::string burst;
    for (std::size_t i = 0; i < kDepth; ++i)
        burst += make_request("GET", i % 2 == 0 ? "/plaintext" : "/json");
    bool dry = false;
    // One burst normally runs the ring dry; a few more keep the test from
    // depending on the scheduler's mood (bounded).
    for (int attempt = 0; attempt < 5 && !dry; ++attempt) {
        std::vector<Connection> conns;
        conns.reserve(kConnections);
        for (std::size_t i = 0; i < kConnections; ++i)
            conns.push_back(connect(*server));
        for (auto& c : conns)
            c.send(burst);
        for (std::size_t i = 0; i < kConnections; ++i) {
            INFO("connection " << i);
            const auto responses = conns[i].read_responses(kDepth);
            for (std::size_t j = 0; j < kDepth; ++j) {
                REQUIRE(responses[j].status == 200);
                CHECK(responses[j].body == (j % 2 == 0 ? kPlaintextBody : kJsonBody));
            }
            CHECK(conns[i].buffered() == 0);
        }
        dry = eventually([&] { return logged(*server, "provided buffers of 8 KiB ran dry"); }, 1s);
    }
    INFO("stderr: " << server->stderr_text());
    CHECK(dry);
    fds.require_back();
}

TEST_CASE("uring a pipelining flood on a two-buffer ring is answered in full and in order",
          "[model-uring]") {
    // Each connection's 1024 requests (about 40 KiB) need several buffers;
    // with two for sixteen connections the ring runs dry over and over.
    auto server = start_server({"--threads", "1", "--uring-buffers", "2"});
    const FdBaseline fds(*server);
    {
        constexpr std::size_t kConnections = 16;
        constexpr std::size_t kRequests = 1024;
        std::vector<std::string_view> paths;
        std::string batch;
        for (std::size_t i = 0; i < kRequests; ++i) {
            paths.push_back((i * 7 + i / 3) % 5 < 2 ? "/json" : "/plaintext");
            batch += make_request("GET", paths.back());
        }
        std::vector<Connection> conns;
        for (std::size_t i = 0; i < kConnections; ++i)
            conns.push_back(connect(*server));
        for (auto& c : conns)
            c.send(batch);
        for (std::size_t i = 0; i < kConnections; ++i) {
            for (std::size_t j = 0; j < kRequests; ++j) {
                const Response r = conns[i].read_response();
                if (r.status != 200 ||
                    r.body != (paths[j] == "/json" ? kJsonBody : kPlaintextBody)) {
                    INFO("connection " << i << ", response " << j << ": " << r.describe());
                    FAIL("wrong response");
                }
            }
            CHECK(conns[i].buffered() == 0);
        }
        INFO("stderr: " << server->stderr_text());
        CHECK(logged(*server, "ran dry"));
    }
    fds.require_back();
}

TEST_CASE("uring a client that pipelines without reading is held back and then served in full",
          "[model-uring]") {
    auto server = start_server({"--threads", "1"});
    const FdBaseline fds(*server);
    {
        const std::string request = make_request("GET", "/plaintext");
        std::string chunk;
        for (int i = 0; i < 256; ++i)
            chunk += request;
        // A client that does not read: a small receive window backs the
        // responses up into the server at once, and a small send buffer
        // keeps what this test has to read back small.
        Connection c = connect(*server, 10s, 4096);
        const int sndbuf = 64 * 1024;
        REQUIRE(::setsockopt(c.fd(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) == 0);
        const std::size_t rss_before = rss_kib(server->pid());

        // Send until the server stops reading: nothing can be sent for half
        // a second. A server that kept reading would take everything (and
        // buffer the responses): the cap ends that case.
        constexpr std::size_t kCap = 64u * 1024 * 1024;
        std::size_t sent = 0;
        std::size_t off = 0;
        auto last_progress = std::chrono::steady_clock::now();
        while (sent < kCap && std::chrono::steady_clock::now() - last_progress < 500ms) {
            pollfd p{c.fd(), POLLOUT, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const ssize_t n =
                ::send(c.fd(), chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR) continue;
                FAIL("send: " << std::strerror(errno));
            }
            off = (off + static_cast<std::size_t>(n)) % chunk.size();
            sent += static_cast<std::size_t>(n);
            last_progress = std::chrono::steady_clock::now();
        }
        INFO("sent " << sent << " request bytes");
        REQUIRE(sent < kCap);
        // Held back: request bytes wait unread in the server's receive queue,
        // and the server's memory did not grow with what was sent.
        const auto q = tcp_queues(server->port(), c.local_port());
        REQUIRE(q.has_value());
        INFO("server side: " << q->rx << " bytes unread, " << q->tx << " unacknowledged");
        CHECK(q->rx > 0);
        const std::size_t rss_after = rss_kib(server->pid());
        INFO("server RSS " << rss_before << " KiB before, " << rss_after << " KiB after");
        CHECK(rss_after < rss_before + 32 * 1024);

        // Reading lets it go on: every complete request is answered, in order.
        const std::size_t complete = sent / request.size();
        for (std::size_t i = 0; i < complete; ++i) {
            const Response r = c.read_response();
            if (r.status != 200 || r.body != kPlaintextBody) {
                INFO("response " << i << " of " << complete << ": " << r.describe());
                FAIL("wrong response");
            }
        }
        // The partial request at the end, completed, is answered too.
        const std::size_t partial = sent % request.size();
        c.send(partial == 0 ? std::string_view(request)
                            : std::string_view(request).substr(partial));
        CHECK(c.read_response().body == kPlaintextBody);
        CHECK(c.buffered() == 0);
    }
    fds.require_back();
}

TEST_CASE("uring connections that flood without reading do not starve a separate connection",
          "[model-uring]") {
    // Forty-eight connections pipeline without reading, onto a ring of
    // sixty-four buffers. Once one has outrun its output it gets one buffer
    // per recv, and only when its output has room: it must not take buffers
    // (or turns of the loop) the others need. Between two rounds of the
    // flood's sends, a separate connection asks once, until the server has
    // stopped reading every flooding connection.
    auto server = start_server({"--threads", "1", "--uring-buffers", "64"});
    const FdBaseline fds(*server);
    {
        constexpr std::size_t kFlood = 48;
        const std::string chunk = batch_of(1024);
        std::vector<Connection> flood;
        std::vector<std::size_t> offset(kFlood, 0);
        for (std::size_t i = 0; i < kFlood; ++i)
            flood.push_back(connect(*server, 10s, kSmallWindow));
        Connection other = connect(*server, 10s);
        std::size_t answered = 0;
        int quiet = 0;  // rounds in which no flooding connection could send
        // A bound for a server that never stops reading, not a speed: a
        // sanitized server on a loaded machine takes a minute to fill them.
        const auto deadline = std::chrono::steady_clock::now() + 120s;
        while (quiet < 20 && std::chrono::steady_clock::now() < deadline) {
            bool any = false;
            for (std::size_t i = 0; i < kFlood; ++i) {
                const ssize_t n = ::send(flood[i].fd(), chunk.data() + offset[i],
                                         chunk.size() - offset[i], MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno != EAGAIN && errno != EINTR)
                    FAIL("flooding connection " << i << ": " << std::strerror(errno));
                if (n <= 0) continue;
                offset[i] = (offset[i] + static_cast<std::size_t>(n)) % chunk.size();
                any = true;
            }
            const Response r = other.request(make_request("GET", "/json"));
            if (r.status != 200 || r.body != kJsonBody)
                FAIL("the separate connection's request " << answered << ": " << r.describe());
            ++answered;
            quiet = any ? 0 : quiet + 1;
        }
        INFO(answered << " requests of the separate connection answered\n" << stderr_of(*server));
        REQUIRE(quiet >= 20);
        // The server stopped reading every flooding connection: request
        // bytes wait unread in each one's receive queue.
        const auto queues = tcp_queues_by_remote_port(server->port());
        for (std::size_t i = 0; i < kFlood; ++i) {
            INFO("flooding connection " << i);
            const auto q = queues.find(flood[i].local_port());
            REQUIRE(q != queues.end());
            CHECK(q->second.rx > 0);
        }
        CHECK(other.request(make_request("GET", "/plaintext")).body == kPlaintextBody);
    }
    fds.require_back();
}
