// Back-pressure: a client that pipelines faster than it reads. Once its
// output reaches the mark the server stops reading it (TCP flow control
// holds the client back), and while it does, no head or idle deadline runs
// against the client: it is waiting for its responses, not idling. Only
// --send-timeout does (no byte of output taken for that long). Nothing is
// lost: when the client reads again, every response arrives, in order.
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <thread>

#include "conformance.hpp"

using namespace sm::test;
using namespace sm::test::conformance;

namespace {

// Pairs of pipelined requests, each answered differently, so that the order
// of the responses shows.
std::string alternating(std::size_t pairs) {
    std::string s;
    for (std::size_t i = 0; i < pairs; ++i)
        s += make_request("GET", "/plaintext") + make_request("GET", "/json");
    return s;
}

}  // namespace

TEST_CASE(
    "backpressure a client that pipelines past its output and stops reading for longer than "
    "--header-timeout and --idle-timeout gets every response in order",
    "[conformance][backpressure]") {
    // Short timeouts: the pause below is longer than both.
    auto server = start_server({"--threads", "1", "--header-timeout", "0.5", "--idle-timeout",
                                "0.8"});
    const FdBaseline fds(*server);
    // A small receive window backs the responses up into the server at
    // once; the default one takes megabytes first, from the server's
    // writes of a mark each (one may fill the socket to the byte).
    const int window = GENERATE(kSmallWindow, 0);
    INFO("client receive window " << (window == 0 ? "default" : std::to_string(window)));
    {
        Connection c = connect(*server, 10s, window);
        const std::string chunk = alternating(512);
        const std::string plaintext = make_request("GET", "/plaintext");
        const std::size_t pair = chunk.size() / 512;
        // The server stops reading us: it holds a request partly read (its
        // last read ended inside one, almost surely), and responses.
        const std::size_t sent = pipeline_until_stalled(*server, c, chunk);
        std::this_thread::sleep_for(1500ms);

        // Every complete request is answered, in order; then the one cut
        // short, once its rest is sent, and one more (the connection goes
        // on). The rest and the last request go as soon as the socket takes
        // them, while we read: the server reads them before the megabytes
        // the kernel holds for us are through, so no deadline of ours
        // depends on how fast this side reads (while the kernel's queue for
        // us moves, the server's idle and head deadlines wait for it).
        const std::size_t cut = sent % pair;  // where in its pair the last request ends
        const std::size_t whole = 2 * (sent / pair) + (cut >= plaintext.size() ? 1 : 0);
        const bool partial = cut != 0 && cut != plaintext.size();
        INFO(sent << " request bytes sent: " << whole << " requests whole"
                  << (partial ? ", one cut short" : ""));
        std::string more;
        if (partial)
            more = chunk.substr(sent % chunk.size())
                       .substr(0, cut >= plaintext.size() ? pair - cut : plaintext.size() - cut);
        more += make_request("GET", "/json");
        widen_window(c);
        const auto send_more = [&] {
            while (!more.empty()) {
                const ssize_t n =
                    ::send(c.fd(), more.data(), more.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n <= 0) return;
                more.erase(0, static_cast<std::size_t>(n));
            }
        };
        for (std::size_t i = 0; i < whole; ++i) {
            send_more();
            const Response r = c.read_response();
            if (r.status != 200 || r.body != (i % 2 == 0 ? kPlaintextBody : kJsonBody))
                FAIL("response " << i << " of " << whole << ": " << r.describe() << "\n" << r.body);
        }
        send_more();
        REQUIRE(more.empty());
        if (partial) {
            const Response r = c.read_response();
            INFO(r.describe());
            CHECK(r.status == 200);
            CHECK(r.body == (cut > plaintext.size() ? kJsonBody : kPlaintextBody));
        }
        const Response last = c.read_response();
        CHECK(last.body == kJsonBody);
        CHECK(last.keep_alive);
    }
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("backpressure a client that takes none of its output for --send-timeout is closed",
          "[conformance][backpressure]") {
    // Only the send timeout can end it: the others are far longer than the test.
    auto server = start_server({"--threads", "1", "--send-timeout", "0.3", "--idle-timeout", "60",
                                "--header-timeout", "60"});
    const FdBaseline fds(*server);
    Connection c = connect(*server, 10s, kSmallWindow);
    stall_server_writes(*server, c);
    // Still open on this side, unread: the server closes the connection (its
    // descriptor back to the baseline) on its own. (What this side then sees
    // depends on the kernel: a reset, or megabytes of queued responses
    // through our small window before a FIN.)
    fds.require_back();
    require_serving(*server);
}
