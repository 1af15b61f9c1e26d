#include "blocking.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <optional>
#include <system_error>

#include <fmt/core.h>

#include "db/serve.hpp"
#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "runtime/posix/socket_io.hpp"
#include "runtime/tuning.hpp"
#include "runtime/connection_state.hpp"

namespace sm::blocking {
namespace {

using Clock = std::chrono::steady_clock;

// Per-thread read buffer. A thread per connection makes this a
// per-connection cost, so it is server-uring's and server-iocp's 8 KiB, not
// the event loops' 64: it holds a 16-deep pipelined batch (about 1 KiB)
// many times over and a typical request head whole, and it keeps a client
// that pipelines without reading under 64 KiB of server memory (thread,
// read buffer and output mark: 55 KiB measured, 63 with 16 KiB reads).
constexpr std::size_t kReadSize = 8 * 1024;
// A connection thread's stack: it keeps its buffers on the heap and needs
// little; glibc's 8 MiB default would reserve 80 GB for 10,000 connections.
constexpr std::size_t kStackSize = 256 * 1024;
// While threads beyond --threads are alive, how often the acceptor looks for
// ones that ended (--spare-thread-timeout) to join them and free their memory.
constexpr auto kReapEvery = std::chrono::milliseconds(1000);
constexpr runtime::ModelOption kSpareThreadTimeout{
    .name = "spare-thread-timeout",
    .help =
        "Seconds a connection thread beyond --threads may wait for a connection before it "
        "ends: the pool grows with a burst of connections and shrinks back after it",
    .value = 30,
    .max = 86400};
// How far a receive timeout may be from the next deadline before it is reset.
constexpr auto kHeadSlack = std::chrono::milliseconds(50);

timeval to_timeval(std::chrono::milliseconds d) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(d.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
    return tv;
}

void set_receive_timeout(int fd, std::chrono::milliseconds rcv) {
    const timeval r = to_timeval(rcv);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &r, sizeof r);
}

void set_timeouts(int fd, std::chrono::milliseconds rcv, std::chrono::milliseconds snd) {
    const timeval r = to_timeval(rcv);
    const timeval s = to_timeval(snd);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &r, sizeof r);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &s, sizeof s);
}

}  // namespace

// --- Server ---------------------------------------------------------------------

struct Server::Worker {
    explicit Worker(const runtime::ServerOptions& o)
        : cache(o.mode, std::time(nullptr), o.workloads()),
          // Zeroed, so resident from the start rather than page by page as
          // large reads first reach each page.
          read_buf(std::make_unique<char[]>(kReadSize)),
          // At most the mark and the response that crosses it; unwritten
          // pages cost no memory.
          out(o.output_mark + runtime::kResponseSlack) {
        if (!o.db.empty()) db.emplace(o.db, o.idle_timeout);
    }
    http::ResponseCache cache;
    // The connection it serves (one at a time): its session, flags and deadlines.
    runtime::ConnectionState<runtime::Plain> conn;
    // --db: this thread's own database connection, called synchronously.
    std::optional<db::SyncClient> db;
    std::unique_ptr<char[]> read_buf;
    http::ByteBuffer out;
    std::mutex fd_mutex;  // the acceptor's shutdown() never hits a closed (reused) fd
    int fd = -1;          // under fd_mutex
    bool ended = false;   // under Server::mutex_: its loop returned (a spare thread's idle time ran out)
    // Blocked (or about to block) in read() with no request partly received.
    std::atomic<bool> idle_in_read{false};
    std::unique_ptr<runtime::Thread> thread;  // last: joined before the rest is destroyed
};

Server::Server(const runtime::WorkerContext& ctx)
    : opts_(ctx.options),
      listener_(ctx.listener),
      stop_(ctx.stop),
      gate_(ctx.connections),
      spare_timeout_(std::chrono::seconds(ctx.options.model_option(kSpareThreadTimeout.name))) {}

Server::~Server() {
    {
        const std::lock_guard lock(mutex_);
        exit_ = true;
        for (const int fd : handed_)
            ::close(fd);
        handed_.clear();
    }
    work_.notify_all();
    workers_.clear();  // joins every thread
}

bool Server::spawn_worker() {
    auto owned = std::make_unique<Worker>(opts_);
    Worker& w = *owned;
    const unsigned index = static_cast<unsigned>(workers_.size());
    {
        const std::lock_guard lock(mutex_);
        workers_.push_back(std::move(owned));
        ++idle_count_;  // idle from the start, so the acceptor counts it at once
    }
    try {
        w.thread = std::make_unique<runtime::Thread>(kStackSize, [this, &w, index] {
            try {
                runtime::pin_worker_thread(opts_, index);
            } catch (const std::exception&) {
                // Unpinned: not worth failing a connection over.
            }
            worker_loop(w);
        });
    } catch (const std::exception& e) {
        const std::lock_guard lock(mutex_);
        workers_.pop_back();  // only the acceptor adds workers: it is the last one
        --idle_count_;
        spawn_failed_ = true;
        runtime::log(fmt::format("cannot start thread {}: {}; the pool stays at {} threads",
                                 index + 1, e.what(), workers_.size()));
        return false;
    }
    return true;
}

