#include "conformance.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "support/http_date.hpp"
#include "support/io_uring_check.hpp"
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
    std::printf("skipped under Wine: %.*s\n", static_cast<int>(why.size()), why.data());
    std::fflush(stdout);
    std::_Exit(77);
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

}  // namespace sm::test::conformance
