#include "uring/probe.hpp"

#include <liburing.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string_view>

#include <fmt/core.h>

#include "runtime/posix/unique_fd.hpp"
#include "uring/ring.hpp"

namespace sm::uring {
namespace {

using runtime::UniqueFd;

// /proc/sys/kernel/io_uring_disabled (Linux 6.6): 0 allowed, 1 only for
// kernel.io_uring_group, 2 disabled. -1 when the file is absent.
int io_uring_disabled() {
    std::ifstream f("/proc/sys/kernel/io_uring_disabled");
    int v = -1;
    if (!(f >> v)) return -1;
    return v;
}

// Whether this process runs under a seccomp filter ("Seccomp: 2").
bool under_seccomp_filter() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("Seccomp:", 0) == 0) return line.find('2') != std::string::npos;
    }
    return false;
}

// Why an io_uring system call may have failed with `err`, as far as this
// machine lets us tell.
std::string hint(int err) {
    switch (err) {
        case EPERM: {
            const int disabled = io_uring_disabled();
            if (disabled == 2)
                return "disabled system-wide by the sysctl kernel.io_uring_disabled=2";
            if (disabled == 1) {
                return "the sysctl kernel.io_uring_disabled=1 allows it only to members of "
                       "kernel.io_uring_group";
            }
            if (under_seccomp_filter()) {
                return "denied by a seccomp filter, such as a container's default profile; "
                       "allow io_uring_setup, io_uring_enter and io_uring_register";
            }
            return "blocked by a seccomp filter, such as a container's default profile, or by "
                   "kernel.io_uring_disabled";
        }
        case ENOSYS:
            if (under_seccomp_filter()) {
                return "a seccomp filter answers ENOSYS for it, or the kernel has no io_uring";
            }
            return "the kernel has no io_uring: built without CONFIG_IO_URING, or older than 5.1";
        case ENOMEM:
            return "the rings need locked memory before Linux 5.12: raise RLIMIT_MEMLOCK "
                   "(ulimit -l), or free memory";
        case EINVAL: return "the kernel refused every ring setup tried: Linux 5.5 or later needed";
        case EMFILE:
        case ENFILE: return "out of file descriptors";
        default: return {};
    }
}

// The checks' refusals; probe() ends them with the caller's alternative.
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

// Every opcode server-uring's workers or loadgen's engine submit.
constexpr std::array<Opcode, 5> kOpcodes = {{
    {IORING_OP_POLL_ADD, "IORING_OP_POLL_ADD", "5.1"},
    {IORING_OP_ACCEPT, "IORING_OP_ACCEPT", "5.5"},
    {IORING_OP_ASYNC_CANCEL, "IORING_OP_ASYNC_CANCEL", "5.5"},
    {IORING_OP_SEND, "IORING_OP_SEND", "5.6"},
    {IORING_OP_RECV, "IORING_OP_RECV", "5.6"},
}};

std::optional<std::string> check_opcodes(Ring& ring) {
    // io_uring_get_probe_ring() would lose the errno: ask directly.
    constexpr unsigned kOps = 256;
    const std::size_t bytes = sizeof(io_uring_probe) + kOps * sizeof(io_uring_probe_op);
    auto storage = std::make_unique<std::uint64_t[]>((bytes + 7) / 8);
    auto* p = reinterpret_cast<io_uring_probe*>(storage.get());
    if (const int rc = io_uring_register_probe(ring.get(), p, kOps); rc < 0) {
        if (rc == -EINVAL)
            return unsupported("the kernel cannot list its opcodes (Linux 5.6 or later needed)");
        return unavailable("io_uring_register(IORING_REGISTER_PROBE)", -rc);
    }
    for (const Opcode& o : kOpcodes) {
        if (!io_uring_opcode_supported(p, o.op))
            return unsupported(
                fmt::format("the kernel lacks {} (Linux {} or later)", o.name, o.since));
    }
    return std::nullopt;
}

struct Completion {
    bool seen = false;   // the first completion of the request arrived
    bool ended = false;  // its last completion arrived (no IORING_CQE_F_MORE)
    int res = 0;
    unsigned flags = 0;
};

