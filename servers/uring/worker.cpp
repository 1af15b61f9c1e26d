#include "worker.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/core.h>

#include "runtime/head_list.hpp"
#include "runtime/linger.hpp"
#include "runtime/listen.hpp"
#include "runtime/tuning.hpp"

namespace sm::uring {
namespace {

// Submission slots: one loop iteration submits about one SQE per connection
// that had traffic (its send, maybe a recv re-arm); a fuller batch is
// submitted early by Ring::sqe(), so this bounds nothing but the syscall count.
constexpr unsigned kSqEntries = 1024;
// Completion slots: multishot requests post without a submission each, so
// the queue is sized well above the submission queue. An overflow would cost
// the kernel an allocation per completion and end multishot requests early.
constexpr unsigned kCqEntries = 8192;
// Provided buffers per thread. A multishot recv takes one per completion and
// the loop returns it as soon as its bytes are fed, so every buffer is back
// in the ring at the end of each batch: the count bounds the recv completions
// one batch can hold before some connection sees ENOBUFS (then its recv is
// re-armed after the batch, which costs one SQE). 1024 covers one completion
// for each of the 256-1024 busy connections a benchmark keeps per thread.
// 8 KiB holds a 16-deep pipelined batch (about 1 KiB) many times over and a
// typical request head whole; larger bodies take several completions. The
// memory is 8 MiB of address space per thread, of which small requests touch
// one page per buffer.
constexpr std::size_t kBufferSize = 8 * 1024;
constexpr std::uint16_t kBufferGroup = 0;
// Output a connection may hold (sending + collected) before its recv is
// cancelled: a client that pipelines without reading is then held back by
// TCP flow control, not by our memory. Same bound as server-epoll's batch.
constexpr std::size_t kHighWater = 256 * 1024;
// Its recv is re-armed once the output has drained below this.
constexpr std::size_t kLowWater = 64 * 1024;
// Output buffers grown beyond this by a backlog are freed once drained.
constexpr std::size_t kKeepCapacity = 64 * 1024;
// What a connection object keeps per buffer when it goes back to the pool:
// enough for the next connection's first responses without an allocation,
// while a pool that once held a thousand slow readers holds little memory.
constexpr std::size_t kPooledCapacity = 4 * 1024;
// Completions taken from the queue per peek.
constexpr unsigned kCqeBatch = 256;
using runtime::kAcceptPause;
using runtime::kLimitPause;

constexpr std::uint64_t kOpMask = 7;

std::uint64_t tag(Connection& c, std::uint64_t op) noexcept {
    return reinterpret_cast<std::uintptr_t>(&c) | op;
}

Connection& connection_of(std::uint64_t user_data) noexcept {
    return *reinterpret_cast<Connection*>(static_cast<std::uintptr_t>(user_data & ~kOpMask));
}

std::size_t output_of(const Connection& c) noexcept {
    return c.out.size() + c.sending.size();
}

}  // namespace

Worker::Worker(const runtime::WorkerContext& ctx)
    : opts_(ctx.options),
      listener_(ctx.listener),
      stop_fd_(ctx.stop_fd),
      limit_(ctx.connections),
      cache_(ctx.options.mode, std::time(nullptr)),
      buffers_(ctx.options.uring_buffers, kBufferSize),
      now_(Clock::now()) {
    // Made on the worker thread: with SINGLE_ISSUER it is the only thread
    // that may submit to this ring.
    if (const int rc = ring_.init(kSqEntries, kCqEntries); rc < 0)
        throw std::system_error(-rc, std::generic_category(), "io_uring_setup");
    if (const int rc = buffers_.register_with(ring_, kBufferGroup); rc < 0)
        throw std::system_error(-rc, std::generic_category(), "io_uring_register_buf_ring");
}

void Worker::run() {
    arm_stop();
    arm_accept();
    // Returns with no operation in flight: every connection finalized, the
    // accept and the stop poll completed, every cancel answered.
    while (!(stopping_ && live_ == 0 && inflight_ == 0)) {
        wait();
        now_ = Clock::now();
        // The Date line is re-rendered only when the second changes.
        cache_.refresh(std::time(nullptr));
        reap();
        // Sends, finished connections, recv re-arms: after the whole batch,
        // so one connection's responses to all of it leave in one send.
        while (Connection* c = work_.pop_front())
            work(*c);
        run_timers();
        // A slot freed here or by another thread resumes accepting at once.
        if (paused_at_limit_ && limit_.open() < limit_.max()) try_resume_at_limit();
    }
}

void Worker::wait() {
    // Everything prepared since the last call goes to the kernel in the same
    // io_uring_enter that waits for the next completion.
    const Clock::time_point deadline = next_deadline();
    int rc;
    if (deadline == Clock::time_point::max()) {
        rc = io_uring_submit_and_wait(ring_.get(), 1);
    } else {
        const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::max(deadline - Clock::now(), Clock::duration::zero()));
        __kernel_timespec ts{};
        ts.tv_sec = left.count() / 1'000'000'000;
        ts.tv_nsec = left.count() % 1'000'000'000;
        io_uring_cqe* cqe = nullptr;
        // With IORING_FEAT_EXT_ARG (5.11) the timeout travels with the
        // syscall: no timeout SQE, no extra completion.
        rc = io_uring_submit_and_wait_timeout(ring_.get(), &cqe, 1, &ts, nullptr);
    }
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
        throw std::system_error(-rc, std::generic_category(), "io_uring_enter");
}

