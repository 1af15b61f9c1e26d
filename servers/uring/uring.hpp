// server-uring: one io_uring per thread, each with its own SO_REUSEPORT
// listener, so threads share nothing. Completion I/O end to end:
//   - one multishot accept on the listener;
//   - one multishot recv per connection, into buffers the thread provides
//     through a buffer ring: memory follows the data in flight, not the
//     number of connections, and a buffer goes back to the ring as soon as
//     its bytes are fed to the connection's http::Session; a connection
//     that once outran its output (--output-mark) gets one buffer per recv
//     from then on, posted only when its output has room;
//   - the responses a completion batch produces for a connection collect in
//     its output buffer and leave with one IORING_OP_SEND per connection per
//     submission (one send in flight per connection);
//   - one io_uring_enter per loop iteration submits everything and waits.
// Everything protocol lives in common/http, the connection lifecycle in
// common/runtime/connections.hpp.
//
// --uring-buffers sets the number of provided buffers per thread (tests use a
// tiny ring to make it run dry).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "db/async_client.hpp"
#include "http/byte_buffer.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "runtime/connections.hpp"
#include "runtime/send_buffers.hpp"
#include "runtime/log.hpp"
#include "runtime/server.hpp"
#include "uring/ring.hpp"
#include "uring/server_shape.hpp"

namespace sm::uring {

using runtime::Clock;

// Aligned so that the low three bits of its address can tag the operation in
// a completion's user_data (server_shape::tag).
struct alignas(8) Connection : runtime::ConnectionRecord {
    using ConnectionRecord::ConnectionRecord;

    int fd = -1;               // -1 while the object is free
    http::ByteBuffer out;      // responses produced since the last send was submitted
    http::ByteBuffer sending;  // what the send in flight reads: untouched until it completes
    // Operations in flight (the recv, the send). The object is reused, and
    // the descriptor closed, only once this is back to 0.
    std::uint8_t ops = 0;
    bool recv_armed = false;       // a recv is in flight
    bool multishot_armed = false;  // ... and it is a multishot one
    bool recv_cancelling = false;  // an ASYNC_CANCEL for it is on its way
    // The client once outran its output: one buffer per recv from then on
    // (see Worker::arm_recv).
    bool single_shot = false;
    bool send_in_flight = false;
    bool closing = false;         // cancelled: closed and recycled when ops reaches 0
    runtime::ListHook work_hook;  // in Worker::work_: needs a look after the batch
};

class Worker final : db::Loop {
  public:
    explicit Worker(const runtime::WorkerContext& ctx);
    void run();

  private:
    using WorkList = runtime::IntrusiveList<Connection, &Connection::work_hook>;

    // What a completion is for (server_shape::Op), and this model's own:
    // kDb carries a database socket's slot and generation (DbPoll).
    using enum server_shape::Op;
    static constexpr std::uint64_t kDb = server_shape::kFirstOwnOp;

    void wait();
    void complete(std::uint64_t user_data, int res, unsigned flags);
    void queued(io_uring_sqe* s, std::uint64_t user_data) noexcept;

    void arm_accept();
    void cancel_accept();
    void on_accept(int res, unsigned flags);
    void adopt(int fd);
    void open_connection(int fd);
    void pause_at_limit();
    void resume_accepting();

    void arm_recv(Connection& c);
    void on_recv(Connection& c, int res, unsigned flags);
    void note_ring_dry();
    void pause_recv(Connection& c);
    void feed(Connection& c, std::string_view data);
    void on_send(Connection& c, int res);
    void mark(Connection& c) noexcept { work_.push_back_once(c); }
    void work(Connection& c);
    void expire_head(Connection& c);
    void finish(Connection& c);
    void close_now(Connection& c);
    void finalize(Connection& c);
    void begin_shutdown();

    // db::Loop: one-shot POLL_ADDs on the database's sockets, re-armed after
    // each completion while watched (level-triggered, as the client wants).
    void watch(int fd, bool read, bool write) noexcept override;
    void unwatch(int fd) noexcept override;
    void deliver(void* owner, const http::Job& job, const http::JobResult& result) noexcept override;
    void arm_db(std::size_t slot) noexcept;
    static constexpr std::uint64_t db_tag(std::size_t slot, std::uint32_t generation) noexcept {
        return (static_cast<std::uint64_t>(generation) << 32) | (slot << 8) | kDb;
    }
    void on_db(std::uint64_t user_data, int res);
    // The connections marked in this batch, and the database's round of
    // sends (whose failures may mark more), until neither has anything left.
    void run_work();

    runtime::Listener& listener_;
    const runtime::StopSignal& stop_;
    http::ResponseCache cache_;
    runtime::Connections<Connection> conns_;
    runtime::SpareBuffers spare_;  // output buffers of the connections between requests
    // Accepted while the thread was at --max-connections.
    using Parked = runtime::ParkedConnections<int>;
    Parked parked_;
    // Declared before the ring so that they outlive it: the kernel may write
    // into them until the ring is torn down.
    ProvidedBuffers buffers_;
    Ring ring_;

    WorkList work_;
    std::size_t inflight_ = 0;  // submitted (or prepared) operations whose last completion is due
    Clock::time_point now_{};   // read once per loop iteration

    bool accept_armed_ = false;
    bool accept_cancelling_ = false;
    runtime::RateLimitedLog dry_log_;

    // --db: this thread's database connections and their sockets' polls. A
    // slot's generation changes when it is unwatched, so the completion of
    // a poll armed before then is recognised and dropped.
    struct DbPoll {
        int fd = -1;
        unsigned events = 0;     // POLLIN / POLLOUT wanted
        std::uint32_t generation = 0;
        bool armed = false;      // a poll of this generation is in flight
    };
    std::array<DbPoll, runtime::kMaxDbConnections> db_polls_{};  // one per --db-connections
    std::optional<db::AsyncClient> db_;
};

}  // namespace sm::uring
