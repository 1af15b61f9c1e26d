// Options shared by every server model: one parser (CLI11), one --help, the
// same names and defaults everywhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/limits.hpp"
#include "http/response.hpp"
#include "runtime/models.hpp"

namespace sm::runtime {

struct ServerOptions {
    std::string address = "0.0.0.0";
    std::uint16_t port = 8080;
    unsigned threads = 0;   // resolved to the CPUs this process may run on
    std::vector<int> cpus;  // pin thread i to cpus[i % size]; empty: no pinning
    http::ResponseMode mode = http::ResponseMode::composed;
    int backlog = 4096;  // the kernel clamps it to net.core.somaxconn (4096 since Linux 5.4)
    http::Limits limits;
    // After SIGINT/SIGTERM: how long responses in flight may take to finish.
    std::chrono::milliseconds shutdown_timeout{5000};
    // After an error response or "Connection: close": how long to keep reading
    // (and discarding) so the client receives the response instead of a reset.
    std::chrono::milliseconds linger_timeout{2000};
    // A keep-alive connection with no request in progress is closed after this.
    // nginx: 75 s, Kestrel: 130 s, h2o: 10 s, Node.js: 5 s.
    std::chrono::milliseconds idle_timeout{60000};
    // A request head must be complete this long after its first byte, however
    // the bytes trickle in (slowloris); past it: 408 and close.
    // nginx client_header_timeout: 60 s, Node.js headersTimeout: 60 s,
    // Kestrel RequestHeadersTimeout: 30 s.
    std::chrono::milliseconds header_timeout{30000};
    // A connection whose reading is paused because the client does not take
    // its responses is closed when no byte of output was accepted for this
    // long (no idle or head deadline runs against it meanwhile).
    // nginx send_timeout: 60 s.
    std::chrono::milliseconds send_timeout{60000};
    // --output-mark: output one connection may hold rendered (collected,
    // unsent or in flight) before its session defers the next responses
    // (http/session.hpp) and reading it pauses: with the response that
    // crosses it and its deferred answers (a few bytes), what a client that
    // pipelines without reading costs the server. A read batch's responses
    // leave in one write up to this size (a 16-deep pipeline of /plaintext is
    // ~2 KiB, 256 deep ~35 KiB); a flood's leave in writes of this size.
    std::size_t output_mark = 32 * 1024;
    // Connections open at once, over all threads; beyond it new connections
    // wait in the listen backlog until one closes.
    std::size_t max_connections = 10000;
    // --db: the libpq connection string of the workloads' PostgreSQL; empty:
    // /db and /queries answer 503 saying so.
    std::string db;
    // --db-connections: database connections per thread, where the model
    // can use more than one (its event loop multiplexes them); at most
    // kMaxDbConnections.
    unsigned db_connections = 1;
    // --fortunes: where /fortunes takes its rows from (database by default
    // when --db is given).
    http::FortuneSource fortunes = http::FortuneSource::memory;
    [[nodiscard]] http::Workloads workloads() const noexcept {
        return {!db.empty(), fortunes};
    }
    // The values of the model's own options (Model::options), by name.
    std::vector<std::pair<std::string, unsigned long>> model_values;

    // The value of the model's option `name` ("queue-size"); throws
    // std::out_of_range for a name the model did not declare.
    [[nodiscard]] unsigned long model_option(std::string_view name) const;
};

// An option only one model takes, declared by that model (Model::options):
// a whole number with a default and a range, shown in the model's --help.
struct ModelOption {
    std::string_view name;  // without the dashes: "queue-size"
    std::string_view help;
    unsigned long value;  // the default
    unsigned long min = 1;
    unsigned long max = 1ul << 20;
    bool power_of_two = false;
};

struct ParsedOptions {
    std::optional<ServerOptions> options;  // empty: exit with exit_code
    int exit_code = 0;
};

// Parses the command line of a server binary. Prints --help or a clear error
// (and the usage hint) itself; the caller exits with exit_code when no options.
ParsedOptions parse_server_options(std::string_view program, std::string_view description,
                                   std::span<const ModelOption> extra, int argc,
                                   const char* const* argv);

}  // namespace sm::runtime
