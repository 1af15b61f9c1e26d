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
#include "runtime/intrusive_list.hpp"
#include "runtime/log.hpp"
#include "runtime/server.hpp"
#include "runtime/unique_fd.hpp"

namespace sm::threadpool {

using Clock = std::chrono::steady_clock;

struct Connection {
    Connection(int socket, const http::ResponseCache& cache, const http::Limits& limits) noexcept
        : fd(socket), session(cache, limits) {}

    const int fd;
    std::uint32_t events = 0;  // what epoll reported; written before the hand-off
    // Release-stored by the worker before it re-arms the connection,
    // acquire-exchanged by the reactor when its event arrives: the kernel
    // orders the two (epoll_ctl before the event), this makes that order
    // visible to the memory model (and to ThreadSanitizer), so the next
    // owner sees everything the last one wrote.
    std::atomic<bool> armed{true};
    http::Session session;     // touched only by the worker that owns the connection
    http::ByteBuffer pending;  // unsent responses; the connection then waits for EPOLLOUT
    bool want_close = false;   // the session ended: close once pending is written
    bool lingering = false;    // our side is shut down; reading until the client closes
    // Read by the reactor's sweep, written by the owner (no other shared state).
    std::atomic<Clock::rep> last_active{0};
    std::atomic<Clock::rep> linger_deadline{0};  // 0: not lingering
    std::atomic<Clock::rep> head_deadline{0};    // 0: no request head in progress
    http::HeadMark head;  // which head the deadline is for (owner only)
    runtime::ListHook registry_hook;             // under Pool::registry_mutex_
};

// A bounded multi-producer multi-consumer queue of ready connections.
class HandOffQueue {
  public:
    explicit HandOffQueue(std::size_t capacity) : ring_(capacity) {}

    // Hands over a batch in order, waiting for room when full (back-pressure:
    // the reactor stops taking events, the kernel keeps the rest). Returns
    // how many times it had to wait.
    std::size_t push(Connection* const* items, std::size_t n);
    // The next connection, or nullptr once closed and drained.
    Connection* pop();
    void close();

  private:
    std::mutex mutex_;
    std::condition_variable not_empty_;
    std::condition_variable not_full_;
    std::vector<Connection*> ring_;  // fixed capacity: no allocation per hand-off
    std::size_t head_ = 0;
    std::size_t count_ = 0;
    bool closed_ = false;
};

class Pool {
  public:
    explicit Pool(const runtime::WorkerContext& ctx);
    ~Pool();
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    void run();  // the reactor; returns after shutdown

  private:
    using Registry = runtime::IntrusiveList<Connection, &Connection::registry_hook>;

    struct Worker;
    void worker_loop(Worker& w);
    void service(Worker& w, Connection& c, std::uint32_t events);
    bool flush(Connection& c, http::ByteBuffer& out);
    void rearm(Connection& c, std::uint32_t events);
    void start_linger(Worker& w, Connection& c);
    void track_head(Connection& c) noexcept;
    void expire_head(Worker& w, Connection& c);
    void close_connection(Connection& c);

    void accept_connections();
    void pause_accepting(std::chrono::milliseconds for_how_long);
    void sweep(Clock::time_point now);
    void begin_shutdown(Clock::time_point now);

    const runtime::ServerOptions& opts_;
    runtime::UniqueFd& listener_;
    int stop_fd_;
    runtime::ConnectionLimit& limit_;
    runtime::UniqueFd ep_;
    HandOffQueue queue_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::vector<std::jthread> threads_;

    std::mutex registry_mutex_;
    Registry registry_;
    std::size_t open_ = 0;  // under registry_mutex_

    std::atomic<bool> stopping_{false};
    bool accept_paused_ = false;
    Clock::time_point accept_resume_{};
    Clock::time_point next_sweep_{};
    Clock::time_point shutdown_deadline_{};
    runtime::RateLimit accept_log_;
    runtime::RateLimit queue_log_;
};

void run_pool(const runtime::WorkerContext& ctx);

}  // namespace sm::threadpool
