// The platform contract (runtime/platform.hpp) as runtime/posix implements
// it, where that differs from other platforms: SO_REUSEPORT listeners and
// their descriptor flags, the stop signal's eventfd, errno values and their
// texts, pthread stack sizes, affinity, the output the kernel still holds. Checked with the system's own calls
// (getsockname, fcntl, poll) on real descriptors. The platform-neutral
// cases are in ../test_platform.cpp.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/cpu.hpp"
#include "runtime/deadlines.hpp"
#include "runtime/platform.hpp"
#include "runtime/posix/unique_fd.hpp"
#include "runtime_test_support.hpp"
#include "socket_support.hpp"

using sm::runtime::AcceptError;
using sm::runtime::Deadlines;
using sm::runtime::kNoHandle;
using sm::runtime::ServerOptions;
using sm::runtime::unsent_output;
using sm::runtime::Listener;
using sm::runtime::StopSignal;
using sm::runtime::UniqueFd;
using sm::runtime::test::connect_to;
using sm::runtime::test::handle_open;
using sm::runtime::test::local_port;
using sm::runtime::test::SocketPair;
namespace errors = sm::runtime::test::errors;

namespace {

int int_option(int fd, int level, int name) {
    int v = -1;
    socklen_t len = sizeof v;
    REQUIRE(::getsockopt(fd, level, name, &v, &len) == 0);
    return v;
}

bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

}  // namespace

TEST_CASE("platform posix open_listeners on port 0 binds every socket to the port it picks",
          "[platform]") {
    const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", 0, 3, 16);
    REQUIRE(l.sockets.size() == 3);
    CHECK(l.port != 0);
    CHECK(l.url == "http://127.0.0.1:" + std::to_string(l.port));
    for (const Listener& s : l.sockets) {
        REQUIRE(s);
        CHECK(local_port(s.handle()) == l.port);
        CHECK(int_option(s.handle(), SOL_SOCKET, SO_ACCEPTCONN) == 1);  // listening
        CHECK(int_option(s.handle(), SOL_SOCKET, SO_REUSEPORT) == 1);
        CHECK((::fcntl(s.handle(), F_GETFL) & O_NONBLOCK) != 0);
        CHECK((::fcntl(s.handle(), F_GETFD) & FD_CLOEXEC) != 0);
        CHECK(int_option(s.handle(), IPPROTO_TCP, TCP_NODELAY) != 0);
    }
    // Each is its own accept queue on the one port; a client reaches one.
    const UniqueFd client = connect_to(l.port);
    CHECK(client);
}

TEST_CASE("platform posix open_listeners never joins a port already listened on", "[platform]") {
    // Our own listener: SO_REUSEPORT alone would let a second server (same
    // user) join its port and split its traffic silently.
    const sm::runtime::Listeners first = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    const std::string port = std::to_string(first.port);
    CHECK_THROWS_MATCHES(
        sm::runtime::open_listeners("127.0.0.1", first.port, 2, 16), std::runtime_error,
        Catch::Message("cannot listen on 127.0.0.1:" + port +
                       ": Address already in use (is another server already running on this "
                       "port?)"));
}

TEST_CASE("platform posix open_listeners on a given free port binds all of them there",
          "[platform]") {
    std::uint16_t port;
    {
        const auto probe = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
        port = probe.port;
    }
    const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", port, 2, 16);
    CHECK(l.port == port);
    REQUIRE(l.sockets.size() == 2);
    CHECK(local_port(l.sockets[0].handle()) == port);
    CHECK(local_port(l.sockets[1].handle()) == port);
}

TEST_CASE("platform posix StopSignal turns readable on request and stays readable", "[platform]") {
    StopSignal stop;
    CHECK_FALSE(stop.requested());
    CHECK_FALSE(readable(stop.handle()));
    stop.request();
    CHECK(stop.requested());
    // Every worker polls the same handle, and none drains it.
    CHECK(readable(stop.handle()));
    CHECK(readable(stop.handle()));
    stop.request();  // a second request changes nothing
    CHECK(stop.requested());
    CHECK(readable(stop.handle()));
}

TEST_CASE("platform posix StopSignal seen from another thread", "[platform]") {
    StopSignal stop;
    bool seen = false;
    std::thread waiter([&] {
        pollfd p{stop.handle(), POLLIN, 0};
        while (::poll(&p, 1, -1) != 1) {
        }
        seen = stop.requested();  // release/acquire: set before the wake-up
    });
    stop.request();
    waiter.join();
    CHECK(seen);
}

