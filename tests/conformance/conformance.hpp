// Shared pieces of the conformance suite. The suite runs unchanged against
// every model binary: ctest passes the binary and the model's name in
// SM_SERVER_BINARY and SM_MODEL (see CMakeLists.txt).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/http_client.hpp"
#include "support/server_process.hpp"

namespace sm::test::conformance {

using namespace std::chrono_literals;

struct Target {
    std::string binary;  // SM_SERVER_BINARY
    std::string model;   // SM_MODEL: "epoll"
};

// The binary under test. Throws, saying how to run the suite, when the
// environment does not name one (listing the tests needs no environment).
const Target& target();

// A case that cannot hold for server-iocp.exe under Wine (not a Windows
// limit: Wine's) ends here as skipped, printing why; for every other model
// it does nothing. Each case runs in its own process under ctest, so only
// this case is skipped.
void skip_under_wine(std::string_view why);

// How long a run that should end at once (--help, a refused option) may take
// before it counts as hung. A hang guard, never a timing: a Windows program
// under Wine on a busy machine takes seconds just to start.
inline constexpr std::chrono::milliseconds kExitGuard = 60s;

// Starts the server under test on 127.0.0.1 with a free port (never a fixed
// one), `extra` appended to "--address 127.0.0.1 --port 0".
std::unique_ptr<ServerProcess> start_server(const std::vector<std::string>& extra = {});

// A client connection to `server` (every wait bounded by io_timeout).
Connection connect(const ServerProcess& server, std::chrono::milliseconds io_timeout = 5s,
                   int receive_buffer = 0);

// The server's descriptor count when idle, taken after a few warm-up
// connections (so per-thread resources a model creates lazily are counted)
// once the count has stopped changing. Pair with require_back(). Under Wine
// a server's sockets are wineserver's descriptors, not its own: there it
// counts the connections the server has not closed in the kernel's table
// (ESTABLISHED or CLOSE_WAIT on its port, port_sockets()).
class FdBaseline {
  public:
    explicit FdBaseline(ServerProcess& server);
    [[nodiscard]] std::size_t count() const noexcept { return count_; }
    // Fails the test unless the count returns to the baseline within a few
    // seconds (a lingering close may take a moment). Call after every client
    // of the test has closed.
    void require_back() const;
    // The count now, and what it is made of (for messages).
    [[nodiscard]] std::size_t count_now() const;
    [[nodiscard]] std::string describe() const;

  private:
    ServerProcess& server_;
    std::size_t count_ = 0;
};

// Checks every response must pass: Server: servermodels once, one Date that
// is a valid IMF-fixdate within a few seconds of this machine's clock, one
// Content-Length equal to the body length (or, for HEAD, the body is empty).
void check_common_headers(const Response& r, Expect expect = Expect::body);

// The raw response with the Date field's value replaced by a fixed string.
std::string without_date(std::string_view raw);

inline constexpr std::string_view kPlaintextBody = "Hello, World!";
inline constexpr std::string_view kJsonBody = R"({"message":"Hello, World!"})";
inline constexpr std::string_view kRootBody = "Hello World!";

// Requests as TechEmpower's verifier and load generator send them.
std::string techempower_request(std::string_view target);

// `n` pipelined GETs of `path`.
std::string batch_of(std::size_t n, std::string_view path = "/plaintext");

// The server's stderr, framed, for failure messages.
std::string stderr_of(const ServerProcess& server);

// Fails the test, saying how the server ended, unless it is still running.
// `when` says what had just happened ("after ..."). A `grace` period lets a
// server that is exiting be reaped first (its sockets close before it can
// be), for a better message.
void require_alive(ServerProcess& server, std::string_view when,
                   std::chrono::milliseconds grace = 0ms);

// A new client is answered.
void require_serving(const ServerProcess& server);

// A client receive buffer small enough that responses back up into the server.
inline constexpr int kSmallWindow = 4096;

// Pipelines `chunk` (whole requests) on `c` again and again, from where the
// last send left off, until the server stops reading: its responses have
// filled our receive window and its socket's send buffer, and it holds its
// output mark's worth, so it has paused reading us; requests we cannot even
// send then mean its receive window is closed. Requires that within 10 s.
// Returns the request bytes sent (the last request may be incomplete).
// `c` should have a small receive window (kSmallWindow).
// With Stalled::or_closed, the server may also end the connection before
// that is seen (its --send-timeout shorter than this side's look): a reset
// while sending, or its socket gone, ends it too.
enum class Stalled { required, or_closed };
std::size_t pipeline_until_stalled(ServerProcess& server, Connection& c, std::string_view chunk,
                                   Stalled end = Stalled::required);
// The same with 1024 pipelined GETs of `path` as the chunk.
std::size_t stall_server_writes(ServerProcess& server, Connection& c,
                                std::string_view path = "/plaintext",
                                Stalled end = Stalled::required);

// A wider receive window from now on, to read faster what a stalled server
// has queued (megabytes) while it keeps its send buffer full.
void widen_window(const Connection& c);

}  // namespace sm::test::conformance
