// bench/floor's floor-uring: a measuring stick, not a server. The floor
// (respond.hpp: the same canned answers, the same /json rule, --spin-ns)
// moving its bytes the way server-uring does, because server-uring reads
// below the epoll floor (its CPU per request 0.64-0.73x floor's): against
// floor, its own cost over the I/O is invisible; against floor-uring, that
// cost is what is left. server-uring's I/O shape, and nothing more:
//   - one io_uring per thread, each with its own SO_REUSEPORT listener, set up
//     as server-uring's rings are (common/uring/server_shape.hpp: the sizes,
//     the setup flags, --uring-buffers);
//   - one multishot accept on the listener;
//   - one multishot recv per connection into the provided-buffer ring; a
//     buffer goes back to the ring as soon as its bytes are answered;
//   - the answers to a completion batch collect per connection and leave with
//     one IORING_OP_SEND per connection per submission (one send in flight);
//   - one io_uring_enter per loop iteration (io_uring_submit_and_wait)
//     submits everything and waits.
// Left out, as floor leaves it out: parsing, deadlines, the accept gate and
// --max-connections, holding back a client that does not read (its answers
// collect without bound). Where io_uring cannot run, it exits 1 with the
// reason, as server-uring does (the same probe).
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "respond.hpp"
#include "runtime/log.hpp"
#include "runtime/server.hpp"
#include "uring/probe.hpp"
#include "uring/ring.hpp"
#include "uring/server_shape.hpp"

namespace {

using namespace sm;
namespace shape = uring::server_shape;

// Aligned so that the low three bits of its address can tag the operation
// in a completion's user_data (shape::tag).
struct alignas(8) Conn {
    int fd = -1;  // -1 while free
    floor::Scan scan;
    std::string out;      // answers since the last send was submitted
    std::string sending;  // what the send in flight reads: untouched until it completes
    unsigned ops = 0;     // operations in flight (the recv, the send); closed when back to 0
    bool recv_armed = false;
    bool send_in_flight = false;
    bool peer_closed = false;  // EOF: closed once its answers are sent
    bool closing = false;      // cancelled: closed when ops reaches 0
};

// What a completion is for: server-uring's tags (shape::Op).
using enum shape::Op;
using shape::kOpMask;
using shape::tag;
constexpr auto conn_of = shape::connection_of<Conn>;

template <typename Respond>
class Loop {
  public:
    Loop(const runtime::WorkerContext& ctx, const Respond& respond)
        : listener_(ctx.listener),
          stop_(ctx.stop),
          respond_(respond),
          buffers_(shape::make_buffers(ctx.options)) {
        shape::set_up(ring_, buffers_);
    }

