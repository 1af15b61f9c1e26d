// bench/floor: the real binaries, floor (epoll) and floor-uring (io_uring),
// one run of these cases each: $SM_FLOOR names the floor under test (ctest
// sets it; run by hand: floor). A floor parses nothing, yet its two canned
// answers must be exactly server-epoll's (Date aside: the floor's is frozen
// at start), chosen by the request's first bytes ("GET /json " or
// "GET /json?" gets /json, anything else /plaintext), in order, however the
// requests are pipelined or split across writes. Where io_uring is refused,
// floor-uring's run is skipped as a whole (exit 77, "skipped" in ctest).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "support/http_client.hpp"
#include "support/io_uring_check.hpp"
#include "support/ring_growth.hpp"
#include "support/server_process.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace std::chrono_literals;

namespace {

constexpr std::string_view kPlaintextBody = "Hello, World!";
constexpr std::string_view kJsonBody = R"({"message":"Hello, World!"})";

// The floor under test: $SM_FLOOR, "floor" or "floor-uring".
const std::string& floor_name() {
    static const std::string name = [] {
        const char* value = std::getenv("SM_FLOOR");
        const std::string n = value != nullptr && *value != '\0' ? value : "floor";
        if (n != "floor" && n != "floor-uring")
            throw std::runtime_error("SM_FLOOR=" + n + ": expected floor or floor-uring");
        return n;
    }();
    return name;
}

const char* floor_binary() {
#ifdef SM_FLOOR_URING_BINARY
    if (floor_name() == "floor-uring") return SM_FLOOR_URING_BINARY;
#endif
    if (floor_name() != "floor") throw std::runtime_error(floor_name() + " is not built");
    return SM_FLOOR_BINARY;
}

const bool uring_checked = [] {
    if (floor_name() == "floor-uring") exit_skipped_unless_io_uring("floor-uring");
    return true;
}();

ServerProcess start(const char* binary) {
    return ServerProcess(binary, {"--address", "127.0.0.1", "--port", "0", "--threads", "1"});
}

// The response's bytes with its Date value blanked out.
std::string without_date(std::string raw) {
    const std::string_view name = "\r\nDate: ";
    const auto at = raw.find(name);
    if (at == std::string::npos) return raw;
    const auto end = raw.find("\r\n", at + name.size());
    if (end == std::string::npos) return raw;
    return raw.replace(at + name.size(), end - at - name.size(), "(date)");
}

std::string get(std::string_view target) {
    return "GET " + std::string(target) + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
}

}  // namespace

TEST_CASE("floor answers /plaintext and /json with server-epoll's bytes, Date aside", "[floor]") {
    ServerProcess floor = start(floor_binary());
    ServerProcess epoll = start(SM_SERVER_EPOLL_BINARY);
    Connection to_floor(floor.host(), floor.port());
    Connection to_epoll(epoll.host(), epoll.port());
    for (const std::string_view target : {"/plaintext", "/json", "/json?x=1"}) {
        const Response mine = to_floor.request(get(target));
        const Response model = to_epoll.request(get(target));
        INFO(target << "\n--- " << floor_name() << " ---\n" << mine.raw << "\n--- server-epoll ---\n" << model.raw);
        CHECK(mine.status == 200);
        CHECK(without_date(mine.raw) == without_date(model.raw));
        CHECK(mine.header("Date").has_value());
    }
    CHECK(floor.stop().clean());
}

TEST_CASE("floor gives the JSON answer only to GET /json and GET /json?query", "[floor]") {
    struct Case {
        std::string request;
        bool json;
    };
    const auto c = GENERATE(
        Case{get("/json"), true}, Case{get("/json?a=b"), true},
        Case{"GET /json HTTP/1.0\r\n\r\n", true}, Case{get("/plaintext"), false},
        Case{get("/jsonx"), false}, Case{get("/jso"), false}, Case{get("/"), false},
        Case{get("/other/json"), false},
        Case{"POST /json HTTP/1.1\r\nContent-Length: 0\r\n\r\n", false},
        Case{"HEAD /json HTTP/1.1\r\n\r\n", false}, Case{"get /json HTTP/1.1\r\n\r\n", false});
    ServerProcess floor = start(floor_binary());
    Connection conn(floor.host(), floor.port());
    const Response r = conn.request(c.request);
    INFO(c.request << "\n--- answer ---\n" << r.raw);
    CHECK(r.status == 200);
    CHECK(r.body == (c.json ? kJsonBody : kPlaintextBody));
    CHECK(r.header("Content-Type") == (c.json ? "application/json" : "text/plain"));
}

