// server-uring's I/O shape: the sizes of a worker's ring and provided
// buffers, its --uring-buffers option, and setting both up. bench/floor's
// floor-uring sets its rings up from here too, so that the floor measured
// against server-uring keeps the server's shape when these numbers change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <system_error>

#include "runtime/options.hpp"
#include "uring/ring.hpp"

namespace sm::uring::server_shape {

// Submission slots: one loop iteration submits about one SQE per connection
// that had traffic (its send, maybe a recv re-arm); a fuller batch is
// submitted early by Ring::sqe(), so this bounds nothing but the syscall count.
inline constexpr unsigned kSqEntries = 1024;
// Completion slots: multishot requests post without a submission each, so
// the queue is sized well above the submission queue. An overflow would cost
// the kernel an allocation per completion and end multishot requests early.
inline constexpr unsigned kCqEntries = 8192;
// Provided buffers per thread, at most (--uring-buffers, default 1024). A multishot
// recv takes one per completion and the loop returns it as soon as its bytes
// are fed, so every buffer is back in the ring at the end of each batch: the
// count bounds the recv completions one batch can hold before some
// connection sees ENOBUFS (then its recv is re-armed after the batch, which
// costs one SQE). 1024 covers one completion for each of the 256-1024 busy
// connections a benchmark keeps per thread. 8 KiB holds a 16-deep pipelined
// batch (about 1 KiB) many times over and a typical request head whole;
// larger bodies take several completions. The memory is 8 MiB of address
// space per thread; the ring starts with 32 buffers (256 KiB, resident) and
// doubles each time it runs dry (ProvidedBuffers::grow), so it holds what
// the load keeps in flight: a server at rest is 4.8 MiB, not 12.8.
inline constexpr std::size_t kBufferSize = 8 * 1024;
inline constexpr std::uint16_t kBufferGroup = 0;
inline constexpr runtime::ModelOption kUringBuffers{
    .name = "uring-buffers",
    .help =
        "Provided receive buffers (8 KiB each) per thread's io_uring, at most: 32 at start, "
        "doubled each time the ring runs dry, resident as they are added; a power of two. Too "
        "few for the busy connections and recvs wait for the next batch",
    .value = 1024,
    .max = 32768,
    .power_of_two = true};

// The provided buffers --uring-buffers asks for.
inline ProvidedBuffers make_buffers(const runtime::ServerOptions& options) {
    return ProvidedBuffers(static_cast<unsigned>(options.model_option(kUringBuffers.name)),
                           kBufferSize);
}

// Sets `ring` up and registers `buffers` with it as group kBufferGroup. Called
// on the worker thread: with SINGLE_ISSUER it is the only thread that may
// submit to the ring. Throws std::system_error.
inline void set_up(Ring& ring, ProvidedBuffers& buffers) {
    if (const int rc = ring.init(kSqEntries, kCqEntries); rc < 0)
        throw std::system_error(-rc, std::generic_category(), "io_uring_setup");
    if (const int rc = buffers.register_with(ring, kBufferGroup); rc < 0)
        throw std::system_error(-rc, std::generic_category(), "io_uring_register_buf_ring");
}

// A completion's user_data for an operation on a connection: the
// connection's address, aligned to 8 (alignas(8) on its type), with what the
// operation is (a value below 8) in the three low bits.
inline constexpr std::uint64_t kOpMask = 7;

// What a completion is for: the low bits of its user_data. recv and send
// carry the connection's address in the other bits (tag). A model with more
// kinds of request numbers them from kFirstOwnOp up to kOpMask.
enum Op : std::uint64_t { kIgnore = 0, kRecv = 1, kSend = 2, kAccept = 3, kStop = 4 };
inline constexpr std::uint64_t kFirstOwnOp = 5;

template <typename Connection>
std::uint64_t tag(Connection& c, std::uint64_t op) noexcept {
    static_assert(alignof(Connection) > kOpMask);
    return reinterpret_cast<std::uintptr_t>(&c) | op;
}

template <typename Connection>
Connection& connection_of(std::uint64_t user_data) noexcept {
    return *reinterpret_cast<Connection*>(static_cast<std::uintptr_t>(user_data & ~kOpMask));
}

// Prepares in `s` a recv on `fd` that takes its buffer from the group: a
// multishot one (a completion per buffer filled, until it ends), or one that
// completes once, with one buffer.
inline void prep_recv(io_uring_sqe* s, int fd, bool multishot) noexcept {
    if (multishot) {
        io_uring_prep_recv_multishot(s, fd, nullptr, 0, 0);
    } else {
        io_uring_prep_recv(s, fd, nullptr, kBufferSize, 0);
    }
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = kBufferGroup;
}

}  // namespace sm::uring::server_shape
