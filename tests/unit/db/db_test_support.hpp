// What the db client tests share beyond support/pg.hpp (the fixture's URL,
// reference sessions, a PostgreSQL of a test's own).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace sm::test {

// A libpq URL on 127.0.0.1 where nothing listens (a port just free).
inline std::string url_nobody_listens_on() {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) throw std::runtime_error("socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ::close(s);
        throw std::runtime_error("bind failed");
    }
    ::close(s);
    return "postgresql://benchmarkdbuser:benchmarkdbpass@127.0.0.1:" + std::to_string(ntohs(a.sin_port)) +
           "/hello_world";
}

inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace sm::test
