#include "reactor.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <system_error>

#include <fmt/core.h>

#include "runtime/epoll_util.hpp"
#include "runtime/head_list.hpp"
#include "runtime/linger.hpp"
#include "runtime/listen.hpp"
#include "runtime/tuning.hpp"

namespace sm::epoll {
namespace {

// Full reads one event may do before the connection yields to the others
// (it continues from the ready queue in the next loop iteration).
constexpr int kReadsPerEvent = 16;
// Lingering reads per event, for the same reason.
constexpr int kLingerReadsPerEvent = 4;

// epoll_event.data.ptr is a Connection* except for these two tags.
char listen_tag;
char stop_tag;

using runtime::event_for;
using runtime::throw_errno;

}  // namespace

Reactor::Reactor(const runtime::WorkerContext& ctx)
    : opts_(ctx.options),
      listener_(ctx.listener),
      stop_fd_(ctx.stop_fd),
      limit_(ctx.connections),
      ep_(::epoll_create1(EPOLL_CLOEXEC)),
      cache_(ctx.options.mode, std::time(nullptr)),
      read_buf_(std::make_unique_for_overwrite<char[]>(runtime::kReadSize)),
      out_(runtime::kBatchOutput + runtime::kReadSize) {
    if (!ep_) throw_errno("epoll_create1");
    // The listener is level-triggered: a bounded accept batch leaves the rest
    // for the next wake-up without losing them.
    auto lev = event_for(&listen_tag, EPOLLIN);
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, listener_.get(), &lev) != 0)
        throw_errno("epoll_ctl(listener)");
    auto sev = event_for(&stop_tag, EPOLLIN);
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, stop_fd_, &sev) != 0) throw_errno("epoll_ctl(stop)");
}

void Reactor::run() {
    epoll_event events[runtime::kMaxEvents];
    while (!(stopping_ && live_ == 0)) {
        const int n = ::epoll_wait(ep_.get(), events, runtime::kMaxEvents, next_timeout_ms());
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_errno("epoll_wait");
        }
        // The Date line is re-rendered only when the second changes.
        cache_.refresh(std::time(nullptr));
        now_ = Clock::now();
        for (int i = 0; i < n; ++i)
            dispatch(events[i]);
        run_ready();
        run_timers();
        recycle_closed();
    }
}

void Reactor::dispatch(const epoll_event& ev) {
    if (ev.data.ptr == &listen_tag) return accept_connections();
    if (ev.data.ptr == &stop_tag) return begin_shutdown();
    Connection& c = *static_cast<Connection*>(ev.data.ptr);
    // Closed earlier in this batch (by a timer or shutdown): its object is
    // recycled only after the batch, so this stale event is harmless.
    if (c.fd < 0) return;
    if (c.lingering) return drain_linger(c);
    if (ev.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c.input_ready = true;
    if (ev.events & (EPOLLRDHUP | EPOLLHUP)) c.peer_fin_seen = true;
    if ((ev.events & EPOLLOUT) && !c.pending.empty() && !write_pending(c)) return;
    // While responses wait for the socket, reading pauses: a client that
    // pipelines without reading is held back by TCP flow control, not by our memory.
    if (c.input_ready && c.pending.empty()) service(c);
}

void Reactor::accept_connections() {
    for (int i = 0; i < runtime::kAcceptBatch && listener_; ++i) {
        if (!limit_.try_acquire()) return pause_accepting_at_limit();
        const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            const int err = errno;
            limit_.release();
            switch (err) {
                case EAGAIN: return;
                case EINTR:
                case ECONNABORTED:  // the client gave up while queued
                case EPROTO:
                case EPERM:  // a firewall rule refused it
                    continue;
                default:  // EMFILE, ENFILE, ENOBUFS, ENOMEM: out of resources
                    return pause_accepting(err);
            }
        }
        runtime::set_nodelay(fd);
        Connection* c;
        if (!free_.empty()) {
            c = free_.back();
            free_.pop_back();
        } else {
            c = &pool_.emplace_back(cache_, opts_.limits);
        }
        c->fd = fd;
        // Edge-triggered for both directions, registered once: no epoll_ctl
        // per short write, no EPOLL_CTL_MOD ever.
        auto ev = event_for(c, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
        if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
            const int err = errno;
            ::close(fd);
            c->fd = -1;
            free_.push_back(c);
            limit_.release();
            return pause_accepting(err);
        }
        ++live_;
        touch(*c);
    }
}

void Reactor::touch(Connection& c) noexcept {
    c.last_active = now_;
    ActivityList::remove(c);
    by_activity_.push_back(c);
}

void Reactor::track_head(Connection& c) noexcept {
    runtime::track_head(in_head_, c, now_ + opts_.header_timeout);
}

