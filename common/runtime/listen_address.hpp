// What opening a listener means on every platform, once: the numeric
// address resolved, the host as a URL shows it ("[::1]"), and the error that
// names what could not be done where. Written against the BSD socket names
// (getaddrinfo, sockaddr_storage, socklen_t), which POSIX and Winsock share:
// include it after the platform's socket headers (runtime/posix/listen.cpp,
// runtime/windows/listen.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/core.h>

namespace sm::runtime::listen_address {

struct Resolved {
    sockaddr_storage addr{};
    socklen_t len = 0;
    int family = AF_INET;
};

// `address` (numeric; empty: every interface) and `port`; throws
// std::runtime_error naming the address, with gai_text(rc) for why.
template <typename GaiText>
Resolved resolve(const std::string& address, std::uint16_t port, GaiText&& gai_text) {
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
            fmt::format("cannot resolve address '{}': {}", address, gai_text(rc)));
    }
    Resolved r;
    std::memcpy(&r.addr, res->ai_addr, res->ai_addrlen);
    r.len = static_cast<socklen_t>(res->ai_addrlen);
    r.family = res->ai_family;
    freeaddrinfo(res);
    return r;
}

// "127.0.0.1", "[::1]": the host part of the server's URL.
inline std::string host_for_url(const sockaddr_storage& addr, socklen_t len) {
    char host[NI_MAXHOST];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, nullptr, 0,
                    NI_NUMERICHOST) != 0)
        return "?";
    return addr.ss_family == AF_INET6 ? fmt::format("[{}]", host) : std::string(host);
}

// The port of a bound address, and an address with another port.
inline std::uint16_t port_of(const sockaddr_storage& a) noexcept {
    return ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port
                                         : reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
}
inline void set_port(Resolved& r, std::uint16_t port) noexcept {
    if (r.family == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(&r.addr)->sin6_port = htons(port);
    else
        reinterpret_cast<sockaddr_in*>(&r.addr)->sin_port = htons(port);
}

// Why a listener could not be opened, for what the platform's error says.
enum class Why { other, in_use, denied };
[[noreturn]] inline void fail(const std::string& what, const Resolved& r, std::uint16_t port,
                              const std::string& error, Why why) {
    const char* hint = why == Why::in_use   ? " (is another server already running on this port?)"
                       : why == Why::denied ? " (ports below 1024 need privileges; on Windows, "
                                              "another process may hold the port exclusively)"
                                            : "";
    throw std::runtime_error(fmt::format("cannot {} {}:{}: {}{}", what,
                                         host_for_url(r.addr, r.len), port, error, hint));
}

}  // namespace sm::runtime::listen_address
