// server-threadpool: half-sync/half-async, the classic Java/.NET shape.
//
// One reactor thread owns the epoll set: it accepts connections and, when one
// becomes readable (EPOLLONESHOT), hands it to a bounded queue. A fixed pool of
// --threads workers takes connections from the queue, reads, runs the
// session, writes with one send, and re-arms the connection in epoll. The
// hand-off (a mutex and two condition variables, like Java's
// ArrayBlockingQueue) and the re-arming epoll_ctl per batch are this model's
// cost, and what it is here to show.
//
// Ownership rule: a connection armed in epoll belongs to the kernel and the
// reactor; once its event fired it belongs to exactly one worker until that
// worker re-arms or closes it. Only workers close and free connections. The
// reactor enforces timeouts and shutdown without touching connection state:
// it shutdown()s the socket, the owner sees EOF and closes as usual.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "runtime/accept_gate.hpp"
#include "runtime/handoff_queue.hpp"
#include "runtime/intrusive_list.hpp"
#include "runtime/log.hpp"
#include "runtime/posix/epoll_util.hpp"
#include "runtime/posix/unique_fd.hpp"
#include "runtime/server.hpp"
#include "runtime/connection_state.hpp"

namespace sm::threadpool {

using runtime::Clock;

// The connection's state (connection_state.hpp) with its deadlines in
// relaxed atomics: written by the worker that owns it, read by the
// reactor's sweep (no other shared state).
struct Connection : runtime::ConnectionState<runtime::Shared> {
    explicit Connection(int socket) noexcept : fd(socket) {
        clock.start(Clock::now());
    }

    const int fd;
    std::uint32_t events = 0;  // what epoll reported; written before the hand-off
    // Release-stored by the worker before it re-arms the connection,
    // acquire-exchanged by the reactor when its event arrives: the kernel
    // orders the two (epoll_ctl before the event), this makes that order
    // visible to the memory model (and to ThreadSanitizer), so the next
    // owner sees everything the last one wrote.
    std::atomic<bool> armed{true};
    http::ByteBuffer pending;         // unsent responses; the connection then waits for EPOLLOUT
    runtime::ListHook registry_hook;  // under Pool::registry_mutex_
};

class Pool {
  public:
    explicit Pool(const runtime::WorkerContext& ctx);
    ~Pool();

    void run();  // the reactor; returns after shutdown

  private:
    using Registry = runtime::IntrusiveList<Connection, &Connection::registry_hook>;

    struct Worker;
    void worker_loop(Worker& w);
    void service(Worker& w, Connection& c, std::uint32_t events);
    bool send_owed(Worker& w, Connection& c, Clock::time_point& now);
    bool flush(Connection& c, http::ByteBuffer& out);
    void rearm(Connection& c, std::uint32_t events);
    void start_linger(Worker& w, Connection& c);
    void expire_head(Worker& w, Connection& c);
    void close_connection(Connection& c);

    bool adopt(int fd);
    void sweep(Clock::time_point now);
    void begin_shutdown(Clock::time_point now);

    const runtime::ServerOptions& opts_;
    const runtime::StopSignal& stop_;
    runtime::AcceptGate gate_;  // release() is called by the workers: an atomic
    runtime::UniqueFd ep_;
    runtime::WatchedListener listener_;
    runtime::HandOffQueue<Connection> queue_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::vector<std::jthread> threads_;

    std::mutex registry_mutex_;
    Registry registry_;
    std::size_t open_ = 0;  // under registry_mutex_

    std::atomic<bool> stopping_{false};
    Clock::time_point next_sweep_{};
    Clock::time_point shutdown_deadline_{};
    runtime::RateLimitedLog queue_log_;
};

}  // namespace sm::threadpool
