// The io_uring engine (--engine uring): one ring per load thread.
//   - one multishot recv per connection into buffers the thread provides
//     through a buffer ring; a buffer goes back as soon as its bytes are framed;
//   - a request batch leaves with one IORING_OP_SEND (the batch is the shared,
//     immutable rendering: nothing is copied per request);
//   - one io_uring_enter per loop iteration submits every send and re-arm
//     prepared since the last one and waits for the next completions; with
//     SINGLE_ISSUER|DEFER_TASKRUN the kernel's completion work runs then, in
//     this thread, batched;
//   - connect is a non-blocking connect() and a one-shot poll for POLLOUT.
// Completions carry the connection's index, its socket's generation and the
// operation in user_data: one for a socket since replaced is stale and only
// returns its buffer. Replacing a socket cancels what is in flight on it (by
// user_data, so the cancel cannot reach a successor that reuses the fd).
#include <liburing.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "uring/ring.hpp"
#include "worker.hpp"

namespace sm::loadgen::detail {
namespace {

using sm::uring::ProvidedBuffers;
using sm::uring::Residency;
using sm::uring::Ring;

// Provided buffers: a multishot recv takes one per completion, and each is
// back in the ring at the end of the batch that framed it, so the count
// bounds the recv completions of one batch (beyond it a recv sees ENOBUFS
// and is re-armed after the batch). Responses are small: 16 KiB holds a
// pipelined batch of them many times over, and a recv of them mostly writes a
// buffer's first page only, so the buffers are left to fault in (Residency::
// on_demand): populated, up to 128 MiB per thread would be resident for
// pages no recv touches, and loadgen's memory is not what a run measures.
constexpr std::size_t kBufferSize = 16 * 1024;
constexpr unsigned kMinBuffers = 64;
constexpr unsigned kMaxBuffers = 8192;
constexpr std::uint16_t kBufferGroup = 0;

class UringWorker final : public Worker<UringWorker> {
    friend class Worker<UringWorker>;

  public:
    explicit UringWorker(const WorkerArgs& a)
        : Worker(a),
          buffers_(std::clamp<unsigned>(std::bit_ceil(static_cast<unsigned>(
                                            std::min<std::size_t>(2 * a.connections, 1u << 20))),
                                        kMinBuffers, kMaxBuffers),
                   kBufferSize, Residency::on_demand) {}
    UringWorker(const UringWorker&) = delete;
    UringWorker& operator=(const UringWorker&) = delete;
    ~UringWorker() override = default;

  private:
    // What a completion is for: the low byte of its user_data. The rest: the
    // connection's index (bits 32-63) and its socket's generation (8-31).
    enum Op : std::uint64_t { kIgnore = 0, kRecv = 1, kSend = 2, kPoll = 3 };

    static std::uint64_t tag(const Conn& c, Op op) noexcept {
        return (static_cast<std::uint64_t>(c.index) << 32) |
               (static_cast<std::uint64_t>(c.generation) << 8) | op;
    }

    void setup();
    bool watch(Conn& /*c*/, std::int64_t /*now*/) noexcept { return true; }
    void await_connect(Conn& c);
    void on_open(Conn& c) { arm_recv(c); }
    void start_send(Conn& c);
    void forget(Conn& c);
    void wait_and_dispatch(std::int64_t now, std::int64_t until);

    io_uring_sqe* sqe();
    void cancel(std::uint64_t user_data);
    void arm_recv(Conn& c);
    void complete(std::uint64_t user_data, int res, unsigned flags);
    void on_recv(Conn& c, int res, unsigned flags);
    void on_send(Conn& c, int res);
    void on_poll(Conn& c, int res);

