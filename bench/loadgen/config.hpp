// What one load run does: the target, the requests (one URL or a mix), the
// load shape and the checks, parsed from a wrk-style command line (CLI11).
#pragma once

#include <chrono>
#include <cstddef>
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

// One request of the mix: a URL given on the command line, or a line of
// --urls FILE with its own method and headers.
struct Request {
    Target target;
    std::string method;                // the line's own, else -m
    std::vector<std::string> headers;  // -H, then the line's own ("Name: value")
};

// A request of a --urls file as written: `method` empty when the line names
// none, `headers` the line's own only.
struct RequestLine {
    std::string method;
    std::string url;
    std::vector<std::string> headers;
    std::size_t line = 0;  // 1-based, for messages
};

// Parses the text of a --urls file (`name` is the file's name, for
// messages). One request per line: "[METHOD] URL"; the indented lines after
// it are its headers, "Name: value" each; '#' starts a comment line; blank
// lines are skipped; a CR before the LF is ignored. Throws
// std::invalid_argument("NAME:LINE: reason").
std::vector<RequestLine> parse_request_lines(std::string_view text, std::string_view name);

// Why `header` is not a request header "Name: value", or "" when it is one.
std::string header_problem(std::string_view header);

// At most this many URLs in a mix: each has its own latency histogram in
// every load thread (147 KiB: 1 us to 60 s at 3 significant digits), so 64
// cost 9.4 MiB a thread; mixes are a handful of URLs.
inline constexpr std::size_t kMaxUrls = 64;

// "10", "10s", "1.5s", "500ms", "2m", "1h"; throws std::invalid_argument.
std::chrono::nanoseconds parse_duration(std::string_view text);

// --start-at: "1764907200.25", seconds since the epoch with an optional
// fraction (digits beyond nanoseconds are ignored), as nanoseconds since the
// epoch. `now_ns` is CLOCK_REALTIME now. Throws std::invalid_argument for a
// malformed time, one before 2000 or more than kStartAtHorizon after now
// (seconds mistaken for another unit).
std::int64_t parse_start_at(std::string_view text, std::int64_t now_ns);
inline constexpr std::chrono::hours kStartAtHorizon{1};
inline constexpr std::int64_t kYear2000Ns = 946'684'800'000'000'000;  // 2000-01-01T00:00:00Z

// --hlog-interval is at least this: each interval costs every load thread a
// copy of its counts.
inline constexpr std::chrono::milliseconds kMinHlogInterval{10};

// How the load threads do their I/O (--engine).
enum class Engine : std::uint8_t {
    automatic,  // uring when the start-up probe of io_uring works here, else epoll
    epoll,      // one epoll loop per thread, a read() and a send() per batch
    uring,      // one io_uring per thread: multishot recv, one io_uring_enter per loop
};

// "auto", "epoll", "uring".
std::string_view engine_name(Engine engine) noexcept;

struct Config {
    Target target;                  // the first URL: where every connection goes
    std::vector<Request> requests;  // the mix (at least one), all on target's host and port
    std::size_t connections = 10;
    unsigned threads = 2;
    // The measured time; with -n the time limit (none when -d is not given).
    std::chrono::nanoseconds duration = std::chrono::seconds(10);
    bool time_limited = true;         // false: -n without -d
    std::uint64_t request_count = 0;  // -n: stop after this many responses (0: no -n)
    std::chrono::nanoseconds warmup{0};
    std::chrono::nanoseconds timeout = std::chrono::seconds(2);
    unsigned pipeline = 1;
    double rate = 0;  // requests/s over all threads; 0: closed loop
    std::string method = "GET";
    std::vector<std::string> headers;  // "Name: value"
    std::string body;
    std::optional<std::string> expect_body;
    std::optional<std::string> expect_json;
    std::string urls_file;  // --urls FILE, as given
    std::string json_path;  // "-": stdout
    std::string hlog_path;  // --hlog: HdrHistogram interval log ("-": stdout)
    std::chrono::nanoseconds hlog_interval = std::chrono::seconds(1);
    std::string hgrm_path;  // --hgrm: HdrHistogram percentile distribution ("-": stdout)
    // --start-at: when the warm-up begins, CLOCK_REALTIME ns since the epoch.
    std::optional<std::int64_t> start_at_ns;
    bool latency_table = false;  // --latency: a percentile table in the text output
    std::vector<int> cpus;       // pin thread i to cpus[i % size]
    bool quiet = false;          // no progress or text summary, only errors (and --json)
    bool announce = false;  // print the run's schedule (CLOCK_MONOTONIC) before the load starts
    Engine engine = Engine::automatic;
    std::vector<std::string> argv;  // the command line, for the JSON record

    [[nodiscard]] bool open_loop() const noexcept { return rate > 0; }
    // -n: the run stops after request_count responses.
    [[nodiscard]] bool counted() const noexcept { return request_count > 0; }
    [[nodiscard]] bool mix() const noexcept { return requests.size() > 1; }
    // A document goes to stdout (--json -, --hlog -, --hgrm -): the text
    // summary and --announce's lines go to stderr.
    [[nodiscard]] bool stdout_taken() const noexcept {
        return json_path == "-" || hlog_path == "-" || hgrm_path == "-";
    }
};

// How long a run must be for the progress line: shorter runs end before a
// line a second would say much.
inline constexpr std::chrono::seconds kProgressMinRun{3};

// Whether the run shows a progress line on stderr: stderr is a terminal, no
// --quiet, and the run takes kProgressMinRun or more (warm-up included) or
// has -n (its length is unknown).
bool wants_progress(const Config& config, bool stderr_is_terminal) noexcept;

struct ParsedConfig {
    std::optional<Config> config;  // empty: exit with exit_code
    int exit_code = 0;
};

// Parses the command line; prints --help or a clear error itself.
ParsedConfig parse_config(int argc, const char* const* argv);

// One request as it goes on the wire (Host, the -H headers and the line's
// own, Content-Length when there is a body).
std::string render_request(const Config& config, const Request& request);
// The first request of the mix (a Config built by hand without requests:
// its target, method and headers).
std::string render_request(const Config& config);

}  // namespace sm::loadgen
