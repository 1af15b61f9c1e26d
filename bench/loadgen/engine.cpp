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

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/platform.hpp"
#ifdef SM_LOADGEN_URING
#include "uring/probe.hpp"
#endif
#include "worker.hpp"

namespace sm::loadgen {

void Counters::merge(const Counters& o) noexcept {
    requests += o.requests;
    sent += o.sent;
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
    intervals.insert(intervals.end(), o.intervals.begin(), o.intervals.end());
    if (urls.size() < o.urls.size()) urls.resize(o.urls.size());
    for (std::size_t u = 0; u < o.urls.size(); ++u) {
        urls[u].counters.merge(o.urls[u].counters);
        urls[u].latency.merge(o.urls[u].latency);
    }
    for (std::size_t i = 0; i < kErrorClasses; ++i)
        if (first_error[i].empty()) first_error[i] = o.first_error[i];
    opened += o.opened;
    reconnects += o.reconnects;
    open_at_end += o.open_at_end;
    user_s += o.user_s;
    sys_s += o.sys_s;
    measured_s = std::max(measured_s, o.measured_s);
    if (o.first_sent_ns && (first_sent_ns == 0 || o.first_sent_ns < first_sent_ns))
        first_sent_ns = o.first_sent_ns;
    last_done_ns = std::max(last_done_ns, o.last_done_ns);
    stopped_ns = std::max(stopped_ns, o.stopped_ns);
    began_ns = std::max(began_ns, o.began_ns);
    all_done = all_done && o.all_done;
}

namespace {

using detail::errno_text;
using detail::LoadThread;
using detail::now_ns;
using detail::WorkerArgs;

constexpr std::size_t kReadSize = 64 * 1024;
constexpr int kMaxEvents = 256;

// CLOCK_REALTIME - CLOCK_MONOTONIC, ns: the realtime reading taken between
// the two monotonic readings closest together of a few tries.
std::int64_t realtime_offset_ns() {
    const auto read = [](clockid_t clock) {
        timespec ts{};
        ::clock_gettime(clock, &ts);
        return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    };
    std::int64_t best_gap = std::numeric_limits<std::int64_t>::max();
    std::int64_t offset = 0;
    for (int i = 0; i < 5; ++i) {
        const std::int64_t before = read(CLOCK_MONOTONIC);
        const std::int64_t real = read(CLOCK_REALTIME);
        const std::int64_t after = read(CLOCK_MONOTONIC);
        if (after - before < best_gap) {
            best_gap = after - before;
            offset = real - (before + (after - before) / 2);
        }
    }
    return offset;
}

// "1764907200.250000000": ns as seconds, exactly.
std::string exact_seconds(std::int64_t ns) {
    const char* sign = ns < 0 ? "-" : "";
    const auto a = static_cast<std::uint64_t>(ns < 0 ? -ns : ns);
    return fmt::format("{}{}.{:09}", sign, a / 1'000'000'000, a % 1'000'000'000);
}

// The epoll engine: edge-triggered readiness per socket, a read() until the
// socket is drained (one, for a short answer) and a send() per batch.
class EpollWorker final : public detail::Worker<EpollWorker> {
    friend class detail::Worker<EpollWorker>;

  public:
    explicit EpollWorker(const WorkerArgs& a)
        : Worker(a), read_buf_(std::make_unique_for_overwrite<char[]>(kReadSize)) {}
    ~EpollWorker() override {
        if (ep_ >= 0) ::close(ep_);
    }
    EpollWorker(const EpollWorker&) = delete;
    EpollWorker& operator=(const EpollWorker&) = delete;

  private:
    void setup() {
        ep_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (ep_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
    }
    bool watch(Conn& c, std::int64_t now) {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        ev.data.u64 = (static_cast<std::uint64_t>(c.index) << 24) | c.generation;
        if (::epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev) == 0) return true;
        fail(c, Error::connect, fmt::format("epoll_ctl: {}", errno_text(errno)), now);
        return false;
    }
    // EPOLLOUT says when the connect is done.
    void await_connect(Conn& /*c*/) noexcept {}
    void on_open(Conn& /*c*/) noexcept {}
    void forget(Conn& /*c*/) noexcept {}  // close() leaves the epoll set
    void start_send(Conn& c) { send_pending(c); }
    void send_pending(Conn& c);
    void on_readable(Conn& c, std::int64_t now);
    void dispatch(const epoll_event& ev, std::int64_t now);
    void wait_and_dispatch(std::int64_t now, std::int64_t until);

