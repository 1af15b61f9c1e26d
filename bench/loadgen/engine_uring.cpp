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
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/core.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "worker.hpp"

namespace sm::loadgen::detail {
namespace {

// ---------------------------------------------------------------- the ring

struct FlagSet {
    unsigned flags;
    std::string_view name;
};

// As server-uring (servers/uring/ring.cpp): the preferred set first, then what
// older kernels accept. CQSIZE: multishot requests post many completions per
// submission; CLAMP: a kernel with lower limits shrinks the sizes.
constexpr unsigned kSizing = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
constexpr std::array<FlagSet, 3> kFlagSets = {{
    {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL | kSizing,
     "single-issuer+defer-taskrun"},
    {IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL | kSizing,
     "coop-taskrun"},
    {kSizing, "basic"},
}};

class Ring {
  public:
    Ring() noexcept = default;
    ~Ring() {
        if (live_) io_uring_queue_exit(&ring_);
    }
    Ring(const Ring&) = delete;
    Ring& operator=(const Ring&) = delete;

    // 0, or the negative errno of the last flag set tried.
    int init(unsigned sq_entries, unsigned cq_entries) noexcept {
        int err = -EINVAL;
        for (const FlagSet& set : kFlagSets) {
            io_uring_params params{};
            params.flags = set.flags;
            params.cq_entries = cq_entries;
            err = io_uring_queue_init_params(sq_entries, &ring_, &params);
            if (err == 0) {
                live_ = true;
                // Saves the ring fd lookup on every io_uring_enter (5.18; optional).
                (void)io_uring_register_ring_fd(&ring_);
                return 0;
            }
            // EINVAL: this kernel does not know a flag; anything else (EPERM,
            // ENOSYS, ENOMEM) fails every set alike.
            if (err != -EINVAL) break;
        }
        return err;
    }
    [[nodiscard]] io_uring* get() noexcept { return &ring_; }

  private:
    io_uring ring_{};
    bool live_ = false;
};

// `count` buffers of `size` bytes handed to the kernel through a buffer ring
// (mapped here: liburing 2.3 has no io_uring_setup_buf_ring).
class Buffers {
  public:
    Buffers(unsigned count, std::size_t size)
        : count_(count), size_(size), mask_(io_uring_buf_ring_mask(count)) {
        ring_bytes_ = count * sizeof(io_uring_buf);
        void* r = ::mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE,
                         -1, 0);
        if (r == MAP_FAILED)
            throw std::system_error(errno, std::generic_category(), "mmap(buffer ring)");
        ring_ = static_cast<io_uring_buf_ring*>(r);
        data_bytes_ = count * size;
        void* d = ::mmap(nullptr, data_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE,
                         -1, 0);
        if (d == MAP_FAILED) {
            const int err = errno;
            ::munmap(ring_, ring_bytes_);
            throw std::system_error(err, std::generic_category(), "mmap(provided buffers)");
        }
        data_ = static_cast<char*>(d);
        io_uring_buf_ring_init(ring_);
    }
    ~Buffers() {
        // Declared before the ring that registered them: the kernel is done with them.
        ::munmap(data_, data_bytes_);
        ::munmap(ring_, ring_bytes_);
    }
    Buffers(const Buffers&) = delete;
    Buffers& operator=(const Buffers&) = delete;

    // Registers as buffer group `group` and hands every buffer to the kernel.
    // 0 or a negative errno (EINVAL: kernel older than 5.19).
    int register_with(Ring& ring, std::uint16_t group) noexcept {
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<std::uintptr_t>(ring_);
        reg.ring_entries = count_;
        reg.bgid = group;
        if (const int rc = io_uring_register_buf_ring(ring.get(), &reg, 0); rc < 0) return rc;
        for (unsigned i = 0; i < count_; ++i)
            give_back(static_cast<std::uint16_t>(i));
        publish();
        return 0;
    }
    [[nodiscard]] char* buffer(std::uint16_t id) const noexcept {
        return data_ + static_cast<std::size_t>(id) * size_;
    }
    // Queues buffer `id` for return; the kernel sees it after publish().
    void give_back(std::uint16_t id) noexcept {
        io_uring_buf_ring_add(ring_, buffer(id), static_cast<unsigned>(size_), id, mask_, pending_);
        ++pending_;
    }
    void publish() noexcept {
        if (pending_ == 0) return;
        io_uring_buf_ring_advance(ring_, pending_);
        pending_ = 0;
    }

