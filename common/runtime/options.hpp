// Options shared by every server model: one parser (CLI11), one --help, the
// same names and defaults everywhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/limits.hpp"
#include "http/response.hpp"

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
    // Connections open at once, over all threads; beyond it new connections
    // wait in the listen backlog until one closes.
    std::size_t max_connections = 10000;
    // server-threadpool: ready connections waiting for a worker.
    std::size_t queue_size = 1024;
    // server-uring: provided receive buffers per thread (a power of two).
    unsigned uring_buffers = 1024;
};

// Options only some models take; the others do not offer them.
struct ModelOptions {
    bool queue_size = false;
    bool uring_buffers = false;
};

struct ParsedOptions {
    std::optional<ServerOptions> options;  // empty: exit with exit_code
    int exit_code = 0;
};

// Parses the command line of a server binary. Prints --help or a clear error
// (and the usage hint) itself; the caller exits with exit_code when no options.
ParsedOptions parse_server_options(std::string_view program, std::string_view description,
                                   ModelOptions extra, int argc, const char* const* argv);

}  // namespace sm::runtime
