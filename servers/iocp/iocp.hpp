// server-iocp: Winsock 2 with I/O completion ports, one port per thread.
//
// Windows has no SO_REUSEPORT to give each thread its own accept queue, and
// a socket reports its completions to one port only. So the server has one
// listener, associated with thread 0's port; thread 0 keeps a few AcceptEx
// calls posted on it and assigns each accepted socket, round-robin, to a
// thread: it associates the socket with that thread's port and posts it
// there. From then on every completion of the connection arrives on its
// thread's port, so a connection is only ever touched by one thread: no
// locks, and the shared lifecycle of common/runtime/connections.hpp (one
// thread's connections) applies as it does to the Linux event loops. The
// only cross-thread step is one posted completion per connection.
//
// The alternative, one port shared by N threads (what the .NET thread pool
// and IIS do), lets any thread take any completion: the connection's state
// then needs a lock or an owner hand-off per completion, and its bytes move
// between cores. It balances uneven work better; per-thread ports are the
// shape of the Linux models this suite compares it with.
//
// Per connection: one WSARecv in flight into the connection's buffer; the
// bytes of every completion dequeued in one GetQueuedCompletionStatusEx
// batch go to its http::Session, and the responses for the whole batch
// leave with one WSASend (one send in flight per connection). Output held
// at --output-mark stops the receiving until it drains (the session
// defers the responses it has no room for): a client that pipelines
// without reading is held back by TCP flow control.
// Everything protocol lives in common/http, the connection lifecycle
// (accept gate, deadlines, lingering close, graceful stop) in common/runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "runtime/connections.hpp"
#include "runtime/send_buffers.hpp"
#include "runtime/server.hpp"
#include "runtime/windows/winsock.hpp"

namespace sm::iocp {

using runtime::Clock;

struct Connection;

// An overlapped operation: the OVERLAPPED first, so that the pointer a
// completion returns is the Op's.
struct Op {
    enum Kind : std::uint8_t { recv, send, accept };
    OVERLAPPED ov{};
    Kind kind;
    Connection* conn = nullptr;  // recv and send
};

struct Connection : runtime::ConnectionRecord {
    Connection()
        : recv_op{.kind = Op::recv, .conn = this},
          send_op{.kind = Op::send, .conn = this} {}

    SOCKET socket = INVALID_SOCKET;  // INVALID_SOCKET once closed
    Op recv_op;
    Op send_op;
    std::unique_ptr<char[]> in;  // what the WSARecv in flight writes into
    http::ByteBuffer out;        // responses produced since the last send was posted
    http::ByteBuffer sending;    // what the WSASend in flight reads: untouched until it completes
    std::uint8_t ops = 0;        // operations in flight; the object is reused once back at 0
    bool recv_posted = false;
    bool send_posted = false;
    bool closing = false;         // closed: recycled when ops reaches 0
    runtime::ListHook work_hook;  // in Worker::work_: needs a look after the batch
};

// Where runtime::Deadlines asks the kernel what it still holds for c.
inline runtime::NativeHandle socket_of(const Connection& c) noexcept {
    return static_cast<runtime::NativeHandle>(c.socket);
}

// A socket waiting for AcceptEx to give it a connection.
struct AcceptSlot {
    Op op{.kind = Op::accept};
    SOCKET socket = INVALID_SOCKET;
    // AcceptEx writes both addresses here (each 16 bytes over its size).
    char addresses[2 * (sizeof(sockaddr_in6) + 16)];
};

class Worker {
  public:
    // `ports`: every thread's completion port, this one's at ctx.index.
    Worker(const runtime::WorkerContext& ctx, std::span<const HANDLE> ports);
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;
    void run();

    // Completion keys: what a completion is for.
    static constexpr ULONG_PTR kIoKey = 0;     // the OVERLAPPED is an Op
    static constexpr ULONG_PTR kStopKey = 1;   // the server stops
    static constexpr ULONG_PTR kAdoptKey = 2;  // the "OVERLAPPED" is a SOCKET thread 0 assigned here
    static constexpr ULONG_PTR kAcceptKey = 3;  // thread 0 posts its AcceptEx calls again

  private:
    using WorkList = runtime::IntrusiveList<Connection, &Connection::work_hook>;

    void dispatch(const OVERLAPPED_ENTRY& e);
    void on_accept(AcceptSlot& slot, DWORD error);
    void post_accepts();
    bool post_accept(AcceptSlot& slot);  // false: it failed at once
    void cancel_accepts();
    void assign(SOCKET s);
    void adopt(SOCKET s);
    void pause_at_limit();
    void resume_accepting();

    void post_recv(Connection& c);
    void post_send(Connection& c);
    void on_recv(Connection& c, DWORD bytes, DWORD error);
    void on_send(Connection& c, DWORD bytes, DWORD error);
    void mark(Connection& c) noexcept { work_.push_back_once(c); }
    void work(Connection& c);
    void expire_head(Connection& c);
    void finish(Connection& c);
    void close_now(Connection& c);
    // An operation of c ended (or c closed with none in flight). True: c is
    // closing, and the caller must not touch it (it may be recycled).
    bool op_done(Connection& c) noexcept;
    void begin_shutdown();
    [[nodiscard]] DWORD next_timeout_ms() const;

    runtime::Listener& listener_;  // thread 0 accepts; the others never touch it
    const bool accepting_;
    std::span<const HANDLE> ports_;
    HANDLE port_;
    http::ResponseCache cache_;
    runtime::Connections<Connection> conns_;
    runtime::SpareBuffers spare_;  // output buffers of the connections between requests
    LPFN_ACCEPTEX accept_ex_ = nullptr;
    int listen_family_ = AF_INET;  // of the sockets AcceptEx is given
    std::vector<std::unique_ptr<AcceptSlot>> slots_;  // thread 0's AcceptEx calls
    std::size_t accepts_posted_ = 0;
    bool accept_retry_posted_ = false;  // a kAcceptKey completion is queued
    std::size_t next_thread_ = 0;
    // Accepted while at --max-connections.
    using Parked = runtime::ParkedConnections<SOCKET>;
    Parked parked_;
    WorkList work_;
    std::size_t inflight_ = 0;  // posted operations whose completion is due
    Clock::time_point now_{};   // read once per batch
};

// Model::worker: makes the ports and runs --threads workers, each on its
// own thread (pinned with --cpus), until the stop signal.
void serve_threads(const runtime::WorkerContext& ctx);

}  // namespace sm::iocp
