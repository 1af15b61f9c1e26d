#include "engine.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/core.h>
#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "framer.hpp"
#include "runtime/cpu.hpp"
#include "schedule.hpp"

namespace sm::loadgen {

void Counters::merge(const Counters& o) noexcept {
    requests += o.requests;
    bytes += o.bytes;
    for (std::size_t i = 0; i < status.size(); ++i)
        status[i] += o.status[i];
    for (std::size_t i = 0; i < errors.size(); ++i)
        errors[i] += o.errors[i];
}

std::uint64_t Counters::error_total() const noexcept {
    std::uint64_t n = 0;
    for (auto e : errors)
        n += e;
    return n;
}

void Results::merge(const Results& o) {
    measured.merge(o.measured);
    warmup.merge(o.warmup);
    latency.merge(o.latency);
    uncorrected.merge(o.uncorrected);
    for (std::size_t i = 0; i < kErrorClasses; ++i)
        if (first_error[i].empty()) first_error[i] = o.first_error[i];
    opened += o.opened;
    reconnects += o.reconnects;
    open_at_end += o.open_at_end;
    user_s += o.user_s;
    sys_s += o.sys_s;
    measured_s = std::max(measured_s, o.measured_s);
}

namespace {

using namespace std::chrono_literals;

std::int64_t now_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string errno_text(int err) {
    return std::strerror(err);
}

constexpr std::size_t kReadSize = 64 * 1024;
constexpr int kMaxEvents = 256;
constexpr std::int64_t kFirstBackoffNs = 10'000'000;  // 10 ms
constexpr std::int64_t kMaxBackoffNs = 1'000'000'000;
constexpr std::int64_t kGoneAfterNs =
    2'000'000'000;  // no connection and failing connects this long

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

class Worker {
  public:
    Worker(const Config& config, const Endpoint& endpoint, const Times& times,
           const std::atomic<bool>& stop, std::atomic<bool>& gone, std::size_t connections,
           double rate)
        : config_(config),
          endpoint_(endpoint),
          times_(times),
          stop_(stop),
          gone_(gone),
          conns_(connections),
          schedule_(rate > 0 ? rate : 1.0, connections, times.start),
          open_loop_(rate > 0),
          read_buf_(std::make_unique_for_overwrite<char[]>(kReadSize)),
          body_check_(config) {
        const std::string one = render_request(config);
        request_size_ = one.size();
        for (unsigned i = 0; i < config.pipeline; ++i)
            batch_ += one;
        for (std::size_t i = 0; i < conns_.size(); ++i) {
            Conn& c = conns_[i];
            c.index = i;
            c.ring.resize(config.pipeline);
            c.framer.set_head_requests(config.method == "HEAD");
            if (body_check_.enabled()) c.framer.set_capture(body_check_.capture_limit());
        }
        scan_interval_ =
            std::clamp<std::int64_t>(config.timeout.count() / 8, 1'000'000, 50'000'000);
    }
    ~Worker() {
        for (Conn& c : conns_)
            if (c.fd >= 0) ::close(c.fd);
        if (ep_ >= 0) ::close(ep_);
    }
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    void run();
    Results& results() noexcept { return results_; }
    [[nodiscard]] const std::string& gone_message() const noexcept { return gone_message_; }

  private:
    struct Slot {
        std::int64_t sent = 0;
        std::int64_t intended = 0;
    };
    enum class State : std::uint8_t { down, connecting, open };
    struct Conn {
        int fd = -1;
        State state = State::down;
        std::uint32_t generation = 0;
        std::size_t index = 0;
        ResponseFramer framer;
        std::vector<Slot> ring;  // requests in flight, oldest at head
        std::uint32_t head = 0;
        std::uint32_t in_flight = 0;
        std::uint64_t next_k = 0;    // --rate: the connection's next request to send
        std::uint64_t answered = 0;  // responses on the current socket
        const char* write_ptr = nullptr;
        std::size_t write_left = 0;  // bytes of a batch the socket did not take yet
        std::int64_t connect_started = 0;
        std::int64_t retry_at = 0;
        std::int64_t backoff = 0;
        bool rdhup = false;
        bool unsolicited = false;  // a response arrived with nothing in flight
    };

