// The workloads beyond Hello World (TechEmpower rules): /fortunes from memory
// and from PostgreSQL, /db and /queries against a real PostgreSQL, and what a
// database does to a server: pipelining behind queries, many connections, the
// database stopped mid-run, a query that waits on a lock (the idle and
// shutdown timeouts).
//
// Cases tagged [db] need PostgreSQL and are skipped (exit 77, saying why)
// without the shared fixture (SM_TEST_DB_FILE, cmake/Postgres.cmake). Those
// that only read use it; those that stop, lock or change the database start
// one of their own with scripts/pg.sh. The shared fixture's tables are never
// modified. server-iocp.exe has no database
// client: its [db] cases are skipped, and "workloads options ..." checks that
// its --db is refused; its /fortunes from memory passes the same page tests.
#include <poll.h>
#include <sys/types.h>
#include <unistd.h>

#include <simdjson.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "conformance.hpp"
#include "support/fortunes_page.hpp"
#include "support/pg.hpp"
#include "support/skip.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::conformance;
using namespace sm::test::fortunes;

namespace {

using Clock = std::chrono::steady_clock;
using World = std::map<std::int32_t, std::int32_t>;

// ---- the model --------------------------------------------------------------

// Whether the model under test has a database client: servers/models.json's
// "database" field where it has one, else every model but the Windows one
// (server-iocp.exe is built without libpq).
bool has_database_client() {
    simdjson::dom::parser parser;
    simdjson::dom::element list;
    REQUIRE(parser.load(SM_MODELS_FILE).get(list) == simdjson::SUCCESS);
    for (simdjson::dom::element m : list["models"].get_array()) {
        if (std::string_view(m["name"].get_string()) != target().model) continue;
        bool database = false;
        if (m["database"].get_bool().get(database) == simdjson::SUCCESS) return database;
        return std::string_view(m["platform"].get_string()) != "windows";
    }
    FAIL("model " << target().model << " is not in " << SM_MODELS_FILE);
    return false;
}

// A [db] case on a model without a database client ends here as skipped.
void skip_without_database_client() {
    if (has_database_client()) return;
    exit_skipped(target().binary +
                 " has no database client (its --db is refused: see \"workloads options ...\")");
}

// The models that call libpq synchronously from their threads: one of their
// threads waiting on a query serves nobody else meanwhile, so "the others are
// served" needs a second thread there. The event models serve everything
// from one loop that must never block.
bool blocks_on_queries() {
    return target().model == "blocking" || target().model == "threadpool";
}

// TechEmpower's verification of a fortunes response, and then the exact page
// (for TechEmpower's rows, support/fortunes_page.hpp's kTechEmpowerPage).
// `source` is what the rows came from (the built-in rows, or the table).
void check_fortunes_page(const Response& r, const std::vector<Fortune>& source) {
    INFO(r.describe());
    REQUIRE(r.status == 200);
    CHECK(r.version() == "HTTP/1.1");
    check_common_headers(r);
    CHECK(r.header_count("Content-Type") == 1);
    CHECK(r.header("Content-Type").value_or("(none)") == "text/html; charset=utf-8");
    CHECK(r.keep_alive);

    std::string why;
    const auto rows = parse_page(r.body, why);
    INFO("the page: " << printable(r.body, 4000));
    if (!rows) FAIL("the page is not the fortunes table: " << why);
    const std::vector<Fortune> expected = page_order(source);
    REQUIRE(rows->size() == expected.size());
    for (std::size_t i = 0; i < rows->size(); ++i) {
        const PageRow& row = (*rows)[i];
        INFO("row " << i << ": <td>" << row.id << "</td><td>" << printable(row.raw, 200) << "</td>");
        CHECK(row.id == std::to_string(expected[i].id));
        const auto message = unescape_html(row.raw, why);
        if (!message) {
            FAIL_CHECK("badly escaped: " << why);
            continue;
        }
        CHECK(*message == expected[i].message);
        // Sorted by message, as bytes.
        if (i > 0) {
            std::string prev_why;
            const auto prev = unescape_html((*rows)[i - 1].raw, prev_why);
            if (prev) CHECK(*prev <= *message);
        }
    }

    // The rows TechEmpower's verifier looks at, where the source has them.
    const std::vector<Fortune>& te = techempower_fortunes();
    auto in_source = [&](std::int32_t id) {
        return std::any_of(source.begin(), source.end(), [&](const Fortune& f) {
            return f.id == id && f.message == te[static_cast<std::size_t>(id - 1)].message;
        });
    };
    if (in_source(11)) {
        const PageRow* script = row_with_id(*rows, 11);
        REQUIRE(script != nullptr);
        CHECK(script->raw ==
              "&lt;script&gt;alert(&quot;This should not be displayed in a browser alert "
              "box.&quot;);&lt;/script&gt;");
    }
    if (in_source(2)) {
        const PageRow* apostrophe = row_with_id(*rows, 2);
        REQUIRE(apostrophe != nullptr);
        CHECK(apostrophe->raw ==
              "A computer scientist is someone who fixes things that aren&#39;t broken.");
    }
    if (in_source(12)) {
        // UTF-8 as bytes, not character references nor another encoding.
        const PageRow* japanese = row_with_id(*rows, 12);
        REQUIRE(japanese != nullptr);
        CHECK(japanese->raw ==
              "\xe3\x83\x95\xe3\x83\xac\xe3\x83\xbc\xe3\x83\xa0\xe3\x83\xaf\xe3\x83\xbc\xe3\x82\xaf"
              "\xe3\x81\xae\xe3\x83\x99\xe3\x83\xb3\xe3\x83\x81\xe3\x83\x9e\xe3\x83\xbc\xe3\x82\xaf");
    }
    for (const std::int32_t id : {6, 8}) {
        if (!in_source(id)) continue;
        const PageRow* dash = row_with_id(*rows, id);
        REQUIRE(dash != nullptr);
        CHECK(dash->raw == te[static_cast<std::size_t>(id - 1)].message);  // the em dash raw
        CHECK(dash->raw.find("\xe2\x80\x94") != std::string::npos);
    }
    const PageRow* added = row_with_id(*rows, 0);
    REQUIRE(added != nullptr);
    CHECK(added->raw == kAddedFortune);

    // And byte for byte the page those rows make; for TechEmpower's own
    // rows, the page TechEmpower's verifier accepts, written out whole.
    CHECK(r.body == expected_page(source));
    if (are_techempower_rows(source)) CHECK(r.body == kTechEmpowerPage);
}

// TechEmpower's own check of a page: tests/support/techempower_fortune.py
// (written from its verifier's documented behaviour) on the body. A case that
// uses it first calls skip_without_techempower_verifier().
void skip_without_techempower_verifier() {
    if (!std::string_view(SM_PYTHON3).empty()) return;
    exit_skipped(std::string("no Python 3 at build time to run ") + SM_TECHEMPOWER_FORTUNE);
}

void check_techempower_verifier_accepts(const std::string& body) {
    char path[] = "/tmp/sm-fortunes-page-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    const bool written = ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size());
    ::close(fd);
    REQUIRE(written);
    const RunResult r = run_to_exit(SM_PYTHON3, {SM_TECHEMPOWER_FORTUNE, path}, 30s);
    ::unlink(path);
    INFO(SM_TECHEMPOWER_FORTUNE << ": " << r.status.describe() << "\n" << r.out << r.err);
    CHECK(r.status.clean());
}

// GET /fortunes as TechEmpower's verifier asks for it: TechEmpower's page,
// byte for byte, which its verifier accepts.
void require_techempower_page(const ServerProcess& server) {
    Connection c = connect(server);
    const Response r = c.request(techempower_request("/fortunes"));
    INFO(r.describe());
    REQUIRE(r.status == 200);
    check_techempower_verifier_accepts(r.body);
    CHECK(r.body == kTechEmpowerPage);
}

void check_fortunes_head(const Response& head, const Response& get) {
    INFO("HEAD: " << head.describe());
    CHECK(head.status == 200);
    check_common_headers(head, Expect::no_body);
    CHECK(head.header("Content-Type") == get.header("Content-Type"));
    CHECK(head.header("Content-Length") == get.header("Content-Length"));
    CHECK(head.keep_alive);
}

// ---- /db and /queries -------------------------------------------------------

// One {"id":N,"randomNumber":M} object: exactly those two integer members,
// both in 1..10000, and the pair one of the table's rows.
void check_world_object(simdjson::dom::element e, const World& world, std::set<std::int64_t>& ids) {
    simdjson::dom::object object;
    REQUIRE(e.get_object().get(object) == simdjson::SUCCESS);
    CHECK(object.size() == 2);
    std::int64_t id = 0;
    std::int64_t number = 0;
    REQUIRE(object["id"].get_int64().get(id) == simdjson::SUCCESS);
    REQUIRE(object["randomNumber"].get_int64().get(number) == simdjson::SUCCESS);
    INFO("id " << id << ", randomNumber " << number);
    CHECK(id >= 1);
    CHECK(id <= 10000);
    CHECK(number >= 1);
    CHECK(number <= 10000);
    const auto row = world.find(static_cast<std::int32_t>(id));
    REQUIRE(row != world.end());
    INFO("the table's randomnumber for id " << id << ": " << row->second);
    CHECK(row->second == number);
    ids.insert(id);
}

void check_json_headers(const Response& r) {
    INFO(r.describe());
    REQUIRE(r.status == 200);
    check_common_headers(r);
    CHECK(r.header_count("Content-Type") == 1);
    CHECK(r.header("Content-Type").value_or("(none)") == "application/json");
    CHECK(r.keep_alive);
}

// GET /db's answer: one row of the World table.
void check_db(const Response& r, const World& world, std::set<std::int64_t>& ids) {
    check_json_headers(r);
    INFO("body: " << r.body);
    simdjson::dom::parser parser;
    simdjson::dom::element e;
    REQUIRE(parser.parse(r.body).get(e) == simdjson::SUCCESS);
    check_world_object(e, world, ids);
}

// GET /queries?queries=...'s answer: an array of `n` rows of the World table.
void check_queries(const Response& r, std::size_t n, const World& world,
                   std::set<std::int64_t>& ids) {
    check_json_headers(r);
    INFO("body: " << printable(r.body, 400));
    simdjson::dom::parser parser;
    simdjson::dom::array array;
    REQUIRE(parser.parse(r.body).get_array().get(array) == simdjson::SUCCESS);
    REQUIRE(array.size() == n);
    std::size_t i = 0;
    for (simdjson::dom::element e : array) {
        INFO("element " << i++);
        check_world_object(e, world, ids);
    }
}

// The bodies of the 503s a database failure gets, one per class of failure,
// written out here apart from common/http: a fixed text and nothing more.
constexpr std::string_view kDatabaseUnavailable = "Service Unavailable: database unavailable\n";
constexpr std::string_view kDatabaseLost = "Service Unavailable: database connection lost\n";
constexpr std::string_view kDatabaseError = "Service Unavailable: database error\n";
constexpr std::string_view kDatabaseTimeout = "Service Unavailable: database timeout\n";

// The 503 a database failure gets: the connection kept, and a body that
// names the class of the failure only, never the database's address or
// port (`db_port`) nor libpq's text (which goes to the server's log).
void check_database_unavailable(const Response& r, std::uint16_t db_port) {
    INFO(r.describe());
    CHECK(r.status == 503);
    CHECK(r.reason == "Service Unavailable");
    check_common_headers(r);
    CHECK((r.body == kDatabaseUnavailable || r.body == kDatabaseLost || r.body == kDatabaseError ||
           r.body == kDatabaseTimeout));
    CHECK(r.body.find("127.0.0.1") == std::string::npos);
    CHECK(r.body.find(std::to_string(db_port)) == std::string::npos);
    CHECK(r.keep_alive);
}

// ---- descriptors, with a database -------------------------------------------

// The server's socket inodes and where the sockets go, from /proc/net/tcp{,6}:
// inode -> remote port.
std::map<unsigned long, std::uint16_t> remote_ports() {
    std::map<unsigned long, std::uint16_t> out;
    for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream in(file);
        std::string line;
        std::getline(in, line);  // the header
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string sl, local, remote, st, queues, timer, retr, uid, timeout;
            unsigned long inode = 0;
            if (!(fields >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >>
                  timeout >> inode))
                continue;
            const auto colon = remote.rfind(':');
            if (colon == std::string::npos) continue;
            out[inode] = static_cast<std::uint16_t>(std::stoul(remote.substr(colon + 1), nullptr, 16));
        }
    }
    return out;
}