TEST_CASE("floor answers pipelined and split requests in order", "[floor]") {
    ServerProcess floor = start(floor_binary());
    Connection conn(floor.host(), floor.port());
    const std::string stream = get("/json") + get("/plaintext") + get("/json?x") + get("/jsonx") +
                               get("/json") + get("/json");
    const std::vector<std::string_view> expected = {kJsonBody,      kPlaintextBody, kJsonBody,
                                                    kPlaintextBody, kJsonBody,      kJsonBody};
    SECTION("in one write") {
        conn.send(stream);
    }
    SECTION("a byte per write") {
        // Every boundary is split: inside "GET /json", before its space,
        // and inside the blank line.
        for (const char ch : stream)
            conn.send(std::string_view(&ch, 1));
    }
    SECTION("split in the request's first bytes and in the blank line") {
        const std::string_view s = stream;
        // get("/json") is 39 bytes: its blank line is bytes 35-38, and the
        // next request's "GET" 39-41.
        const std::size_t cuts[] = {3, 9, 36, 38, 41};
        std::size_t from = 0;
        for (const std::size_t cut : cuts) {
            conn.send(s.substr(from, cut - from));
            from = cut;
        }
        conn.send(s.substr(from));
    }
    const std::vector<Response> answers = conn.read_responses(expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        INFO("answer " << i << ":\n" << answers[i].raw);
        CHECK(answers[i].body == expected[i]);
    }
}

TEST_CASE("floor --help says which requests get the JSON answer", "[floor]") {
    const RunResult r = run_to_exit(floor_binary(), {"--help"});
    INFO(r.out << r.err);
    CHECK(r.status.clean());
    CHECK(r.out.find("GET /json") != std::string::npos);
    CHECK(r.out.find("/plaintext") != std::string::npos);
}

TEST_CASE("floor under loadgen: /json passes --expect-json, /plaintext --expect-body", "[floor]") {
    struct Case {
        const char* path;
        const char* option;
        std::string_view body;
    };
    const auto c = GENERATE(Case{"/json", "--expect-json", kJsonBody},
                            Case{"/plaintext", "--expect-body", kPlaintextBody});
    ServerProcess floor = start(floor_binary());
    const std::string url =
        "http://127.0.0.1:" + std::to_string(floor.port()) + std::string(c.path);
    const RunResult r = run_to_exit(
        SM_LOADGEN_BINARY,
        {"-t1", "-c4", "-d", "300ms", "--pipeline", "4", c.option, std::string(c.body), url}, 20s);
    INFO(url << "\nstatus: " << r.status.describe() << "\n" << r.out << r.err);
    CHECK(r.status.clean());
    CHECK(r.out.find("Errors: none") != std::string::npos);
    CHECK(r.out.find("Status: 2xx") != std::string::npos);
}

TEST_CASE("floor --spin-ns holds every response back that long, and still answers each one",
          "[floor]") {
    // A lower bound only (a busy wait of 5 ms per response cannot end
    // sooner on the monotonic clock): three pipelined requests in one write
    // take at least 15 ms, and the answers are the plain floor's.
    ServerProcess floor(floor_binary(), {"--address", "127.0.0.1", "--port", "0", "--threads", "1",
                                         "--spin-ns", "5000000"});
    Connection conn(floor.host(), floor.port());
    const auto t0 = std::chrono::steady_clock::now();
    conn.send(get("/plaintext") + get("/json") + get("/plaintext"));
    const std::vector<Response> answers = conn.read_responses(3);
    const auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE(answers.size() == 3);
    CHECK(answers[0].body == kPlaintextBody);
    CHECK(answers[1].body == kJsonBody);
    CHECK(answers[2].body == kPlaintextBody);
    CHECK(took >= 15ms);
    CHECK(floor.stop().clean());
}

TEST_CASE("floor --spin-ns refuses what is not a count of nanoseconds up to 10 ms", "[floor]") {
    const auto bad = GENERATE(as<std::string>{}, "-1", "abc", "10000001");
    const RunResult r = run_to_exit(floor_binary(), {"--port", "0", "--spin-ns", bad});
    INFO(bad << "\n" << r.out << r.err);
    CHECK(r.status.code == 2);
    CHECK(r.err.find("--spin-ns") != std::string::npos);
}

