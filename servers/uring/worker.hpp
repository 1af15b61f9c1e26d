// server-uring: one io_uring per thread, each with its own SO_REUSEPORT
// listener, so threads share nothing. Completion I/O end to end:
//   - one multishot accept on the listener;
//   - one multishot recv per connection, into buffers the thread provides
//     through a buffer ring: memory follows the data in flight, not the
//     number of connections, and a buffer goes back to the ring as soon as
//     its bytes are fed to the connection's http::Session;
//   - the responses a completion batch produces for a connection collect in
//     its output buffer and leave with one IORING_OP_SEND per connection per
//     submission (one send in flight per connection);
//   - one io_uring_enter per loop iteration submits everything and waits.
// Everything protocol lives in common/http.
//
// --uring-buffers sets the number of provided buffers per thread (tests use a
// tiny ring to make it run dry).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "runtime/intrusive_list.hpp"
#include "runtime/log.hpp"
#include "runtime/server.hpp"
#include "runtime/unique_fd.hpp"
#include "uring/ring.hpp"

namespace sm::uring {

using Clock = std::chrono::steady_clock;

// Aligned so that the low three bits of its address can tag the operation in
// a completion's user_data.
struct alignas(8) Connection {
    Connection(const http::ResponseCache& cache, const http::Limits& limits) noexcept
        : session(cache, limits) {}

    int fd = -1;  // -1 while the object is free
    http::Session session;
    http::ByteBuffer out;      // responses produced since the last send was submitted
    http::ByteBuffer sending;  // what the send in flight reads: untouched until it completes
    // Input that arrived while the output was over the mark (recv_paused),
    // not fed yet: the kernel may complete a multishot recv many times
    // before its cancel lands, and feeding it all would multiply the output.
    http::ByteBuffer held;
    // Operations in flight (the multishot recv, the send). The object is
    // reused, and the descriptor closed, only once this is back to 0.
    std::uint8_t ops = 0;
    bool recv_armed = false;       // a multishot recv is in flight
    bool recv_cancelling = false;  // an ASYNC_CANCEL for it is on its way
    bool recv_paused = false;      // output backed up: input is held, recv off until it drains
    bool send_in_flight = false;
    bool peer_closed = false;         // recv returned 0: the client shut down its side
    bool want_close = false;          // the session ended (Connection: close, error, HTTP/1.0)
    bool lingering = false;           // our side shut down; discarding input until EOF or deadline
    bool closing = false;             // cancelled: closed and recycled when ops reaches 0
    Clock::time_point last_active{};  // last recv or send progress
    Clock::time_point linger_deadline{};
    Clock::time_point head_deadline{};  // the request head in progress must be complete by then
    http::HeadMark head;                // which head the deadline is for
    runtime::ListHook idle_hook;    // in Worker::by_activity_, least recently active first
    runtime::ListHook linger_hook;  // in Worker::lingering_, earliest deadline first
    runtime::ListHook work_hook;    // in Worker::work_: needs a look after the batch
    runtime::ListHook head_hook;    // in Worker::in_head_: a request head is partly here
};

class Worker {
  public:
    explicit Worker(const runtime::WorkerContext& ctx);
    void run();

  private:
    using ActivityList = runtime::IntrusiveList<Connection, &Connection::idle_hook>;
    using LingerList = runtime::IntrusiveList<Connection, &Connection::linger_hook>;
    using WorkList = runtime::IntrusiveList<Connection, &Connection::work_hook>;
    using HeadList = runtime::IntrusiveList<Connection, &Connection::head_hook>;

    // What a completion is for: the low bits of its user_data. recv and send
    // carry the Connection's address in the other bits.
    enum Op : std::uint64_t { kIgnore = 0, kRecv = 1, kSend = 2, kAccept = 3, kStop = 4 };

    void wait();
    void reap();
    void complete(std::uint64_t user_data, int res, unsigned flags);

    void arm_stop();
    void arm_accept();
    void cancel_accept();
    void on_accept(int res, unsigned flags);
    void adopt(int fd);
    void open_connection(int fd);
    void pause_accepting(int err);
    void pause_at_limit();
    void try_resume_at_limit();

    void arm_recv(Connection& c);
    void on_recv(Connection& c, int res, unsigned flags);
    void note_ring_dry();
    void pause_recv(Connection& c);
    void feed_held(Connection& c);
    void start_send(Connection& c);
    void on_send(Connection& c, int res);
    void mark(Connection& c) noexcept;
    void work(Connection& c);
    void touch(Connection& c) noexcept;
    void track_head(Connection& c) noexcept;
    void expire_head(Connection& c);
    void finish(Connection& c);
    void start_linger(Connection& c);
    void close_now(Connection& c);
    void finalize(Connection& c);
    void begin_shutdown();
    void run_timers();
    [[nodiscard]] Clock::time_point next_deadline();

    const runtime::ServerOptions& opts_;
    runtime::UniqueFd& listener_;
    int stop_fd_;
    runtime::ConnectionLimit& limit_;
    http::ResponseCache cache_;

    std::deque<Connection> pool_;  // stable addresses: the kernel and llhttp point into them
    std::vector<Connection*> free_;
    // Accepted while the thread was at --max-connections: served, oldest
    // first, as slots free (they wait as they would in the listen backlog).
    std::deque<int> parked_;
    // Declared before the ring so that they outlive it: the kernel may write
    // into them until the ring is torn down.
    ProvidedBuffers buffers_;
    Ring ring_;

    WorkList work_;
    LingerList lingering_;
    HeadList in_head_;          // connections inside a request head, oldest head first
    ActivityList by_activity_;  // open connections, not lingering: --idle-timeout
    std::size_t live_ = 0;      // connections not yet finalized
    std::size_t inflight_ = 0;  // submitted (or prepared) operations whose last completion is due
    Clock::time_point now_{};   // read once per loop iteration

    bool stopping_ = false;
    Clock::time_point shutdown_deadline_{};
    bool accept_armed_ = false;
    bool accept_cancelling_ = false;
    bool accept_paused_ = false;    // EMFILE and friends, or at the limit
    bool paused_at_limit_ = false;  // at --max-connections
    Clock::time_point accept_resume_{};
    runtime::RateLimit accept_log_;
    runtime::RateLimit limit_log_;
    runtime::RateLimit dry_log_;
};

void run_worker(const runtime::WorkerContext& ctx);

}  // namespace sm::uring