    [[nodiscard]] bool measuring(std::int64_t t) const noexcept {
        return t >= times_.measure && t < times_.end;
    }
    Counters& counters(std::int64_t t) noexcept {
        return t >= times_.measure ? results_.measured : results_.warmup;
    }

    void open(Conn& c, std::int64_t now);
    void opened(Conn& c, std::int64_t now);
    void dispatch(const epoll_event& ev, std::int64_t now);
    void on_readable(Conn& c, std::int64_t now);
    void on_response(Conn& c, const Response& r, std::int64_t now);
    void fill(Conn& c, std::int64_t now);
    void send_pending(Conn& c);
    void fail(Conn& c, Error e, std::string_view message, std::int64_t now,
              std::uint64_t count = 1);
    void close_and_reopen(Conn& c, std::int64_t now, bool backoff);
    void scan(std::int64_t now);
    void release_due(std::int64_t now);
    void note_error(Error e, std::string_view message, std::int64_t now, std::uint64_t count);
    void sample_cpu(bool at_end);
    void flush_latency() noexcept {
        if (run_count_) results_.latency.record_n(run_value_, run_count_);
        run_count_ = 0;
    }
    int wait(epoll_event* events, std::int64_t now);

    const Config& config_;
    const Endpoint& endpoint_;
    const Times& times_;
    const std::atomic<bool>& stop_;
    std::atomic<bool>& gone_;
    std::vector<Conn> conns_;
    RateSchedule schedule_;
    bool open_loop_;
    std::unique_ptr<char[]> read_buf_;
    BodyCheck body_check_;
    std::string batch_;  // `pipeline` requests back to back
    std::size_t request_size_ = 0;
    int ep_ = -1;
    Results results_;
    std::int64_t scan_interval_ = 0;
    std::int64_t next_scan_ = 0;
    std::uint64_t released_ = 0;  // --rate: requests of the thread handed to connections
    std::size_t open_count_ = 0;
    std::int64_t last_good_ = 0;    // a connection opened or a response arrived
    bool connect_failing_ = false;  // connects failed since last_good_
    std::string gone_message_;
    bool window_started_ = false;
    bool have_pwait2_ = true;
    std::int64_t run_value_ = 0;  // latencies counted but not yet recorded
    std::uint64_t run_count_ = 0;
    rusage cpu_start_{};
};

void Worker::note_error(Error e, std::string_view message, std::int64_t now, std::uint64_t count) {
    auto& slot = results_.first_error[static_cast<std::size_t>(e)];
    if (slot.empty() && now >= times_.measure) slot = std::string(message);
    counters(now).errors[static_cast<std::size_t>(e)] += count;
}

void Worker::open(Conn& c, std::int64_t now) {
    c.state = State::down;
    c.generation = (c.generation + 1) & 0xffffff;
    c.head = c.in_flight = 0;
    c.answered = 0;
    c.write_left = 0;
    c.rdhup = c.unsolicited = false;
    c.framer.reset();
    const int fd =
        ::socket(endpoint_.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(c, Error::connect, fmt::format("socket: {}", errno_text(errno)), now);
    c.fd = fd;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = (static_cast<std::uint64_t>(c.index) << 24) | c.generation;
    if (::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0)
        return fail(c, Error::connect, fmt::format("epoll_ctl: {}", errno_text(errno)), now);
    c.connect_started = now;
    c.state = State::connecting;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&endpoint_.addr), endpoint_.len) == 0)
        return opened(c, now);
    if (errno != EINPROGRESS) return fail(c, Error::connect, errno_text(errno), now);
}

void Worker::opened(Conn& c, std::int64_t now) {
    c.state = State::open;
    ++open_count_;
    ++results_.opened;
    last_good_ = now;
    connect_failing_ = false;
    fill(c, now);
}

