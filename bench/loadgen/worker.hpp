// The engine-independent half of a load thread, shared by the epoll engine
// (engine.cpp) and the io_uring engine (engine_uring.cpp): connection state,
// the fill decision (closed loop, --pipeline, --rate), response handling and
// counting (in total and per URL of the mix), body checks, the -n budget,
// the scan for timeouts and reconnects, server-gone detection, CPU sampling,
// what the progress line reads, and the loop's schedule.
//
// Worker<Io> is a CRTP base: the engine class Io derives from it and supplies
// the I/O, called without a virtual call:
//   void setup();                          // in the thread, before the load starts
//   bool watch(Conn&, std::int64_t now);   // a new socket (false: it failed it)
//   void await_connect(Conn&);             // connect() said EINPROGRESS
//   void on_open(Conn&);                   // connected: start receiving
//   void start_send(Conn&);                // write_ptr/write_left are to be sent
//   void forget(Conn&);                    // the socket is about to be closed
//   void wait_and_dispatch(std::int64_t now, std::int64_t until);
// It reports back through the protected members: consume() for received
// bytes, at_eof(), opened(), fail(), fill().
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/core.h>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "budget.hpp"
#include "config.hpp"
#include "engine.hpp"
#include "framer.hpp"
#include "hdr.hpp"
#include "mix.hpp"
#include "schedule.hpp"

namespace sm::loadgen::detail {

inline std::int64_t now_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline std::string errno_text(int err) {
    return std::strerror(err);
}

inline constexpr std::int64_t kFirstBackoffNs = 10'000'000;  // 10 ms
inline constexpr std::int64_t kMaxBackoffNs = 1'000'000'000;
inline constexpr std::int64_t kGoneAfterNs =
    2'000'000'000;  // no connection and failing connects this long
// Connections opened per round of the event loop at the start.
inline constexpr std::size_t kOpenBatch = 128;

// The response body every 2xx must carry (--expect-body / --expect-json).
class BodyCheck {
  public:
    explicit BodyCheck(const Config& c) {
        if (c.expect_body) {
            kind_ = Kind::exact;
            expected_ = *c.expect_body;
        } else if (c.expect_json) {
            kind_ = Kind::json;
            // parse_config() made sure it is JSON.
            expected_ = minify(*c.expect_json).value_or(std::string_view{});
        }
    }
    [[nodiscard]] bool enabled() const noexcept { return kind_ != Kind::none; }
    // Bytes of body worth keeping to decide.
    [[nodiscard]] std::size_t capture_limit() const noexcept {
        return kind_ == Kind::exact ? expected_.size() + 1 : 1 << 20;
    }
    // Empty if the body is right, else why not. No allocation when it is right.
    std::optional<std::string> check(std::string_view body, std::uint64_t body_bytes,
                                     bool truncated) {
        if (kind_ == Kind::exact) {
            if (!truncated && body_bytes == expected_.size() && body == expected_)
                return std::nullopt;
            return fmt::format("body of {} bytes, expected {} bytes: \"{}\"", body_bytes,
                               expected_.size(), body.substr(0, 64));
        }
        if (truncated)
            return fmt::format("JSON body of {} bytes is over the 1 MiB check limit", body_bytes);
        const auto got = minify(body);
        if (!got) return fmt::format("body is not valid JSON: \"{}\"", body.substr(0, 64));
        if (*got == expected_) return std::nullopt;
        return fmt::format("JSON body {} differs from the expected {}", got->substr(0, 64),
                           expected_.substr(0, 64));
    }
    // Validates `json` and removes whitespace outside strings; the view is
    // valid until the next call. Buffers are reused: no allocation once grown.
    std::optional<std::string_view> minify(std::string_view json) {
        if (padded_.size() < json.size() + simdjson::SIMDJSON_PADDING)
            padded_.resize(json.size() + simdjson::SIMDJSON_PADDING);
        std::copy(json.begin(), json.end(), padded_.begin());
        if (parser_.parse(padded_.data(), json.size(), false).error()) return std::nullopt;
        if (minified_.size() < json.size() + 1) minified_.resize(json.size() + 1);
        std::size_t len = 0;
        if (simdjson::minify(padded_.data(), json.size(), minified_.data(), len))
            return std::nullopt;
        return std::string_view(minified_.data(), len);
    }

