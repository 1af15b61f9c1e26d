// runtime/posix/epoll_util.hpp: new_epoll and WatchedListener, the accept
// loop server-epoll and server-threadpool share. Real TCP connections on
// 127.0.0.1 through a real epoll set. Every wait that must see an event
// blocks without a timeout (a missing event hangs the case until ctest's
// timeout fails it); every "no event" check is made only once the listener
// is known to be readable (poll on it directly), so it cannot pass merely
// because a connection had not arrived yet.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "capture.hpp"
#include "runtime/accept_gate.hpp"
#include "runtime/connection_limit.hpp"
#include "runtime/platform.hpp"
#include "runtime/posix/epoll_util.hpp"
#include "runtime/posix/unique_fd.hpp"
#include "runtime_test_support.hpp"
#include "socket_support.hpp"

using sm::runtime::AcceptGate;
using sm::runtime::ConnectionLimit;
using sm::runtime::UniqueFd;
using sm::runtime::WatchedListener;
using sm::runtime::test::connect_to;
using sm::test::at;

namespace {

char listen_tag;
char stop_tag;

// Restores the descriptor limit however the case ends.
class DescriptorLimit {
  public:
    DescriptorLimit() { REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved_) == 0); }
    ~DescriptorLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
    DescriptorLimit(const DescriptorLimit&) = delete;
    DescriptorLimit& operator=(const DescriptorLimit&) = delete;
    // No new descriptor can be opened: the soft limit is the lowest free one.
    void exhaust() {
        const int lowest_free = ::dup(0);
        REQUIRE(lowest_free >= 0);
        ::close(lowest_free);
        rlimit tight = saved_;
        tight.rlim_cur = static_cast<rlim_t>(lowest_free);
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
    }
    void restore() { REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved_) == 0); }

  private:
    rlimit saved_{};
};

// Blocks until `fd` is readable: a connection is in the listener's queue.
void wait_readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, -1) != 1) {
    }
}

// The tags epoll reports now, without waiting (timeout 0) or until one
// comes (timeout -1).
std::vector<void*> events(int ep, int timeout) {
    epoll_event ev[8];
    int n;
    while ((n = ::epoll_wait(ep, ev, 8, timeout)) < 0 && errno == EINTR) {
    }
    REQUIRE(n >= 0);
    std::vector<void*> tags;
    for (int i = 0; i < n; ++i) {
        // A copy first: epoll_event is packed on x86-64, its pointer misaligned.
        void* const tag = ev[i].data.ptr;
        tags.push_back(tag);
    }
    return tags;
}

struct Harness {
    explicit Harness(std::size_t max) : limit(max) {}

    sm::runtime::Listeners listeners = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    sm::runtime::Listener& listener = listeners.sockets[0];
    sm::runtime::StopSignal stop;
    ConnectionLimit limit;
    AcceptGate gate{limit};
    UniqueFd ep = sm::runtime::new_epoll(stop, &stop_tag);
    WatchedListener watched{ep.get(), listener, gate, &listen_tag};
    std::vector<UniqueFd> accepted;

    // As a model's adopt: keeps the connection; false would mean the gate
    // closed meanwhile.
    void accept(sm::runtime::Clock::time_point now) {
        watched.accept(now, [this](int fd) {
            accepted.emplace_back(fd);
            return true;
        });
    }
};

}  // namespace

TEST_CASE("epoll_util new_epoll watches the stop signal", "[epoll_util]") {
    Harness h(4);
    h.watched.watch(false);  // only the stop signal is left in the set
    CHECK(events(h.ep.get(), 0).empty());
    h.stop.request();
    CHECK(events(h.ep.get(), -1) == std::vector<void*>{&stop_tag});
    // Level-triggered, and never drained: still there.
    CHECK(events(h.ep.get(), 0) == std::vector<void*>{&stop_tag});
}