  private:
    unsigned count_;
    std::size_t size_;
    int mask_;
    int pending_ = 0;
    io_uring_buf_ring* ring_ = nullptr;
    std::size_t ring_bytes_ = 0;
    char* data_ = nullptr;
    std::size_t data_bytes_ = 0;
};

// ---------------------------------------------------------------- the probe

// /proc/sys/kernel/io_uring_disabled (Linux 6.6): -1 when absent.
int io_uring_disabled() {
    std::ifstream f("/proc/sys/kernel/io_uring_disabled");
    int v = -1;
    if (!(f >> v)) return -1;
    return v;
}

bool under_seccomp_filter() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("Seccomp:", 0) == 0) return line.find('2') != std::string::npos;
    return false;
}

std::string hint(int err) {
    switch (err) {
        case EPERM: {
            const int disabled = io_uring_disabled();
            if (disabled == 2) return "disabled system-wide by kernel.io_uring_disabled=2";
            if (disabled == 1)
                return "kernel.io_uring_disabled=1 allows it only to kernel.io_uring_group";
            if (under_seccomp_filter())
                return "denied by a seccomp filter, such as a container's default profile";
            return "blocked by a seccomp filter or by kernel.io_uring_disabled";
        }
        case ENOSYS: return "the kernel has no io_uring, or a seccomp filter hides it";
        case ENOMEM: return "raise RLIMIT_MEMLOCK (ulimit -l) before Linux 5.12, or free memory";
        case EMFILE:
        case ENFILE: return "out of file descriptors";
        default: return {};
    }
}

std::string unavailable(std::string_view what, int err) {
    const std::string why = hint(err);
    return fmt::format("io_uring unavailable: {}: {}{}{}{}", what, std::strerror(err),
                       why.empty() ? "" : " (", why, why.empty() ? "" : ")");
}

std::string unsupported(std::string_view what) {
    return fmt::format("io_uring unavailable: {}", what);
}

struct Opcode {
    io_uring_op op;
    std::string_view name;
    std::string_view since;
};

// Every opcode the engine submits.
constexpr std::array<Opcode, 4> kOpcodes = {{
    {IORING_OP_POLL_ADD, "IORING_OP_POLL_ADD", "5.1"},
    {IORING_OP_ASYNC_CANCEL, "IORING_OP_ASYNC_CANCEL", "5.5"},
    {IORING_OP_SEND, "IORING_OP_SEND", "5.6"},
    {IORING_OP_RECV, "IORING_OP_RECV", "5.6"},
}};

std::optional<std::string> check_opcodes(Ring& ring) {
    constexpr unsigned kOps = 256;
    const std::size_t bytes = sizeof(io_uring_probe) + kOps * sizeof(io_uring_probe_op);
    auto storage = std::make_unique<std::uint64_t[]>((bytes + 7) / 8);
    auto* p = reinterpret_cast<io_uring_probe*>(storage.get());
    if (const int rc = io_uring_register_probe(ring.get(), p, kOps); rc < 0) {
        if (rc == -EINVAL)
            return unsupported("the kernel cannot list its opcodes (Linux 5.6 or later needed)");
        return unavailable("io_uring_register(IORING_REGISTER_PROBE)", -rc);
    }
    for (const Opcode& o : kOpcodes)
        if (!io_uring_opcode_supported(p, o.op))
            return unsupported(
                fmt::format("the kernel lacks {} (Linux {} or later)", o.name, o.since));
    return std::nullopt;
}