  private:
    enum class Kind : std::uint8_t { none, exact, json };
    Kind kind_ = Kind::none;
    std::string expected_;
    simdjson::dom::parser parser_;
    std::vector<char> padded_;
    std::vector<char> minified_;
};

struct Times {
    std::int64_t start = 0;    // load begins (warm-up, if any)
    std::int64_t measure = 0;  // measured window begins
    std::int64_t end = 0;      // and ends
};

// What run_load() gives each load thread.
struct WorkerArgs {
    const Config& config;
    const Endpoint& endpoint;
    const Times& times;
    const std::atomic<bool>& stop;
    std::atomic<bool>& gone;
    const RequestMix& mix;
    RequestBudget* budget;  // -n, else null
    std::size_t connections;
    std::size_t first_connection;  // the index of the thread's first connection over all threads
    double rate;                   // the thread's share of --rate (0: closed loop)
};

// A load thread as run_load() sees it: one virtual call per thread, none per request.
class LoadThread {
  public:
    // What the thread publishes once per round of its loop, for the progress
    // line (relaxed stores to a cache line of its own, read once a second).
    struct alignas(64) Published {
        std::atomic<std::uint64_t> responses{0};  // measured
        std::atomic<std::uint64_t> warmup_responses{0};
        std::atomic<std::uint64_t> errors{0};  // every class, warm-up included
    };

    LoadThread() = default;
    virtual ~LoadThread() = default;
    LoadThread(const LoadThread&) = delete;
    LoadThread& operator=(const LoadThread&) = delete;
    virtual void run() = 0;
    virtual Results& results() noexcept = 0;
    [[nodiscard]] virtual const std::string& gone_message() const noexcept = 0;
    [[nodiscard]] const Published& published() const noexcept { return published_; }

  protected:
    Published published_;
};

// The io_uring engine (engine_uring.cpp, built with liburing); whether it can
// run here, common/uring's probe says.
std::unique_ptr<LoadThread> make_uring_worker(const WorkerArgs& args);

template <class Io>
class Worker : public LoadThread {
  public:
    explicit Worker(const WorkerArgs& a)
        : config_(a.config),
          endpoint_(a.endpoint),
          times_(a.times),
          stop_(a.stop),
          gone_(a.gone),
          mix_(a.mix),
          mixed_(a.mix.size() > 1),
          budget_(a.budget),
          conns_(a.connections),
          schedule_(a.rate > 0 ? a.rate : 1.0, a.connections, a.times.start),
          open_loop_(a.rate > 0),
          body_check_(a.config) {
        results_.urls.resize(mix_.size());
        if (!config_.hlog_path.empty()) {
            intervals_.emplace();
            intervals_->length = std::max<std::int64_t>(config_.hlog_interval.count(), 1);
            intervals_->end = times_.measure + intervals_->length;
        }
        for (std::size_t i = 0; i < conns_.size(); ++i) {
            Conn& c = conns_[i];
            c.index = i;
            // The spread of a mix: request i of connection j (over all
            // threads) goes to URL (i + j) mod U.
            c.next_url = static_cast<std::uint32_t>((a.first_connection + i) % mix_.size());
            c.ring.resize(config_.pipeline);
            c.framer.set_head_requests(mix_.all_head());
            if (body_check_.enabled()) c.framer.set_capture(body_check_.capture_limit());
        }
        scan_interval_ =
            std::clamp<std::int64_t>(config_.timeout.count() / 8, 1'000'000, 50'000'000);
    }
    ~Worker() override {
        for (Conn& c : conns_)
            if (c.fd >= 0) ::close(c.fd);
    }

    void run() final;
    Results& results() noexcept final { return results_; }
    [[nodiscard]] const std::string& gone_message() const noexcept final { return gone_message_; }

