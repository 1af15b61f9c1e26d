// server-epoll: one edge-triggered epoll reactor per thread, each with its own
// SO_REUSEPORT listener, so threads share nothing: no locks, no cross-core
// hand-off. Per read batch: read until the socket is drained (or a budget is
// spent), feed the bytes to the connection's http::Session, write the
// responses with one send(). Everything protocol lives in common/http.
#pragma once

#include <sys/epoll.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "runtime/intrusive_list.hpp"
#include "runtime/log.hpp"
#include "runtime/server.hpp"
#include "runtime/unique_fd.hpp"

namespace sm::epoll {

using Clock = std::chrono::steady_clock;

struct Connection {
    Connection(const http::ResponseCache& cache, const http::Limits& limits) noexcept
        : session(cache, limits) {}

    int fd = -1;  // -1 once closed; the object is recycled only after the event batch
    http::Session session;
    http::ByteBuffer pending;    // responses the socket has not taken yet (waiting for EPOLLOUT)
    bool input_ready = false;    // the last read did not prove the socket drained
    bool peer_closed = false;    // read() returned 0: the client shut down its side
    bool peer_fin_seen = false;  // EPOLLRDHUP/EPOLLHUP arrived: the EOF is waiting to be read
    bool want_close = false;     // the session ended (Connection: close, error, HTTP/1.0)
    bool lingering = false;      // our side shut down; draining until the client closes
    Clock::time_point linger_deadline{};
    Clock::time_point last_active{};  // last read or write progress
    Clock::time_point head_deadline{};  // the request head in progress must be complete by then
    http::HeadMark head;                // which head the deadline is for
    runtime::ListHook ready_hook;   // in Reactor::ready_: has input left after its budget
    runtime::ListHook linger_hook;  // in Reactor::lingering_
    runtime::ListHook idle_hook;    // in Reactor::by_activity_, least recently active first
    runtime::ListHook head_hook;    // in Reactor::in_head_: a request head is partly here
};

class Reactor {
  public:
    explicit Reactor(const runtime::WorkerContext& ctx);
    void run();

  private:
    using ReadyList = runtime::IntrusiveList<Connection, &Connection::ready_hook>;
    using LingerList = runtime::IntrusiveList<Connection, &Connection::linger_hook>;
    using ActivityList = runtime::IntrusiveList<Connection, &Connection::idle_hook>;
    using HeadList = runtime::IntrusiveList<Connection, &Connection::head_hook>;

    void dispatch(const epoll_event& ev);
    void accept_connections();
    void pause_accepting(int err);
    void pause_accepting_at_limit();
    void touch(Connection& c) noexcept;
    void track_head(Connection& c) noexcept;
    void expire_head(Connection& c);
    void resume_accepting();
    void service(Connection& c);
    bool write_pending(Connection& c);
    void finish(Connection& c);
    void start_linger(Connection& c);
    void drain_linger(Connection& c);
    void close_now(Connection& c);
    void begin_shutdown();
    void run_ready();
    void run_timers();
    int next_timeout_ms();
    void recycle_closed();

    const runtime::ServerOptions& opts_;
    runtime::UniqueFd& listener_;
    int stop_fd_;
    runtime::ConnectionLimit& limit_;
    runtime::UniqueFd ep_;
    http::ResponseCache cache_;
    // One read buffer and one output buffer per thread, shared by its
    // connections: an idle connection holds no buffer at all.
    std::unique_ptr<char[]> read_buf_;
    http::ByteBuffer out_;

    std::deque<Connection> pool_;  // stable addresses (llhttp and epoll point into them)
    std::vector<Connection*> free_;
    std::vector<Connection*> closed_;  // closed in this batch, recycled after it
    ReadyList ready_;
    LingerList lingering_;
    ActivityList by_activity_;  // open connections (not lingering), for --idle-timeout
    HeadList in_head_;          // connections inside a request head, oldest head first
    std::size_t live_ = 0;
    Clock::time_point now_{};  // read once per loop iteration

    bool stopping_ = false;
    Clock::time_point shutdown_deadline_{};
    bool accept_paused_ = false;
    bool paused_at_limit_ = false;
    Clock::time_point accept_resume_{};
    runtime::RateLimit accept_log_;
    runtime::RateLimit limit_log_;
};

void run_worker(const runtime::WorkerContext& ctx);

}  // namespace sm::epoll