// FdBaseline for a server with --db: the database connections are not the
// clients' and come and go with the database (a reconnect after an outage,
// a model that opens them lazily), so they are counted apart. Every other
// descriptor must return to its baseline, as FdBaseline's do, and the
// database connections must stay within what the server's threads may hold
// (a reconnect that leaks its old connection shows there; one whose failed
// attempts leak a descriptor shows in the rest).
class DbFdBaseline {
  public:
    DbFdBaseline(ServerProcess& server, std::uint16_t db_port, unsigned db_connections)
        : server_(server), db_port_(db_port), db_connections_(db_connections) {
        // Warm-up: connections spread over the threads, each asking for the
        // database too, so per-thread resources made on first use exist now.
        std::vector<Connection> conns;
        for (int i = 0; i < 8; ++i)
            conns.push_back(connect(server));
        for (auto& c : conns)
            c.send(make_request("GET", "/plaintext") + make_request("GET", "/db"));
        for (auto& c : conns) {
            for (const Response& r : c.read_responses(2)) {
                INFO(r.describe());
                REQUIRE(r.status == 200);
            }
        }
        conns.clear();
        Counts last = count_now();
        int same = 0;
        eventually(
            [&] {
                const Counts n = count_now();
                same = n.other == last.other ? same + 1 : 0;
                last = n;
                return same >= 5;
            },
            3s, 20ms);
        baseline_ = last.other;
    }