  protected:
    struct Slot {
        std::int64_t sent = 0;
        std::int64_t intended = 0;
        std::uint32_t url = 0;  // its request in the mix
    };
    enum class State : std::uint8_t { down, connecting, open };
    struct Conn {
        int fd = -1;
        State state = State::down;
        std::uint32_t generation = 0;  // 24 bits: tags the socket's events / completions
        std::size_t index = 0;
        ResponseFramer framer;
        std::vector<Slot> ring;  // requests in flight, oldest at head
        std::uint32_t head = 0;
        std::uint32_t in_flight = 0;
        std::uint64_t next_k = 0;    // --rate: the connection's next request to send
        std::uint64_t answered = 0;  // responses on the current socket
        std::uint32_t next_url = 0;  // the mix's request it sends next (kept across sockets)
        const char* write_ptr = nullptr;
        std::size_t write_left = 0;  // bytes of a batch not sent yet
        std::int64_t connect_started = 0;
        std::int64_t retry_at = 0;
        std::int64_t backoff = 0;
        bool rdhup = false;        // epoll: the peer shut down its side
        bool unsolicited = false;  // a response arrived with nothing in flight
        // io_uring: operations in flight on the current socket.
        bool recv_armed = false;  // the multishot recv
        bool send_busy = false;   // a send
        bool poll_busy = false;   // the poll that waits for the connect
    };

    Io& io() noexcept { return static_cast<Io&>(*this); }

    [[nodiscard]] bool measuring(std::int64_t t) const noexcept {
        return t >= times_.measure && t < times_.end;
    }
    Counters& counters(bool measured) noexcept {
        return measured ? results_.measured : results_.warmup;
    }
    // -n: every request this thread took from the budget was answered or lost,
    // and the budget has none left.
    [[nodiscard]] bool all_done() const noexcept {
        return budget_ && taken_ == finished_ && budget_->exhausted();
    }
    // -n: a request sent in the measured phase was answered or lost.
    void finished(std::uint64_t n, std::int64_t now) noexcept {
        if (n == 0) return;
        finished_ += n;
        results_.last_done_ns = now;
    }
    // Requests of `c` in flight that were sent in the measured phase (-n's).
    [[nodiscard]] std::uint64_t measured_in_flight(const Conn& c) const noexcept;

    void open(Conn& c, std::int64_t now);
    void opened(Conn& c, std::int64_t now);
    void on_response(Conn& c, const Response& r, std::int64_t now);
    // Frames `data` received on `c`. Returns false when that closed the
    // connection (an error, or a response with `close`): `c` has moved on.
    bool consume(Conn& c, std::string_view data, std::int64_t now);
    // The server closed its side.
    void at_eof(Conn& c, std::int64_t now);
    void fill(Conn& c, std::int64_t now);
    void fail(Conn& c, Error e, std::string_view message, std::int64_t now,
              std::uint64_t count = 1);
    void close_and_reopen(Conn& c, std::int64_t now, bool backoff);
    void scan(std::int64_t now);
    void release_due(std::int64_t now);
    // `url`: the mix's request the error belongs to, kNoUrl for none.
    void note_error(Error e, std::string_view message, bool measured, std::uint64_t count,
                    std::uint32_t url);
    void sample_cpu(bool at_end);
    void publish() noexcept;
    void flush_latency() noexcept {
        if (run_count_) results_.urls[run_url_].latency.record_n(run_value_, run_count_);
        run_count_ = 0;
    }
    // --hlog: a measured response completed at `now`, past the end of the
    // current interval: keeps that interval's counts, starts `now`'s.
    void next_interval(std::int64_t now);
    void take_intervals();

    static constexpr std::uint32_t kNoUrl = ~std::uint32_t{0};

