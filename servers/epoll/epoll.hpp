// server-epoll: one edge-triggered epoll reactor per thread, each with its own
// SO_REUSEPORT listener, so threads share nothing: no locks, no cross-core
// hand-off. Per read batch: read until the socket is drained (or a budget is
// spent), feed the bytes to the connection's http::Session, write the
// responses with one send(). Everything protocol lives in common/http, the
// connection lifecycle (accept gate, deadlines, lingering close, graceful
// stop) in common/runtime/connections.hpp: this is the poller and its
// read/write loop.
#pragma once

#include <sys/epoll.h>

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "db/async_client.hpp"
#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "runtime/connections.hpp"
#include "runtime/posix/epoll_util.hpp"
#include "runtime/posix/unique_fd.hpp"
#include "runtime/server.hpp"

namespace sm::epoll {

using runtime::Clock;

struct Connection : runtime::ConnectionRecord {
    using ConnectionRecord::ConnectionRecord;

    int fd = -1;
    http::ByteBuffer pending;      // responses the socket has not taken yet (waiting for EPOLLOUT)
    bool input_ready = false;      // the last read did not prove the socket drained
    bool peer_fin_seen = false;    // EPOLLRDHUP/EPOLLHUP arrived: the EOF is waiting to be read
    runtime::ListHook ready_hook;  // in Reactor::ready_: has input left after its budget
};

class Reactor final : db::Loop {
  public:
    explicit Reactor(const runtime::WorkerContext& ctx);
    void run();

  private:
    // db::Loop: the database's sockets in this reactor's epoll
    // set (level-triggered, tagged by slot), and the rows it brings back.
    void watch(int fd, bool read, bool write) noexcept override;
    void unwatch(int fd) noexcept override;
    void deliver(void* owner, const http::Job& job, const http::JobResult& result) noexcept override;

    using ReadyList = runtime::IntrusiveList<Connection, &Connection::ready_hook>;

    void dispatch(const epoll_event& ev);
    bool adopt(int fd);
    void service(Connection& c);
    void read_batch(Connection& c, int& budget);
    bool send_out(Connection& c);
    bool write_pending(Connection& c);
    void expire_head(Connection& c);
    void finish(Connection& c);
    void drain_linger(Connection& c);
    void close_now(Connection& c);
    void begin_shutdown();
    void run_ready();
    int next_timeout_ms();

    const runtime::StopSignal& stop_;
    runtime::UniqueFd ep_;
    http::ResponseCache cache_;
    runtime::Connections<Connection> conns_;
    runtime::WatchedListener listener_;
    // One read buffer and one output buffer per thread, shared by its
    // connections: an idle connection holds no buffer at all.
    std::unique_ptr<char[]> read_buf_;
    http::ByteBuffer out_;
    std::vector<Connection*> closed_;  // closed in this batch, recycled after it
    ReadyList ready_;
    Clock::time_point now_{};  // read once per loop iteration
    // --db: this thread's database connections; their sockets' epoll tags.
    std::optional<db::AsyncClient> db_;
    // (--db-connections is at most runtime::kMaxDbConnections.)
    std::array<int, runtime::kMaxDbConnections> db_fds_{};
    std::array<char, runtime::kMaxDbConnections> db_tags_{};
};

}  // namespace sm::epoll