    void require_back() const {
        Counts now;
        std::size_t limit = 0;
        const bool back = eventually(
            [&] {
                now = count_now();
                limit = threads() * db_connections_;
                return now.other == baseline_ && now.db <= limit;
            },
            5s, 20ms);
        INFO("server descriptors other than its database connections: baseline "
             << baseline_ << ", now " << now.other << "; database connections " << now.db
             << " (at most " << limit << ": threads x --db-connections)\n"
             << server_.describe_fds());
        CHECK(back);
    }

  private:
    struct Counts {
        std::size_t other = 0;
        std::size_t db = 0;
    };

    [[nodiscard]] std::size_t threads() const {
        std::size_t n = 0;
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(
                 "/proc/" + std::to_string(server_.pid()) + "/task", ec)) {
            (void)e;
            ++n;
        }
        return n;
    }

    [[nodiscard]] Counts count_now() const {
        const auto ports = remote_ports();
        Counts c;
        std::error_code ec;
        const std::string dir = "/proc/" + std::to_string(server_.pid()) + "/fd";
        for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
            std::error_code link_ec;
            const std::string link = std::filesystem::read_symlink(e.path(), link_ec).string();
            unsigned long inode = 0;
            if (std::sscanf(link.c_str(), "socket:[%lu]", &inode) == 1) {
                const auto p = ports.find(inode);
                if (p != ports.end() && p->second == db_port_) {
                    ++c.db;
                    continue;
                }
            }
            ++c.other;
        }
        return c;
    }

    ServerProcess& server_;
    std::uint16_t db_port_;
    unsigned db_connections_;
    std::size_t baseline_ = 0;
};

// ---- helpers ----------------------------------------------------------------

std::vector<std::string> with_db(const std::string& url, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--db", url};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

std::string joined(const std::vector<std::string>& args) {
    std::string s;
    for (const auto& a : args)
        s += (s.empty() ? "" : " ") + a;
    return s;
}

std::size_t lines(std::string_view s) {
    return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

// `s` without its first `n` lines.
std::string after_lines(const std::string& s, std::size_t n) {
    std::size_t at = 0;
    for (std::size_t i = 0; i < n && at < s.size(); ++i) {
        const auto eol = s.find('\n', at);
        at = eol == std::string::npos ? s.size() : eol + 1;
    }
    return s.substr(at);
}

bool readable_now(const Connection& c) {
    pollfd p{c.fd(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
}

std::vector<Fortune> fortunes_of(pg::Session& s) {
    std::vector<Fortune> rows;
    for (auto& [id, message] : pg::fortune_table(s))
        rows.push_back({id, std::move(message)});
    return rows;
}

// Requests and what their 200 answers must be, for mixed batches.
enum class Kind { plaintext, db, queries, fortunes };
struct Planned {
    Kind kind;
    std::size_t n = 1;  // rows, for queries
    std::string target;
};

Planned plan(Kind kind, std::size_t n = 1) {
    switch (kind) {
        case Kind::plaintext: return {kind, 0, "/plaintext"};
        case Kind::db: return {kind, 1, "/db"};
        case Kind::queries: return {kind, n, "/queries?queries=" + std::to_string(n)};
        case Kind::fortunes: return {kind, 0, "/fortunes"};
    }
    return {kind, 0, "/"};
}

void check_planned(const Response& r, const Planned& p, const World& world,
                   const std::vector<Fortune>& fortunes, std::set<std::int64_t>& ids) {
    INFO("expected the answer to GET " << p.target);
    switch (p.kind) {
        case Kind::plaintext: {
            INFO(r.describe());
            CHECK(r.status == 200);
            CHECK(r.body == kPlaintextBody);
            break;
        }
        case Kind::db: check_db(r, world, ids); break;
        case Kind::queries: check_queries(r, p.n, world, ids); break;
        case Kind::fortunes: check_fortunes_page(r, fortunes); break;
    }
}

}  // namespace

// ============================================================================
// Without a database: every model, server-iocp.exe included.
// ============================================================================

TEST_CASE("workloads fortunes from memory meet the TechEmpower rules",
          "[conformance][workloads]") {
    const auto extra = GENERATE(std::vector<std::string>{},
                                std::vector<std::string>{"--fortunes", "memory"},
                                std::vector<std::string>{"--mode", "cached"});
    INFO("server options: " << joined(extra));
    auto server = start_server(extra);
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        // Three times on one connection: keep-alive, and the page is made
        // afresh (the added row must not accumulate).
        for (int i = 0; i < 3; ++i) {
            INFO("request " << i);
            check_fortunes_page(c.request(techempower_request("/fortunes")), techempower_fortunes());
        }
    }
    fds.require_back();
}

TEST_CASE("workloads fortunes from memory pass TechEmpower's verifier",
          "[conformance][workloads]") {
    skip_without_techempower_verifier();
    const auto extra = GENERATE(std::vector<std::string>{},
                                std::vector<std::string>{"--mode", "cached"});
    INFO("server options: " << joined(extra));
    auto server = start_server(extra);
    const FdBaseline fds(*server);
    require_techempower_page(*server);
    fds.require_back();
}

TEST_CASE("workloads fortunes HEAD answers the page's headers without a body",
          "[conformance][workloads]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        const Response get = c.request(make_request("GET", "/fortunes"));
        check_fortunes_page(get, techempower_fortunes());
        // A stray body would be read as the start of the next response.
        const Response head = c.request(make_request("HEAD", "/fortunes"), Expect::no_body);
        check_fortunes_head(head, get);
        check_fortunes_page(c.request(make_request("GET", "/fortunes")), techempower_fortunes());
    }
    fds.require_back();
}

TEST_CASE("workloads fortunes pipelined with plaintext and json are answered in order",
          "[conformance][workloads]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        // An irregular mix of 30 in one write.
        std::vector<std::string_view> paths;
        std::string batch;
        for (unsigned i = 0; i < 30; ++i) {
            paths.push_back(i % 3 == 0 ? "/fortunes" : i % 7 == 1 ? "/json" : "/plaintext");
            batch += make_request("GET", paths.back());
        }
        Connection c = connect(*server);
        c.send(batch);
        const auto responses = c.read_responses(paths.size());
        for (std::size_t i = 0; i < paths.size(); ++i) {
            INFO("response " << i << " (GET " << paths[i] << ")");
            if (paths[i] == "/fortunes") {
                check_fortunes_page(responses[i], techempower_fortunes());
            } else {
                CHECK(responses[i].status == 200);
                CHECK(responses[i].body == (paths[i] == "/json" ? kJsonBody : kPlaintextBody));
            }
        }
    }
    fds.require_back();
}

