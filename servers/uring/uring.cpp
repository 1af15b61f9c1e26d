#include "uring.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/core.h>

#include "runtime/send_buffers.hpp"
#include "runtime/tuning.hpp"
#include "uring/probe.hpp"
#include "uring/server_shape.hpp"

namespace sm::uring {
namespace {

// What a connection object keeps per buffer when it goes back to the pool:
// enough for the next connection's first responses without an allocation,
// while a pool that once held a thousand slow readers holds little memory.
constexpr std::size_t kPooledCapacity = 4 * 1024;

using server_shape::kOpMask;
using server_shape::tag;
constexpr auto connection_of = server_shape::connection_of<Connection>;

using runtime::output_of;
using runtime::trim;

}  // namespace

Worker::Worker(const runtime::WorkerContext& ctx)
    : listener_(ctx.listener),
      stop_(ctx.stop),
      cache_(ctx.options.mode, std::time(nullptr), ctx.options.workloads()),
      conns_(ctx, cache_),
      buffers_(server_shape::make_buffers(ctx.options)),
      now_(Clock::now()) {
    server_shape::set_up(ring_, buffers_);
    if (!ctx.options.db.empty())
        db_.emplace(ctx.options.db, ctx.options.db_connections, static_cast<db::Loop&>(*this),
                    ctx.options.idle_timeout);
}

void Worker::run() {
    // The stop signal stays readable once set (it is shared by all threads
    // and never drained): a one-shot poll fires once.
    io_uring_sqe* s = ring_.sqe();
    io_uring_prep_poll_add(s, stop_.handle(), POLLIN);
    queued(s, kStop);
    arm_accept();
    // Returns with no operation in flight: every connection finalized, the
    // accept and the stop poll completed, every cancel answered.
    while (!(conns_.finished() && inflight_ == 0)) {
        // The last connection is gone: the database's polls are cancelled
        // with its client, so that nothing stays in flight.
        if (conns_.finished() && db_) db_.reset();
        wait();
        now_ = Clock::now();
        // The Date line is re-rendered only when the second changes.
        cache_.refresh(std::time(nullptr));
        reap(ring_, buffers_,
             [this](std::uint64_t data, int res, unsigned flags) { complete(data, res, flags); });
        // Sends, finished connections, recv re-arms: after the whole batch,
        // so one connection's responses to all of it leave in one send.
        run_work();
        conns_.expire(
            now_, [this](Connection& c) { close_now(c); },
            [this](Connection& c) { expire_head(c); });
        run_work();  // what expiring marked
        // A slot freed here or by another thread resumes accepting at once.
        if (conns_.gate.reopen_due(now_)) resume_accepting();
    }
}

void Worker::wait() {
    // Everything prepared since the last call goes to the kernel in the same
    // io_uring_enter that waits for the next completion.
    Clock::time_point deadline = conns_.next_deadline();
    if (db_) deadline = std::min(deadline, db_->next_deadline());
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

void Worker::complete(std::uint64_t user_data, int res, unsigned flags) {
    switch (user_data & kOpMask) {
        case kIgnore: --inflight_; return;  // a cancel: the cancelled request reports itself
        case kStop: --inflight_; return begin_shutdown();
        case kAccept: return on_accept(res, flags);
        case kRecv: return on_recv(connection_of(user_data), res, flags);
        case kSend: return on_send(connection_of(user_data), res);
        case kDb: return on_db(user_data, res);
        default: return;
    }
}

void Worker::queued(io_uring_sqe* s, std::uint64_t user_data) noexcept {
    io_uring_sqe_set_data64(s, user_data);
    ++inflight_;
}

// --- Accepting ------------------------------------------------------------------

void Worker::arm_accept() {
    if (!listener_ || !conns_.gate.open() || accept_armed_) return;
    io_uring_sqe* s = ring_.sqe();
    // Accepted sockets stay blocking: io_uring tries every recv and send
    // without waiting anyway and arms its internal poll on EAGAIN.
    io_uring_prep_multishot_accept(s, listener_.handle(), nullptr, nullptr, SOCK_CLOEXEC);
    queued(s, kAccept);
    accept_armed_ = true;
}

void Worker::cancel_accept() {
    if (!accept_armed_ || accept_cancelling_) return;
    io_uring_sqe* s = ring_.sqe();
    io_uring_prep_cancel64(s, kAccept, 0);
    queued(s, kIgnore);
    accept_cancelling_ = true;
}

void Worker::on_accept(int res, unsigned flags) {
    if (!(flags & IORING_CQE_F_MORE)) {
        accept_armed_ = accept_cancelling_ = false;
        --inflight_;
    }
    // ECANCELED is ours (at the limit, or stopping); an exhausted table
    // closes the gate for a while.
    if (res >= 0) {
        adopt(res);
    } else if (res != -ECANCELED) {
        conns_.gate.refused(-res, now_);
    }
    // A multishot accept ends on any error (and on a full completion queue):
    // arm a new one unless the gate is closed.
    if (!accept_armed_) arm_accept();
}

void Worker::adopt(int fd) {
    if (conns_.stopping()) {
        // Accepted before the cancel reached the listener: refused like the rest.
        ::close(fd);
        return;
    }
    parked_.take(
        conns_.gate, fd, now_, [this](int s) { open_connection(s); },
        [this] { pause_at_limit(); });
}

void Worker::open_connection(int fd) {
    runtime::set_nodelay(fd);
    Connection& c = conns_.open(now_);
    c.fd = fd;
    arm_recv(c);
}

void Worker::pause_at_limit() {
    conns_.gate.close_at_limit(now_);
    cancel_accept();
}

void Worker::resume_accepting() {
    switch (parked_.resume(conns_.gate, now_, [this](int fd) { open_connection(fd); })) {
        case Parked::Resumed::waiting: return;
        case Parked::Resumed::at_limit: return pause_at_limit();
        case Parked::Resumed::reopened:
            // While the cancelled accept is still armed, its last completion re-arms.
            return arm_accept();
    }
}

// --- Receiving and sending ------------------------------------------------------

void Worker::arm_recv(Connection& c) {
    io_uring_sqe* s = ring_.sqe();
    // No buffer of its own: each completion names one from the group. A
    // connection that once outran its output gets one buffer per recv, only
    // when its output has room: a multishot recv would let the kernel fill
    // buffer after buffer of the ring with its flood before the loop can
    // stop it, and the others' recvs would find the ring dry.
    server_shape::prep_recv(s, c.fd, !c.single_shot);
    queued(s, tag(c, kRecv));
    c.recv_armed = true;
    c.multishot_armed = !c.single_shot;
    ++c.ops;
}

void Worker::on_recv(Connection& c, int res, unsigned flags) {
    if (!(flags & IORING_CQE_F_MORE)) {
        c.recv_armed = c.recv_cancelling = c.multishot_armed = false;
        --c.ops;
        --inflight_;
    }
    if (flags & IORING_CQE_F_BUFFER) {
        const auto id = static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
        // Lingering, closing, or after the session ended: input is discarded.
        if (res > 0 && !c.closing && !c.lingering() && !c.want_close) {
            conns_.deadlines.touch(c, now_);
            // Every byte is fed (completions that arrive after the recv is
            // paused too: the output stays bounded, the session defers what
            // it has no room for).
            feed(c, {buffers_.buffer(id), static_cast<std::size_t>(res)});
            if (!c.want_close && (output_of(c) >= conns_.options().output_mark || c.session.owes()))
                pause_recv(c);
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
        if (c.lingering()) return close_now(c);
    } else if (res < 0 && res != -ENOBUFS && res != -ECANCELED) {
        return close_now(c);  // ECONNRESET and friends: nobody to answer
    }
    // ENOBUFS: the ring ran dry in this batch; it is full again once the
    // batch's buffers are published, and work() re-arms the recv then.
    if (res == -ENOBUFS) note_ring_dry();
    mark(c);
}

void Worker::note_ring_dry() {
    // The ring grows to what the load keeps in flight (Residency::populated).
    if (buffers_.grow()) return;
    // At --uring-buffers: harmless (the recv waits for the next batch) but a
    // sign the ring is small for this load.
    dry_log_(now_, [&] {
        return fmt::format(
            "the {} provided buffers of {} KiB ran dry: a recv waits for the next batch "
            "(--uring-buffers sets the count)",
            buffers_.count(), buffers_.size() / 1024);
    });
}

void Worker::pause_recv(Connection& c) {
    // From now on one buffer per recv (see arm_recv).
    if (c.session.deferred() || output_of(c) >= conns_.options().output_mark) c.single_shot = true;
    if (!c.recv_armed || c.recv_cancelling || !c.multishot_armed) return;
    // Completions already on their way (without DEFER_TASKRUN the kernel
    // may drain the socket into the ring before the cancel lands) are fed.
    io_uring_sqe* s = ring_.sqe();
    io_uring_prep_cancel64(s, tag(c, kRecv), 0);
    queued(s, kIgnore);
    c.recv_cancelling = true;
}

void Worker::feed(Connection& c, std::string_view data) {
    const auto r = c.session.feed(
        data, c.out, runtime::feed_limit(c, data.size(), conns_.options().output_mark, spare_));
    conns_.deadlines.track_head(c, now_);
    if (r == http::Session::Result::close) c.want_close = true;  // what follows is not answered
    if (c.session.waiting()) db_->submit_jobs(&c, c.session);
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
    if (runtime::consume_sent(c, static_cast<std::size_t>(res)))
        conns_.deadlines.touch(c, now_);  // work() sends the rest
    mark(c);
}

void Worker::work(Connection& c) {
    if (c.closing) return;
    bool receive = true;
    if (!c.lingering()) {
        receive = runtime::settle_output(c, conns_.deadlines, now_, conns_.options().output_mark);
        if (c.session.waiting()) db_->submit_jobs(&c, c.session);
    }
    if (!c.send_in_flight && !c.lingering()) {
        runtime::take_collected(c, spare_);
        if (!c.sending.empty()) {
            io_uring_sqe* s = ring_.sqe();
            io_uring_prep_send(s, c.fd, c.sending.data(), c.sending.size(), MSG_NOSIGNAL);
            queued(s, tag(c, kSend));
            c.send_in_flight = true;
            ++c.ops;
        } else if (conns_.ending(c)) {
            // Everything we owe the client is sent.
            finish(c);
            // Closed (and maybe finalized: then fd is -1 and the flags are
            // reset), or lingering: recv is armed below to drain.
            if (c.closing || c.fd < 0) return;
        }
    }
    if (!receive) pause_recv(c);
    if (runtime::wants_receive(c, c.recv_armed, receive)) arm_recv(c);
}

// --- Closing ----------------------------------------------------------------------

void Worker::expire_head(Connection& c) {
    const bool queued = output_of(c) != 0 || c.send_in_flight || c.session.owes();
    if (!runtime::answer_late_head(c, queued, c.out)) return close_now(c);
    work(c);  // sends the 408, then lingers
}

void Worker::finish(Connection& c) {
    if (!conns_.start_linger(c, c.fd, now_)) close_now(c);
}

void Worker::close_now(Connection& c) {
    if (c.closing) return;
    c.closing = true;
    runtime::Deadlines<Connection>::forget(c);
    WorkList::remove(c);
    c.out.clear();
    if (c.ops == 0) return finalize(c);
    // One cancel for the recv and the send alike (matched by descriptor);
    // each reports its own end, and the last one finalizes. The descriptor
    // stays open until then, so the cancel cannot reach a successor.
    io_uring_sqe* s = ring_.sqe();
    io_uring_prep_cancel_fd(s, c.fd, IORING_ASYNC_CANCEL_ALL);
    queued(s, kIgnore);
}

void Worker::finalize(Connection& c) {
    ::close(c.fd);
    c.fd = -1;
    trim(c.out, kPooledCapacity);
    trim(c.sending, kPooledCapacity);
    c.recv_armed = c.recv_cancelling = c.multishot_armed = c.single_shot = c.send_in_flight = false;
    c.closing = false;
    // The freed slot is noticed by the loop (run()), not here: callers may
    // still hold `c`, which a connection taken from parked_ could reuse at once.
    conns_.closed(c);
    conns_.recycle(c);
}

// --- The database ---------------------------------------------------------------

void Worker::run_work() {
    while (true) {
        if (db_) {
            db_->expire(now_);
            db_->flush();  // this batch's jobs go out together
        }
        if (work_.empty()) return;
        while (Connection* c = work_.pop_front())
            work(*c);
    }
}

void Worker::deliver(void* owner, const http::Job& job, const http::JobResult& result) noexcept {
    Connection& c = *static_cast<Connection*>(owner);
    // Closing: its cancels are out, it is finalized when they are back.
    if (c.closing) return;
    spare_.provide(c.out);
    if (!conns_.complete_job(c, job, result, c.out, now_)) return;
    // work() sends, renders what was deferred meanwhile, re-arms the recv,
    // or finishes.
    mark(c);
}

void Worker::watch(int fd, bool read, bool write) noexcept {
    auto it = std::find_if(db_polls_.begin(), db_polls_.end(),
                           [fd](const DbPoll& p) { return p.fd == fd; });
    if (it == db_polls_.end())
        it = std::find_if(db_polls_.begin(), db_polls_.end(),
                          [](const DbPoll& p) { return p.fd == -1; });
    if (it == db_polls_.end()) return;
    const unsigned events = (read ? POLLIN : 0U) | (write ? POLLOUT : 0U);
    const auto slot = static_cast<std::size_t>(it - db_polls_.begin());
    if (it->fd == fd && it->armed && it->events == events) return;
    if (it->armed) {
        // Another mask: the armed poll is cancelled (its completion is of an
        // old generation) and a new one armed.
        io_uring_sqe* s = ring_.sqe();
        io_uring_prep_cancel64(s, Worker::db_tag(slot, it->generation), 0);
        queued(s, kIgnore);
        ++it->generation;
        it->armed = false;
    }
    it->fd = fd;
    it->events = events;
    arm_db(slot);
}

void Worker::unwatch(int fd) noexcept {
    for (std::size_t slot = 0; slot < db_polls_.size(); ++slot) {
        DbPoll& p = db_polls_[slot];
        if (p.fd != fd) continue;
        if (p.armed) {
            io_uring_sqe* s = ring_.sqe();
            io_uring_prep_cancel64(s, db_tag(slot, p.generation), 0);
            queued(s, kIgnore);
        }
        ++p.generation;
        p.armed = false;
        p.fd = -1;
    }
}

void Worker::arm_db(std::size_t slot) noexcept {
    DbPoll& p = db_polls_[slot];
    if (p.armed || p.fd < 0 || p.events == 0) return;
    io_uring_sqe* s = ring_.sqe();
    io_uring_prep_poll_add(s, p.fd, p.events);
    queued(s, db_tag(slot, p.generation));
    p.armed = true;
}

void Worker::on_db(std::uint64_t user_data, int res) {
    --inflight_;
    const auto slot = static_cast<std::size_t>((user_data >> 8) & 0xff);
    const auto generation = static_cast<std::uint32_t>(user_data >> 32);
    if (slot >= db_polls_.size()) return;
    DbPoll& p = db_polls_[slot];
    if (p.generation != generation || !db_) return;  // unwatched or re-armed since
    p.armed = false;
    const auto ready = static_cast<unsigned>(res < 0 ? POLLERR : res);
    const int fd = p.fd;
    db_->on_ready(fd, (ready & (POLLIN | POLLERR | POLLHUP)) != 0,
                  (ready & (POLLOUT | POLLERR | POLLHUP)) != 0);
    arm_db(slot);  // still watched (on_ready may have changed what): again
}

void Worker::begin_shutdown() {
    // Stop accepting: the listener's file lives until the accept is
    // cancelled (in this iteration's submission); then new connections are
    // refused rather than queued.
    cancel_accept();
    listener_.close();
    parked_.close_all([](int fd) { ::close(fd); });
    conns_.begin_shutdown(
        now_,
        [](const Connection& c) {
            return !c.send_in_flight && output_of(c) == 0;
        },
        [this](Connection& c) { close_now(c); });
}

namespace {

// The shared probe, with this model's way out; a fallback from the
// preferred ring setup goes to the log, which says how the server runs.
std::optional<std::string> model_probe(const runtime::ServerOptions& /*options*/) {
    return probe({.alternative = "server-epoll serves the same endpoints without it",
                  .note = &runtime::log});
}

}  // namespace
}  // namespace sm::uring

int main(int argc, char** argv) {
    using namespace sm;
    static constexpr runtime::ModelOption kOptions[] = {uring::server_shape::kUringBuffers};
    return runtime::serve({.name = "uring",
                           .worker = &runtime::run<uring::Worker>,
                           .probe = &uring::model_probe,
                           .options = kOptions},
                          argc, argv);
}