TEST_CASE("platform posix StopSignal closes its eventfd", "[platform]") {
    int h;
    {
        const StopSignal stop;
        h = stop.handle();
        CHECK(handle_open(h));
    }
    CHECK_FALSE(handle_open(h));
}

// Per error code, from socket_support.hpp's lists: a connection's own
// failure is skipped, only a shortage pauses, and anything else is unknown
// (logged, accepting goes on; test_accept_gate.cpp).
TEST_CASE("platform posix classify_accept_error would-block is again", "[platform]") {
    const int err = GENERATE(from_range(errors::kAgain));
    CAPTURE(err, sm::runtime::error_text(err));
    CHECK(sm::runtime::classify_accept_error(err) == AcceptError::again);
}

TEST_CASE("platform posix classify_accept_error a connection's own failure is skip", "[platform]") {
    const int err = GENERATE(from_range(errors::kSkip));
    CAPTURE(err, sm::runtime::error_text(err));
    CHECK(sm::runtime::classify_accept_error(err) == AcceptError::skip);
}

TEST_CASE("platform posix classify_accept_error out of descriptors or memory is exhausted",
          "[platform]") {
    const int err = GENERATE(from_range(errors::kExhausted));
    CAPTURE(err, sm::runtime::error_text(err));
    CHECK(sm::runtime::classify_accept_error(err) == AcceptError::exhausted);
}

TEST_CASE("platform posix classify_accept_error anything else is unknown", "[platform]") {
    const int err = GENERATE(from_range(errors::kUnknown));
    CAPTURE(err, sm::runtime::error_text(err));
    CHECK(sm::runtime::classify_accept_error(err) == AcceptError::unknown);
}

TEST_CASE("platform posix accept on a listener shut down for reading fails as unknown",
          "[platform]") {
    // A real accept error that is neither a client's nor a shortage: Linux
    // takes a listener out of the listening state on shutdown(SHUT_RD).
    const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    const int fd = l.sockets.at(0).handle();
    REQUIRE(::shutdown(fd, SHUT_RD) == 0);
    REQUIRE(::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK) < 0);
    const int err = errno;
    CAPTURE(sm::runtime::error_text(err));
    CHECK(err == EINVAL);
    CHECK(sm::runtime::classify_accept_error(err) == AcceptError::unknown);
}

TEST_CASE("platform posix error_text is the system's description", "[platform]") {
    CHECK(sm::runtime::error_text(EMFILE) == "Too many open files");
    CHECK(sm::runtime::error_text(ECONNRESET) == "Connection reset by peer");
    CHECK(sm::runtime::error_text(EADDRINUSE) == "Address already in use");
}

TEST_CASE("platform posix start_lingering_close on what is not a socket fails", "[platform]") {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    const UniqueFd r(p[0]), w(p[1]);
    CHECK_FALSE(sm::runtime::start_lingering_close(w.get(), std::chrono::milliseconds(2000)));
}

TEST_CASE("platform posix set_nodelay on a TCP connection", "[platform]") {
    const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    const UniqueFd client = connect_to(l.port);
    REQUIRE(client);
    CHECK(int_option(client.get(), IPPROTO_TCP, TCP_NODELAY) == 0);
    CHECK(sm::runtime::set_nodelay(client.get()));
    CHECK(int_option(client.get(), IPPROTO_TCP, TCP_NODELAY) != 0);
    SocketPair sp;  // not TCP
    CHECK_FALSE(sm::runtime::set_nodelay(sp.ours.get()));
}

TEST_CASE("platform posix Thread has the stack size it was given", "[platform]") {
    constexpr std::size_t kStack = 256 * 1024;
    std::size_t stack = 0;
    {
        const sm::runtime::Thread t(kStack, [&] {
            pthread_attr_t attr;
            if (pthread_getattr_np(pthread_self(), &attr) == 0) {
                pthread_attr_getstacksize(&attr, &stack);
                pthread_attr_destroy(&attr);
            }
        });
    }
    CHECK(stack >= kStack);
    CHECK(stack < 2 * kStack);  // not the default (8 MiB with the usual ulimit -s)
}

