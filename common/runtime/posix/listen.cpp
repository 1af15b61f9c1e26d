// The POSIX side of runtime/platform.hpp: listening sockets, one per thread
// with SO_REUSEPORT, so the kernel spreads connections over per-thread accept
// queues with no shared lock.
#include "runtime/platform.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

#include "runtime/posix/unique_fd.hpp"

namespace sm::runtime {
namespace {

struct Resolved {
    sockaddr_storage addr{};
    socklen_t len = 0;
    int family = AF_INET;
};

Resolved resolve(const std::string& address, std::uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    if (const int rc =
            getaddrinfo(address.empty() ? nullptr : address.c_str(), service.c_str(), &hints, &res);
        rc != 0) {
        throw std::runtime_error(
            fmt::format("cannot resolve address '{}': {}", address, gai_strerror(rc)));
    }
    Resolved r;
    std::memcpy(&r.addr, res->ai_addr, res->ai_addrlen);
    r.len = res->ai_addrlen;
    r.family = res->ai_family;
    freeaddrinfo(res);
    return r;
}

void set_port(Resolved& r, std::uint16_t port) {
    if (r.family == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(&r.addr)->sin6_port = htons(port);
    else
        reinterpret_cast<sockaddr_in*>(&r.addr)->sin_port = htons(port);
}

std::string host_for_url(const Resolved& r) {
    char host[NI_MAXHOST];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&r.addr), r.len, host, sizeof host, nullptr,
                    0, NI_NUMERICHOST) != 0)
        return "?";
    return r.family == AF_INET6 ? fmt::format("[{}]", host) : std::string(host);
}

[[noreturn]] void fail(const std::string& what, const Resolved& r, std::uint16_t port, int err) {
    std::string hint;
    if (err == EADDRINUSE) hint = " (is another server already running on this port?)";
    if (err == EACCES) hint = " (ports below 1024 need privileges)";
    throw std::runtime_error(fmt::format("cannot {} {}:{}: {}{}", what, host_for_url(r), port,
                                         std::strerror(err), hint));
}

UniqueFd make_socket(const Resolved& r, bool reuseport) {
    UniqueFd fd(::socket(r.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) throw std::runtime_error(fmt::format("socket(): {}", std::strerror(errno)));
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        throw std::runtime_error(fmt::format("SO_REUSEPORT: {}", std::strerror(errno)));
    // Accepted sockets inherit TCP_NODELAY on Linux; models set it again anyway.
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

}  // namespace

bool is_ip_address(const std::string& s) noexcept {
    unsigned char buf[16];
    return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

bool set_nodelay(NativeHandle fd) noexcept {
    const int one = 1;
    return ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
}

Listeners open_listeners(const std::string& address, std::uint16_t port, unsigned count,
                         int backlog) {
    Resolved r = resolve(address, port);
    if (port != 0) {
        // SO_REUSEPORT would let us join a stale server's port and split its
        // traffic silently; a plain bind first turns that into a clear error.
        UniqueFd probe = make_socket(r, false);
        if (::bind(probe.get(), reinterpret_cast<sockaddr*>(&r.addr), r.len) != 0)
            fail("listen on", r, port, errno);
    }
    Listeners out;
    for (unsigned i = 0; i < count; ++i) {
        UniqueFd fd = make_socket(r, true);
        if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&r.addr), r.len) != 0)
            fail("bind", r, port, errno);
        if (::listen(fd.get(), backlog) != 0) fail("listen on", r, port, errno);
        if (i == 0) {
            sockaddr_storage bound{};
            socklen_t len = sizeof bound;
            ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
            port = ntohs(bound.ss_family == AF_INET6
                             ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
            set_port(r, port);
        }
        out.sockets.emplace_back(fd.release());
    }
    out.port = port;
    out.url = fmt::format("http://{}:{}", host_for_url(r), port);
    return out;
}

}  // namespace sm::runtime
