#include "epoll.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "runtime/posix/epoll_util.hpp"
#include "runtime/posix/socket_io.hpp"
#include "runtime/tuning.hpp"

namespace sm::epoll {
namespace {

// A connection that spent its turn's reads (runtime::kReadsPerTurn)
// continues from the ready queue in the next loop iteration.
using runtime::kReadsPerTurn;

// epoll_event.data.ptr is a Connection* except for these two tags.
char listen_tag;
char stop_tag;

using runtime::event_for;
using runtime::throw_errno;

}  // namespace

Reactor::Reactor(const runtime::WorkerContext& ctx)
    : stop_(ctx.stop),
      ep_(runtime::new_epoll(ctx.stop, &stop_tag)),
      cache_(ctx.options.mode, std::time(nullptr), ctx.options.workloads()),
      conns_(ctx, cache_),
      listener_(ep_.get(), ctx.listener, conns_.gate, &listen_tag),
      read_buf_(std::make_unique_for_overwrite<char[]>(runtime::kReadSize)),
      out_(2 * ctx.options.output_mark),
      now_(Clock::now()) {
    db_fds_.fill(-1);
    if (!ctx.options.db.empty())
        db_.emplace(ctx.options.db, ctx.options.db_connections, static_cast<db::Loop&>(*this),
                    ctx.options.idle_timeout);
}

void Reactor::run() {
    epoll_event events[runtime::kMaxEvents];
    while (!conns_.finished()) {
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
        if (db_) {
            db_->expire(now_);
            db_->flush();  // the jobs of this batch go out together
        }
        conns_.expire(
            now_, [this](Connection& c) { close_now(c); },
            [this](Connection& c) { expire_head(c); });
        listener_.reopen_if_due(now_);
        // Closed in this batch: events for them may still be in `events`
        // (stale, ignored by dispatch) until here.
        for (Connection* c : closed_) {
            c->input_ready = c->peer_fin_seen = false;
            conns_.recycle(*c);
        }
        closed_.clear();
    }
}

void Reactor::dispatch(const epoll_event& ev) {
    if (ev.data.ptr == &listen_tag)
        return listener_.accept(now_, [this](int fd) { return adopt(fd); });
    if (ev.data.ptr == &stop_tag) return begin_shutdown();
    if (ev.data.ptr >= db_tags_.data() && ev.data.ptr < db_tags_.data() + db_tags_.size()) {
        const auto slot = static_cast<std::size_t>(static_cast<const char*>(ev.data.ptr) - db_tags_.data());
        return db_->on_ready(db_fds_[slot], (ev.events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0,
                             (ev.events & EPOLLOUT) != 0);
    }
    Connection& c = *static_cast<Connection*>(ev.data.ptr);
    // Closed earlier in this batch (by a timer or shutdown): its object is
    // recycled only after the batch, so this stale event is harmless.
    if (!c.open) return;
    if (c.lingering()) return drain_linger(c);
    if (ev.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c.input_ready = true;
    if (ev.events & (EPOLLRDHUP | EPOLLHUP)) c.peer_fin_seen = true;
    if ((ev.events & EPOLLOUT) && !c.pending.empty() && !write_pending(c)) return;
    // While responses wait for the socket or the database, reading pauses: a
    // client that pipelines without reading is held back by TCP flow control,
    // not by our memory.
    if ((c.input_ready || c.session.deferred()) && c.pending.empty() && !c.session.waiting())
        service(c);
}

bool Reactor::adopt(int fd) {
    Connection& c = conns_.open(now_);
    c.fd = fd;
    // Edge-triggered for both directions, registered once: no epoll_ctl
    // per short write, no EPOLL_CTL_MOD ever.
    auto ev = event_for(&c, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev) == 0) return true;
    const int err = errno;
    close_now(c);
    return conns_.gate.refused(err, now_) != runtime::AcceptError::exhausted;
}

void Reactor::service(Connection& c) {
    int budget = kReadsPerTurn;
    // A turn ends once it has written a mark's worth (or spent its reads):
    // a client that keeps the output full (a flood, a reader far behind)
    // then takes its turns in marks, between the other connections', not
    // the whole backlog its reads asked for.
    std::size_t written = 0;
    while (true) {
        if (c.session.deferred()) {
            // Responses the output had no room for come first: nothing is
            // read until they are all out.
            if (c.session.resume(out_, conns_.options().output_mark) == http::Session::Result::close)
                c.want_close = true;
            if (c.session.waiting()) db_->submit_jobs(&c, c.session);
            --budget;
        } else {
            read_batch(c, budget);
            if (!c.open) return;
        }

        // Write phase: one send() for the whole batch; EPOLLOUT continues it.
        written += out_.size();
        if (!out_.empty() && !send_out(c)) return;
        if (!c.pending.empty() || c.session.waiting()) return;
        if (!c.session.deferred()) {
            if (c.want_close || c.peer_closed) return finish(c);
            if (!c.input_ready) return;
        }
        if (budget <= 0 || written >= conns_.options().output_mark) {
            if (!c.ready_hook.linked()) ready_.push_back(c);
            return;
        }
    }
}

void Reactor::read_batch(Connection& c, int& budget) {
    // Gathers one batch of responses in the thread's buffer, until the
    // socket is drained, the output reaches the mark (the session defers
    // the rest), a job waits, or the budget is spent.
    while (true) {
        const ssize_t n = ::read(c.fd, read_buf_.get(), runtime::kReadSize);
        if (n > 0) {
            conns_.deadlines.touch(c, now_);
            --budget;
            const auto r = c.session.feed({read_buf_.get(), static_cast<std::size_t>(n)}, out_,
                                          conns_.options().output_mark);
            conns_.deadlines.track_head(c, now_);
            // Only with --db can a response wait for the database.
            if (c.session.waiting()) db_->submit_jobs(&c, c.session);
            if (r == http::Session::Result::close) {
                c.want_close = true;  // what follows is not answered
                c.input_ready = false;
                return;
            }
            // A short read emptied the socket; with edge triggering, data
            // that arrives later raises a new event. This saves the read
            // that would only return EAGAIN. Not so once the client's FIN
            // came with the same edge: no new event will announce the EOF.
            if (static_cast<std::size_t>(n) < runtime::kReadSize && !c.peer_fin_seen) {
                c.input_ready = false;
                return;
            }
            // The rest waits for the database (deliver() resumes it), or for
            // room in the output.
            if (c.session.owes() || out_.size() >= conns_.options().output_mark || budget <= 0) return;
            continue;
        }
        if (n == 0) {
            c.peer_closed = true;
            c.input_ready = false;
            return;
        }
        if (errno == EAGAIN) {
            c.input_ready = false;
            return;
        }
        if (errno == EINTR) continue;
        out_.clear();  // ECONNRESET and friends: nobody to answer
        return close_now(c);
    }
}

bool Reactor::send_out(Connection& c) {
    // The socket is full: keep the rest for EPOLLOUT.
    const auto r = runtime::send_from(c.fd, out_);
    if (r == runtime::IoResult::would_block) {
        // Reading pauses until the client takes this (--send-timeout).
        c.pending.append(out_.view());
        conns_.deadlines.block(c, now_);
    }
    out_.clear();
    if (r == runtime::IoResult::closed) close_now(c);
    return r != runtime::IoResult::closed;
}

bool Reactor::write_pending(Connection& c) {
    bool progress = false;
    const auto r = runtime::send_from(c.fd, c.pending, &progress);
    if (progress) conns_.deadlines.touch(c, now_);
    if (r == runtime::IoResult::closed) close_now(c);
    if (r != runtime::IoResult::done) return r == runtime::IoResult::would_block;
    // Drained: a backlog of that size was exceptional, give the memory back.
    // Reading may resume (dispatch() renders what was deferred first).
    c.pending.release();
    conns_.deadlines.unblock(c, now_);
    if (conns_.ending(c)) {
        finish(c);
        return false;
    }
    return true;
}

void Reactor::expire_head(Connection& c) {
    if (!runtime::answer_late_head(c, !c.pending.empty(), out_)) return close_now(c);
    if (send_out(c) && c.pending.empty()) finish(c);
}

void Reactor::finish(Connection& c) {
    // Everything we owe the client is written (or the client is gone).
    if (!conns_.start_linger(c, c.fd, now_)) return close_now(c);
    drain_linger(c);
}

void Reactor::drain_linger(Connection& c) {
    switch (runtime::discard_input(c.fd, read_buf_.get(), runtime::kReadSize,
                                   runtime::kLingerReadsPerTurn)) {
        case runtime::IoResult::closed: return close_now(c);  // EOF: the client closed; or an error
        case runtime::IoResult::would_block: return;
        case runtime::IoResult::done:
            if (!c.ready_hook.linked()) ready_.push_back(c);
    }
}

void Reactor::close_now(Connection& c) {
    ::close(c.fd);  // also removes it from the epoll set (never dup'ed)
    c.fd = -1;
    ReadyList::remove(c);
    c.pending.clear();
    c.pending.release();
    closed_.push_back(&c);
    conns_.closed(c);
}

void Reactor::run_ready() {
    // Each queued connection gets one more turn; those that still have input
    // queue themselves again for the next iteration.
    ReadyList batch;
    ready_.splice_into(batch);
    while (Connection* c = batch.pop_front()) {
        if (!c->open) continue;
        if (c->lingering()) {
            drain_linger(*c);
        } else if (c->pending.empty()) {
            service(*c);
        }
    }
}

void Reactor::begin_shutdown() {
    // The stop signal stays readable (it is shared by all threads and never
    // drained): stop watching it or every epoll_wait returns at once.
    ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, stop_.handle(), nullptr);
    // Close the listener first: new connections are refused, not queued.
    listener_.close();
    conns_.begin_shutdown(
        now_, [](const Connection& c) { return c.pending.empty() && !c.ready_hook.linked(); },
        [this](Connection& c) { close_now(c); });
}

void Reactor::deliver(void* owner, const http::Job& job, const http::JobResult& result) noexcept {
    Connection& c = *static_cast<Connection*>(owner);
    if (!conns_.complete_job(c, job, result, out_, now_)) return;
    if (!out_.empty()) {
        // Behind what the socket has not taken yet, or sent now.
        if (!c.pending.empty()) {
            c.pending.append(out_.view());
            out_.clear();
        } else if (!send_out(c)) {
            return;
        }
    }
    if (c.session.waiting() || !c.pending.empty()) return;
    // Nothing waits any more: the connection goes on where it paused.
    if (conns_.ending(c)) return finish(c);
    if ((c.input_ready || c.session.deferred()) && !c.ready_hook.linked()) ready_.push_back(c);
}

void Reactor::watch(int fd, bool read, bool write) noexcept {
    // A slot per database connection (--db-connections <= kMaxDbConnections): its tag in
    // the epoll set says which fd is ready.
    auto slot = static_cast<std::size_t>(std::find(db_fds_.begin(), db_fds_.end(), fd) - db_fds_.begin());
    const bool added = slot == db_fds_.size();
    if (added) {
        slot = static_cast<std::size_t>(std::find(db_fds_.begin(), db_fds_.end(), -1) - db_fds_.begin());
        db_fds_[slot] = fd;
    }
    auto ev = event_for(&db_tags_[slot], (read ? EPOLLIN : 0U) | (write ? EPOLLOUT : 0U));
    // Cannot fail for a valid socket in a set of our own but for lack of
    // memory; the connection then just hears nothing and is timed out.
    ::epoll_ctl(ep_.get(), added ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
}

void Reactor::unwatch(int fd) noexcept {
    for (int& f : db_fds_)
        if (f == fd) {
            ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, fd, nullptr);
            f = -1;
        }
}

int Reactor::next_timeout_ms() {
    if (!ready_.empty()) return 0;
    Clock::time_point next = conns_.next_deadline();
    if (db_) next = std::min(next, db_->next_deadline());
    if (next == Clock::time_point::max()) return -1;
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
    return wait.count() <= 0 ? 0 : static_cast<int>(std::min(wait, runtime::kMaxWait).count());
}

}  // namespace sm::epoll

int main(int argc, char** argv) {
    using namespace sm;
    return runtime::serve({.name = "epoll", .worker = &runtime::run<epoll::Reactor>}, argc, argv);
}