TEST_CASE("platform posix allowed_cpus and pin_current_thread", "[platform]") {
    const std::vector<int> cpus = sm::runtime::allowed_cpus();
    REQUIRE_FALSE(cpus.empty());
    CHECK(std::is_sorted(cpus.begin(), cpus.end()));
    // On a thread of its own: the test process keeps its affinity.
    std::vector<int> pinned;
    std::thread([&] {
        sm::runtime::pin_current_thread(cpus.back());
        pinned = sm::runtime::allowed_cpus();
    }).join();
    CHECK(pinned == std::vector{cpus.back()});
}

namespace {

// runtime::Deadlines over one connection on a real socket pair (`pair.ours`
// is the server's end), a request head begun at 0. Time is explicit
// (test_options: idle 100 ms, head 30 ms); expire(ms) counts what it did.
struct KernelQueue {
    SocketPair pair;
    sm::test::SessionEnv env;
    ServerOptions options = sm::test::test_options();
    Deadlines<sm::test::TestConn> d{options};
    sm::test::TestConn c;
    int closed = 0;
    int late = 0;

    KernelQueue() {
        c.fd = pair.ours.get();
        d.start(c, sm::test::at(0));
        sm::test::feed(c.session, sm::test::kHeadStart);
        REQUIRE(d.track_head(c, sm::test::at(0)));
    }
    // `bytes` written, none read by the peer yet.
    void write(std::size_t bytes) {
        const std::string block(bytes, 'x');
        REQUIRE(::write(pair.ours.get(), block.data(), block.size()) == ssize_t(block.size()));
    }
    // The peer reads up to `bytes`.
    void take(std::size_t bytes) {
        std::string sink(bytes, '\0');
        REQUIRE(::read(pair.peer.get(), sink.data(), sink.size()) > 0);
    }
    void expire(int ms) {
        d.expire(
            sm::test::at(ms),
            [this](sm::test::TestConn& x) {
                ++closed;
                Deadlines<sm::test::TestConn>::forget(x);
            },
            [this](sm::test::TestConn&) { ++late; });
    }
};

}  // namespace

TEST_CASE("platform: unsent_output is what the peer has not taken of what we wrote, and "
          "the deadlines wait for it while it moves",
          "[platform][deadlines]") {
    // The peer reads nothing at first, then some, then nothing more: a
    // pipelining client whose last request is cut, taking its responses.
    using sm::test::at;
    KernelQueue k;
    CHECK(unsent_output(k.pair.ours.get()) == 0);
    CHECK(unsent_output(kNoHandle) == 0);
    k.write(16 * 1024);
    k.write(16 * 1024);
    const std::size_t unread = unsent_output(k.pair.ours.get());
    CHECK(unread >= 32 * 1024);
    // The head deadline passes with output queued: the first look sees it
    // (it moved from nothing), so the head's deadline starts again.
    k.expire(30);
    CHECK(k.late == 0);
    CHECK(k.c.clock.head_deadline() == at(60));
    CHECK(k.d.next() == at(60));
    // The client takes some: again.
    k.take(16 * 1024);
    CHECK(unsent_output(k.pair.ours.get()) < unread);
    k.expire(60);
    CHECK(k.late == 0);
    CHECK(k.c.clock.head_deadline() == at(90));
    // It takes nothing over a whole head timeout: the head is late.
    k.expire(90);
    CHECK(k.late == 1);
    CHECK(k.closed == 0);
    // The idle deadline, from the last renewal, closes it likewise: the
    // queue has not moved since the last look.
    k.c.session.reset();
    k.d.track_head(k.c, at(90));
    k.expire(160);
    CHECK(k.closed == 1);
}

TEST_CASE("platform: a client that took the last of its output gets a whole timeout from then",
          "[platform][deadlines]") {
    // The queue emptied between two looks: that is movement too, so the
    // head's deadline starts again at the look that saw it empty (a client
    // must not lose what was left of a renewed period to reading its last
    // bytes). The next look, still empty: the head is late.
    using sm::test::at;
    KernelQueue k;
    k.write(8 * 1024);
    k.expire(30);  // queued: renewed
    CHECK(k.late == 0);
    k.take(8 * 1024);
    REQUIRE(unsent_output(k.pair.ours.get()) == 0);
    k.expire(60);  // emptied since: renewed, from now
    CHECK(k.late == 0);
    CHECK(k.c.clock.head_deadline() == at(90));
    k.expire(90);  // still empty: late
    CHECK(k.late == 1);
}