void Worker::fail(Conn& c, Error e, std::string_view message, std::int64_t now,
                  std::uint64_t count) {
    if (e == Error::connect) connect_failing_ = true;
    note_error(e, message, now, count);
    // A connection that failed before any answer waits before the next try,
    // so a server that refuses or drops everything is not hammered in a loop.
    close_and_reopen(c, now, e == Error::connect || c.answered == 0);
}

void Worker::close_and_reopen(Conn& c, std::int64_t now, bool backoff) {
    if (c.fd >= 0) {
        ::close(c.fd);  // also leaves the epoll set
        c.fd = -1;
    }
    c.generation = (c.generation + 1) & 0xffffff;  // events still queued for the socket are stale
    if (c.state == State::open) --open_count_;
    c.state = State::down;
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

void Worker::fill(Conn& c, std::int64_t now) {
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
    const auto cap = static_cast<std::uint32_t>(c.ring.size());
    for (std::uint32_t i = 0; i < n; ++i) {
        Slot& s = c.ring[(c.head + c.in_flight + i) % cap];
        s.sent = now;
        s.intended = open_loop_ ? schedule_.intended(c.index, c.next_k + i) : now;
    }
    if (open_loop_) c.next_k += n;
    c.in_flight += n;
    c.write_ptr = batch_.data();
    c.write_left = n * request_size_;
    send_pending(c);
}

void Worker::send_pending(Conn& c) {
    while (c.write_left) {
        const ssize_t w = ::send(c.fd, c.write_ptr, c.write_left, MSG_NOSIGNAL);
        if (w >= 0) {
            c.write_ptr += w;
            c.write_left -= static_cast<std::size_t>(w);
            continue;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return;  // EPOLLOUT continues it
        return fail(c, Error::write, errno_text(errno), now_ns());
    }
}

void Worker::on_response(Conn& c, const Response& r, std::int64_t now) {
    if (c.in_flight == 0) {
        c.unsolicited = true;
        return;
    }
    const Slot& s = c.ring[c.head];
    c.head = (c.head + 1) % static_cast<std::uint32_t>(c.ring.size());
    --c.in_flight;
    ++c.answered;
    last_good_ = now;
    if (now >= times_.end) return;
    Counters& k = counters(now);
    ++k.requests;
    const int cls = r.status / 100;
    if (cls >= 1 && cls <= 5) ++k.status[static_cast<std::size_t>(cls - 1)];
    if (now >= times_.measure) {
        // A pipelined batch answered in one read shares one latency: count
        // equal values together and record them once (flush_latency()).
        const std::int64_t corrected = now - s.intended;
        if (corrected != run_value_ || run_count_ == 0) {
            flush_latency();
            run_value_ = corrected;
        }
        ++run_count_;
        if (open_loop_) results_.uncorrected.record(now - s.sent);
    }
    if (cls != 2) {
        note_error(Error::non_2xx, fmt::format("status {}", r.status), now, 1);
    } else if (body_check_.enabled()) {
        if (auto why = body_check_.check(r.body, r.body_bytes, r.body_truncated))
            note_error(Error::body, *why, now, 1);
    }
}

void Worker::on_readable(Conn& c, std::int64_t now) {
    const auto on_resp = [&](const Response& r) { on_response(c, r, now); };
    while (true) {
        const ssize_t n = ::read(c.fd, read_buf_.get(), kReadSize);
        if (n > 0) {
            now = now_ns();
            if (now < times_.end) counters(now).bytes += static_cast<std::uint64_t>(n);
            const auto result = c.framer.feed({read_buf_.get(), static_cast<std::size_t>(n)},
                                              [&](const Response& r) { on_response(c, r, now); });
            flush_latency();
            if (c.unsolicited)
                return fail(c, Error::malformed, "a response arrived with no request in flight",
                            now);
            if (result == ResponseFramer::Result::malformed) {
                std::string context(c.framer.error_context().substr(0, 80));
                for (char& ch : context)
                    if (static_cast<unsigned char>(ch) < 0x20 ||
                        static_cast<unsigned char>(ch) >= 0x7f)
                        ch = '.';
                return fail(c, Error::malformed,
                            fmt::format("{}: \"{}\"", c.framer.error(), context), now);
            }
            if (result == ResponseFramer::Result::closed) return close_and_reopen(c, now, false);
            if (static_cast<std::size_t>(n) < kReadSize && !c.rdhup) break;
            continue;
        }
        if (n == 0) {
            now = now_ns();
            c.framer.finish(on_resp);
            flush_latency();
            if (c.in_flight > 0)
                return fail(
                    c, Error::read,
                    fmt::format("the server closed the connection with {} request(s) unanswered",
                                c.in_flight),
                    now);
            return close_and_reopen(c, now, c.answered == 0);
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        return fail(c, Error::read, errno_text(errno), now_ns());
    }
    fill(c, now);
}

void Worker::dispatch(const epoll_event& ev, std::int64_t now) {
    const std::size_t index = ev.data.u64 >> 24;
    if (index >= conns_.size()) return;
    Conn& c = conns_[index];
    // An event for a socket this connection has since replaced.
    const std::uint32_t generation = c.generation;
    if ((ev.data.u64 & 0xffffff) != generation || c.fd < 0) return;
    if (c.state == State::connecting) {
        if (!(ev.events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err != 0) return fail(c, Error::connect, errno_text(err), now);
        opened(c, now);
        // fill() may have failed and replaced the socket: the event is stale.
        if (c.generation != generation ||
            !(ev.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
            return;
    }
    if (ev.events & EPOLLRDHUP) c.rdhup = true;
    if ((ev.events & EPOLLOUT) && c.write_left) {
        send_pending(c);
        if (c.generation != generation) return;
    }
    if (ev.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(c, now);
}

void Worker::release_due(std::int64_t now) {
    // --rate: hand the requests that became due to their connections.
    const std::uint64_t due = schedule_.due_count(now);
    if (due <= released_) return;
    const std::uint64_t from = released_;
    released_ = due;
    const std::uint64_t touched = std::min<std::uint64_t>(due - from, conns_.size());
    for (std::uint64_t j = from; j < from + touched; ++j)
        fill(conns_[j % conns_.size()], now);
}

void Worker::scan(std::int64_t now) {
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

void Worker::sample_cpu(bool at_end) {
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

int Worker::wait(epoll_event* events, std::int64_t now) {
    std::int64_t until = std::min(times_.end, next_scan_);
    if (!window_started_) until = std::min(until, times_.measure);
    if (open_loop_) until = std::min(until, schedule_.due_time(released_));
    const std::int64_t wait_ns = std::max<std::int64_t>(until - now, 0);
#ifdef SYS_epoll_pwait2
    // --rate needs sub-millisecond wake-ups (Linux 5.11+); else milliseconds.
    if (have_pwait2_ && open_loop_) {
        timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000),
                    static_cast<long>(wait_ns % 1'000'000'000)};
        const int n = ::epoll_pwait2(ep_, events, kMaxEvents, &ts, nullptr);
        if (n >= 0 || errno != ENOSYS) return n;
        have_pwait2_ = false;
    }
#endif
    // Round up: waking early only costs another wait.
    const auto ms = static_cast<int>((wait_ns + 999'999) / 1'000'000);
    return ::epoll_wait(ep_, events, kMaxEvents, ms);
}

void Worker::run() {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
    // Everyone starts together.
    while (now_ns() < times_.start)
        std::this_thread::sleep_for(100us);
    std::int64_t now = now_ns();
    last_good_ = now;
    next_scan_ = now + scan_interval_;
    for (Conn& c : conns_)
        open(c, now);
    epoll_event events[kMaxEvents];
    while (!stop_.load(std::memory_order_relaxed) && !gone_.load(std::memory_order_relaxed)) {
        now = now_ns();
        if (!window_started_ && now >= times_.measure) {
            window_started_ = true;
            sample_cpu(false);
        }
        if (now >= times_.end) break;
        const int n = wait(events, now);
        if (n < 0 && errno != EINTR)
            throw std::system_error(errno, std::generic_category(), "epoll_wait");
        now = now_ns();
        for (int i = 0; i < n; ++i)
            dispatch(events[i], now);
        if (open_loop_) release_due(now);
        if (now >= next_scan_) scan(now);
    }
    now = now_ns();
    if (window_started_) {
        sample_cpu(true);
        results_.measured_s = static_cast<double>(std::min(now, times_.end) - times_.measure) / 1e9;
    }
    results_.open_at_end = open_count_;
}

}  // namespace

Endpoint resolve_and_probe(const Config& config) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* list = nullptr;
    const std::string port = std::to_string(config.target.port);
    const std::string where = config.target.url;
    if (const int rc = ::getaddrinfo(config.target.host.c_str(), port.c_str(), &hints, &list);
        rc != 0)
        throw std::runtime_error(
            fmt::format("cannot resolve {}: {}", config.target.host, ::gai_strerror(rc)));
    const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(list, &::freeaddrinfo);
    std::string last_error = "no address";
    for (const addrinfo* ai = list; ai; ai = ai->ai_next) {
        const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last_error = errno_text(errno);
            continue;
        }
        int err = 0;
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                pollfd p{fd, POLLOUT, 0};
                const auto ms = static_cast<int>(
                    std::chrono::ceil<std::chrono::milliseconds>(config.timeout).count());
                const int r = ::poll(&p, 1, ms);
                socklen_t len = sizeof err;
                if (r == 0)
                    err = ETIMEDOUT;
                else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                    err = errno;
            }
        }
        ::close(fd);
        if (err != 0) {
            last_error = errno_text(err);
            continue;
        }
        Endpoint e;
        std::memcpy(&e.addr, ai->ai_addr, ai->ai_addrlen);
        e.len = ai->ai_addrlen;
        e.text = ai->ai_family == AF_INET6 ? fmt::format("[{}]:{}", config.target.host, port)
                                           : fmt::format("{}:{}", config.target.host, port);
        return e;
    }
    throw std::runtime_error(fmt::format("cannot connect to {}: {}", where, last_error));
}

Outcome run_load(const Config& config, const Endpoint& endpoint, const std::atomic<bool>& stop) {
    // Enough descriptors for every connection (the soft limit is often 1024).
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < config.connections + 64) {
        rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, config.connections + 64);
        ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    Times times;
    times.start = now_ns() + 20'000'000;  // threads are up before the load starts
    times.measure = times.start + config.warmup.count();
    times.end = times.measure + config.duration.count();

    std::atomic<bool> gone{false};
    const unsigned threads = config.threads;
    std::vector<std::unique_ptr<Worker>> workers;
    for (unsigned i = 0; i < threads; ++i) {
        const std::size_t conns =
            config.connections / threads + (i < config.connections % threads ? 1 : 0);
        const double rate =
            config.rate * static_cast<double>(conns) / static_cast<double>(config.connections);
        workers.push_back(
            std::make_unique<Worker>(config, endpoint, times, stop, gone, conns, rate));
    }
    std::vector<std::string> failures(threads);
    {
        std::vector<std::jthread> pool;
        for (unsigned i = 0; i < threads; ++i) {
            pool.emplace_back([&, i] {
                try {
                    if (!config.cpus.empty())
                        runtime::pin_current_thread(config.cpus[i % config.cpus.size()]);
                    workers[i]->run();
                } catch (const std::exception& e) {
                    failures[i] = e.what();
                }
            });
        }
    }
    for (const auto& f : failures)
        if (!f.empty()) throw std::runtime_error(f);

    Outcome out;
    for (const auto& w : workers)
        out.results.merge(w->results());
    if (gone.load()) {
        out.ended = Ended::server_gone;
        for (const auto& w : workers)
            if (!w->gone_message().empty()) {
                out.message = w->gone_message();
                break;
            }
    } else if (stop.load()) {
        out.ended = Ended::interrupted;
        out.message = "interrupted";
    }
    return out;
}

}  // namespace sm::loadgen