    const Config& config_;
    const Endpoint& endpoint_;
    const Times& times_;
    const std::atomic<bool>& stop_;
    std::atomic<bool>& gone_;
    const RequestMix& mix_;
    const bool mixed_;  // more than one URL: count per URL as requests go and come
    RequestBudget* budget_;
    std::vector<Conn> conns_;
    RateSchedule schedule_;
    bool open_loop_;
    BodyCheck body_check_;
    Results results_;
    std::uint64_t taken_ = 0;     // -n: requests taken from the budget
    std::uint64_t finished_ = 0;  // -n: of those, answered or lost
    std::int64_t scan_interval_ = 0;
    std::int64_t next_scan_ = 0;
    std::uint64_t released_ = 0;  // --rate: requests of the thread handed to connections
    std::size_t open_count_ = 0;
    std::int64_t last_good_ = 0;    // a connection opened or a response arrived
    bool connect_failing_ = false;  // connects failed since last_good_
    std::string gone_message_;
    bool window_started_ = false;
    std::int64_t run_value_ = 0;  // latencies counted but not yet recorded, of one URL
    std::uint32_t run_url_ = 0;
    std::uint64_t run_count_ = 0;
    rusage cpu_start_{};
    // --hlog: the interval being recorded, [end - length, end) of
    // CLOCK_MONOTONIC, number `index` of the measured window.
    struct Intervals {
        std::array<Histogram, 2>
            series;  // the latency (corrected with --rate), uncorrected (--rate)
        std::uint64_t index = 0;
        std::int64_t length = 0;
        std::int64_t end = 0;
    };
    std::optional<Intervals> intervals_;
};

template <class Io>
void Worker<Io>::take_intervals() {
    for (std::uint8_t s = 0; s < 2; ++s)
        if (intervals_->series[s].count())
            results_.intervals.push_back(
                hdr::take_interval(intervals_->series[s], intervals_->index, s));
}

template <class Io>
void Worker<Io>::next_interval(std::int64_t now) {
    take_intervals();
    const auto index = static_cast<std::uint64_t>(std::max<std::int64_t>(now - times_.measure, 0) /
                                                  intervals_->length);
    intervals_->index = index;
    intervals_->end = times_.measure + static_cast<std::int64_t>(index + 1) * intervals_->length;
}

template <class Io>
void Worker<Io>::note_error(Error e, std::string_view message, bool measured, std::uint64_t count,
                            std::uint32_t url) {
    const auto i = static_cast<std::size_t>(e);
    auto& slot = results_.first_error[i];
    if (slot.empty() && measured) slot = std::string(message);
    counters(measured).errors[i] += count;
    if (measured && url != kNoUrl) results_.urls[url].counters.errors[i] += count;
}

template <class Io>
std::uint64_t Worker<Io>::measured_in_flight(const Conn& c) const noexcept {
    std::uint64_t n = 0;
    const auto cap = static_cast<std::uint32_t>(c.ring.size());
    for (std::uint32_t i = 0; i < c.in_flight; ++i)
        n += c.ring[(c.head + i) % cap].sent >= times_.measure ? 1 : 0;
    return n;
}

template <class Io>
void Worker<Io>::publish() noexcept {
    published_.responses.store(results_.measured.requests, std::memory_order_relaxed);
    published_.warmup_responses.store(results_.warmup.requests, std::memory_order_relaxed);
    published_.errors.store(results_.measured.error_total() + results_.warmup.error_total(),
                            std::memory_order_relaxed);
}

template <class Io>
void Worker<Io>::open(Conn& c, std::int64_t now) {
    c.state = State::down;
    c.generation = (c.generation + 1) & 0xffffff;
    c.head = c.in_flight = 0;
    c.answered = 0;
    c.write_left = 0;
    c.rdhup = c.unsolicited = false;
    c.recv_armed = c.send_busy = c.poll_busy = false;
    c.framer.reset();
    const int fd =
        ::socket(endpoint_.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(c, Error::connect, fmt::format("socket: {}", errno_text(errno)), now);
    c.fd = fd;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!io().watch(c, now)) return;
    c.connect_started = now;
    c.state = State::connecting;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&endpoint_.addr), endpoint_.len) == 0)
        return opened(c, now);
    if (errno != EINPROGRESS) return fail(c, Error::connect, errno_text(errno), now);
    io().await_connect(c);
}

template <class Io>
void Worker<Io>::opened(Conn& c, std::int64_t now) {
    c.state = State::open;
    ++open_count_;
    ++results_.opened;
    last_good_ = now;
    connect_failing_ = false;
    io().on_open(c);
    fill(c, now);
}