bool Server::wait_for_idle_thread() {
    // A thread must be free for the next connection before accepting it:
    // at the limit, new connections wait in the listen backlog.
    std::unique_lock lock(mutex_);
    while (idle_count_ <= handed_.size() && !stop_.requested()) {
        if (workers_.size() - ended_ < opts_.max_connections && !spawn_failed_) {
            lock.unlock();
            spawn_worker();
            lock.lock();
            continue;
        }
        pool_log_(Clock::now(), [&] {
            return fmt::format(
                "all {} connection threads busy{}: new connections wait in the backlog",
                workers_.size(),
                spawn_failed_ ? " (no more threads could be started)"
                              : fmt::format(" (--max-connections {})", opts_.max_connections));
        });
        idle_.wait_for(lock, runtime::kStopPoll);
    }
    return !stop_.requested();
}

void Server::run() {
    for (unsigned i = 0; i < opts_.threads && i < opts_.max_connections; ++i)
        if (!spawn_worker()) break;
    if (workers_.empty()) throw std::runtime_error("no connection thread could be started");

    pollfd fds[2] = {{listener_.handle(), POLLIN, 0}, {stop_.handle(), POLLIN, 0}};
    while (wait_for_idle_thread()) {
        // The gate closed (at the limit, or out of descriptors): wait for
        // its retry, or for the stop.
        if (const auto now = Clock::now(); !gate_.reopen_due(now) && !gate_.open()) {
            const auto wait = std::chrono::ceil<std::chrono::milliseconds>(gate_.retry_at() - now);
            ::poll(&fds[1], 1, static_cast<int>(std::max<long long>(1, wait.count())));
            continue;
        }
        gate_.reopen();
        if (::poll(fds, 2, join_ended() ? static_cast<int>(kReapEvery.count()) : -1) < 0) {
            if (errno == EINTR) continue;
            throw std::system_error(errno, std::generic_category(), "poll");
        }
        if (fds[1].revents) break;
        if (!(fds[0].revents & POLLIN) || !gate_.try_acquire(Clock::now())) continue;
        const int fd = ::accept4(listener_.handle(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            gate_.failed(errno, Clock::now());
            continue;
        }
        // Accepted sockets are blocking (Linux does not pass O_NONBLOCK on);
        // the timeouts bound every read (--idle-timeout, or less: serve())
        // and every wait for the client to take output (--send-timeout).
        runtime::set_nodelay(fd);
        set_timeouts(fd, opts_.idle_timeout, opts_.send_timeout);
        {
            const std::lock_guard lock(mutex_);
            handed_.push_back(fd);
        }
        work_.notify_one();
    }

    // Graceful stop: refuse new connections, wake the threads that wait for
    // a next request (their read sees EOF), let the others finish theirs
    // (answered with Connection: close), within --shutdown-timeout.
    stopping_.store(true);  // seq_cst: pairs with Worker::idle_in_read
    listener_.close();
    const auto deadline = Clock::now() + opts_.shutdown_timeout;
    bool forced = false;
    std::unique_lock lock(mutex_);
    for (const int fd : handed_) {
        ::close(fd);
        gate_.release();
    }
    handed_.clear();
    while (idle_count_ + ended_ < workers_.size()) {
        lock.unlock();
        stop_connections(SHUT_RD, true);
        if (!forced && Clock::now() >= deadline) {
            stop_connections(SHUT_RDWR, false);  // out of time
            forced = true;
        }
        lock.lock();
        idle_.wait_for(lock, runtime::kStopPoll);
    }
    exit_ = true;
    lock.unlock();
    work_.notify_all();
    workers_.clear();  // joins
}

bool Server::join_ended() {
    std::vector<std::unique_ptr<Worker>> ended;
    bool spare = false;
    {
        const std::lock_guard lock(mutex_);
        if (ended_ != 0) {
            std::erase_if(workers_, [&](std::unique_ptr<Worker>& w) {
                if (!w->ended) return false;
                ended.push_back(std::move(w));
                return true;
            });
            ended_ = 0;
        }
        spare = workers_.size() > opts_.threads;
    }
    ended.clear();  // joins (their loops have returned) and frees their buffers
    return spare;
}

void Server::stop_connections(int how, bool only_idle) {
    const std::lock_guard lock(mutex_);
    for (auto& w : workers_) {
        const std::lock_guard fd_lock(w->fd_mutex);
        if (w->fd >= 0 && (!only_idle || w->idle_in_read.load())) ::shutdown(w->fd, how);
        // Out of time: a query still running is cancelled (its 503 goes nowhere).
        if (!only_idle && w->db) w->db->cancel();
    }
}

void Server::worker_loop(Worker& w) {
    const runtime::SessionPool::Scope sessions(w.cache, opts_.limits);
    std::unique_lock lock(mutex_);
    const auto has_work = [this] { return !handed_.empty() || exit_; };
    // More threads than --threads: this one may end (the acceptor joins it).
    const auto spare = [this] { return workers_.size() - ended_ > opts_.threads; };
    while (true) {
        if (!spare()) {
            work_.wait(lock, has_work);
        } else if (!work_.wait_for(lock, spare_timeout_, has_work) && spare()) {
            --idle_count_;
            w.ended = true;
            ++ended_;
            return;
        }
        if (!has_work()) continue;  // woken for another, or no longer spare: wait again
        if (handed_.empty()) {  // exit_
            --idle_count_;
            idle_.notify_all();
            return;
        }
        const int fd = handed_.front();
        handed_.pop_front();
        --idle_count_;
        lock.unlock();
        try {
            serve(w, fd);
        } catch (const std::exception& e) {
            runtime::log(fmt::format("connection thread: {}", e.what()));
        }
        {
            const std::lock_guard fd_lock(w.fd_mutex);
            ::close(fd);
            w.fd = -1;
        }
        w.idle_in_read.store(false);
        gate_.release();
        lock.lock();
        ++idle_count_;
        idle_.notify_all();
    }
}

void Server::serve(Worker& w, int fd) {
    {
        const std::lock_guard fd_lock(w.fd_mutex);
        w.fd = fd;
    }
    runtime::ConnectionState<runtime::Plain>& c = w.conn;
    c.session.reset();
    c.want_close = c.peer_closed = false;
    c.clock.start(Clock::now());
    w.out.clear();
    runtime::SessionSlot& session = c.session;
    db::SyncClient* const db = w.db ? &*w.db : nullptr;
    // Each read waits until the next deadline (runtime::DeadlineClock). The
    // socket's timeout is changed only when it is off by more than
    // kHeadSlack, so pipelined reads cost no setsockopt each; a read that
    // wakes early goes round again.
    std::chrono::milliseconds rcv_timeout = opts_.idle_timeout;
    while (true) {
        auto now = Clock::now();
        switch (c.clock.expire(now, opts_, false, fd)) {
            case runtime::Due::close: return;  // closed like any idle connection
            case runtime::Due::head:
                // Everything answered so far is written: the 408 follows it.
                c.clock.clear_head();
                if (runtime::answer_late_head(c, false, w.out) &&
                    runtime::send_blocking(fd, w.out, c, opts_) == runtime::IoResult::done)
                    runtime::linger_blocking(fd, w.read_buf.get(), kReadSize, opts_);
                return;
            case runtime::Due::nothing:
            case runtime::Due::renew:
            case runtime::Due::delivering: break;  // the client takes what the kernel holds
        }
        const auto want = std::chrono::ceil<std::chrono::milliseconds>(c.clock.next(opts_) - now);
        if (want > rcv_timeout + kHeadSlack || rcv_timeout > want + kHeadSlack) {
            set_receive_timeout(fd, std::max(want, std::chrono::milliseconds(1)));
            rcv_timeout = want;
        }
        // seq_cst store then load, against the acceptor's store of stopping_
        // then load of idle_in_read: one of the two sees the other, so a
        // thread never sleeps in read() through a stop.
        w.idle_in_read.store(session.idle());
        if (stopping_.load() && session.idle()) return;
        const ssize_t n = ::read(fd, w.read_buf.get(), kReadSize);
        w.idle_in_read.store(false, std::memory_order_relaxed);
        if (n == 0) return;  // the client closed (or the stop shut our read side)
        if (n < 0) {
            // EAGAIN: the timeout passed; the deadlines above say what is due.
            if (errno == EINTR || errno == EAGAIN) continue;
            return;  // an error
        }
        now = Clock::now();
        c.clock.touch(now);
        w.cache.refresh(std::time(nullptr));
        if (stopping_.load(std::memory_order_relaxed)) session.request_close();
        if (session.feed({w.read_buf.get(), static_cast<std::size_t>(n)}, w.out,
                         opts_.output_mark) == http::Session::Result::close)
            c.want_close = true;
        // Blocks this thread for the queries; the head is tracked after them.
        (void)db::fill(session, db, w.out, opts_.output_mark);
        c.clock.track_head(session, Clock::now(), opts_);
        // The responses, then what was deferred for want of room, a mark's
        // worth at a time (nothing more is read meanwhile). Written out, they
        // are progress: the idle time starts from them, not from the read
        // that asked for them (which may have waited on the database).
        while (true) {
            if (runtime::send_blocking(fd, w.out, c, opts_) != runtime::IoResult::done) return;
            c.clock.touch(Clock::now());
            if (!session.deferred()) break;
            (void)db::fill(session, db, w.out, opts_.output_mark);
        }
        if (session.closed()) c.want_close = true;
        if (runtime::ending(c, stopping_.load(std::memory_order_relaxed))) {
            if (c.want_close) runtime::linger_blocking(fd, w.read_buf.get(), kReadSize, opts_);
            return;
        }
    }
}

}  // namespace sm::blocking

int main(int argc, char** argv) {
    using namespace sm;
    static constexpr runtime::ModelOption kOptions[] = {blocking::kSpareThreadTimeout};
    return runtime::serve({.name = "blocking",
                           .worker = &runtime::run<blocking::Server>,
                           .listeners = runtime::ListenerLayout::one,
                           .options = kOptions},
                          argc, argv);
}