TEST_CASE("workloads db and queries without --db answer 503 and keep the connection",
          "[conformance][workloads]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    constexpr std::string_view kBody = "Service Unavailable: no database: start the server with --db\n";
    auto check_503 = [&](const Response& r) {
        INFO(r.describe());
        CHECK(r.status == 503);
        CHECK(r.reason == "Service Unavailable");
        check_common_headers(r);
        CHECK(r.body == kBody);
        CHECK(r.keep_alive);
    };
    {
        Connection c = connect(*server);
        for (const char* target : {"/db", "/queries", "/queries?queries=20", "/queries?queries=foo"}) {
            INFO("GET " << target);
            check_503(c.request(make_request("GET", target)));
        }
        // Pipelined among other requests, in order, the connection kept.
        c.send(make_request("GET", "/db") + make_request("GET", "/plaintext") +
               make_request("GET", "/queries?queries=5") + make_request("GET", "/json"));
        const auto rs = c.read_responses(4);
        check_503(rs[0]);
        CHECK(rs[1].status == 200);
        CHECK(rs[1].body == kPlaintextBody);
        check_503(rs[2]);
        CHECK(rs[3].status == 200);
        CHECK(rs[3].body == kJsonBody);
        const Response again = c.request(make_request("GET", "/plaintext"));
        CHECK(again.status == 200);
    }
    fds.require_back();
}

TEST_CASE("workloads db down: /db, /queries and /fortunes answer 503 naming no address or port",
          "[conformance][workloads]") {
    // No PostgreSQL needed: the database is a port nothing listens on, down
    // from the start. libpq's "connection to server at "127.0.0.1", port N
    // failed: ..." is for the server's log, not for a client.
    skip_without_database_client();
    const std::string url = pg::url_nobody_listens_on();
    const std::uint16_t port = pg::url_port(url);
    auto server = start_server(with_db(url, {"--threads", "2"}));
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        for (const char* target : {"/db", "/queries?queries=5", "/fortunes", "/db"}) {
            INFO("GET " << target);
            const Response r = c.request(make_request("GET", target));
            check_database_unavailable(r, port);
            CHECK(r.body == kDatabaseUnavailable);
        }
        // Pipelined among others, in order, the connection kept.
        c.send(make_request("GET", "/db") + make_request("GET", "/plaintext") +
               make_request("GET", "/fortunes"));
        const auto rs = c.read_responses(3);
        check_database_unavailable(rs[0], port);
        CHECK(rs[1].status == 200);
        CHECK(rs[1].body == kPlaintextBody);
        check_database_unavailable(rs[2], port);
    }
    // The detail went to the server's log: the address and port it could not reach.
    const std::string where = "\"127.0.0.1\", port " + std::to_string(port);
    const bool logged =
        eventually([&] { return server->stderr_text().find(where) != std::string::npos; }, 5s, 20ms);
    INFO("server stderr:\n" << server->stderr_text());
    CHECK(logged);
    fds.require_back();
}

// The libraries mapped into `pid` whose file name contains `name`, one a line.
static std::string mapped(pid_t pid, std::string_view name) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    std::set<std::string> files;
    std::string line;
    while (std::getline(maps, line)) {
        const auto slash = line.find('/');
        if (slash != std::string::npos && line.find(name, slash) != std::string::npos)
            files.insert(line.substr(slash));
    }
    std::string out;
    for (const std::string& f : files) out += f + "\n";
    return out;
}

