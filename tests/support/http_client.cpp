#include "support/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "http/chars.hpp"
#include "support/wait.hpp"

namespace sm::test {
namespace {

char lower(char c) noexcept {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

using http::chars::trim;

std::string errno_text(std::string_view what, int err) {
    return std::string(what) + ": " + std::strerror(err);
}

// What one read_response() call collects; llhttp's data pointer during the call.
struct ParseState {
    Response* r = nullptr;
    Expect expect = Expect::body;
    std::string field;
    std::string value;
    bool complete = false;
};

ParseState& state(llhttp_t* p) noexcept {
    return *static_cast<ParseState*>(p->data);
}

int on_status(llhttp_t* p, const char* at, std::size_t n) {
    state(p).r->reason.append(at, n);
    return 0;
}
int on_header_field(llhttp_t* p, const char* at, std::size_t n) {
    state(p).field.append(at, n);
    return 0;
}
int on_header_value(llhttp_t* p, const char* at, std::size_t n) {
    state(p).value.append(at, n);
    return 0;
}
int on_header_value_complete(llhttp_t* p) {
    ParseState& s = state(p);
    s.r->headers.push_back(Header{std::move(s.field), std::string(trim(s.value))});
    s.field.clear();
    s.value.clear();
    return 0;
}
int on_headers_complete(llhttp_t* p) {
    ParseState& s = state(p);
    s.r->status = p->status_code;
    s.r->version_major = p->http_major;
    s.r->version_minor = p->http_minor;
    // 1: this response has no body whatever its headers say (answer to HEAD).
    return s.expect == Expect::no_body ? 1 : 0;
}
int on_body(llhttp_t* p, const char* at, std::size_t n) {
    state(p).r->body.append(at, n);
    return 0;
}
int on_message_complete(llhttp_t* p) {
    ParseState& s = state(p);
    s.r->keep_alive = llhttp_should_keep_alive(p) != 0;
    s.complete = true;
    // Stop right after this response: the next one may answer a HEAD, which
    // only the next read_response() call knows.
    return HPE_PAUSED;
}

const llhttp_settings_t& settings() {
    static const llhttp_settings_t s = [] {
        llhttp_settings_t x;
        llhttp_settings_init(&x);
        x.on_status = on_status;
        x.on_header_field = on_header_field;
        x.on_header_value = on_header_value;
        x.on_header_value_complete = on_header_value_complete;
        x.on_headers_complete = on_headers_complete;
        x.on_body = on_body;
        x.on_message_complete = on_message_complete;
        return x;
    }();
    return s;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

bool has_token(std::string_view value, std::string_view token) noexcept {
    while (!value.empty()) {
        const auto comma = value.find(',');
        if (iequals(trim(value.substr(0, comma)), token)) return true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return false;
}

std::string Response::version() const {
    return "HTTP/" + std::to_string(version_major) + "." + std::to_string(version_minor);
}

std::optional<std::string> Response::header(std::string_view name) const {
    for (const auto& h : headers) {
        if (iequals(h.name, name)) return h.value;
    }
    return std::nullopt;
}

std::vector<std::string> Response::headers_named(std::string_view name) const {
    std::vector<std::string> values;
    for (const auto& h : headers) {
        if (iequals(h.name, name)) values.push_back(h.value);
    }
    return values;
}

std::size_t Response::header_count(std::string_view name) const {
    std::size_t n = 0;
    for (const auto& h : headers)
        n += iequals(h.name, name) ? 1 : 0;
    return n;
}

std::string Response::describe() const {
    std::string s = version() + " " + std::to_string(status) + " " + reason + "\n";
    for (const auto& h : headers)
        s += "  " + h.name + ": " + h.value + "\n";
    s += "  body (" + std::to_string(body.size()) + " bytes): " + printable(body, 200);
    return s;
}

std::string Connection::Closed::describe() const {
    std::string s = how == End::eof     ? "closed (EOF)"
                    : how == End::reset ? "reset (ECONNRESET)"
                                        : "still open when the time was up";
    if (!unexpected.empty()) s += "; unexpected bytes: \"" + printable(unexpected) + "\"";
    return s;
}

Connection::Connection(const std::string& host, std::uint16_t port,
                       std::chrono::milliseconds io_timeout, int receive_buffer)
    : io_timeout_(io_timeout) {
    sockaddr_storage addr{};
    socklen_t len = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
    if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        len = sizeof *v4;
        peer_ = host + ":" + std::to_string(port);
    } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        len = sizeof *v6;
        peer_ = "[" + host + "]:" + std::to_string(port);
    } else {
        throw std::runtime_error("not an IP address: \"" + host + "\"");
    }

    // SOCK_CLOEXEC: a server started later must not inherit this socket.
    fd_ = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(errno_text("socket", errno));
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(io_timeout).count();
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(us / 1000000);
    tv.tv_usec = static_cast<suseconds_t>(us % 1000000);
    const int one = 1;
    // SO_SNDTIMEO also bounds connect(); TCP_NODELAY makes each send() its own segment.
    if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
        (receive_buffer > 0 &&
         ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer) != 0)) {
        const int err = errno;
        close();
        throw std::runtime_error(errno_text("setsockopt", err));
    }
    int r = 0;
    do {
        r = ::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), len);
    } while (r != 0 && errno == EINTR);
    if (r != 0) {
        const int err = errno;
        close();
        throw std::runtime_error(
            errno_text("connect to " + peer_, err == EINPROGRESS ? ETIMEDOUT : err));
    }
    llhttp_init(&parser_, HTTP_RESPONSE, &settings());
}