    std::unique_ptr<char[]> read_buf_;
    int ep_ = -1;
    bool have_pwait2_ = true;
};

void EpollWorker::send_pending(Conn& c) {
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

void EpollWorker::on_readable(Conn& c, std::int64_t now) {
    while (true) {
        const ssize_t n = ::read(c.fd, read_buf_.get(), kReadSize);
        if (n > 0) {
            now = now_ns();
            if (!consume(c, {read_buf_.get(), static_cast<std::size_t>(n)}, now)) return;
            if (static_cast<std::size_t>(n) < kReadSize && !c.rdhup) break;
            continue;
        }
        if (n == 0) return at_eof(c, now_ns());
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        return fail(c, Error::read, errno_text(errno), now_ns());
    }
    fill(c, now);
}

void EpollWorker::dispatch(const epoll_event& ev, std::int64_t now) {
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

void EpollWorker::wait_and_dispatch(std::int64_t now, std::int64_t until) {
    epoll_event events[kMaxEvents];
    const std::int64_t wait_ns = std::max<std::int64_t>(until - now, 0);
    int n = -1;
    bool waited = false;
#ifdef SYS_epoll_pwait2
    // --rate needs sub-millisecond wake-ups (Linux 5.11+); else milliseconds.
    if (have_pwait2_ && open_loop_) {
        timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000),
                    static_cast<long>(wait_ns % 1'000'000'000)};
        n = ::epoll_pwait2(ep_, events, kMaxEvents, &ts, nullptr);
        if (n >= 0 || errno != ENOSYS)
            waited = true;
        else
            have_pwait2_ = false;
    }
#endif
    if (!waited) {
        // Round up: waking early only costs another wait.
        const auto ms = static_cast<int>((wait_ns + 999'999) / 1'000'000);
        n = ::epoll_wait(ep_, events, kMaxEvents, ms);
    }
    if (n < 0) {
        if (errno == EINTR) return;
        throw std::system_error(errno, std::generic_category(), "epoll_wait");
    }
    now = now_ns();
    for (int i = 0; i < n; ++i)
        dispatch(events[i], now);
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

Engine choose_engine(Engine requested) {
    if (requested == Engine::epoll) return Engine::epoll;
    constexpr std::string_view kAlternative = "--engine epoll works without it";
#ifdef SM_LOADGEN_URING
    // No note: the automatic choice is silent, whichever ring setup works.
    const std::optional<std::string> why = sm::uring::probe({.alternative = kAlternative});
    if (!why) return Engine::uring;
    if (requested == Engine::automatic) return Engine::epoll;
    throw std::runtime_error(fmt::format("--engine uring: {}", *why));
#else
    if (requested == Engine::automatic) return Engine::epoll;
    throw std::runtime_error(fmt::format(
        "--engine uring: this loadgen was built without liburing (Debian: liburing-dev); {}",
        kAlternative));
#endif
}

namespace {

// Calls `progress` about once a second until every load thread has stopped
// (`finished` of them, guarded by `m`, signalled on `cv`), then once with done.
void report_progress(const ProgressSink& progress, const detail::Times& times,
                     const std::vector<std::unique_ptr<LoadThread>>& workers, std::mutex& m,
                     std::condition_variable& cv, const unsigned& finished) {
    using Clock = std::chrono::steady_clock;
    auto next = Clock::now() + std::chrono::seconds(1);
    std::uint64_t last_responses = 0;
    std::int64_t last_ns = now_ns();
    bool last_warming = true;
    std::unique_lock lock(m);
    while (!cv.wait_until(lock, next, [&] { return finished == workers.size(); })) {
        lock.unlock();
        ProgressSample p;
        const std::int64_t now = now_ns();
        p.elapsed_ns = std::max<std::int64_t>(now - times.start, 0);
        p.warming_up = now < times.measure;
        for (const auto& w : workers) {
            const auto& pub = w->published();
            p.responses += p.warming_up ? pub.warmup_responses.load(std::memory_order_relaxed)
                                        : pub.responses.load(std::memory_order_relaxed);
            p.errors += pub.errors.load(std::memory_order_relaxed);
        }
        // The first sample after the warm-up counts from zero again.
        const std::uint64_t base = p.warming_up == last_warming ? last_responses : 0;
        if (now > last_ns && p.responses >= base)
            p.per_second =
                static_cast<double>(p.responses - base) * 1e9 / static_cast<double>(now - last_ns);
        last_responses = p.responses;
        last_warming = p.warming_up;
        last_ns = now;
        progress(p);
        next += std::chrono::seconds(1);
        lock.lock();
    }
    lock.unlock();
    ProgressSample done;
    done.done = true;
    progress(done);
}

}  // namespace

Outcome run_load(const Config& config, const Endpoint& endpoint, const std::atomic<bool>& stop,
                 const ProgressSink& progress) {
    // main() chose already; probing again only when it did not.
    [[maybe_unused]] const Engine engine =
        config.engine == Engine::automatic ? choose_engine(config.engine) : config.engine;
    // Enough descriptors for every connection (the soft limit is often 1024).
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < config.connections + 64) {
        rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, config.connections + 64);
        ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    detail::Times times;
    times.start = now_ns() + 20'000'000;  // threads are up before the load starts
    // The wall clock's instants: CLOCK_REALTIME is CLOCK_MONOTONIC + offset
    // for the run (read once; a clock step during the run is not followed).
    const std::int64_t offset = realtime_offset_ns();
    Outcome out;
    out.start_requested_ns = config.start_at_ns;
    if (config.start_at_ns && *config.start_at_ns - offset > times.start) {
        // --start-at in time: the load begins then (converted once).
        times.start = *config.start_at_ns - offset;
    }
    times.measure = times.start + config.warmup.count();
    if (config.start_at_ns && *config.start_at_ns - offset + config.warmup.count() > times.start) {
        // Late, but before the agreed window: the warm-up is shorter and the
        // window still the agreed one, so the agents' windows coincide.
        times.measure = *config.start_at_ns - offset + config.warmup.count();
    }
    out.window_start_ns = times.measure + offset;
    times.end = config.time_limited ? times.measure + config.duration.count()
                                    : std::numeric_limits<std::int64_t>::max();
    // On the text stream (stderr when stdout carries a document), flushed at
    // once: the reader acts on it while the load runs.
    std::FILE* announce = config.stdout_taken() ? stderr : stdout;
    if (config.announce) {
        if (!config.counted())
            fmt::print(announce, "schedule monotonic_ns start={} measure={} end={}\n", times.start,
                       times.measure, times.end);
        else if (config.time_limited)
            fmt::print(announce, "schedule monotonic_ns start={} measure={} requests={} limit={}\n",
                       times.start, times.measure, config.request_count, times.end);
        else
            fmt::print(announce,
                       "schedule monotonic_ns start={} measure={} requests={} limit=none\n",
                       times.start, times.measure, config.request_count);
        std::fflush(announce);
    }

    const RequestMix mix(config);
    std::optional<RequestBudget> budget;
    if (config.counted()) budget.emplace(config.request_count);
    std::atomic<bool> gone{false};
    const unsigned threads = config.threads;
    std::vector<std::unique_ptr<LoadThread>> workers;
    std::size_t first_connection = 0;
    for (unsigned i = 0; i < threads; ++i) {
        const std::size_t conns =
            config.connections / threads + (i < config.connections % threads ? 1 : 0);
        const double rate =
            config.rate * static_cast<double>(conns) / static_cast<double>(config.connections);
        const WorkerArgs args{
            config, endpoint,         times, stop, gone, mix, budget ? &*budget : nullptr,
            conns,  first_connection, rate};
        first_connection += conns;
#ifdef SM_LOADGEN_URING
        if (engine == Engine::uring) {
            workers.push_back(detail::make_uring_worker(args));
            continue;
        }
#endif
        workers.push_back(std::make_unique<EpollWorker>(args));
    }
    std::vector<std::string> failures(threads);
    {
        std::mutex m;
        std::condition_variable cv;
        unsigned finished = 0;
        std::vector<std::jthread> pool;
        for (unsigned i = 0; i < threads; ++i) {
            pool.emplace_back([&, i] {
                try {
                    if (!config.cpus.empty())
                        runtime::pin_current_thread(config.cpus[i % config.cpus.size()]);
                    workers[i]->run();
                } catch (const std::exception& e) {
                    failures[i] = e.what();
                    gone.store(true);  // the other threads stop too
                }
                {
                    const std::lock_guard lock(m);
                    ++finished;
                }
                cv.notify_all();
            });
        }
        if (progress) report_progress(progress, times, workers, m, cv, finished);
    }
    for (const auto& f : failures)
        if (!f.empty()) throw std::runtime_error(f);

    for (const auto& w : workers)
        out.results.merge(w->results());
    Results& r = out.results;
    // The skew as the threads saw it: from the agreed instant to the last
    // one's waking (its sleep's lateness; in time, microseconds).
    out.started_ns = (r.began_ns ? r.began_ns : times.start) + offset;
    if (config.start_at_ns && config.announce) {
        fmt::print(announce, "start_at realtime_s={} started_s={} skew_s={}\n",
                   exact_seconds(*config.start_at_ns), exact_seconds(out.started_ns),
                   exact_seconds(out.started_ns - *config.start_at_ns));
        std::fflush(announce);
    }
    // The measured window as the hlog covers it: from times.measure to where
    // the load stopped (-d's end when it ran its course), with -n to the N-th
    // response when all were answered.
    const std::int64_t window_end =
        config.counted() && r.all_done && r.first_sent_ns ? r.last_done_ns : r.stopped_ns;
    out.window_ns = std::max<std::int64_t>(window_end - times.measure, 0);
    if (config.counted()) {
        // The measured time: from the first measured request to the N-th
        // answered (or lost), or to where the load stopped first.
        out.stopped_by = r.all_done ? StoppedBy::requests : StoppedBy::duration;
        const std::int64_t from = r.first_sent_ns ? r.first_sent_ns : times.measure;
        const std::int64_t to = r.all_done ? r.last_done_ns : r.stopped_ns;
        r.measured_s = static_cast<double>(std::max<std::int64_t>(to - from, 0)) / 1e9;
        if (config.announce) {
            if (r.first_sent_ns)
                fmt::print(announce, "measured monotonic_ns first={} last={}\n", from, to);
            else
                fmt::print(announce, "measured monotonic_ns first=none last=none\n");
            std::fflush(announce);
        }
    }
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
