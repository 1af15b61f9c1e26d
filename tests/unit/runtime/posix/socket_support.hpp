// Sockets for the platform tests, POSIX side: a connected pair, a client of
// a local listener, one-byte reads and writes with bounded waits, and the
// errno values accept() reports. windows/socket_support.hpp has the same
// names for Winsock, so the platform-neutral tests (the lingering close, the
// accept gate) include "socket_support.hpp" and run on both.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <ostream>

#include <catch2/catch.hpp>

#include "runtime/platform.hpp"
#include "runtime/posix/unique_fd.hpp"

namespace sm::runtime::test {

// An owned socket: get() is its NativeHandle.
using Socket = UniqueFd;

// How long a test waits for bytes or an EOF that must come: a bound, so
// that a lost one fails the case instead of hanging it. Never a threshold.
inline constexpr int kWaitMs = 10'000;

// A connected, non-blocking AF_UNIX stream pair: `ours` is the server's end.
struct SocketPair {
    SocketPair() {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
        ours.reset(sv[0]);
        peer.reset(sv[1]);
    }
    Socket ours, peer;
};

// A blocking TCP client of 127.0.0.1:port, or an empty Socket; `err` is
// connect()'s errno (0 when connected).
inline Socket connect_to(std::uint16_t port, int* err = nullptr) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(fd);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (err) *err = rc == 0 ? 0 : errno;
    if (rc != 0) return UniqueFd();
    return fd;
}

// The local port a socket is bound to.
inline std::uint16_t local_port(NativeHandle s) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    return ntohs(a.sin_port);
}

// Whether `h` is still open (not closed behind our back, nor twice).
inline bool handle_open(NativeHandle h) {
    return ::fcntl(h, F_GETFD) != -1 || errno != EBADF;
}

// What reading one byte found.
enum class Received { byte, eof, nothing, failed };

inline std::ostream& operator<<(std::ostream& os, Received r) {
    constexpr const char* kNames[] = {"byte", "eof", "nothing", "failed"};
    return os << kNames[static_cast<int>(r)];
}

// One non-blocking read of a byte, now: `nothing` if none is there yet.
inline Received receive_now(NativeHandle s, char& byte) {
    const ssize_t n = ::recv(s, &byte, 1, MSG_DONTWAIT);
    if (n == 1) return Received::byte;
    if (n == 0) return Received::eof;
    return errno == EAGAIN || errno == EWOULDBLOCK ? Received::nothing : Received::failed;
}

// The same once `s` turns readable, waiting at most kWaitMs for that.
inline Received receive(NativeHandle s, char& byte) {
    pollfd p{s, POLLIN, 0};
    if (::poll(&p, 1, kWaitMs) != 1) return Received::nothing;
    return receive_now(s, byte);
}

// Sends one byte; false if the socket cannot send (shut down, reset).
inline bool send_byte(NativeHandle s, char byte) {
    return ::send(s, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

// The errors accept() reports, by what classify_accept_error() must make
// of them, and a few by name for the log lines that quote them.
namespace errors {
inline constexpr int kWouldBlock = EAGAIN;
inline constexpr int kConnectionAborted = ECONNABORTED;
inline constexpr int kTooManyFiles = EMFILE;
inline constexpr int kNoBuffers = ENOBUFS;
inline constexpr int kInvalidArgument = EINVAL;
inline constexpr int kAddressInUse = EADDRINUSE;
inline constexpr std::array<int, 2> kAgain{EAGAIN, EWOULDBLOCK};
// One connection's failure: aborted or reset while queued, refused by a
// firewall, an interrupted call, and the network errors accept(2) says may
// be pending on the new connection ("treat them like EAGAIN").
inline constexpr std::array<int, 13> kSkip{
    EINTR,     ECONNABORTED, ECONNRESET,   EPERM,      ENETDOWN,    EPROTO,   ENOPROTOOPT,
    EHOSTDOWN, ENONET,       EHOSTUNREACH, EOPNOTSUPP, ENETUNREACH, ETIMEDOUT};
// Out of descriptors (the process's, the system's), buffers, memory, epoll watches.
inline constexpr std::array<int, 5> kExhausted{EMFILE, ENFILE, ENOBUFS, ENOMEM, ENOSPC};
// Neither: a bug or a state of the listener, not a client's doing or a shortage.
inline constexpr std::array<int, 5> kUnknown{EINVAL, EBADF, ENOTSOCK, EFAULT, ENOSR};
}  // namespace errors

}  // namespace sm::runtime::test
