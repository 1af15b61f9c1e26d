#include "loop.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <stdexcept>

#include <fmt/core.h>

#include "runtime/head_list.hpp"
#include "runtime/tuning.hpp"

namespace sm::libuv {
namespace {

// libuv reads again at once only when a read filled the buffer.
using runtime::kReadSize;
// The loop's output buffer, sized as server-epoll's: the responses to a full
// read of typical pipelined requests fit without growing it.
constexpr std::size_t kOutputSize = runtime::kBatchOutput + kReadSize;
// After an accept error (EMFILE that libuv's own load shedding could not
// absorb, ENFILE, ENOBUFS, ENOMEM).
constexpr Millis kAcceptPause = runtime::kAcceptPause.count();
// (A slot freed by this loop is taken at once.)
constexpr Millis kLimitRetry = runtime::kLimitPause.count();

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

Millis millis(std::chrono::milliseconds d) noexcept {
    return d.count() > 0 ? static_cast<Millis>(d.count()) : 0;
}

uv_buf_t buffer(const http::ByteBuffer& b) noexcept {
    // libuv's buffers are mutable by type only: writes do not modify them.
    return uv_buf_init(const_cast<char*>(b.data()), static_cast<unsigned>(b.size()));
}

}  // namespace

// --- Loop ---------------------------------------------------------------------

Loop::Loop() {
    if (const int r = uv_loop_init(&loop_); r != 0) throw_uv(r, "uv_loop_init");
}

Loop::~Loop() {
    close_all();
    if (uv_loop_close(&loop_) != 0) runtime::log("uv_loop_close: a handle is still open");
}

void Loop::close_all() noexcept {
    uv_walk(
        &loop_,
        [](uv_handle_t* h, void*) {
            if (!uv_is_closing(h)) uv_close(h, nullptr);
        },
        nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);  // runs the close callbacks
}

// --- Worker: set-up and callbacks -----------------------------------------------

Worker::Worker(const runtime::WorkerContext& ctx)
    : opts_(ctx.options),
      listen_fd_(ctx.listener),
      stop_fd_(ctx.stop_fd),
      limit_(ctx.connections),
      idle_ms_(millis(ctx.options.idle_timeout)),
      linger_ms_(millis(ctx.options.linger_timeout)),
      header_ms_(millis(ctx.options.header_timeout)),
      cache_(ctx.options.mode, std::time(nullptr)),
      read_buf_(std::make_unique_for_overwrite<char[]>(kReadSize)),
      out_(kOutputSize) {
    loop_.get()->data = this;
}

Worker::~Worker() {
    // The handles live in this object and its connections: close them while
    // it still exists (after run() they are closed already, unless it threw).
    loop_.close_all();
}

void Worker::run() {
    start();
    uv_run(loop_.get(), UV_RUN_DEFAULT);
    if (error_) std::rethrow_exception(error_);
}

void Worker::start() {
    uv_timer_init(loop_.get(), &timer_);
    timer_open_ = true;
    if (const int r = uv_poll_init(loop_.get(), &stop_poll_, stop_fd_); r != 0)
        throw_uv(r, "uv_poll_init(stop)");
    if (const int r = uv_poll_start(&stop_poll_, UV_READABLE, on_stop); r != 0)
        throw_uv(r, "uv_poll_start(stop)");
    if (const int r = open_listener(); r != 0) throw_uv(r, "listen");
}

Worker& Worker::of(const uv_handle_t* h) noexcept {
    return *static_cast<Worker*>(h->loop->data);
}

template <typename F>
void Worker::guard(F&& f) noexcept {
    if (error_) return;
    try {
        f();
    } catch (...) {
        error_ = std::current_exception();
        uv_stop(loop_.get());
    }
}

void Worker::on_connection(uv_stream_t* server, int status) noexcept {
    Worker& w = of(reinterpret_cast<uv_handle_t*>(server));
    w.guard([&] { w.connection(status); });
}

void Worker::on_alloc(uv_handle_t* h, std::size_t, uv_buf_t* buf) noexcept {
    // Consumed before the read callback returns: one buffer serves the loop.
    *buf = uv_buf_init(of(h).read_buf_.get(), static_cast<unsigned>(kReadSize));
}

void Worker::on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) noexcept {
    auto* h = reinterpret_cast<uv_handle_t*>(s);
    Worker& w = of(h);
    w.guard([&] { w.read(conn(h), nread, *buf); });
}

