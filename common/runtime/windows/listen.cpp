// The Windows side of runtime/platform.hpp: the listening socket. Windows
// has no SO_REUSEPORT that spreads connections over several accept queues,
// so a server has one listener (server-iocp accepts on it with AcceptEx and
// assigns each connection to a thread, servers/iocp/iocp.hpp). It is bound
// with SO_EXCLUSIVEADDRUSE: a port another process listens on is an error,
// never a shared or stolen one.
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include <fmt/core.h>

#include "runtime/windows/winsock.hpp"

namespace sm::runtime {
namespace {

struct Resolved {
    sockaddr_storage addr{};
    int len = 0;
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
            fmt::format("cannot resolve address '{}': {}", address, error_text(rc)));
    }
    Resolved r;
    std::memcpy(&r.addr, res->ai_addr, res->ai_addrlen);
    r.len = static_cast<int>(res->ai_addrlen);
    r.family = res->ai_family;
    freeaddrinfo(res);
    return r;
}

std::string host_for_url(const sockaddr_storage& addr, int len) {
    char host[NI_MAXHOST];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, nullptr, 0,
                    NI_NUMERICHOST) != 0)
        return "?";
    return addr.ss_family == AF_INET6 ? fmt::format("[{}]", host) : std::string(host);
}

[[noreturn]] void fail(const std::string& what, const Resolved& r, std::uint16_t port, int err) {
    std::string hint;
    if (err == WSAEADDRINUSE) hint = " (is another server already running on this port?)";
    if (err == WSAEACCES) hint = " (the port is reserved, or in use by another process)";
    throw std::runtime_error(fmt::format("cannot {} {}:{}: {}{}", what, host_for_url(r.addr, r.len),
                                         port, error_text(err), hint));
}

}  // namespace

void start_winsock() {
    static std::once_flag once;
    static int rc = 0;
    std::call_once(once, [] {
        WSADATA data;
        rc = WSAStartup(MAKEWORD(2, 2), &data);
    });
    if (rc != 0) throw std::system_error(rc, std::system_category(), "WSAStartup");
}

void close_handle(NativeHandle h) noexcept {
    if (h != kNoHandle) ::closesocket(as_socket(h));
}

bool is_ip_address(const std::string& s) noexcept {
    unsigned char buf[16];
    return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

bool set_nodelay(NativeHandle socket) noexcept {
    const BOOL one = TRUE;
    return ::setsockopt(as_socket(socket), IPPROTO_TCP, TCP_NODELAY,
                        reinterpret_cast<const char*>(&one), sizeof one) == 0;
}

Listeners open_listeners(const std::string& address, std::uint16_t port, unsigned count,
                         int backlog) {
    start_winsock();
    if (count != 1)
        throw std::runtime_error(fmt::format(
            "{} listeners on one port: Windows has no SO_REUSEPORT to balance them (one "
            "listener serves every thread)",
            count));
    const Resolved r = resolve(address, port);
    const SOCKET s = ::WSASocketW(r.family, SOCK_STREAM, IPPROTO_TCP, nullptr, 0,
                                  WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
    if (s == INVALID_SOCKET)
        throw std::runtime_error(fmt::format("socket(): {}", error_text(WSAGetLastError())));
    Listener owned(static_cast<NativeHandle>(s));
    const BOOL one = TRUE;
    ::setsockopt(s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, reinterpret_cast<const char*>(&one),
                 sizeof one);
    ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&one), sizeof one);
    if (::bind(s, reinterpret_cast<const sockaddr*>(&r.addr), r.len) != 0)
        fail("listen on", r, port, WSAGetLastError());
    if (::listen(s, backlog) != 0) fail("listen on", r, port, WSAGetLastError());
    u_long nonblocking = 1;
    ::ioctlsocket(s, FIONBIO, &nonblocking);
    sockaddr_storage bound{};
    int len = sizeof bound;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&bound), &len);
    Listeners out;
    out.port = ntohs(bound.ss_family == AF_INET6
                         ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                         : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    out.url = fmt::format("http://{}:{}", host_for_url(bound, len), out.port);
    out.sockets.push_back(std::move(owned));
    return out;
}

}  // namespace sm::runtime
