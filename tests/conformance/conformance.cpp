#include "conformance.hpp"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <stdexcept>

#include "support/http_date.hpp"
#include "support/io_uring_check.hpp"
#include "support/skip.hpp"
#include "support/wait.hpp"

namespace sm::test::conformance {
namespace {

// server-uring's run is skipped as a whole (exit 77, "skipped" in ctest)
// where io_uring is refused, instead of failing every case.
const bool uring_checked = [] {
    const char* model = std::getenv("SM_MODEL");
    if (model != nullptr && std::string(model) == "uring")
        exit_skipped_unless_io_uring("conformance-uring");
    return true;
}();

}  // namespace

void skip_under_wine(std::string_view why) {
    if (!target().binary.ends_with(".exe")) return;
    // ctest runs each case in a process of its own: exit code 77 is "skipped".
    exit_skipped("under Wine: " + std::string(why));
}

const Target& target() {
    static const Target t = [] {
        const char* binary = std::getenv("SM_SERVER_BINARY");
        const char* model = std::getenv("SM_MODEL");
        if (binary == nullptr || *binary == '\0' || model == nullptr || *model == '\0') {
            throw std::runtime_error(
                "SM_SERVER_BINARY and SM_MODEL must name the server under test: run the suite "
                "with `ctest -L conformance`, or e.g. `SM_SERVER_BINARY=servers/epoll/server-epoll "
                "SM_MODEL=epoll tests/conformance/sm_conformance_tests`");
        }
        if (::access(binary, X_OK) != 0) {
            throw std::runtime_error(std::string("SM_SERVER_BINARY=") + binary +
                                     " is not an executable file");
        }
        return Target{binary, model};
    }();
    return t;
}

std::unique_ptr<ServerProcess> start_server(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--address", "127.0.0.1", "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<ServerProcess>(target().binary, args);
}

Connection connect(const ServerProcess& server, std::chrono::milliseconds io_timeout,
                   int receive_buffer) {
    return Connection(server.host(), server.port(), io_timeout, receive_buffer);
}

FdBaseline::FdBaseline(ServerProcess& server) : server_(server) {
    // Eight connections spread over the threads' SO_REUSEPORT listeners, so
    // any per-thread resource a model creates on first use exists now.
    for (int i = 0; i < 8; ++i) {
        Connection c = connect(server);
        const Response r = c.request(make_request("GET", "/plaintext"));
        REQUIRE(r.status == 200);
    }
    // Stable: the same count five times in a row, 20 ms apart.
    std::size_t last = count_now();
    int same = 0;
    eventually(
        [&] {
            const std::size_t n = count_now();
            same = n == last ? same + 1 : 0;
            last = n;
            return same >= 5;
        },
        3s, 20ms);
    count_ = last;
}

std::size_t FdBaseline::count_now() const {
    return server_.windows() ? port_sockets(server_.port()).held : server_.open_fd_count();
}

std::string FdBaseline::describe() const {
    if (!server_.windows()) return server_.describe_fds();
    return "(under Wine: the server's connections in the kernel's table)\n" +
           port_sockets(server_.port()).describe;
}

void FdBaseline::require_back() const {
    std::size_t now = 0;
    const bool back = eventually(
        [&] {
            now = count_now();
            return now == count_;
        },
        5s, 20ms);
    INFO("server descriptors: baseline " << count_ << ", now " << now << "\n" << describe());
    CHECK(back);
}

void check_common_headers(const Response& r, Expect expect) {
    INFO(r.describe());
    CHECK(r.header_count("Server") == 1);
    CHECK(r.header("Server").value_or("(none)") == "servermodels");

    REQUIRE(r.header_count("Date") == 1);
    const std::string date = *r.header("Date");
    const auto when = parse_imf_fixdate(date);
    INFO("Date: " << date);
    REQUIRE(when.has_value());
    const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
    // Rendered at most once a second and never more than a second stale; the
    // margin covers this test's own scheduling, not server speed.
    const auto skew = now - *when;
    INFO("local clock: " << format_imf_fixdate(now));
    CHECK(skew <= 5s);
    CHECK(skew >= -5s);

    REQUIRE(r.header_count("Content-Length") == 1);
    const std::string length = *r.header("Content-Length");
    if (expect == Expect::body) {
        CHECK(length == std::to_string(r.body.size()));
    } else {
        CHECK(r.body.empty());
    }
    CHECK_FALSE(r.has_header("Transfer-Encoding"));
}

std::string without_date(std::string_view raw) {
    const auto head_end = raw.find("\r\n\r\n");
    std::string_view head = raw.substr(0, head_end);
    std::string out;
    while (!head.empty()) {
        const auto eol = head.find("\r\n");
        const std::string_view line = head.substr(0, eol);
        if (line.size() >= 5 && iequals(line.substr(0, 5), "date:")) {
            out += "Date: <masked>";
        } else {
            out += line;
        }
        if (eol == std::string_view::npos) break;
        out += "\r\n";
        head.remove_prefix(eol + 2);
    }
    if (head_end != std::string_view::npos) out += raw.substr(head_end);
    return out;
}

std::string techempower_request(std::string_view path) {
    return make_request("GET", path,
                        "Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,"
                        "application/xml;q=0.8,*/*;q=0.7\r\n"
                        "Connection: keep-alive\r\n");
}

std::string batch_of(std::size_t n, std::string_view path) {
    const std::string one = make_request("GET", path);
    std::string s;
    s.reserve(one.size() * n);
    for (std::size_t i = 0; i < n; ++i)
        s += one;
    return s;
}

std::string stderr_of(const ServerProcess& server) {
    return "--- server stderr ---\n" + server.stderr_text() + "--- end of stderr ---";
}

void require_alive(ServerProcess& server, std::string_view when,
                   std::chrono::milliseconds grace) {
    const auto status = server.wait_exit(grace);
    INFO("the server ended " << when << ": " << (status ? status->describe() : "") << "\n"
                             << stderr_of(server));
    REQUIRE_FALSE(status.has_value());
}

void require_serving(const ServerProcess& server) {
    Connection c = connect(server);
    const Response r = c.request(make_request("GET", "/plaintext"));
    INFO(r.describe());
    CHECK(r.status == 200);
    CHECK(r.body == kPlaintextBody);
}

std::size_t stall_server_writes(ServerProcess& server, Connection& c, std::string_view path,
                                Stalled end) {
    return pipeline_until_stalled(server, c, batch_of(1024, path), end);
}

std::size_t pipeline_until_stalled(ServerProcess& server, Connection& c, std::string_view chunk,
                                   Stalled end) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + 10s;
    std::size_t sent = 0;
    std::size_t off = 0;
    int last_unsent = -1;
    int unchanged = 0;
    // The server side's queues when the stall was seen (read once: under
    // Wine, whose server moves output in chunks, a second look may differ).
    std::optional<TcpQueues> q;
    while (Clock::now() < deadline) {
        pollfd p{c.fd(), POLLOUT, 0};
        if (::poll(&p, 1, 10) <= 0) {
            // Our send buffer is full. Requests we cannot even send yet mean
            // the server's receive window is closed: it has stopped reading.
            // (Looked at on our own socket: /proc/net/tcp is slow to scan.)
            int unsent = 0;
            if (::ioctl(c.fd(), SIOCOUTQNSD, &unsent) != 0)
                FAIL("ioctl SIOCOUTQNSD: " << std::strerror(errno));
            unchanged = unsent > 0 && unsent == last_unsent ? unchanged + 1 : 0;
            last_unsent = unsent;
            // Stalled on writing, not merely slow to read (a sanitized
            // server on a busy box can pause for longer than 50 ms): its
            // send queue holds responses too.
            if (unchanged >= 5) {
                q = tcp_queues(server.port(), c.local_port());
                if (q && q->tx > 0) break;
                if (!q && end == Stalled::or_closed) return sent;
                unchanged = 0;
            }
            continue;
        }
        unchanged = 0;
        const ssize_t n =
            ::send(c.fd(), chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            const int err = errno;
            if (end == Stalled::or_closed && (err == ECONNRESET || err == EPIPE)) return sent;
            require_alive(server, "after requests were pipelined to it", 2s);
            FAIL("sending requests: " << std::strerror(err) << " after " << sent << " bytes");
        }
        sent += static_cast<std::size_t>(n);
        off = (off + static_cast<std::size_t>(n)) % chunk.size();
    }
    INFO(sent << " request bytes sent, " << last_unsent
              << " of them not yet taken by the server; the server side's send queue "
              << (q ? std::to_string(q->tx) : "?") << ", receive queue "
              << (q ? std::to_string(q->rx) : "?"));
    REQUIRE(unchanged >= 5);
    // Its socket gone: the server has reset the connection (the requests it
    // never read), which or_closed accepts.
    if (!q && end == Stalled::or_closed) return sent;
    // The server wrote what it could: its responses wait for our window.
    REQUIRE(q);
    REQUIRE(q->tx > 0);
    return sent;
}

void widen_window(const Connection& c) {
    const int window = 64 * 1024;
    ::setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &window, sizeof window);
}

}  // namespace sm::test::conformance