template <class Io>
void Worker<Io>::fail(Conn& c, Error e, std::string_view message, std::int64_t now,
                      std::uint64_t count) {
    if (e == Error::connect) connect_failing_ = true;
    const bool measured = now >= times_.measure;
    const auto cap = static_cast<std::uint32_t>(c.ring.size());
    if (e == Error::timeout && measured) {
        // Each request in flight timed out: each counts to its own URL.
        note_error(e, message, measured, count, kNoUrl);
        for (std::uint32_t i = 0; i < c.in_flight; ++i)
            ++results_.urls[c.ring[(c.head + i) % cap].url]
                  .counters.errors[static_cast<std::size_t>(e)];
    } else {
        note_error(e, message, measured, count, c.in_flight ? c.ring[c.head].url : kNoUrl);
    }
    // A connection that failed before any answer waits before the next try,
    // so a server that refuses or drops everything is not hammered in a loop.
    close_and_reopen(c, now, e == Error::connect || c.answered == 0);
}

template <class Io>
void Worker<Io>::close_and_reopen(Conn& c, std::int64_t now, bool backoff) {
    if (c.fd >= 0) {
        io().forget(c);  // io_uring: cancels what is in flight on it
        ::close(c.fd);   // epoll: also leaves the epoll set
        c.fd = -1;
    }
    // Events and completions still queued for the socket are stale.
    c.generation = (c.generation + 1) & 0xffffff;
    if (c.state == State::open) --open_count_;
    c.state = State::down;
    // -n: what was in flight is lost (its error, if any, is counted already).
    if (budget_ && c.in_flight) finished(measured_in_flight(c), now);
    c.in_flight = 0;
    c.write_left = 0;
    ++results_.reconnects;
    if (backoff) {
        c.backoff = c.backoff == 0 ? kFirstBackoffNs : std::min(c.backoff * 2, kMaxBackoffNs);
        c.retry_at = now + c.backoff;
    } else {
        c.backoff = 0;
        open(c, now);
    }
}

template <class Io>
void Worker<Io>::fill(Conn& c, std::int64_t now) {
    if (c.state != State::open || c.write_left) return;
    std::uint32_t n;
    if (!open_loop_) {
        if (c.in_flight) return;
        n = config_.pipeline;
    } else {
        const std::uint64_t due = schedule_.due_for(c.index, released_);
        if (due <= c.next_k) return;
        n = static_cast<std::uint32_t>(
            std::min<std::uint64_t>(due - c.next_k, config_.pipeline - c.in_flight));
        if (n == 0) return;
    }
    // -n: after the warm-up, only what the budget gives.
    if (budget_ && now >= times_.measure) {
        n = budget_->take(n);
        if (n == 0) return;
        if (taken_ == 0) results_.first_sent_ns = now;
        taken_ += n;
    }
    const auto cap = static_cast<std::uint32_t>(c.ring.size());
    const auto urls = static_cast<std::uint32_t>(mix_.size());
    const std::uint32_t first_url = c.next_url;
    const bool measured = measuring(now);
    if (mix_.mixed_head() && c.in_flight == 0) c.framer.set_head_requests(mix_.head(first_url));
    for (std::uint32_t i = 0; i < n; ++i) {
        Slot& s = c.ring[(c.head + c.in_flight + i) % cap];
        s.sent = now;
        s.intended = open_loop_ ? schedule_.intended(c.index, c.next_k + i) : now;
        // One URL: slots keep url 0 and its counters are the totals (finish()).
        if (mixed_) {
            s.url = c.next_url;
            if (measured) ++results_.urls[c.next_url].counters.sent;
            if (++c.next_url == urls) c.next_url = 0;
        }
    }
    if (measured) results_.measured.sent += n;
    if (open_loop_) c.next_k += n;
    c.in_flight += n;
    const std::string_view bytes = mix_.batch(first_url, n);
    c.write_ptr = bytes.data();
    c.write_left = bytes.size();
    io().start_send(c);
}

