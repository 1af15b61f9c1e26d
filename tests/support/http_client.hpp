// A deliberately simple HTTP/1.1 client for tests: one blocking TCP socket
// with SO_RCVTIMEO/SO_SNDTIMEO, raw bytes out, responses parsed strictly with
// llhttp in HTTP_RESPONSE mode. Every wait is bounded; failures throw
// std::runtime_error saying what was received so far.
#pragma once

#include <llhttp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "support/printable.hpp"

namespace sm::test {

using namespace std::chrono_literals;

struct Header {
    std::string name;
    std::string value;
};

struct Response {
    int status = 0;
    int version_major = 0;
    int version_minor = 0;
    std::string reason;
    std::vector<Header> headers;  // in order, duplicates kept
    std::string body;
    std::string raw;  // the bytes of the whole response as received
    // llhttp_should_keep_alive(): the connection persists after this response.
    bool keep_alive = false;

    // "HTTP/1.1"
    [[nodiscard]] std::string version() const;
    // The first field named `name` (case-insensitive), if any.
    [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
    // Every field named `name`, in order.
    [[nodiscard]] std::vector<std::string> headers_named(std::string_view name) const;
    [[nodiscard]] std::size_t header_count(std::string_view name) const;
    [[nodiscard]] bool has_header(std::string_view name) const { return header_count(name) > 0; }
    // Status line and headers, for failure messages.
    [[nodiscard]] std::string describe() const;
};

// What a request was, as far as framing its response is concerned.
enum class Expect : std::uint8_t {
    body,     // the response carries the body its headers announce
    no_body,  // answer to HEAD: headers only, whatever Content-Length says
};

// ASCII case-insensitive comparison (header names, tokens).
bool iequals(std::string_view a, std::string_view b) noexcept;
// Whether a comma-separated header value lists `token` (case-insensitive).
bool has_token(std::string_view value, std::string_view token) noexcept;

class Connection {
  public:
    enum class End : std::uint8_t {
        eof,      // orderly close (FIN)
        reset,    // ECONNRESET: the peer closed with data unread, or aborted
        timeout,  // still open when the time was up
    };
    struct Closed {
        End how = End::timeout;
        std::string unexpected;  // bytes received instead of (or before) the close
        [[nodiscard]] std::string describe() const;
    };

    // Connects to host:port (IPv4 or IPv6 literal); `io_timeout` bounds
    // connect and every later send and receive. A `receive_buffer` (bytes,
    // SO_RCVBUF before connect) makes a slow reader whose data backs up into
    // the server. Throws on failure.
    Connection(const std::string& host, std::uint16_t port,
               std::chrono::milliseconds io_timeout = 5s, int receive_buffer = 0);
    ~Connection();
    Connection(Connection&& other) noexcept;
    Connection& operator=(Connection&& other) noexcept;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Writes all of `bytes` (one send call unless the kernel takes less).
    void send(std::string_view bytes);
    // Reads the next response. Bytes already received for later responses stay buffered.
    Response read_response(Expect expect = Expect::body);
    // Like read_response(), but an orderly close before the first byte of
    // the next response returns nothing (a server may close a persistent
    // connection between responses). A close inside a response still throws.
    std::optional<Response> read_response_or_eof(Expect expect = Expect::body);
    // Reads one response per entry of `expect`, in order.
    std::vector<Response> read_responses(std::span<const Expect> expect);
    std::vector<Response> read_responses(std::size_t n, Expect expect = Expect::body);
    // send() then read_response().
    Response request(std::string_view bytes, Expect expect = Expect::body);

    // Waits up to `timeout` for the peer to close. Buffered or newly received
    // bytes are reported as unexpected (the read goes on to see how it ends).
    Closed expect_closed(std::chrono::milliseconds timeout = 5s);

    // shutdown(SHUT_WR): the server sees EOF after what was sent.
    void shutdown_write();
    // Closes with SO_LINGER 0, so the server sees a reset instead of a FIN.
    void abort();
    void close() noexcept;

    [[nodiscard]] int fd() const noexcept { return fd_; }
    // This end's port (getsockname), to find the connection in /proc/net/tcp.
    [[nodiscard]] std::uint16_t local_port() const;
    [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
    // Bytes received and not yet parsed into a response.
    [[nodiscard]] std::size_t buffered() const noexcept { return in_.size() - in_pos_; }

  private:
    // Appends what arrives within the deadline to in_; 0 on EOF. Throws on
    // timeout or error.
    std::size_t receive(std::chrono::steady_clock::time_point deadline, const char* waiting_for);
    std::optional<Response> read_one(Expect expect, bool eof_ok);

    int fd_ = -1;
    std::chrono::milliseconds io_timeout_;
    std::string peer_;  // "127.0.0.1:8080" for messages
    std::string in_;
    std::size_t in_pos_ = 0;
    // One parser for the connection's whole response stream. Its settings
    // are static and its data pointer is set per read, so it moves as bytes.
    llhttp_t parser_{};
};

// "GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n" with `extra_headers`
// (each "Name: value\r\n") before the blank line.
// The kernel's queues for one TCP connection, from /proc/net/tcp{,6}: on the
// server's side of a connection, rx is request bytes the server has not read
// yet and tx is response bytes written but not yet acknowledged.
struct TcpQueues {
    std::size_t tx = 0;
    std::size_t rx = 0;
};
// The queues of the socket whose local port is `local_port` and remote port
// `remote_port` (any address), or nothing if there is none.
std::optional<TcpQueues> tcp_queues(std::uint16_t local_port, std::uint16_t remote_port);
// The queues of every connection whose local port is `local_port`, by remote
// port: one scan of /proc/net/tcp{,6} (it lists every socket on the machine,
// so scanning it once per connection is slow on a busy box).
std::map<std::uint16_t, TcpQueues> tcp_queues_by_remote_port(std::uint16_t local_port);

std::string make_request(std::string_view method, std::string_view target,
                         std::string_view extra_headers = {},
                         std::string_view version = "HTTP/1.1");

}  // namespace sm::test
