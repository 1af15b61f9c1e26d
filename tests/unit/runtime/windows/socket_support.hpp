// Sockets for the platform tests, Windows side: what posix/socket_support.hpp
// provides, with Winsock. Windows has no socketpair(): a pair is a TCP
// connection over 127.0.0.1, which also makes its FIN travel the loopback,
// so the reads that expect one wait for it (bounded, never a threshold).
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <utility>

#include <catch2/catch.hpp>

#include "runtime/windows/winsock.hpp"

namespace sm::runtime::test {

// An owned SOCKET, as UniqueFd is on POSIX: get() is its NativeHandle.
class Socket {
  public:
    Socket() noexcept = default;
    explicit Socket(SOCKET s) noexcept : h_(static_cast<NativeHandle>(s)) {}
    Socket(Socket&& o) noexcept : h_(std::exchange(o.h_, kNoHandle)) {}
    Socket& operator=(Socket&& o) noexcept {
        if (this != &o) reset(std::exchange(o.h_, kNoHandle));
        return *this;
    }
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    ~Socket() { reset(); }

    [[nodiscard]] NativeHandle get() const noexcept { return h_; }
    [[nodiscard]] explicit operator bool() const noexcept { return h_ != kNoHandle; }
    void reset(NativeHandle h = kNoHandle) noexcept {
        if (h_ != kNoHandle) ::closesocket(as_socket(h_));
        h_ = h;
    }

