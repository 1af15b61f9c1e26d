#include "runtime/signals.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

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

void block_stop_signals() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, nullptr);
    const sigset_t set = stop_set();
    if (const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0)
        throw std::system_error(rc, std::generic_category(), "pthread_sigmask");
}

int wait_for_stop_signal() {
    const sigset_t set = stop_set();
    while (true) {
        int sig = 0;
        const int rc = sigwait(&set, &sig);
        if (rc == 0) return sig;
        if (rc != EINTR) throw std::system_error(rc, std::generic_category(), "sigwait");
    }
}

void request_stop_from_thread() noexcept {
    ::kill(::getpid(), SIGTERM);
}

}  // namespace sm::runtime
