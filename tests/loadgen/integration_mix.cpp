// loadgen with a request mix (several URLs, --urls FILE): the spread over
// connections is the documented one (request i of connection j goes to URL
// (i + j) mod U, seen from the server's side), every URL is reported with
// counts that add up to the totals, and errors go to the URL whose request
// failed. Against server-epoll (/plaintext, /json, a 404) and misbehaving
// servers that answer by path.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "integration_support.hpp"

using namespace sm::test;
using namespace sm::test::loadgen;

namespace {

using Reply = MisbehavingServer::Reply;
using Behavior = MisbehavingServer::Behavior;
const std::string& kOk = MisbehavingServer::kOk;

std::string url_field(const Report& r, std::size_t i, std::string_view key) {
    return r.string("/urls/" + std::to_string(i) + "/" + std::string(key));
}
std::uint64_t url_count(const Report& r, std::size_t i, std::string_view key) {
    return r.count("/urls/" + std::to_string(i) + "/" + std::string(key));
}

// The targets of the connections that sent requests (loadgen's start-up
// probe connects and sends nothing). Every MisbehavingServer records them.
std::vector<std::vector<std::string>> loaded(const MisbehavingServer& server) {
    std::vector<std::vector<std::string>> out;
    for (auto& conn : server.targets())
        if (!conn.empty()) out.push_back(std::move(conn));
    return out;
}

// A --urls file under $TMPDIR, removed by the destructor.
class UrlsFile {
  public:
    explicit UrlsFile(const std::string& text) {
        std::ofstream f(file_.path());
        f << text;
    }
    [[nodiscard]] const std::string& path() const noexcept { return file_.path(); }

  private:
    TempFile file_;
};

}  // namespace

TEST_CASE("mix against server-epoll: each URL reported, adding up to the totals",
          "[loadgen][mix]") {
    auto server = start_epoll();
    const std::vector<std::string> urls = {url_of(*server, "/plaintext"), url_of(*server, "/json"),
                                           url_of(*server, "/missing")};
    const Run run = run_loadgen({"-t2", "-c4", "-d", "500ms", urls[0], urls[1], urls[2]});
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    REQUIRE(r.at("/urls").get_array().value().size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(url_field(r, i, "url") == urls[i]);
        CHECK(url_field(r, i, "method") == "GET");
        CHECK(url_count(r, i, "requests") > 0);
    }
    // /plaintext and /json answer 200, /missing 404: its every response is a
    // non_2xx error of its own, and the others have none.
    CHECK(url_count(r, 0, "status/2xx") == url_count(r, 0, "requests"));
    CHECK(url_count(r, 1, "status/2xx") == url_count(r, 1, "requests"));
    CHECK(url_count(r, 2, "status/4xx") == url_count(r, 2, "requests"));
    CHECK(url_count(r, 2, "errors/non_2xx") == url_count(r, 2, "requests"));
    CHECK(url_count(r, 0, "errors/non_2xx") == 0);
    CHECK(url_count(r, 1, "errors/non_2xx") == 0);
    CHECK(r.count("/errors/non_2xx") == url_count(r, 2, "requests"));
    // Even: each connection's requests cycle through the URLs, so any two
    // URLs differ by at most one request per connection (plus the one in
    // flight at the end on each).
    for (std::size_t i = 1; i < 3; ++i) {
        const auto a = url_count(r, 0, "sent"), b = url_count(r, i, "sent");
        INFO("sent to URL 0: " << a << ", to URL " << i << ": " << b);
        CHECK((a > b ? a - b : b - a) <= 4);
    }
    // The text output has the table, a row per URL.
    CHECK(has_line_starting(run.result.out, "Per URL"));
    CHECK_THAT(run.result.out, Catch::Matchers::Contains("GET /missing"));
    CHECK_THAT(run.result.out, Catch::Matchers::Contains("GET /json"));
}

TEST_CASE("mix spread: request i of connection j goes to URL (i + j) mod URLs", "[loadgen][mix]") {
    struct Case {
        const char* what;
        std::vector<std::string> shape;
        std::size_t connections;
    };
    const auto c =
        GENERATE(Case{"one thread, three connections", {"-t1", "-c3"}, 3},
                 Case{"two threads, five connections", {"-t2", "-c5"}, 5},
                 Case{"pipelined, two connections", {"-t1", "-c2", "--pipeline", "4"}, 2});
    // Nothing is answered until every connection has sent its first batch:
    // the -n budget is shared, and a connection answered early (its thread
    // started first) could otherwise take all 60 before the others start.
    auto behavior = MisbehavingServer::answering_ok();
    behavior.answer_after = c.connections;
    MisbehavingServer server(std::move(behavior));
    const std::vector<std::string> paths = {"/a", "/b", "/c"};
    std::vector<std::string> args = c.shape;
    args.insert(args.end(), {"-n", "60"});
    for (const auto& p : paths)
        args.push_back(server.url(p));
    const Run run = run_loadgen(args);
    const auto targets = loaded(server);
    std::string seen;
    for (const auto& conn : targets) {
        for (const auto& t : conn)
            seen += t + " ";
        seen += "\n";
    }
    INFO(c.what << "\n" << run.describe() << "targets per connection:\n" << seen);
    CHECK(run.exited_with(0));
    check_consistency(run.json());
    REQUIRE(targets.size() == c.connections);
    const auto index = [&](const std::string& t) {
        return static_cast<std::size_t>(std::find(paths.begin(), paths.end(), t) - paths.begin());
    };
    // Each connection cycles through the mix in order, from its own first URL.
    std::vector<std::size_t> firsts;
    std::size_t total = 0;
    for (const auto& conn : targets) {
        REQUIRE_FALSE(conn.empty());
        firsts.push_back(index(conn.front()));
        for (std::size_t i = 0; i < conn.size(); ++i)
            CHECK(index(conn[i]) == (firsts.back() + i) % paths.size());
        total += conn.size();
    }
    // Connection j starts at URL j mod 3 (the server sees them in any order).
    std::vector<std::size_t> expected;
    for (std::size_t j = 0; j < c.connections; ++j)
        expected.push_back(j % paths.size());
    std::sort(firsts.begin(), firsts.end());
    std::sort(expected.begin(), expected.end());
    CHECK(firsts == expected);
    // -n 60: exactly 60 reached the server, 20 per URL in the report.
    CHECK(total == 60);
    const Report& r = run.json();
    std::uint64_t sent = 0;
    for (std::size_t i = 0; i < paths.size(); ++i)
        sent += url_count(r, i, "sent");
    CHECK(sent == 60);
}