TEST_CASE("epoll_util WatchedListener accepts non-blocking connections with TCP_NODELAY",
          "[epoll_util]") {
    Harness h(4);
    const UniqueFd client = connect_to(h.listeners.port);
    REQUIRE(client);
    CHECK(events(h.ep.get(), -1) == std::vector<void*>{&listen_tag});
    h.accept(at(0));
    REQUIRE(h.accepted.size() == 1);
    const int fd = h.accepted[0].get();
    CHECK((::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
    CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    int nodelay = 0;
    socklen_t len = sizeof nodelay;
    REQUIRE(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len) == 0);
    CHECK(nodelay != 0);
    // The queue is empty again: EAGAIN gave the slot taken for it back.
    CHECK(h.limit.open() == 1);
    CHECK(h.gate.open());
}

TEST_CASE("epoll_util WatchedListener stops watching at the limit and again once a slot frees",
          "[epoll_util]") {
    Harness h(1);
    UniqueFd first = connect_to(h.listeners.port);
    REQUIRE(first);
    CHECK(events(h.ep.get(), -1) == std::vector<void*>{&listen_tag});
    sm::test::capture_log([&] { h.accept(at(0)); });  // the limit is logged
    REQUIRE(h.accepted.size() == 1);
    CHECK(h.gate.at_limit());

    // The next connection waits in the backlog, and the listener, readable,
    // is not in the set: no busy loop of wake-ups while at the limit.
    const UniqueFd second = connect_to(h.listeners.port);
    REQUIRE(second);
    wait_readable(h.listener.handle());
    CHECK(events(h.ep.get(), 0).empty());
    h.watched.reopen_if_due(at(1));  // neither a slot free nor the retry time
    CHECK(events(h.ep.get(), 0).empty());

    h.accepted.clear();  // the model closes its connection...
    h.gate.release();    // ...and its slot is free
    h.watched.reopen_if_due(at(2));
    CHECK(h.gate.open());
    CHECK(events(h.ep.get(), -1) == std::vector<void*>{&listen_tag});
    sm::test::capture_log([&] { h.accept(at(2)); });  // at the limit again
    CHECK(h.accepted.size() == 1);
}

TEST_CASE("epoll_util WatchedListener pauses on EMFILE and keeps the connection queued",
          "[epoll_util]") {
    Harness h(4);
    const UniqueFd client = connect_to(h.listeners.port);
    REQUIRE(client);
    wait_readable(h.listener.handle());

    // No descriptor left for accept4.
    DescriptorLimit fds;
    const std::string log = sm::test::capture_log([&] {
        fds.exhaust();
        h.accept(at(0));
        fds.restore();
    });
    CHECK(log ==
          "test: accept: Too many open files; pausing accepts for 100 ms "
          "(0 connections open)\n");
    CHECK(h.accepted.empty());
    CHECK(h.limit.open() == 0);
    CHECK_FALSE(h.gate.open());
    // Unwatched while paused, though the connection is still queued.
    CHECK(events(h.ep.get(), 0).empty());
    h.watched.reopen_if_due(at(99));
    CHECK(events(h.ep.get(), 0).empty());
    h.watched.reopen_if_due(at(100));
    CHECK(events(h.ep.get(), -1) == std::vector<void*>{&listen_tag});
    h.accept(at(100));
    CHECK(h.accepted.size() == 1);
}

TEST_CASE("epoll_util WatchedListener logs an unknown accept error and keeps watching",
          "[epoll_util]") {
    Harness h(4);
    // Linux takes a listener out of the listening state on shutdown(SHUT_RD):
    // accept4 then fails with EINVAL, an error of no known kind.
    REQUIRE(::shutdown(h.listener.handle(), SHUT_RD) == 0);
    const std::string log = sm::test::capture_log([&] { h.accept(at(0)); });
    CHECK(log ==
          "test: accept: Invalid argument; unexpected error, skipped: accepting goes on "
          "(0 connections open)\n");
    CHECK(h.accepted.empty());
    CHECK(h.limit.open() == 0);
    CHECK(h.gate.open());
    CHECK(h.gate.retry_at() == sm::runtime::Clock::time_point::max());
    // Still in the epoll set: adding it again is refused as a duplicate.
    auto ev = sm::runtime::event_for(&listen_tag, EPOLLIN);
    CHECK(::epoll_ctl(h.ep.get(), EPOLL_CTL_ADD, h.listener.handle(), &ev) == -1);
    CHECK(errno == EEXIST);
}

TEST_CASE("epoll_util WatchedListener close refuses new connections", "[epoll_util]") {
    Harness h(4);
    const int fd = h.listener.handle();
    h.watched.close();
    CHECK_FALSE(h.listener);
    CHECK((::fcntl(fd, F_GETFD) == -1 && errno == EBADF));
    CHECK_FALSE(h.gate.open());
    CHECK_FALSE(h.gate.reopen_due(at(1'000'000)));
    // Refused at once rather than queued: nobody would ever accept it.
    int err = 0;
    CHECK_FALSE(connect_to(h.listeners.port, &err));
    CHECK(err == ECONNREFUSED);
    h.watched.reopen_if_due(at(1'000'000));  // nothing to watch: no effect
    CHECK(events(h.ep.get(), 0).empty());
}