// Runs one multishot accept and one multishot recv with a provided buffer on
// local sockets: the only sure test of features whose absence shows as EINVAL
// at run time, not in the opcode list (backported kernels make version
// numbers unreliable).
std::optional<std::string> check_multishot(Ring& ring) {
    constexpr std::uint64_t kAccept = 1, kRecv = 2, kCancel = 3;
    UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!listener) return unavailable("socket(AF_UNIX)", errno);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    // Binding just the family autobinds an abstract name: no file, no clash.
    socklen_t len = sizeof(sa_family_t);
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener.get(), 4) != 0)
        return unavailable("bind/listen(AF_UNIX)", errno);
    len = sizeof addr;
    if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        return unavailable("getsockname(AF_UNIX)", errno);
    std::array<int, 2> pair{-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair.data()) != 0)
        return unavailable("socketpair", errno);
    const UniqueFd near(pair[0]), far(pair[1]);

    io_uring* r = ring.get();
    io_uring_sqe* s = ring.sqe();
    io_uring_prep_multishot_accept(s, listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(s, kAccept);
    s = ring.sqe();
    io_uring_prep_recv_multishot(s, near.get(), nullptr, 0, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = 0;
    io_uring_sqe_set_data64(s, kRecv);
    if (const int rc = io_uring_submit(r); rc < 0) return unavailable("io_uring_enter", -rc);

    UniqueFd client(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!client || ::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
        return unavailable("connect(AF_UNIX)", errno);
    if (::write(far.get(), "x", 1) != 1) return unavailable("write(socketpair)", errno);

    Completion accept, recv;
    UniqueFd accepted;
    bool cancel_sent = false;
    int cancels_pending = 0;
    while (!(accept.ended && recv.ended && cancels_pending == 0)) {
        if (accept.seen && recv.seen && !cancel_sent) {
            // Both answered: end whatever is still armed, then drain.
            cancel_sent = true;
            if (!accept.ended || !recv.ended) {
                s = ring.sqe();
                io_uring_prep_cancel64(s, 0, IORING_ASYNC_CANCEL_ANY);
                io_uring_sqe_set_data64(s, kCancel);
                ++cancels_pending;
            }
            continue;
        }
        // Bounded: two seconds without a completion is a failure.
        __kernel_timespec ts{.tv_sec = 2, .tv_nsec = 0};
        io_uring_cqe* cqe = nullptr;
        const int rc = io_uring_submit_and_wait_timeout(r, &cqe, 1, &ts, nullptr);
        if (rc == -ETIME) {
            return unsupported(
                "a multishot accept or recv on local sockets did not complete within 2 s");
        }
        if (rc < 0 && rc != -EINTR) return unavailable("io_uring_enter", -rc);
        unsigned head;
        unsigned n = 0;
        io_uring_for_each_cqe(r, head, cqe) {
            ++n;
            if (cqe->user_data == kCancel) {
                --cancels_pending;
                continue;
            }
            Completion& c = cqe->user_data == kAccept ? accept : recv;
            if (cqe->user_data == kAccept && cqe->res >= 0) {
                if (c.seen) {
                    ::close(cqe->res);
                } else {
                    accepted.reset(cqe->res);
                }
            }
            if (!c.seen) {
                c.seen = true;
                c.res = cqe->res;
                c.flags = cqe->flags;
            }
            if (!(cqe->flags & IORING_CQE_F_MORE)) c.ended = true;
        }
        io_uring_cq_advance(r, n);
    }

    if (accept.res == -EINVAL)
        return unsupported("multishot accept is not supported (Linux 5.19 or later needed)");
    if (accept.res < 0) return unavailable("multishot accept", -accept.res);
    if (!(accept.flags & IORING_CQE_F_MORE))
        return unsupported(
            "multishot accept ended after one connection (Linux 5.19 or later needed)");
    if (recv.res == -EINVAL)
        return unsupported("multishot recv is not supported (Linux 6.0 or later needed)");
    if (recv.res == -ENOBUFS || (recv.res >= 0 && !(recv.flags & IORING_CQE_F_BUFFER)))
        return unsupported("recv did not take a provided buffer (Linux 5.19 or later needed)");
    if (recv.res < 0) return unavailable("multishot recv", -recv.res);
    if (!(recv.flags & IORING_CQE_F_MORE))
        return unsupported("multishot recv ended after one completion (Linux 6.0 or later needed)");
    return std::nullopt;
}

// The checks in turn: the first refusal, without the caller's alternative.
std::optional<std::string> check(const ProbeOptions& options) {
    // Declared before the ring: the buffers outlive the registration.
    ProvidedBuffers buffers(2, 64);
    Ring ring;
    if (const int rc = ring.init(8, 16); rc < 0) return unavailable("io_uring_setup", -rc);
    // With EXT_ARG a wait passes its timeout to io_uring_enter itself:
    // loadgen's engine waits only so, and without it liburing would queue a
    // timeout request of its own that check_multishot() takes for its recv.
    if (!(ring.get()->features & IORING_FEAT_EXT_ARG))
        return unsupported("the kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11 or later needed)");
    if (auto why = check_opcodes(ring)) return why;
    if (const int rc = buffers.register_with(ring, 0); rc < 0) {
        if (rc == -EINVAL) {
            return unsupported(
                "provided buffer rings are not supported (Linux 5.19 or later needed)");
        }
        return unavailable("io_uring_register(IORING_REGISTER_PBUF_RING)", -rc);
    }
    if (auto why = check_multishot(ring)) return why;
    if (const int refused = ring.preferred_refused(); refused != 0 && options.note != nullptr) {
        options.note(
            fmt::format("io_uring: IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN refused ({}); using {} "
                        "(completion work then runs at any kernel entry, less batched)",
                        std::strerror(refused), ring.setup()));
    }
    return std::nullopt;
}

}  // namespace

std::optional<std::string> probe(const ProbeOptions& options) {
    std::optional<std::string> why;
    try {
        why = check(options);
    } catch (const std::exception& e) {
        why = fmt::format("io_uring unavailable: {}", e.what());
    }
    if (why && !options.alternative.empty()) *why += fmt::format("; {}", options.alternative);
    return why;
}

}  // namespace sm::uring