Connection::~Connection() {
    close();
}

Connection::Connection(Connection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      io_timeout_(other.io_timeout_),
      peer_(std::move(other.peer_)),
      in_(std::move(other.in_)),
      in_pos_(std::exchange(other.in_pos_, 0)),
      parser_(other.parser_) {}

Connection& Connection::operator=(Connection&& other) noexcept {
    if (this != &other) {
        close();
        fd_ = std::exchange(other.fd_, -1);
        io_timeout_ = other.io_timeout_;
        peer_ = std::move(other.peer_);
        in_ = std::move(other.in_);
        in_pos_ = std::exchange(other.in_pos_, 0);
        parser_ = other.parser_;
    }
    return *this;
}

std::uint16_t Connection::local_port() const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        throw std::runtime_error(errno_text("getsockname", errno));
    if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

void Connection::close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

void Connection::abort() {
    if (fd_ < 0) return;
    const linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close();
}

void Connection::shutdown_write() {
    if (::shutdown(fd_, SHUT_WR) != 0) throw std::runtime_error(errno_text("shutdown", errno));
}

void Connection::send(std::string_view bytes) {
    if (fd_ < 0) throw std::runtime_error("send on a closed connection");
    const auto deadline = std::chrono::steady_clock::now() + io_timeout_;
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0) {
            const int err = errno;
            if (err == EINTR) continue;
            if ((err == EAGAIN || err == EWOULDBLOCK) &&
                std::chrono::steady_clock::now() < deadline) {
                continue;
            }
            throw std::runtime_error(errno_text(
                "send to " + peer_ + " (" + std::to_string(bytes.size()) + " bytes left)",
                err == EAGAIN || err == EWOULDBLOCK ? ETIMEDOUT : err));
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

std::size_t Connection::receive(std::chrono::steady_clock::time_point deadline,
                                const char* waiting_for) {
    std::array<char, 65536> buf{};
    for (;;) {
        pollfd p{fd_, POLLIN, 0};
        const int ready = ::poll(&p, 1, remaining_ms(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) throw std::runtime_error(errno_text("poll", errno));
        if (ready == 0) {
            throw std::runtime_error("timed out after " + std::to_string(io_timeout_.count()) +
                                     " ms waiting for " + waiting_for + " from " + peer_ +
                                     "; unparsed bytes: \"" +
                                     printable(std::string_view(in_).substr(in_pos_)) + "\"");
        }
        const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
        if (n < 0) {
            const int err = errno;
            if (err == EINTR || err == EAGAIN) continue;
            throw std::runtime_error(
                errno_text(std::string("receiving ") + waiting_for + " from " + peer_, err));
        }
        in_.append(buf.data(), static_cast<std::size_t>(n));
        return static_cast<std::size_t>(n);
    }
}

Response Connection::read_response(Expect expect) {
    return *read_one(expect, false);
}

std::optional<Response> Connection::read_response_or_eof(Expect expect) {
    return read_one(expect, true);
}

std::optional<Response> Connection::read_one(Expect expect, bool eof_ok) {
    if (fd_ < 0) throw std::runtime_error("read on a closed connection");
    // Drop what earlier responses consumed once it is worth moving the rest.
    if (in_pos_ > 0 && in_pos_ >= in_.size() / 2) {
        in_.erase(0, in_pos_);
        in_pos_ = 0;
    }
    Response r;
    ParseState st;
    st.r = &r;
    st.expect = expect;
    parser_.data = &st;
    const std::size_t start = in_pos_;
    const auto deadline = std::chrono::steady_clock::now() + io_timeout_;
    auto fail = [&](const std::string& what) -> std::runtime_error {
        parser_.data = nullptr;
        return std::runtime_error(what + " (response bytes: \"" +
                                  printable(std::string_view(in_).substr(start)) + "\")");
    };
    for (;;) {
        if (in_pos_ < in_.size()) {
            const char* begin = in_.data() + in_pos_;
            const llhttp_errno_t err = llhttp_execute(&parser_, begin, in_.size() - in_pos_);
            if (err == HPE_OK) {
                in_pos_ = in_.size();
            } else if (err == HPE_PAUSED) {
                in_pos_ = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - in_.data());
                llhttp_resume(&parser_);
            } else {
                throw fail(std::string("malformed response from ") + peer_ + ": " +
                           llhttp_errno_name(err) + " " + llhttp_get_error_reason(&parser_));
            }
            if (st.complete) {
                r.raw = in_.substr(start, in_pos_ - start);
                parser_.data = nullptr;
                return r;
            }
        }
        if (receive(deadline, "a response") == 0) {
            // EOF: completes a response framed by the close, nothing else.
            const llhttp_errno_t err = llhttp_finish(&parser_);
            if (err == HPE_OK && st.complete) {
                r.raw = in_.substr(start);
                in_pos_ = in_.size();
                parser_.data = nullptr;
                return r;
            }
            if (eof_ok && in_pos_ == start && in_pos_ == in_.size()) {
                parser_.data = nullptr;
                return std::nullopt;
            }
            throw fail(std::string("connection closed by ") + peer_ + " " +
                       (in_pos_ == start ? "before a response" : "in the middle of a response"));
        }
    }
}

std::vector<Response> Connection::read_responses(std::span<const Expect> expect) {
    std::vector<Response> out;
    out.reserve(expect.size());
    for (const Expect e : expect)
        out.push_back(read_response(e));
    return out;
}

std::vector<Response> Connection::read_responses(std::size_t n, Expect expect) {
    const std::vector<Expect> all(n, expect);
    return read_responses(all);
}

Response Connection::request(std::string_view bytes, Expect expect) {
    send(bytes);
    return read_response(expect);
}

Connection::Closed Connection::expect_closed(std::chrono::milliseconds timeout) {
    Closed c;
    c.unexpected = in_.substr(in_pos_);
    in_pos_ = in_.size();
    if (fd_ < 0) throw std::runtime_error("expect_closed on a closed connection");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::array<char, 65536> buf{};
    for (;;) {
        pollfd p{fd_, POLLIN, 0};
        const int ready = ::poll(&p, 1, remaining_ms(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) throw std::runtime_error(errno_text("poll", errno));
        if (ready == 0) {
            c.how = End::timeout;
            return c;
        }
        const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
        if (n > 0) {
            c.unexpected.append(buf.data(), static_cast<std::size_t>(n));
            continue;
        }
        if (n == 0) {
            c.how = End::eof;
            return c;
        }
        const int err = errno;
        if (err == EINTR || err == EAGAIN) continue;
        if (err == ECONNRESET) {
            c.how = End::reset;
            return c;
        }
        throw std::runtime_error(errno_text("receiving from " + peer_, err));
    }
}

std::map<std::uint16_t, TcpQueues> tcp_queues_by_remote_port(std::uint16_t local_port) {
    // "  sl  local_address rem_address   st tx_queue:rx_queue ..." with
    // addresses as HEXADDR:HEXPORT and the queues in hex.
    std::map<std::uint16_t, TcpQueues> out;
    for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream in(path);
        std::string line;
        std::getline(in, line);  // header
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string sl, local, remote, st, queues;
            if (!(fields >> sl >> local >> remote >> st >> queues)) continue;
            const auto port_of = [](const std::string& a) -> long {
                const auto colon = a.rfind(':');
                return colon == std::string::npos ? -1
                                                  : std::stol(a.substr(colon + 1), nullptr, 16);
            };
            if (port_of(local) != local_port) continue;
            const long remote_port = port_of(remote);
            const auto colon = queues.find(':');
            if (remote_port < 0 || colon == std::string::npos) continue;
            out[static_cast<std::uint16_t>(remote_port)] =
                TcpQueues{std::stoul(queues.substr(0, colon), nullptr, 16),
                          std::stoul(queues.substr(colon + 1), nullptr, 16)};
        }
    }
    return out;
}

std::optional<TcpQueues> tcp_queues(std::uint16_t local_port, std::uint16_t remote_port) {
    const auto all = tcp_queues_by_remote_port(local_port);
    const auto it = all.find(remote_port);
    if (it == all.end()) return std::nullopt;
    return it->second;
}

std::string make_request(std::string_view method, std::string_view target,
                         std::string_view extra_headers, std::string_view version) {
    std::string s;
    s.reserve(64 + extra_headers.size());
    s.append(method).append(" ").append(target).append(" ").append(version);
    s.append("\r\nHost: localhost\r\n");
    s.append(extra_headers);
    s.append("\r\n");
    return s;
}

}  // namespace sm::test