// One multishot recv with a provided buffer on a socket pair: features whose
// absence shows only at run time (EINVAL), whatever the version says.
std::optional<std::string> check_multishot_recv(Ring& ring) {
    std::array<int, 2> pair{-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair.data()) != 0)
        return unavailable("socketpair", errno);
    struct Closer {
        std::array<int, 2>& fds;
        ~Closer() {
            ::close(fds[0]);
            ::close(fds[1]);
        }
    } closer{pair};
    io_uring* r = ring.get();
    io_uring_sqe* s = io_uring_get_sqe(r);
    io_uring_prep_recv_multishot(s, pair[0], nullptr, 0, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = 0;
    io_uring_sqe_set_data64(s, 1);
    if (const int rc = io_uring_submit(r); rc < 0) return unavailable("io_uring_enter", -rc);
    if (::write(pair[1], "x", 1) != 1) return unavailable("write(socketpair)", errno);
    __kernel_timespec ts{.tv_sec = 2, .tv_nsec = 0};
    io_uring_cqe* cqe = nullptr;
    int rc;
    do {
        rc = io_uring_wait_cqe_timeout(r, &cqe, &ts);
    } while (rc == -EINTR);
    if (rc == -ETIME)
        return unsupported("a multishot recv on a socket pair did not complete in 2 s");
    if (rc < 0) return unavailable("io_uring_enter", -rc);
    const int res = cqe->res;
    const unsigned flags = cqe->flags;
    io_uring_cqe_seen(r, cqe);
    if (res == -EINVAL)
        return unsupported("multishot recv is not supported (Linux 6.0 or later needed)");
    if (res == -ENOBUFS || (res >= 0 && !(flags & IORING_CQE_F_BUFFER)))
        return unsupported("recv did not take a provided buffer (Linux 5.19 or later needed)");
    if (res < 0) return unavailable("multishot recv", -res);
    if (!(flags & IORING_CQE_F_MORE))
        return unsupported("multishot recv ended after one completion (Linux 6.0 or later needed)");
    return std::nullopt;  // the ring's teardown cancels the recv
}

// ---------------------------------------------------------------- the engine

// Completions taken from the queue per peek.
constexpr unsigned kCqeBatch = 256;
// Provided buffers: a multishot recv takes one per completion, and each is
// back in the ring at the end of the batch that framed it, so the count
// bounds the recv completions of one batch (beyond it a recv sees ENOBUFS
// and is re-armed after the batch). Responses are small: 16 KiB holds a
// pipelined batch of them many times over.
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
                   kBufferSize) {}
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
    void reap();
    void complete(std::uint64_t user_data, int res, unsigned flags);
    void on_recv(Conn& c, int res, unsigned flags);
    void on_send(Conn& c, int res);
    void on_poll(Conn& c, int res);

    // Declared before the ring: the kernel may write into them until it is torn down.
    Buffers buffers_;
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
    io_uring_sqe* s = io_uring_get_sqe(ring_.get());
    if (s != nullptr) return s;
    // The queue is full: hand what it holds to the kernel to make room.
    buffers_.publish();
    const int rc = io_uring_submit(ring_.get());
    s = io_uring_get_sqe(ring_.get());
    if (s == nullptr)
        throw std::system_error(rc < 0 ? -rc : EBUSY, std::generic_category(),
                                "io_uring_submit (submission queue full)");
    return s;
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
    reap();
}

void UringWorker::reap() {
    io_uring_cqe* cqes[kCqeBatch];
    while (const unsigned n = io_uring_peek_batch_cqe(ring_.get(), cqes, kCqeBatch)) {
        for (unsigned i = 0; i < n; ++i)
            complete(cqes[i]->user_data, cqes[i]->res, cqes[i]->flags);
        io_uring_cq_advance(ring_.get(), n);
        // Buffers framed in this batch go back to the kernel in one store.
        buffers_.publish();
    }
}

void UringWorker::complete(std::uint64_t user_data, int res, unsigned flags) {
    if (user_data == LIBURING_UDATA_TIMEOUT) return;
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
    if (res < 0) return fail(c, Error::read, errno_text(-res), now_ns());
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

std::optional<std::string> probe_uring() {
    try {
        // Declared before the ring: the buffers outlive the registration.
        Buffers buffers(2, 4096);
        Ring ring;
        if (const int rc = ring.init(8, 16); rc < 0) return unavailable("io_uring_setup", -rc);
        if (!(ring.get()->features & IORING_FEAT_EXT_ARG))
            return unsupported("the kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11 or later needed)");
        if (auto why = check_opcodes(ring)) return why;
        if (const int rc = buffers.register_with(ring, kBufferGroup); rc < 0) {
            if (rc == -EINVAL)
                return unsupported(
                    "provided buffer rings are not supported (Linux 5.19 or later needed)");
            return unavailable("io_uring_register(IORING_REGISTER_PBUF_RING)", -rc);
        }
        if (auto why = check_multishot_recv(ring)) return why;
    } catch (const std::exception& e) {
        return fmt::format("io_uring unavailable: {}", e.what());
    }
    return std::nullopt;
}

std::unique_ptr<LoadThread> make_uring_worker(const WorkerArgs& args) {
    return std::make_unique<UringWorker>(args);
}

}  // namespace sm::loadgen::detail
