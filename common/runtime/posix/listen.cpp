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

#include "runtime/listen_address.hpp"
#include "runtime/posix/unique_fd.hpp"

namespace sm::runtime {
namespace {

using listen_address::Resolved;

[[noreturn]] void fail(const std::string& what, const Resolved& r, std::uint16_t port, int err) {
    using listen_address::Why;
    listen_address::fail(what, r, port, std::strerror(err),
                         err == EADDRINUSE ? Why::in_use : err == EACCES ? Why::denied : Why::other);
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
    Resolved r = listen_address::resolve(address, port, [](int rc) { return gai_strerror(rc); });
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
            port = listen_address::port_of(bound);
            listen_address::set_port(r, port);
        }
        out.sockets.emplace_back(fd.release());
    }
    out.port = port;
    out.url = fmt::format("http://{}:{}", listen_address::host_for_url(r.addr, r.len), port);
    return out;
}

}  // namespace sm::runtime
