// server-libuv: one uv_loop per thread, each with its own SO_REUSEPORT
// listener (--threads 1 is the classic single loop): what a portable event
// library costs next to server-epoll's hand-written reactor. libuv reads into
// the loop's buffer and calls back; the bytes go to the connection's
// http::Session and the responses to one uv_try_write; what the socket does
// not take goes out with uv_write while reading pauses. Everything protocol
// lives in common/http.
//
// Where libuv shapes the model:
// - Accepting: libuv accepts, then calls back. At --max-connections the
//   callback does not uv_accept: libuv keeps that one connection (accepted
//   by the kernel, unread) and stops polling the listener, so the next ones
//   wait in the backlog; uv_accept later takes it and resumes polling.
// - Accept errors: libuv 1.44 sheds load on EMFILE itself (it closes a
//   reserved descriptor, accepts and closes what is queued, reopens the
//   reserve). The callback sees an error only when that fails (another
//   thread took the freed slot) or for ENOBUFS/ENOMEM, and libuv retries at
//   once, in a loop, until the callback closes the listener handle. So the
//   handle listens on a dup() of the runtime's socket: closing it pauses
//   accepting without closing the socket, and a fresh handle resumes later.
// - Timers: one uv_timer_t per loop, armed for the earliest of the
//   deadline-ordered lists' fronts, never a timer per connection.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>

#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "runtime/intrusive_list.hpp"
#include "runtime/log.hpp"
#include "runtime/server.hpp"
#include "runtime/unique_fd.hpp"

namespace sm::libuv {

using Millis = std::uint64_t;  // the loop's clock (uv_now), in milliseconds

struct Connection {
    Connection(const http::ResponseCache& cache, const http::Limits& limits) noexcept
        : session(cache, limits) {}

    uv_tcp_t tcp{};                // data: this Connection
    uv_write_t write_req{};        // the part of a batch uv_try_write did not take
    uv_shutdown_t shutdown_req{};  // lingering close: our FIN after the last response
    http::Session session;
    http::ByteBuffer pending;   // what write_req is writing (empty otherwise)
    std::size_t unwritten = 0;  // libuv's write queue at the last idle check
    Millis last_active = 0;     // last read, or write completed
    Millis linger_deadline = 0;
    Millis head_deadline = 0;   // the request head in progress must be complete by then
    http::HeadMark head;        // which head the deadline is for
    bool open = false;            // false once uv_close was called (the object waits for close_cb)
    bool reading = false;         // uv_read_start is in effect
    bool writing = false;         // write_req is in flight; reading is paused
    bool want_close = false;      // the session ended (Connection: close, error, HTTP/1.0)
    bool lingering = false;       // our side shut down; reading and discarding until EOF
    runtime::ListHook idle_hook;  // in Worker::by_activity_, least recently active first
    runtime::ListHook linger_hook;  // in Worker::lingering_
    runtime::ListHook free_hook;    // in Worker::free_
    runtime::ListHook head_hook;    // in Worker::in_head_: a request head is partly here
};

// Owns a uv_loop_t. close_all() closes every handle still open and runs the
// loop until the close callbacks ran; the destructor then closes the loop.
class Loop {
  public:
    Loop();
    ~Loop();
    Loop(const Loop&) = delete;
    Loop& operator=(const Loop&) = delete;

    uv_loop_t* get() noexcept { return &loop_; }
    void close_all() noexcept;

  private:
    uv_loop_t loop_{};
};

class Worker {
  public:
    explicit Worker(const runtime::WorkerContext& ctx);
    ~Worker();
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    void run();

  private:
    using ActivityList = runtime::IntrusiveList<Connection, &Connection::idle_hook>;
    using LingerList = runtime::IntrusiveList<Connection, &Connection::linger_hook>;
    using FreeList = runtime::IntrusiveList<Connection, &Connection::free_hook>;
    using HeadList = runtime::IntrusiveList<Connection, &Connection::head_hook>;
    enum class ListenerState : std::uint8_t { closed, open, closing };

    // libuv callbacks: noexcept trampolines into the members below, through guard().
    static void on_connection(uv_stream_t* server, int status) noexcept;
    static void on_alloc(uv_handle_t* h, std::size_t suggested, uv_buf_t* buf) noexcept;
    static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) noexcept;
    static void on_write(uv_write_t* req, int status) noexcept;
    static void on_shutdown(uv_shutdown_t* req, int status) noexcept;
    static void on_close(uv_handle_t* h) noexcept;
    static void on_listener_closed(uv_handle_t* h) noexcept;
    static void on_timer(uv_timer_t* t) noexcept;
    static void on_stop(uv_poll_t* p, int status, int events) noexcept;
    static Worker& of(const uv_handle_t* h) noexcept;

    // Runs f; an exception stops the loop and run() rethrows it. After one,
    // callbacks do nothing: the state they would act on may be half-updated.
    template <typename F>
    void guard(F&& f) noexcept;

    void start();
    int open_listener() noexcept;
    void close_listener() noexcept;
    void connection(int status);
    void accept_one();
    void accept_failed(int status);
    void pause_accepting(int status);
    void resume_accepting();
    void pause_at_limit();
    void resume_at_limit();
    void read(Connection& c, ssize_t nread, const uv_buf_t& buf);
    bool send_batch(Connection& c);
    void start_write(Connection& c);
    void written(Connection& c, int status);
    bool start_reading(Connection& c) noexcept;
    void stop_reading(Connection& c) noexcept;
    void touch(Connection& c) noexcept;
    void track_head(Connection& c) noexcept;
    void expire_head(Connection& c);
    void finish(Connection& c);
    void close_now(Connection& c);
    void recycle(Connection& c) noexcept;
    void begin_shutdown();
    void end_shutdown() noexcept;
    void timers();
    void schedule(Millis due) noexcept;
    [[nodiscard]] Millis now() noexcept { return uv_now(loop_.get()); }

    Loop loop_;  // first: destroyed last, after every handle below was closed
    const runtime::ServerOptions& opts_;
    runtime::UniqueFd& listen_fd_;  // the runtime's socket; listener_ holds a dup
    int stop_fd_;
    runtime::ConnectionLimit& limit_;
    const Millis idle_ms_;
    const Millis linger_ms_;
    const Millis header_ms_;
    http::ResponseCache cache_;
    // One read buffer and one output buffer per loop, shared by its
    // connections: libuv's read callback consumes the bytes before it
    // returns, so an idle connection holds no buffer at all.
    std::unique_ptr<char[]> read_buf_;
    http::ByteBuffer out_;

    uv_tcp_t listener_{};
    ListenerState listener_state_ = ListenerState::closed;
    uv_poll_t stop_poll_{};
    uv_timer_t timer_{};
    bool timer_open_ = false;
    bool timer_armed_ = false;
    Millis timer_due_ = 0;

    std::deque<Connection> pool_;  // stable addresses (libuv and llhttp point into them)
    FreeList free_;
    ActivityList by_activity_;  // open connections not lingering, for --idle-timeout
    LingerList lingering_;
    HeadList in_head_;  // connections inside a request head, oldest head first
    std::size_t live_ = 0;

    bool stopping_ = false;
    Millis shutdown_deadline_ = 0;
    bool accept_paused_ = false;  // after an accept error: the listener handle is closed
    Millis accept_resume_ = 0;
    bool paused_at_limit_ = false;  // libuv holds one accepted connection for us
    Millis limit_retry_ = 0;
    runtime::RateLimit accept_log_;
    runtime::RateLimit limit_log_;
    std::exception_ptr error_;
};

void run_worker(const runtime::WorkerContext& ctx);

}  // namespace sm::libuv