void Worker::reap() {
    io_uring_cqe* cqes[kCqeBatch];
    // Completions of requests that finish inline while this batch submits
    // (a full submission queue) are taken in the same pass.
    while (const unsigned n = io_uring_peek_batch_cqe(ring_.get(), cqes, kCqeBatch)) {
        for (unsigned i = 0; i < n; ++i)
            complete(cqes[i]->user_data, cqes[i]->res, cqes[i]->flags);
        io_uring_cq_advance(ring_.get(), n);
        // Buffers fed in this batch go back to the kernel in one store.
        buffers_.publish();
    }
}

void Worker::complete(std::uint64_t user_data, int res, unsigned flags) {
    // liburing's own timeout, on kernels without IORING_FEAT_EXT_ARG.
    if (user_data == LIBURING_UDATA_TIMEOUT) return;
    switch (user_data & kOpMask) {
        case kIgnore: --inflight_; return;  // a cancel: the cancelled request reports itself
        case kStop: --inflight_; return begin_shutdown();
        case kAccept: return on_accept(res, flags);
        case kRecv: return on_recv(connection_of(user_data), res, flags);
        case kSend: return on_send(connection_of(user_data), res);
        default: return;
    }
}

void Worker::arm_stop() {
    // The stop eventfd stays readable once signalled (it is shared by all
    // threads and never drained): a one-shot poll fires once.
    io_uring_sqe* s = ring_.sqe();
    io_uring_prep_poll_add(s, stop_fd_, POLLIN);
    io_uring_sqe_set_data64(s, kStop);
    ++inflight_;
}

