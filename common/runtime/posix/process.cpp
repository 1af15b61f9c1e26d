// The POSIX side of runtime/platform.hpp: stop signals, the stop eventfd,
// handles, error codes, the lingering close.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>

#include "runtime/platform.hpp"

namespace sm::runtime {
namespace {

sigset_t stop_set() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    return set;
}

}  // namespace

void close_handle(NativeHandle h) noexcept {
    if (h != kNoHandle) ::close(h);
}

StopSignal::StopSignal() : h_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (h_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

StopSignal::~StopSignal() {
    close_handle(h_);
}

void StopSignal::request() noexcept {
    requested_.store(true, std::memory_order_release);
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(h_, &one, sizeof one);
}

void prepare_process() {
#ifdef M_MMAP_THRESHOLD
    // Buffers grown by a backlog (a client that pipelines without reading)
    // are freed once drained; with glibc's dynamic threshold they come from
    // the heap after the first such free and stay in it, fragmented: a soak
    // of 300 such clients at a time took server-uring from 5 MiB to 150 and
    // kept it there. A fixed threshold maps every block of 128 KiB or more
    // and gives it back when freed (there: 22 MiB, flat over rounds).
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
    // A write to a reset connection returns EPIPE instead of killing us.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, nullptr);
    // SIGINT and SIGTERM are blocked in every thread (they inherit the mask)
    // and taken synchronously by wait_for_stop().
    const sigset_t set = stop_set();
    if (const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0)
        throw std::system_error(rc, std::generic_category(), "pthread_sigmask");
}

std::string_view wait_for_stop() {
    const sigset_t set = stop_set();
    while (true) {
        int sig = 0;
        const int rc = sigwait(&set, &sig);
        if (rc == 0) return sig == SIGINT ? "SIGINT" : "SIGTERM";
        if (rc != EINTR) throw std::system_error(rc, std::generic_category(), "sigwait");
    }
}

void request_stop_from_thread() noexcept {
    ::kill(::getpid(), SIGTERM);
}

AcceptError classify_accept_error(int err) noexcept {
    switch (err) {
        case EAGAIN: return AcceptError::again;
        // One connection's failure, not the listener's: the next may be queued.
        case EINTR:
        case ECONNABORTED:  // the client gave up while queued
        case ECONNRESET:
        case EPERM:  // a firewall rule refused it
        // Errors already pending on the new connection, which accept(2)
        // says to treat like EAGAIN: "ENETDOWN, EPROTO, ENOPROTOOPT,
        // EHOSTDOWN, ENONET, EHOSTUNREACH, EOPNOTSUPP, and ENETUNREACH" for
        // TCP/IP; ETIMEDOUT is among those it says some kernels return.
        case ENETDOWN:
        case EPROTO:
        case ENOPROTOOPT:
        case EHOSTDOWN:
        case ENONET:
        case EHOSTUNREACH:
        case EOPNOTSUPP:
        case ENETUNREACH:
        case ETIMEDOUT: return AcceptError::skip;
        case EMFILE:  // the process's descriptor table is full
        case ENFILE:  // the system's
        case ENOBUFS:
        case ENOMEM:
        case ENOSPC:  // epoll_ctl adding an accepted connection: max_user_watches reached
            return AcceptError::exhausted;
        default:  // EBADF, EINVAL, ENOTSOCK, EFAULT: not a client's doing, nor a shortage
            return AcceptError::unknown;
    }
}

std::string error_text(int err) {
    return std::strerror(err);
}

bool start_lingering_close(NativeHandle socket, std::chrono::milliseconds timeout) noexcept {
    return timeout.count() != 0 && ::shutdown(socket, SHUT_WR) == 0;
}

std::size_t unsent_output(NativeHandle socket) noexcept {
    int queued = 0;
    if (::ioctl(socket, SIOCOUTQ, &queued) != 0 || queued < 0) return 0;
    return static_cast<std::size_t>(queued);
}

}  // namespace sm::runtime