TEST_CASE("mix of one connection: exact per-URL counts", "[loadgen][mix]") {
    MisbehavingServer server(MisbehavingServer::answering_ok());
    const Run run = run_loadgen(
        {"-t1", "-c1", "-n", "10", server.url("/a"), server.url("/b"), server.url("/c")});
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    // Requests 0..9 go to a b c a b c a b c a.
    CHECK(url_count(r, 0, "requests") == 4);
    CHECK(url_count(r, 1, "requests") == 3);
    CHECK(url_count(r, 2, "requests") == 3);
    const auto targets = loaded(server);
    REQUIRE(targets.size() == 1);
    CHECK(targets[0] ==
          std::vector<std::string>{"/a", "/b", "/c", "/a", "/b", "/c", "/a", "/b", "/c", "/a"});
}

TEST_CASE("mix against a misbehaving server: each error goes to its URL", "[loadgen][mix]") {
    // /ok answers, /fail answers 500, /silent never answers (a timeout).
    MisbehavingServer server(Behavior{.reply_to = [](std::size_t, std::string_view target) {
        if (target == "/fail")
            return Reply{{"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"}};
        if (target == "/silent") return Reply{};
        return Reply{{kOk}};
    }});
    const Run run = run_loadgen({"-t1", "-c2", "-d", "1s", "--timeout", "200ms", server.url("/ok"),
                                 server.url("/fail"), server.url("/silent")});
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    // /ok: answered, no error of any class.
    CHECK(url_count(r, 0, "requests") > 0);
    CHECK(url_count(r, 0, "status/2xx") == url_count(r, 0, "requests"));
    for (const auto e : kErrorClasses)
        CHECK(url_count(r, 0, "errors/" + std::string(e)) == 0);
    // /fail: every response a 5xx and a non_2xx error.
    CHECK(url_count(r, 1, "requests") > 0);
    CHECK(url_count(r, 1, "status/5xx") == url_count(r, 1, "requests"));
    CHECK(url_count(r, 1, "errors/non_2xx") == url_count(r, 1, "requests"));
    CHECK(url_count(r, 1, "errors/timeout") == 0);
    // /silent: never answered, every timeout is its.
    CHECK(url_count(r, 2, "requests") == 0);
    CHECK(url_count(r, 2, "errors/timeout") > 0);
    CHECK(url_count(r, 2, "errors/timeout") == r.count("/errors/timeout"));
    CHECK(r.count("/errors/non_2xx") == url_count(r, 1, "requests"));
}

TEST_CASE("mix from --urls FILE: methods and headers per line, HEAD framed without bodies",
          "[loadgen][mix]") {
    auto server = start_epoll();
    // HEAD and GET interleaved in one pipelined batch: each response must be
    // framed by its own request's method.
    const UrlsFile file(
        "# a mix of methods\n"
        "GET " +
        url_of(*server, "/plaintext") +
        "\n"
        "HEAD " +
        url_of(*server, "/json") +
        "\n"
        "  X-Mix: yes\n"
        "\n" +
        url_of(*server, "/json") + "\n");
    const Run run =
        run_loadgen({"-t1", "-c2", "-d", "500ms", "--pipeline", "8", "--urls", file.path()});
    INFO(run.describe());
    CHECK(run.exited_with(0));
    const Report& r = run.json();
    check_consistency(r);
    REQUIRE(r.at("/urls").get_array().value().size() == 3);
    CHECK(url_field(r, 0, "method") == "GET");
    CHECK(url_field(r, 1, "method") == "HEAD");
    CHECK(url_field(r, 2, "method") == "GET");
    CHECK(r.string("/urls/1/headers/0") == "X-Mix: yes");
    for (std::size_t i = 0; i < 3; ++i)
        CHECK(url_count(r, i, "status/2xx") == url_count(r, i, "requests"));
    // Misframed bodies would show as malformed responses or timeouts.
    CHECK(run.total_errors() == 0);
    CHECK(r.count("/connections/reconnects") == 0);
    CHECK(r.count("/requests") > 0);
}

TEST_CASE("mix on two ports, or with --expect-body, is refused", "[loadgen][mix]") {
    MisbehavingServer a(MisbehavingServer::answering_ok()), b(MisbehavingServer::answering_ok());
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"-t1", "-c1", "-d", "1s", a.url("/x"), b.url("/y")},
             {"-t1", "-c1", "-d", "1s", "--expect-body", "Hello", a.url("/x"), a.url("/y")}}) {
        const RunResult r = run_to_exit(loadgen_binary(), args, 10s);
        INFO("status " << r.status.describe() << "\n" << r.out << r.err);
        CHECK(r.status.exited);
        CHECK(r.status.code == 2);
        CHECK_FALSE(r.err.empty());
    }
    CHECK(a.requests() + b.requests() == 0);
}