void Reactor::expire_head(Connection& c) {
    HeadList::remove(c);
    // Responses still queued: the client is not reading, so it gets no 408.
    if (!c.pending.empty()) return close_now(c);
    c.session.expire_head(out_);
    ssize_t w;
    do {
        w = ::send(c.fd, out_.data(), out_.size(), MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    const bool whole = w == static_cast<ssize_t>(out_.size());
    out_.clear();
    if (!whole) return close_now(c);
    c.want_close = true;
    start_linger(c);
}

void Reactor::pause_accepting_at_limit() {
    // New connections wait in the listen backlog until a slot frees: closing a
    // connection here resumes at once, one closed by another thread within runtime::kLimitPause.
    ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, listener_.get(), nullptr);
    accept_paused_ = paused_at_limit_ = true;
    accept_resume_ = now_ + runtime::kLimitPause;
    if (limit_log_.allow(now_)) {
        const unsigned long more = limit_log_.take_suppressed();
        runtime::log(
            fmt::format("--max-connections {} reached: new connections wait in the backlog{}",
                        limit_.max(), more ? fmt::format(" ({} more times)", more) : ""));
    }
}

void Reactor::pause_accepting(int err) {
    // A level-triggered listener with a full fd table would wake us forever:
    // leave connections in the backlog and look again shortly.
    ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, listener_.get(), nullptr);
    accept_paused_ = true;
    paused_at_limit_ = false;
    const auto now = Clock::now();
    accept_resume_ = now + runtime::kAcceptPause;
    if (accept_log_.allow(now)) {
        const unsigned long more = accept_log_.take_suppressed();
        runtime::log(fmt::format("accept: {}; pausing accepts for {} ms ({} connections open{})",
                                 std::strerror(err), runtime::kAcceptPause.count(), live_,
                                 more ? fmt::format(", {} more like this", more) : ""));
    }
}

void Reactor::resume_accepting() {
    accept_paused_ = paused_at_limit_ = false;
    if (!listener_) return;
    auto ev = event_for(&listen_tag, EPOLLIN);
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, listener_.get(), &ev) != 0) pause_accepting(errno);
}

void Reactor::service(Connection& c) {
    int budget = kReadsPerEvent;
    while (true) {
        // Read phase: gather one batch of responses in the thread's buffer.
        bool drained = false;
        while (true) {
            const ssize_t n = ::read(c.fd, read_buf_.get(), runtime::kReadSize);
            if (n > 0) {
                if (budget == kReadsPerEvent) touch(c);
                --budget;
                const auto r = c.session.feed({read_buf_.get(), static_cast<std::size_t>(n)}, out_);
                track_head(c);
                if (r == http::Session::Result::close) {
                    c.want_close = true;  // what follows is not answered
                    drained = true;
                    break;
                }
                // A short read emptied the socket; with edge triggering, data
                // that arrives later raises a new event. This saves the read
                // that would only return EAGAIN. Not so once the client's FIN
                // came with the same edge: no new event will announce the EOF.
                if (static_cast<std::size_t>(n) < runtime::kReadSize && !c.peer_fin_seen) {
                    drained = true;
                    break;
                }
                if (out_.size() >= runtime::kBatchOutput || budget <= 0) break;
                continue;
            }
            if (n == 0) {
                c.peer_closed = true;
                drained = true;
                break;
            }
            if (errno == EAGAIN) {
                drained = true;
                break;
            }
            if (errno == EINTR) continue;
            out_.clear();  // ECONNRESET and friends: nobody to answer
            return close_now(c);
        }
        c.input_ready = !drained;

        // Write phase: one send() for the whole batch.
        if (!out_.empty()) {
            ssize_t w;
            do {
                w = ::send(c.fd, out_.data(), out_.size(), MSG_NOSIGNAL);
            } while (w < 0 && errno == EINTR);
            if (w < 0 && errno != EAGAIN) {
                out_.clear();
                return close_now(c);
            }
            const auto sent = static_cast<std::size_t>(w < 0 ? 0 : w);
            if (sent < out_.size()) {
                // The socket is full: keep the rest; EPOLLOUT continues it.
                out_.consume(sent);
                c.pending.append(out_.view());
                out_.clear();
                return;
            }
            out_.clear();
        }
        if (c.want_close || c.peer_closed) return finish(c);
        if (drained) return;
        if (budget <= 0) {
            if (!c.ready_hook.linked()) ready_.push_back(c);
            return;
        }
    }
}

bool Reactor::write_pending(Connection& c) {
    while (!c.pending.empty()) {
        const ssize_t w = ::send(c.fd, c.pending.data(), c.pending.size(), MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return true;
            close_now(c);
            return false;
        }
        c.pending.consume(static_cast<std::size_t>(w));
        touch(c);
    }
    // Drained: a backlog of that size was exceptional, give the memory back.
    c.pending.release();
    if (c.want_close || c.peer_closed || (stopping_ && c.session.idle())) {
        finish(c);
        return false;
    }
    return true;
}

