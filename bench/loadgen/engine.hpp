// The load engine: one event loop per thread (epoll, or io_uring with
// --engine uring), each with its own connections, requests rendered once,
// responses framed by ResponseFramer, latency recorded into per-thread
// histograms merged at the end. worker.hpp holds the logic both engines
// share; engine.cpp the epoll loop, engine_uring.cpp the io_uring one.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "config.hpp"
#include "histogram.hpp"

namespace sm::loadgen {

enum class Error : std::uint8_t { connect, read, write, timeout, malformed, non_2xx, body };
inline constexpr std::size_t kErrorClasses = 7;
inline constexpr std::array<std::string_view, kErrorClasses> kErrorNames = {
    "connect", "read", "write", "timeout", "malformed", "non_2xx", "body"};

struct Counters {
    std::uint64_t requests = 0;
    std::uint64_t bytes = 0;
    std::array<std::uint64_t, 5> status{};  // 1xx .. 5xx
    std::array<std::uint64_t, kErrorClasses> errors{};

    void merge(const Counters& o) noexcept;
    [[nodiscard]] std::uint64_t error_total() const noexcept;
};

struct Results {
    Counters measured;
    Counters warmup;
    Histogram latency;      // from the write, or from the intended time with --rate
    Histogram uncorrected;  // --rate only: from the actual write
    std::array<std::string, kErrorClasses> first_error;
    std::uint64_t opened = 0;      // connections established
    std::uint64_t reconnects = 0;  // reopened after the server closed or an error
    std::uint64_t open_at_end = 0;
    double user_s = 0;  // the load threads' CPU time inside the measured window
    double sys_s = 0;
    double measured_s = 0;  // length of the measured window actually run

    void merge(const Results& o);
};

enum class Ended : std::uint8_t { completed, server_gone, interrupted };

struct Outcome {
    Results results;
    Ended ended = Ended::completed;
    std::string message;  // why the run ended early
};

// Where the load goes: resolved once, before the run.
struct Endpoint {
    sockaddr_storage addr{};
    socklen_t len = 0;
    std::string text;  // "127.0.0.1:8080" for messages
};

// Resolves the target and opens (and closes) one connection within the
// timeout; throws std::runtime_error("cannot connect to ...: reason").
Endpoint resolve_and_probe(const Config& config);

// The engine to run with: `requested` itself, or for Engine::automatic uring
// when a start-up probe of io_uring works here, else epoll (silently).
// Throws std::runtime_error saying why when uring was asked for explicitly
// and cannot run.
Engine choose_engine(Engine requested);

// Runs the load with config.engine (choose_engine() first, for automatic);
// `stop` set to true by a signal handler ends it early.
Outcome run_load(const Config& config, const Endpoint& endpoint, const std::atomic<bool>& stop);

}  // namespace sm::loadgen
