// runtime/posix/socket_io.hpp: send_from and discard_input, the write and
// lingering-read loops of the POSIX models, against a non-blocking socket
// pair (its buffer fills without a peer reading, its EOF is the peer's close).
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstddef>
#include <string>

#include "http/byte_buffer.hpp"
#include "runtime/posix/socket_io.hpp"
#include "runtime/posix/unique_fd.hpp"
#include "socket_support.hpp"

using sm::http::ByteBuffer;
using sm::runtime::discard_input;
using sm::runtime::IoResult;
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