void Worker::arm_accept() {
    if (!listener_ || stopping_ || accept_armed_ || accept_paused_) return;
    io_uring_sqe* s = ring_.sqe();
    // Accepted sockets stay blocking: io_uring tries every recv and send
    // without waiting anyway and arms its internal poll on EAGAIN.
    io_uring_prep_multishot_accept(s, listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(s, kAccept);
    accept_armed_ = true;
    ++inflight_;
}

void Worker::cancel_accept() {
    if (!accept_armed_ || accept_cancelling_) return;
    io_uring_sqe* s = ring_.sqe();
    io_uring_prep_cancel64(s, kAccept, 0);
    io_uring_sqe_set_data64(s, kIgnore);
    accept_cancelling_ = true;
    ++inflight_;
}

void Worker::on_accept(int res, unsigned flags) {
    if (!(flags & IORING_CQE_F_MORE)) {
        accept_armed_ = accept_cancelling_ = false;
        --inflight_;
    }
    if (res >= 0) {
        adopt(res);
    } else {
        switch (-res) {
            case ECANCELED:     // ours: at the limit, or stopping
            case ECONNABORTED:  // the client gave up while queued
            case EINTR:
            case EAGAIN:
            case EPROTO:
            case EPERM:  // a firewall rule refused it
                break;
            default:  // EMFILE, ENFILE, ENOBUFS, ENOMEM: out of resources
                if (!paused_at_limit_) pause_accepting(-res);
                break;
        }
    }
    // A multishot accept ends on any error (and on a full completion queue):
    // arm a new one unless accepting is paused.
    if (!accept_armed_) arm_accept();
}

void Worker::adopt(int fd) {
    if (stopping_) {
        // Accepted before the cancel reached the listener: refused like the rest.
        ::close(fd);
        return;
    }
    if (!parked_.empty() || !limit_.try_acquire()) {
        // Over --max-connections: the multishot accept took it before it
        // could be stopped. It waits here, unserved, as it would have in the backlog.
        parked_.push_back(fd);
        return pause_at_limit();
    }
    open_connection(fd);
    // At the limit now: stop taking connections from the backlog.
    if (limit_.open() >= limit_.max()) pause_at_limit();
}

void Worker::open_connection(int fd) {
    runtime::set_nodelay(fd);
    Connection* c;
    if (!free_.empty()) {
        c = free_.back();
        free_.pop_back();
    } else {
        c = &pool_.emplace_back(cache_, opts_.limits);
    }
    c->fd = fd;
    ++live_;
    touch(*c);
    arm_recv(*c);
}

void Worker::pause_at_limit() {
    accept_resume_ = now_ + kLimitPause;
    if (paused_at_limit_) return;
    // New connections wait in the listen backlog until a slot frees: closing
    // a connection here resumes at once, one closed by another thread
    // within kLimitPause.
    paused_at_limit_ = accept_paused_ = true;
    cancel_accept();
    if (limit_log_.allow(now_)) {
        const unsigned long more = limit_log_.take_suppressed();
        runtime::log(
            fmt::format("--max-connections {} reached: new connections wait in the backlog{}",
                        limit_.max(), more ? fmt::format(" ({} more times)", more) : ""));
    }
}

void Worker::try_resume_at_limit() {
    if (!paused_at_limit_ || stopping_) return;
    while (!parked_.empty()) {
        if (!limit_.try_acquire()) {
            accept_resume_ = now_ + kLimitPause;
            return;
        }
        const int fd = parked_.front();
        parked_.pop_front();
        open_connection(fd);
    }
    if (limit_.open() >= limit_.max()) {
        accept_resume_ = now_ + kLimitPause;
        return;
    }
    paused_at_limit_ = accept_paused_ = false;
    // While the cancelled accept is still armed, its last completion re-arms.
    arm_accept();
}

void Worker::pause_accepting(int err) {
    // The multishot accept has ended; with a full descriptor table a new one
    // would fail at once, forever: leave connections in the backlog and look
    // again shortly.
    accept_paused_ = true;
    accept_resume_ = now_ + kAcceptPause;
    if (accept_log_.allow(now_)) {
        const unsigned long more = accept_log_.take_suppressed();
        runtime::log(fmt::format("accept: {}; pausing accepts for {} ms ({} connections open{})",
                                 std::strerror(err), kAcceptPause.count(), live_,
                                 more ? fmt::format(", {} more like this", more) : ""));
    }
}

void Worker::arm_recv(Connection& c) {
    io_uring_sqe* s = ring_.sqe();
    // No buffer of its own: each completion names one from the group.
    io_uring_prep_recv_multishot(s, c.fd, nullptr, 0, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = kBufferGroup;
    io_uring_sqe_set_data64(s, tag(c, kRecv));
    c.recv_armed = true;
    ++c.ops;
    ++inflight_;
}

void Worker::on_recv(Connection& c, int res, unsigned flags) {
    if (!(flags & IORING_CQE_F_MORE)) {
        c.recv_armed = c.recv_cancelling = false;
        --c.ops;
        --inflight_;
    }
    if (flags & IORING_CQE_F_BUFFER) {
        const auto id = static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
        // Lingering, closing, or after the session ended: input is discarded.
        if (res > 0 && !c.closing && !c.lingering && !c.want_close) {
            touch(c);
            const std::string_view data(buffers_.buffer(id), static_cast<std::size_t>(res));
            if (c.recv_paused) {
                // Over the mark: keep the bytes (in order) until the output drains.
                c.held.append(data);
            } else {
                const auto r = c.session.feed(data, c.out);
                track_head(c);
                if (r == http::Session::Result::close) {
                    c.want_close = true;  // what follows is not answered
                } else if (output_of(c) >= kHighWater) {
                    // The output overshoots the mark by one buffer's responses at most.
                    pause_recv(c);
                }
            }
        }
        buffers_.give_back(id);
    }
    if (c.closing) {
        if (c.ops == 0) finalize(c);
        return;
    }
    if (res == 0) {
        // EOF: answer what was received, then close (work() does, once the
        // output is sent). A lingering connection has seen what it waited for.
        c.peer_closed = true;
        if (c.lingering) return close_now(c);
    } else if (res < 0 && res != -ENOBUFS && res != -ECANCELED) {
        return close_now(c);  // ECONNRESET and friends: nobody to answer
    }
    // ENOBUFS: the ring ran dry in this batch; it is full again once the
    // batch's buffers are published, and work() re-arms the recv then.
    if (res == -ENOBUFS) note_ring_dry();
    mark(c);
}

void Worker::note_ring_dry() {
    // Harmless (the recv waits for the next batch) but a sign the ring is
    // small for this load: say so, at most once a second.
    if (!dry_log_.allow(now_)) return;
    const unsigned long more = dry_log_.take_suppressed();
    runtime::log(
        fmt::format("the {} provided buffers of {} KiB ran dry: a recv waits for the next batch{} "
                    "(--uring-buffers sets the count)",
                    buffers_.count(), buffers_.size() / 1024,
                    more ? fmt::format(" ({} more times)", more) : ""));
}

void Worker::pause_recv(Connection& c) {
    c.recv_paused = true;
    if (!c.recv_armed || c.recv_cancelling) return;
    // Completions already on their way (without DEFER_TASKRUN the kernel
    // may drain the whole socket into the ring before the cancel lands) are
    // held, not fed: see feed_held().
    io_uring_sqe* s = ring_.sqe();
    io_uring_prep_cancel64(s, tag(c, kRecv), 0);
    io_uring_sqe_set_data64(s, kIgnore);
    c.recv_cancelling = true;
    ++inflight_;
}

void Worker::start_send(Connection& c) {
    io_uring_sqe* s = ring_.sqe();
    io_uring_prep_send(s, c.fd, c.sending.data(), c.sending.size(), MSG_NOSIGNAL);
    io_uring_sqe_set_data64(s, tag(c, kSend));
    c.send_in_flight = true;
    ++c.ops;
    ++inflight_;
}

void Worker::on_send(Connection& c, int res) {
    c.send_in_flight = false;
    --c.ops;
    --inflight_;
    if (c.closing) {
        if (c.ops == 0) finalize(c);
        return;
    }
    if (res < 0) {
        c.out.clear();  // EPIPE, ECONNRESET: nobody to answer
        return close_now(c);
    }
    // A short send leaves the rest in `sending`; work() sends it next.
    c.sending.consume(static_cast<std::size_t>(res));
    if (res > 0) touch(c);
    if (c.recv_paused && output_of(c) <= kLowWater) feed_held(c);
    mark(c);
}

void Worker::feed_held(Connection& c) {
    // A buffer's worth at a time, as if it had just been received, until the
    // output is over the mark again (recv stays paused) or nothing is held.
    while (!c.held.empty() && output_of(c) < kHighWater) {
        const std::size_t n = std::min(c.held.size(), kBufferSize);
        const auto r = c.session.feed({c.held.data(), n}, c.out);
        track_head(c);
        c.held.consume(n);
        if (r == http::Session::Result::close) {
            c.want_close = true;
            c.held.clear();
        }
    }
    if (!c.held.empty()) return;
    if (c.held.capacity() > kKeepCapacity) c.held.release();
    c.recv_paused = false;  // work() re-arms the recv
}

void Worker::mark(Connection& c) noexcept {
    if (!c.work_hook.linked()) work_.push_back(c);
}

void Worker::work(Connection& c) {
    if (c.closing) return;
    if (!c.send_in_flight && !c.lingering) {
        if (c.sending.empty()) {
            // Everything collected goes out in one send; the drained buffer
            // collects the next responses (nothing is copied).
            std::swap(c.out, c.sending);
            if (c.out.capacity() > kKeepCapacity) c.out.release();  // grown by a backlog
        }
        if (!c.sending.empty()) {
            start_send(c);
        } else if (c.held.empty() &&
                   (c.want_close || c.peer_closed || (stopping_ && c.session.idle()))) {
            // Everything we owe the client is sent.
            finish(c);
            // Closed (and maybe finalized: then fd is -1 and the flags are
            // reset), or lingering: recv is armed below to drain.
            if (c.closing || c.fd < 0) return;
        }
    }
    if (!c.recv_armed && !c.peer_closed && (c.lingering || (!c.want_close && !c.recv_paused)))
        arm_recv(c);
}

void Worker::touch(Connection& c) noexcept {
    if (c.lingering || c.closing) return;
    // Already at the back with this iteration's time: the list stays sorted.
    if (c.last_active == now_ && c.idle_hook.linked()) return;
    c.last_active = now_;
    ActivityList::remove(c);
    by_activity_.push_back(c);
}

void Worker::track_head(Connection& c) noexcept {
    runtime::track_head(in_head_, c, now_ + opts_.header_timeout);
}

void Worker::expire_head(Connection& c) {
    HeadList::remove(c);
    // Responses still queued: the client is not reading, so it gets no 408.
    if (output_of(c) != 0 || c.send_in_flight || !c.held.empty()) return close_now(c);
    c.session.expire_head(c.out);
    c.want_close = true;
    work(c);  // sends the 408, then lingers
}

void Worker::finish(Connection& c) {
    if (c.peer_closed) return close_now(c);
    start_linger(c);
}

void Worker::start_linger(Connection& c) {
    if (!runtime::start_lingering_close(c.fd, opts_.linger_timeout)) return close_now(c);
    c.lingering = true;
    c.recv_paused = false;
    ActivityList::remove(c);  // bounded by the linger deadline instead
    HeadList::remove(c);
    c.linger_deadline = now_ + opts_.linger_timeout;
    lingering_.push_back(c);
}

void Worker::close_now(Connection& c) {
    if (c.closing) return;
    c.closing = true;
    ActivityList::remove(c);
    LingerList::remove(c);
    WorkList::remove(c);
    HeadList::remove(c);
    c.out.clear();
    c.held.clear();
    if (c.ops == 0) return finalize(c);
    // One cancel for the recv and the send alike (matched by descriptor);
    // each reports its own end, and the last one finalizes. The descriptor
    // stays open until then, so the cancel cannot reach a successor.
    io_uring_sqe* s = ring_.sqe();
    io_uring_prep_cancel_fd(s, c.fd, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(s, kIgnore);
    ++inflight_;
}

void Worker::finalize(Connection& c) {
    ::close(c.fd);
    c.fd = -1;
    c.session.reset();
    c.out.clear();
    c.sending.clear();
    c.held.clear();
    if (c.out.capacity() > kPooledCapacity) c.out.release();
    if (c.sending.capacity() > kPooledCapacity) c.sending.release();
    if (c.held.capacity() > kPooledCapacity) c.held.release();
    c.recv_armed = c.recv_cancelling = c.recv_paused = c.send_in_flight = false;
    c.peer_closed = c.want_close = c.lingering = c.closing = false;
    free_.push_back(&c);
    --live_;
    // The slot is noticed by the loop (run()), not here: callers may still
    // hold `c`, which a connection taken from parked_ could reuse at once.
    limit_.release();
}

void Worker::begin_shutdown() {
    if (stopping_) return;
    stopping_ = true;
    shutdown_deadline_ = now_ + opts_.shutdown_timeout;
    // Stop accepting: the listener's file lives until the accept is
    // cancelled (in this iteration's submission); then new connections are
    // refused rather than queued.
    cancel_accept();
    accept_paused_ = paused_at_limit_ = false;
    listener_.reset();
    for (const int fd : parked_)
        ::close(fd);
    parked_.clear();
    for (Connection& c : pool_) {
        if (c.fd < 0 || c.closing || c.lingering) continue;
        // Any response still to come carries "Connection: close".
        c.session.request_close();
        if (!c.send_in_flight && output_of(c) == 0 && c.held.empty() && c.session.idle())
            close_now(c);
        // Otherwise a response is being sent or a request is partly here:
        // it finishes, bounded by shutdown_deadline_.
    }
}

void Worker::run_timers() {
    while (!lingering_.empty() && lingering_.front().linger_deadline <= now_)
        close_now(lingering_.front());
    // Least recently active first: stop at the first one still in time.
    while (!by_activity_.empty() && by_activity_.front().last_active + opts_.idle_timeout <= now_)
        close_now(by_activity_.front());
    // Oldest head first, likewise.
    while (!in_head_.empty() && in_head_.front().head_deadline <= now_)
        expire_head(in_head_.front());
    if (accept_paused_ && now_ >= accept_resume_) {
        if (paused_at_limit_) {
            try_resume_at_limit();
        } else {
            accept_paused_ = false;
            arm_accept();
        }
    }
    if (stopping_ && now_ >= shutdown_deadline_) {
        for (Connection& c : pool_)
            if (c.fd >= 0) close_now(c);
    }
}

Clock::time_point Worker::next_deadline() {
    Clock::time_point next = Clock::time_point::max();
    if (!lingering_.empty()) next = std::min(next, lingering_.front().linger_deadline);
    if (!by_activity_.empty())
        next = std::min(next, by_activity_.front().last_active + opts_.idle_timeout);
    if (!in_head_.empty()) next = std::min(next, in_head_.front().head_deadline);
    if (accept_paused_) next = std::min(next, accept_resume_);
    if (stopping_) next = std::min(next, shutdown_deadline_);
    return next;
}

void run_worker(const runtime::WorkerContext& ctx) {
    Worker(ctx).run();
}

}  // namespace sm::uring
