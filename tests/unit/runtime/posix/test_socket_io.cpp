// runtime/posix/socket_io.hpp: send_from and discard_input, the write and
// lingering-read loops of the POSIX models, against a non-blocking socket
// pair (its buffer fills without a peer reading, its EOF is the peer's close).
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <string>

#include "http/byte_buffer.hpp"
#include "runtime/options.hpp"
#include "runtime/posix/socket_io.hpp"
#include "runtime/posix/unique_fd.hpp"
#include "socket_support.hpp"

using sm::http::ByteBuffer;
using sm::runtime::discard_input;
using sm::runtime::IoResult;
using sm::runtime::linger_blocking;
using sm::runtime::send_from;
using sm::runtime::UniqueFd;
using sm::runtime::test::SocketPair;

namespace {

// Everything readable on fd now (non-blocking).
std::string read_all(int fd) {
    std::string got;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
        got.append(buf, static_cast<std::size_t>(n));
    return got;
}

void write_all(int fd, const std::string& s) {
    REQUIRE(::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size()));
}

}  // namespace

TEST_CASE("socket_io send_from sends everything and consumes it", "[socket_io]") {
    SocketPair sp;
    ByteBuffer out;
    out.append("HTTP/1.1 200 OK\r\n\r\n");
    bool progress = false;
    CHECK(send_from(sp.ours.get(), out, &progress) == IoResult::done);
    CHECK(out.empty());
    CHECK(progress);
    CHECK(read_all(sp.peer.get()) == "HTTP/1.1 200 OK\r\n\r\n");
}

TEST_CASE("socket_io send_from with nothing to send is done without progress", "[socket_io]") {
    SocketPair sp;
    ByteBuffer out;
    bool progress = false;
    CHECK(send_from(sp.ours.get(), out, &progress) == IoResult::done);
    CHECK_FALSE(progress);
    CHECK(send_from(sp.ours.get(), out) == IoResult::done);  // progress is optional
}

TEST_CASE("socket_io send_from stops at a full socket and keeps the rest", "[socket_io]") {
    SocketPair sp;
    // Far more than a socket pair buffers (a few hundred KiB at most).
    std::string big(16 * 1024 * 1024, '\0');
    for (std::size_t i = 0; i < big.size(); ++i)
        big[i] = static_cast<char>('a' + i % 26);
    ByteBuffer out;
    out.append(big);
    bool progress = false;
    CHECK(send_from(sp.ours.get(), out, &progress) == IoResult::would_block);
    CHECK(progress);
    CHECK_FALSE(out.empty());
    CHECK(out.size() < big.size());

    // As EPOLLOUT would: the peer reads, the send continues from where it
    // stopped, until all of it is through, in order.
    std::string got;
    IoResult r = IoResult::would_block;
    while (r == IoResult::would_block) {
        got += read_all(sp.peer.get());
        r = send_from(sp.ours.get(), out);
    }
    CHECK(r == IoResult::done);
    got += read_all(sp.peer.get());
    CHECK(got.size() == big.size());
    CHECK(got == big);
}

TEST_CASE("socket_io send_from to a closed peer is closed, without SIGPIPE", "[socket_io]") {
    SocketPair sp;
    sp.peer.reset();
    ByteBuffer out;
    out.append("late");
    bool progress = false;
    CHECK(send_from(sp.ours.get(), out, &progress) == IoResult::closed);
    CHECK_FALSE(progress);
    CHECK(out.size() == 4);  // nothing was consumed
}

TEST_CASE("socket_io discard_input reads and drops what is there, then would_block",
          "[socket_io]") {
    SocketPair sp;
    write_all(sp.peer.get(), std::string(100, 'x'));
    char buf[16];
    CHECK(discard_input(sp.ours.get(), buf, sizeof buf, 100) == IoResult::would_block);
    CHECK(read_all(sp.ours.get()).empty());  // all of it is gone
    CHECK(discard_input(sp.ours.get(), buf, sizeof buf, 1) == IoResult::would_block);
}

TEST_CASE("socket_io discard_input is done when its budget is spent with input left",
          "[socket_io]") {
    SocketPair sp;
    write_all(sp.peer.get(), std::string(100, 'x'));
    char buf[10];
    CHECK(discard_input(sp.ours.get(), buf, sizeof buf, 3) == IoResult::done);
    CHECK(read_all(sp.ours.get()).size() == 70);  // three reads of 10 were dropped
}

TEST_CASE("socket_io discard_input is closed at the peer's EOF", "[socket_io]") {
    SocketPair sp;
    write_all(sp.peer.get(), "bye");
    sp.peer.reset();
    char buf[16];
    CHECK(discard_input(sp.ours.get(), buf, sizeof buf, 4) == IoResult::closed);
}

TEST_CASE("socket_io discard_input is closed on an error", "[socket_io]") {
    // An unconnected socket cannot be read: an error, not EAGAIN.
    UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    REQUIRE(s);
    char buf[16];
    CHECK(discard_input(s.get(), buf, sizeof buf, 4) == IoResult::closed);
}

namespace {

// A connected pair of blocking sockets: linger_blocking's reads block,
// bounded by the timeouts it sets.
struct BlockingPair {
    BlockingPair() {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        ours.reset(sv[0]);
        peer.reset(sv[1]);
    }
    UniqueFd ours, peer;
};

sm::runtime::ServerOptions linger_for(std::chrono::milliseconds t) {
    sm::runtime::ServerOptions o;
    o.linger_timeout = t;
    return o;
}

}  // namespace

TEST_CASE("socket_io linger_blocking sends our FIN, drains the client's input and ends at its EOF",
          "[socket_io]") {
    BlockingPair p;
    write_all(p.peer.get(), std::string(10000, 'x'));  // what the client still sends
    REQUIRE(::shutdown(p.peer.get(), SHUT_WR) == 0);   // ... then its FIN
    char buf[1024];
    // Returns at the client's EOF (long before the 60 s linger timeout,
    // which the ctest timeout would catch).
    linger_blocking(p.ours.get(), buf, sizeof buf, linger_for(std::chrono::seconds(60)));
    char c;
    CHECK(::read(p.peer.get(), &c, 1) == 0);                // the client saw our FIN
    CHECK(::recv(p.ours.get(), &c, 1, MSG_DONTWAIT) == 0);  // everything was read
}

TEST_CASE("socket_io linger_blocking ends at --linger-timeout when the client never closes",
          "[socket_io]") {
    BlockingPair p;
    char buf[1024];
    linger_blocking(p.ours.get(), buf, sizeof buf, linger_for(std::chrono::milliseconds(50)));
    char c;
    CHECK(::recv(p.peer.get(), &c, 1, MSG_DONTWAIT) == 0);  // our side was shut down for writing
}

TEST_CASE("socket_io linger_blocking with --linger-timeout 0 does not shut the socket down",
          "[socket_io]") {
    SocketPair p;  // non-blocking: a read that finds nothing says so
    char buf[1024];
    linger_blocking(p.ours.get(), buf, sizeof buf, linger_for(std::chrono::milliseconds(0)));
    char c;
    CHECK(::read(p.peer.get(), &c, 1) == -1);  // no FIN: nothing to read yet
    CHECK(errno == EAGAIN);
}