// [own-process]: it reads the server process's own /proc entries, which a
// server run through a container launcher (tests/containers) does not show.
TEST_CASE("workloads the database client's library is loaded only with --db",
          "[conformance][workloads][own-process]") {
    // Without --db: no libpq, nor what it pulls in, in the process.
    {
        auto server = start_server();
        Connection c = connect(*server);
        CHECK(c.request(make_request("GET", "/db")).status == 503);
        INFO("mapped: " << mapped(server->pid(), "lib"));
        CHECK(mapped(server->pid(), "libpq").empty());
        CHECK(mapped(server->pid(), "libssl").empty());
        CHECK(mapped(server->pid(), "libkrb5").empty());
    }
    if (!has_database_client()) return;
    // With --db (a port nothing listens on will do): loaded before the ready line.
    {
        auto server = start_server(with_db(pg::url_nobody_listens_on()));
        CHECK_FALSE(mapped(server->pid(), "libpq").empty());
    }
    // A libpq that cannot be loaded: a clear refusal at start, exit 1.
    {
        struct Env {
            Env() { ::setenv("SM_LIBPQ", "/nonexistent/libpq.so.5", 1); }
            ~Env() { ::unsetenv("SM_LIBPQ"); }
        } env;
        const RunResult r = run_to_exit(
            target().binary,
            {"--address", "127.0.0.1", "--port", "0", "--db", pg::url_nobody_listens_on()}, kExitGuard);
        INFO("status: " << r.status.describe() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
        CHECK(r.status.exited);
        CHECK(r.status.code == 1);
        CHECK_THAT(r.err, Catch::Matchers::Contains("--db: cannot load libpq (/nonexistent/libpq.so.5"));
        CHECK_THAT(r.out, !Catch::Matchers::Contains("listening on"));
    }
}

TEST_CASE("workloads options --db, --db-connections and --fortunes are checked at start",
          "[conformance][workloads]") {
    struct Case {
        std::vector<std::string> args;
        const char* mentions;
    };
    std::vector<Case> bad = {
        {{"--fortunes", "db"}, "--db"},
        {{"--fortunes", "disk"}, "fortunes"},
        {{"--db-connections", "0"}, "db-connections"},
        {{"--db-connections", "65"}, "db-connections"},
        {{"--db-connections", "many"}, "db-connections"},
    };
    if (!has_database_client()) {
        // A port nothing listens on: the refusal must not depend on a database.
        bad.push_back({{"--db", "postgresql://benchmarkdbuser:benchmarkdbpass@127.0.0.1:1/hello_world"},
                       "db"});
    }
    for (const Case& c : bad) {
        std::vector<std::string> args = {"--address", "127.0.0.1", "--port", "0"};
        args.insert(args.end(), c.args.begin(), c.args.end());
        const RunResult r = run_to_exit(target().binary, args, kExitGuard);
        INFO("arguments: " << joined(c.args) << "\nstatus: " << r.status.describe()
                           << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
        CHECK(r.status.exited);
        CHECK(r.status.code == 2);
        CHECK_THAT(r.err, Catch::Matchers::Contains(c.mentions));
        CHECK_THAT(r.out, !Catch::Matchers::Contains("listening on"));
    }
    // --help lists them.
    const RunResult help = run_to_exit(target().binary, {"--help"}, kExitGuard);
    INFO("--help:\n" << help.out);
    CHECK(help.status.clean());
    for (const char* option : {"--db", "--db-connections", "--fortunes"})
        CHECK_THAT(help.out, Catch::Matchers::Contains(option));
    // The ends of --db-connections' range are accepted (no --db: nothing to connect).
    for (const char* n : {"1", "64"}) {
        INFO("--db-connections " << n);
        auto server = start_server({"--db-connections", n});
        Connection c = connect(*server);
        CHECK(c.request(make_request("GET", "/plaintext")).status == 200);
        c.close();
        const ExitStatus s = server->stop(SIGTERM, 10s);
        INFO(s.describe() << "\n" << server->stderr_text());
        CHECK(s.clean());
    }
}

// ============================================================================
// With the shared PostgreSQL fixture (read only).
// ============================================================================

TEST_CASE("workloads db fortunes from the database meet the TechEmpower rules",
          "[conformance][workloads][db]") {
    skip_without_database_client();
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const std::vector<Fortune> table = fortunes_of(ref);
    {
        // The fixture holds TechEmpower's rows: the checks of the rows the
        // verifier looks at all apply.
        INFO("the fixture's fortune table");
        REQUIRE(table.size() == techempower_fortunes().size());
        for (std::size_t i = 0; i < table.size(); ++i) {
            CHECK(table[i].id == techempower_fortunes()[i].id);
            CHECK(table[i].message == techempower_fortunes()[i].message);
        }
    }
    const auto extra = GENERATE(std::vector<std::string>{},
                                std::vector<std::string>{"--fortunes", "db"},
                                std::vector<std::string>{"--fortunes", "db", "--mode", "cached"},
                                std::vector<std::string>{"--fortunes", "db", "--threads", "1"},
                                std::vector<std::string>{"--fortunes", "memory"});
    INFO("server options: --db " << url << " " << joined(extra));
    auto server = start_server(with_db(url, extra));
    const DbFdBaseline fds(*server, pg::url_port(url), 1);
    {
        Connection c = connect(*server);
        for (int i = 0; i < 3; ++i) {
            INFO("request " << i);
            check_fortunes_page(c.request(techempower_request("/fortunes")), table);
        }
        const Response get = c.request(make_request("GET", "/fortunes"));
        const Response head = c.request(make_request("HEAD", "/fortunes"), Expect::no_body);
        check_fortunes_head(head, get);
        check_fortunes_page(c.request(make_request("GET", "/fortunes")), table);
    }
    fds.require_back();
}

TEST_CASE("workloads db fortunes from the database pass TechEmpower's verifier",
          "[conformance][workloads][db]") {
    skip_without_database_client();
    skip_without_techempower_verifier();
    const std::string url = pg::fixture_url_or_skip();
    auto server = start_server(with_db(url, {"--fortunes", "db"}));
    const DbFdBaseline fds(*server, pg::url_port(url), 1);
    require_techempower_page(*server);
    fds.require_back();
}

TEST_CASE("workloads db /db answers rows of the World table", "[conformance][workloads][db]") {
    skip_without_database_client();
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const World world = pg::world_table(ref);
    REQUIRE(world.size() == 10000);
    auto server = start_server(with_db(url, {"--threads", "2"}));
    const DbFdBaseline fds(*server, pg::url_port(url), 1);
    std::set<std::int64_t> ids;
    {
        std::vector<Connection> conns;
        for (int i = 0; i < 4; ++i)
            conns.push_back(connect(*server));
        for (int round = 0; round < 50; ++round) {
            for (auto& c : conns)
                c.send(techempower_request("/db"));
            for (auto& c : conns) {
                INFO("round " << round);
                check_db(c.read_response(), world, ids);
            }
        }
    }
    // TechEmpower: a random row each time. 200 draws of 10,000 ids.
    INFO(ids.size() << " distinct ids in 200 answers");
    CHECK(ids.size() >= 100);
    fds.require_back();
}

TEST_CASE("workloads db /queries answers the clamped number of rows of the World table",
          "[conformance][workloads][db]") {
    skip_without_database_client();
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const World world = pg::world_table(ref);
    REQUIRE(world.size() == 10000);
    auto server = start_server(with_db(url, {"--threads", "2"}));
    const DbFdBaseline fds(*server, pg::url_port(url), 1);
    std::set<std::int64_t> ids;
    {
        Connection c = connect(*server, 10s);
        const std::vector<std::pair<std::string, std::size_t>> cases = {
            {"/queries", 1},           {"/queries?queries=", 1},    {"/queries?queries=foo", 1},
            {"/queries?queries=0", 1}, {"/queries?queries=-3", 1},  {"/queries?queries=1", 1},
            {"/queries?queries=20", 20}, {"/queries?queries=500", 500},
            {"/queries?queries=501", 500}, {"/queries?queries=99999", 500},
        };
        for (const auto& [path, n] : cases) {
            INFO("GET " << path << ": " << n << " rows");
            check_queries(c.request(techempower_request(path)), n, world, ids);
        }
    }
    // 500 draws: mostly distinct ids (a fixed or cycling id would not be).
    INFO(ids.size() << " distinct ids");
    CHECK(ids.size() >= 300);
    fds.require_back();
}

TEST_CASE("workloads db pipelined /db, /queries and /plaintext are answered in order",
          "[conformance][workloads][db]") {
    skip_without_database_client();
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const World world = pg::world_table(ref);
    const std::vector<Fortune> fortunes = fortunes_of(ref);
    const auto db_connections = GENERATE(as<std::string>{}, "1", "4");
    INFO("--threads 1 --db-connections " << db_connections);
    auto server = start_server(with_db(url, {"--threads", "1", "--db-connections", db_connections}));
    const DbFdBaseline fds(*server, pg::url_port(url),
                           static_cast<unsigned>(std::stoul(db_connections)));
    std::set<std::int64_t> ids;
    {
        // 50 requests in one write: mostly /db, with /queries of varying
        // sizes (their lengths show any reordering), /plaintext and a
        // /fortunes from the database among them.
        std::vector<Planned> planned;
        std::string batch;
        for (std::size_t i = 0; i < 50; ++i) {
            const Planned p = i % 5 == 2   ? plan(Kind::plaintext)
                              : i % 7 == 3 ? plan(Kind::queries, 1 + i % 6)
                              : i == 24    ? plan(Kind::fortunes)
                                           : plan(Kind::db);
            planned.push_back(p);
            batch += make_request("GET", p.target);
        }
        Connection c = connect(*server, 10s);
        for (int round = 0; round < 2; ++round) {
            c.send(batch);
            const auto responses = c.read_responses(planned.size());
            for (std::size_t i = 0; i < planned.size(); ++i) {
                INFO("round " << round << ", response " << i);
                check_planned(responses[i], planned[i], world, fortunes, ids);
            }
        }
        // Nothing more than was asked for.
        CHECK(c.buffered() == 0);
        const Response after = c.request(make_request("GET", "/plaintext"));
        CHECK(after.status == 200);
        CHECK(after.body == kPlaintextBody);
    }
    fds.require_back();
}

TEST_CASE("workloads db 32 connections with 20 requests each are all answered",
          "[conformance][workloads][db]") {
    skip_without_database_client();
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const World world = pg::world_table(ref);
    const std::vector<Fortune> fortunes = fortunes_of(ref);
    const auto db_connections = GENERATE(as<std::string>{}, "1", "4");
    INFO("--threads 2 --db-connections " << db_connections);
    auto server = start_server(with_db(url, {"--threads", "2", "--db-connections", db_connections}));
    const DbFdBaseline fds(*server, pg::url_port(url),
                           static_cast<unsigned>(std::stoul(db_connections)));
    std::set<std::int64_t> ids;
    {
        constexpr std::size_t kConnections = 32;
        std::vector<Connection> conns;
        for (std::size_t i = 0; i < kConnections; ++i)
            conns.push_back(connect(*server, 15s));
        // Every connection has a request out at once, 20 rounds.
        for (std::size_t round = 0; round < 20; ++round) {
            std::vector<Planned> planned;
            for (std::size_t i = 0; i < kConnections; ++i) {
                const std::size_t k = round * kConnections + i;
                planned.push_back(k % 9 == 4   ? plan(Kind::queries, 5)
                                  : k % 13 == 7 ? plan(Kind::fortunes)
                                  : k % 5 == 1  ? plan(Kind::plaintext)
                                                : plan(Kind::db));
                conns[i].send(techempower_request(planned.back().target));
            }
            for (std::size_t i = 0; i < kConnections; ++i) {
                INFO("round " << round << ", connection " << i);
                check_planned(conns[i].read_response(), planned[i], world, fortunes, ids);
            }
        }
    }
    fds.require_back();
}

// ============================================================================
// With a PostgreSQL of the case's own (scripts/pg.sh): changed, stopped, locked.
// ============================================================================

TEST_CASE("workloads db fortunes come from the table: a row added to it is on the page",
          "[conformance][workloads][db]") {
    skip_without_database_client();
    (void)pg::fixture_url_or_skip();  // [db] cases skip together without the fixture
    pg::OwnPostgres db;
    std::vector<Fortune> table;
    {
        pg::Session ref(db.url());
        // Every character the escaping handles, and one that sorts first.
        ref.exec("INSERT INTO fortune (id, message) VALUES "
                 "(13, '<b>Tom & Jerry</b> say \"it''s\" > 1'), (14, '!first by bytes')");
        table = fortunes_of(ref);
    }
    REQUIRE(table.size() == 14);
    {
        auto server = start_server(with_db(db.url()));
        const DbFdBaseline fds(*server, db.port(), 1);
        {
            Connection c = connect(*server);
            const Response r = c.request(techempower_request("/fortunes"));
            check_fortunes_page(r, table);
            CHECK_THAT(r.body, Catch::Matchers::Contains(
                                   "<tr><td>13</td><td>&lt;b&gt;Tom &amp; Jerry&lt;/b&gt; say "
                                   "&quot;it&#39;s&quot; &gt; 1</td></tr>"));
            CHECK(r.body.starts_with(std::string(kPageHead) +
                                     "<tr><td>14</td><td>!first by bytes</td></tr>"));
        }
        fds.require_back();
    }
    {
        // --fortunes memory with --db: the built-in rows, not the table's.
        auto server = start_server(with_db(db.url(), {"--fortunes", "memory"}));
        const DbFdBaseline fds(*server, db.port(), 1);
        {
            Connection c = connect(*server);
            check_fortunes_page(c.request(techempower_request("/fortunes")),
                                techempower_fortunes());
        }
        fds.require_back();
    }
}

TEST_CASE("workloads db stopped mid-run: 503s, no crash, no log flood, /db again once back",
          "[conformance][workloads][db]") {
    skip_without_database_client();
    (void)pg::fixture_url_or_skip();  // [db] cases skip together without the fixture
    pg::OwnPostgres db;
    World world;
    std::vector<Fortune> fortunes;
    {
        pg::Session ref(db.url());
        world = pg::world_table(ref);
        fortunes = fortunes_of(ref);
    }
    auto server = start_server(with_db(db.url(), {"--threads", "2", "--db-connections", "2"}));
    const DbFdBaseline fds(*server, db.port(), 2);
    std::set<std::int64_t> ids;
    {
        std::vector<Connection> conns;
        for (int i = 0; i < 2; ++i)
            conns.push_back(connect(*server, 10s));
        for (auto& c : conns) {
            check_db(c.request(make_request("GET", "/db")), world, ids);
            check_fortunes_page(c.request(make_request("GET", "/fortunes")), fortunes);
        }

        // The outage.
        const std::size_t lines_before = lines(server->stderr_text());
        db.pause();
        const auto down = Clock::now();
        std::size_t answered = 0;
        const char* targets[] = {"/db", "/queries?queries=3", "/fortunes", "/db"};
        while (Clock::now() - down < 3s) {
            for (auto& c : conns) {
                const char* t = targets[answered % 4];
                INFO("GET " << t << " while the database is down (request " << answered << ")");
                check_database_unavailable(c.request(make_request("GET", t)), db.port());
                ++answered;
            }
            // The server is up and serves what needs no database meanwhile.
            const Response plain = conns[answered % 2].request(make_request("GET", "/plaintext"));
            CHECK(plain.status == 200);
            CHECK(plain.body == kPlaintextBody);
        }
        INFO(answered << " database requests answered during the outage");
        {
            Connection fresh = connect(*server);
            check_database_unavailable(fresh.request(make_request("GET", "/db")), db.port());
        }

        // Back: /db answers 200 again within a bounded wait.
        db.resume();
        const auto up = Clock::now();
        Response last;
        const bool recovered = eventually(
            [&] {
                last = conns[0].request(make_request("GET", "/db"));
                if (last.status != 200) {
                    check_database_unavailable(last, db.port());
                    return false;
                }
                return true;
            },
            15s, 200ms);
        const auto back = Clock::now();
        INFO("the last answer after the database came back: " << last.describe());
        REQUIRE(recovered);
        INFO("recovered "
             << std::chrono::duration_cast<std::chrono::milliseconds>(back - up).count()
             << " ms after the database came back");
        check_db(last, world, ids);

        // The log during the outage: a few lines a second at most, not one a request.
        const std::string err = server->stderr_text();
        const std::size_t outage_lines = lines(err) - lines_before;
        const auto seconds =
            std::chrono::duration_cast<std::chrono::seconds>(back - down).count() + 1;
        INFO("server stderr during the " << seconds << " s outage (" << outage_lines
                                         << " lines):\n"
                                         << after_lines(err, lines_before));
        CHECK(outage_lines <= static_cast<std::size_t>(3 * seconds + 5));

        // Every connection and every workload works again: once the thread
        // that takes the request has its database connection back (another
        // thread's may still be waiting out its backoff, and the pool models
        // hand a connection's requests to any thread), each answers 200.
        const auto answer_200 = [&](Connection& c, const char* target) {
            Response r;
            const bool ok = eventually(
                [&] {
                    r = c.request(make_request("GET", target));
                    if (r.status == 200) return true;
                    check_database_unavailable(r, db.port());
                    return false;
                },
                15s, 200ms);
            INFO("GET " << target << ": " << r.describe());
            CHECK(ok);
            return r;
        };
        for (auto& c : conns) {
            check_db(answer_200(c, "/db"), world, ids);
            check_queries(answer_200(c, "/queries?queries=3"), 3, world, ids);
            check_fortunes_page(answer_200(c, "/fortunes"), fortunes);
        }
    }
    REQUIRE(server->running());
    fds.require_back();
}

namespace {

// A /db held by a lock on the world table: connection `a` sends it and waits
// on the lock, while `b`, not waiting, is served a /plaintext. Both are
// served one /db first, so a blocking model has given each its thread and
// database connection before the lock. The lock is held until release().
class QueryOnALock {
  public:
    QueryOnALock(const ServerProcess& server, const std::string& url, const World& world,
                 std::set<std::int64_t>& ids)
        : a(connect(server, 10s)), b(connect(server, 10s)) {
        a.send(make_request("GET", "/db"));
        b.send(make_request("GET", "/db"));
        check_db(a.read_response(), world, ids);
        check_db(b.read_response(), world, ids);

        locker_ = std::make_unique<pg::Session>(url);
        pg::Session watcher(url);
        locker_->exec("BEGIN; LOCK TABLE world IN ACCESS EXCLUSIVE MODE");
        sent = Clock::now();
        a.send(make_request("GET", "/db"));
        const bool waiting =
            eventually([&] { return pg::sessions_waiting_on_a_lock(watcher) >= 1; }, 5s, 10ms);
        INFO("the server's query waits on the lock: " << (waiting ? "seen" : "never seen"));
        CHECK(waiting);

        // Meanwhile the other connection is served.
        const Response plain = b.request(make_request("GET", "/plaintext"));
        served = Clock::now();
        INFO(plain.describe());
        CHECK(plain.status == 200);
        CHECK(plain.body == kPlaintextBody);
    }

    void release() { locker_->exec("ROLLBACK"); }

    Connection a;
    Connection b;
    Clock::time_point sent;    // when a's /db went out
    Clock::time_point served;  // when b's /plaintext came back

  private:
    std::unique_ptr<pg::Session> locker_;
};

// Reads the response to the /db that waited on the lock; fails the case
// with the server's stderr if none comes.
Response read_waiting_response(Connection& c, const ServerProcess& server) {
    try {
        return c.read_response();
    } catch (const std::runtime_error& e) {
        FAIL("the request waiting on the lock got no response: " << e.what()
                                                                  << "\n--- server stderr ---\n"
                                                                  << server.stderr_text());
    }
    return {};
}

// The lock cases: a PostgreSQL of their own and its world table. The event
// models run one thread (their loop must not block on the query); the
// blocking models need a second thread for the other client.
struct LockCase {
    pg::OwnPostgres db;
    World world = [this] {
        pg::Session ref(db.url());
        return pg::world_table(ref);
    }();
    std::string threads = blocks_on_queries() ? "2" : "1";
};

}  // namespace

TEST_CASE("workloads db a query waiting on a lock gets 503 at the statement timeout while "
          "others are served",
          "[conformance][workloads][db]") {
    skip_without_database_client();
    (void)pg::fixture_url_or_skip();  // [db] cases skip together without the fixture
    LockCase lc;
    INFO("--threads " << lc.threads << " --idle-timeout 1");
    auto server = start_server(with_db(lc.db.url(), {"--threads", lc.threads, "--idle-timeout", "1"}));
    const DbFdBaseline fds(*server, lc.db.port(), 1);
    std::set<std::int64_t> ids;
    {
        QueryOnALock q(*server, lc.db.url(), lc.world, ids);
        if (q.served - q.sent < 700ms) {
            // Well before the statement timeout: the /db is still waiting.
            CHECK_FALSE(readable_now(q.a));
        }

        // The waiting request: a 503 at the statement timeout (--idle-timeout),
        // not a close for idleness.
        const Response late = read_waiting_response(q.a, *server);
        INFO("answered after " << std::chrono::duration_cast<std::chrono::milliseconds>(
                                      Clock::now() - q.sent)
                                      .count()
                               << " ms");
        check_database_unavailable(late, lc.db.port());
        CHECK(late.body == kDatabaseTimeout);
        // The connection was kept: it serves the next request.
        const Response next = q.a.request(make_request("GET", "/plaintext"));
        CHECK(next.status == 200);

        q.release();
        // The lock gone, /db answers again on the same connection.
        check_db(q.a.request(make_request("GET", "/db")), lc.world, ids);
    }
    REQUIRE(server->running());
    fds.require_back();
}

TEST_CASE("workloads db a request waiting on the database past --idle-timeout is not closed as idle",
          "[conformance][workloads][db]") {
    skip_without_database_client();
    (void)pg::fixture_url_or_skip();  // [db] cases skip together without the fixture
    LockCase lc;
    // A statement timeout of its own (the conninfo's options win over the
    // one the server derives from --idle-timeout), far beyond the idle one:
    // the query outlives --idle-timeout, and then completes.
    const std::string url = lc.db.url() + "?options=-c%20statement_timeout%3D20000";
    INFO("--db " << url << " --threads " << lc.threads << " --idle-timeout 1");
    auto server = start_server(with_db(url, {"--threads", lc.threads, "--idle-timeout", "1"}));
    const DbFdBaseline fds(*server, lc.db.port(), 1);
    std::set<std::int64_t> ids;
    {
        QueryOnALock q(*server, lc.db.url(), lc.world, ids);

        // Twice --idle-timeout: nothing arrives on the waiting connection,
        // neither a response nor a close.
        pollfd p{q.a.fd(), POLLIN, 0};
        const int ready = ::poll(&p, 1, remaining_ms(q.sent + 2500ms));
        const auto quiet_for = Clock::now() - q.sent;
        INFO("the waiting connection became "
             << (ready > 0 ? "readable (answered or closed)" : "nothing") << " after "
             << std::chrono::duration_cast<std::chrono::milliseconds>(quiet_for).count() << " ms");
        CHECK(ready == 0);

        // The lock released, the query completes: its row on the same connection.
        q.release();
        check_db(read_waiting_response(q.a, *server), lc.world, ids);
        // The response is progress: the idle time starts again from it, not
        // from the read of the request 2.5 s ago. Longer than one sweep of the
        // deadlines (a quarter of --idle-timeout) and well inside the timeout,
        // a pause before the next request finds a connection closed as idle
        // on the stale time.
        std::this_thread::sleep_for(400ms);
        std::optional<Response> next;
        try {
            next = q.a.request(make_request("GET", "/plaintext"));
        } catch (const std::runtime_error& e) {
            INFO("the next request, 400 ms after the response: " << e.what());
            FAIL("the connection was closed as idle although its response had just been written");
        }
        CHECK(next->status == 200);
        CHECK(next->body == kPlaintextBody);
    }
    REQUIRE(server->running());
    fds.require_back();
}

TEST_CASE("workloads db SIGTERM with a query waiting on a lock exits 0 in bounded time",
          "[conformance][workloads][db]") {
    skip_without_database_client();
    (void)pg::fixture_url_or_skip();  // [db] cases skip together without the fixture
    pg::OwnPostgres db;
    auto server = start_server(with_db(db.url(), {"--threads", "1", "--shutdown-timeout", "1"}));
    Connection a = connect(*server, 15s);
    REQUIRE(a.request(make_request("GET", "/db")).status == 200);

    pg::Session locker(db.url());
    pg::Session watcher(db.url());
    locker.exec("BEGIN; LOCK TABLE world IN ACCESS EXCLUSIVE MODE");
    a.send(make_request("GET", "/db"));
    const bool waiting =
        eventually([&] { return pg::sessions_waiting_on_a_lock(watcher) >= 1; }, 5s, 10ms);
    INFO("the server's query waits on the lock: " << (waiting ? "seen" : "never seen"));
    CHECK(waiting);

    const auto signalled = Clock::now();
    server->signal(SIGTERM);
    const auto status = server->wait_exit(10s);
    const auto took = Clock::now() - signalled;
    INFO("after SIGTERM: " << (status ? status->describe() : "still running after 10 s")
                           << " in "
                           << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                           << " ms\n--- server stderr ---\n"
                           << server->stderr_text());
    REQUIRE(status.has_value());
    CHECK(status->clean());

    // The waiting client: its response with Connection: close, or a clean close.
    std::optional<Response> r;
    try {
        r = a.read_response_or_eof();
    } catch (const std::runtime_error& e) {
        FAIL("the client waiting on the query: " << e.what());
    }
    if (r) {
        INFO("its response: " << r->describe());
        CHECK(r->header("Connection").value_or("(none)") == "close");
        CHECK_FALSE(r->keep_alive);
        const Connection::Closed closed = a.expect_closed(5s);
        INFO("then the connection was " << closed.describe());
        CHECK(closed.how == Connection::End::eof);
    }
    locker.exec("ROLLBACK");
}