TEST_CASE("floor answers what came before the client's half-close, then closes", "[floor]") {
    ServerProcess floor = start(floor_binary());
    // The descriptors with one connection open, once the worker is up
    // (after an answer); that connection stays open to the end.
    Connection first(floor.host(), floor.port());
    REQUIRE(first.request(get("/plaintext")).body == kPlaintextBody);
    const std::size_t at_rest = floor.open_fd_count();
    {
        Connection conn(floor.host(), floor.port());
        conn.send(get("/json") + get("/plaintext"));
        conn.shutdown_write();
        const std::vector<Response> answers = conn.read_responses(2);
        CHECK(answers[0].body == kJsonBody);
        CHECK(answers[1].body == kPlaintextBody);
        const Connection::Closed closed = conn.expect_closed();
        INFO("then the connection was " << closed.describe());
        CHECK(closed.how == Connection::End::eof);
    }
    INFO(floor.describe_fds());
    CHECK(eventually([&] { return floor.open_fd_count() == at_rest; }, 5s));
    CHECK(floor.stop().clean());
}

TEST_CASE("floor-uring's provided-buffer ring grows, resident, as server-uring's does",
          "[floor-uring]") {
    // The floor reads below the model only if its I/O shape is the same: a
    // ring left at its first 32 buffers would make bursts wait for the next
    // batch where server-uring's grows.
    ServerProcess floor(floor_binary(), {"--address", "127.0.0.1", "--port", "0", "--threads", "1",
                                         "--uring-buffers", "4096"});
    const RingGrowth g = grow_ring(floor, "/plaintext");
    INFO("floor-uring RSS " << g.at_rest_kib << " KiB after one request, " << g.loaded_kib
                            << " KiB after bursts of 256 connections");
    CHECK(g.loaded_kib >= g.at_rest_kib + kFirstRingBuffers * kRingBufferKiB);
    CHECK(g.loaded_kib < g.at_rest_kib + 4096 * kRingBufferKiB);
}

// floor-uring only: the probe is server-uring's. SM_DENY_IO_URING_BINARY runs
// a command under a seccomp filter that denies io_uring, as a container's
// default profile does.
#ifdef SM_DENY_IO_URING_BINARY
namespace {

// The line of `err` that says why io_uring is unavailable, without the
// program's name before it and the way out after it.
std::string refusal(const std::string& err) {
    std::istringstream in(err);
    std::string line;
    while (std::getline(in, line)) {
        const auto at = line.find("io_uring unavailable");
        if (at != std::string::npos) return line.substr(at, line.find("; ", at) - at);
    }
    return {};
}

}  // namespace

TEST_CASE("floor-uring exits 1 with server-uring's reason when a seccomp filter denies io_uring",
          "[floor-uring]") {
    const std::vector<std::string> args = {"--address", "127.0.0.1", "--port", "0"};
    std::vector<std::string> floor_cmd = {floor_binary()}, server_cmd = {SM_SERVER_URING_BINARY};
    floor_cmd.insert(floor_cmd.end(), args.begin(), args.end());
    server_cmd.insert(server_cmd.end(), args.begin(), args.end());
    const RunResult mine = run_to_exit(SM_DENY_IO_URING_BINARY, floor_cmd);
    const RunResult model = run_to_exit(SM_DENY_IO_URING_BINARY, server_cmd);
    INFO("floor-uring " << mine.status.describe() << "\nstdout:\n"
                        << mine.out << "\nstderr:\n"
                        << mine.err << "\nserver-uring " << model.status.describe()
                        << "\nstderr:\n"
                        << model.err);
    CHECK(mine.status.exited);
    CHECK(mine.status.code == 1);
    CHECK(mine.out.find("listening on") == std::string::npos);
    const std::string why = refusal(mine.err);
    CHECK_THAT(why, Catch::Matchers::Contains("io_uring_setup") &&
                        Catch::Matchers::Contains("Operation not permitted") &&
                        Catch::Matchers::Contains("seccomp"));
    CHECK(why == refusal(model.err));
    // Its own way out: the epoll floor.
    CHECK_THAT(mine.err, Catch::Matchers::Contains("floor (bench/floor, on epoll)"));
}
#endif
