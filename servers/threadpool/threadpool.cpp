#include "threadpool.hpp"

#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>
#include <system_error>

#include <fmt/core.h>

#include "db/serve.hpp"
#include "runtime/posix/epoll_util.hpp"
#include "runtime/posix/socket_io.hpp"
#include "runtime/tsan.hpp"
#include "runtime/tuning.hpp"

#ifdef SM_TSAN
// Read by ThreadSanitizer at start-up: only the kernel-ordered re-arm, see
// epoll_rearm() below (the name is unique in the program).
extern "C" const char* __tsan_default_suppressions();
extern "C" const char* __tsan_default_suppressions() {
    return "race:epoll_rearm\n";
}
#endif

namespace sm::threadpool {
namespace {

// A connection that spent its turn's reads (runtime::kReadsPerTurn) goes to
// the back of the queue (re-armed level-triggered, it is ready again at once).
using runtime::kReadsPerTurn;
constexpr runtime::ModelOption kQueueSize{
    .name = "queue-size",
    .help =
        "Ready connections the reactor may queue for the workers; when full the reactor "
        "waits for a free slot (back-pressure), it drops nothing",
    .value = 1024};

constexpr runtime::ModelOption kBatchReactor{
    .name = "batch-reactor",
    .help =
        "1: the reactor thread is scheduled SCHED_BATCH, so a ready connection that wakes it "
        "does not preempt a worker sharing its CPU; the reactor runs when the workers wait, "
        "and hands them a larger batch (fewer context switches per request). 0: an ordinary "
        "thread, the classic hand-off",
    .value = 1,
    .min = 0,
    .max = 1};

char listen_tag;
char stop_tag;

// SCHED_BATCH (Linux, no privilege needed): the thread is never woken into
// preempting the thread that runs, its CPU share is unchanged. When the
// reactor and a worker share a CPU, every re-arm whose connection turns
// ready at once used to wake the reactor into preempting the worker: two
// context switches for one request's hand-off (0.48 per request at 64
// connections, one CPU). Measured in the issue 19 note.
void batch_this_thread() {
    const sched_param none{};
    if (::sched_setscheduler(0, SCHED_BATCH, &none) != 0)
        runtime::log(fmt::format("--batch-reactor: sched_setscheduler(SCHED_BATCH): {} (the "
                                 "reactor runs as an ordinary thread)",
                                 std::strerror(errno)));
}

using runtime::event_for;
using runtime::throw_errno;

// The one syscall that hands a connection back: once it has taken effect the
// connection's event may fire and another worker own (and close) it, even
// before this call returns. Nothing is touched after a successful re-arm;
// a failed one fired nothing, so the caller still owns the connection.
// ThreadSanitizer cannot see that ordering inside the kernel and reports
// this call against the next owner's close(): see the suppression above.
__attribute__((noinline)) int epoll_rearm(int ep, int fd, epoll_event* ev) noexcept {
    return ::epoll_ctl(ep, EPOLL_CTL_MOD, fd, ev);
}

}  // namespace

// --- the pool -------------------------------------------------------------------

struct Pool::Worker {
    explicit Worker(const runtime::ServerOptions& o)
        : cache(o.mode, std::time(nullptr), o.workloads()),
          read_buf(std::make_unique_for_overwrite<char[]>(runtime::kReadSize)),
          out(2 * o.output_mark) {
        if (!o.db.empty()) db.emplace(o.db, o.idle_timeout);
    }
    http::ResponseCache cache;  // per worker: a connection is rendered with its current owner's
    // --db: this worker's own database connection, called synchronously.
    std::optional<db::SyncClient> db;
    std::unique_ptr<char[]> read_buf;
    http::ByteBuffer out;
};

Pool::Pool(const runtime::WorkerContext& ctx)
    : opts_(ctx.options),
      stop_(ctx.stop),
      gate_(ctx.connections),
      ep_(runtime::new_epoll(ctx.stop, &stop_tag)),
      listener_(ep_.get(), ctx.listener, gate_, &listen_tag),
      queue_(ctx.options.model_option(kQueueSize.name)) {
    for (unsigned i = 0; i < opts_.threads; ++i)
        workers_.push_back(std::make_unique<Worker>(opts_));
    for (unsigned i = 0; i < opts_.threads; ++i) {
        threads_.emplace_back([this, i] {
            try {
                runtime::pin_worker_thread(opts_, i);
            } catch (const std::exception& e) {
                runtime::log(fmt::format("worker {}: {} (running unpinned)", i, e.what()));
            }
            worker_loop(*workers_[i]);
        });
    }
}

Pool::~Pool() {
    queue_.close();
    threads_.clear();  // joins
    // Only reached with connections left if run() failed: free them.
    while (Connection* c = registry_.pop_front()) {
        ::close(c->fd);
        gate_.release();
        std::unique_ptr<Connection> owned(c);
    }
}

void Pool::run() {
    if (opts_.model_option(kBatchReactor.name) != 0) batch_this_thread();
    epoll_event events[runtime::kMaxEvents];
    std::vector<Connection*> ready;
    ready.reserve(runtime::kMaxEvents);
    // Timeouts are enforced by a sweep.
    const auto sweep_every = runtime::sweep_interval(opts_);
    next_sweep_ = Clock::now() + sweep_every;
    while (true) {
        if (stopping_) {
            const std::lock_guard lock(registry_mutex_);
            if (open_ == 0) break;
        }
        auto next = std::min(next_sweep_, gate_.retry_at());
        if (stopping_) next = std::min(next, Clock::now() + runtime::kStopPoll);
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
        const int n = ::epoll_wait(ep_.get(), events, runtime::kMaxEvents,
                                   static_cast<int>(std::max<long long>(0, wait.count())));
        if (n < 0 && errno != EINTR) throw_errno("epoll_wait");
        const auto now = Clock::now();
        ready.clear();
        for (int i = 0; i < n; ++i) {
            void* tag = events[i].data.ptr;
            if (tag == &listen_tag) {
                listener_.accept(now, [this](int fd) { return adopt(fd); });
            } else if (tag == &stop_tag) {
                begin_shutdown(now);
            } else {
                auto* c = static_cast<Connection*>(tag);
                c->armed.exchange(false, std::memory_order_acquire);
                c->events = events[i].events;
                ready.push_back(c);
            }
        }
        // One lock for the whole batch.
        if (!ready.empty() && queue_.push(ready.data(), ready.size()) != 0) {
            queue_log_(now, [&] {
                return fmt::format(
                    "hand-off queue full (--queue-size {}): the reactor waited for a worker",
                    opts_.model_option(kQueueSize.name));
            });
        }
        if (now >= next_sweep_) {
            sweep(now);
            next_sweep_ = now + sweep_every;
        }
        listener_.reopen_if_due(now);
        if (stopping_ && now >= shutdown_deadline_) {
            // Out of time: reset what is left; the owners close it.
            const std::lock_guard lock(registry_mutex_);
            registry_.for_each([](Connection& c) { ::shutdown(c.fd, SHUT_RDWR); });
            // A worker waiting for the database is unblocked (its 503 goes nowhere).
            for (auto& w : workers_)
                if (w->db) w->db->cancel();
        }
    }
    queue_.close();
    threads_.clear();  // joins the workers
}

bool Pool::adopt(int fd) {
    auto owned = std::make_unique<Connection>(fd);
    Connection* c = owned.get();
    {
        const std::lock_guard lock(registry_mutex_);
        registry_.push_back(*c);
        ++open_;
    }
    // Owned by the registry from here; epoll holds a pointer while armed.
    owned.release();
    auto ev = event_for(c, EPOLLIN | EPOLLRDHUP | EPOLLONESHOT);
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) close_connection(*c);
    return true;
}

