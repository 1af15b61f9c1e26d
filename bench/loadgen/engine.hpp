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
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <optional>

#include "config.hpp"
#include "hdr.hpp"
#include "histogram.hpp"

namespace sm::loadgen {

enum class Error : std::uint8_t { connect, read, write, timeout, malformed, non_2xx, body };
inline constexpr std::size_t kErrorClasses = 7;
inline constexpr std::array<std::string_view, kErrorClasses> kErrorNames = {
    "connect", "read", "write", "timeout", "malformed", "non_2xx", "body"};

struct Counters {
    std::uint64_t requests = 0;  // responses
    std::uint64_t sent = 0;      // requests written
    std::uint64_t bytes = 0;
    std::array<std::uint64_t, 5> status{};  // 1xx .. 5xx
    std::array<std::uint64_t, kErrorClasses> errors{};

    void merge(const Counters& o) noexcept;
    [[nodiscard]] std::uint64_t error_total() const noexcept;
};

// The measured results of one URL of the mix. Errors are those of its
// requests: a timeout, a response that was malformed, non-2xx or had the
// wrong body, the read or write failure of a connection (counted to the
// oldest request in flight on it). A connect error, or a failure with
// nothing in flight, belongs to no URL: it is in the totals only.
struct UrlResults {
    Counters counters;  // bytes: not counted per URL
    Histogram latency;  // as Results::latency
};

struct Results {
    Counters measured;
    Counters warmup;
    // From the write, or from the intended time with --rate: the merge of
    // urls[].latency, made when the thread ends.
    Histogram latency;
    Histogram uncorrected;         // --rate only: from the actual write
    std::vector<UrlResults> urls;  // one per request of the mix, in its order
    // --hlog: the thread's intervals (series 0: latency, 1: uncorrected with
    // --rate), each as the thread recorded it; merge() collects them and the
    // log adds those of the same interval and series.
    std::vector<hdr::IntervalCounts> intervals;
    std::array<std::string, kErrorClasses> first_error;
    std::uint64_t opened = 0;      // connections established
    std::uint64_t reconnects = 0;  // reopened after the server closed or an error
    std::uint64_t open_at_end = 0;
    double user_s = 0;  // the load threads' CPU time inside the measured window
    double sys_s = 0;
    double measured_s = 0;  // length of the measured window actually run
    // -n (CLOCK_MONOTONIC ns, 0: none): the first measured request sent, the
    // last of them answered or lost, when the load stopped; and whether every
    // thread stopped because all N were taken and answered or lost.
    std::int64_t first_sent_ns = 0;
    std::int64_t last_done_ns = 0;
    std::int64_t stopped_ns = 0;
    bool all_done = true;
    // When the load began: the last thread to wake at the start (CLOCK_MONOTONIC ns).
    std::int64_t began_ns = 0;

    void merge(const Results& o);
};

enum class Ended : std::uint8_t { completed, server_gone, interrupted };

// What ended the measured phase of a completed run.
enum class StoppedBy : std::uint8_t {
    duration,  // -d passed (with -n: the time limit came first)
    requests,  // -n: all N requests were sent and answered (or lost to errors)
};

struct Outcome {
    Results results;
    // Wall-clock (CLOCK_REALTIME) instants, ns since the epoch.
    std::int64_t window_start_ns = 0;  // the measured window began (the hlog's BaseTime)
    std::int64_t started_ns = 0;  // the load began (the warm-up, if any): its last thread woke
    std::optional<std::int64_t> start_requested_ns;  // --start-at
    // How long the measured window ran (what the hlog's intervals cover):
    // -d's duration, or to where the load stopped; -n: to the N-th response.
    std::int64_t window_ns = 0;
    Ended ended = Ended::completed;
    StoppedBy stopped_by = StoppedBy::duration;  // when ended == completed
    std::string message;                         // why the run ended early
};

// What the progress line shows, sampled about once a second while the load runs.
struct ProgressSample {
    std::int64_t elapsed_ns = 0;  // since the load started (warm-up included)
    bool warming_up = false;
    std::uint64_t responses = 0;  // measured (during the warm-up: the warm-up's)
    std::uint64_t errors = 0;     // every class, warm-up included
    double per_second = 0;        // responses/s over the last sample
    bool done = false;            // the load has stopped: clear the line
};
using ProgressSink = std::function<void(const ProgressSample&)>;

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
// `stop` set to true by a signal handler ends it early. `progress`, when
// set, is called from this thread about once a second while the load runs,
// and once with done = true when it stops.
Outcome run_load(const Config& config, const Endpoint& endpoint, const std::atomic<bool>& stop,
                 const ProgressSink& progress = {});

}  // namespace sm::loadgen