template <class Io>
void Worker<Io>::on_response(Conn& c, const Response& r, std::int64_t now) {
    if (c.in_flight == 0) {
        c.unsolicited = true;
        return;
    }
    const Slot s = c.ring[c.head];
    c.head = (c.head + 1) % static_cast<std::uint32_t>(c.ring.size());
    --c.in_flight;
    ++c.answered;
    last_good_ = now;
    // A mix of HEAD and other requests: the next response's framing depends
    // on its request (set before the framer reads its head).
    if (mix_.mixed_head() && c.in_flight) c.framer.set_head_requests(mix_.head(c.ring[c.head].url));
    // -n counts a response by when its request was sent (after the warm-up:
    // taken from the budget), the duration by when the response came.
    const bool measured = budget_ ? s.sent >= times_.measure : now >= times_.measure;
    if (budget_ && measured) finished(1, now);
    if (now >= times_.end) return;
    Counters& k = counters(measured);
    ++k.requests;
    const int cls = r.status / 100;
    const bool known = cls >= 1 && cls <= 5;
    if (known) ++k.status[static_cast<std::size_t>(cls - 1)];
    if (measured) {
        if (mixed_) {
            Counters& u = results_.urls[s.url].counters;
            ++u.requests;
            if (known) ++u.status[static_cast<std::size_t>(cls - 1)];
        }
        // A pipelined batch answered in one read shares one latency: count
        // equal values of one URL together and record them once (flush_latency()).
        const std::int64_t corrected = now - s.intended;
        if (corrected != run_value_ || s.url != run_url_ || run_count_ == 0) {
            flush_latency();
            run_value_ = corrected;
            run_url_ = s.url;
        }
        ++run_count_;
        if (open_loop_) results_.uncorrected.record(now - s.sent);
        // --hlog: into the interval of the instant it completed, the same
        // responses as the totals.
        if (intervals_) {
            if (now >= intervals_->end) next_interval(now);
            intervals_->series[0].record(corrected);
            if (open_loop_) intervals_->series[1].record(now - s.sent);
        }
    }
    if (cls != 2) {
        note_error(Error::non_2xx, fmt::format("status {}", r.status), measured, 1, s.url);
    } else if (body_check_.enabled()) {
        if (auto why = body_check_.check(r.body, r.body_bytes, r.body_truncated))
            note_error(Error::body, *why, measured, 1, s.url);
    }
}

template <class Io>
bool Worker<Io>::consume(Conn& c, std::string_view data, std::int64_t now) {
    if (now < times_.end) counters(now >= times_.measure).bytes += data.size();
    const auto result = c.framer.feed(data, [&](const Response& r) { on_response(c, r, now); });
    flush_latency();
    if (c.unsolicited) {
        fail(c, Error::malformed, "a response arrived with no request in flight", now);
        return false;
    }
    if (result == ResponseFramer::Result::malformed) {
        std::string context(c.framer.error_context().substr(0, 80));
        for (char& ch : context)
            if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f)
                ch = '.';
        fail(c, Error::malformed, fmt::format("{}: \"{}\"", c.framer.error(), context), now);
        return false;
    }
    if (result == ResponseFramer::Result::closed) {
        close_and_reopen(c, now, false);
        return false;
    }
    return true;
}

template <class Io>
void Worker<Io>::at_eof(Conn& c, std::int64_t now) {
    c.framer.finish([&](const Response& r) { on_response(c, r, now); });
    flush_latency();
    if (c.in_flight > 0)
        return fail(c, Error::read,
                    fmt::format("the server closed the connection with {} request(s) unanswered",
                                c.in_flight),
                    now);
    close_and_reopen(c, now, c.answered == 0);
}

template <class Io>
void Worker<Io>::release_due(std::int64_t now) {
    // --rate: hand the requests that became due to their connections.
    const std::uint64_t due = schedule_.due_count(now);
    if (due <= released_) return;
    const std::uint64_t from = released_;
    released_ = due;
    const std::uint64_t touched = std::min<std::uint64_t>(due - from, conns_.size());
    for (std::uint64_t j = from; j < from + touched; ++j)
        fill(conns_[j % conns_.size()], now);
}

template <class Io>
void Worker<Io>::scan(std::int64_t now) {
    next_scan_ = now + scan_interval_;
    const std::int64_t timeout = config_.timeout.count();
    for (Conn& c : conns_) {
        switch (c.state) {
            case State::connecting:
                if (now - c.connect_started >= timeout)
                    fail(c, Error::connect,
                         fmt::format("connect took longer than --timeout ({} ms)",
                                     timeout / 1'000'000),
                         now);
                break;
            case State::open:
                if (c.in_flight && now - c.ring[c.head].sent >= timeout)
                    fail(c, Error::timeout,
                         fmt::format("no response within --timeout ({} ms)", timeout / 1'000'000),
                         now, c.in_flight);
                break;
            case State::down:
                if (now >= c.retry_at) open(c, now);
                break;
        }
    }
    if (open_count_ == 0 && connect_failing_ && now - last_good_ >= kGoneAfterNs) {
        const auto& why = results_.first_error[static_cast<std::size_t>(Error::connect)];
        gone_message_ = fmt::format(
            "no connection to {} could be opened for {:.1f} s (at {:.2f} s into the run){}{}",
            endpoint_.text, static_cast<double>(now - last_good_) / 1e9,
            static_cast<double>(now - times_.start) / 1e9, why.empty() ? "" : ": ", why);
        gone_.store(true, std::memory_order_relaxed);
    }
}