void Pool::sweep(Clock::time_point now) {
    // The reactor never touches a connection's state: an expired one is shut
    // down, its owner (or the next worker to get its event) sees EOF and
    // closes it. A worker leaves the registry before closing the descriptor,
    // so the descriptor shut down here is never someone else's.
    const std::lock_guard lock(registry_mutex_);
    registry_.for_each([&](Connection& c) {
        // Held by a worker (not armed), it is being served, not idle: that
        // worker may be waiting for the database, whose own statement
        // timeout bounds the wait. The worker renews the idle time, and
        // answers a late head itself (service()).
        if (!c.armed.load(std::memory_order_acquire)) return;
        switch (c.clock.expire(now, opts_, false, c.fd)) {
            case runtime::Due::nothing:
            case runtime::Due::renew:
            case runtime::Due::delivering: return;  // the client takes what the kernel holds
            case runtime::Due::close:
                ::shutdown(c.fd, SHUT_RDWR);
                return;
            case runtime::Due::head:
                // A late request head gets a 408, which only the owner can
                // write: wake it. Armed means in epoll and owned by no worker,
                // so re-arming with EPOLLOUT (writable: fires at once) hands it
                // to one, and service() answers. Should a worker's own re-arm
                // overwrite this one, the next sweep wakes it again. The
                // registry lock keeps the descriptor open meanwhile (owners
                // leave the registry before closing).
                auto ev = event_for(&c, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLONESHOT);
                epoll_rearm(ep_.get(), c.fd, &ev);
        }
    });
}

