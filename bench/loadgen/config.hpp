// What one load run does: the target, the load shape and the checks, parsed
// from a wrk-style command line (CLI11).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sm::loadgen {

struct Target {
    std::string url;   // as given
    std::string host;  // without brackets: "127.0.0.1", "::1", "example"
    std::uint16_t port = 80;
    std::string path = "/";   // path and query
    std::string host_header;  // "127.0.0.1:8080", "[::1]:8080"
};

// "http://HOST[:PORT][/PATH]"; throws std::invalid_argument with the reason.
Target parse_url(std::string_view url);

// "10", "10s", "1.5s", "500ms", "2m", "1h"; throws std::invalid_argument.
std::chrono::nanoseconds parse_duration(std::string_view text);

// How the load threads do their I/O (--engine).
enum class Engine : std::uint8_t {
    automatic,  // uring when the start-up probe of io_uring works here, else epoll
    epoll,      // one epoll loop per thread, a read() and a send() per batch
    uring,      // one io_uring per thread: multishot recv, one io_uring_enter per loop
};

// "auto", "epoll", "uring".
std::string_view engine_name(Engine engine) noexcept;

struct Config {
    Target target;
    std::size_t connections = 10;
    unsigned threads = 2;
    std::chrono::nanoseconds duration = std::chrono::seconds(10);
    std::chrono::nanoseconds warmup{0};
    std::chrono::nanoseconds timeout = std::chrono::seconds(2);
    unsigned pipeline = 1;
    double rate = 0;  // requests/s over all threads; 0: closed loop
    std::string method = "GET";
    std::vector<std::string> headers;  // "Name: value"
    std::string body;
    std::optional<std::string> expect_body;
    std::optional<std::string> expect_json;
    std::string json_path;  // "-": stdout
    std::vector<int> cpus;  // pin thread i to cpus[i % size]
    bool quiet = false;     // no progress or text summary, only errors (and --json)
    bool announce = false;  // print the run's schedule (CLOCK_MONOTONIC) before the load starts
    Engine engine = Engine::automatic;
    std::vector<std::string> argv;  // the command line, for the JSON record

    [[nodiscard]] bool open_loop() const noexcept { return rate > 0; }
};

struct ParsedConfig {
    std::optional<Config> config;  // empty: exit with exit_code
    int exit_code = 0;
};

// Parses the command line; prints --help or a clear error itself.
ParsedConfig parse_config(int argc, const char* const* argv);

// One request as it goes on the wire (Host, the -H headers, Content-Length
// when there is a body).
std::string render_request(const Config& config);

}  // namespace sm::loadgen