template <class Io>
void Worker<Io>::sample_cpu(bool at_end) {
    rusage ru{};
    ::getrusage(RUSAGE_THREAD, &ru);
    if (!at_end) {
        cpu_start_ = ru;
        return;
    }
    const auto seconds = [](const timeval& a, const timeval& b) {
        return static_cast<double>(b.tv_sec - a.tv_sec) +
               static_cast<double>(b.tv_usec - a.tv_usec) / 1e6;
    };
    results_.user_s = seconds(cpu_start_.ru_utime, ru.ru_utime);
    results_.sys_s = seconds(cpu_start_.ru_stime, ru.ru_stime);
}

template <class Io>
void Worker<Io>::run() {
    io().setup();
    // Everyone starts together.
    // (--start-at may be up to an hour away: long sleeps until the last
    // millisecond, and a signal ends the wait.)
    for (std::int64_t t = now_ns(); t < times_.start && !stop_.load(std::memory_order_relaxed);
         t = now_ns())
        std::this_thread::sleep_for(std::chrono::nanoseconds(
            std::clamp<std::int64_t>(times_.start - t - 1'000'000, 100'000, 100'000'000)));
    std::int64_t now = now_ns();
    results_.began_ns = now;
    last_good_ = now;
    next_scan_ = now + scan_interval_;
    // Connections open a batch at a time between rounds of the event loop:
    // a connect() costs tens of microseconds, and thousands in one go would
    // leave the first ones unserved (and, past ~15k here, the whole run).
    std::size_t unopened = 0;
    for (Conn& c : conns_)
        c.retry_at = std::numeric_limits<std::int64_t>::max();  // not scan()'s to open
    while (!stop_.load(std::memory_order_relaxed) && !gone_.load(std::memory_order_relaxed)) {
        now = now_ns();
        for (const std::size_t batch_end = std::min(unopened + kOpenBatch, conns_.size());
             unopened < batch_end; ++unopened)
            open(conns_[unopened], now);
        if (!window_started_ && now >= times_.measure) {
            window_started_ = true;
            sample_cpu(false);
        }
        publish();
        if (now >= times_.end || all_done()) break;
        // The next thing due: the end, a scan, the window, a --rate request;
        // nothing while connections remain to be opened.
        std::int64_t until = std::min(times_.end, next_scan_);
        if (unopened < conns_.size()) until = now;
        if (!window_started_) until = std::min(until, times_.measure);
        if (open_loop_) until = std::min(until, schedule_.due_time(released_));
        io().wait_and_dispatch(now, until);
        now = now_ns();
        if (open_loop_) release_due(now);
        if (now >= next_scan_) scan(now);
    }
    now = now_ns();
    if (window_started_) {
        sample_cpu(true);
        results_.measured_s = static_cast<double>(std::min(now, times_.end) - times_.measure) / 1e9;
    }
    results_.stopped_ns = std::min(now, times_.end);
    results_.all_done = all_done();
    results_.open_at_end = open_count_;
    flush_latency();
    if (!mixed_) {
        // One URL: its requests, sends and statuses are the measured totals,
        // not counted twice per request (its errors are counted as they come:
        // a connect error belongs to no URL).
        Counters& u = results_.urls[0].counters;
        u.requests = results_.measured.requests;
        u.sent = results_.measured.sent;
        u.status = results_.measured.status;
    }
    for (const UrlResults& u : results_.urls)
        results_.latency.merge(u.latency);
    if (intervals_) take_intervals();
    publish();
}

}  // namespace sm::loadgen::detail
