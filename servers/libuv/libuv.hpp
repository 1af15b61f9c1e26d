// server-libuv: one uv_loop per thread, each with its own SO_REUSEPORT
// listener (--threads 1 is the classic single loop): what a portable event
// library costs next to server-epoll's hand-written reactor. libuv reads into
// the loop's buffer and calls back; the bytes go to the connection's
// http::Session and the responses to one uv_try_write; what the socket does
// not take goes out with uv_write while reading pauses. Everything protocol
// lives in common/http, the connection lifecycle in
// common/runtime/connections.hpp.
//
// Where libuv shapes the model:
// - Accepting: libuv accepts, then calls back. While the accept gate is
//   closed at --max-connections the callback does not uv_accept: libuv keeps
//   that one connection (accepted by the kernel, unread) and stops polling
//   the listener, so the next ones wait in the backlog; uv_accept later
//   takes it and resumes polling.
// - Accept errors: libuv 1.44 sheds load on EMFILE itself (it closes a
//   reserved descriptor, accepts and closes what is queued, reopens the
//   reserve). The callback sees an error only when that fails (another
//   thread took the freed slot) or for ENOBUFS/ENOMEM, and libuv retries at
//   once, in a loop, until the callback closes the listener handle. So the
//   handle listens on a dup() of the runtime's socket: closing it pauses
//   accepting without closing the socket, and a fresh handle resumes later.
// - Timers: one uv_timer_t per loop, armed for the lifecycle's next
//   deadline, never a timer per connection.
// - Time: uv_now() (cached once per loop iteration) read as a steady_clock
//   time point: both count CLOCK_MONOTONIC on Linux.
#pragma once

#include <uv.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>

#include "db/async_client.hpp"
#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "runtime/connections.hpp"
#include "runtime/server.hpp"

namespace sm::libuv {

using runtime::Clock;

// The part of a batch uv_try_write did not take, on its way with uv_write:
// made when the socket refuses output (the client reads slower than it
// sends), freed once it is written, so a connection between requests holds
// none of it (it was a third of its memory).
struct Backlog {
    uv_write_t req{};          // data: the Connection
    http::ByteBuffer pending;  // what req is writing
    http::ByteBuffer later;    // responses the database completed during that write
};

struct Connection : runtime::ConnectionRecord {
    uv_tcp_t tcp{};             // data: this Connection
    std::unique_ptr<Backlog> backlog;  // while writing, and until on_close after a cancelled write
    std::size_t unwritten = 0;  // libuv's write queue at the last idle check
    bool reading = false;       // uv_read_start is in effect
    bool writing = false;       // backlog->req is in flight; reading is paused
    runtime::ListHook more_hook;  // in Worker::more_: deferred responses to go on with
};

// Where runtime::Deadlines asks the kernel what it still holds for c (-1
// once the handle is closing: nothing).
inline runtime::NativeHandle socket_of(const Connection& c) noexcept {
    uv_os_fd_t fd = -1;
    return uv_fileno(reinterpret_cast<const uv_handle_t*>(&c.tcp), &fd) == 0 ? fd : -1;
}

class Worker final : db::Loop {
  public:
    explicit Worker(const runtime::WorkerContext& ctx);
    ~Worker();

    void run();

  private:
    enum class ListenerState : std::uint8_t { closed, open, closing };

    // A libuv callback: a noexcept trampoline into member M, through
    // guard(). An exception stops the loop and run() rethrows it; after
    // one, callbacks do nothing: the state they would act on may be
    // half-updated.
    template <auto M, typename H, typename... A>
    static void call(H* h, A... args) noexcept;
    template <typename H>
    static Worker& of(H* h) noexcept {
        return *static_cast<Worker*>(reinterpret_cast<const uv_handle_t*>(h)->loop->data);
    }
    static Worker& of(uv_write_t* req) noexcept { return of(req->handle); }
    static void on_close(uv_handle_t* h) noexcept;

    int open_listener() noexcept;
    void close_listener() noexcept;
    void connection(uv_stream_t*, int status);
    void accept_one();
    void pause_accepting(int status);
    void check_gate();
    void read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
    bool send_batch(Connection& c);
    void pause(Connection& c);
    void go_on(Connection& c);
    void turns(uv_idle_t*);
    void written(uv_write_t* req, int status);
    bool start_reading(Connection& c) noexcept;
    void expire_head(Connection& c);
    void finish(Connection& c);
    void close_now(Connection& c);
    void begin_shutdown(uv_poll_t*, int, int);
    void end_shutdown() noexcept;
    void timers(uv_timer_t*);
    void schedule() noexcept;
    // db::Loop: a uv_poll_t per database socket; the rows it brings back.
    void watch(int fd, bool read, bool write) noexcept override;
    void unwatch(int fd) noexcept override;
    void deliver(void* owner, const http::Job& job, const http::JobResult& result) noexcept override;
    void db_ready(uv_poll_t* p, int status, int events);
    void before_poll(uv_prepare_t*);
    [[nodiscard]] Clock::time_point now() noexcept {
        return Clock::time_point(std::chrono::milliseconds(uv_now(&loop_)));
    }

    uv_loop_t loop_{};  // closed by the destructor once every handle below was closed
    const runtime::ServerOptions& opts_;
    runtime::Listener& listen_socket_;  // the runtime's socket; listener_ holds a dup
    const runtime::StopSignal& stop_;
    http::ResponseCache cache_;
    runtime::Connections<Connection> conns_;
    // One read buffer and one output buffer per loop, shared by its
    // connections: libuv's read callback consumes the bytes before it
    // returns, so an idle connection holds no buffer at all.
    std::unique_ptr<char[]> read_buf_;
    http::ByteBuffer out_;

    uv_tcp_t listener_{};
    ListenerState listener_state_ = ListenerState::closed;
    uv_poll_t stop_poll_{};
    uv_timer_t timer_{};
    // Connections with deferred responses to go on with in the next
    // iteration, and the idle handle (active only while there are some) that
    // does so without waiting in the poll.
    using WorkList = runtime::IntrusiveList<Connection, &Connection::more_hook>;
    WorkList more_;
    uv_idle_t more_idle_{};
    bool timer_open_ = false;
    bool timer_armed_ = false;
    Clock::time_point timer_due_{};
    std::exception_ptr error_;
    // --db: this loop's database connections, their sockets' poll handles
    // (a slot each; one being closed is not reused until its close
    // callback), and the check that sends each iteration's jobs together.
    struct DbPoll {
        uv_poll_t poll{};
        int fd = -1;
        bool in_use = false;  // from uv_poll_init until the close callback
    };
    std::array<DbPoll, runtime::kMaxDbConnections> db_polls_{};
    uv_prepare_t db_flush_{};
    std::optional<db::AsyncClient> db_;
};

}  // namespace sm::libuv