void Reactor::finish(Connection& c) {
    // Everything we owe the client is written (or the client is gone).
    if (c.peer_closed) return close_now(c);
    start_linger(c);
}

void Reactor::start_linger(Connection& c) {
    if (!runtime::start_lingering_close(c.fd, opts_.linger_timeout)) return close_now(c);
    c.lingering = true;
    c.linger_deadline = Clock::now() + opts_.linger_timeout;
    ActivityList::remove(c);  // bounded by the linger deadline instead
    HeadList::remove(c);
    lingering_.push_back(c);
    drain_linger(c);
}

void Reactor::drain_linger(Connection& c) {
    for (int i = 0; i < kLingerReadsPerEvent; ++i) {
        const ssize_t n = ::read(c.fd, read_buf_.get(), runtime::kReadSize);
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        return close_now(c);  // EOF: the client closed; or an error
    }
    if (!c.ready_hook.linked()) ready_.push_back(c);
}

void Reactor::close_now(Connection& c) {
    ::close(c.fd);  // also removes it from the epoll set (never dup'ed)
    c.fd = -1;
    ReadyList::remove(c);
    LingerList::remove(c);
    ActivityList::remove(c);
    HeadList::remove(c);
    c.pending.clear();
    c.pending.release();
    closed_.push_back(&c);
    --live_;
    limit_.release();
    if (paused_at_limit_) resume_accepting();
}

void Reactor::recycle_closed() {
    for (Connection* c : closed_) {
        c->session.reset();
        c->input_ready = c->peer_closed = c->peer_fin_seen = c->want_close = c->lingering = false;
        free_.push_back(c);
    }
    closed_.clear();
}

void Reactor::run_ready() {
    // Each queued connection gets one more turn; those that still have input
    // queue themselves again for the next iteration.
    ReadyList batch;
    ready_.splice_into(batch);
    while (Connection* c = batch.pop_front()) {
        if (c->fd < 0) continue;
        if (c->lingering) {
            drain_linger(*c);
        } else if (c->pending.empty()) {
            service(*c);
        }
    }
}

void Reactor::begin_shutdown() {
    if (stopping_) return;
    stopping_ = true;
    shutdown_deadline_ = Clock::now() + opts_.shutdown_timeout;
    // The stop eventfd stays readable (it is shared by all threads and never
    // drained): stop watching it or every epoll_wait returns at once.
    ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, stop_fd_, nullptr);
    // Close the listener first: new connections are refused, not queued.
    if (!accept_paused_) ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, listener_.get(), nullptr);
    listener_.reset();
    for (Connection& c : pool_) {
        if (c.fd < 0 || c.lingering) continue;
        // Any response still to come carries "Connection: close".
        c.session.request_close();
        if (c.pending.empty() && c.session.idle() && !c.ready_hook.linked()) close_now(c);
        // Otherwise a response is being written or a request is partly here:
        // it finishes, bounded by shutdown_deadline_.
    }
}

void Reactor::run_timers() {
    const auto now = now_;
    while (!lingering_.empty() && lingering_.front().linger_deadline <= now)
        close_now(lingering_.front());
    // Least recently active first: stop at the first one still in time.
    while (!by_activity_.empty() && by_activity_.front().last_active + opts_.idle_timeout <= now)
        close_now(by_activity_.front());
    // Oldest head first, likewise.
    while (!in_head_.empty() && in_head_.front().head_deadline <= now)
        expire_head(in_head_.front());
    if (accept_paused_ && now >= accept_resume_) resume_accepting();
    if (stopping_ && now >= shutdown_deadline_) {
        for (Connection& c : pool_)
            if (c.fd >= 0) close_now(c);
    }
}

int Reactor::next_timeout_ms() {
    if (!ready_.empty()) return 0;
    if (lingering_.empty() && by_activity_.empty() && !accept_paused_ && !stopping_) return -1;
    Clock::time_point next = Clock::time_point::max();
    if (!lingering_.empty()) next = lingering_.front().linger_deadline;
    if (!in_head_.empty() && in_head_.front().head_deadline < next)
        next = in_head_.front().head_deadline;
    if (!by_activity_.empty() && by_activity_.front().last_active + opts_.idle_timeout < next)
        next = by_activity_.front().last_active + opts_.idle_timeout;
    if (accept_paused_ && accept_resume_ < next) next = accept_resume_;
    if (stopping_ && shutdown_deadline_ < next) next = shutdown_deadline_;
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
    return wait.count() <= 0 ? 0 : static_cast<int>(std::min<long long>(wait.count(), 60'000));
}

void run_worker(const runtime::WorkerContext& ctx) {
    Reactor(ctx).run();
}

}  // namespace sm::epoll