void Pool::begin_shutdown(Clock::time_point now) {
    if (stopping_) return;
    stopping_ = true;
    shutdown_deadline_ = now + opts_.shutdown_timeout;
    ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, stop_.handle(), nullptr);  // it stays readable
    listener_.close();  // new connections are refused, not queued
    // Owners see EOF once they have read what already arrived: they answer
    // complete requests (with Connection: close) and close.
    const std::lock_guard lock(registry_mutex_);
    registry_.for_each([](Connection& c) { ::shutdown(c.fd, SHUT_RD); });
}

// --- worker side ------------------------------------------------------------------

void Pool::worker_loop(Worker& w) {
    const runtime::SessionPool::Scope sessions(w.cache, opts_.limits);
    while (Connection* c = queue_.pop()) {
        w.cache.refresh(std::time(nullptr));
        c->session.bind(w.cache);
        service(w, *c, c->events);
        // c may belong to another worker already (re-armed) or be gone.
    }
}

void Pool::service(Worker& w, Connection& c, std::uint32_t events) {
    auto now = Clock::now();
    c.clock.touch(now);
    if (c.clock.expire(now, opts_, true, c.fd) == runtime::Due::head) return expire_head(w, c);
    if (c.lingering()) {
        if (runtime::discard_input(c.fd, w.read_buf.get(), runtime::kReadSize,
                                   runtime::kLingerReadsPerTurn) == runtime::IoResult::closed)
            return close_connection(c);  // the client closed, or an error
        return rearm(c, EPOLLIN | EPOLLRDHUP);
    }
    if (!c.pending.empty()) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return rearm(c, EPOLLOUT);
        if (!flush(c, c.pending)) return close_connection(c);
        if (!c.pending.empty()) return rearm(c, EPOLLOUT);
        c.pending.release();
    }
    const bool stopping = stopping_.load(std::memory_order_relaxed);
    if (stopping) c.session.request_close();
    // What the output had no room for goes first; nothing is read until
    // it is all out. Then reading resumes.
    if (!send_owed(w, c, now)) return;
    c.clock.unblock(c.session, now, opts_);

    int budget = kReadsPerTurn;
    bool drained = false;
    while (!c.want_close && !drained && budget > 0 && !c.session.deferred() &&
           w.out.size() < opts_.output_mark) {
        const ssize_t n = ::read(c.fd, w.read_buf.get(), runtime::kReadSize);
        if (n > 0) {
            --budget;
            if (c.session.feed({w.read_buf.get(), static_cast<std::size_t>(n)}, w.out,
                               opts_.output_mark) == http::Session::Result::close)
                c.want_close = true;
            // Blocks this worker for the queries; their responses are progress.
            if (db::fill(c.session, w.db ? &*w.db : nullptr, w.out, opts_.output_mark)) {
                now = Clock::now();
                c.clock.touch(now);
            }
            c.clock.track_head(c.session, now, opts_);
            // Level-triggered: if more arrives after this short read, the
            // re-armed connection is ready again at once.
            drained = static_cast<std::size_t>(n) < runtime::kReadSize;
            continue;
        }
        if (n == 0) {
            c.peer_closed = true;
            break;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        w.out.clear();
        return close_connection(c);
    }
    // One send for the batch (and what was deferred, while the socket takes it).
    if (!send_owed(w, c, now)) return;
    if (runtime::ending(c, stopping)) {
        if (c.want_close) return start_linger(w, c);
        return close_connection(c);
    }
    rearm(c, EPOLLIN | EPOLLRDHUP);
}

