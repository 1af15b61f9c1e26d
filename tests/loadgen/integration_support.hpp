// Shared pieces of the loadgen integration suite: running the loadgen binary
// (to completion or in the background) with its JSON report in a temporary
// file, checking that report's sums, starting server-epoll, and small
// misbehaving HTTP servers run in a thread.
//
// The binaries come from SM_LOADGEN_BINARY and SM_SERVER_EPOLL_BINARY: the
// environment variables of those names, else the paths CMake compiled in.
#pragma once

#include <simdjson.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/server_process.hpp"

namespace sm::test::loadgen {

using namespace std::chrono_literals;

const std::string& loadgen_binary();
const std::string& server_epoll_binary();

// The engine the suite runs loadgen with: $SM_LOADGEN_ENGINE ("epoll" or
// "uring"; ctest registers the suite once per engine), passed as --engine by
// run_loadgen() and BackgroundLoadgen. "" (unset): loadgen's default.
const std::string& loadgen_engine();

// `args` with `--engine loadgen_engine()` in front (when the suite has one):
// for tests that run the binary themselves.
std::vector<std::string> with_engine(const std::vector<std::string>& args);

// The launcher that denies io_uring (tests/conformance/deny_io_uring.cpp):
// $SM_DENY_IO_URING, else the path CMake compiled in; "" if neither.
std::string deny_io_uring_launcher();

// server-epoll on 127.0.0.1 (or `address`), a free port, one thread.
std::unique_ptr<ServerProcess> start_epoll(const std::string& address = "127.0.0.1");

// "http://127.0.0.1:PORT/path", "http://[::1]:PORT/path".
std::string url_of(const std::string& host, std::uint16_t port, std::string_view path);
std::string url_of(const ServerProcess& server, std::string_view path);

// A file name under $TMPDIR (or /tmp), removed by the destructor.
class TempFile {
  public:
    TempFile();
    ~TempFile();
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    [[nodiscard]] const std::string& path() const noexcept { return path_; }
    // The whole content; empty when the file is missing or empty.
    [[nodiscard]] std::string read() const;

  private:
    std::string path_;
};

// A parsed JSON report. Values are looked up by JSON pointer ("/errors/read");
// a missing key or a value of another type throws std::runtime_error naming
// the pointer, so a test fails with a clear message instead of crashing.
class Report {
  public:
    // Throws std::runtime_error (with the text) when `text` is not JSON.
    explicit Report(std::string text);

    [[nodiscard]] const std::string& text() const noexcept { return text_; }
    [[nodiscard]] simdjson::dom::element root() const noexcept { return root_; }
    [[nodiscard]] bool has(std::string_view pointer) const;
    [[nodiscard]] simdjson::dom::element at(std::string_view pointer) const;
    [[nodiscard]] std::uint64_t count(std::string_view pointer) const;  // a non-negative integer
    [[nodiscard]] double number(std::string_view pointer) const;        // any number
    [[nodiscard]] std::string string(std::string_view pointer) const;
    [[nodiscard]] bool boolean(std::string_view pointer) const;
    [[nodiscard]] bool is_null(std::string_view pointer) const;

  private:
    std::string text_;
    std::unique_ptr<simdjson::dom::parser> parser_;
    simdjson::dom::element root_;
};

// The error classes of the report, in the README's order.
inline constexpr std::string_view kErrorClasses[] = {"connect",   "read",    "write", "timeout",
                                                     "malformed", "non_2xx", "body"};
inline constexpr std::string_view kStatusClasses[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};

// One finished loadgen run.
struct Run {
    std::string command;  // for messages
    RunResult result;
    std::string json_text;         // what --json wrote ("" if nothing)
    std::optional<Report> report;  // json_text parsed, if it is JSON

    [[nodiscard]] bool exited_with(int code) const noexcept {
        return result.status.exited && !result.status.timed_out && result.status.code == code;
    }
    // The report; fails the test (REQUIRE) if there is none.
    [[nodiscard]] const Report& json() const;
    // Sum of every error class.
    [[nodiscard]] std::uint64_t total_errors() const;
    // Command, exit status, stdout, stderr and the JSON, for INFO().
    [[nodiscard]] std::string describe() const;
};

// Runs `loadgen --json FILE [--engine E] args...` to completion, killed after
// `timeout` (E: loadgen_engine()).
Run run_loadgen(const std::vector<std::string>& args, std::chrono::milliseconds timeout = 20s);

// Runs `launcher loadgen --json FILE args...` (no --engine added) to
// completion; without a launcher (""), loadgen itself.
Run run_loadgen_under(const std::string& launcher, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout = 20s);

// loadgen --json FILE args... started in the background (to be interrupted,
// or to outlive its server).
class BackgroundLoadgen {
  public:
    explicit BackgroundLoadgen(const std::vector<std::string>& args);
    [[nodiscard]] BackgroundProcess& process() noexcept { return *process_; }
    // Waits up to `timeout` (then kills it) and collects the run.
    Run finish(std::chrono::milliseconds timeout);

