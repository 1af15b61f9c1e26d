#include "libuv.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <stdexcept>

#include <fmt/core.h>

#include "runtime/tuning.hpp"

namespace sm::libuv {
namespace {

// libuv reads again at once only when a read filled the buffer.
using runtime::kReadSize;
uv_stream_t* stream(uv_tcp_t& t) noexcept {
    return reinterpret_cast<uv_stream_t*>(&t);
}
template <typename H>
uv_handle_t* handle(H& h) noexcept {
    return reinterpret_cast<uv_handle_t*>(&h);
}
Connection& conn(const uv_handle_t* h) noexcept {
    return *static_cast<Connection*>(h->data);
}

[[noreturn]] void throw_uv(int err, const char* what) {
    throw std::runtime_error(fmt::format("{}: {}", what, uv_strerror(err)));
}

uv_buf_t buffer(const http::ByteBuffer& b) noexcept {
    // libuv's buffers are mutable by type only: writes do not modify them.
    return uv_buf_init(const_cast<char*>(b.data()), static_cast<unsigned>(b.size()));
}

}  // namespace

// --- Worker: set-up and callbacks -----------------------------------------------

Worker::Worker(const runtime::WorkerContext& ctx)
    : opts_(ctx.options),
      listen_socket_(ctx.listener),
      stop_(ctx.stop),
      cache_(ctx.options.mode, std::time(nullptr), ctx.options.workloads()),
      conns_(ctx, cache_),
      read_buf_(std::make_unique_for_overwrite<char[]>(kReadSize)),
      // Sized as server-epoll's: a connection's output up to the mark and the
      // response that crosses it fit without growing it.
      out_(2 * ctx.options.output_mark) {
    if (const int r = uv_loop_init(&loop_); r != 0) throw_uv(r, "uv_loop_init");
    loop_.data = this;
}

Worker::~Worker() {
    db_.reset();  // unwatches (closes) its poll handles first
    // The handles live in this object and its connections: close them while
    // it still exists (after run() they are closed already, unless it threw).
    uv_walk(
        &loop_,
        [](uv_handle_t* h, void*) {
            if (!uv_is_closing(h)) uv_close(h, nullptr);
        },
        nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);  // runs the close callbacks
    if (uv_loop_close(&loop_) != 0) runtime::log("uv_loop_close: a handle is still open");
}

void Worker::run() {
    uv_timer_init(&loop_, &timer_);
    uv_idle_init(&loop_, &more_idle_);
    timer_open_ = true;
    if (const int r = uv_poll_init(&loop_, &stop_poll_, stop_.handle()); r != 0)
        throw_uv(r, "uv_poll_init(stop)");
    if (const int r = uv_poll_start(&stop_poll_, UV_READABLE, call<&Worker::begin_shutdown>);
        r != 0)
        throw_uv(r, "uv_poll_start(stop)");
    if (const int r = open_listener(); r != 0) throw_uv(r, "listen");
    if (!opts_.db.empty()) {
        // Each iteration's jobs leave together, just before libuv polls.
        // Neither it nor the database's polls keep the loop alive: the
        // connections and the timer do, and at their end the loop ends.
        uv_prepare_init(&loop_, &db_flush_);
        uv_prepare_start(&db_flush_, call<&Worker::before_poll>);
        uv_unref(handle(db_flush_));
        db_.emplace(opts_.db, opts_.db_connections, static_cast<db::Loop&>(*this), opts_.idle_timeout);
    }
    uv_run(&loop_, UV_RUN_DEFAULT);
    if (error_) std::rethrow_exception(error_);
}

template <auto M, typename H, typename... A>
void Worker::call(H* h, A... args) noexcept {
    Worker& w = of(h);
    if (w.error_) return;
    try {
        (w.*M)(h, args...);
    } catch (...) {
        w.error_ = std::current_exception();
        uv_stop(&w.loop_);
    }
}

void Worker::on_close(uv_handle_t* h) noexcept {
    Connection& c = conn(h);
    c.backlog.reset();  // its write, if any, was cancelled (and its callback run) before this
    c.reading = c.writing = false;
    of(h).conns_.recycle(c);
}

// --- Accepting ------------------------------------------------------------------

int Worker::open_listener() noexcept {
    // A dup of the runtime's socket: closing the handle (to pause accepting)
    // closes the dup, and the socket goes on queueing connections.
    const int fd = ::fcntl(listen_socket_.handle(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return uv_translate_sys_error(errno);
    uv_tcp_init(&loop_, &listener_);
    listener_.data = this;
    listener_state_ = ListenerState::open;
    int r = uv_tcp_open(&listener_, fd);
    if (r != 0) {
        ::close(fd);  // not adopted by the handle
    } else {
        r = uv_listen(stream(listener_), opts_.backlog, call<&Worker::connection>);
    }
    if (r != 0) close_listener();
    return r;
}

void Worker::close_listener() noexcept {
    if (listener_state_ != ListenerState::open) return;
    // Inside on_connection this also ends libuv's accept loop, which checks
    // the handle's descriptor after every callback. A connection libuv held
    // for us at --max-connections is closed with it.
    uv_close(handle(listener_),
             [](uv_handle_t* h) { of(h).listener_state_ = ListenerState::closed; });
    listener_state_ = ListenerState::closing;
}

void Worker::connection(uv_stream_t*, int status) {
    // libuv's errors are negative errno values.
    if (status < 0) {
        if (conns_.gate.refused(-status, now()) != runtime::AcceptError::exhausted) return;
        close_listener();
        return schedule();
    }
    // Not calling uv_accept leaves the connection with libuv, which stops
    // polling the listener: the next ones wait in the backlog.
    if (!conns_.gate.try_acquire(now())) return schedule();
    accept_one();
}

void Worker::accept_one() {
    Connection& c = conns_.open(now());
    uv_tcp_init(&loop_, &c.tcp);
    c.tcp.data = &c;
    if (const int r = uv_accept(stream(listener_), stream(c.tcp)); r != 0) {
        // Cannot happen with a fresh handle; libuv then does not resume
        // polling the listener, so reopen it after a pause.
        close_now(c);
        return pause_accepting(r);
    }
    uv_tcp_nodelay(&c.tcp, 1);
    if (!start_reading(c)) return close_now(c);
    schedule();
}

void Worker::pause_accepting(int status) {
    close_listener();
    conns_.gate.pause(-status, now());
    schedule();
}

void Worker::check_gate() {
    if (!conns_.gate.reopen_due(now())) return;
    if (conns_.gate.at_limit()) {
        if (!conns_.gate.try_acquire(now())) return schedule();
        conns_.gate.reopen();
        return accept_one();  // the connection libuv held; accepting it resumes polling
    }
    // Its close callback has not run yet: the timer looks again.
    if (listener_state_ == ListenerState::closing) return schedule();
    conns_.gate.reopen();
    if (const int r = open_listener(); r != 0) pause_accepting(r);
}

// --- Reading and writing --------------------------------------------------------

void Worker::read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
    Connection& c = conn(reinterpret_cast<uv_handle_t*>(s));
    if (nread == 0 || !c.open) return;  // 0: EAGAIN
    if (c.lingering()) {
        if (nread < 0) close_now(c);  // EOF: the client closed too; or an error
        return;                       // data after the last response is discarded
    }
    if (nread < 0) {
        // EOF: every request received was answered (reading pauses while a
        // write is in flight, so nothing is owed); or a reset: nobody to answer.
        return close_now(c);
    }
    // The Date line is re-rendered only when the second changes.
    cache_.refresh(std::time(nullptr));
    const Clock::time_point t = now();
    conns_.deadlines.touch(c, t);
    const auto r = c.session.feed({buf->base, static_cast<std::size_t>(nread)}, out_,
                                  opts_.output_mark);
    // A new head's deadline may come before the one the timer is armed for.
    if (conns_.deadlines.track_head(c, t) || !timer_armed_) schedule();
    if (r == http::Session::Result::close) c.want_close = true;  // what follows is not answered
    // The rest waits for the database (deliver() resumes it).
    if (c.session.waiting()) db_->submit_jobs(&c, c.session);
    if (!out_.empty() && !send_batch(c)) return;
    if (c.session.owes()) return pause(c);
    if (c.want_close) finish(c);
}

void Worker::pause(Connection& c) {
    // Reading pauses while a job waits (deliver() goes on) or responses wait
    // for room in the output: they follow in the loop's next iteration, a
    // mark's worth a turn (go_on), so that a client whose requests ask for
    // more than that (a flood) takes its turns between the others'.
    if (c.reading) uv_read_stop(stream(c.tcp));
    c.reading = false;
    if (!c.session.deferred() || c.session.waiting()) return;
    more_.push_back_once(c);
    if (!uv_is_active(handle(more_idle_))) uv_idle_start(&more_idle_, call<&Worker::turns>);
}

void Worker::turns(uv_idle_t*) {
    WorkList batch;
    more_.splice_into(batch);
    while (Connection* c = batch.pop_front())
        if (c->open && !c->writing && !c->lingering()) go_on(*c);
    if (more_.empty()) uv_idle_stop(&more_idle_);
}

void Worker::go_on(Connection& c) {
    // The output has room: a mark's worth of what was deferred, then read
    // again once nothing is owed.
    if (c.session.deferred() && !c.session.waiting()) {
        if (c.session.resume(out_, opts_.output_mark) == http::Session::Result::close)
            c.want_close = true;
        if (c.session.waiting()) db_->submit_jobs(&c, c.session);
        if (!out_.empty() && !send_batch(c)) return;
    }
    // Reading may resume: a head in progress gets its deadline afresh.
    if (conns_.deadlines.unblock(c, now())) schedule();
    if (c.session.owes()) return pause(c);
    if (conns_.ending(c)) return finish(c);
    if (!start_reading(c)) close_now(c);
}

// --- The database ---------------------------------------------------------------

void Worker::deliver(void* owner, const http::Job& job, const http::JobResult& result) noexcept {
    Connection& c = *static_cast<Connection*>(owner);
    // While the backlog is being written (until written()), these go after it.
    if (!conns_.complete_job(c, job, result, c.writing ? c.backlog->later : out_, now())) return;
    if (c.writing) return;
    if (!out_.empty() && !send_batch(c)) return;
    // Nothing waits any more: the connection goes on where it paused.
    if (!c.session.waiting()) go_on(c);
}

void Worker::watch(int fd, bool read, bool write) noexcept {
    DbPoll* slot = nullptr;
    for (DbPoll& p : db_polls_)
        if (p.in_use && p.fd == fd && !uv_is_closing(handle(p.poll))) slot = &p;
    if (slot == nullptr) {
        for (DbPoll& p : db_polls_)
            if (!p.in_use) {
                slot = &p;
                break;
            }
        // (--db-connections is at most runtime::kMaxDbConnections.)
        if (slot == nullptr || uv_poll_init(&loop_, &slot->poll, fd) != 0) return;
        slot->poll.data = slot;
        slot->fd = fd;
        slot->in_use = true;
        uv_unref(handle(slot->poll));
    }
    const int events = (read ? UV_READABLE : 0) | (write ? UV_WRITABLE : 0);
    uv_poll_start(&slot->poll, events, call<&Worker::db_ready>);
}

void Worker::unwatch(int fd) noexcept {
    for (DbPoll& p : db_polls_) {
        if (!p.in_use || p.fd != fd || uv_is_closing(handle(p.poll))) continue;
        uv_close(handle(p.poll), [](uv_handle_t* h) {
            auto* slot = static_cast<DbPoll*>(h->data);
            slot->in_use = false;
            slot->fd = -1;
        });
    }
}

void Worker::db_ready(uv_poll_t* p, int status, int events) {
    // An error on the socket is reported as readable: libpq then finds it.
    db_->on_ready(static_cast<DbPoll*>(p->data)->fd, status < 0 || (events & UV_READABLE) != 0,
                  status < 0 || (events & UV_WRITABLE) != 0);
}

void Worker::before_poll(uv_prepare_t*) {
    db_->expire(now());
    db_->flush();
    schedule();  // a reconnection the database client waits for
}

bool Worker::send_batch(Connection& c) {
    // One write for every response to this read.
    const uv_buf_t b = buffer(out_);
    int n = uv_try_write(stream(c.tcp), &b, 1);
    if (n == UV_EAGAIN) n = 0;
    if (n < 0) {
        out_.clear();
        close_now(c);
        return false;
    }
    const auto sent = static_cast<std::size_t>(n);
    if (sent == out_.size()) {
        out_.clear();
        return true;
    }
    // The socket is full: the rest goes out with uv_write. Exceptional (the
    // client reads slower than it sends), so it may allocate. While
    // responses wait for the socket, reading pauses: a client that pipelines
    // without reading is held back by TCP flow control, not by our memory.
    out_.consume(sent);
    if (!c.backlog) c.backlog = std::make_unique<Backlog>();
    c.backlog->pending.append(out_.view());
    out_.clear();
    if (c.reading) uv_read_stop(stream(c.tcp));
    c.reading = false;
    // Until the client takes it: --send-timeout runs, which may come first.
    conns_.deadlines.block(c, now());
    schedule();
    c.backlog->req.data = &c;
    const uv_buf_t rest = buffer(c.backlog->pending);
    if (uv_write(&c.backlog->req, stream(c.tcp), &rest, 1, call<&Worker::written>) != 0) {
        close_now(c);
        return false;
    }
    c.writing = true;
    c.unwritten = uv_stream_get_write_queue_size(stream(c.tcp));
    return false;
}

void Worker::written(uv_write_t* req, int status) {
    Connection& c = *static_cast<Connection*>(req->data);
    c.writing = false;
    if (!c.open || status == UV_ECANCELED) return;  // closed meanwhile
    if (status < 0) return close_now(c);
    // Drained: a backlog was exceptional, its memory goes back (an idle
    // connection holds none).
    conns_.deadlines.touch(c, now());
    const bool later = !c.backlog->later.empty();
    // What the database completed during the write goes out next.
    if (later) std::swap(out_, c.backlog->later);
    c.backlog.reset();
    if (later && !send_batch(c)) return;
    if (!c.session.waiting()) go_on(c);
}

bool Worker::start_reading(Connection& c) noexcept {
    // Each read is consumed before its callback returns: one buffer serves the loop.
    static constexpr auto alloc = [](uv_handle_t* h, std::size_t, uv_buf_t* buf) {
        *buf = uv_buf_init(of(h).read_buf_.get(), static_cast<unsigned>(kReadSize));
    };
    if (!c.reading) c.reading = uv_read_start(stream(c.tcp), alloc, call<&Worker::read>) == 0;
    return c.reading;
}

// --- Closing --------------------------------------------------------------------

void Worker::expire_head(Connection& c) {
    if (!runtime::answer_late_head(c, c.writing, out_)) return close_now(c);
    if (send_batch(c)) finish(c);  // else written() finishes
}

void Worker::finish(Connection& c) {
    // Everything we owe the client is written and libuv's write queue is
    // empty (one write at a time, and finish() follows its end), so our FIN
    // may go at once; then read and discard until the client closes.
    uv_os_fd_t fd = -1;
    uv_fileno(handle(c.tcp), &fd);
    if (!conns_.start_linger(c, fd, now()) || !start_reading(c)) return close_now(c);
    schedule();
}

void Worker::close_now(Connection& c) {
    if (!c.open) return;
    WorkList::remove(c);
    conns_.closed(c);
    // Closes the descriptor now; pending requests get UV_ECANCELED and the
    // object is recycled in on_close, after them.
    uv_close(handle(c.tcp), on_close);
    check_gate();  // the slot freed here may reopen it
    if (conns_.finished()) end_shutdown();
}

void Worker::begin_shutdown(uv_poll_t*, int, int) {
    // The stop signal stays readable (shared by all threads, never
    // drained): stop watching it or every poll returns at once.
    uv_poll_stop(&stop_poll_);
    uv_close(handle(stop_poll_), nullptr);
    // Close the listener first: new connections are refused, not queued.
    close_listener();
    listen_socket_.close();
    conns_.begin_shutdown(
        now(), [](const Connection& c) { return !c.writing; },
        [this](Connection& c) { close_now(c); });
    if (conns_.finished()) return end_shutdown();
    schedule();
}

void Worker::end_shutdown() noexcept {
    // The last handle: with it closed, uv_run returns.
    if (!timer_open_) return;
    timer_open_ = timer_armed_ = false;
    uv_close(handle(timer_), nullptr);
}

// --- Timers ---------------------------------------------------------------------

void Worker::schedule() noexcept {
    Clock::time_point due = conns_.next_deadline();
    if (db_) due = std::min(due, db_->next_deadline());
    if (!timer_open_ || due == Clock::time_point::max() || (timer_armed_ && timer_due_ <= due))
        return;
    timer_armed_ = true;
    timer_due_ = due;
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(due - now()).count();
    uv_timer_start(&timer_, call<&Worker::timers>, wait > 0 ? static_cast<std::uint64_t>(wait) : 0,
                   0);
}

void Worker::timers(uv_timer_t*) {
    timer_armed_ = false;
    // The database client's reconnection is due too (the timer is armed for
    // it): run it here, or the timer, re-armed for a time already past,
    // would fire again at once in the same pass of libuv's timers.
    if (db_) db_->expire(now());
    conns_.expire(
        now(), [this](Connection& c) { close_now(c); }, [this](Connection& c) { expire_head(c); },
        [](Connection& c) {
            // libuv reports only the end of a write: a slow reader that took
            // some of it since the last look is making progress.
            if (!c.writing) return false;
            const std::size_t left = uv_stream_get_write_queue_size(stream(c.tcp));
            if (left >= c.unwritten) return false;
            c.unwritten = left;
            return true;
        });
    check_gate();
    // Re-armed for the earliest deadline left (touching only moves deadlines
    // later, so the timer may have fired early: nothing was due).
    schedule();
}

}  // namespace sm::libuv

int main(int argc, char** argv) {
    using namespace sm;
    return runtime::serve({.name = "libuv", .worker = &runtime::run<libuv::Worker>}, argc, argv);
}