bool Pool::send_owed(Worker& w, Connection& c, Clock::time_point& now) {
    // A mark's worth a turn: a client whose requests ask for more (a flood)
    // goes back to the queue, behind the others, for the rest.
    std::size_t written = 0;
    while (true) {
        written += w.out.size();
        if (!w.out.empty()) {
            const bool ok = flush(c, w.out);
            if (!w.out.empty()) {
                c.pending.append(w.out.view());
                w.out.clear();
            }
            if (!ok) {
                close_connection(c);
                return false;
            }
            if (!c.pending.empty()) {
                // The socket is full: reading pauses until the client takes
                // this (--send-timeout runs meanwhile).
                c.clock.block(now);
                rearm(c, EPOLLOUT);
                return false;
            }
        }
        if (!c.session.deferred()) return true;
        if (written >= opts_.output_mark) {
            // Written out (the worker's buffer is empty). Ready again at once
            // if writable; if that write filled the socket, it waits for the
            // client like any blocked connection.
            c.clock.block(now);
            rearm(c, EPOLLOUT);
            return false;
        }
        if (db::fill(c.session, w.db ? &*w.db : nullptr, w.out, opts_.output_mark)) {
            now = Clock::now();
            c.clock.touch(now);
        }
        if (c.session.closed()) c.want_close = true;
    }
}

bool Pool::flush(Connection& c, http::ByteBuffer& out) {
    return runtime::send_from(c.fd, out) != runtime::IoResult::closed;
}

void Pool::rearm(Connection& c, std::uint32_t events) {
    // The last thing a worker does with a connection it keeps: from here on
    // another worker may own it.
    // Everything needed is read before the release: after it, c may be gone.
    const int fd = c.fd;
    auto ev = event_for(&c, events | EPOLLONESHOT);
    c.armed.store(true, std::memory_order_release);
    if (epoll_rearm(ep_.get(), fd, &ev) != 0) close_connection(c);
}

void Pool::expire_head(Worker& w, Connection& c) {
    c.clock.clear_head();
    if (!runtime::answer_late_head(c, !c.pending.empty(), w.out)) return close_connection(c);
    const bool whole = flush(c, w.out) && w.out.empty();
    w.out.clear();
    if (!whole) return close_connection(c);
    start_linger(w, c);
}

void Pool::start_linger(Worker& w, Connection& c) {
    // The sweep enforces the deadline.
    if (!runtime::shut_for_linger(c, c.fd, opts_)) return close_connection(c);
    c.clock.linger(Clock::now(), opts_);
    service(w, c, EPOLLIN);
}

void Pool::close_connection(Connection& c) {
    {
        const std::lock_guard lock(registry_mutex_);
        Registry::remove(c);
        --open_;
    }
    ::close(c.fd);  // also leaves the epoll set
    gate_.release();
    std::unique_ptr<Connection> owned(&c);  // the registry's ownership ends here
}

}  // namespace sm::threadpool

int main(int argc, char** argv) {
    using namespace sm;
    static constexpr runtime::ModelOption kOptions[] = {threadpool::kQueueSize,
                                                        threadpool::kBatchReactor};
    return runtime::serve({.name = "threadpool",
                           .worker = &runtime::run<threadpool::Pool>,
                           .listeners = runtime::ListenerLayout::one,
                           .options = kOptions},
                          argc, argv);
}
