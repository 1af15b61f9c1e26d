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
// After the Winsock headers: it is written against their names.
#include "runtime/listen_address.hpp"

namespace sm::runtime {
namespace {

using listen_address::Resolved;

[[noreturn]] void fail(const std::string& what, const Resolved& r, std::uint16_t port, int err) {
    using listen_address::Why;
    listen_address::fail(what, r, port, error_text(err),
                         err == WSAEADDRINUSE ? Why::in_use
                         : err == WSAEACCES   ? Why::denied
                                              : Why::other);
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
    const Resolved r = listen_address::resolve(address, port, [](int rc) { return error_text(rc); });
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
    out.port = listen_address::port_of(bound);
    out.url = fmt::format("http://{}:{}", listen_address::host_for_url(bound, len), out.port);
    out.sockets.push_back(std::move(owned));
    return out;
}

}  // namespace sm::runtime