    // Until the stop signal, then until every operation has completed.
    void run() {
        prepare(kStop, [&](io_uring_sqe* s) { io_uring_prep_poll_add(s, stop_.handle(), POLLIN); });
        arm_accept();
        while (!(stopping_ && inflight_ == 0)) {
            if (const int rc = io_uring_submit_and_wait(ring_.get(), 1);
                rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
                throw std::system_error(-rc, std::generic_category(), "io_uring_enter");
            uring::reap(ring_, buffers_, [this](std::uint64_t data, int res, unsigned flags) {
                complete(data, res, flags);
            });
            // After the whole batch: one send per connection for all of it.
            for (Conn* c : marked_)
                flush(*c);
            marked_.clear();
        }
    }

  private:
    template <typename Prep>
    void prepare(std::uint64_t user_data, Prep&& prep) {
        io_uring_sqe* s = ring_.sqe();
        prep(s);
        io_uring_sqe_set_data64(s, user_data);
        ++inflight_;
    }

    void complete(std::uint64_t user_data, int res, unsigned flags) {
        switch (user_data & kOpMask) {
            case kIgnore: --inflight_; return;  // a cancel: the cancelled request reports itself
            case kStop: --inflight_; return begin_stop();
            case kAccept: return on_accept(res, flags);
            case kRecv: return on_recv(conn_of(user_data), res, flags);
            case kSend: return on_send(conn_of(user_data), res);
            default: return;
        }
    }

    void arm_accept() {
        // Accepted sockets stay blocking, as server-uring's: io_uring tries
        // every recv and send without waiting anyway.
        prepare(kAccept, [&](io_uring_sqe* s) {
            io_uring_prep_multishot_accept(s, listener_.handle(), nullptr, nullptr, SOCK_CLOEXEC);
        });
        accept_armed_ = true;
    }

    void on_accept(int res, unsigned flags) {
        if (!(flags & IORING_CQE_F_MORE)) {
            accept_armed_ = false;
            --inflight_;
        }
        if (res >= 0) {
            if (stopping_)
                ::close(res);
            else
                open(res);
        }
        // A multishot accept ends on any error: another one.
        if (!accept_armed_ && !stopping_) arm_accept();
    }

    void open(int fd) {
        runtime::set_nodelay(fd);
        const auto slot = static_cast<std::size_t>(fd);
        if (slot >= conns_.size()) conns_.resize(slot + 1);
        if (!conns_[slot]) conns_[slot] = std::make_unique<Conn>();
        Conn& c = *conns_[slot];  // a closed one's strings keep their capacity
        c.fd = fd;
        c.scan = {};
        c.peer_closed = false;
        arm_recv(c);
    }

    void arm_recv(Conn& c) {
        prepare(tag(c, kRecv), [&](io_uring_sqe* s) { shape::prep_recv(s, c.fd, true); });
        c.recv_armed = true;
        ++c.ops;
    }

    void on_recv(Conn& c, int res, unsigned flags) {
        if (!(flags & IORING_CQE_F_MORE)) {
            c.recv_armed = false;
            --c.ops;
            --inflight_;
        }
        if (flags & IORING_CQE_F_BUFFER) {
            const auto id = static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
            if (res > 0 && !c.closing)
                respond_(std::string_view(buffers_.buffer(id), static_cast<std::size_t>(res)),
                         c.scan, c.out);
            buffers_.give_back(id);
        }
        if (c.closing) {
            if (c.ops == 0) finalize(c);
            return;
        }
        if (res == 0) {
            c.peer_closed = true;  // flush() closes once the answers are sent
        } else if (res < 0 && res != -ENOBUFS) {
            return close_now(c);  // ECONNRESET and friends: nobody to answer
        }
        // ENOBUFS: the ring ran dry in this batch; it grows (as server-uring's
        // does), and flush() re-arms the recv once the batch's buffers are back.
        if (res == -ENOBUFS) (void)buffers_.grow();
        marked_.push_back(&c);
    }

    void on_send(Conn& c, int res) {
        c.send_in_flight = false;
        --c.ops;
        --inflight_;
        if (c.closing) {
            if (c.ops == 0) finalize(c);
            return;
        }
        if (res < 0) return close_now(c);  // EPIPE, ECONNRESET
        // Rarely short: the rest goes first in the next send.
        c.sending.erase(0, static_cast<std::size_t>(res));
        marked_.push_back(&c);
    }

    void flush(Conn& c) {
        if (c.fd < 0 || c.closing) return;
        if (!c.send_in_flight) {
            if (c.sending.empty()) {
                std::swap(c.sending, c.out);  // the usual case: no copy
            } else {
                c.sending += c.out;
                c.out.clear();
            }
            if (!c.sending.empty()) {
                prepare(tag(c, kSend), [&](io_uring_sqe* s) {
                    io_uring_prep_send(s, c.fd, c.sending.data(), c.sending.size(), MSG_NOSIGNAL);
                });
                c.send_in_flight = true;
                ++c.ops;
            } else if (c.peer_closed) {
                return close_now(c);
            }
        }
        if (!c.recv_armed && !c.peer_closed) arm_recv(c);
    }

    void close_now(Conn& c) {
        if (c.closing) return;
        c.closing = true;
        if (c.ops == 0) return finalize(c);
        // One cancel for the recv and the send alike; each reports its own
        // end, and the last one finalizes. The descriptor stays open until
        // then, so the cancel cannot reach a successor.
        prepare(kIgnore,
                [&](io_uring_sqe* s) { io_uring_prep_cancel_fd(s, c.fd, IORING_ASYNC_CANCEL_ALL); });
    }

    void finalize(Conn& c) {
        ::close(c.fd);
        c.fd = -1;
        c.out.clear();
        c.sending.clear();
        c.recv_armed = c.send_in_flight = c.closing = false;
    }

    void begin_stop() {
        stopping_ = true;
        if (accept_armed_)
            prepare(kIgnore, [](io_uring_sqe* s) { io_uring_prep_cancel64(s, kAccept, 0); });
        listener_.close();
        for (auto& c : conns_)
            if (c && c->fd >= 0) close_now(*c);
    }

    runtime::Listener& listener_;
    const runtime::StopSignal& stop_;
    const Respond& respond_;
    std::vector<std::unique_ptr<Conn>> conns_;  // by descriptor
    std::vector<Conn*> marked_;                 // to flush after the batch
    std::size_t inflight_ = 0;  // submitted operations whose last completion is due
    bool accept_armed_ = false;
    bool stopping_ = false;
    // Declared before the ring, so that they outlive it: the kernel may
    // write into them until the ring is torn down.
    uring::ProvidedBuffers buffers_;
    uring::Ring ring_;
};

void run_worker(const runtime::WorkerContext& ctx) {
    floor::with_spin(ctx, [&](const auto& respond) {
        Loop<std::decay_t<decltype(respond)>>(ctx, respond).run();
    });
}

// server-uring's probe, with the floor's way out.
std::optional<std::string> probe(const runtime::ServerOptions& /*options*/) {
    return uring::probe({.alternative = "floor (bench/floor, on epoll) answers the same without it",
                         .note = &runtime::log});
}

}  // namespace

int main(int argc, char** argv) {
    static constexpr runtime::ModelOption kOptions[] = {floor::kSpinNs, shape::kUringBuffers};
    static const std::string description = floor::describe(
        "with server-uring's I/O: multishot accept, multishot recv into provided buffers, one "
        "send per connection per completion batch, one io_uring_enter per loop iteration");
    const runtime::Model model{.name = "floor-uring",
                               .worker = &run_worker,
                               .probe = &probe,
                               .options = kOptions,
                               .description = description,
                               .program = "floor-uring"};
    return runtime::serve(model, argc, argv);
}
