// Sockets for the POSIX platform tests: a connected pair, and a client of
// a local listener.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

#include <catch2/catch.hpp>

#include "runtime/posix/unique_fd.hpp"

namespace sm::runtime::test {

// A connected, non-blocking AF_UNIX stream pair.
struct SocketPair {
    SocketPair() {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
        ours.reset(sv[0]);
        peer.reset(sv[1]);
    }
    UniqueFd ours, peer;
};

// A blocking TCP client of 127.0.0.1:port, or an empty UniqueFd; `err` is
// connect()'s errno (0 when connected).
inline UniqueFd connect_to(std::uint16_t port, int* err = nullptr) {
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

}  // namespace sm::runtime::test
