// Back-pressure: a client that pipelines faster than it reads. Once its
// output reaches the mark the server stops reading it (TCP flow control
// holds the client back), and while it does, no head or idle deadline runs
// against the client: it is waiting for its responses, not idling. Only
// --send-timeout does (no byte of output taken for that long). Nothing is
// lost: when the client reads again, every response arrives, in order.
#include <poll.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <cerrno>
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
    // The 0.3 s may run out before this side has seen the stall (a loaded
    // machine): the server's close then ends it, which is what is asserted.
    stall_server_writes(*server, c, "/plaintext", Stalled::or_closed);
    // Still open on this side, unread: the server closes the connection (its
    // descriptor back to the baseline) on its own. (What this side then sees
    // depends on the kernel: a reset, or megabytes of queued responses
    // through our small window before a FIN.)
    fds.require_back();
    require_serving(*server);
}

TEST_CASE(
    "backpressure a client still taking responses the kernel holds keeps its request head "
    "past --header-timeout",
    "[conformance][backpressure]") {
    // Once the server's own output is written, the kernel may still hold
    // hundreds of KiB of it for a client with a small window. While the
    // client takes them, slowly but steadily, its head in progress is not
    // late: the deadline waits while the kernel's queue moves (runtime
    // DeadlineClock::expire), here for longer than --header-timeout, and
    // once the queue is empty the client has a whole timeout from then to
    // read the few KiB its own side holds and complete the head.
    skip_under_wine(
        "Wine implements no count of the output the kernel holds (SIO_TCP_INFO): "
        "server-iocp.exe's head deadline runs from its last write");
    auto server =
        start_server({"--threads", "1", "--header-timeout", "0.5", "--idle-timeout", "60"});
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server, 10s, kSmallWindow);
        constexpr std::size_t kRequests = 3000;  // about 400 KiB of responses
        const std::string head = "GET /json HTTP/1.1\r\nHo";
        const std::string requests = batch_of(kRequests, "/plaintext") + head;
        // Sent from a thread as the server takes them (it stops reading us
        // while our responses wait), while this one reads.
        std::thread sender([&] {
            std::size_t off = 0;
            while (off < requests.size()) {
                pollfd p{c.fd(), POLLOUT, 0};
                if (::poll(&p, 1, 10'000) <= 0) return;  // the reads below fail then
                const ssize_t n = ::send(c.fd(), requests.data() + off, requests.size() - off,
                                         MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) off += static_cast<std::size_t>(n);
                else if (n < 0 && errno != EAGAIN && errno != EINTR) return;
            }
        });
        // Slowly: a pause of 20 ms every 16 responses (about 2 KiB), far
        // shorter than the head timeout, so the queue moves between any two
        // of the server's looks; the whole takes seconds.
        std::size_t read = 0;
        try {
            for (; read < kRequests; ++read) {
                if (read % 16 == 0) std::this_thread::sleep_for(20ms);
                const Response r = c.read_response();
                if (r.status != 200 || r.body != kPlaintextBody)
                    FAIL("response " << read << " of " << kRequests << ": " << r.describe());
            }
        } catch (...) {
            sender.join();
            throw;
        }
        sender.join();
        // The head is completed now, long after --header-timeout: answered.
        c.send("st: x\r\n\r\n");
        const Response r = c.read_response();
        INFO(r.describe());
        CHECK(r.status == 200);
        CHECK(r.body == kJsonBody);
        CHECK(r.keep_alive);
    }
    require_serving(*server);
    fds.require_back();
}
