#include "robustness.hpp"

#include <sys/resource.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "support/io_uring_check.hpp"

namespace sm::test::robustness {
namespace {

// server-uring's run is skipped as a whole (exit 77, "skipped" in ctest)
// where io_uring is refused. conformance.cpp, compiled in too, does the same
// check under the conformance suite's name; whichever runs first exits.
const bool uring_checked = [] {
    const char* model = std::getenv("SM_MODEL");
    if (model != nullptr && std::string_view(model) == "uring")
        exit_skipped_unless_io_uring("robustness-uring");
    return true;
}();

}  // namespace


void require_closed_cleanly(Connection& c, std::chrono::milliseconds timeout) {
    const Connection::Closed closed = c.expect_closed(timeout);
    INFO("after the response the connection was " << closed.describe());
    CHECK(closed.unexpected.empty());
    // A reset instead of a FIN can destroy a response the client has not read
    // yet: the server must close gracefully (lingering close).
    CHECK(closed.how == Connection::End::eof);
}

void check_error_response(const Response& r, int status, Expect expect) {
    INFO(r.describe());
    CHECK(r.status == status);
    CHECK(r.version() == "HTTP/1.1");
    conformance::check_common_headers(r, expect);
    CHECK(has_token(r.header("Connection").value_or(""), "close"));
    CHECK_FALSE(r.keep_alive);
}

Response require_rejected(ServerProcess& server, std::string_view bytes, int status,
                          Expect expect) {
    INFO("sent: \"" << printable(bytes) << "\"");
    Connection c = connect(server);
    c.send(bytes);
    const Response r = c.read_response(expect);
    check_error_response(r, status, expect);
    require_closed_cleanly(c);
    return r;
}

void require_serving(ServerProcess& server) {
    INFO("a fresh connection after the hostile input");
    Connection c = connect(server);
    const Response r = c.request(make_request("GET", "/plaintext"));
    INFO(r.describe());
    REQUIRE(r.status == 200);
    CHECK(r.body == conformance::kPlaintextBody);
    CHECK(r.keep_alive);
}

void check_rejected(std::string_view bytes, int status, const std::vector<std::string>& extra) {
    check_each_rejected({std::string(bytes)}, status, extra);
}

void check_each_rejected(const std::vector<std::string>& inputs, int status,
                         const std::vector<std::string>& extra) {
    auto server = start_server(extra);
    const FdBaseline fds(*server);
    for (const std::string& bytes : inputs)
        require_rejected(*server, bytes, status);
    require_serving(*server);
    fds.require_back();
    // And it did not crash on the way.
    CHECK(server->running());
}

void check_accepted(std::string_view bytes, const std::vector<int>& statuses,
                    const std::vector<std::string>& extra) {
    auto server = start_server(extra);
    const FdBaseline fds(*server);
    {
        INFO("sent: \"" << printable(bytes) << "\"");
        Connection c = connect(*server);
        c.send(bytes);
        for (std::size_t i = 0; i < statuses.size(); ++i) {
            const Response r = c.read_response();
            INFO("response " << i << ": " << r.describe());
            CHECK(r.status == statuses[i]);
            conformance::check_common_headers(r);
            CHECK(r.keep_alive);
        }
        const Response last = c.request(make_request("GET", "/plaintext"));
        INFO("the request after them: " << last.describe());
        CHECK(last.status == 200);
        CHECK(last.body == conformance::kPlaintextBody);
        CHECK(c.buffered() == 0);
    }
    fds.require_back();
}

std::optional<std::size_t> raise_descriptor_limit(std::size_t wanted) {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return std::nullopt;
    const auto enough = [wanted](rlim_t n) { return n == RLIM_INFINITY || n >= wanted; };
    if (!enough(rl.rlim_cur)) {
        if (!enough(rl.rlim_max)) return std::nullopt;
        // The hard limit, or just what is wanted where there is none.
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(wanted) : rl.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return std::nullopt;
    }
    return rl.rlim_cur == RLIM_INFINITY ? wanted : static_cast<std::size_t>(rl.rlim_cur);
}

}  // namespace sm::test::robustness