  private:
    TempFile json_;
    std::string command_;
    std::unique_ptr<BackgroundProcess> process_;
};

// Checks (CHECK, so every mismatch is listed) the sums a schema cannot: the
// status classes 2xx..5xx add up to `requests` and latency.count equals it,
// every error class with a count has its first message, latency_uncorrected
// is there exactly with --rate, the URLs of the mix add up to the totals
// (their errors at most: a connect error belongs to no URL), and with -n no
// more than N were sent. A missing key or one of another type throws (see
// Report). The report's structure and types are bench/loadgen/
// results.schema.json's to check (ctest loadgen:results_schema). The caller
// shows the report (Run::describe()).
void check_consistency(const Report& report);

// A line of `text`, without its leading blanks, starts with `prefix`.
bool has_line_starting(std::string_view text, std::string_view prefix);

// A port on 127.0.0.1 that is bound but never listens: connecting to it is
// refused, and no other process can take it while this object lives.
class RefusingPort {
  public:
    RefusingPort();
    ~RefusingPort();
    RefusingPort(const RefusingPort&) = delete;
    RefusingPort& operator=(const RefusingPort&) = delete;
    [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

  private:
    int fd_ = -1;
    std::uint16_t port_ = 0;
};

// A small HTTP server that misbehaves on purpose, run by one thread polling
// its listener (127.0.0.1, a free port) and connections. Requests are heads
// without bodies ("...\r\n\r\n"); each one gets the Behavior's reply. The
// thread stops when the object is destroyed, and after one minute at most.
class MisbehavingServer {
  public:
    struct Reply {
        // Sent one send() each (TCP_NODELAY), so a response can arrive in pieces.
        std::vector<std::string> pieces;
        // After the reply: shut down the sending side (the client sees EOF),
        // ignore further requests and close once the client has closed.
        bool close_after = false;
    };
    struct Behavior {
        // Close every connection as soon as it is accepted.
        bool close_on_accept = false;
        // The reply to request n (from 0) of a connection; empty: read
        // requests but never answer.
        std::function<Reply(std::size_t n)> reply = {};
        // When set, used instead of `reply`: also given the request's target
        // ("/plaintext"), for a mix.
        std::function<Reply(std::size_t n, std::string_view target)> reply_to = {};
        // Hold every answer until this many connections have each sent a
        // request (then answer as usual): with a shared -n budget, no
        // connection can be answered, and so take the next requests, before
        // the others have started. 0: answer at once.
        std::size_t answer_after = 0;
    };

    // A 200 "Hello, World!" response (server-epoll's /plaintext without Date).
    static const std::string kOk;
    // Every request answered with kOk.
    static Behavior answering_ok();
    // `whole` answers with kOk on each connection, then half of the next
    // response and a close (the client sees EOF with a request unanswered).
    static Behavior closing_mid_response(std::size_t whole);

    explicit MisbehavingServer(Behavior behavior);
    ~MisbehavingServer();
    MisbehavingServer(const MisbehavingServer&) = delete;
    MisbehavingServer& operator=(const MisbehavingServer&) = delete;

    [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
    [[nodiscard]] std::string url(std::string_view path = "/") const;
    [[nodiscard]] std::size_t accepted() const noexcept { return accepted_.load(); }
    [[nodiscard]] std::size_t requests() const noexcept { return requests_.load(); }
    // The request targets each connection sent, in order: one list per
    // accepted connection, in the order they were accepted.
    [[nodiscard]] std::vector<std::vector<std::string>> targets() const;

  private:
    void serve(const std::stop_token& stop);

    Behavior behavior_;
    mutable std::mutex targets_mutex_;
    std::vector<std::vector<std::string>> targets_;
    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<std::size_t> accepted_{0};
    std::atomic<std::size_t> requests_{0};
    std::jthread thread_;
};

}  // namespace sm::test::loadgen