    // Declared before the ring: the kernel may write into them until it is torn down.
    ProvidedBuffers buffers_;
    Ring ring_;
    // Sends prepared since the last wait. They complete at once when the
    // socket has room, so the wait asks for that many completions plus one:
    // it returns with a receive, not just the sends' own completions.
    unsigned sends_ = 0;
};

void UringWorker::setup() {
    // Made on the load thread: with SINGLE_ISSUER it is the only one that may use it.
    const auto conns = static_cast<unsigned>(std::min<std::size_t>(conns_.size(), 1u << 14));
    const unsigned sq = std::clamp<unsigned>(std::bit_ceil(2 * conns + 16), 64, 4096);
    if (const int rc = ring_.init(sq, 4 * sq); rc < 0)
        throw std::system_error(-rc, std::generic_category(), "io_uring_setup");
    if (!(ring_.get()->features & IORING_FEAT_EXT_ARG))
        throw std::runtime_error("io_uring: the kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11)");
    if (const int rc = buffers_.register_with(ring_, kBufferGroup); rc < 0)
        throw std::system_error(-rc, std::generic_category(), "io_uring_register_buf_ring");
}

io_uring_sqe* UringWorker::sqe() {
    if (io_uring_sqe* s = io_uring_get_sqe(ring_.get())) return s;
    // The queue is full and Ring::sqe() submits what it holds: the buffers
    // framed so far go back first, so a recv re-armed after ENOBUFS in it
    // finds them.
    buffers_.publish();
    return ring_.sqe();
}

void UringWorker::cancel(std::uint64_t user_data) {
    io_uring_sqe* s = sqe();
    io_uring_prep_cancel64(s, user_data, 0);
    io_uring_sqe_set_data64(s, kIgnore);
}

void UringWorker::await_connect(Conn& c) {
    io_uring_sqe* s = sqe();
    io_uring_prep_poll_add(s, c.fd, POLLOUT);
    io_uring_sqe_set_data64(s, tag(c, kPoll));
    c.poll_busy = true;
}

void UringWorker::arm_recv(Conn& c) {
    io_uring_sqe* s = sqe();
    // No buffer of its own: each completion names one from the group.
    io_uring_prep_recv_multishot(s, c.fd, nullptr, 0, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = kBufferGroup;
    io_uring_sqe_set_data64(s, tag(c, kRecv));
    c.recv_armed = true;
}

void UringWorker::start_send(Conn& c) {
    if (c.send_busy || c.write_left == 0) return;
    io_uring_sqe* s = sqe();
    io_uring_prep_send(s, c.fd, c.write_ptr, c.write_left, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(s, tag(c, kSend));
    c.send_busy = true;
    ++sends_;
}

void UringWorker::forget(Conn& c) {
    // The socket is closed right after this: its file lives on while an
    // operation holds it, so each is cancelled (its completion, stale by
    // then, is ignored). By user_data: a new socket may get the same fd.
    if (c.recv_armed) cancel(tag(c, kRecv));
    if (c.send_busy) cancel(tag(c, kSend));
    if (c.poll_busy) cancel(tag(c, kPoll));
    c.recv_armed = c.send_busy = c.poll_busy = false;
}

void UringWorker::wait_and_dispatch(std::int64_t now, std::int64_t until) {
    const std::int64_t wait_ns = std::max<std::int64_t>(until - now, 0);
    __kernel_timespec ts{};
    ts.tv_sec = wait_ns / 1'000'000'000;
    ts.tv_nsec = wait_ns % 1'000'000'000;
    io_uring_cqe* cqe = nullptr;
    buffers_.publish();
    // Everything prepared since the last call goes to the kernel in the same
    // io_uring_enter that waits (the timeout travels with it: EXT_ARG).
    const int rc = io_uring_submit_and_wait_timeout(ring_.get(), &cqe, sends_ + 1, &ts, nullptr);
    sends_ = 0;
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
        throw std::system_error(-rc, std::generic_category(), "io_uring_enter");
    // Buffers framed in a batch go back to the kernel in one store.
    reap(ring_, buffers_,
         [this](std::uint64_t data, int res, unsigned flags) { complete(data, res, flags); });
}

void UringWorker::complete(std::uint64_t user_data, int res, unsigned flags) {
    const auto op = user_data & 0xff;
    const std::size_t index = user_data >> 32;
    const auto generation = static_cast<std::uint32_t>((user_data >> 8) & 0xffffff);
    if (op == kIgnore || index >= conns_.size() || generation != conns_[index].generation ||
        conns_[index].fd < 0) {
        // A cancel's own completion, or one for a socket since replaced:
        // only its buffer matters.
        if (flags & IORING_CQE_F_BUFFER)
            buffers_.give_back(static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT));
        return;
    }
    Conn& c = conns_[index];
    switch (op) {
        case kRecv: return on_recv(c, res, flags);
        case kSend: return on_send(c, res);
        case kPoll: return on_poll(c, res);
        default: return;
    }
}

void UringWorker::on_recv(Conn& c, int res, unsigned flags) {
    if (!(flags & IORING_CQE_F_MORE)) c.recv_armed = false;
    if (flags & IORING_CQE_F_BUFFER) {
        const auto id = static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
        if (res > 0) {
            const std::int64_t now = now_ns();
            const bool alive =
                consume(c, {buffers_.buffer(id), static_cast<std::size_t>(res)}, now);
            buffers_.give_back(id);
            if (!alive) return;  // replaced: its cancel is on its way
            // The multishot recv ended (a full completion queue, say): again.
            if (!c.recv_armed) arm_recv(c);
            return fill(c, now);
        }
        buffers_.give_back(id);
    }
    if (res == 0) return at_eof(c, now_ns());
    if (res == -ENOBUFS) {
        // The buffers ran out in this batch; they are back before the
        // re-armed recv is submitted.
        if (!c.recv_armed) arm_recv(c);
        return;
    }
    if (res < 0) {
        // A reset (or any error of the socket) wakes the recv and a send in
        // flight alike, in an order the kernel chooses: with a send in
        // flight, the failure is the send's, which completes with it (the
        // socket's error, or EPIPE once the recv took that): counted there,
        // a write error as with epoll, whose send sees it first.
        if (c.send_busy) return;
        return fail(c, Error::read, errno_text(-res), now_ns());
    }
    if (!c.recv_armed) arm_recv(c);
}

void UringWorker::on_send(Conn& c, int res) {
    c.send_busy = false;
    if (res < 0) return fail(c, Error::write, errno_text(-res), now_ns());
    c.write_ptr += res;
    c.write_left -= static_cast<std::size_t>(res);
    // A short send: the rest, once the socket has room (io_uring waits for it).
    if (c.write_left) return start_send(c);
    // --rate: requests that fell due while the batch was on its way.
    if (open_loop_) fill(c, now_ns());
}

void UringWorker::on_poll(Conn& c, int res) {
    c.poll_busy = false;
    if (c.state != State::connecting) return;
    int err = 0;
    if (res < 0) {
        err = -res;
    } else {
        socklen_t len = sizeof err;
        if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
    const std::int64_t now = now_ns();
    if (err != 0) return fail(c, Error::connect, errno_text(err), now);
    opened(c, now);
}

}  // namespace

std::unique_ptr<LoadThread> make_uring_worker(const WorkerArgs& args) {
    return std::make_unique<UringWorker>(args);
}

}  // namespace sm::loadgen::detail