void Worker::on_write(uv_write_t* req, int status) noexcept {
    Worker& w = of(reinterpret_cast<uv_handle_t*>(req->handle));
    w.guard([&] { w.written(*static_cast<Connection*>(req->data), status); });
}

void Worker::on_shutdown(uv_shutdown_t* req, int status) noexcept {
    Worker& w = of(reinterpret_cast<uv_handle_t*>(req->handle));
    Connection& c = *static_cast<Connection*>(req->data);
    // UV_ECANCELED: the connection was closed first.
    if (status < 0 && status != UV_ECANCELED) w.guard([&] { w.close_now(c); });
}

void Worker::on_close(uv_handle_t* h) noexcept {
    of(h).recycle(conn(h));
}

void Worker::on_listener_closed(uv_handle_t* h) noexcept {
    of(h).listener_state_ = ListenerState::closed;
}

void Worker::on_timer(uv_timer_t* t) noexcept {
    Worker& w = of(handle(*t));
    w.guard([&] { w.timers(); });
}

void Worker::on_stop(uv_poll_t* p, int, int) noexcept {
    Worker& w = of(handle(*p));
    w.guard([&] { w.begin_shutdown(); });
}

// --- Accepting ------------------------------------------------------------------

int Worker::open_listener() noexcept {
    // A dup of the runtime's socket: closing the handle (to pause accepting)
    // closes the dup, and the socket goes on queueing connections.
    const int fd = ::fcntl(listen_fd_.get(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return uv_translate_sys_error(errno);
    uv_tcp_init(loop_.get(), &listener_);
    listener_.data = this;
    listener_state_ = ListenerState::open;
    int r = uv_tcp_open(&listener_, fd);
    if (r != 0) {
        ::close(fd);  // not adopted by the handle
    } else {
        r = uv_listen(stream(listener_), opts_.backlog, on_connection);
    }
    if (r != 0) close_listener();
    return r;
}

void Worker::close_listener() noexcept {
    if (listener_state_ != ListenerState::open) return;
    // Inside on_connection this also ends libuv's accept loop, which checks
    // the handle's descriptor after every callback. A connection libuv held
    // for us at --max-connections is closed with it.
    uv_close(handle(listener_), on_listener_closed);
    listener_state_ = ListenerState::closing;
    paused_at_limit_ = false;
}

void Worker::connection(int status) {
    if (status < 0) return accept_failed(status);
    if (!limit_.try_acquire()) return pause_at_limit();
    accept_one();
}

void Worker::accept_one() {
    Connection* c = free_.pop_front();
    if (c == nullptr) {
        try {
            c = &pool_.emplace_back(cache_, opts_.limits);
        } catch (...) {
            limit_.release();
            throw;
        }
    }
    uv_tcp_init(loop_.get(), &c->tcp);
    c->tcp.data = c;
    if (const int r = uv_accept(stream(listener_), stream(c->tcp)); r != 0) {
        // Cannot happen with a fresh handle; libuv then does not resume
        // polling the listener, so reopen it after a pause.
        limit_.release();
        uv_close(handle(c->tcp), on_close);
        return pause_accepting(r);
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->open = true;
    ++live_;
    touch(*c);
    if (!start_reading(*c)) close_now(*c);
}

void Worker::accept_failed(int status) {
    switch (status) {
        case UV_EPROTO:
        case UV_EPERM:          // a firewall rule refused it
        case UV_EINTR: return;  // that connection is gone; libuv goes on with the next
        default:                // EMFILE, ENFILE, ENOBUFS, ENOMEM: out of resources
            return pause_accepting(status);
    }
}

void Worker::pause_accepting(int status) {
    close_listener();
    accept_paused_ = true;
    accept_resume_ = now() + kAcceptPause;
    schedule(accept_resume_);
    if (accept_log_.allow(std::chrono::steady_clock::now())) {
        const unsigned long more = accept_log_.take_suppressed();
        runtime::log(fmt::format("accept: {}; pausing accepts for {} ms ({} connections open{})",
                                 uv_strerror(status), kAcceptPause, live_,
                                 more ? fmt::format(", {} more like this", more) : ""));
    }
}

void Worker::resume_accepting() {
    accept_paused_ = false;
    if (stopping_) return;
    if (listener_state_ == ListenerState::closing) {  // its close callback has not run yet
        accept_paused_ = true;
        accept_resume_ = now() + 1;
        return schedule(accept_resume_);
    }
    if (const int r = open_listener(); r != 0) pause_accepting(r);
}

void Worker::pause_at_limit() {
    // Not calling uv_accept leaves the connection with libuv, which stops
    // polling the listener: the next ones wait in the backlog.
    paused_at_limit_ = true;
    limit_retry_ = now() + kLimitRetry;
    schedule(limit_retry_);
    if (limit_log_.allow(std::chrono::steady_clock::now())) {
        const unsigned long more = limit_log_.take_suppressed();
        runtime::log(
            fmt::format("--max-connections {} reached: new connections wait in the backlog{}",
                        limit_.max(), more ? fmt::format(" ({} more times)", more) : ""));
    }
}

void Worker::resume_at_limit() {
    if (!limit_.try_acquire()) {
        limit_retry_ = now() + kLimitRetry;
        return schedule(limit_retry_);
    }
    paused_at_limit_ = false;
    accept_one();  // the connection libuv held; accepting it resumes polling the listener
}

// --- Reading and writing --------------------------------------------------------

void Worker::read(Connection& c, ssize_t nread, const uv_buf_t& buf) {
    if (nread == 0 || !c.open) return;  // 0: EAGAIN
    if (c.lingering) {
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
    touch(c);
    const auto r = c.session.feed({buf.base, static_cast<std::size_t>(nread)}, out_);
    track_head(c);
    if (r == http::Session::Result::close) c.want_close = true;  // what follows is not answered
    if (!out_.empty() && !send_batch(c)) return;
    if (c.want_close) finish(c);
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
    // client reads slower than it sends), so it may allocate.
    out_.consume(sent);
    c.pending.append(out_.view());
    out_.clear();
    start_write(c);
    return false;
}

void Worker::start_write(Connection& c) {
    // While responses wait for the socket, reading pauses: a client that
    // pipelines without reading is held back by TCP flow control, not by our memory.
    stop_reading(c);
    c.write_req.data = &c;
    const uv_buf_t b = buffer(c.pending);
    if (uv_write(&c.write_req, stream(c.tcp), &b, 1, on_write) != 0) return close_now(c);
    c.writing = true;
    c.unwritten = uv_stream_get_write_queue_size(stream(c.tcp));
}

void Worker::written(Connection& c, int status) {
    c.writing = false;
    if (!c.open || status == UV_ECANCELED) return;  // closed meanwhile
    if (status < 0) return close_now(c);
    // Drained: a backlog of that size was exceptional, give the memory back
    // (an idle connection holds no buffer); the request is reused.
    c.pending.clear();
    c.pending.release();
    touch(c);
    if (c.want_close || (stopping_ && c.session.idle())) return finish(c);
    if (!start_reading(c)) close_now(c);
}

bool Worker::start_reading(Connection& c) noexcept {
    if (!c.reading) c.reading = uv_read_start(stream(c.tcp), on_alloc, on_read) == 0;
    return c.reading;
}

void Worker::stop_reading(Connection& c) noexcept {
    if (c.reading) uv_read_stop(stream(c.tcp));
    c.reading = false;
}

void Worker::touch(Connection& c) noexcept {
    c.last_active = now();
    ActivityList::remove(c);
    by_activity_.push_back(c);
    schedule(c.last_active + idle_ms_);  // a comparison unless the timer is idle
}

void Worker::track_head(Connection& c) noexcept {
    if (runtime::track_head(in_head_, c, now() + header_ms_)) schedule(c.head_deadline);
}

void Worker::expire_head(Connection& c) {
    HeadList::remove(c);
    // Responses still being written: the client is not reading, so it gets no 408.
    if (c.writing) return close_now(c);
    c.session.expire_head(out_);
    const uv_buf_t b = buffer(out_);
    const int n = uv_try_write(stream(c.tcp), &b, 1);
    const bool whole = n == static_cast<int>(out_.size());
    out_.clear();
    if (!whole) return close_now(c);
    c.want_close = true;
    finish(c);
}

// --- Closing --------------------------------------------------------------------

void Worker::finish(Connection& c) {
    // Everything we owe the client is written. Closing with unread input
    // makes the kernel send a reset, which can destroy the response before
    // the client reads it: shut down our side (uv_shutdown sends the FIN once
    // libuv's write queue is empty), then read and discard until the client
    // closes or the linger timeout passes.
    if (linger_ms_ == 0) return close_now(c);
    c.shutdown_req.data = &c;
    if (uv_shutdown(&c.shutdown_req, stream(c.tcp), on_shutdown) != 0) return close_now(c);
    c.lingering = true;
    ActivityList::remove(c);  // bounded by the linger deadline instead
    HeadList::remove(c);
    c.linger_deadline = now() + linger_ms_;
    lingering_.push_back(c);
    schedule(c.linger_deadline);
    if (!start_reading(c)) close_now(c);
}

void Worker::close_now(Connection& c) {
    if (!c.open) return;
    c.open = false;
    ActivityList::remove(c);
    LingerList::remove(c);
    HeadList::remove(c);
    // Closes the descriptor now; pending requests get UV_ECANCELED and the
    // object is recycled in on_close, after them.
    uv_close(handle(c.tcp), on_close);
    --live_;
    limit_.release();
    if (paused_at_limit_) resume_at_limit();
    if (stopping_ && live_ == 0) end_shutdown();
}

void Worker::recycle(Connection& c) noexcept {
    c.pending.clear();
    c.pending.release();
    c.session.reset();
    c.reading = c.writing = c.want_close = c.lingering = false;
    free_.push_back(c);
}

void Worker::begin_shutdown() {
    if (stopping_) return;
    stopping_ = true;
    shutdown_deadline_ = now() + millis(opts_.shutdown_timeout);
    // The stop eventfd stays readable (shared by all threads, never
    // drained): stop watching it or every poll returns at once.
    uv_poll_stop(&stop_poll_);
    uv_close(handle(stop_poll_), nullptr);
    // Close the listener first: new connections are refused, not queued.
    close_listener();
    listen_fd_.reset();
    accept_paused_ = false;
    for (Connection& c : pool_) {
        if (!c.open || c.lingering) continue;
        // Any response still to come carries "Connection: close".
        c.session.request_close();
        if (!c.writing && c.session.idle()) close_now(c);
        // Otherwise a response is being written or a request is partly here:
        // it finishes, bounded by shutdown_deadline_.
    }
    if (live_ == 0) return end_shutdown();
    schedule(shutdown_deadline_);
}

void Worker::end_shutdown() noexcept {
    // The last handle: with it closed, uv_run returns.
    if (!timer_open_) return;
    timer_open_ = timer_armed_ = false;
    uv_close(handle(timer_), nullptr);
}

// --- Timers ---------------------------------------------------------------------

void Worker::schedule(Millis due) noexcept {
    if (!timer_open_ || (timer_armed_ && timer_due_ <= due)) return;
    timer_armed_ = true;
    timer_due_ = due;
    const Millis t = now();
    uv_timer_start(&timer_, on_timer, due > t ? due - t : 0, 0);
}

void Worker::timers() {
    timer_armed_ = false;
    const Millis t = now();
    while (!lingering_.empty() && lingering_.front().linger_deadline <= t)
        close_now(lingering_.front());
    // Least recently active first: stop at the first one still in time.
    while (!by_activity_.empty() && by_activity_.front().last_active + idle_ms_ <= t) {
        Connection& c = by_activity_.front();
        if (c.writing) {
            // libuv reports only the end of a write: a slow reader that took
            // some of it since the last look is making progress.
            const std::size_t left = uv_stream_get_write_queue_size(stream(c.tcp));
            if (left < c.unwritten) {
                c.unwritten = left;
                touch(c);
                continue;
            }
        }
        close_now(c);
    }
    // Oldest head first, likewise.
    while (!in_head_.empty() && in_head_.front().head_deadline <= t)
        expire_head(in_head_.front());
    if (accept_paused_ && t >= accept_resume_) resume_accepting();
    if (paused_at_limit_ && t >= limit_retry_) resume_at_limit();
    if (stopping_ && t >= shutdown_deadline_) {
        for (Connection& c : pool_)
            close_now(c);
    }
    // Re-arm for the earliest deadline left (touch() only moves deadlines
    // later, so the timer may have fired early: nothing was due).
    if (!lingering_.empty()) schedule(lingering_.front().linger_deadline);
    if (!by_activity_.empty()) schedule(by_activity_.front().last_active + idle_ms_);
    if (!in_head_.empty()) schedule(in_head_.front().head_deadline);
    if (accept_paused_) schedule(accept_resume_);
    if (paused_at_limit_) schedule(limit_retry_);
    if (stopping_ && live_ > 0) schedule(shutdown_deadline_);
}

void run_worker(const runtime::WorkerContext& ctx) {
    Worker(ctx).run();
}

}  // namespace sm::libuv