  private:
    NativeHandle h_ = kNoHandle;
};

// How long a test waits for bytes or an EOF that must come: a bound, so
// that a lost one fails the case instead of hanging it. Never a threshold.
inline constexpr int kWaitMs = 10'000;

inline sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

// The local port a socket is bound to.
inline std::uint16_t local_port(NativeHandle s) {
    sockaddr_in a{};
    int len = sizeof a;
    REQUIRE(::getsockname(as_socket(s), reinterpret_cast<sockaddr*>(&a), &len) == 0);
    return ntohs(a.sin_port);
}

// A blocking TCP client of 127.0.0.1:port, or an empty Socket; `err` is
// connect()'s WSA error (0 when connected).
inline Socket connect_to(std::uint16_t port, int* err = nullptr) {
    start_winsock();
    Socket s(::socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
    REQUIRE(s);
    const sockaddr_in a = loopback(port);
    const int rc = ::connect(as_socket(s.get()), reinterpret_cast<const sockaddr*>(&a), sizeof a);
    if (err) *err = rc == 0 ? 0 : ::WSAGetLastError();
    if (rc != 0) return Socket();
    return s;
}

inline void set_nonblocking(const Socket& s) {
    u_long on = 1;
    REQUIRE(::ioctlsocket(as_socket(s.get()), FIONBIO, &on) == 0);
}

// A connected pair of non-blocking TCP sockets on 127.0.0.1: `ours` is the
// accepted (server's) end, `peer` the client.
struct SocketPair {
    SocketPair() {
        start_winsock();
        const Socket listener(::socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
        REQUIRE(listener);
        const sockaddr_in any = loopback(0);
        REQUIRE(::bind(as_socket(listener.get()), reinterpret_cast<const sockaddr*>(&any),
                       sizeof any) == 0);
        REQUIRE(::listen(as_socket(listener.get()), 1) == 0);
        peer = connect_to(local_port(listener.get()));
        REQUIRE(peer);
        ours = Socket(::accept(as_socket(listener.get()), nullptr, nullptr));
        REQUIRE(ours);
        set_nonblocking(ours);
        set_nonblocking(peer);
    }
    Socket ours, peer;
};

// Whether `h` is still an open socket (not closed behind our back, nor twice).
inline bool handle_open(NativeHandle h) {
    int type = 0;
    int len = sizeof type;
    return ::getsockopt(as_socket(h), SOL_SOCKET, SO_TYPE, reinterpret_cast<char*>(&type), &len) ==
               0 ||
           ::WSAGetLastError() != WSAENOTSOCK;
}

// What reading one byte found.
enum class Received { byte, eof, nothing, failed };

inline std::ostream& operator<<(std::ostream& os, Received r) {
    constexpr const char* kNames[] = {"byte", "eof", "nothing", "failed"};
    return os << kNames[static_cast<int>(r)];
}

// One read of a byte from a non-blocking socket, now: `nothing` if none
// is there yet.
inline Received receive_now(NativeHandle s, char& byte) {
    const int n = ::recv(as_socket(s), &byte, 1, 0);
    if (n == 1) return Received::byte;
    if (n == 0) return Received::eof;
    return ::WSAGetLastError() == WSAEWOULDBLOCK ? Received::nothing : Received::failed;
}

// The same once `s` turns readable, waiting at most kWaitMs for that.
inline Received receive(NativeHandle s, char& byte) {
    WSAPOLLFD p{as_socket(s), POLLRDNORM, 0};
    if (::WSAPoll(&p, 1, kWaitMs) != 1) return Received::nothing;
    return receive_now(s, byte);
}

// Sends one byte; false if the socket cannot send (shut down, reset).
inline bool send_byte(NativeHandle s, char byte) {
    return ::send(as_socket(s), &byte, 1, 0) == 1;
}

// The errors an accept (accept(), AcceptEx) reports, by what
// classify_accept_error() must make of them, and a few by name for the log
// lines that quote them.
namespace errors {
inline constexpr int kWouldBlock = WSAEWOULDBLOCK;
inline constexpr int kConnectionAborted = WSAECONNABORTED;
inline constexpr int kTooManyFiles = WSAEMFILE;
inline constexpr int kNoBuffers = WSAENOBUFS;
inline constexpr int kInvalidArgument = WSAEINVAL;
inline constexpr int kAddressInUse = WSAEADDRINUSE;
inline constexpr std::array<int, 1> kAgain{WSAEWOULDBLOCK};
// One connection's failure: reset or aborted while queued, as Winsock and as
// a completion's Win32 error; WSAENOTCONN and WSAEACCES as Wine reports a
// connection reset before AcceptEx took it and a firewall's refusal; our own
// cancel; and the network errors that may be pending on the new connection.
inline constexpr std::array<int, 18> kSkip{WSAEINTR,
                                           WSAECONNRESET,
                                           ERROR_NETNAME_DELETED,
                                           WSAECONNABORTED,
                                           ERROR_CONNECTION_ABORTED,
                                           WSAENOTCONN,
                                           ERROR_CONNECTION_INVALID,
                                           ERROR_OPERATION_ABORTED,
                                           WSAEACCES,
                                           WSAENETDOWN,
                                           WSAENETUNREACH,
                                           ERROR_NETWORK_UNREACHABLE,
                                           WSAEHOSTUNREACH,
                                           ERROR_HOST_UNREACHABLE,
                                           WSAEHOSTDOWN,
                                           WSAENETRESET,
                                           WSAETIMEDOUT,
                                           ERROR_SEM_TIMEOUT};
// Out of socket handles, buffers, memory or the kernel's pools.
inline constexpr std::array<int, 10> kExhausted{WSAEMFILE,
                                                ERROR_TOO_MANY_OPEN_FILES,
                                                WSAENOBUFS,
                                                ERROR_NOT_ENOUGH_MEMORY,
                                                ERROR_OUTOFMEMORY,
                                                ERROR_NO_SYSTEM_RESOURCES,
                                                ERROR_NONPAGED_SYSTEM_RESOURCES,
                                                ERROR_PAGED_SYSTEM_RESOURCES,
                                                ERROR_NOT_ENOUGH_QUOTA,
                                                ERROR_COMMITMENT_LIMIT};
// Neither: a bug or a state of the listener, not a client's doing or a shortage.
inline constexpr std::array<int, 5> kUnknown{WSAEINVAL, WSAENOTSOCK, WSAEFAULT, WSAEOPNOTSUPP,
                                             ERROR_INVALID_PARAMETER};
}  // namespace errors

}  // namespace sm::runtime::test
